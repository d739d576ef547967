"""Each finding's share of its steps' critical path: the share of the path its operations hold (docs/impact.md).

A finding's operations are what its fix changes in the replay (engine/whatif.py): the kernels it shortens (their
time on the path), the host work it removes (the part of each stretch of host work on the path that its gaps
hold), the synchronizations it stops waiting (the relaunch after each one's return: the path from the return until
a GPU operation runs again, at most the time the host sat blocked in the call on the path, the GPU work the
relaunch could then hide behind) and the GPU operations it lets start promptly (the launch latency and stream
order segments before them beyond the capture's typical lags). The paths are those of every replayed step of the
finding's capture, walked once on the recorded times.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from nsight_advisor.analysis.critical_path import EDGE_LABELS, critical_path, last_ops
from nsight_advisor.analysis.step_graph import KIND_NAMES, StepGraph
from nsight_advisor.common.runs import value_windows

#: Segment labels (analysis/critical_path.py) of an operation's own time, of the host's work before a call and of
#: a blocking call's wait for the GPU.
_OWN = frozenset({*KIND_NAMES[1:], "CUDA call"})
_GPU_OWN = frozenset({*KIND_NAMES[1:], "collective (after the last rank arrived)"})
_HOST_WORK = "host work"
_GPU_WAIT = "wait for the GPU"


@dataclass
class StepPaths:
    """The critical paths of a model's replayed steps, as flat arrays of segments."""

    capture: np.ndarray  # the capture whose step the segment belongs to
    op: np.ndarray  # the segment's op, -1 for none
    what: np.ndarray  # 0 an op's own time, 1 host work, 2 a wait for the GPU, 3 anything else
    length_ns: np.ndarray
    total_ns: dict[int, float]  # each capture's summed path length (= its steps' summed length, per GPU it has)
    # each time the path leaves a blocking call's wait (a run: the wait's own segment, the return, and the path
    # after it until a GPU operation runs again, the host's work, calls and launch latency of the relaunch): the
    # call, its capture and GPU (as ``device``), and what dropping the wait can take back of the path, the run's
    # length but at most the time the host sat blocked on the path before it (the GPU work the relaunch can then
    # hide behind)
    run_op: np.ndarray
    run_capture: np.ndarray
    run_device: np.ndarray
    run_held_ns: np.ndarray
    # where a capture's GPUs run processes of their own (device_units), each GPU's paths apart: the GPU each
    # segment's path ended on (-1: the capture's) and each such GPU's summed path length
    device: np.ndarray
    device_total_ns: dict[tuple[int, int], float]
    # a launch-latency or stream-order segment: its length beyond the capture's typical lag of that edge, the part
    # a GPU operation that starts promptly (replay's prompt_start) no longer waits (0 for the others)
    excess_ns: np.ndarray

    def share_pct(self, capture_id: int, change: dict[str, Any], device_id: int | None = None) -> float | None:
        """The share of ``capture_id``'s paths (those of its GPU ``device_id`` where its GPUs were walked apart) held
        by the operations a replay ``change`` (the keyword arguments of ``replay``) alters, percent; None when
        there is no path."""
        w = self._window(capture_id)  # the capture's segments lie together: a finding costs its capture's paths
        what, length_ns = self.what[w], self.length_ns[w]
        mine = (self.capture[w] == capture_id) & (self.op[w] >= 0)
        total = self.total_ns.get(int(capture_id), 0.0)
        key = (int(capture_id), -1 if device_id is None else int(device_id))
        if key in self.device_total_ns:
            total = self.device_total_ns[key]
            mine &= self.device[w] == key[1]
        if total <= 0:
            return None
        op = np.maximum(self.op[w], 0)
        held = np.zeros(len(op))
        own = change.get("own_scale")
        if own is not None:
            held += np.where((what == 0) & (own[op] < 1), length_ns, 0.0)
        lag = change.get("host_lag_scale")
        if lag is not None:
            held += np.where(what == 1, length_ns * (1.0 - np.clip(lag[op], 0.0, 1.0)), 0.0)
        drop = change.get("drop_wait")
        runs = 0.0
        if drop is not None and len(self.run_op):
            in_scope = self.run_capture == capture_id
            if key in self.device_total_ns:
                in_scope &= self.run_device == key[1]
            runs = float(self.run_held_ns[in_scope & drop[self.run_op]].sum())
        wait = change.get("wait_lag_scale")
        if wait is not None:  # the wait's own segment is the return's latency after the GPU work
            held += np.where((what == 2) & ~(drop[op] if drop is not None else False),
                             length_ns * (1.0 - np.clip(wait[op], 0.0, 1.0)), 0.0)
        prompt = change.get("prompt_start")
        if prompt is not None:
            held += np.where((what == 3) & prompt[op], self.excess_ns[w], 0.0)
        return round(100.0 * min((float(held[mine].sum()) + runs) / total, 1.0), 1)

    def _window(self, capture_id: int) -> slice:
        """The segments from the capture's first to its last (made once)."""
        windows = self.__dict__.get("_windows")
        if windows is None:
            windows = self.__dict__["_windows"] = value_windows(self.capture)
        return windows.get(int(capture_id), slice(0, 0))


