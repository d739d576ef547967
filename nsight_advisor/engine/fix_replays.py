"""The findings' fixes replayed (engine/whatif.py ``savings_replays``): each rule's fix on all ranks at once, each
finding's alone, then the findings whose fixes change the same operations together; on two cores where it can.

The replays are Python loops over the step graph (analysis/replay.py), a fifth of a small job's analysis (the 8
DLRM ranks: about 0.2 s, with the CUDA-graph candidates), and they need no connection. So a forked child
(common/forked_child.py) takes a share: first each rule's all-ranks replay and the CUDA-graph candidates, while this
process works out the findings' shares of the critical path (on the paths walked beside the rules where the model
was built there: engine/model_work.py); then both take the findings one at a time from shared
tickets, so that neither waits long for the other. The child sends back what it computed; this process sets it,
and then replays the fixes together. (Forked before the regions' queries instead, to run beside them, the child
made them three times slower: every page DuckDB wrote in this process was copied first.)

The result is the one a single process gets, to the bit: the same replays of the same graph, each starting from the
unchanged replay. The replays' bound (:data:`MAX_ANALYSIS_REPLAY_OPS`) is applied afterwards, finding by finding in
rank order, as one process replaying them in turn applies it: a replay costs the same operations whenever it runs,
so the savings it lets in are those computed, and a finding it lets in that neither process reached is replayed
then. With one core, another Python thread running, or a child that fails, the rest runs here.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from nsight_advisor.analysis.replay import replay
from nsight_advisor.common.forked_child import Child, Tickets, can_fork
from nsight_advisor.engine.shared_fixes import attach_shared_fixes

if TYPE_CHECKING:
    from nsight_advisor.engine.model import Finding

#: In an analysis, the replays together visit at most this many operations: each rule's fix on all ranks at once,
#: then the findings in rank order (the rest keep saving_ns None and ``summary.savings.findings_not_replayed``
#: counts them). A rank's finding in a job visits its rank's operations alone unless its fix moves a collective's
#: last arrival (analysis/replay.py); when each replayed the whole graph, a job's cost grew with ranks squared (64
#: DLRM ranks: 761 findings x 51k operations, 116 of the analysis's 210 s). Ten million is about ten seconds.
MAX_ANALYSIS_REPLAY_OPS = 10_000_000
#: What a finding's replay costs beyond the operations it visits, counted against MAX_ANALYSIS_REPLAY_OPS as this
#: share of the graph's operations: making its change whole again, copying the unchanged replay, finding the
#: operations that moved and measuring their steps each take a pass over the graph (its fix, made before the
#: replays, reads its capture's operations alone). On 256 DLRM ranks (205,000 operations) a finding's replay took
#: about 3.3 ms, of which visiting its rank's 800 operations about 1 ms: the rest is 2,500 operations' worth.
REPLAY_PASS_SHARE = 0.0125
#: The child's share is waited for at most this long, or this many times what this process took for its own,
#: whichever is longer: then it is taken as stuck, ended, and its share replayed here.
CHILD_WAIT_S, CHILD_WAIT_FACTOR = 60.0, 10


class SavingsReplays:
    """The replays of ``fixed`` (findings with a change in ``changes``, by ``id``: :func:`sparse` form) on
    ``model`` (engine/whatif.py StepModel). :meth:`start` forks the child that shares them (module docstring);
    :meth:`finish` does the rest, sets ``critical_path_pct``, ``saving_ns``, ``saving_all_ranks_ns``,
    ``shares_fix_with`` and ``saving_together_ns`` and returns the report's ``summary.savings`` and, where
    ``candidates`` is given, its value (``summary.graph_candidates``). Used as a context manager, a child still
    running when the block fails is ended."""

    def __init__(self, model, fixed: list[Finding], changes: dict[int, dict[str, Any]],
                 candidates: Callable[[], Any] | None = None) -> None:
        self.model, self.fixed, self.changes, self.candidates = model, fixed, changes, candidates
        self.n = len(model.graph)
        self.before = model.totals()
        self.groups = _all_ranks_groups(fixed, self.n, MAX_ANALYSIS_REPLAY_OPS)
        counts = np.unique(model.graph.ops["capture_id"], return_counts=True)
        self.sizes = dict(zip(*(x.tolist() for x in counts)))
        self.passes = int(self.n * REPLAY_PASS_SHARE)
        self.cost = {"ops": len(self.groups) * self.n}  # the all-ranks replays visit the whole graph each
        self.child: Child | None = None
        self.tickets: Tickets | None = None

    def __enter__(self) -> SavingsReplays:
        return self

    def __exit__(self, *exc_info) -> None:
        self._close()

    def start(self) -> None:
        """Fork the child that shares the replays, where it can (module docstring)."""
        if self.fixed and len(self.fixed) <= Tickets.MAX and can_fork():
            self.tickets = Tickets(len(self.fixed))
            self.child = Child(self._child_share)

    def finish(self) -> tuple[dict, Any]:
        """The replays not done yet, here; returns ``(summary.savings, candidates)``."""
        from nsight_advisor.engine.path_share import step_paths

        model, fixed = self.model, self.fixed
        paths = model.paths if model.paths is not None else step_paths(model.graph, model.steps, model.base,
                                                                         model.units)
        for f in fixed:  # the whole-graph arrays of the change again, one finding at a time (the same values)
            f.critical_path_pct = paths.share_pct(f.capture_id, combine_sparse([self.changes[id(f)]], self.n),
                                                  f.device_id)
        started = time.monotonic()
        each: dict[int, tuple[int | None, int]] = {}  # finding -> (its saving, the operations its replay cost)
        all_ranks = found = None
        if self.child is not None:
            each.update(self._by_ticket())
            got = self.child.result(max(CHILD_WAIT_S, CHILD_WAIT_FACTOR * (time.monotonic() - started)))
            self._close()
            if got is not None:
                all_ranks, found, theirs = got
                each.update(theirs)
        if all_ranks is None:  # no child, or it failed (what this process replayed stands)
            all_ranks, found = self._all_ranks(), self._candidates()
        # the bound, finding by finding in rank order, as one process replaying them in turn applies it: a replay
        # costs the same operations whenever it runs, so only those it lets in count (a finding the processes
        # left, each past the bound by its own count, is replayed here if the bound lets it in)
        savings: dict[int, int | None] = {}
        for i, f in enumerate(fixed):
            if not self._fits(f.capture_id, self.cost):
                savings[i] = None
                continue
            savings[i], ops = each[i] if i in each else self._saving([f])
            self.cost["ops"] += ops
        for members, saved in zip(self.groups, all_ranks):
            for f in members:
                f.saving_all_ranks_ns = saved
        for i, f in enumerate(fixed):
            f.saving_ns = savings[i]
        given = sum(f.saving_ns is not None for f in fixed)
        # then the findings whose fixes change the same operations, together, within the same bound
        groups = attach_shared_fixes(fixed, self.changes, lambda members: self.replayed(members, self.cost))
        return {"captures": sorted(model.steps), "steps": sum(total for _kept, total in model.kept.values()),
                "replayed_steps": sum(kept for kept, _total in model.kept.values()), "findings": given,
                "ranked_by": "saving_ns" if given else "impact_ns",
                **({"findings_not_replayed": len(fixed) - given} if len(fixed) > given else {}),
                **({"shared_fix_groups": groups} if groups else {})}, found

    def replayed(self, members: list[Finding], cost: dict[str, int]) -> int | None:
        """What the steps save with the fixes of ``members`` (findings of one capture) at once; None where the
        bound is reached (``cost["ops"]``: the operations used so far, increased by this replay's)."""
        if not self._fits(members[0].capture_id, cost):
            return None
        saving, ops = self._saving(members)
        cost["ops"] += ops
        return saving

    def _fits(self, capture_id: int, cost: dict[str, int]) -> bool:
        """Whether the bound, with ``cost["ops"]`` spent, still holds a replay in ``capture_id``: its operations
        and the passes around it."""
        return MAX_ANALYSIS_REPLAY_OPS - cost["ops"] >= self.sizes.get(capture_id, 0) + self.passes

    def _saving(self, members: list[Finding]) -> tuple[int | None, int]:
        """What the steps save with the fixes of ``members`` at once, and the operations the replay cost (the passes
        around it and the operations it visited), the bound aside."""
        cost = {"ops": self.passes}
        change = combine_sparse([self.changes[id(f)] for f in members], self.n)
        return saved_ns(self.model, self.before, replay(self.model.graph, **change, cost=cost)), cost["ops"]

    def _by_ticket(self) -> dict[int, tuple[int | None, int]]:
        """Findings taken by ticket until none is left, or until this process alone has spent the bound (one process
        could not have gone further: :meth:`finish` replays what it needs of the rest)."""
        out, spent = {}, 0
        while spent <= MAX_ANALYSIS_REPLAY_OPS and (i := self.tickets.take()) is not None:
            out[i] = self._saving([self.fixed[i]])
            spent += out[i][1]
        return out

    def _child_share(self) -> tuple:
        """In the child: the all-ranks replays, the candidates, then findings by ticket; what it computed."""
        all_ranks, found = self._all_ranks(), self._candidates()
        return all_ranks, found, self._by_ticket()

    def _all_ranks(self) -> list[int]:
        """Each all-ranks group's saving (its members' fixes at once)."""
        return [saved_ns(self.model, self.before,
                         replay(self.model.graph, **combine_sparse([self.changes[id(f)] for f in members], self.n)))
                for members in self.groups]

    def _candidates(self) -> Any:
        return self.candidates() if self.candidates is not None else None

    def _close(self) -> None:
        if self.child is not None:
            self.child.stop()
            self.child = None
        if self.tickets is not None:
            self.tickets.close()
            self.tickets = None


def _all_ranks_groups(findings: list[Finding], n: int, budget: int) -> list[list[Finding]]:
    """The findings of each rule and subject that fires on two or more ranks or GPUs, one list per group whose
    fixes are replayed at once (ranks waiting for each other at a collective gain nothing from one rank's fix
    alone), while ``budget`` holds a replay of the whole graph (``n`` operations) for each."""
    from nsight_advisor.engine.combined_view import finding_subject

    groups: dict[tuple[str, str], list[Finding]] = {}
    for f in findings:
        groups.setdefault((f.rule_id, finding_subject(f)), []).append(f)
    kept, used = [], 0
    for members in groups.values():
        if len({(f.capture_id, f.device_id) for f in members}) < 2 or budget - used < n:
            continue
        used += n
        kept.append(members)
    return kept


def saved_ns(model, before: dict[tuple[int, int], float], after: tuple[np.ndarray, np.ndarray]) -> int:
    """What the replayed steps got shorter in all (``StepModel.totals``: each capture's, or each GPU's of a
    capture whose GPUs run processes of their own; the middle steps kept stand for all). Only the captures with an
    op that moved are measured again: the others saved nothing."""
    moved = model.moved(after)
    now = model.totals(after, moved)
    saved = 0.0
    for key, was in before.items():
        if key[0] not in moved:
            continue
        kept, total = model.kept.get(key[0], (1, 1))
        saved += (was - now[key]) * total / kept
    return max(int(round(saved)), 0)


def sparse(change: dict[str, Any]) -> dict[str, tuple[np.ndarray, np.ndarray | None]]:
    """A change of the replay as the ops it alters: per key, their indexes and the scales (None for a mask). A
    change is an array over the whole graph per key, and a job keeps one per finding (576 findings of 64 ranks:
    a quarter of a gigabyte as arrays)."""
    out = {}
    for key, value in change.items():
        value = np.asarray(value)
        if value.dtype == bool:
            out[key] = (np.flatnonzero(value), None)
        else:
            at = np.flatnonzero(value != 1)
            out[key] = (at, value[at])
    return out


def combine_sparse(changes: list[dict[str, tuple]], n: int) -> dict[str, Any]:
    """Several changes kept by :func:`sparse` as one change of the replay over a graph of ``n`` ops: the scales
    multiplied, the masks together."""
    out: dict[str, Any] = {}
    for change in changes:
        for key, (at, scale) in change.items():
            if key not in out:
                out[key] = np.zeros(n, bool) if scale is None else np.ones(n)
            if scale is None:
                out[key][at] = True
            else:
                out[key][at] *= scale
    return out


__all__ = ["MAX_ANALYSIS_REPLAY_OPS", "REPLAY_PASS_SHARE", "SavingsReplays", "combine_sparse", "saved_ns", "sparse"]
