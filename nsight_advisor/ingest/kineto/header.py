"""The store's tables that come from a Kineto trace's header: ``gpus`` (``deviceProperties``) and
``capture_distributed`` (``distributedInfo``). The header is small (read whole by ``kineto_json.read_header``);
every value is checked for its type, since a trace's header is input like any other."""

from __future__ import annotations

import json

import duckdb

from nsight_advisor.common import sql_params
from nsight_advisor.schema.hardware import lookup_gpu

#: The profiler call that records the CUDA activity of a trace (what a missing table asks for).
CUDA_OPTION = "torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])"

#: Longest header text kept (a GPU name, a backend); longer values are not what they claim to be.
_MAX_TEXT = 4096


def write_header_tables(con: duckdb.DuckDBPyConnection, headers: dict[int, dict]) -> list[tuple[int, str, str, str]]:
    """Insert the GPUs and distributed info of each trace's header (``headers``: capture id -> header), one
    statement per table for all of them; return ``(capture id, data, reason, capture option)`` for what is absent."""
    missing, gpus, distributed = [], [], []
    for capture_id, header in headers.items():
        rows = _gpu_rows(capture_id, header.get("deviceProperties"))
        gpus.extend(rows)
        if not rows:
            missing.append((capture_id, "gpus", "no deviceProperties in the trace: GPU names and properties were "
                            "not recorded", CUDA_OPTION))
        info = header.get("distributedInfo")
        if isinstance(info, dict) and _small_int(info.get("rank")) is not None:
            groups = info.get("pg_config")
            distributed.append([
                capture_id, _small_int(info.get("rank")), _small_int(info.get("world_size")),
                _text(info.get("backend")), _text(info.get("nccl_version")),
                _text(json.dumps(groups, default=str)) if groups is not None else None,
            ])
        else:
            missing.append((capture_id, "capture_distributed", "no distributedInfo (rank, world size) in the trace",
                            "torch.profiler in a process that called torch.distributed.init_process_group"))
    for table, rows in (("gpus", gpus), ("capture_distributed", distributed)):
        if rows:  # one statement for every device of every trace (a node's trace lists all eight GPUs of the node)
            con.execute(f"INSERT INTO {table} {sql_params.values(rows)}")
    return missing


def _gpu_rows(capture_id: int, props) -> list[list]:
    """One gpus row per device of ``deviceProperties`` (Kineto's names for cudaDeviceProp fields)."""
    if not isinstance(props, list):
        return []
    seen: set[int] = set()
    rows = []
    for p in props:
        if not isinstance(p, dict) or _small_int(p.get("id")) is None or p["id"] in seen:
            continue
        seen.add(p["id"])
        name = _text(p.get("name"))
        name = name.strip() if name else name
        spec = lookup_gpu(name)
        major, minor = _small_int(p.get("computeMajor")), _small_int(p.get("computeMinor"))
        warp = _small_int(p.get("warpSize"))
        threads_sm = _small_int(p.get("maxThreadsPerMultiprocessor"))
        rows.append([
            capture_id, p["id"], name, None, _small_int(p.get("numSms")),
            f"{major}.{minor}" if major is not None and minor is not None else None, major, minor,
            _big_int(p.get("totalGlobalMem")), _big_int(p.get("l2CacheSize")), None,
            spec.dram_bytes_per_s if spec else None,
            threads_sm // warp if threads_sm is not None and warp else None, None,
            _small_int(p.get("maxThreadsPerBlock")), _small_int(p.get("regsPerMultiprocessor")),
            _small_int(p.get("regsPerBlock")), _big_int(p.get("sharedMemPerMultiprocessor")),
            _big_int(p.get("sharedMemPerBlockOptin")) or _big_int(p.get("sharedMemPerBlock")), warp,
            spec.fp32_flops_per_s if spec else None, spec.fp16_tensor_flops_per_s if spec else None,
            spec.tf32_tensor_flops_per_s if spec else None, spec.fp8_tensor_flops_per_s if spec else None,
        ])
    return rows


def _small_int(value) -> int | None:
    return value if type(value) is int and -(1 << 31) <= value < (1 << 31) else None


def _big_int(value) -> int | None:
    return value if type(value) is int and -(1 << 63) <= value < (1 << 63) else None


def _text(value) -> str | None:
    if value is None:
        return None
    text = str(value)
    return text if len(text) <= _MAX_TEXT else None


__all__ = ["write_header_tables", "CUDA_OPTION"]
