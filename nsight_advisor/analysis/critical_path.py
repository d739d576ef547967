"""Replay a step graph (analysis/step_graph.py), walk its critical path and give each operation its slack.

**Replay.** Every operation's start is the latest of its edges (the op it waits for, plus the edge's lag); its end
is its start plus its own time, or for a blocking call or a collective kernel the latest of that and what it waits
for. The operations are visited once, in the order of their recorded times (a start at the recorded start, an end
that waits for more at the recorded end), which is an order in which everything an operation waits for comes
first: linear in the number of operations. Replayed unchanged, the graph gives back every recorded time; with some
operations made shorter (a what-if) it gives the times the program would have had.

**Critical path.** From the operation that ends a step, back along whichever edge set each time: the chain of
operations and waits whose lengths add up to the step, from its start to its end.

**Slack.** How much later an operation could start without moving the end of the last step (a backward pass over
the same order): zero on the critical path.
"""

from __future__ import annotations

from itertools import islice
from typing import Any

import numpy as np

from nsight_advisor.analysis.step_graph import EDGE_KINDS, HOST, KIND_NAMES, StepGraph

#: A stretch of a step before the earliest recorded operation its path reaches (host work without CUDA calls, or
#: another rank that had not started yet).
UNTRACKED = "before any recorded operation"
#: A critical path's segment label for the lag of each kind of start edge (analysis/step_graph.py EDGE_KINDS).
EDGE_LABELS = {"host": "host work", "launch": "launch latency", "stream": "stream order",
               "cross": "wait for another stream"}


