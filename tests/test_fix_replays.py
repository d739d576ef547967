"""The findings' fixes replayed on two processes (engine/fix_replays.py, common/forked_child.py) give what one
process gives, to the bit, and fall back to one process where a child fails or the replays' bound could be reached.

On the 8 real DLRM ranks: the analysis's findings, their what-if attributes taken off and replayed again."""

from __future__ import annotations

import os
import threading

import pytest

from nsight_advisor.common import forked_child
from nsight_advisor.common.forked_child import Child, Tickets
from nsight_advisor.engine import fix_replays, whatif
from nsight_advisor.engine.combined_view import finding_subject

ATTRIBUTES = ("saving_ns", "critical_path_pct", "saving_all_ranks_ns", "shares_fix_with", "saving_together_ns")


@pytest.fixture
def children(monkeypatch) -> list[bool]:
    """Forks allowed (the suite's process may hold other threads); for each child, whether it delivered."""
    seen, real = [], Child.result

    def result(self, wait_s):
        got = real(self, wait_s)
        seen.append(got is not None)
        return got

    monkeypatch.setattr(Child, "result", result)
    monkeypatch.setattr(fix_replays, "can_fork", lambda: True)
    return seen


def _replayed(con, ids, findings, model) -> tuple:
    """Every finding's what-if attributes cleared, then replayed with the candidates: (attributes, summary,
    candidates)."""
    for f in findings:
        f.saving_ns = f.critical_path_pct = f.saving_all_ranks_ns = f.saving_together_ns = None
        f.shares_fix_with = []
    replays = whatif.savings_replays(con, ids, findings, model=model, candidates=True)
    with replays:
        replays.start()
        summary, candidates = replays.finish()
    return [tuple(getattr(f, a) for a in ATTRIBUTES) for f in findings], summary, candidates


def _one_process(analysed, monkeypatch) -> tuple:
    with monkeypatch.context() as m:
        m.setattr(fix_replays, "can_fork", lambda: False)
        return _replayed(*analysed)


def test_two_processes_give_what_one_gives(dlrm_analysed, monkeypatch, children):
    one = _one_process(dlrm_analysed, monkeypatch)
    assert sum(saving is not None for saving, *_ in one[0]) >= 50  # the DLRM job's findings with a saving
    assert any(all_ranks is not None for _s, _p, all_ranks, *_ in one[0])
    assert one[1]["findings"] >= 50 and one[2]["candidates"]
    assert children == []
    assert _replayed(*dlrm_analysed) == one
    assert children == [True]  # the child delivered its share


def test_a_child_that_fails_leaves_its_share_to_this_process(dlrm_analysed, monkeypatch, children):
    one = _one_process(dlrm_analysed, monkeypatch)
    parent, taken = os.getpid(), []

    def fails(self):
        while self.tickets.take() is not None:  # the child takes the findings, then breaks: it exits 1, sends nothing
            pass
        raise RuntimeError("the child's replays broke")

    real_take = Tickets.take

    def take(self):
        number = real_take(self)
        if os.getpid() == parent and number is not None:
            taken.append(number)
        return number

    monkeypatch.setattr(fix_replays.SavingsReplays, "_child_share", fails)
    monkeypatch.setattr(Tickets, "take", take)
    assert _replayed(*dlrm_analysed) == one
    assert children == [False]
    assert len(taken) < one[1]["findings"]  # the findings the child took are replayed here all the same


