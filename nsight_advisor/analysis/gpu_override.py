"""GPU facts for captures that do not name their GPU: ``--gpu MODEL`` or ``[gpu] model = "..."`` in the config.

Trimmed exports (no TARGET_INFO_GPU or TARGET_INFO_CUDA_GPU rows) leave a device's name, SM count and compute
capability unknown, and every rule that needs them is then skipped or guesses. The user's model, looked up in the
built-in table of GPU models (``schema.hardware``), fills only what the capture left NULL, for this analysis
(a temp table over the store's ``gpus``); the report says where the facts came from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

from nsight_advisor.common import sql_params
from nsight_advisor.common.errors import ConfigError
from nsight_advisor.schema.hardware import GpuSpec, known_models, lookup_gpu

if TYPE_CHECKING:
    import duckdb


@dataclass(frozen=True)
class GpuOverride:
    """The model the user named and its datasheet numbers."""

    model: str
    spec: GpuSpec


def resolve_gpu_override(cli_value: str | None, config_value: str | None) -> GpuOverride | None:
    """``--gpu`` wins over the config; ConfigError naming the known models when neither matches one."""
    model = cli_value or config_value
    if not model:
        return None
    spec = lookup_gpu(model)
    if spec is None:
        raise ConfigError(f"--gpu {model!r}: unknown GPU model; use one of {', '.join(known_models())}")
    return GpuOverride(model, spec)


def apply_gpu_override(con: duckdb.DuckDBPyConnection, capture_ids: Sequence[int],
                       override: GpuOverride | None) -> dict[int, list[str]]:
    """Fill the NULL facts of unnamed GPUs from ``override``; per capture, notes for the report."""
    ids = [int(i) for i in capture_ids]
    unnamed = sql_params.execute(con, """
        select capture_id, count(*) from gpus
        where capture_id in (select unnest($ids::integer[])) and (name is null or sm_count is null)
        group by capture_id""", {"ids": ids}).fetchall()
    notes: dict[int, list[str]] = {}
    if not unnamed:
        return notes
    if override is None:
        for cid, n in unnamed:
            notes[int(cid)] = [f"{n} GPU(s) not described by the capture (no name or SM count): rules that need "
                               "them are skipped; name the model with --gpu MODEL or [gpu] model = \"...\" in the "
                               "config"]
        return notes
    spec = override.spec
    major, minor = spec.compute_capability.split(".")
    from nsight_advisor.analysis.accounting import stored

    con.execute(f"""
        create or replace temp table gpus as
        select * replace (
            coalesce(name, {sql_params.literal(spec.key)}) as name,
            coalesce(sm_count, {spec.sm_count}) as sm_count,
            coalesce(compute_capability, {sql_params.literal(spec.compute_capability)}) as compute_capability,
            coalesce(cc_major, {int(major)}) as cc_major,
            coalesce(cc_minor, {int(minor)}) as cc_minor,
            coalesce(memory_bandwidth_bytes_per_s, {spec.dram_bytes_per_s!r}) as memory_bandwidth_bytes_per_s,
            coalesce(peak_fp32_flops_per_s, {spec.fp32_flops_per_s!r}) as peak_fp32_flops_per_s,
            coalesce(peak_fp16_tensor_flops_per_s, {_num(spec.fp16_tensor_flops_per_s)}) as peak_fp16_tensor_flops_per_s,
            coalesce(peak_tf32_tensor_flops_per_s, {_num(spec.tf32_tensor_flops_per_s)}) as peak_tf32_tensor_flops_per_s,
            coalesce(peak_fp8_tensor_flops_per_s, {_num(spec.fp8_tensor_flops_per_s)}) as peak_fp8_tensor_flops_per_s
        )
        from {stored(con, 'gpus')}""")
    for cid, n in unnamed:
        notes[int(cid)] = [f"{n} GPU(s) not described by the capture: facts of {spec.key} from --gpu/[gpu] "
                           f"{override.model!r} ({spec.sm_count} SMs, compute capability {spec.compute_capability})"]
    return notes


def _num(value: float | None) -> str:
    return "null::double" if value is None else repr(float(value))
