"""Iterations of a capture: the repeating unit of its work (a training step, a solver's time step).

Found, in this order:

1. **NVTX ranges that repeat**: ranges of one thread with the same name (PyTorch's per-call numbers and trailing
   digits left out, so ``ProfilerStep#12`` and ``ProfilerStep#13`` are one name) at the same depth, at least
   three, that follow each other back to back (together they cover at least 90% of the stretch from the first's
   start to the last's end) over at least half of the analysis window. An operator's ranges repeat too, but with
   host time between them; a step's ranges tile the run. Each range is an iteration.
2. **The repeating kernel sequence** of the device with the most kernel time: the kernels launched once per
   iteration are the names sharing one launch count (at least three launches, and the count shared by the most
   names); the first of them to launch marks where each iteration starts, and the last iteration ends with the
   last launch of any of them.

Warm-up iterations are the leading ones that took over 1.5 times the median (the first steps: allocation,
compilation, autotuning), at most half of them. docs/impact.md says how the steady state they leave is used.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nsight_advisor.common import sql_params

if TYPE_CHECKING:
    import duckdb

#: Fewest repetitions that make iterations.
MIN_ITERATIONS = 3
#: Ranges of an iteration name must cover this share of the stretch from the first's start to the last's end.
MIN_TILING = 0.9
#: ... and that stretch this share of the analysis window.
MIN_WINDOW_SHARE = 0.5
#: A leading iteration over this multiple of the median is warm-up.
WARMUP_FACTOR = 1.5


@dataclass(frozen=True)
class Iterations:
    """The iterations found in one capture: their [start, end) spans in time order, and where they came from."""

    spans: tuple[tuple[int, int], ...]
    source: str
    warmup: int

    @property
    def steady_start_ns(self) -> int:
        """Start of the first iteration after the warm-up."""
        return self.spans[self.warmup][0]

    @property
    def end_ns(self) -> int:
        """End of the last iteration."""
        return self.spans[-1][1]

    def public(self) -> dict[str, Any]:
        """The report's ``captures[].iterations`` object."""
        durations = sorted(end - start for start, end in self.spans)
        return {"count": len(self.spans), "median_ns": _quantile(durations, 0.5),
                "p10_ns": _quantile(durations, 0.1), "p90_ns": _quantile(durations, 0.9),
                "warmup": self.warmup, "source": self.source,
                # in time order: what `compare` judges wall time per iteration by
                "durations_ns": [end - start for start, end in self.spans]}


def _quantile(ordered: list[int], q: float) -> int:
    """Linear interpolation between closest ranks (numpy's default), rounded to the nanosecond."""
    pos = (len(ordered) - 1) * q
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return int(round(ordered[low] + (ordered[high] - ordered[low]) * (pos - low)))


def find_iterations(con: duckdb.DuckDBPyConnection, capture_id: int) -> Iterations | None:
    """The iterations of ``capture_id`` (NVTX ranges first, else the kernel sequence), or None when nothing repeats."""
    spans, source = _nvtx_iterations(con, capture_id)
    if not spans:
        spans, source = _kernel_sequence_iterations(con, capture_id)
    if len(spans) < MIN_ITERATIONS:
        return None
    return Iterations(tuple(spans), source, _warmup(spans))


def _warmup(spans: list[tuple[int, int]]) -> int:
    durations = [end - start for start, end in spans]
    median = _quantile(sorted(durations), 0.5)
    warm = 0
    while warm < len(durations) // 2 and durations[warm] > WARMUP_FACTOR * median:
        warm += 1
    return warm