def _order(g: StepGraph) -> tuple[list[int], list[bool]]:
    """Visiting order: (op, is_end) entries by recorded time, ends before starts at the same time."""
    special = np.flatnonzero(g.special_end)
    n = len(g)
    ops = np.r_[np.arange(n), special]
    is_end = np.r_[np.zeros(n, bool), np.ones(len(special), bool)]
    times = np.r_[g.ops["start_ns"].to_numpy(np.int64), g.ops["end_ns"].to_numpy(np.int64)[special]]
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
    job most findings change ops well into the trace). One that changes the ops of one capture of several (a
    rank's finding in a job) replays that capture's ops alone (:func:`_scoped`), and all of them only where the
    last arrival at one of its collectives moved. ``cost``: ``cost["ops"]`` is increased by the ops visited."""
    prep = _prepared(g)
    # what a change alters, copied; the rest of the graph's lists are the kept ones
    l0, own_l, gl, wp = prep["lag"][0], prep["own"], prep["glag"], prep["wp"]
    l1, l2, wl, p1 = prep["lag"][1], prep["lag"][2], prep["wl"], prep["pred"][1]
    changed = []
    if relaunch is not None:
        at, calls, launch_lags, stream_lags = (np.asarray(x).tolist() for x in relaunch)
        changed += [np.asarray(at, np.int64), np.asarray(calls, np.int64)]  # a launching call's capture counts too
        p1, l1, l2 = p1.copy(), l1.copy(), l2.copy()
        for i, c, a, b in zip(at, calls, launch_lags, stream_lags):
            p1[i], l1[i], l2[i] = c, a, (l2[i] if b != b else b)  # NaN: kept
    if own_scale is not None:
        at = np.flatnonzero(own_scale != 1)
        changed.append(at)
        own_l, gl = own_l.copy(), gl.copy()
        for i, f in zip(at.tolist(), own_scale[at].tolist()):
            own_l[i] *= f
            gl[i] *= f
    if host_lag_scale is not None:
        at = np.flatnonzero((host_lag_scale != 1) & ~g.from_start[:, 0] & (g.lag[:, 0] != 0))
        changed.append(at)
        l0 = l0.copy()
        for i, f in zip(at.tolist(), host_lag_scale[at].tolist()):
            l0[i] *= f
    if drop_wait is not None:
        at = np.flatnonzero(drop_wait & (g.wait_pred >= 0))
        changed.append(at)
        wp = wp.copy()
        for i in at.tolist():
            wp[i] = -1
    if prompt_start is not None:
        at = np.flatnonzero(prompt_start & (g.kinds != HOST))
        changed.append(at)
        l1, l2 = l1.copy(), l2.copy()
        launch, stream = float(g.typical.get("launch", 0)), float(g.typical.get("stream", 0))
        for i in at.tolist():
            l1[i] = min(l1[i], launch)
            l2[i] = min(l2[i], stream)
    if wait_lag_scale is not None:
        at = np.flatnonzero((wait_lag_scale != 1) & (g.wait_pred >= 0) & (g.wait_lag != 0))
        changed.append(at)
        wl = list(wl)
        for i, f in zip(at.tolist(), wait_lag_scale[at].tolist()):
            wl[i] *= f
    touched = np.concatenate(changed) if changed else np.zeros(0, np.int64)
    base = prep["base"]
    if base is None:
        recorded = (g.ops["start_ns"].to_numpy(np.float64).tolist(), g.ops["end_ns"].to_numpy(np.float64).tolist())
        whole = (prep["order"], prep["is_end"], 0, prep, p1, l0, l1, l2, own_l, gl, wp, wl)
        if cost is not None:
            cost["ops"] = cost.get("ops", 0) + len(prep["order"])
        if len(touched):  # a graph replayed once, changed (a candidate's): all of it, as it is
            return tuple(map(np.asarray, _visit(*recorded, *whole)))
        # the unchanged replay, kept: every what-if on this graph starts from it (as lists too, which a what-if
        # copies: making them again from the arrays took most of a replay's time on a 64-rank job)
        prep["base_lists"] = _visit(*recorded, *whole)
        base = prep["base"] = tuple(map(np.asarray, prep["base_lists"]))
    if not len(touched):
        return base[0].copy(), base[1].copy()
    k = int(prep["first"][touched].min())
    args = (prep, p1, l0, l1, l2, own_l, gl, wp, wl)
    cost = cost if cost is not None else {}
    scoped = _scoped(g, prep, touched, k, args, cost)
    if scoped is not None:
        return scoped
    cost["ops"] = cost.get("ops", 0) + len(prep["order"]) - k
    ns, ne = _visit(*map(list.copy, prep["base_lists"]), prep["order"], prep["is_end"], k, *args)
    return np.asarray(ns), np.asarray(ne)


def _scoped(g: StepGraph, prep: dict[str, Any], touched: np.ndarray, k: int, args: tuple,
            cost: dict[str, int]) -> tuple[np.ndarray, np.ndarray] | None:
    """The replay of a change to the ops of one capture of several, visiting that capture's ops alone (from its
    first place at or after ``k``); None where it cannot: the change touches several captures, the graph links
    captures other than at collectives, or the change moved the last arrival at a collective shared with another
    capture, whose ranks then move too. Captures meet only at their collectives (analysis/step_graph.py): while
    every shared collective's last arrival stays, no op of another capture can move, and this capture's ops are
    visited in the same order on the same inputs as the whole replay would visit them (the same floats)."""
    capture = g.ops["capture_id"].to_numpy()
    first_capture = capture[touched[0]]
    if (capture[touched] != first_capture).any():
        return None
    scope = _scopes(g, prep).get(int(first_capture))
    if scope is None:
        return None
    places, order, is_end, shared = scope
    kc = int(np.searchsorted(places, k))
    visited = order[kc:]
    ns, ne = prep["scratch"]  # the unchanged replay's lists, given back after: a copy would cost the whole graph
    try:
        _visit(ns, ne, order, is_end, kc, *args)
        cost["ops"] = cost.get("ops", 0) + len(order) - kc
        members, arrived = prep["members"], prep["arrived"]
        if any(max(ns[m] for m in members[gid]) != arrived[gid] for gid in shared):
            return None
        # the unchanged replay, with the visited ops' new times written in
        starts, ends = prep["base"][0].copy(), prep["base"][1].copy()
        if visited:
            at = np.asarray(visited, np.int64)
            starts[at] = [ns[i] for i in visited]
            ends[at] = [ne[i] for i in visited]
        return starts, ends
    finally:
        base_ns, base_ne = prep["base_lists"]
        for i in visited:
            ns[i], ne[i] = base_ns[i], base_ne[i]


def _scopes(g: StepGraph, prep: dict[str, Any]) -> dict[int, tuple]:
    """Per capture, for :func:`_scoped`: its places in the visiting order, its (op, is_end) entries, and the
    collective groups it shares with another capture; empty where the graph has one capture, or an edge other
    than a collective's between two (then every replay visits them all). Made once per graph."""
    kept = prep.get("scopes")
    if kept is not None:
        return kept
    capture = g.ops["capture_id"].to_numpy()
    ids = np.unique(capture)
    preds = [g.pred[:, s] for s in range(4)] + [g.wait_pred]
    crossing = any(((p >= 0) & (capture[np.maximum(p, 0)] != capture)).any() for p in preds) or any(
        capture[j] != capture[i] for i, waits in g.also_waits.items() for j in waits)
    scopes: dict[int, tuple] = {}
    if len(ids) > 1 and not crossing:
        order, is_end = np.asarray(prep["order"], np.int64), np.asarray(prep["is_end"], bool)
        of = capture[order]
        shared: dict[int, list[int]] = {}
        for gid, members in enumerate(g.members):
            held = set(capture[members].tolist())
            if len(held) > 1:
                for c in held:
                    shared.setdefault(int(c), []).append(gid)
        for c in ids.tolist():
            places = np.flatnonzero(of == c)
            scopes[c] = (places, order[places].tolist(), is_end[places].tolist(), shared.get(c, []))
        base_ns = prep["base"][0]
        prep["scratch"] = tuple(map(list.copy, prep["base_lists"]))
        prep["arrived"] = [max(base_ns[m] for m in members) for members in g.members]  # each group's last arrival
    prep["scopes"] = scopes
    return scopes


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


