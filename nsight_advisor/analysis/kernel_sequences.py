"""CUDA-graph and fusion candidates: runs of short kernels that the GPU runs one after another on a stream, each
waiting for its launch, in the same order every step; and what the steps would save as one graph launch.

**A run** (within one step, on one stream): consecutive kernels each at most :data:`SHORT_KERNEL_NS` long, each
after the first **launch-bound**: its stream sat idle at least :data:`MIN_LAUNCH_GAP_NS` before it, and its launch call
began no earlier than the capture's typical launch latency before the previous kernel ended (the launch queue was
empty: the kernel waited for the host). A run of at least
:data:`MIN_KERNELS` kernels is a candidate when the same names in the same order form a run in **every** step of
its capture (a capture of one step: each of its runs).

**The saving** (replayed, analysis/replay.py): the run as one graph launch. Its first kernel keeps its
launch; the others wait only for that launch (the typical launch latency) and their stream (the lag of a kernel
queued in time, :func:`back_to_back_ns`), and the host no longer makes their launch calls nor does its work between them (a captured graph replays
without the framework's code between its kernels). The steps' durations before less after, scaled to all steps
where only the middle ones were replayed. A graph launch costs somewhat more than one kernel launch; that cost is
not modeled, so the saving is an upper bound of the same kind as Daydream's (docs/impact.md).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from nsight_advisor.analysis.critical_path import step_totals
from nsight_advisor.analysis.replay import replay
from nsight_advisor.analysis.step_graph import KERNEL, StepGraph

#: A kernel this short or shorter is a graph candidate's member: launching it costs about as much as running it.
SHORT_KERNEL_NS = 50_000
#: A stream idle this long or longer before a kernel that waited for its launch is a launch-bound gap, ns.
MIN_LAUNCH_GAP_NS = 1_000
#: The fewest kernels of a candidate.
MIN_KERNELS = 3
#: Candidates replayed (those with the most launch-bound gap time); the others are not reported.
MAX_REPLAYED = 12
#: Candidates reported, largest saving first.
MAX_REPORTED = 5


@dataclasses.dataclass
class Sequence:
    """One candidate: the kernels' names in order, and each run of them (op indices) in every step of each capture
    where they form one (the ranks of a job run the same program: their runs are one candidate)."""

    names: tuple[str, ...]
    streams: dict[int, tuple[int | None, int | None]]  # capture -> (device, stream) of its runs
    runs: list[list[int]]
    gap_ns: float  # the launch-bound gaps inside all its runs, ns

    def public(self, g: StepGraph, steps: int, saving_ns: int) -> dict[str, Any]:
        """The candidate as the report's ``summary.graph_candidates.candidates[]`` entry."""
        starts, ends = g.ops["start_ns"], g.ops["end_ns"]
        kernel_ns = [int(ends[r].sum() - starts[r].sum()) for r in (np.asarray(run) for run in self.runs)]
        return {"streams": [{"capture_id": c, "device_id": d, "stream_id": s}
                            for c, (d, s) in sorted(self.streams.items())],
                "kernels": list(self.names), "kernel_count": len(self.names),
                "runs": len(self.runs), "steps": steps, "run_kernel_ns": int(np.median(kernel_ns)),
                "run_gap_ns": int(round(self.gap_ns / len(self.runs))), "saving_ns": saving_ns,
                "saving_per_step_ns": int(round(saving_ns / max(steps, 1)))}


