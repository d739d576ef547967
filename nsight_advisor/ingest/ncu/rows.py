"""Write one Nsight Compute capture into the normalized tables; shared by the .ncu-rep and CSV readers.

A reader collects kernels, metric rows (already in base units) and rule results; this module derives the
``ncu_kernels`` columns from the metrics (the same way for both inputs), fills ``gpus`` from the
``device__attribute_*`` metrics plus the built-in datasheet table, records in ``capture_missing`` which
roofline/occupancy inputs the capture lacks and the ``--section`` that collects them, and bulk-inserts
everything through DataFrames.
"""

from __future__ import annotations

import datetime as _dt
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd

from nsight_advisor.common.errors import InputError
from nsight_advisor.ingest.kernel_names import short_kernel_name  # noqa: F401 - this module's API (__all__)
from nsight_advisor.schema.hardware import lookup_gpu


@dataclass
class NcuKernel:
    """One profiled result as a reader saw it; launch fields the metrics lack fall back to these."""

    kernel_id: int
    name: str | None
    launch_id: int | None = None
    short_name: str | None = None
    mangled_name: str | None = None
    pid: int | None = None
    stream_id: int | None = None
    sections: list[str] = field(default_factory=list)
    grid: tuple[int, int, int] | None = None
    block: tuple[int, int, int] | None = None
    device_id: int | None = None
    compute_capability: str | None = None


@dataclass
class NcuCapture:
    """Everything one reader extracted from one capture file."""

    path: Path
    fmt: str  # 'ncu-rep' or 'ncu-csv'
    tool_version: str
    kernels: list[NcuKernel]
    # (kernel_id, metric, value, unit, text_value), values in base units
    metrics: list[tuple[int, str, float | None, str, str | None]]
    # dicts with the ncu_rule_results columns except capture_id
    rules: list[dict[str, Any]] = field(default_factory=list)
    # (data, rows, note)
    notes: list[tuple[str, int, str]] = field(default_factory=list)


# What the derived views need, the metric names that provide it (any one suffices), and the section that
# collects them. Set membership (basic ⊂ detailed ⊂ full) is from Nsight Compute's stock section files.
NEEDED_METRICS: tuple[tuple[str, tuple[str, ...], str, str], ...] = (
    ("duration", ("gpu__time_duration.sum",), "SpeedOfLight", "basic"),
    ("sm_throughput", ("sm__throughput.avg.pct_of_peak_sustained_elapsed",), "SpeedOfLight", "basic"),
    ("memory_throughput", ("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",), "SpeedOfLight", "basic"),
    ("dram_throughput", ("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
                         "dram__throughput.avg.pct_of_peak_sustained_elapsed"), "SpeedOfLight", "basic"),
    ("waves_per_sm", ("launch__waves_per_multiprocessor",), "LaunchStats", "basic"),
    ("theoretical_occupancy", ("sm__maximum_warps_per_active_cycle_pct",), "Occupancy", "basic"),
    ("achieved_occupancy", ("sm__warps_active.avg.pct_of_peak_sustained_active",), "Occupancy", "basic"),
    ("dram_bytes", ("dram__bytes.sum", "dram__bytes_read.sum", "dram__bytes.sum.per_second"),
     "MemoryWorkloadAnalysis_Chart", "detailed"),
    ("fp32_ops", ("sm__sass_thread_inst_executed_op_ffma_pred_on.sum",
                  "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum",
                  "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum.per_cycle_elapsed"),
     "SpeedOfLight_RooflineChart", "detailed"),
    ("fp32_peak", ("sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained",), "SpeedOfLight_RooflineChart",
     "detailed"),
    ("tensor_pipe", ("sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed",
                     "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
                     "sm__pipe_tensor_cycles_active_v2.avg.pct_of_peak_sustained_elapsed",
                     "sm__pipe_tc_cycles_active.avg.pct_of_peak_sustained_elapsed",
                     "sm__inst_executed_pipe_tensor_op_hmma.avg.pct_of_peak_sustained_active"),
     "ComputeWorkloadAnalysis", "detailed"),
    ("fma_pipe", ("sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_elapsed",
                  "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",
                  "sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active"),
     "ComputeWorkloadAnalysis", "detailed"),
)