def critical_path(g: StepGraph, start_ns: float, end_ns: float, capture_id: int,
                  times: tuple[np.ndarray, np.ndarray] | None = None, last: int | None = None) -> list[dict[str, Any]]:
    """The critical path of one step [start_ns, end_ns) of ``capture_id`` (aligned clock), latest segment last:
    ``{"what": op|edge kind, "op": index or None, "start_ns", "end_ns"}``; the segments tile the step. ``last``:
    the op of the capture that ends latest by the step's end (:func:`last_ops`), when already known."""
    ns, ne = times if times is not None else replay(g)
    segments: list[dict[str, Any]] = []
    if last is None:
        mine = np.flatnonzero((g.ops["capture_id"].to_numpy() == capture_id) & (ne <= end_ns + 0.5))
        last = int(mine[np.argmax(ne[mine])]) if len(mine) else -1
    if last < 0:
        return [_segment(UNTRACKED, None, start_ns, end_ns)]
    t = end_ns
    if ne[last] < end_ns:
        segments.append(_segment(UNTRACKED, None, ne[last], end_ns))
        t = ne[last]
    i, at_end = last, True
    for _ in range(4 * len(g) + 4):
        if t <= start_ns:
            break
        if at_end:
            nxt, what, lo = _end_binding(g, i, ns, ne)
            segments.append(_segment(what, i, max(lo, start_ns), t))
            t, (i, at_end) = lo, nxt
            continue
        found = _start_binding(g, i, ns, ne)
        if found is None:
            segments.append(_segment(UNTRACKED, None, start_ns, t))
            t = start_ns
            break
        (p, from_start), kind, base = found
        segments.append(_segment(kind, i, max(base, start_ns), t))
        t, i, at_end = base, p, not from_start
    segments.reverse()
    return [s for s in segments if s["end_ns"] > s["start_ns"]]


def last_ops(g: StepGraph, capture_id: int, ends_ns: list[float], ne: np.ndarray,
             among: np.ndarray | None = None) -> list[int]:
    """For each step end, the op of ``capture_id`` that :func:`critical_path` starts from (the first by index of
    those ending latest by then), -1 for none: one sort for all the steps of a capture. ``among``: a boolean mask of
    the ops it may be (one GPU's, :func:`device_units`)."""
    mine = g.ops["capture_id"].to_numpy() == capture_id
    mine = np.flatnonzero(mine if among is None else mine & among)
    order = mine[np.argsort(ne[mine], kind="stable")]
    sorted_ne = ne[order]
    out = []
    for end in ends_ns:
        k = int(np.searchsorted(sorted_ne, end + 0.5, "right")) - 1
        if k < 0:
            out.append(-1)
            continue
        out.append(int(order[np.searchsorted(sorted_ne, sorted_ne[k], "left")]))
    return out


def _segment(what: str, op: int | None, lo: float, hi: float) -> dict[str, Any]:
    return {"what": what, "op": op, "start_ns": float(lo), "end_ns": float(hi)}


