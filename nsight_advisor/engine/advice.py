"""Advice that fits the program and the GPU: pick a rule's fix text for one capture.

A rule's ``[finding.fix]`` holds a general text, optional variants per programming stack and optional clauses that
need a GPU capability (and may be limited to some stacks); docs/rule-format.md describes the format. The capture's
stack comes from the ``capture_program`` view and its GPUs' capabilities from ``gpu_capabilities``
(schema/views/15_program.sql). The text shown is the variant for the capture's stack (else the general text),
followed by every clause whose capabilities all of the capture's GPUs have and whose stacks include the capture's.
A clause is never shown when the capabilities are unknown: a finding never recommends what the hardware may not do.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

#: Programming stacks a fix variant or clause may name (capture_program.stack, besides 'unknown').
STACKS = ("pytorch", "jax", "tensorflow", "tensorrt", "openacc-openmp", "cuda-fortran", "julia", "cupy-numba",
          "triton", "cuda-cpp")

#: GPU capabilities a fix clause may need (gpu_capabilities.capabilities).
CAPABILITIES = ("tensor-cores", "fp16-tensor", "int8-tensor", "int4-tensor", "tf32", "bf16", "fp8", "fp6", "fp4",
                "fp64-tensor")

# Words that tie a text to a stack or a capability. rules lint rejects them in text shown more widely than they
# apply, and the tests check every fix shown on every real capture against them.
_STACK_WORDS: tuple[tuple[str, re.Pattern], ...] = (
    ("pytorch", re.compile(r"torch|\.item\(\)|\.cpu\(\)|\.tolist\(\)|autocast|pin_memory|non_blocking|"
                           r"DataLoader|channels_last|foreach=|fused=True", re.I)),
    ("jax", re.compile(r"\bjax\b|jax\.jit|\bpmap\b", re.I)),
    ("tensorflow", re.compile(r"tensorflow|tf\.function|\bkeras\b", re.I)),
    ("tensorrt", re.compile(r"\btrtexec\b|builder config", re.I)),
    ("openacc-openmp", re.compile(r"vector_length|num_gangs|#pragma acc|\bgang\b|num_teams", re.I)),
)
_CAPABILITY_WORDS: tuple[tuple[str, re.Pattern], ...] = (
    ("bf16", re.compile(r"\bbf16\b|bfloat16", re.I)),
    ("tf32", re.compile(r"\btf32\b", re.I)),
    ("fp8", re.compile(r"\bfp8\b|transformer engine", re.I)),
    ("fp4", re.compile(r"\bfp4\b|nvfp4", re.I)),
    ("fp6", re.compile(r"\bfp6\b", re.I)),
)


@dataclass(frozen=True)
class FixClause:
    """A sentence of a fix shown only where the GPU has ``needs`` (all of them) and, when given, on ``stacks``."""

    text: str
    needs: tuple[str, ...] = ()
    stacks: tuple[str, ...] = ()


@dataclass(frozen=True)
class Profile:
    """What advice depends on for one capture: its stack and the capabilities every one of its GPUs has."""

    stack: str = "unknown"
    capabilities: frozenset[str] = frozenset()


def text_tags(text: str) -> tuple[set[str], set[str]]:
    """(stacks, capabilities) a text's wording ties it to: 'use torch.compile' -> ({'pytorch'}, set())."""
    stacks = {name for name, pattern in _STACK_WORDS if pattern.search(text)}
    caps = {name for name, pattern in _CAPABILITY_WORDS if pattern.search(text)}
    return stacks, caps


def profile_of(capture: dict[str, Any]) -> Profile:
    """The advice profile of a capture as ``read_captures`` returns it (``program`` and ``gpus``)."""
    program = capture.get("program") or {}
    gpus = capture.get("gpus") or []
    caps: frozenset[str] = frozenset()
    if gpus and all(g.get("capabilities") for g in gpus):
        # Several GPUs (a mixed node): only what every one of them supports.
        caps = frozenset.intersection(*(frozenset(g["capabilities"]) for g in gpus))
    return Profile(stack=program.get("stack") or "unknown", capabilities=caps)


