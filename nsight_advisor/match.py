"""Match Nsight Compute kernels to the Nsight Systems timeline of the same program, in one store.

Nsight Compute says why one launch is slow; Nsight Systems says how much of the run that kernel takes. The
``ncu_timeline_match`` view (schema/views/20_ncu_derived.sql) joins them by kernel name (demangled, else base
name) and launch configuration (grid and block), and gives each ncu kernel the share of timeline kernel time
its matching launches take, so a rule can weigh a counter-based diagnosis by what fixing it could save.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb


@dataclass(frozen=True)
class TimelineMatch:
    """One ncu kernel matched to the timeline launches of one nsys capture."""

    ncu_capture_id: int
    kernel_id: int
    nsys_capture_id: int
    matched_by: str  # 'name' or 'short_name'
    launches: int
    total_ns: int
    timeline_share_pct: float


def match_ncu_to_timeline(con: duckdb.DuckDBPyConnection, ncu_capture_id: int | None = None) -> list[TimelineMatch]:
    """Every ncu kernel (of ``ncu_capture_id``, or of all ncu captures) matched to nsys timeline kernels."""
    sql = """SELECT ncu_capture_id, kernel_id, nsys_capture_id, matched_by, launches, total_ns, timeline_share_pct
             FROM ncu_timeline_match
             WHERE $cid IS NULL OR ncu_capture_id = $cid
             ORDER BY ncu_capture_id, kernel_id, nsys_capture_id"""
    return [TimelineMatch(int(a), int(b), int(c), d, int(e), int(f), float(g))
            for a, b, c, d, e, f, g in con.execute(sql, {"cid": ncu_capture_id}).fetchall()]


__all__ = ["TimelineMatch", "match_ncu_to_timeline"]