def test_a_bound_reached_leaves_out_what_one_process_leaves_out(dlrm_analysed, monkeypatch, children):
    con, ids, findings, model = dlrm_analysed
    n = len(model.graph)
    groups = len({(f.rule_id, finding_subject(f)) for f in findings if f.saving_all_ranks_ns is not None})
    per_finding = n // len(ids) + int(n * fix_replays.REPLAY_PASS_SHARE)
    # the all-ranks replays and room for a few findings' replays: both processes replay more, the bound keeps those
    # one process would have replayed in rank order
    monkeypatch.setattr(fix_replays, "MAX_ANALYSIS_REPLAY_OPS", groups * n + 5 * per_finding)
    one = _one_process(dlrm_analysed, monkeypatch)
    assert groups >= 2 and 1 <= one[1]["findings"] <= 5 and one[1]["findings_not_replayed"] > 0
    # what one process replaying the findings in turn gets, each replay checked against the operations spent so far
    replays = whatif.savings_replays(con, ids, findings, model=model)
    cost = {"ops": len(replays.groups) * n}
    in_turn = [replays.replayed([f], cost) for f in replays.fixed]
    assert [f.saving_ns for f in replays.fixed] == in_turn
    assert _replayed(*dlrm_analysed) == one
    assert children == [True]


def test_each_process_stops_at_the_bound_and_the_rest_is_replayed_as_needed(dlrm_analysed, monkeypatch, children):
    one = _one_process(dlrm_analysed, monkeypatch)
    # each process stops taking findings once it has spent the bound by its own count: here after one finding
    # each, so the findings left are replayed by finish() in rank order (the bound itself lets them all in)
    monkeypatch.setattr(fix_replays, "MAX_ANALYSIS_REPLAY_OPS", 10 ** 12)
    real = fix_replays.SavingsReplays._by_ticket

    def one_each(self):
        with monkeypatch.context() as m:
            m.setattr(fix_replays, "MAX_ANALYSIS_REPLAY_OPS", 0)
            return real(self)

    monkeypatch.setattr(fix_replays.SavingsReplays, "_by_ticket", one_each)
    assert _replayed(*dlrm_analysed) == one
    assert children == [True]


def test_tickets_are_each_taken_once_by_two_processes():
    tickets = Tickets(5000)

    def take_all() -> list[int]:
        mine = []
        while (number := tickets.take()) is not None:
            mine.append(number)
        return mine

    child = Child(take_all)
    here = take_all()
    there = child.result(60.0)
    tickets.close()
    assert there is not None
    assert sorted(here + there) == list(range(5000))
    with pytest.raises(ValueError, match="at most"):
        Tickets(Tickets.MAX + 1)
    empty = Tickets(0)
    assert empty.take() is None
    empty.close()


def test_tickets_closed_twice_leave_the_file_that_took_their_number_open(tmp_path):
    tickets = Tickets(2)
    number = tickets.reader
    tickets.close()
    path = tmp_path / "f"
    path.write_bytes(b"x")
    with open(path, "rb") as fh:
        assert fh.fileno() == number  # the lowest free number: the pipe's
        tickets.close()  # the early parse's stop after its finish: must not close this file
        assert fh.read() == b"x"
    assert tickets.take() is None


def test_a_child_that_fails_or_hangs_gives_none_and_is_reaped():
    assert Child(lambda: {"value": [1, 2.5, "x"]}).result(60.0) == {"value": [1, 2.5, "x"]}

    def fails():
        raise RuntimeError("broke")

    assert Child(fails).result(60.0) is None
    assert Child(lambda: threading.Lock()).result(60.0) is None  # a value that does not pickle

    def hangs():
        import time

        time.sleep(3600)

    assert Child(hangs).result(0.3) is None
    with pytest.raises(ChildProcessError):
        os.waitpid(-1, os.WNOHANG)  # every child was ended and reaped


def test_no_fork_beside_another_python_thread(monkeypatch):
    monkeypatch.setattr(forked_child.os, "sched_getaffinity", lambda _pid: {0, 1})
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert not forked_child.can_fork()
    finally:
        stop.set()
        other.join()
    if threading.active_count() == 1:  # the suite's process may hold other threads of its own
        assert forked_child.can_fork()
    monkeypatch.setattr(forked_child.os, "sched_getaffinity", lambda _pid: {0})
    assert not forked_child.can_fork()  # one core