def select_fix(general: str, variants: dict[str, str], clauses: Sequence[FixClause], profile: Profile) -> str:
    """The fix text for ``profile``: its stack's variant (else ``general``), then the clauses it can use."""
    parts = [variants.get(profile.stack, general)]
    for clause in clauses:
        if clause.stacks and profile.stack not in clause.stacks:
            continue
        if not set(clause.needs) <= profile.capabilities:
            continue
        parts.append(clause.text)
    return " ".join(p.strip() for p in parts if p and p.strip())


def fix_text(rule: Any, capture: dict[str, Any], context: dict[str, Any]) -> str:
    """The formatted fix of ``rule``'s finding on ``capture`` (the one call the runner makes)."""
    from nsight_advisor.engine.message_format import format_message

    spec = rule.finding
    text = select_fix(spec.fix, dict(spec.fix_variants), spec.fix_clauses, profile_of(capture))
    return format_message(text, context)


# Guides written for deep-learning frameworks: cited only on captures of those stacks (or of an unknown one).
_DL_GUIDES = ("Convolutional Layers User's Guide", "Linear/Fully-Connected Layers User's Guide",
              "Memory-Limited Layers User's Guide", "Recurrent Layers User's Guide", "Train With Mixed Precision",
              "Transformer Engine: Using FP8")
_DL_STACKS = ("pytorch", "jax", "tensorflow", "tensorrt", "triton", "unknown")
# Guide sections about one framework, or about a precision only some GPUs have.
_PRINCIPLE_STACKS = {"PyTorch CUDA semantics": ("pytorch", "unknown")}
_PRINCIPLE_NEEDS = {"mixed-precision.tf32": "tf32", "mixed-precision.fp8-hopper": "fp8"}


def principles_for(rule: Any, capture: dict[str, Any]) -> tuple[str, ...]:
    """The rule's principle ids that fit the capture: no deep-learning guide for an OpenACC or plain CUDA program,
    no TF32 or FP8 section for a GPU without them. The first principle stays when the filter would drop all."""
    from nsight_advisor.catalog import get_principle

    profile = profile_of(capture)
    keep = []
    for pid in rule.principles:
        p = get_principle(pid)
        need = _PRINCIPLE_NEEDS.get(p.id if p else pid)
        if need and need not in profile.capabilities:
            continue
        if p and p.guide in _DL_GUIDES and profile.stack not in _DL_STACKS:
            continue
        if p and p.guide in _PRINCIPLE_STACKS and profile.stack not in _PRINCIPLE_STACKS[p.guide]:
            continue
        keep.append(pid)
    return tuple(keep) or tuple(rule.principles[:1])


def read_profiles(con: Any, capture_ids: Sequence[int]) -> tuple[dict[int, dict], dict[tuple[int, int], dict]]:
    """Per capture its program (stack, stacks_seen, evidence) and per (capture, device) its GPU facts, from the
    ``capture_program`` and ``gpu_capabilities`` views; empty when the store predates them."""
    import duckdb

    from nsight_advisor.common import sql_params

    ids = [int(i) for i in capture_ids]
    programs: dict[int, dict] = {}
    gpus: dict[tuple[int, int], dict] = {}
    if not ids:
        return programs, gpus
    try:
        for cid, stack, seen, evidence in sql_params.execute(
                con, "select capture_id, stack, stacks_seen, evidence from capture_program "
                     "where capture_id in (select unnest(?::integer[]))", [ids]).fetchall():
            programs[cid] = {"stack": stack, "stacks_seen": list(seen or []), "evidence": evidence}
        for cid, dev, caps, precisions, dram in sql_params.execute(
                con, "select capture_id, device_id, capabilities, tensor_core_precisions, dram_peak_bytes_per_s "
                     "from gpu_capabilities where capture_id in (select unnest(?::integer[]))", [ids]).fetchall():
            gpus[(cid, dev)] = {"capabilities": list(caps or []), "tensor_core_precisions": precisions or "",
                                "dram_peak_bytes_per_s": dram}
    except duckdb.Error:
        return {}, {}
    return programs, gpus
