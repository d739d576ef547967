"""What a store holds, per capture: the facts behind `nsight-advisor info`.

``describe`` returns plain data (JSON-ready); ``format_description`` turns it into text. Each capture
gets the common facts (tool, version, duration, GPUs, rows per table, what is missing) and then a
per-tool section from :data:`TOOL_SECTIONS`, so another tool's reader can add its own facts.
"""

from __future__ import annotations

from typing import Callable, Sequence

import duckdb

from nsight_advisor.common.text import format_duration_ns

#: Normalized tables counted per capture, per tool.
TOOL_TABLES: dict[str, tuple[str, ...]] = {
    "nsys": ("gpus", "kernels", "api_calls", "memcpys", "memsets", "syncs", "nvtx_ranges", "gpu_metrics"),
    "ncu": ("ncu_kernels", "ncu_metrics", "ncu_rule_results"),
    "kineto": ("gpus", "kernels", "api_calls", "memcpys", "memsets", "syncs", "nvtx_ranges", "cpu_ops", "collectives",
               "kernel_occupancy"),
}


def _nsys_section(con: duckdb.DuckDBPyConnection, capture_id: int) -> dict:
    top = con.execute("""
        SELECT name, count(*) AS launches, sum(duration_ns) AS total_ns FROM kernels
        WHERE capture_id = ? GROUP BY name ORDER BY total_ns DESC, name LIMIT 5""", [capture_id]).fetchall()
    return {"top_kernels": [{"name": n, "launches": c, "total_ns": int(t)} for n, c, t in top]}


#: tool -> function adding that tool's own facts (a dict merged into the capture's description).
def _ncu_section(con: duckdb.DuckDBPyConnection, capture_id: int) -> dict:
    rows = con.execute("""
        SELECT kernel_id, name, duration_ns, sections FROM ncu_kernels
        WHERE capture_id = ? ORDER BY kernel_id""", [capture_id]).fetchall()
    return {"ncu_kernels": [{"kernel_id": k, "name": n, "duration_ns": d, "sections": s.split(",") if s else []}
                            for k, n, d, s in rows]}


def _kineto_section(con: duckdb.DuckDBPyConnection, capture_id: int) -> dict:
    section = _nsys_section(con, capture_id)
    dist = con.execute("SELECT rank, world_size, backend, nccl_version FROM capture_distributed WHERE capture_id = ?",
                       [capture_id]).fetchone()
    if dist is not None:
        section["distributed"] = dict(zip(("rank", "world_size", "backend", "nccl_version"), dist))
    section["collectives"] = [
        {"collective": c, "calls": n, "bytes": int(b) if b is not None else None}
        for c, n, b in con.execute("""
            SELECT collective, count(*), sum(in_msg_bytes) FROM collectives
            WHERE capture_id = ? AND source = 'record_param_comms' GROUP BY 1 ORDER BY 2 DESC, 1""",
                                   [capture_id]).fetchall()]
    return section


TOOL_SECTIONS: dict[str, Callable[[duckdb.DuckDBPyConnection, int], dict]] = {"nsys": _nsys_section,
                                                                             "ncu": _ncu_section,
                                                                             "kineto": _kineto_section}


def describe(con: duckdb.DuckDBPyConnection, capture_ids: Sequence[int]) -> dict:
    """Describe the given captures of the store behind ``con`` as a JSON-ready dict."""
    captures = []
    for cid in capture_ids:
        row = con.execute("""
            SELECT source_path, source_name, format, tool, tool_version, export_schema_version, start_ns, end_ns,
                   duration_ns FROM captures WHERE capture_id = ?""", [cid]).fetchone()
        if row is None:
            continue
        path, name, fmt, tool, version, schema, start, end, duration = row
        gpus = [
            {"device_id": d, "name": n, "sm_count": sm, "compute_capability": cc}
            for d, n, sm, cc in con.execute(
                "SELECT device_id, name, sm_count, compute_capability FROM gpus WHERE capture_id = ? ORDER BY device_id",
                [cid]).fetchall()
        ]
        rows = {t: int(con.execute(f"SELECT count(*) FROM {t} WHERE capture_id = ?", [cid]).fetchone()[0])
                for t in TOOL_TABLES.get(tool, TOOL_TABLES["nsys"])}
        missing = [{"data": d, "reason": r, "capture_option": o} for d, r, o in con.execute(
            "SELECT data, reason, capture_option FROM capture_missing WHERE capture_id = ? ORDER BY data", [cid]).fetchall()]
        notes = [{"data": d, "rows": n, "note": t} for d, n, t in con.execute(
            "SELECT data, rows, note FROM ingest_notes WHERE capture_id = ? ORDER BY data", [cid]).fetchall()]
        deferred = [{"data": d, "export_rows": n} for d, n in con.execute(
            "SELECT data, export_rows FROM capture_deferred WHERE capture_id = ? ORDER BY data", [cid]).fetchall()]
        for d in deferred:  # not loaded: the store's count (0) would say the capture has none
            rows[d["data"]] = None
        entry = {
            "capture_id": cid, "source_path": path, "source_name": name, "format": fmt, "tool": tool,
            "tool_version": version, "export_schema_version": schema, "start_ns": start, "end_ns": end,
            "duration_ns": duration, "gpus": gpus, "rows": rows, "missing": missing, "ingest_notes": notes,
            "deferred": deferred,
        }
        section = TOOL_SECTIONS.get(tool)
        if section is not None:
            entry.update(section(con, cid))
        captures.append(entry)
    return {"captures": captures}


