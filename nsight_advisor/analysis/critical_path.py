"""Walk a step graph's critical path (analysis/step_graph.py) and give each operation its slack, on the times a
replay gives (analysis/replay.py).

**Critical path.** From the operation that ends a step, back along whichever edge set each time: the chain of
operations and waits whose lengths add up to the step, from its start to its end.

**Slack.** How much later an operation could start without moving the end of the last step (a backward pass over
the same order): zero on the critical path.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nsight_advisor.analysis.replay import replay, visiting_order
from nsight_advisor.analysis.step_graph import EDGE_KINDS, HOST, KIND_NAMES, StepGraph

#: A stretch of a step before the earliest recorded operation its path reaches (host work without CUDA calls, or
#: another rank that had not started yet).
UNTRACKED = "before any recorded operation"
#: A critical path's segment label for the lag of each kind of start edge (analysis/step_graph.py EDGE_KINDS).
EDGE_LABELS = {"host": "host work", "launch": "launch latency", "stream": "stream order",
               "cross": "wait for another stream"}


def critical_path(g: StepGraph, start_ns: float, end_ns: float, capture_id: int,
                  times: tuple[np.ndarray, np.ndarray] | None = None, last: int | None = None) -> list[dict[str, Any]]:
    """The critical path of one step [start_ns, end_ns) of ``capture_id`` (aligned clock), latest segment last:
    ``{"what": op|edge kind, "op": index or None, "start_ns", "end_ns"}``; the segments tile the step. ``last``:
    the op of the capture that ends latest by the step's end (:func:`last_ops`), when already known."""
    ns, ne = times if times is not None else replay(g)
    segments: list[dict[str, Any]] = []
    if last is None:
        mine = np.flatnonzero((g.ops["capture_id"] == capture_id) & (ne <= end_ns + 0.5))
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
    mine = g.ops["capture_id"] == capture_id
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
    order, is_end = visiting_order(g)
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
    if not spans:
        return []
    mapping = _step_mapping(g, capture_id, spans, on_host, among)
    if mapping is None:
        return [float(e - s) for s, e in spans]
    by_start, start_k, by_end, end_sorted, end_k, bounds = mapping
    ne_sorted = np.asarray(ne, np.float64)[by_end]
    # steps of GPU work end when all of it has: the latest replayed end of the ops that had ended by each place, not
    # the replayed end of the op that had ended last (a host thread no longer held back by a dropped synchronization
    # finishes its calls long before the GPU work they queued); the host's steps end as its calls do
    latest_end = ne_sorted if on_host else np.maximum.accumulate(ne_sorted)
    # each bound (the steps' starts, then their ends) moved with the first op starting at or after it, else (none
    # left) the latest end by it, else (none ended) kept; float64 throughout, as b + (new - recorded) one at a time
    start_all = g.ops["start_ns"]
    moved = bounds.astype(np.float64)
    late = start_k < len(by_start)
    j = by_start[start_k[late]]
    moved[late] = bounds[late] + (np.asarray(ns, np.float64)[j] - start_all[j])
    ended = ~late & (end_k >= 0)
    k = end_k[ended]
    moved[ended] = bounds[ended] + (latest_end[k] - end_sorted[k])
    n = len(spans)
    lo, hi = moved[:n], moved[n:]
    return (hi - lo).tolist()


def _step_mapping(g: StepGraph, capture_id: int, spans: list[tuple[int, int]], on_host: bool,
                  among: np.ndarray | None) -> tuple | None:
    """What :func:`map_steps` needs of the recorded times, found once per graph, steps and ops (a what-if measures
    every replay on the same ones): the ops by start and by end (with their recorded ends), and for each bound (the
    steps' starts, then each step's end: the next step's start where it follows at once, else its own end) the
    place of the first op starting at or after it and of the last op ending at or before it (for an end that no op
    starts after, or that is not followed). None when no op moves the steps."""
    key = (int(capture_id), bool(on_host), None if among is None else np.packbits(among).tobytes(),
           tuple(map(tuple, spans)))
    cache = g.__dict__.setdefault("_step_mappings", {})
    if key in cache:
        return cache[key]
    mine = g.ops["capture_id"] == capture_id
    if among is not None:
        mine = mine & among
    if on_host:
        host = mine & (g.kinds == HOST)
        mine = host if host.any() else mine
    mine = np.flatnonzero(mine)
    mapping = None
    if len(mine):
        start, end = g.ops["start_ns"], g.ops["end_ns"]
        by_start = mine[np.argsort(start[mine], kind="stable")]
        by_end = mine[np.argsort(end[mine], kind="stable")]
        sorted_start, sorted_end = start[by_start], end[by_end]
        starts = np.asarray([s for s, _e in spans], np.int64)
        ends = np.asarray([e for _s, e in spans], np.int64)
        follows = np.r_[starts[1:] == ends[:-1], False]  # the next step starts where this one ends
        bounds = np.r_[starts, ends]
        start_k = np.searchsorted(sorted_start, bounds, "left")
        start_k[len(spans):][~follows] = len(by_start)  # an end not followed moves with the ops ended by it
        end_k = np.searchsorted(sorted_end, bounds, "right") - 1
        mapping = (by_start, start_k, by_end, sorted_end, end_k, bounds)
    cache[key] = mapping
    return mapping


def device_units(g: StepGraph, capture_id: int) -> dict[int, np.ndarray]:
    """For a capture whose GPUs are each driven by processes of their own (a job's ranks recorded in one capture),
    one boolean mask over the ops per GPU, by device id: its operations and its processes' CUDA calls; else none.
    A fix on one GPU's kernels shortens that GPU's steps, which the capture's one step definition (another GPU's
    kernel sequence) need not show; where one process drives several GPUs, its steps are theirs together."""
    ops = g.ops
    mine = ops["capture_id"] == capture_id
    gpu = mine & (g.kinds != HOST) & ops.present("device_id")
    device_of, host_pid = ops["device_id"], ops["pid"]  # float64, NaN where missing
    if len(np.unique(device_of[gpu])) < 2 or np.isnan(host_pid[gpu]).any():
        return {}
    pids: dict[float, set[float]] = {}
    for device, pid in set(zip(device_of[gpu].tolist(), host_pid[gpu].tolist())):
        pids.setdefault(device, set()).add(pid)
    if sum(len(p) for p in pids.values()) != len(set().union(*pids.values())):  # a process drives two GPUs
        return {}
    host = mine & (g.kinds == HOST)
    units = {}
    for device, procs in sorted(pids.items()):
        on_device = gpu & (device_of == device)
        units[int(device)] = on_device | (host & np.isin(host_pid, sorted(procs)))
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
            row = g.ops.row(s["op"])
            key = (s["what"], row["name"], int(row["capture_id"]))
            by_op[key] = by_op.get(key, 0.0) + length
    top = sorted(by_op.items(), key=lambda kv: -kv[1])[:10]
    return {"length_ns": int(round(sum(s["end_ns"] - s["start_ns"] for s in segments))),
            "by_kind_ns": {k: int(round(v)) for k, v in sorted(by_what.items(), key=lambda kv: -kv[1])},
            "top_ops": [{"kind": k, "name": name, "capture_id": cid, "ns": int(round(v))}
                        for (k, name, cid), v in top]}


__all__ = ["critical_path", "slack", "map_steps", "path_summary", "HOST"]
