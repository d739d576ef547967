"""Replay a step graph (analysis/step_graph.py): the times its operations would have with a change applied.

Every operation's start is the latest of its edges (the op it waits for, plus the edge's lag); its end is its start
plus its own time, or for a blocking call or a collective kernel the latest of that and what it waits for. The
operations are visited once, in the order of their recorded times (a start at the recorded start, an end that waits
for more at the recorded end), which is an order in which everything an operation waits for comes first: linear in
the number of operations. Replayed unchanged, the graph gives back every recorded time; with some operations made
shorter (a what-if) it gives the times the program would have had.
"""

from __future__ import annotations

from itertools import islice
from typing import Any

import numpy as np

from nsight_advisor.analysis.op_table import MISSING_LAST, group_codes
from nsight_advisor.analysis.step_graph import HOST, StepGraph


def _order(g: StepGraph) -> tuple[list[int], list[bool]]:
    """Visiting order: (op, is_end) entries by recorded time, ends before starts at the same time."""
    special = np.flatnonzero(g.special_end)
    n = len(g)
    ops = np.r_[np.arange(n), special]
    is_end = np.r_[np.zeros(n, bool), np.ones(len(special), bool)]
    times = np.r_[g.ops["start_ns"], g.ops["end_ns"][special]]
    order = np.lexsort((~is_end, times))
    return ops[order].tolist(), is_end[order].tolist()


def _prepared(g: StepGraph) -> dict[str, Any]:
    """What every replay of ``g`` shares, made once per graph: the visiting order, each op's first place in it,
    the edges as lists, and the unchanged replay (the recorded times)."""
    kept = g.__dict__.get("_replay")
    if kept is None:
        order, is_end = _order(g)
        first = np.zeros(len(g), np.int64)
        at = np.asarray(order, np.int64)
        starts = np.flatnonzero(~np.asarray(is_end, bool))
        first[at[starts]] = starts
        # one list per start slot (a list lookup is what the loop can afford: it runs once per operation)
        kept = g.__dict__["_replay"] = {
            "order": order, "is_end": is_end, "first": first,
            "pred": [g.pred[:, k].tolist() for k in range(4)],
            "lag": [g.lag[:, k].astype(np.float64).tolist() for k in range(4)],
            "f0": g.from_start[:, 0].tolist(), "special": g.special_end.tolist(),
            "wp": g.wait_pred.tolist(), "wl": g.wait_lag.tolist(), "grp": g.group.tolist(),
            "own": g.own_ns.astype(np.float64).tolist(), "glag": g.group_lag.astype(np.float64).tolist(),
            "also": g.also_waits, "members": g.members, "base": None,
        }
    return kept


