"""Refusing an analysis with nothing to judge: captures that recorded no GPU work at all.

Every rule reads GPU work (kernels, copies, memsets, Nsight Compute results). A capture without any reads as "no
rule found a problem", which a user takes for a healthy program, so ``analyze`` refuses it with one line that says
what was missing and how to capture it instead.
"""

from __future__ import annotations

from typing import Any

from nsight_advisor.common.errors import InputError

HOW_TO_CAPTURE = ("capture GPU work with `nsys profile --trace=cuda,nvtx PROGRAM`, `ncu --set full -o report PROGRAM`, "
                  "or torch.profiler with ProfilerActivity.CUDA in its activities")


def profiled_nothing(capture: dict[str, Any]) -> bool:
    """Whether one capture of a result's summary recorded no kernel, copy, memset or Nsight Compute result."""
    return (not capture.get("kernel_count") and not capture.get("ncu_kernel_count")
            and not capture.get("busy_ns"))


def refuse_if_nothing_profiled(result) -> None:
    """InputError when none of the result's captures recorded GPU work; otherwise nothing."""
    captures = (getattr(result, "summary", None) or {}).get("captures") or []
    if not captures or not all(profiled_nothing(c) for c in captures):
        return
    names = ", ".join(str(c.get("source_name") or c.get("capture_id")) for c in captures)
    detail = " and ".join(sorted({_detail(c) for c in captures}))
    raise InputError(f"{names}: nothing was profiled on the GPU ({detail}), so there is nothing to judge; "
                     f"{HOW_TO_CAPTURE}")


def _detail(capture: dict[str, Any]) -> str:
    for note in capture.get("ingest_notes") or []:
        text = str(note.get("note") or "")
        if "range profiler" in text.lower():
            return text
    return "no kernels, copies, memsets or Nsight Compute results recorded"
