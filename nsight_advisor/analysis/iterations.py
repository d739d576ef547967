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
from typing import TYPE_CHECKING, Any, Sequence

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
    return find_all_iterations(con, [capture_id])[int(capture_id)]


def find_all_iterations(con: duckdb.DuckDBPyConnection, capture_ids: Sequence[int]) -> dict[int, Iterations | None]:
    """:func:`find_iterations` of each capture, asked in a few queries for all of them (two per capture were most
    of the queries of a many-rank analysis outside its rules)."""
    ids = [int(c) for c in capture_ids]
    found = _nvtx_iterations(con, ids)
    rest = [c for c in ids if not found.get(c)]
    if rest:
        found.update(_kernel_sequence_iterations(con, rest))
    out: dict[int, Iterations | None] = {}
    for cid in ids:
        spans, source = found.get(cid) or ([], "")
        out[cid] = Iterations(tuple(spans), source, _warmup(spans)) if len(spans) >= MIN_ITERATIONS else None
    return out


def _warmup(spans: list[tuple[int, int]]) -> int:
    durations = [end - start for start, end in spans]
    median = _quantile(sorted(durations), 0.5)
    warm = 0
    while warm < len(durations) // 2 and durations[warm] > WARMUP_FACTOR * median:
        warm += 1
    return warm


def _nvtx_iterations(con, ids: list[int]) -> dict[int, tuple[list[tuple[int, int]], str]]:
    rows = sql_params.execute(con, """
        with r as (
            select capture_id, pid, tid, domain, depth, regexp_replace(na_nvtx_name(text), '[0-9]+$', '') as name,
                   start_ns, end_ns
            from nvtx_ranges
            where capture_id in (select unnest($ids::integer[])) and event_type <> 'mark' and tid is not null
              and end_ns > start_ns
        ),
        groups as (
            select capture_id, pid, tid, domain, depth, name, count(*) as n, sum(end_ns - start_ns) as covered,
                   max(end_ns) - min(start_ns) as stretch
            from r group by all having count(*) >= $min_n
        ),
        chosen as (
            select g.capture_id, g.pid, g.tid, g.domain, g.depth, g.name
            from groups g join analysis_window w on w.capture_id = g.capture_id
            where g.covered >= $tiling * g.stretch and g.stretch >= $share * w.duration_ns
            -- the longest-running name, the outermost at equal coverage
            qualify row_number() over (partition by g.capture_id
                                       order by g.covered desc, coalesce(g.depth, 0), g.name, g.pid, g.tid) = 1
        )
        select r.capture_id, c.name, r.start_ns, r.end_ns
        from r join chosen c
            on c.capture_id = r.capture_id and c.pid = r.pid and c.tid = r.tid and c.domain = r.domain
           and c.depth is not distinct from r.depth and c.name = r.name
        order by r.capture_id, r.start_ns, r.end_ns""", {"ids": ids, "min_n": MIN_ITERATIONS, "tiling": MIN_TILING,
                                                          "share": MIN_WINDOW_SHARE}).fetchall()
    out: dict[int, tuple[list[tuple[int, int]], str]] = {}
    for cid, name, start, end in rows:
        if cid not in out:
            shown = name + "N" if name.endswith("#") else name
            out[cid] = ([], f"NVTX range '{shown}'")
        out[cid][0].append((int(start), int(end)))
    return out


def _kernel_sequence_iterations(con, ids: list[int]) -> dict[int, tuple[list[tuple[int, int]], str]]:
    rows = sql_params.execute(con, """
        with device as (
            select capture_id, device_id from kernel_rows where capture_id in (select unnest($ids::integer[]))
            group by capture_id, device_id
            qualify row_number() over (partition by capture_id order by sum(duration_ns) desc, device_id) = 1
        ),
        k as (
            select k.capture_id, k.name_id, k.start_ns, k.end_ns from kernel_rows k
            join device d on d.capture_id = k.capture_id and k.device_id is not distinct from d.device_id
        ),
        last as (select capture_id, max(end_ns) as end_ns from k group by capture_id),
        counts as (
            select capture_id, name_id, count(*) as n, min(start_ns) as first_ns from k group by capture_id, name_id
            having count(*) >= $min_n
        ),
        period as (
            -- the launch count shared by the most names (the larger count at a tie): once per iteration
            select capture_id, n from counts group by capture_id, n having count(*) >= 2
            qualify row_number() over (partition by capture_id order by count(*) desc, n desc) = 1
        ),
        members as (
            select c.capture_id, c.name_id, c.first_ns from counts c join period p using (capture_id, n)
        ),
        marker as (
            select capture_id, name_id from members
            qualify row_number() over (partition by capture_id order by first_ns, name_id) = 1
        ),
        starts as (
            select k.capture_id, k.start_ns,
                   row_number() over (partition by k.capture_id order by k.start_ns) as i,
                   coalesce(lead(k.start_ns) over (partition by k.capture_id order by k.start_ns), l.end_ns + 1)
                       as next_ns
            from k join marker m using (capture_id, name_id) join last l using (capture_id)
        ),
        launches as (
            select k.capture_id, k.name_id, k.start_ns,
                   row_number() over (partition by k.capture_id, k.name_id order by k.start_ns) as i
            from k semi join members m on m.capture_id = k.capture_id and m.name_id = k.name_id
        ),
        placed as (
            -- a name launched once per iteration launches its i-th time within the i-th iteration; a name whose
            -- count only happens to match (a kernel of every other step, launched twice in some) does not
            select capture_id, count(*) filter (where bad = 0) as consistent, count(*) as names
            from (select l.capture_id, l.name_id,
                         count(*) filter (where l.start_ns < s.start_ns or l.start_ns >= s.next_ns) as bad
                  from launches l join starts s using (capture_id, i) group by l.capture_id, l.name_id)
            group by capture_id
        )
        select s.capture_id, s.start_ns, s.next_ns, l.end_ns, p.consistent, p.names
        from starts s join placed p using (capture_id) join last l using (capture_id)
        order by s.capture_id, s.start_ns""", {"ids": ids, "min_n": MIN_ITERATIONS}).fetchall()
    per: dict[int, list[tuple]] = {}
    for cid, *row in rows:
        per.setdefault(cid, []).append(tuple(row))
    out: dict[int, tuple[list[tuple[int, int]], str]] = {}
    for cid, mine in per.items():
        # the marker and at least one other name, and most of the names sharing the count, keep to the iterations
        if mine[0][3] < 2 or 2 * mine[0][3] < mine[0][4]:
            continue
        # the last iteration runs to the device's last kernel: what follows the last marker belongs to it
        out[cid] = ([(int(start), int(last) if i == len(mine) - 1 else int(nxt))
                     for i, (start, nxt, last, _, _) in enumerate(mine)], "kernel sequence")
    return out
