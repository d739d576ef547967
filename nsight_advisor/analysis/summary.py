"""Facts for the report header and charts, computed from the store with SQL.

``build_summary`` returns plain data (numbers and strings, every list bounded) so that the report
templates only lay it out:

* ``captures``: per capture its file name, tool and version, wall time, GPU busy time and %, kernel
  count and GPUs (name, SMs);
* ``top_kernels``: the kernels with the most GPU time, per capture;
* ``categories``: GPU time by kernel category (GEMM/conv, elementwise, reduction/norm, copy,
  communication, other);
* ``utilization``: per capture, the GPU busy fraction in at most ``UTILIZATION_BINS`` time bins;
* ``roofline``: profiled kernels as (ops:byte, FLOP/s) points with the GPU's roofs, when the ncu view
  ``ncu_kernel_summary`` provides them; ``None`` otherwise.

GPU busy time is the union of kernel, memcpy and memset intervals per device within the analysis window
(the analysis layer's gpu_busy_intervals: overlapping work on one device counts once); a capture's busy %
is that time summed over the devices that ran anything, divided by the window times the number of those
devices.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import duckdb

from nsight_advisor.common import sql_params
from nsight_advisor.analysis.ranks import rank_summary
from nsight_advisor.common.text import first_line

TOP_KERNELS = 10
UTILIZATION_BINS = 120
MAX_GPUS_LISTED = 16
ROOFLINE_MAX_POINTS = 200

CATEGORY_ORDER = ("GEMM/conv", "attention", "elementwise", "reduction/norm", "copy", "communication", "other")
# Display labels of the category codes the view ``kernel_classes`` uses.
CATEGORY_LABELS = {"gemm_conv": "GEMM/conv", "reduction_norm": "reduction/norm"}


def build_summary(con: duckdb.DuckDBPyConnection, capture_ids: Sequence[int]) -> dict[str, Any]:
    """Header facts and chart series for ``capture_ids`` (see the module docstring for the keys)."""
    ids = [int(i) for i in capture_ids]
    if not ids:
        return {"captures": [], "top_kernels": [], "categories": [], "utilization": [], "roofline": None}
    # ints written into the SQL (CREATE ... AS cannot be prepared; see nsight_advisor.common.sql_params)
    con.execute(f"CREATE OR REPLACE TEMP TABLE _summary_ids AS SELECT unnest([{', '.join(map(str, ids))}]::INTEGER[]) "
                "AS capture_id")
    errors: list[str] = []

    def guarded(part: str, compute, default):
        # A summary part that cannot be computed is left empty and named: the report must still come out.
        try:
            return compute()
        except duckdb.Error as exc:
            errors.append(f"{part}: {first_line(exc)}")
            return default

    try:
        busy = guarded("gpu busy time", lambda: _busy_by_capture(con), {})
        captures = guarded("captures", lambda: _captures(con, busy), [])
        out = {
            "captures": captures,
            "top_kernels": guarded("top kernels", lambda: _top_kernels(con), []),
            "categories": guarded("kernel categories", lambda: _categories(con), []),
            "utilization": guarded("utilization", lambda: _utilization(con, captures), []) if busy else [],
            "roofline": guarded("roofline", lambda: _roofline(con, ids), None),
            "ranks": guarded("ranks", lambda: rank_summary(con, ids), []),
        }
        if errors:
            out["errors"] = errors
        return out
    finally:
        con.execute("DROP TABLE IF EXISTS _summary_ids")
        con.execute("DROP TABLE IF EXISTS _summary_islands")


def _rows(con: duckdb.DuckDBPyConnection, sql: str, params: dict | None = None) -> list[dict[str, Any]]:
    rel = sql_params.execute(con, sql, params)
    cols = [d[0] for d in rel.description]
    return [dict(zip(cols, r)) for r in rel.fetchall()]


def _busy_by_capture(con: duckdb.DuckDBPyConnection) -> dict[int, dict[str, Any]]:
    # GPU busy time per capture from the analysis layer: the busy segments of each device's time partition
    # (views/31_time_partition.sql), disjoint pieces that tile the union of its operations within the analysis
    # window: the time the accounting's kernel, copy and memset parts add up to. Utilization bins sum them as
    # they are; merging them into islands first would only cost a pass.
    con.execute("""
        create or replace temp table _summary_islands as
        select capture_id, device_id, start_ns, end_ns from gpu_time_segments
        where capture_id in (select capture_id from _summary_ids) and state <> 'idle'
    """)
    out: dict[int, dict[str, Any]] = {}
    for r in _rows(con, """
        select i.capture_id, count(distinct i.device_id) as active_devices, sum(i.end_ns - i.start_ns) as busy_ns,
               min(i.start_ns) as first_ns, max(i.end_ns) as last_ns, any_value(w.duration_ns) as window_ns
        from _summary_islands i join analysis_window w using (capture_id) group by i.capture_id
    """):
        out[int(r["capture_id"])] = r
    return out


def _captures(con: duckdb.DuckDBPyConnection, busy: dict[int, dict[str, Any]]) -> list[dict[str, Any]]:
    caps = _rows(con, """
        select c.capture_id, c.source_name, c.format, c.tool, c.tool_version, c.start_ns, c.end_ns,
               c.duration_ns as wall_ns,
               (select coalesce(sum(k.launches), 0)::bigint from kernel_totals k where k.capture_id = c.capture_id)
                   as kernel_count,
               (select coalesce(sum(k.total_ns), 0) from kernel_totals k where k.capture_id = c.capture_id)
                   as kernel_time_ns,
               (select count(*) from ncu_kernels n where n.capture_id = c.capture_id) as ncu_kernel_count
        from captures c
        where c.capture_id in (select capture_id from _summary_ids)
        order by c.capture_id
    """)
    gpus = _rows(con, """
        select capture_id, device_id, name, sm_count, compute_capability
        from gpus where capture_id in (select capture_id from _summary_ids)
        order by capture_id, device_id
    """)
    # ncu captures describe their GPU on each profiled kernel rather than in gpus.
    ncu_gpus = _rows(con, """
        select capture_id, null::integer as device_id, device_name as name, max(sm_count) as sm_count,
               max(compute_capability) as compute_capability
        from ncu_kernels where capture_id in (select capture_id from _summary_ids) and device_name is not null
        group by capture_id, device_name order by capture_id, device_name
    """)
    missing = _rows(con, """
        select capture_id, data, capture_option from capture_missing
        where capture_id in (select capture_id from _summary_ids) order by capture_id, data
    """)
    notes = _rows(con, """
        select capture_id, data, rows, note from ingest_notes
        where capture_id in (select capture_id from _summary_ids) order by capture_id, data, note
    """)
    for cap in caps:
        cid = int(cap["capture_id"])
        b = busy.get(cid)
        cap["busy_ns"] = int(b["busy_ns"]) if b else 0
        cap["active_devices"] = int(b["active_devices"]) if b else 0
        window_ns = b["window_ns"] if b else None
        if b and window_ns and window_ns > 0:
            cap["gpu_busy_pct"] = round(100.0 * b["busy_ns"] / (window_ns * b["active_devices"]), 4)
        else:
            cap["gpu_busy_pct"] = None
        own = [g for g in gpus if g["capture_id"] == cid] or [g for g in ncu_gpus if g["capture_id"] == cid]
        cap["gpu_count"] = len(own)
        cap["gpus"] = _group_gpus(own)[:MAX_GPUS_LISTED]
        cap["missing"] = [{"data": m["data"], "capture_option": m["capture_option"]}
                          for m in missing if m["capture_id"] == cid][:20]
        # rows ingest dropped or repaired, and why (e.g. end < start): a report must say what it ignored
        cap["ingest_notes"] = [{"data": n["data"], "rows": n["rows"], "note": n["note"]}
                               for n in notes if n["capture_id"] == cid][:20]
    return caps


def _group_gpus(gpus: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Identical GPUs collapse to one row with a count ('4x NVIDIA A100')."""
    grouped: dict[tuple, dict[str, Any]] = {}
    for g in gpus:
        key = (g["name"], g["sm_count"], g["compute_capability"])
        if key not in grouped:
            grouped[key] = {"name": g["name"], "sm_count": g["sm_count"],
                            "compute_capability": g["compute_capability"], "count": 0}
        grouped[key]["count"] += 1
    return list(grouped.values())