def _end_binding(g: StepGraph, i: int, ns, ne):
    """What set op i's end: ((next op, at its end?), label, time the segment starts)."""
    own = ns[i] + g.own_ns[i]
    kind = int(g.kinds[i])
    label = "CUDA call" if kind == HOST else KIND_NAMES[kind]
    best = (own, ((i, False), label, ns[i]))
    if g.wait_pred[i] >= 0:
        w = max([int(g.wait_pred[i]), *g.also_waits.get(i, ())], key=lambda k: ne[k])
        if ne[w] + g.wait_lag[i] > best[0] + 0.5:
            best = (ne[w] + g.wait_lag[i], ((w, True), "wait for the GPU", ne[w]))
    grp = g.group[i]
    if grp >= 0:
        members = g.members[grp]
        m = max(members, key=lambda k: ns[k])
        if ns[m] + g.group_lag[i] > best[0] + 0.5:
            best = (ns[m] + g.group_lag[i], ((int(m), False), "collective (after the last rank arrived)", ns[m]))
    return best[1]


def _start_binding(g: StepGraph, i: int, ns, ne):
    """The edge that set op i's start: ((pred, from its start?), label, time the edge starts), or None."""
    best = None
    for slot in range(4):
        p = g.pred[i, slot]
        if p < 0:
            continue
        base = ns[p] if g.from_start[i, slot] else ne[p]
        value = base + g.lag[i, slot]
        # the recorded binding slot wins a tie: it is the edge the graph chose
        key = (value, slot == g.binding[i])
        if best is None or key > best[0]:
            best = (key, ((int(p), bool(g.from_start[i, slot])), EDGE_LABELS[EDGE_KINDS[slot]], base))
    return None if best is None else best[1]