_INSERT_ORDER = ("capture_id", "kernel_id", "metric", "value", "unit", "text_value")


def write_capture(con: duckdb.DuckDBPyConnection, capture_id: int, cap: NcuCapture) -> None:
    """Insert ``cap`` as ``capture_id`` into captures, ncu_kernels, ncu_metrics, ncu_rule_results, gpus,
    capture_missing and ingest_notes."""
    bad_id = next((k.kernel_id for k in cap.kernels if not -(2**31) <= k.kernel_id < 2**31), None)
    if bad_id is not None:
        raise InputError(f"{cap.path}: result ID {bad_id} is out of range (ncu numbers its results from 0); "
                         "the file is damaged or not ncu output")
    metrics = pd.DataFrame(cap.metrics, columns=list(_INSERT_ORDER[1:]))
    before = len(metrics)
    metrics = metrics.drop_duplicates(subset=["kernel_id", "metric"], keep="first")
    if len(metrics) < before:
        cap.notes.append(("ncu_metrics", before - len(metrics),
                          "duplicate metric rows for one kernel (same metric printed in several sections); kept the first"))
    metrics.insert(0, "capture_id", capture_id)
    metrics = metrics.astype({"capture_id": "int32", "kernel_id": "int32", "value": "float64"})
    # ncu stores NaN/inf for ratios over zero events (e.g. a compression success rate with no input): NULL here
    n_not_finite = sum(1 for row in cap.metrics if row[2] is not None and not math.isfinite(row[2]))
    if n_not_finite:
        metrics.loc[~np.isfinite(metrics["value"].to_numpy(dtype="float64")), "value"] = None
        cap.notes.append(("ncu_metrics", n_not_finite, "NaN or infinite metric values stored as NULL"))
    lookup = _lookup(metrics)

    _insert_df(con, "ncu_metrics", metrics)
    _insert_kernels(con, capture_id, cap, lookup)
    _insert_gpus(con, capture_id, cap, lookup)
    _insert_rules(con, capture_id, cap)
    _insert_missing(con, capture_id, cap, lookup)
    for data, rows, note in cap.notes:
        con.execute("INSERT INTO ingest_notes (capture_id, data, rows, note) VALUES (?, ?, ?, ?)",
                    [capture_id, data, rows, note])
    st = cap.path.stat()
    con.execute("""INSERT INTO captures (capture_id, source_path, source_name, source_size_bytes, source_mtime_ns,
                   format, tool, tool_version, ingested_at) VALUES (?, ?, ?, ?, ?, ?, 'ncu', ?, ?)""", [
        capture_id, os.fsencode(cap.path.resolve()).decode("utf-8", "backslashreplace"), cap.path.name, st.st_size, st.st_mtime_ns, cap.fmt, cap.tool_version,
        _dt.datetime.now(_dt.timezone.utc).replace(tzinfo=None),
    ])
    # Nsight Compute replays each kernel alone, so a report has no timeline: its "wall time" is the sum of the
    # profiled kernels' durations, which is what impact_pct of an ncu finding is a share of.
    total = con.execute("SELECT round(sum(duration_ns)) FROM ncu_kernels WHERE capture_id = ?",
                        [capture_id]).fetchone()[0]
    if total is not None and not abs(total) < 2**63:  # a damaged duration (9.2e18 ns is 292 years) fits no BIGINT
        raise InputError(f"{cap.path}: the kernels' durations add up to {total:.3g} ns, far beyond any real run; "
                         "the file is damaged or not ncu output")
    con.execute("UPDATE captures SET start_ns = 0, duration_ns = $ns, end_ns = $ns WHERE capture_id = $id",
                {"id": capture_id, "ns": None if total is None else int(total)})


def _lookup(metrics: pd.DataFrame) -> dict[int, dict[str, Any]]:
    """kernel_id -> {metric: value or text}."""
    out: dict[int, dict[str, Any]] = {}
    for kid, metric, value, text in zip(metrics["kernel_id"], metrics["metric"], metrics["value"], metrics["text_value"]):
        if value is not None and value == value:  # not NaN
            out.setdefault(int(kid), {})[metric] = float(value)
        elif text is not None:
            out.setdefault(int(kid), {})[metric] = text
    return out


