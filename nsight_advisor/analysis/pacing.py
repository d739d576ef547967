"""Paced programs: GPU work that arrives at a fixed period (a camera or render loop, a request loop).

A capture is paced when its steady iterations (nsight_advisor.analysis.iterations, warm-up left out) start at a
regular period, the coefficient of variation of the intervals between their onsets under :data:`MAX_ONSET_CV`, and
its busiest GPU works for under :data:`MAX_BUSY_SHARE` of the analysis window. Its idle time then waits for the
program's pace, which no change on the GPU side recovers: the idle findings of host work and synchronization
(gpu-idle-gap, sync-stall) state the period, the GPU's busy share of each frame and the headroom left in it, and
claim nothing (docs/impact.md).

A training loop whose steps are regular because a data loader too slow for the GPU paces them looks the same on
the GPU timeline; the busy bound keeps such a loop from being called paced only when the GPU works for over half
the period.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nsight_advisor.common import sql_params

if TYPE_CHECKING:
    import duckdb

    from nsight_advisor.analysis.iterations import Iterations

#: Fewest steady iterations (frames) that make a period.
MIN_FRAMES = 5
#: Onset intervals with a coefficient of variation (stdev / mean) under this are a regular period: 0.1 is a frame
#: loop within a few milliseconds at 24 fps, while the steps of a compute-bound loop vary with their own work.
MAX_ONSET_CV = 0.1
#: The busiest GPU works for under this share of the window ("well under the period").
MAX_BUSY_SHARE = 0.5


@dataclass(frozen=True)
class Pacing:
    """A paced capture: its period, how regular, and how much of each frame its busiest GPU works."""

    period_ns: int
    onset_cv: float
    busy_pct: float
    frames: int
    device_id: int | None

    @property
    def headroom_ns(self) -> int:
        """Time per frame in which the GPU idles: what more work per frame could use."""
        return int(round(self.period_ns * (1.0 - self.busy_pct / 100.0)))

    def public(self) -> dict[str, Any]:
        """The report's ``captures[].pacing`` object."""
        return {"period_ns": self.period_ns, "onset_cv": round(self.onset_cv, 4), "busy_pct": round(self.busy_pct, 2),
                "headroom_ns": self.headroom_ns, "frames": self.frames, "device_id": self.device_id}

    def sentence(self) -> str:
        """'paced at 41.2 ms per frame; the GPU is busy 7% of each frame' and the headroom."""
        return (f"paced at {self.period_ns / 1e6:.1f} ms per frame; the GPU is busy {self.busy_pct:.0f}% of each frame, "
                f"leaving {self.headroom_ns / 1e6:.1f} ms of headroom per frame")


def find_pacing(con: duckdb.DuckDBPyConnection, capture_id: int, found: Iterations | None) -> Pacing | None:
    """The capture's pacing, or None when its work does not arrive at a regular period with the GPU mostly idle."""
    if found is None:
        return None
    starts = [start for start, _ in found.spans[found.warmup:]]
    if len(starts) < MIN_FRAMES:
        return None
    intervals = [b - a for a, b in zip(starts, starts[1:])]
    mean = statistics.fmean(intervals)
    if mean <= 0:
        return None
    cv = statistics.pstdev(intervals) / mean
    if cv >= MAX_ONSET_CV:
        return None
    row = sql_params.execute(con, """
        select device_id, sum(duration_ns) filter (where part <> 'idle') as busy_ns, sum(duration_ns) as window_ns
        from gpu_time_partition where capture_id = $c
        group by device_id order by busy_ns desc nulls last, device_id limit 1""", {"c": capture_id}).fetchone()
    if row is None or not row[2]:
        return None
    device, busy, window = row
    share = float(busy or 0) / float(window)
    if share >= MAX_BUSY_SHARE:
        return None
    return Pacing(int(round(statistics.median(intervals))), cv, 100.0 * share, len(starts), device)
