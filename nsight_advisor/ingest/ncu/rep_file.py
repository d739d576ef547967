"""Read an Nsight Compute report (.ncu-rep) through NVIDIA's ``ncu_report`` module (PyPI ``ncu-report``).

Every metric of every profiled result goes to ``ncu_metrics`` in base units; Nsight Compute's stored rule
verdicts go to ``ncu_rule_results`` with their link markup turned into plain text (as ``ncu --csv`` prints them).
``ncu_report`` returns an empty context, not an error, for a garbage or truncated file: that is bad input here.
The wheel exists for Linux x86_64 only (and a few other platforms this project does not pin); elsewhere the
``ncu --csv`` export is the way in.
"""

from __future__ import annotations

import mmap
import platform
import re
import sys
from pathlib import Path
from typing import Any

import duckdb

from nsight_advisor.common.errors import InputError
from nsight_advisor.ingest.ncu.rows import NcuCapture, NcuKernel, write_capture
from nsight_advisor.ingest.ncu.units import unit_factor
from nsight_advisor.common.progress import Progress

CSV_HINT = "export it with `ncu --import REPORT.ncu-rep --csv --page raw --print-units base > report.csv` and ingest the CSV"

_MSG_TYPES = {0: "none", 1: "ok", 2: "optimization", 3: "warning", 4: "error"}
_SPEEDUP_TYPES = {1: "local", 2: "global"}
# Link markup in stored rule messages: @url:Text:https://...@, @section:Id:Text@, @sass:addr:Text@, @source:f:l:Text@
_URL = re.compile(r"@url:([^:@]*):([^@]*)@")
_SECTION = re.compile(r"@section:[^:@]*:([^@]*)@")
_SASS = re.compile(r"@sass:[^:@]*:([^@]*)@")
_SOURCE = re.compile(r"@source:[^:@]*:[^:@]*:([^@]*)@")
_VERSION = re.compile(rb"Nsight Compute Target\x12.(\d{4}\.\d+\.\d+(?:\.\d+)?)", re.DOTALL)


def ingest_ncu_report(con: duckdb.DuckDBPyConnection, capture_id: int, path: Path, *, progress: bool = False) -> None:
    """Fill ncu_kernels, ncu_metrics, ncu_rule_results, gpus and captures from one .ncu-rep as ``capture_id``.

    Raises InputError (one line naming the file) when the report cannot be read, and on platforms the
    ``ncu-report`` wheel does not support.
    """
    path = Path(path)
    ncu_report = _import_ncu_report(path)
    try:
        ctx = ncu_report.load_report(str(path))
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except Exception as exc:  # the SWIG layer raises plain RuntimeError/Exception for unreadable files
        raise InputError(f"{path}: cannot be read as an Nsight Compute report ({exc})") from None
    if ctx.num_ranges() == 0:
        raise InputError(f"{path}: not a readable Nsight Compute report (no results inside; truncated or corrupt)")
    actions = [rng.action_by_idx(i) for rng in ctx for i in range(rng.num_actions())]
    if not actions:
        raise InputError(f"{path}: Nsight Compute report holds no profiled results (truncated or empty)")

    cap = NcuCapture(path=path, fmt="ncu-rep", tool_version=read_tool_version(path), kernels=[], metrics=[])
    with Progress(f"ingest {path.name}", len(actions), enabled=progress) as bar:
        for kernel_id, action in enumerate(actions):
            _read_action(ncu_report, action, kernel_id, cap)
            bar.step(action.name())
    non_kernels = sum(1 for a in actions if a.workload_type() != ncu_report.IAction.WorkloadType_KERNEL)
    if non_kernels:
        cap.notes.append(("ncu_kernels", non_kernels,
                          "results are ranges, graphs or command lists (range/graph profiling), not single kernels"))
    write_capture(con, capture_id, cap)


def _import_ncu_report(path: Path):
    if not (sys.platform.startswith("linux") and platform.machine().lower() in ("x86_64", "amd64")):
        raise InputError(f"{path}: reading .ncu-rep needs NVIDIA's ncu-report wheel, pinned here for Linux x86_64 "
                         f"only; on {sys.platform}/{platform.machine()} {CSV_HINT}")
    try:
        import ncu_report
    except ImportError:
        raise InputError(f"{path}: reading .ncu-rep needs NVIDIA's reader (pip install ncu-report==2026.3.1); "
                         f"or {CSV_HINT}") from None
    return ncu_report