def _fmt_duration(ns: int | None) -> str:
    if ns is None:
        return "unknown (no timed events)"
    return f"{format_duration_ns(ns)} ({ns:,} ns)" if ns >= 1000 else f"{ns} ns"


def format_description(desc: dict) -> str:
    """Human-readable text of :func:`describe`'s result."""
    out: list[str] = []
    for cap in desc.get("captures", []):
        if out:
            out.append("")
        out.append(f"capture {cap['capture_id']}: {cap['source_name']}")
        schema = f" (export schema {cap['export_schema_version']})" if cap.get("export_schema_version") else ""
        out.append(f"  tool:      {cap['tool']} {cap['tool_version']}{schema}, format {cap['format']}")
        out.append(f"  duration:  {_fmt_duration(cap['duration_ns'])}")
        if cap["gpus"]:
            out.append("  GPUs:")
            for g in cap["gpus"]:
                sms = f"{g['sm_count']} SMs" if g["sm_count"] is not None else "SMs unknown"
                cc = f"CC {g['compute_capability']}" if g["compute_capability"] else "CC unknown"
                out.append(f"    [{g['device_id']}] {g['name'] or 'name not recorded'}: {sms}, {cc}")
        else:
            out.append("  GPUs:      none recorded")
        out.append("  rows:")
        width = max((len(t) for t in cap["rows"]), default=0)
        not_loaded = {d["data"] for d in cap.get("deferred", [])}
        for table, n in cap["rows"].items():
            out.append(f"    {table.ljust(width)}  " + (f"{'not loaded':>10}" if table in not_loaded else f"{n:>10,}"))
        if cap.get("top_kernels"):
            out.append("  top kernels by total time:")
            for k in cap["top_kernels"]:
                name = k["name"] if len(k["name"]) <= 90 else k["name"][:89] + "…"
                out.append(f"    {k['total_ns']:>14,} ns  {k['launches']:>7,}x  {name}")
        if cap.get("distributed"):
            d = cap["distributed"]
            out.append(f"  distributed: rank {d['rank']} of {d['world_size'] if d['world_size'] is not None else '?'}"
                       + (f", backend {d['backend']}" if d["backend"] else "")
                       + (f", NCCL {d['nccl_version']}" if d["nccl_version"] else ""))
        if cap.get("collectives"):
            out.append("  collectives (record_param_comms):")
            for c in cap["collectives"]:
                size = f", {c['bytes']:,} bytes in" if c["bytes"] is not None else ""
                out.append(f"    {c['calls']:>7,}x  {c['collective']}{size}")
        if cap.get("ncu_kernels"):
            out.append("  profiled kernels (duration; sections present):")
            for k in cap["ncu_kernels"]:
                name = k["name"] or "?"
                name = name if len(name) <= 70 else name[:69] + "…"
                dur = f"{k['duration_ns']:>14,.0f} ns" if k["duration_ns"] is not None else f"{'duration n/a':>17}"
                out.append(f"    [{k['kernel_id']}] {dur}  {name}")
                out.append(f"        sections: {', '.join(k['sections']) or 'none recorded'}")
        if cap["missing"]:
            out.append("  missing (and the capture option that records it):")
            for m in cap["missing"]:
                out.append(f"    {m['data']}: {m['reason']} -> {m['capture_option']}")
        for n in cap.get("ingest_notes", []):
            out.append(f"  note: {n['data']}: {n['note']} ({n['rows']:,} rows)")
        for d in cap.get("deferred", []):
            rows = f"{d['export_rows']:,} rows in the export; " if d["export_rows"] is not None else ""
            out.append(f"  not loaded: {d['data']} ({rows}the cached store analyze built skips what no rule reads; "
                       f"`query` or `ingest` loads it)")
    return "\n".join(out) + "\n"