def step_paths(graph: StepGraph, steps: dict[int, list[tuple[int, int]]],
               base: tuple[np.ndarray, np.ndarray], units: dict[int, dict[int, np.ndarray]] | None = None) -> StepPaths:
    """The critical path of every one of ``steps`` (per capture, graph clock) on the replayed times ``base``; in a
    capture with ``units`` (analysis/critical_path.py device_units), each GPU's: from the operation of its own
    that ends each step."""
    capture, op, what, length, device, excess = [], [], [], [], [], []
    runs: list[list] = []  # [op, capture, device, blocked, relaunch]
    typical = {EDGE_LABELS["launch"]: float(graph.typical.get("launch", 0)),
               EDGE_LABELS["stream"]: float(graph.typical.get("stream", 0))}
    total: dict[int, float] = {}
    per_device: dict[tuple[int, int], float] = {}
    ns = base[0]
    walks = [(cid, spans, dev, among) for cid, spans in steps.items()
             for dev, among in ((units or {}).get(cid) or {-1: None}).items()]
    for cid, spans, dev, among in walks:
        lasts = last_ops(graph, cid, [e for _s, e in spans], base[1], among)
        for (s, e), last in zip(spans, lasts):
            run = None  # the wait the path is relaunching from
            for seg in critical_path(graph, s, e, cid, base, last=last):
                capture.append(cid)
                device.append(dev)
                op.append(-1 if seg["op"] is None else seg["op"])
                label = seg["what"]
                what.append(0 if label in _OWN else 1 if label == _HOST_WORK else 2 if label == _GPU_WAIT else 3)
                length.append(seg["end_ns"] - seg["start_ns"])
                excess.append(max(length[-1] - typical[label], 0.0) if label in typical else 0.0)
                total[cid] = total.get(cid, 0.0) + length[-1]
                per_device[(cid, dev)] = per_device.get((cid, dev), 0.0) + length[-1]
                if what[-1] == 2:  # the call would have returned at its start plus its own time, without the wait
                    i = seg["op"]
                    run = [i, cid, dev, max(seg["end_ns"] - max(float(ns[i] + graph.own_ns[i]), s), 0.0), 0.0]
                    runs.append(run)
                elif label in _GPU_OWN:  # the GPU runs again: the relaunch is over
                    run = None
                if run is not None:
                    run[4] += length[-1]
    return StepPaths(np.asarray(capture, np.int64), np.asarray(op, np.int64), np.asarray(what, np.int8),
                     np.asarray(length, np.float64), total,
                     np.asarray([r[0] for r in runs], np.int64), np.asarray([r[1] for r in runs], np.int64),
                     np.asarray([r[2] for r in runs], np.int64),
                     np.asarray([min(r[3], r[4]) for r in runs], np.float64),
                     np.asarray(device, np.int64), {k: v for k, v in per_device.items() if k[1] >= 0},
                     np.asarray(excess, np.float64))