def slack(g: StepGraph, times: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """Each op's slack, ns: how much later it could start without moving the latest end in the graph."""
    ns, ne = times if times is not None else replay(g)
    horizon = float(ne.max()) if len(ne) else 0.0
    late_s = [horizon] * len(g)
    late_e = [horizon] * len(g)
    order, is_end = _prepared(g)["order"], _prepared(g)["is_end"]
    own, special = g.own_ns.tolist(), g.special_end.tolist()
    wp, wl, grp, gl, members = g.wait_pred.tolist(), g.wait_lag.tolist(), g.group.tolist(), g.group_lag.tolist(), \
        g.members
    pred, lag, fs = g.pred.tolist(), g.lag.tolist(), g.from_start.tolist()
    for i, end in zip(reversed(order), reversed(is_end)):
        if end or not special[i]:
            late_s[i] = min(late_s[i], late_e[i] - own[i])
        if end:
            if wp[i] >= 0:
                for j in (wp[i], *g.also_waits.get(i, ())):
                    late_e[j] = min(late_e[j], late_e[i] - wl[i])
            if grp[i] >= 0:
                for m in members[grp[i]]:
                    late_s[m] = min(late_s[m], late_e[i] - gl[i])
            continue
        for p, lg, from_start in zip(pred[i], lag[i], fs[i]):
            if p < 0:
                continue
            if from_start:
                late_s[p] = min(late_s[p], late_s[i] - lg)
            else:
                late_e[p] = min(late_e[p], late_s[i] - lg)
    return np.maximum(np.asarray(late_s) - ns, 0.0)


def map_steps(g: StepGraph, capture_id: int, spans: list[tuple[int, int]],
              times: tuple[np.ndarray, np.ndarray], on_host: bool = False,
              among: np.ndarray | None = None) -> list[float]:
    """Each step's duration under replayed ``times``: its start moves with the first op of the capture starting at
    or after it, its end with the next step's start, or (the last step) with the last op ending at or before it (the
    latest replayed end of the ops that had ended by it, unless ``on_host``).
    ``spans`` on the graph's (aligned) clock. ``on_host``: steps the host marked (NVTX ranges) move with the
    capture's CUDA calls only: on a GPU-bound trace the first op after a step's start is often a kernel of the step
    before, still queued, which a faster kernel moves far earlier than the host's step. ``among``: a boolean mask
    of the ops the steps move with (one GPU's, :func:`device_units`), else all the capture's."""
    ns, ne = times
    mine = g.ops["capture_id"].to_numpy() == capture_id
    if among is not None:
        mine = mine & among
    if on_host:
        host = mine & (g.kinds == HOST)
        mine = host if host.any() else mine
    mine = np.flatnonzero(mine)
    if not len(mine) or not spans:
        return [float(e - s) for s, e in spans]
    start_all, end_all = g.ops["start_ns"].to_numpy(np.int64), g.ops["end_ns"].to_numpy(np.int64)
    start0, end0 = start_all[mine], end_all[mine]
    by_start = mine[np.argsort(start0, kind="stable")]
    sorted_start = np.sort(start0)
    by_end = mine[np.argsort(end0, kind="stable")]
    sorted_end = np.sort(end0)
    if on_host:  # the host's steps end as its calls do
        latest_end = np.asarray(ne, np.float64)[by_end]
    else:
        # steps of GPU work end when all of it has: the latest replayed end of the ops that had ended by each place,
        # not the replayed end of the op that had ended last (a host thread no longer held back by a dropped
        # synchronization finishes its calls long before the GPU work they queued)
        latest_end = np.maximum.accumulate(np.asarray(ne, np.float64)[by_end])

    def moved_start(b: int) -> float:
        k = int(np.searchsorted(sorted_start, b, "left"))
        if k >= len(by_start):
            return moved_end(b)
        j = by_start[k]
        return b + (ns[j] - start_all[j])

    def moved_end(b: int) -> float:
        k = int(np.searchsorted(sorted_end, b, "right")) - 1
        if k < 0:
            return float(b)
        return b + (latest_end[k] - sorted_end[k])

    out = []
    for n, (s, e) in enumerate(spans):
        lo = moved_start(s)
        follows = n + 1 < len(spans) and spans[n + 1][0] == e
        hi = moved_start(e) if follows else moved_end(e)
        out.append(float(hi - lo))
    return out


def device_units(g: StepGraph, capture_id: int) -> dict[int, np.ndarray]:
    """For a capture whose GPUs are each driven by processes of their own (a job's ranks recorded in one capture),
    one boolean mask over the ops per GPU, by device id: its operations and its processes' CUDA calls; else none.
    A fix on one GPU's kernels shortens that GPU's steps, which the capture's one step definition (another GPU's
    kernel sequence) need not show; where one process drives several GPUs, its steps are theirs together."""
    ops = g.ops
    mine = ops["capture_id"].to_numpy() == capture_id
    gpu = mine & (g.kinds != HOST) & ops["device_id"].notna().to_numpy()
    devices = ops.loc[gpu, ["device_id", "pid"]]
    if devices["device_id"].nunique() < 2 or devices["pid"].isna().any():
        return {}
    pids = devices.drop_duplicates().groupby("device_id")["pid"].agg(lambda p: set(p.tolist()))
    if sum(len(p) for p in pids) != len(set().union(*pids)):  # a process drives two GPUs
        return {}
    host_pid = ops["pid"].astype("float64").to_numpy()
    host = mine & (g.kinds == HOST)
    units = {}
    for device, procs in pids.items():
        on_device = gpu & (ops["device_id"].to_numpy() == device)
        units[int(device)] = on_device | (host & np.isin(host_pid, [float(p) for p in procs]))
    return units


def step_totals(g: StepGraph, capture_id: int, spans: list[tuple[int, int]], times: tuple[np.ndarray, np.ndarray],
                on_host: bool = False, units: dict[int, np.ndarray] | None = None) -> dict[int, float]:
    """The capture's steps summed under replayed ``times`` (:func:`map_steps`), what a saving is measured on:
    ``{-1: total}``, or with ``units`` (:func:`device_units`) each GPU's, by device id."""
    return {device: sum(map_steps(g, capture_id, spans, times, on_host, among))
            for device, among in (units or {-1: None}).items()}


def path_summary(g: StepGraph, segments: list[dict[str, Any]]) -> dict[str, Any]:
    """A path's length, its time by kind of segment and its longest operations."""
    by_what: dict[str, float] = {}
    by_op: dict[tuple, float] = {}
    for s in segments:
        length = s["end_ns"] - s["start_ns"]
        by_what[s["what"]] = by_what.get(s["what"], 0.0) + length
        if s["op"] is not None and s["what"] in (*KIND_NAMES[1:], "CUDA call"):
            row = g.ops.iloc[s["op"]]
            key = (s["what"], row["name"], int(row["capture_id"]))
            by_op[key] = by_op.get(key, 0.0) + length
    top = sorted(by_op.items(), key=lambda kv: -kv[1])[:10]
    return {"length_ns": int(round(sum(s["end_ns"] - s["start_ns"] for s in segments))),
            "by_kind_ns": {k: int(round(v)) for k, v in sorted(by_what.items(), key=lambda kv: -kv[1])},
            "top_ops": [{"kind": k, "name": name, "capture_id": cid, "ns": int(round(v))}
                        for (k, name, cid), v in top]}


__all__ = ["replay", "critical_path", "slack", "map_steps", "path_summary", "HOST"]