def _insert_df(con: duckdb.DuckDBPyConnection, table: str, df: pd.DataFrame) -> None:
    if df.empty:
        return
    name = f"_ncu_df_{table}"
    con.register(name, df)
    try:
        types = dict(con.execute("SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = ? "
                                 "AND database_name = current_database() AND schema_name = 'main'", [table]).fetchall())
        cols = list(df.columns)
        ints = [c for c in cols if types.get(c) in ("INTEGER", "BIGINT", "SMALLINT")]
        # A number that does not fit its column (a 2^40 grid in a 32-bit column) is stored as NULL and noted.
        if ints:
            lost = con.execute("SELECT " + ", ".join(f'count(*) FILTER (WHERE "{c}" IS NOT NULL AND '
                                                     f'TRY_CAST("{c}" AS {types[c]}) IS NULL)' for c in ints)
                               + f" FROM {name}").fetchone()
            for c, n in zip(ints, lost):
                if n and "capture_id" in df.columns:
                    con.execute("INSERT INTO ingest_notes (capture_id, data, rows, note) VALUES (?, ?, ?, ?)",
                                [int(df["capture_id"].iloc[0]), table, int(n),
                                 f"{c} values out of range for a {types[c]} column stored as NULL"])
        select = ", ".join(f'TRY_CAST("{c}" AS {types[c]})' if c in ints else f'"{c}"' for c in cols)
        con.execute(f"INSERT INTO {table} ({', '.join(cols)}) SELECT {select} FROM {name}")
    finally:
        con.unregister(name)


def _num(m: dict[str, Any], *names: str) -> float | None:
    for n in names:
        v = m.get(n)
        if isinstance(v, float):
            return v
    return None


def _int(v: float | None) -> int | None:
    if v is None or not math.isfinite(v):
        return None
    i = int(round(v))
    return i if _INT64_MIN <= i <= _INT64_MAX else None


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _fits(v: Any) -> Any:
    """``v`` unless it is an integer beyond 64 bits (a corrupt or hostile value), which becomes None."""
    if isinstance(v, int) and not isinstance(v, bool) and not _INT64_MIN <= v <= _INT64_MAX:
        return None
    return v


def _text(m: dict[str, Any], name: str) -> str | None:
    v = m.get(name)
    return v if isinstance(v, str) and v else None


def _cc(m: dict[str, Any], fallback: str | None) -> str | None:
    major, minor = _num(m, "device__attribute_compute_capability_major"), _num(m, "device__attribute_compute_capability_minor")
    if major is not None and minor is not None:
        return f"{int(major)}.{int(minor)}"
    return fallback


