"""The ranks of a distributed job side by side: ``summary["ranks"]``, from the collectives matched across ranks.

One entry per job (comm_ranks.job) with at least two ranks: a row per rank (compute, exposed communication, time
spent waiting for late ranks, how often it arrived last, the clock correction its capture got) and the rows of
the rank x time chart of collectives. Up to :data:`MAX_CHART_RANKS` ranks the chart has a row per rank; beyond,
it keeps the job readable and small at any rank count: three rows for the earliest, median and latest arrival at
every collective, plus the outlier ranks (those that wait longest and those that arrive last most often).
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any, Sequence

from nsight_advisor.common import sql_params

if TYPE_CHECKING:
    import duckdb

#: Up to this many ranks the chart draws every rank; beyond, the arrival bands and the outliers.
MAX_CHART_RANKS = 32
#: Outlier ranks drawn beside the bands at many ranks: this many that wait longest, this many most often last.
OUTLIERS_PER_KIND = 4


def rank_summary(con: duckdb.DuckDBPyConnection, capture_ids: Sequence[int]) -> list[dict[str, Any]]:
    """One object per job among ``capture_ids`` with two or more ranks (see the module docstring)."""
    ids = [int(i) for i in capture_ids]
    ranks = _rows(con, """
        with mine as (select * from comm_ranks where capture_id in (select unnest($ids::integer[]))),
        part as (
            select capture_id, device_id,
                   sum(duration_ns) filter (where part = 'kernel') as kernel_ns,
                   sum(duration_ns) filter (where part = 'comm') as comm_ns
            from gpu_time_partition group by all
        ),
        waits as (
            select capture_id, device_id, count(*) as collectives, sum(wait_ns) as wait_ns,
                   count(*) filter (where rank = last_rank) as times_last
            from collective_ranks group by all
        )
        select m.job, m.rank, m.capture_id, m.device_id, m.rank_source,
               coalesce(p.kernel_ns, 0) as kernel_ns, coalesce(p.comm_ns, 0) as comm_ns,
               coalesce(w.collectives, 0) as collectives, coalesce(w.wait_ns, 0) as wait_ns,
               coalesce(w.times_last, 0) as times_last,
               o.offset_ns as clock_offset_ns, o.measured_offset_ns, o.anchors as clock_anchors
        from mine m
        left join part p using (capture_id, device_id)
        left join waits w using (capture_id, device_id)
        left join collective_clock_offsets o on o.capture_id = m.capture_id and o.job = m.job
        order by m.job, m.rank""", {"ids": ids})
    by_job: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in ranks:
        by_job[r["job"]].append(r)
    out = []
    for job, rows in by_job.items():
        if len(rows) < 2:
            continue
        out.append(_job(con, job, rows))
    return out


def _job(con, job: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    collectives = _rows(con, """
        select collective, "index", any_value(process_group) as process_group, count(*) as ranks,
               min(aligned_start_ns) as first_start_ns, max(aligned_start_ns) as last_start_ns,
               median(aligned_start_ns) as median_start_ns, max(aligned_end_ns) as end_ns,
               any_value(skew_ns) as skew_ns, any_value(last_rank) as last_rank,
               any_value(longest_wait_rank) as longest_wait_rank, any_value(end_spread_ns) as end_spread_ns
        from collective_ranks where job = $job
        group by collective, "index", process_group
        order by first_start_ns""", {"job": job})
    t0 = min((c["first_start_ns"] for c in collectives), default=0)
    t1 = max((c["end_ns"] for c in collectives), default=t0)
    corrected = [r for r in rows if r["clock_offset_ns"]]
    entry: dict[str, Any] = {
        "job": job,
        "rank_count": len(rows),
        "matched_collectives": len(collectives),
        "span_ns": int(t1 - t0),
        "clock": {
            "corrected_captures": len({r["capture_id"] for r in corrected}),
            "max_correction_ns": max((abs(int(r["clock_offset_ns"])) for r in corrected), default=0),
            "max_measured_offset_ns": max((abs(int(r["measured_offset_ns"] or 0)) for r in rows), default=0),
        },
        "ranks": rows,
        "collectives": [{**c, "first_start_ns": int(c["first_start_ns"] - t0),
                         "last_start_ns": int(c["last_start_ns"] - t0),
                         "median_start_ns": int(c["median_start_ns"] - t0), "end_ns": int(c["end_ns"] - t0)}
                        for c in collectives],
    }
    entry["chart"] = _chart_rows(con, job, rows, collectives, t0)
    return entry


def _chart_rows(con, job: str, rows, collectives, t0: int) -> dict[str, Any]:
    """The chart's rows: every rank, or the arrival bands and the outliers; bars as [start, end, collective]
    relative to the job's first collective, ns."""
    if len(rows) <= MAX_CHART_RANKS:
        chosen = [(f"rank {r['rank']}", r["rank"]) for r in rows]
        bands: list[dict[str, Any]] = []
    else:
        waiters = sorted((r for r in rows if r["wait_ns"] > 0), key=lambda r: (-r["wait_ns"], r["rank"]))
        lasts = sorted((r for r in rows if r["times_last"] > 0), key=lambda r: (-r["times_last"], r["rank"]))
        picked: dict[int, str] = {}
        for r in lasts[:OUTLIERS_PER_KIND]:
            picked.setdefault(r["rank"], f"rank {r['rank']} (last {r['times_last']}x)")
        for r in waiters[:OUTLIERS_PER_KIND]:
            picked.setdefault(r["rank"], f"rank {r['rank']} (waits longest)")
        chosen = sorted(((label, rank) for rank, label in picked.items()), key=lambda x: x[1])
        bands = [{"label": label, "bars": [[int(c[key] - t0), int(c["end_ns"] - t0), c["collective"]]
                                           for c in collectives]}
                 for label, key in (("earliest arrival", "first_start_ns"), ("median arrival", "median_start_ns"),
                                    ("latest arrival", "last_start_ns"))]
    wanted = [rank for _label, rank in chosen]
    bars: dict[int, list] = defaultdict(list)
    for rank, start, end, collective in sql_params.execute(con, """
            select rank, aligned_start_ns, aligned_end_ns, collective from collective_ranks
            where job = $job and rank in (select unnest($ranks::bigint[])) order by rank, aligned_start_ns""",
            {"job": job, "ranks": wanted}).fetchall():
        bars[int(rank)].append([int(start - t0), int(end - t0), collective])
    return {"all_ranks": not bands, "bands": bands,
            "rows": [{"label": label, "rank": rank, "bars": bars.get(rank, [])} for label, rank in chosen]}


def _rows(con, sql: str, params: dict) -> list[dict[str, Any]]:
    cur = sql_params.execute(con, sql, params)
    names = [d[0] for d in cur.description]
    return [{k: (int(v) if isinstance(v, float) and k.endswith("_ns") else v) for k, v in zip(names, row)}
            for row in cur.fetchall()]