def read_tool_version(path: Path) -> str:
    """The Nsight Compute version that collected the report (session details inside the file), or 'unknown'.

    ``ncu_report`` does not expose it (``get_version()`` is the library's own version), so the protobuf
    field after the "Nsight Compute Target" key is read directly.
    """
    try:
        with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            match = _VERSION.search(mm)
            return match.group(1).decode("ascii") if match else "unknown"
    except (OSError, ValueError):
        return "unknown"


def plain_message(text: str | None) -> str | None:
    """A stored rule message with link markup resolved to plain text, the way ``ncu --csv`` prints it."""
    if not text:
        return text
    text = _URL.sub(lambda m: f"{m.group(1)} ({m.group(2)})", text)
    for pattern in (_SECTION, _SASS, _SOURCE):
        text = pattern.sub(lambda m: m.group(1), text)
    return text


def _read_action(ncu_report, action, kernel_id: int, cap: NcuCapture) -> None:
    IAction, IMetric = ncu_report.IAction, ncu_report.IMetric
    sections = [s.identifier() for s in action.sections()] if hasattr(action, "sections") else []
    cap.kernels.append(NcuKernel(
        kernel_id=kernel_id, launch_id=kernel_id,
        name=action.name(IAction.NameBase_DEMANGLED), short_name=action.name(IAction.NameBase_FUNCTION),
        mangled_name=action.name(IAction.NameBase_MANGLED) or None, sections=sorted(sections),
    ))
    string_kinds = {IMetric.ValueKind_STRING}
    double_kinds = {IMetric.ValueKind_DOUBLE, IMetric.ValueKind_FLOAT}
    int_kinds = {IMetric.ValueKind_UINT32, IMetric.ValueKind_UINT64}
    rows = cap.metrics
    for name in action.metric_names():
        metric = action.metric_by_name(name)
        if metric is None:
            continue
        factor, base = unit_factor(metric.unit())
        value: float | None = None
        text: str | None = None
        try:
            kind = metric.kind()
            if kind in string_kinds:
                text = metric.as_string() or None
            elif kind in double_kinds:
                value = metric.as_double()
            elif kind in int_kinds:
                value = float(metric.as_uint64())
            # as_* return 0 when there is no aggregate (instanced-only metrics); has_value() is slow, so ask only then
            if (value == 0 or (kind in string_kinds and text is None)) and not metric.has_value():
                value = text = None
        except (RuntimeError, TypeError, ValueError):  # a metric the reader cannot evaluate: keep it, valueless
            value = text = None
        rows.append((kernel_id, name, None if value is None else value * factor, base, text))
    if hasattr(action, "rule_results_as_dicts"):
        for result in action.rule_results_as_dicts():
            rule = _rule_row(kernel_id, result)
            if rule is not None:
                cap.rules.append(rule)


def _rule_row(kernel_id: int, result: dict[str, Any]) -> dict[str, Any] | None:
    message = result.get("rule_message") or {}
    msg_type = _MSG_TYPES.get(int(message.get("type", 0) or 0), "none")
    text = plain_message(message.get("message") or "")
    if msg_type == "none" and not text:
        return None  # an empty placeholder result (seen in 2023.1 reports), no verdict
    speedup = result.get("speedup_estimation") or {}
    focus = result.get("focus_metrics") or []
    return {
        "kernel_id": kernel_id,
        "section": result.get("section_identifier") or None,
        "rule_id": result.get("rule_identifier"),
        "title": message.get("title") or None,
        "result_type": msg_type,
        "message": text,
        "estimated_speedup_pct": float(speedup["speedup"]) if "speedup" in speedup else None,
        "speedup_type": _SPEEDUP_TYPES.get(int(speedup.get("type", 0) or 0)) if speedup else None,
        "focus_metrics": ",".join(f["name"] for f in focus if f.get("name")) or None,
    }


__all__ = ["ingest_ncu_report", "read_tool_version", "plain_message"]