def _insert_kernels(con, capture_id: int, cap: NcuCapture, lookup: dict[int, dict[str, Any]]) -> None:
    rows = []
    for k in cap.kernels:
        m = lookup.get(k.kernel_id, {})
        grid = [_int(_num(m, f"launch__grid_dim_{a}")) for a in "xyz"]
        block = [_int(_num(m, f"launch__block_dim_{a}")) for a in "xyz"]
        if block[0] is None and k.block:
            block = list(k.block)
        blocks = _int(_num(m, "launch__grid_size"))
        if grid[0] is None and k.grid:
            grid = _checked_grid(k.grid, blocks, block)
        if blocks is None and None not in grid:
            blocks = grid[0] * grid[1] * grid[2]
        threads = _int(_num(m, "launch__block_size"))
        if threads is None and None not in block:
            threads = block[0] * block[1] * block[2]
        smem = _num(m, "launch__shared_mem_per_block")
        if smem is None:
            parts = [_num(m, "launch__shared_mem_per_block_static"), _num(m, "launch__shared_mem_per_block_dynamic")]
            smem = sum(parts) if None not in parts else None
        rows.append({
            "capture_id": capture_id, "kernel_id": k.kernel_id, "launch_id": k.launch_id, "name": k.name,
            "short_name": k.short_name or short_kernel_name(k.name), "mangled_name": k.mangled_name,
            "grid_x": grid[0], "grid_y": grid[1], "grid_z": grid[2],
            "block_x": block[0], "block_y": block[1], "block_z": block[2],
            "blocks": blocks, "threads_per_block": threads,
            "registers_per_thread": _int(_num(m, "launch__registers_per_thread")),
            "shared_mem_bytes": _int(smem),
            "device_name": _text(m, "device__attribute_display_name"),
            "compute_capability": _cc(m, k.compute_capability),
            "sm_count": _int(_num(m, "launch__sm_count", "device__attribute_multiprocessor_count")),
            "duration_ns": _num(m, "gpu__time_duration.sum"),
            "pid": k.pid,
            "stream_id": k.stream_id if k.stream_id is not None else _int(_num(m, "launch__stream_id")),
            "sections": ",".join(k.sections) if k.sections else None,
        })
    rows = [{k: _fits(v) for k, v in row.items()} for row in rows]
    df = pd.DataFrame(rows, columns=[
        "capture_id", "kernel_id", "launch_id", "name", "short_name", "mangled_name", "grid_x", "grid_y", "grid_z",
        "block_x", "block_y", "block_z", "blocks", "threads_per_block", "registers_per_thread", "shared_mem_bytes",
        "device_name", "compute_capability", "sm_count", "duration_ns", "pid", "stream_id", "sections"])
    df = df.astype({c: "Int64" for c in ("launch_id", "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z",
                                         "blocks", "threads_per_block", "registers_per_thread", "shared_mem_bytes",
                                         "sm_count", "pid", "stream_id")})
    df = df.astype({"duration_ns": "float64", "name": "object", "short_name": "object", "mangled_name": "object",
                    "device_name": "object", "compute_capability": "object", "sections": "object"})
    _insert_df(con, "ncu_kernels", df)


def _checked_grid(grid: tuple[int, int, int], blocks: int | None, block: list[int | None]) -> list[int | None]:
    """The CSV ``Grid Size`` column, checked against launch__grid_size.

    ncu 2024.1 printed grid x block threads there for reports of ncu 2020.2 (e.g. "(156160, 1, 1)" for 1220
    blocks of 128 threads): such a 1-D grid is divided back; any other disagreement leaves the grid unknown.
    """
    product = grid[0] * grid[1] * grid[2]
    if blocks is None or product == blocks:
        return list(grid)
    threads = block[0] * block[1] * block[2] if None not in block else None
    if threads and product == blocks * threads and grid[1] == grid[2] == 1:
        return [blocks, 1, 1]
    return [None, None, None]


