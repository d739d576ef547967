"""PyTorch profiler traces made in CUPTI range-profiler mode: counters per kernel or per range, no kernel timeline.

With ``experimental_config=_ExperimentalConfig(profiler_metrics=[...])`` Kineto's CuptiRangeProfiler replaces the
kernel timeline: each ``cuda_profiler_range`` event is one kernel (``profiler_measure_per_kernel=True``, the event
named after the kernel) or one user range, its ``args`` the CUPTI metric values by name. Kineto spreads the events
evenly over the profiling span ("the actual times do not really matter here", CuptiRangeProfiler.cpp), so their
``ts``/``dur`` are not measurements and are not used.

The counters are the same metrics Nsight Compute collects, in base units, so they are stored as profiled kernels
(``ncu_kernels``/``ncu_metrics``, the kernel's duration from ``gpu__time_duration.sum`` when collected) and the
Nsight Compute rules read whatever metrics were chosen; an ingest note says what the trace holds.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from nsight_advisor.ingest.kernel_names import short_kernel_name

CATEGORY = "cuda_profiler_range"
_NUMBER = (int, float, Decimal)  # the trace reader parses JSON numbers as Decimal
#: Most metrics kept per range: a trace lists a handful; this bounds a hostile one.
MAX_METRICS = 2000


class ProfilerRanges:
    """Collects the ``cuda_profiler_range`` events of one trace."""

    def __init__(self) -> None:
        self.ranges: list[tuple[str, Any, dict[str, float]]] = []

    def add(self, event: dict, get) -> None:
        """One event: its name, device and numeric counters (``args`` other than ``device``)."""
        name = get("name")
        args = get("args") or {}
        if type(name) is not str or not isinstance(args, dict):
            return
        metrics = {str(k): float(v) for k, v in list(args.items())[:MAX_METRICS]
                   if type(v) in _NUMBER and k != "device" and v == v and abs(float(v)) != float("inf")}
        self.ranges.append((name, args.get("device"), metrics))


def write_ranges(ing, cid: int, ranges: ProfilerRanges) -> None:
    """Store the ranges as profiled kernels of capture ``cid`` and note (``ing.note``) what the trace holds."""
    if not ranges.ranges:
        return
    kernels, metrics = [], []
    names = set()
    for kernel_id, (name, _device, values) in enumerate(ranges.ranges):
        names.update(values)
        kernels.append((cid, kernel_id, name, short_kernel_name(name) or name, values.get("gpu__time_duration.sum")))
        metrics.extend((cid, kernel_id, metric, value) for metric, value in values.items())
    ing.con.executemany("INSERT INTO ncu_kernels (capture_id, kernel_id, name, short_name, duration_ns) "
                        "VALUES (?, ?, ?, ?, ?)", kernels)
    if metrics:
        ing.con.executemany("INSERT INTO ncu_metrics (capture_id, kernel_id, metric, value) VALUES (?, ?, ?, ?)",
                            metrics)
    timed = "with" if any(k[4] is not None for k in kernels) else "without"
    ing.note(cid, "ncu_kernels", len(kernels),
             f"CUPTI range-profiler trace: {len(kernels)} cuda_profiler_range event(s) with {len(names)} counter(s) "
             f"each and no kernel timeline; read as profiled kernels ({timed} gpu__time_duration.sum); their "
             "timestamps are spread evenly by Kineto, not measured")