def _top_kernels(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    rows = _rows(con, """
        with per_name as (
            select capture_id, name, sum(launches) as launches, sum(total_ns) as total_ns,
                   sum(total_ns) / sum(launches) as avg_ns
            from kernel_totals where capture_id in (select capture_id from _summary_ids)
            group by capture_id, name
        ),
        totals as (select capture_id, sum(total_ns) as all_ns from per_name group by capture_id),
        ranked as (
            select p.*, 100.0 * p.total_ns / nullif(t.all_ns, 0) as pct_of_kernel_time,
                   row_number() over (partition by p.capture_id order by p.total_ns desc, p.name) as rank
            from per_name p join totals t using (capture_id)
        )
        select capture_id, name, launches, total_ns, avg_ns, pct_of_kernel_time
        from ranked where rank <= $n order by capture_id, rank
    """, {"n": TOP_KERNELS})
    if rows:
        return [_clean(r) for r in rows]
    # ncu-only captures: the profiled kernels by their measured duration.
    rows = _rows(con, """
        with per_name as (
            select capture_id, name, count(*) as launches, sum(duration_ns) as total_ns, avg(duration_ns) as avg_ns
            from ncu_kernels where capture_id in (select capture_id from _summary_ids) group by capture_id, name
        ),
        totals as (select capture_id, sum(total_ns) as all_ns from per_name group by capture_id),
        ranked as (
            select p.*, 100.0 * p.total_ns / nullif(t.all_ns, 0) as pct_of_kernel_time,
                   row_number() over (partition by p.capture_id order by p.total_ns desc nulls last, p.name) as rank
            from per_name p join totals t using (capture_id)
        )
        select capture_id, name, launches, total_ns, avg_ns, pct_of_kernel_time
        from ranked where rank <= $n order by capture_id, rank
    """, {"n": TOP_KERNELS})
    return [_clean(r) for r in rows]


def _categories(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    # Kernels are summed per name first, then each name is classified once (a million launches share a few
    # thousand names) by the analysis layer's classifier (views/10_kernel_classes.sql).
    kernel_rows = _rows(con, """
        with per_name as (
            select name, any_value(short_name) as short_name, sum(total_ns) as total_ns
            from kernel_totals where capture_id in (select capture_id from _summary_ids) group by name
        )
        select na_kernel_category(name, short_name) as category, sum(total_ns) as total_ns
        from per_name group by 1
    """)
    if not kernel_rows:
        # ncu-only captures: the profiled kernels' measured durations.
        kernel_rows = _rows(con, """
            select category, sum(duration_ns)::BIGINT as total_ns from ncu_kernel_classes
            where capture_id in (select capture_id from _summary_ids) and duration_ns > 0 group by category
        """)
    totals: dict[str, int] = {}
    for r in kernel_rows:
        label = str(r["category"] or "other")
        label = CATEGORY_LABELS.get(label, label)
        totals[label] = totals.get(label, 0) + int(r["total_ns"] or 0)
    transfer_ns = con.execute("""
        select coalesce((select sum(duration_ns) from memcpys where capture_id in (select capture_id from _summary_ids)), 0)
             + coalesce((select sum(duration_ns) from memsets where capture_id in (select capture_id from _summary_ids)), 0)
    """).fetchone()[0]
    if transfer_ns:
        totals["copy"] = totals.get("copy", 0) + int(transfer_ns)
    all_ns = sum(totals.values())
    if not all_ns:
        return []
    order = {label: i for i, label in enumerate(CATEGORY_ORDER)}
    out = [{"category": label, "total_ns": ns, "pct": round(100.0 * ns / all_ns, 2)}
           for label, ns in totals.items() if ns > 0]
    out.sort(key=lambda r: (-r["total_ns"], order.get(r["category"], 99)))
    return out[:12]


def _utilization(con: duckdb.DuckDBPyConnection, captures: list[dict[str, Any]]) -> list[dict[str, Any]]:
    # Each capture's bins, then one query for all captures (once per capture: 1.2 s of queries at 256 ranks).
    binned = {}
    for cap in captures:
        if not cap["active_devices"]:
            continue
        start_ns = cap["start_ns"]
        end_ns = cap["end_ns"]
        if start_ns is None or end_ns is None or end_ns <= start_ns:
            continue
        bin_ns = max(1, math.ceil((end_ns - start_ns) / UTILIZATION_BINS))
        binned[int(cap["capture_id"])] = (int(start_ns), bin_ns, math.ceil((end_ns - start_ns) / bin_ns))
    if not binned:
        return []
    busy = {cid: [0.0] * n_bins for cid, (_start, _bin, n_bins) in binned.items()}
    params = {"cids": list(binned), "starts": [v[0] for v in binned.values()],
              "bins": [v[1] for v in binned.values()], "counts": [v[2] for v in binned.values()]}
    # Most islands fall inside one bin and are summed by bin index; only those spanning bins are split.
    for cid, b, v in sql_params.execute(con, """
        with p as (
            select unnest($cids::integer[]) as capture_id, unnest($starts::bigint[]) as s0,
                   unnest($bins::bigint[]) as bin_ns, unnest($counts::bigint[]) as n_bins
        ),
        i as (
            select i.capture_id, i.start_ns, i.end_ns, p.s0, p.bin_ns, p.n_bins,
                   (i.start_ns - p.s0) // p.bin_ns as b0, (i.end_ns - 1 - p.s0) // p.bin_ns as b1
            from _summary_islands i join p using (capture_id)
        ),
        single as (select capture_id, b0 as bin, sum(end_ns - start_ns) as busy_ns from i where b0 = b1 group by 1, 2),
        spanning as (
            select capture_id, bin,
                   sum(least(end_ns, s0 + (bin + 1) * bin_ns) - greatest(start_ns, s0 + bin * bin_ns)) as busy_ns
            from (select *, unnest(range(greatest(b0, 0), least(b1, n_bins - 1) + 1)) as bin from i where b0 < b1)
            group by 1, 2
        )
        select capture_id, bin, busy_ns from single union all select capture_id, bin, busy_ns from spanning
    """, params).fetchall():
        n_bins = binned[int(cid)][2]
        if 0 <= b < n_bins:
            busy[int(cid)][int(b)] += float(v)
    series = []
    for cap in captures:
        cid = int(cap["capture_id"])
        if cid not in binned:
            continue
        start_ns, bin_ns, _n = binned[cid]
        denom = bin_ns * cap["active_devices"]
        series.append({
            "capture_id": cid,
            "start_ns": start_ns,
            "bin_ns": int(bin_ns),
            "busy_pct": [round(min(100.0, 100.0 * float(v) / denom), 2) for v in busy[cid]],
        })
    return series


def _roofline(con: duckdb.DuckDBPyConnection, ids: list[int]) -> dict[str, Any] | None:
    # The view is the analysis layer's (views/20_ncu_derived.sql): its columns are known, nothing is guessed.
    # A fixed order: the same points in the same order on every run, and the same ones kept past the limit.
    try:
        rows = _rows(con, """
            select capture_id, short_name as name, arithmetic_intensity_flop_per_byte as intensity,
                   achieved_flops_per_s as achieved, peak_flops_per_s as peak_flops,
                   peak_dram_bytes_per_s as peak_bytes, duration_ns as duration
            from ncu_kernel_summary
            where capture_id in (select capture_id from _summary_ids)
              and arithmetic_intensity_flop_per_byte > 0 and achieved_flops_per_s > 0
            order by capture_id, kernel_id
            limit $n
        """, {"n": ROOFLINE_MAX_POINTS + 1})
    except duckdb.CatalogException:  # a store made before the Nsight Compute views existed
        return None
    if not rows:
        return None
    points = [{"capture_id": int(r["capture_id"]), "name": str(r["name"]), "intensity_flop_per_byte": float(r["intensity"]),
               "achieved_flops_per_s": float(r["achieved"]),
               "duration_ns": _num(r.get("duration"))} for r in rows[:ROOFLINE_MAX_POINTS]]
    peaks_flops = [float(r["peak_flops"]) for r in rows if r.get("peak_flops")]
    peaks_bytes = [float(r["peak_bytes"]) for r in rows if r.get("peak_bytes")]
    return {
        "points": points,
        "points_left_out": max(0, len(rows) - ROOFLINE_MAX_POINTS),
        "peak_flops_per_s": max(peaks_flops) if peaks_flops else None,
        "peak_bytes_per_s": max(peaks_bytes) if peaks_bytes else None,
    }


def _num(value: Any) -> float | None:
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _clean(row: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for k, v in row.items():
        if isinstance(v, float) and not math.isfinite(v):
            v = None
        elif hasattr(v, "__float__") and not isinstance(v, (int, float, bool)):
            v = float(v)
        out[k] = v
    return out