def _nvtx_iterations(con, capture_id: int) -> tuple[list[tuple[int, int]], str]:
    row = sql_params.execute(con, """
        with r as (
            select pid, tid, domain, depth, regexp_replace(na_nvtx_name(text), '[0-9]+$', '') as name,
                   start_ns, end_ns
            from nvtx_ranges
            where capture_id = $cid and event_type <> 'mark' and tid is not null and end_ns > start_ns
        ),
        w as (select duration_ns from analysis_window where capture_id = $cid),
        groups as (
            select pid, tid, domain, depth, name, count(*) as n, sum(end_ns - start_ns) as covered,
                   max(end_ns) - min(start_ns) as stretch
            from r group by all having count(*) >= $min_n
        )
        select pid, tid, domain, depth, name
        from groups, w
        where covered >= $tiling * stretch and stretch >= $share * w.duration_ns
        -- the longest-running name, the outermost at equal coverage
        order by covered desc, coalesce(depth, 0), name, pid, tid
        limit 1""", {"cid": capture_id, "min_n": MIN_ITERATIONS, "tiling": MIN_TILING,
                     "share": MIN_WINDOW_SHARE}).fetchone()
    if row is None:
        return [], ""
    pid, tid, domain, depth, name = row
    spans = sql_params.execute(con, """
        select start_ns, end_ns from nvtx_ranges
        where capture_id = $cid and pid = $pid and tid = $tid and domain = $domain
          and depth is not distinct from $depth and event_type <> 'mark' and end_ns > start_ns
          and regexp_replace(na_nvtx_name(text), '[0-9]+$', '') = $name
        order by start_ns""", {"cid": capture_id, "pid": pid, "tid": tid, "domain": domain, "depth": depth,
                               "name": name}).fetchall()
    shown = name + "N" if name.endswith("#") else name
    return [(int(s), int(e)) for s, e in spans], f"NVTX range '{shown}'"


def _kernel_sequence_iterations(con, capture_id: int) -> tuple[list[tuple[int, int]], str]:
    rows = sql_params.execute(con, """
        with device as (
            select device_id from kernel_rows where capture_id = $cid
            group by device_id order by sum(duration_ns) desc, device_id limit 1
        ),
        k as (
            select name_id, start_ns, end_ns from kernel_rows
            where capture_id = $cid and device_id is not distinct from (select device_id from device)
        ),
        counts as (
            select name_id, count(*) as n, min(start_ns) as first_ns from k group by name_id having count(*) >= $min_n
        ),
        period as (
            -- the launch count shared by the most names (the larger count at a tie): once per iteration
            select n from counts group by n having count(*) >= 2 order by count(*) desc, n desc limit 1
        ),
        members as (
            select name_id from counts where n = (select n from period)
        ),
        marker as (
            select name_id from counts where name_id in (select name_id from members)
            order by first_ns, name_id limit 1
        ),
        starts as (
            select start_ns, row_number() over (order by start_ns) as i,
                   coalesce(lead(start_ns) over (order by start_ns), (select max(end_ns) + 1 from k)) as next_ns
            from k where name_id = (select name_id from marker)
        ),
        launches as (
            select name_id, start_ns, row_number() over (partition by name_id order by start_ns) as i
            from k where name_id in (select name_id from members)
        ),
        placed as (
            -- a name launched once per iteration launches its i-th time within the i-th iteration; a name whose
            -- count only happens to match (a kernel of every other step, launched twice in some) does not
            select count(*) filter (where bad = 0) as consistent, count(*) as names
            from (select l.name_id, count(*) filter (where l.start_ns < s.start_ns or l.start_ns >= s.next_ns) as bad
                  from launches l join starts s using (i) group by l.name_id)
        )
        select s.start_ns, s.next_ns, (select max(end_ns) from k), p.consistent, p.names
        from starts s, placed p order by s.start_ns""", {"cid": capture_id, "min_n": MIN_ITERATIONS}).fetchall()
    # the marker and at least one other name, and most of the names sharing the count, keep to the iterations
    if not rows or rows[0][3] < 2 or 2 * rows[0][3] < rows[0][4]:
        return [], ""
    # the last iteration runs to the device's last kernel: what follows the last marker belongs to it
    spans = [(int(start), int(last) if i == len(rows) - 1 else int(nxt))
             for i, (start, nxt, last, _, _) in enumerate(rows)]
    return spans, "kernel sequence"
