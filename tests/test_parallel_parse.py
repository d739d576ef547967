"""A job's PyTorch traces parsed in two processes (ingest/kineto/parallel_parse.py) give the store, and the errors,
of one process."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kineto_stores import broken, ingested
from nsight_advisor.common.errors import InputError
from nsight_advisor.ingest.kineto import parallel_parse


@pytest.fixture
def ranks(dlrm_ranks) -> list[Path]:
    return dlrm_ranks


@pytest.fixture(autouse=True)
def alone(monkeypatch):
    """This process taken as running no other Python thread (an earlier test's may linger in the suite's process),
    but for the test of that check, which asks the real one."""
    real = parallel_parse._other_threads
    monkeypatch.setattr(parallel_parse, "_other_threads", lambda: False)
    return real


@pytest.fixture
def delivered(monkeypatch) -> list[bool]:
    """For each forked child, whether it handed its traces back (False: this process parsed them itself)."""
    seen, real = [], parallel_parse._collect

    def collect(*args):
        payload = real(*args)
        seen.append(payload is not None)
        return payload

    monkeypatch.setattr(parallel_parse, "_collect", collect)
    return seen


def _store(items, monkeypatch, *, fork: bool) -> dict:
    with monkeypatch.context() as m:
        if not fork:
            m.setattr(parallel_parse, "MIN_FORK_BYTES", 1 << 62)
        return ingested(items)


def _error(items, monkeypatch, *, fork: bool) -> str:
    with pytest.raises(InputError) as info:
        _store(items, monkeypatch, fork=fork)
    return str(info.value)


def test_the_dlrm_ranks_parsed_in_two_processes_give_the_store_of_one(ranks, monkeypatch, delivered):
    items = list(enumerate(ranks, start=1))
    assert parallel_parse.fork_split(items) == 4  # eight ranks of about the same size: half each
    two = _store(items, monkeypatch, fork=True)
    one = _store(items, monkeypatch, fork=False)
    assert delivered == [True]  # the ingest without a fork forked nothing
    assert two == one
    assert len(two["kernels"]) > 1000 and {r[0] for r in two["kernels"]} == set(range(1, 9))


def test_a_trace_the_child_cannot_read_raises_what_one_process_raises(ranks, tmp_path, monkeypatch, delivered):
    bad = broken(tmp_path, ranks[3], "late_rank.pt.trace.json.gz")
    items = list(enumerate([*ranks[:3], bad], start=1))
    assert parallel_parse.fork_split(items) is not None and parallel_parse.fork_split(items) < 4  # bad: the child's
    message = _error(items, monkeypatch, fork=True)
    assert delivered == [False]  # the child failed; this process read its traces and raised
    assert message == _error(items, monkeypatch, fork=False)
    assert message.startswith(str(bad))


def test_with_unreadable_traces_in_both_halves_the_first_is_named(ranks, tmp_path, monkeypatch):
    first = broken(tmp_path, ranks[0], "first.pt.trace.json.gz")
    last = broken(tmp_path, ranks[3], "last.pt.trace.json.gz")
    items = list(enumerate([first, *ranks[1:3], last], start=1))
    message = _error(items, monkeypatch, fork=True)
    assert message == _error(items, monkeypatch, fork=False)
    assert message.startswith(str(first))


def test_a_child_that_fails_leaves_the_parse_to_this_process(ranks, monkeypatch, delivered):
    items = list(enumerate(ranks[:4], start=1))
    one = _store(items, monkeypatch, fork=False)

    def fails(*_args):
        raise RuntimeError("the child's parse broke")

    monkeypatch.setattr(parallel_parse, "_parse", fails)  # runs in the child: it exits 1, sends nothing
    assert _store(items, monkeypatch, fork=True) == one
    assert delivered == [False]


def test_a_child_that_hangs_is_ended_and_its_traces_parsed_here(ranks, monkeypatch, delivered):
    items = list(enumerate(ranks[:4], start=1))
    one = _store(items, monkeypatch, fork=False)

    def hangs(*_args):
        import time

        time.sleep(3600)

    monkeypatch.setattr(parallel_parse, "_parse", hangs)
    monkeypatch.setattr(parallel_parse, "WAIT_FACTOR", 0)
    monkeypatch.setattr(parallel_parse, "WAIT_MIN_S", 0.5)
    assert _store(items, monkeypatch, fork=True) == one
    assert delivered == [False]
    with pytest.raises(ChildProcessError):
        os.waitpid(-1, os.WNOHANG)  # the child was ended and reaped


def test_no_fork_beside_another_python_thread(ranks, alone, monkeypatch):
    import threading

    monkeypatch.setattr(parallel_parse, "_other_threads", alone)
    items = list(enumerate(ranks, start=1))
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert parallel_parse.fork_split(items) is None
    finally:
        stop.set()
        other.join()


def test_fork_split(tmp_path, monkeypatch):
    def files(*sizes: int, suffix: str = ".json") -> list[tuple[int, Path]]:
        out = []
        for i, size in enumerate(sizes, start=1):
            path = tmp_path / f"t{i}{suffix}"
            path.write_bytes(b" " * size)
            out.append((i, path))
        return out

    mib = 1 << 20
    assert parallel_parse.fork_split(files(2 * mib)) is None  # one trace
    assert parallel_parse.fork_split(files(1000, 1000)) is None  # too small to pay for a fork
    assert parallel_parse.fork_split(files(mib, mib)) == 1
    assert parallel_parse.fork_split(files(3 * mib, mib, mib, mib)) == 1  # half the bytes, not half the traces
    assert parallel_parse.fork_split(files(mib, mib, mib, 3 * mib)) == 3  # the child always gets one
    assert parallel_parse.fork_split(files(70_000, 70_000, suffix=".json.gz")) == 1  # gzip counts 8 times
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0})
    assert parallel_parse.fork_split(files(mib, mib)) is None  # one core


def test_nothing_is_left_running(ranks, monkeypatch):
    _store(list(enumerate(ranks[:4], start=1)), monkeypatch, fork=True)
    with pytest.raises(ChildProcessError):
        os.waitpid(-1, os.WNOHANG)  # no child of this process is left to reap

