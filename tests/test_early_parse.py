"""PyTorch traces parsed by a child forked while the command line starts (ingest/kineto/early_parse.py) give the
store, and the errors, of a parse in one process; a parse nobody claims is ended."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from kineto_stores import broken, ingested
from nsight_advisor.common.errors import InputError
from nsight_advisor.ingest.kineto import early_parse, parallel_parse


@pytest.fixture(autouse=True)
def forkable(monkeypatch):
    """A child can be forked (an earlier test's thread may linger in the suite's process; CI may have one core),
    and the ingest's own fork (parallel_parse) never happens: what is parsed in a child here is the early parse's."""
    monkeypatch.setattr(early_parse, "can_fork", lambda: True)
    monkeypatch.setattr(parallel_parse, "MIN_FORK_BYTES", 1 << 62)


@pytest.fixture
def finished(monkeypatch) -> list[dict]:
    """For each early parse claimed: how many traces the child sent, how many this process parsed from the
    tickets, and which the ingest parsed itself (``parse_one``)."""
    seen: list[dict] = []
    real_finish, real_taken = early_parse.EarlyParse.finish, early_parse._parse_taken

    def finish(self, ing, items, parse_one, done):
        row = {"here": 0, "parse_one": []}
        seen.append(row)

        def taken(paths, tickets):
            got = real_taken(paths, tickets)
            row["here"] += len(got)
            return got

        def one(cid, path):
            row["parse_one"].append(path.name)
            parse_one(cid, path)

        with pytest.MonkeyPatch.context() as m:
            m.setattr(early_parse, "_parse_taken", taken)
            real_finish(self, ing, items, one, done)

    monkeypatch.setattr(early_parse.EarlyParse, "finish", finish)
    return seen


def _store(items, *, early: bool, paths=None) -> dict:
    with early_parse.parsing_early((paths if paths is not None else [p for _, p in items]) if early else ()):
        return ingested(items)


def _error(items, *, early: bool) -> str:
    with pytest.raises(InputError) as info:
        _store(items, early=early)
    return str(info.value)


def _no_child_left() -> None:
    with pytest.raises(ChildProcessError):
        os.waitpid(-1, os.WNOHANG)  # no child of this process is left to reap


def test_the_dlrm_ranks_parsed_early_give_the_store_of_one_process(dlrm_ranks, finished):
    items = list(enumerate(dlrm_ranks, start=1))
    early = _store(items, early=True)
    assert len(finished) == 1 and finished[0]["parse_one"] == []  # every trace came from a parse in a child or here
    assert early == _store(items, early=False)
    assert len(finished) == 1  # the ingest without an early parse claimed none
    assert len(early["kernels"]) > 1000 and {r[0] for r in early["kernels"]} == set(range(1, 9))
    _no_child_left()


def test_capture_ids_are_the_ingests_not_the_order_of_the_parse(dlrm_ranks, finished):
    items = list(zip((7, 9, 12), dlrm_ranks[:3]))  # a store that already holds captures 1 to 6, say
    assert _store(items, early=True) == _store(items, early=False)
    assert finished[0]["parse_one"] == []


def test_an_unreadable_trace_raises_what_one_process_raises(dlrm_ranks, tmp_path, finished):
    first = broken(tmp_path, dlrm_ranks[1], "second.pt.trace.json.gz")
    last = broken(tmp_path, dlrm_ranks[3], "fourth.pt.trace.json.gz")
    items = list(enumerate([dlrm_ranks[0], first, dlrm_ranks[2], last], start=1))
    message = _error(items, early=True)
    assert finished[0]["parse_one"] == ["second.pt.trace.json.gz"]  # the first it could not read, read here
    assert message == _error(items, early=False)
    assert message.startswith(str(first))
    _no_child_left()


def _in_the_child(monkeypatch, tmp_path: Path, then) -> None:
    """``parse_trace`` calls ``then()`` in the child, on the first trace it takes; this process parses only once
    the child has taken one (so that the child's share is never empty)."""
    parent, real, taken = os.getpid(), early_parse.parse_trace, tmp_path / "child-took-one"

    def parse_trace(path, *args):
        if os.getpid() != parent:
            taken.touch()
            then()
        deadline = time.monotonic() + 10
        while not taken.exists() and time.monotonic() < deadline:
            time.sleep(0.005)
        return real(path, *args)

    monkeypatch.setattr(early_parse, "parse_trace", parse_trace)


def test_a_child_that_fails_leaves_the_parse_to_this_process(dlrm_ranks, tmp_path, monkeypatch, finished):
    items = list(enumerate(dlrm_ranks[:4], start=1))
    one = _store(items, early=False)
    _in_the_child(monkeypatch, tmp_path, lambda: os._exit(3))  # dies before sending anything
    assert _store(items, early=True) == one
    assert finished[0]["here"] == 3 and len(finished[0]["parse_one"]) == 1  # the child's one, parsed by the ingest
    _no_child_left()


def test_a_child_that_hangs_is_ended_and_its_trace_parsed_here(dlrm_ranks, tmp_path, monkeypatch, finished):
    items = list(enumerate(dlrm_ranks[:4], start=1))
    one = _store(items, early=False)
    _in_the_child(monkeypatch, tmp_path, lambda: time.sleep(3600))
    monkeypatch.setattr(early_parse, "WAIT_FACTOR", 0)
    monkeypatch.setattr(early_parse, "WAIT_MIN_S", 0.5)
    assert _store(items, early=True) == one
    assert len(finished[0]["parse_one"]) == 1 and finished[0]["here"] == 3
    _no_child_left()


def test_rows_beyond_the_bound_are_left_to_the_streaming_parse(dlrm_ranks, monkeypatch, finished):
    items = list(enumerate(dlrm_ranks[:4], start=1))
    one = _store(items, early=False)
    rows = [sum(len(b) for _, _, b in early_parse.parse_trace(path).batches) for path in dlrm_ranks[:4]]
    assert early_parse.parse_trace(dlrm_ranks[0], rows[0] - 1) is None  # a trace of more rows than allowed
    # room for one trace a process: each parses one, then the ingest streams the two left (a gzip bomb's fate)
    monkeypatch.setattr(early_parse, "MAX_HELD_ROWS", max(rows) + 1)
    assert _store(items, early=True) == one
    assert finished[0]["here"] <= 2 and len(finished[0]["parse_one"]) >= 2
    assert finished[0]["here"] + len(finished[0]["parse_one"]) <= 4  # the child parsed at least one
    _no_child_left()


def test_a_parse_of_other_traces_is_ended_unclaimed(dlrm_ranks, finished):
    items = list(enumerate(dlrm_ranks[:3], start=1))
    assert _store(items, early=True, paths=dlrm_ranks[:4]) == _store(items, early=False)
    assert finished == []
    _no_child_left()


def test_an_unclaimed_parse_is_ended_on_leaving(dlrm_ranks):
    with early_parse.parsing_early(dlrm_ranks):
        child = early_parse._pending.child
        assert not child.done
    assert child.done and early_parse._pending is None
    _no_child_left()


def test_what_is_parsed_early(dlrm_ranks, tmp_path, monkeypatch):
    def started(paths) -> bool:
        early = early_parse._start(paths)
        if early is not None:
            early.stop()
        return early is not None

    assert started(dlrm_ranks)
    assert started([dlrm_ranks[0]])  # one trace parses while the imports run, too
    sqlite = tmp_path / "report.sqlite"
    sqlite.write_bytes(b"SQLite format 3\0")
    assert not started([*dlrm_ranks[:2], sqlite])  # not all PyTorch traces (by name)
    assert not started([tmp_path / "absent.pt.trace.json"])
    assert not started([tmp_path])  # a folder
    monkeypatch.setattr(early_parse, "MAX_EARLY_BYTES", 8 * dlrm_ranks[0].stat().st_size)
    assert started(dlrm_ranks[:1]) and not started(dlrm_ranks[:2])  # gzip counts 8 times its size
    monkeypatch.setattr(early_parse, "can_fork", lambda: False)
    assert not started(dlrm_ranks[:1])
    _no_child_left()


def test_the_cli_claims_the_early_parse(dlrm_ranks, tmp_path, finished, monkeypatch):
    from click.testing import CliRunner

    from nsight_advisor.cli import main

    monkeypatch.setenv("NSIGHT_ADVISOR_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "r.json"
    result = CliRunner().invoke(main, ["analyze", *map(str, dlrm_ranks[:2]), "--no-cache", "-q", "--format",
                                       "json", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert len(finished) == 1 and finished[0]["parse_one"] == []
    _no_child_left()