def replay(g: StepGraph, own_scale: np.ndarray | None = None, host_lag_scale: np.ndarray | None = None,
           drop_wait: np.ndarray | None = None, prompt_start: np.ndarray | None = None,
           wait_lag_scale: np.ndarray | None = None, relaunch: tuple | None = None,
           cost: dict[str, int] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Replayed (start_ns, end_ns) of every op. ``own_scale``: each op's own time (and a collective's transfer)
    multiplied by it (a kernel 1.3x faster: 1/1.3); ``host_lag_scale``: each call's host work before it multiplied
    by it (0: removed); ``drop_wait``: blocking calls that no longer wait for the GPU; ``prompt_start``: GPU
    operations that start as soon as their launch and their stream allow, their launch and stream lags cut to the
    capture's typical ones (a copy that no longer waits for the host to stage it); ``wait_lag_scale``: each
    blocking call's lag after the GPU operation it waits for multiplied by it (the host no longer copying the
    result out of a staging buffer); ``relaunch``: ``(ops, calls, launch_lags, stream_lags)``, ``ops`` launched by
    ``calls`` after those lags, their stream lags set (NaN: kept): kernels as one CUDA graph (kernel_sequences.py).

    A what-if replays from the first place in the visiting order of the first op it changes: everything visited
    before it waits only for what was visited before it, so it keeps its unchanged replay (on the 64-rank DLRM
    job most findings change ops well into the trace). One that changes the ops of one process of several (a
    rank's finding in a job, whether its ranks were captured apart or together) replays that process's ops alone
    (:func:`_scoped`), and all of them only where the last arrival at one of its collectives moved. ``cost``:
    ``cost["ops"]`` is increased by the ops visited."""
    prep = _prepared(g)
    l0, own_l, gl, wp = prep["lag"][0], prep["own"], prep["glag"], prep["wp"]
    l1, l2, wl, p1 = prep["lag"][1], prep["lag"][2], prep["wl"], prep["pred"][1]
    # the change is made in the kept lists and undone after the replay: copying them cost the whole graph a replay
    edits: list[tuple[list, list[int], list]] = []  # (list, indexes, their values before)

    def edit(values: list, at: list[int], new: list) -> None:
        edits.append((values, at, [values[i] for i in at]))
        for i, v in zip(at, new):
            values[i] = v

    changed = []
    try:
        if relaunch is not None:
            at, calls, launch_lags, stream_lags = (np.asarray(x).tolist() for x in relaunch)
            changed += [np.asarray(at, np.int64), np.asarray(calls, np.int64)]  # a launching call's capture counts
            edit(p1, at, calls)
            edit(l1, at, launch_lags)
            kept = [(i, b) for i, b in zip(at, stream_lags) if b == b]  # NaN: the stream lag kept
            edit(l2, [i for i, _b in kept], [b for _i, b in kept])
        if own_scale is not None:
            at = np.flatnonzero(own_scale != 1)
            changed.append(at)
            at, fs = at.tolist(), own_scale[at].tolist()
            edit(own_l, at, [own_l[i] * f for i, f in zip(at, fs)])
            edit(gl, at, [gl[i] * f for i, f in zip(at, fs)])
        if host_lag_scale is not None:
            at = np.flatnonzero((host_lag_scale != 1) & ~g.from_start[:, 0] & (g.lag[:, 0] != 0))
            changed.append(at)
            at, fs = at.tolist(), host_lag_scale[at].tolist()
            edit(l0, at, [l0[i] * f for i, f in zip(at, fs)])
        if drop_wait is not None:
            at = np.flatnonzero(drop_wait & (g.wait_pred >= 0))
            changed.append(at)
            edit(wp, at.tolist(), [-1] * len(at))
        if prompt_start is not None:
            at = np.flatnonzero(prompt_start & (g.kinds != HOST))
            changed.append(at)
            launch, stream = float(g.typical.get("launch", 0)), float(g.typical.get("stream", 0))
            at = at.tolist()
            edit(l1, at, [min(l1[i], launch) for i in at])
            edit(l2, at, [min(l2[i], stream) for i in at])
        if wait_lag_scale is not None:
            at = np.flatnonzero((wait_lag_scale != 1) & (g.wait_pred >= 0) & (g.wait_lag != 0))
            changed.append(at)
            at, fs = at.tolist(), wait_lag_scale[at].tolist()
            edit(wl, at, [wl[i] * f for i, f in zip(at, fs)])
        touched = np.concatenate(changed) if changed else np.zeros(0, np.int64)
        return _replayed(g, prep, touched, (prep, p1, l0, l1, l2, own_l, gl, wp, wl), cost)
    finally:
        for values, at, before in reversed(edits):
            for i, v in zip(at, before):
                values[i] = v


def _replayed(g: StepGraph, prep: dict[str, Any], touched: np.ndarray, args: tuple, cost: dict[str, int] | None
              ) -> tuple[np.ndarray, np.ndarray]:
    """:func:`replay` once its change is made (``touched``: the ops it alters; ``args``: the lists, for
    :func:`_visit`)."""
    base = prep["base"]
    if base is None:
        recorded = (g.ops["start_ns"].astype(np.float64).tolist(), g.ops["end_ns"].astype(np.float64).tolist())
        if cost is not None:
            cost["ops"] = cost.get("ops", 0) + len(prep["order"])
        if len(touched):  # a graph replayed once, changed: all of it, as it is
            return tuple(map(np.asarray, _visit(*recorded, prep["order"], prep["is_end"], 0, *args)))
        # the unchanged replay, kept: every what-if on this graph starts from it, from its lists (one copy of them to
        # write over, given back after each replay)
        prep["base_lists"] = _visit(*recorded, prep["order"], prep["is_end"], 0, *args)
        prep["scratch"] = tuple(map(list.copy, prep["base_lists"]))
        base = prep["base"] = tuple(map(np.asarray, prep["base_lists"]))
    if not len(touched):
        return base[0].copy(), base[1].copy()
    k = int(prep["first"][touched].min())
    cost = cost if cost is not None else {}
    scoped = _scoped(g, prep, touched, k, args, cost)
    if scoped is not None:
        return scoped
    cost["ops"] = cost.get("ops", 0) + len(prep["order"]) - k
    # most of the graph is visited here: copies (in C) cost less than giving back every visited entry
    ns, ne = _visit(*map(list.copy, prep["base_lists"]), prep["order"], prep["is_end"], k, *args)
    return np.asarray(ns), np.asarray(ne)


def _scoped(g: StepGraph, prep: dict[str, Any], touched: np.ndarray, k: int, args: tuple,
            cost: dict[str, int]) -> tuple[np.ndarray, np.ndarray] | None:
    """The replay of a change to the ops of one scope of several (:func:`_scopes`: a process, or a capture),
    visiting that scope's ops alone (from its first place at or after ``k``); None where it cannot: the change
    touches several scopes, the graph links them other than at collectives, or the change moved the last arrival at
    a collective shared with another scope, whose ranks then move too. Scopes meet only at their collectives: while
    every shared collective's last arrival stays, no op of another scope can move, and this scope's ops are visited
    in the same order on the same inputs as the whole replay would visit them (the same floats)."""
    scopes = _scopes(g, prep)
    if not scopes:
        return None
    unit = prep["unit"]
    first_unit = unit[touched[0]]
    if (unit[touched] != first_unit).any():
        return None
    places, order, is_end, shared, ahead = scopes[int(first_unit)]
    if ahead >= k:  # a process whose collective lies ahead of the change: the whole graph at once (docstring)
        return None
    kc = int(np.searchsorted(places, k))
    visited = order[kc:]
    ns, ne = prep["scratch"]  # the unchanged replay's lists, given back after: a copy would cost the whole graph
    try:
        _visit(ns, ne, order, is_end, kc, *args)
        cost["ops"] = cost.get("ops", 0) + len(order) - kc
        # a last arrival moved: the latest of this scope's members and the others' (unchanged) latest
        arrived = prep["arrived"]
        if any(max(others, max(ns[m] for m in mine)) != arrived[gid] for gid, mine, others in shared):
            return None
        # the unchanged replay, with the visited ops' new times written in
        starts, ends = prep["base"][0].copy(), prep["base"][1].copy()
        if visited:
            at = np.asarray(visited, np.int64)
            starts[at] = [ns[i] for i in visited]
            ends[at] = [ne[i] for i in visited]
        return starts, ends
    finally:  # the scratch lists given back the unchanged replay's times where visited
        base_ns, base_ne = prep["base_lists"]
        for i in visited:
            ns[i], ne[i] = base_ns[i], base_ne[i]


def _scopes(g: StepGraph, prep: dict[str, Any]) -> dict[int, tuple]:
    """Per scope, for :func:`_scoped`: its places in the visiting order, its (op, is_end) entries, and the
    collective groups it shares with another scope (``(group, its members there, the other scopes' latest
    arrival)``); ``prep["unit"]`` holds each op's scope. A scope is a process of a capture (a capture's ranks each
    run their own, and so do the ranks of a job captured apart) where no edge but a collective's links two
    processes; else a capture, where none links two captures; else there is none, and every replay visits all the
    graph's ops (as in a graph of one process). Made once per graph.

    A process of a capture is replayed alone only where no collective it shares lies ahead of the change (the last
    of their places in the visiting order, the scope's fifth item): the ranks of one capture, two GPUs in step, mostly
    trade the last arrival (nsys_ai's 2-GPU MFU job: every change to a rank's kernels moved one), and a replay that
    moves it visits the rank and then the whole graph. A capture (a rank captured apart) is always tried alone, as
    the ranks of a larger job mostly keep theirs (the 8 DLRM ranks, tests/test_scoped_replay.py)."""
    kept = prep.get("scopes")
    if kept is not None:
        return kept
    scopes: dict[int, tuple] = {}
    prep["scopes"] = scopes
    capture = g.ops["capture_id"]
    captures = group_codes(capture)
    for unit in (group_codes(capture, g.ops.ints("pid", MISSING_LAST)), captures):  # missing pid: one process
        units = int(unit.max()) + 1 if len(unit) else 0
        if units < 2:
            return scopes
        if not _crossing(g, unit):
            break
    else:
        return scopes
    processes = units > int(captures.max()) + 1
    order, is_end = np.asarray(prep["order"], np.int64), np.asarray(prep["is_end"], bool)
    base_ns = prep["base"][0]
    shared: dict[int, list[tuple[int, list[int], float]]] = {}
    for gid, members in enumerate(g.members):
        by_unit: dict[int, list[int]] = {}
        for m in members:
            by_unit.setdefault(int(unit[m]), []).append(m)
        if len(by_unit) > 1:
            latest = sorted(((max(base_ns[m] for m in mine), u) for u, mine in by_unit.items()), reverse=True)
            for u, mine in by_unit.items():
                shared.setdefault(u, []).append((gid, mine, latest[1][0] if latest[0][1] == u else latest[0][0]))
    last = np.full(len(g), -1, np.int64)  # each op's last place in the visiting order
    np.maximum.at(last, order, np.arange(len(order)))
    of = unit[order]
    by = np.argsort(of, kind="stable")  # each scope's places, in visiting order
    bounds = np.searchsorted(of[by], np.arange(units)).tolist() + [len(of)]
    for u in range(units):
        places = by[bounds[u]:bounds[u + 1]]
        ahead = max((int(last[mine].max()) for _gid, mine, _others in shared.get(u, [])), default=-1) if processes \
            else -1
        scopes[u] = (places, order[places].tolist(), is_end[places].tolist(), shared.get(u, []), ahead)
    prep["unit"] = unit
    prep["arrived"] = [max(base_ns[m] for m in members) for members in g.members]  # each group's last arrival
    return scopes


def _crossing(g: StepGraph, unit: np.ndarray) -> bool:
    """Whether an edge other than a collective's links ops of two different ``unit`` values."""
    preds = [g.pred[:, s] for s in range(4)] + [g.wait_pred]
    return any(((p >= 0) & (unit[np.maximum(p, 0)] != unit)).any() for p in preds) or any(
        unit[j] != unit[i] for i, waits in g.also_waits.items() for j in waits)


def _visit(ns: list, ne: list, order: list, is_end: list, k: int, prep: dict[str, Any], p1: list, l0: list,
           l1: list, l2: list, own_l: list, gl: list, wp: list, wl: list) -> tuple[list, list]:
    """The replay's loop (see the module docstring) from place ``k`` of the visiting ``order`` (ops, and whether
    each entry is the op's end), updating ``ns`` and ``ne`` in place; slot 1's predecessors (``p1``), the lags of
    slots 0 to 2 (``l0``, ``l1``, ``l2``), ``own_l``, ``gl``, ``wp`` and ``wl`` as a change made them, the rest as
    kept in ``prep``."""
    p0, _p1, p2, p3 = prep["pred"]
    l3 = prep["lag"][3]
    f0, special, grp, also = prep["f0"], prep["special"], prep["grp"], prep["also"]
    members = prep["members"]
    for i, end in zip(islice(order, k, None), islice(is_end, k, None)):
        if end:
            t = ns[i] + own_l[i]
            if wp[i] >= 0:
                t = max(t, ne[wp[i]] + wl[i])
                for j in also.get(i, ()):
                    t = max(t, ne[j] + wl[i])
            if grp[i] >= 0:
                t = max(t, max(ns[m] for m in members[grp[i]]) + gl[i])
            ne[i] = t
            continue
        # slot 0: the host thread (from the previous call's end, or a nested call's outer start); slot 1: the
        # launching call's start; slots 2 and 3: another GPU operation's end
        p = p0[i]
        t = ((ns[p] if f0[i] else ne[p]) + l0[i]) if p >= 0 else -1e300
        p = p1[i]
        if p >= 0 and ns[p] + l1[i] > t:
            t = ns[p] + l1[i]
        p = p2[i]
        if p >= 0 and ne[p] + l2[i] > t:
            t = ne[p] + l2[i]
        p = p3[i]
        if p >= 0 and ne[p] + l3[i] > t:
            t = ne[p] + l3[i]
        if t == -1e300:
            t = ns[i]
        ns[i] = t
        if not special[i]:
            ne[i] = t + own_l[i]
    return ns, ne


def visiting_order(g: StepGraph) -> tuple[list[int], list[bool]]:
    """The replay's visiting order: (op, is_end) entries by recorded time, made once per graph."""
    prep = _prepared(g)
    return prep["order"], prep["is_end"]