def find_sequences(g: StepGraph, steps: dict[int, list[tuple[int, int]]]) -> list[Sequence]:
    """The candidates of each capture's ``steps`` (graph clock), most launch-bound gap time first."""
    ops = g.ops
    kernel = ops["kind"] == KERNEL
    starts, ends = ops["start_ns"], ops["end_ns"]
    names = np.where(ops.present("name"), ops["name"], "").astype(object)
    cids = ops["capture_id"]
    devices, streams = ops.ints("device_id"), ops.ints("stream_id")
    by_names: dict[tuple[str, ...], Sequence] = {}
    for cid, spans in sorted(steps.items()):
        per_step = _runs(g, np.flatnonzero(kernel & (cids == cid)), spans, starts, ends, names, devices, streams)
        if not per_step:
            continue
        for key in sorted(set(per_step[0]).intersection(*per_step[1:])):
            dev, stream, seq = key
            cand = by_names.setdefault(seq, Sequence(seq, {}, [], 0.0))
            if cid in cand.streams:  # the same names on a second stream of this capture: the first one stands
                continue
            cand.streams[int(cid)] = (None if dev < 0 else int(dev), None if stream < 0 else int(stream))
            cand.runs += [run for step in per_step for run, _gap in step[key]]
            cand.gap_ns += sum(gap for step in per_step for _run, gap in step[key])
    found = list(by_names.values())
    found.sort(key=lambda c: (-c.gap_ns, c.names))
    return found


def _runs(g: StepGraph, mine: np.ndarray, spans, starts, ends, names, devices, streams) -> list[dict[tuple, list]]:
    """Each step's runs of one capture's kernels ``mine``: [{(device, stream, names): [(ops, launch-bound gap)]}]."""
    out: list[dict[tuple, list]] = [{} for _ in spans]
    if not len(mine) or not spans:
        return out
    lo = np.array([s for s, _e in spans], np.int64)
    hi = np.array([e for _s, e in spans], np.int64)
    step = np.searchsorted(lo, starts[mine], "right") - 1
    inside = (step >= 0) & (starts[mine] < hi[np.maximum(step, 0)])
    k, step = mine[inside], step[inside]
    order = np.lexsort((starts[k], streams[k], devices[k], step))
    k, step = k[order], step[order]
    prev = np.r_[-1, k[:-1]]
    has_prev = np.r_[False, (step[1:] == step[:-1]) & (devices[k[1:]] == devices[k[:-1]])
                     & (streams[k[1:]] == streams[k[:-1]])]
    p = np.maximum(prev, 0)
    short = ends[k] - starts[k] <= SHORT_KERNEL_NS
    idle = np.where(has_prev, starts[k] - ends[p], 0)
    call = g.pred[k, 1]
    # launch-bound: the stream went idle (after the kernel just before it on the stream, nothing between), and the
    # launch call began no earlier than the typical launch latency before that kernel ended (the queue was empty)
    bound = (has_prev & (g.pred[k, 2] == prev) & (idle >= MIN_LAUNCH_GAP_NS) & (call >= 0)
             & (starts[np.maximum(call, 0)] + g.typical.get("launch", 0) >= ends[p]))
    joins = short & bound & np.r_[False, short[:-1]]
    run_id = np.cumsum(short & ~joins)
    members = np.flatnonzero(short)
    cuts = np.flatnonzero(np.diff(run_id[members])) + 1
    for group in np.split(members, cuts):
        if len(group) < MIN_KERNELS:
            continue
        ops_ = k[group].tolist()
        key = (int(devices[ops_[0]]), int(streams[ops_[0]]), tuple(str(names[o]) for o in ops_))
        out[int(step[group[0]])].setdefault(key, []).append((ops_, float(idle[group[1:]].sum())))
    return out


def back_to_back_ns(g: StepGraph) -> int:
    """The lag between two kernels of a stream when the second was queued in time: the median stream lag of the
    kernels whose launch call ended before the kernel ahead of them did (the capture's typical stream lag when
    none was queued). A graph's kernels follow each other so."""
    k = np.flatnonzero((g.pred[:, 1] >= 0) & (g.pred[:, 2] >= 0) & (g.kinds == KERNEL))
    if not len(k):
        return g.typical.get("stream", 0)
    ends = g.ops["end_ns"]
    queued = k[ends[g.pred[k, 1]] < ends[g.pred[k, 2]]]
    lags = g.lag[queued, 2]
    lags = lags[lags >= 0]
    return int(np.median(lags)) if len(lags) else g.typical.get("stream", 0)


