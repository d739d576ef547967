"""Nsight Compute pairs: per kernel matched by name (and launch configuration), the metric deltas that explain a
change of its duration, the way Nsight Compute's baselines show them: SM and memory throughput, DRAM throughput,
achieved occupancy, DRAM bytes, and the top warp-stall reasons.

Read from the analysis layer's views (``ncu_kernel_summary``, ``ncu_warp_stalls``); a kernel profiled several
times on a side (replayed launches) is the mean of its profiles.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Sequence

#: (column of ncu_kernel_summary, label, unit): the metrics compared, in the order a reader looks at them.
METRICS = (
    ("duration_ns", "duration", "ns"),
    ("sm_throughput_pct", "SM throughput", "%"),
    ("memory_throughput_pct", "memory throughput", "%"),
    ("dram_throughput_pct", "DRAM throughput", "%"),
    ("achieved_occupancy_pct", "achieved occupancy", "%"),
    ("dram_bytes", "DRAM bytes", "bytes"),
)
#: A percentage metric explains a change when it moved by at least this many points ...
MIN_POINTS = 5.0
#: ... and an amount (bytes, ns) when it moved by at least this share, in percent.
MIN_CHANGE_PCT = 10.0
#: Stall reasons shown per kernel: the largest shares on either side.
TOP_STALLS = 3


def ncu_kernel_metrics(con, capture_ids: Sequence[int]) -> dict[str, dict[str, Any]]:
    """Per kernel key (:func:`nsight_advisor.compare.kernel_keys.kernel_key`) the mean of each metric of :data:`METRICS` over
    its profiles, ``profiles`` (how many), and ``stalls`` ({reason: share %}); {} without Nsight Compute data."""
    import duckdb

    from nsight_advisor.compare.kernel_keys import kernel_key

    cols = ", ".join(f"s.{c}" for c, _, _ in METRICS)
    try:
        rows = con.execute(
            f"SELECT k.name, k.grid_x, k.grid_y, k.grid_z, k.block_x, k.block_y, k.block_z, k.capture_id, "
            f"k.kernel_id, {cols} FROM ncu_kernels k JOIN ncu_kernel_summary s USING (capture_id, kernel_id) "
            "WHERE k.capture_id IN (SELECT unnest(?)) ORDER BY k.capture_id, k.kernel_id", [list(capture_ids)]
        ).fetchall()
        stalls = con.execute(
            "SELECT capture_id, kernel_id, reason, share_pct FROM ncu_warp_stalls "
            "WHERE capture_id IN (SELECT unnest(?)) AND share_pct IS NOT NULL", [list(capture_ids)]).fetchall()
    except duckdb.CatalogException:  # a store without Nsight Compute tables
        return {}
    by_kernel = defaultdict(dict)
    for cid, kid, reason, share in stalls:
        by_kernel[(cid, kid)][reason] = float(share)
    groups: dict[str, list] = defaultdict(list)
    for row in rows:
        groups[kernel_key(row[0], row[1:4], row[4:7])].append(row)
    out = {}
    for key, profiles in groups.items():
        entry: dict[str, Any] = {"profiles": len(profiles)}
        for i, (col, _, _) in enumerate(METRICS):
            values = [float(p[9 + i]) for p in profiles if p[9 + i] is not None]
            entry[col] = sum(values) / len(values) if values else None
        reasons = defaultdict(list)
        for p in profiles:
            for reason, share in by_kernel.get((p[7], p[8]), {}).items():
                reasons[reason].append(share)
        entry["stalls"] = {r: sum(v) / len(profiles) for r, v in reasons.items()}
        out[key] = entry
    return out


def metric_deltas(base: dict[str, Any], head: dict[str, Any]) -> dict[str, Any]:
    """The deltas of one kernel's metrics from ``base`` to ``head`` (entries of :func:`ncu_kernel_metrics`):
    ``metrics`` (each ``metric``, ``label``, ``unit``, ``base``, ``head``, ``change``, ``change_pct``), ``stalls``
    (the top reasons with ``base_pct``, ``head_pct``, ``change_points``) and ``explains`` (the moves beyond
    :data:`MIN_POINTS` points or :data:`MIN_CHANGE_PCT` percent, in words, largest first)."""
    metrics, moved = [], []
    for col, label, unit in METRICS:
        b, h = base.get(col), head.get(col)
        change = None if b is None or h is None else h - b
        pct = None if change is None or not b else 100.0 * change / b
        metrics.append({"metric": col, "label": label, "unit": unit, "base": b, "head": h, "change": change,
                        "change_pct": pct})
        if change is None or col == "duration_ns":
            continue
        if unit == "%" and abs(change) >= MIN_POINTS:
            moved.append((abs(change), f"{label} {b:.1f}% → {h:.1f}% ({change:+.1f} points)"))
        elif unit != "%" and pct is not None and abs(pct) >= MIN_CHANGE_PCT:
            moved.append((abs(pct), f"{label} {pct:+.1f}%"))
    bs, hs = base.get("stalls") or {}, head.get("stalls") or {}
    top = sorted(set(bs) | set(hs), key=lambda r: (-max(bs.get(r, 0.0), hs.get(r, 0.0)), r))[:TOP_STALLS]
    stalls = [{"reason": r, "base_pct": bs.get(r), "head_pct": hs.get(r),
               "change_points": None if r not in bs or r not in hs else hs[r] - bs[r]} for r in top]
    for s in stalls:
        if s["change_points"] is not None and abs(s["change_points"]) >= MIN_POINTS:
            moved.append((abs(s["change_points"]), f"stall '{s['reason']}' {s['base_pct']:.1f}% → "
                                                   f"{s['head_pct']:.1f}% of stalls"))
    moved.sort(key=lambda m: -m[0])
    return {"metrics": metrics, "stalls": stalls, "explains": [text for _, text in moved]}


def ncu_deltas(base: dict[str, dict], head: dict[str, dict]) -> list[dict[str, Any]]:
    """Every kernel profiled on both sides with its metric deltas (:func:`metric_deltas`), the largest change of
    duration first."""
    base, head = _align(base, head)
    out = []
    for key in sorted(set(base) & set(head)):
        d = metric_deltas(base[key], head[key])
        duration = d["metrics"][0]
        out.append({"name": key, "base_profiles": base[key]["profiles"], "head_profiles": head[key]["profiles"],
                    "duration_change_pct": duration["change_pct"], **d})
    out.sort(key=lambda k: (-abs(k["duration_change_pct"] or 0.0), k["name"]))
    return out


def _merge(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """Several kernels' entries as one, each metric weighted by its number of profiles."""
    total = sum(e["profiles"] for e in entries)
    out: dict[str, Any] = {"profiles": total}
    for col, _, _ in METRICS:
        known = [(e[col], e["profiles"]) for e in entries if e.get(col) is not None]
        out[col] = sum(v * n for v, n in known) / sum(n for _, n in known) if known else None
    reasons = {r for e in entries for r in e.get("stalls") or {}}
    out["stalls"] = {r: sum((e.get("stalls") or {}).get(r, 0.0) * e["profiles"] for e in entries) / total
                     for r in reasons}
    return out


def _align(base: dict[str, dict], head: dict[str, dict]) -> tuple[dict, dict]:
    """Match by name alone where one side did not record launch configurations (as for kernel durations:
    :func:`nsight_advisor.compare.comparison.align_configurations`)."""
    from nsight_advisor.compare.kernel_keys import bare_key

    base, head = dict(base), dict(head)
    for this, other in ((base, head), (head, base)):
        for key in [k for k in this if k not in other and bare_key(k) == k]:
            configured = [k for k in other if k not in this and k != key and bare_key(k) == key]
            if configured:
                other[key] = _merge([other.pop(k) for k in configured])
    return base, head