def _insert_gpus(con, capture_id: int, cap: NcuCapture, lookup: dict[int, dict[str, Any]]) -> None:
    seen: dict[int, tuple] = {}
    for k in cap.kernels:
        m = lookup.get(k.kernel_id, {})
        dev = _int(_num(m, "launch__device_id", "device__attribute_device_index"))
        if dev is None:
            dev = k.device_id if k.device_id is not None else 0
        if dev in seen:
            continue
        name = _text(m, "device__attribute_display_name")
        cc = _cc(m, k.compute_capability)
        spec = lookup_gpu(name)
        major, _, minor = (cc or "").partition(".")
        clock_khz = _num(m, "device__attribute_clock_rate")
        dram_peak = _num(m, "dram__bytes.sum.peak_sustained")
        dram_hz = _num(m, "dram__cycles_elapsed.avg.per_second")
        bandwidth = spec.dram_bytes_per_s if spec else (dram_peak * dram_hz if dram_peak and dram_hz else None)
        smem_block = _num(m, "device__attribute_max_shared_memory_per_block_optin", "device__attribute_max_shared_memory_per_block")
        seen[dev] = (
            capture_id, dev, name, None,
            _int(_num(m, "device__attribute_multiprocessor_count")) or (spec.sm_count if spec else None),
            cc, int(major) if major.isdigit() else None, int(minor) if minor.isdigit() else None,
            _int(_num(m, "device__attribute_total_memory")), _int(_num(m, "device__attribute_l2_cache_size")),
            _int(clock_khz * 1000) if clock_khz is not None else None, bandwidth,
            _int(_num(m, "device__attribute_max_warps_per_multiprocessor")),
            _int(_num(m, "device__attribute_max_blocks_per_multiprocessor")),
            _int(_num(m, "device__attribute_max_threads_per_block")),
            _int(_num(m, "device__attribute_max_registers_per_multiprocessor")),
            _int(_num(m, "device__attribute_max_registers_per_block")),
            _int(_num(m, "device__attribute_max_shared_memory_per_multiprocessor")),
            _int(smem_block),
            _int(_num(m, "device__attribute_warp_size")),
            spec.fp32_flops_per_s if spec else None,
            spec.fp16_tensor_flops_per_s if spec else None,
            spec.tf32_tensor_flops_per_s if spec else None,
            spec.fp8_tensor_flops_per_s if spec else None,
        )
    if seen:
        cols = ("capture_id, device_id, name, chip_name, sm_count, compute_capability, cc_major, cc_minor, "
                "total_memory_bytes, l2_cache_bytes, clock_rate_hz, memory_bandwidth_bytes_per_s, max_warps_per_sm, "
                "max_blocks_per_sm, max_threads_per_block, max_registers_per_sm, max_registers_per_block, "
                "max_shared_mem_per_sm_bytes, max_shared_mem_per_block_bytes, threads_per_warp, peak_fp32_flops_per_s, "
                "peak_fp16_tensor_flops_per_s, peak_tf32_tensor_flops_per_s, peak_fp8_tensor_flops_per_s")
        # through _insert_df: a value that does not fit its column becomes NULL with a note, never a crash
        _insert_df(con, "gpus", pd.DataFrame(list(seen.values()), columns=[c.strip() for c in cols.split(",")],
                                             dtype=object))


def _insert_rules(con, capture_id: int, cap: NcuCapture) -> None:
    cols = ["kernel_id", "section", "rule_id", "title", "result_type", "message", "estimated_speedup_pct",
            "speedup_type", "focus_metrics"]
    if not cap.rules:
        return
    df = pd.DataFrame([{c: r.get(c) for c in cols} for r in cap.rules], columns=cols)
    df.insert(0, "capture_id", capture_id)
    df = df.astype({"capture_id": "int32", "kernel_id": "int32", "estimated_speedup_pct": "float64"})
    _insert_df(con, "ncu_rule_results", df)


def _insert_missing(con, capture_id: int, cap: NcuCapture, lookup: dict[int, dict[str, Any]]) -> None:
    """One capture_missing row per needed quantity absent from some kernel: data='ncu_metrics:<metric>'."""
    n = len(cap.kernels)
    if n == 0:
        con.execute("INSERT INTO capture_missing (capture_id, data, reason, capture_option) VALUES (?, 'ncu_kernels', ?, ?)", [
            capture_id, "the capture holds no profiled kernel", "ncu --set basic ./app (profile at least one kernel)"])
        return
    for quantity, names, section, set_name in NEEDED_METRICS:
        lacking = sum(1 for k in cap.kernels if not any(nm in lookup.get(k.kernel_id, {}) for nm in names))
        if lacking:
            where = "any kernel" if lacking == n else f"{lacking} of {n} kernels"
            option = f"ncu --section {section} (in --set {set_name} and larger sets)"
            reason = f"{quantity} not collected for {where} (section {section} absent)"
            if cap.fmt == "ncu-csv":
                # a details or summary page prints only section header metrics, whatever was collected
                reason = f"{quantity} not in this CSV for {where}"
                option += "; from a report: ncu --import R.ncu-rep --csv --page raw --print-units base"
            con.execute("INSERT INTO capture_missing (capture_id, data, reason, capture_option) VALUES (?, ?, ?, ?)", [
                capture_id, f"ncu_metrics:{names[0]}", reason, option])


__all__ = ["NcuKernel", "NcuCapture", "write_capture", "short_kernel_name", "NEEDED_METRICS"]