def as_one_launch(g: StepGraph, runs: list[list[int]]) -> dict[str, Any]:
    """The replay's change (``replay.replay``'s keyword arguments) that launches each run as one graph (see
    the module docstring): its kernels launched by the run's first call after the typical launch latency, queued
    back to back on their stream, the other launch calls gone."""
    own_scale, host_lag_scale = np.ones(len(g)), np.ones(len(g))
    launch_lag = float(g.typical.get("launch", 0))
    stream_lag = g.__dict__.get("_back_to_back")
    if stream_lag is None:  # once per graph, not once per candidate
        stream_lag = g.__dict__["_back_to_back"] = back_to_back_ns(g)
    at, calls, stream_lags = [], [], []
    for run in runs:
        first_call = int(g.pred[run[0], 1])
        if first_call < 0:
            continue
        for k in run[1:]:
            call = int(g.pred[k, 1])
            if call >= 0 and call != first_call:
                own_scale[call] = 0.0
                host_lag_scale[call] = 0.0
            at.append(k)
            calls.append(first_call)
            stream_lags.append(float(min(g.lag[k, 2], stream_lag)) if g.pred[k, 2] >= 0 else float("nan"))
    return {"own_scale": own_scale, "host_lag_scale": host_lag_scale,
            "relaunch": (np.asarray(at, np.int64), np.asarray(calls, np.int64), np.full(len(at), launch_lag),
                         np.asarray(stream_lags, np.float64))}


def graph_candidates(g: StepGraph, steps: dict[int, list[tuple[int, int]]], base: tuple[np.ndarray, np.ndarray],
                     kept: dict[int, tuple[int, int]], on_host: dict[int, bool] | None = None,
                     units: dict[int, dict[int, np.ndarray]] | None = None) -> dict[str, Any]:
    """The report's ``summary.graph_candidates``: the candidates with the largest replayed savings, and the saving
    of all candidates found launched as graphs together. ``on_host``: the captures whose steps the host marked;
    ``units``: the captures whose GPUs' steps are measured apart (critical_path.step_totals)."""
    on_host, units = on_host or {}, units or {}
    found = find_sequences(g, steps)

    def total(cid: int, spans: list[tuple[int, int]], times: tuple[np.ndarray, np.ndarray]) -> float:
        return sum(step_totals(g, cid, spans, times, on_host.get(cid, False), units.get(cid)).values())

    before = {cid: total(cid, spans, base) for cid, spans in steps.items()}

    def saving(runs: list[list[int]]) -> dict[int, float]:
        after = replay(g, **as_one_launch(g, runs))
        out = {}
        for cid, spans in steps.items():
            shown, count = kept.get(cid, (len(spans), len(spans)))
            out[cid] = (before[cid] - total(cid, spans, after)) * count / max(shown, 1)
        return out

    rows = []
    for cand in found[:MAX_REPLAYED]:
        saved = saving(cand.runs)
        steps_in = sum(kept.get(c, (1, len(steps[c])))[1] for c in cand.streams)
        rows.append(cand.public(g, steps_in, max(int(round(sum(saved[c] for c in cand.streams))), 0)))
    rows.sort(key=lambda r: (-r["saving_ns"], r["kernels"]))
    every = saving([run for cand in found for run in cand.runs]) if found else {}
    return {"found": len(found), "candidates": rows[:MAX_REPORTED],
            "all_saving_ns": {str(cid): max(int(round(v)), 0) for cid, v in sorted(every.items())},
            "params": {"short_kernel_ns": SHORT_KERNEL_NS, "min_launch_gap_ns": MIN_LAUNCH_GAP_NS,
                       "min_kernels": MIN_KERNELS}}
