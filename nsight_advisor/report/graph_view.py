"""The summary's CUDA-graph candidates (``summary.graph_candidates``, analysis/kernel_sequences.py) as rows for
the HTML and Markdown reports: which kernels, where, how long they run and wait, what the replay saves."""

from __future__ import annotations

import re
from typing import Any, Mapping

from nsight_advisor.report.formatting import clip, fmt_ns
from nsight_advisor.report.job_view import device_ranks

#: Kernel names shown per candidate (the rest counted).
NAMES_SHOWN = 4


def _short(name: Any) -> str:
    """A kernel's name without its template and argument lists: 'void at::native::f<...>(...)' -> 'f'."""
    base = re.sub(r"[<(].*$", "", str(name or "")).strip()
    return base.split("::")[-1].split(" ")[-1] or str(name or "")[:40]


def _spans(numbers: list[int]) -> str:
    """Sorted whole numbers as runs: [0, 1, 2, 3, 5, 7, 8] -> '0-3, 5, 7-8'."""
    runs: list[list[int]] = []
    for n in sorted(set(numbers)):
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def _where(streams: list[Mapping[str, Any]], names: Mapping[Any, str], ranks: Mapping[tuple[Any, Any], int]) -> str:
    """Where a run is launched: the ranks of a job by stream ('ranks 0-4, 6-7 (stream 7)'), else the captures' names
    (three, and how many more)."""
    keys = [(s.get("capture_id"), s.get("device_id")) for s in streams]
    if streams and all(k in ranks for k in keys):
        by_stream: dict[Any, list[int]] = {}
        for s, k in zip(streams, keys):
            by_stream.setdefault(s.get("stream_id"), []).append(ranks[k])
        return "; ".join(f"rank{'s' if len(set(r)) > 1 else ''} {_spans(r)} (stream {stream})"
                         for stream, r in by_stream.items())
    where = ", ".join(f"{clip(names.get(s.get('capture_id')) or 'capture ' + str(s.get('capture_id')), 60)}"
                      f" stream {s.get('stream_id')}" for s in streams[:3])
    return where + (f" and {len(streams) - 3} more" if len(streams) > 3 else "")


def graph_candidates_view(summary: Mapping[str, Any], names: Mapping[Any, str]) -> dict[str, Any] | None:
    """Rows of the candidates, the saving of all found together and the thresholds; None when the steps were not
    replayed (no ``summary.graph_candidates``). A job's ranks are named by rank, others by capture name."""
    found = summary.get("graph_candidates") if isinstance(summary, Mapping) else None
    if not isinstance(found, Mapping):
        return None
    ranks = device_ranks(summary)  # by GPU: one capture may hold several ranks
    rows = []
    for c in found.get("candidates") or []:
        if not isinstance(c, Mapping):
            continue
        kernels = [str(k) for k in c.get("kernels") or []]
        shown = " → ".join(_short(k) for k in kernels[:NAMES_SHOWN])
        more = len(kernels) - NAMES_SHOWN
        streams = [s for s in c.get("streams") or [] if isinstance(s, Mapping)]
        rows.append({"kernels": clip(shown + (f" → … {more} more" if more > 0 else ""), 300),
                     "full": clip(" → ".join(kernels), 2000), "count": len(kernels),
                     "where": clip(_where(streams, names, ranks), 300),
                     "runs": int(c.get("runs") or 0), "kernel_time": fmt_ns(c.get("run_kernel_ns")),
                     "gaps": fmt_ns(c.get("run_gap_ns")), "saving": fmt_ns(c.get("saving_ns")),
                     "per_step": fmt_ns(c.get("saving_per_step_ns"))})
    every = found.get("all_saving_ns") or {}
    params = found.get("params") or {}
    return {"rows": rows, "found": int(found.get("found") or 0),
            "all_saving": fmt_ns(sum(v for v in every.values() if isinstance(v, (int, float)))) if every else "",
            "short": fmt_ns(params.get("short_kernel_ns")), "min_kernels": params.get("min_kernels")}


def graph_candidates_markdown(view: dict[str, Any] | None, escape) -> list[str]:
    """The candidates as Markdown lines (``escape`` makes capture strings inline-safe); [] without any."""
    if not view or not view["rows"]:
        return []
    out = [f"### CUDA-graph candidates: {view['found']} run(s) of short, launch-bound kernels repeated every step", "",
           f"_Launched as one graph each, all {view['found']} would save {view['all_saving']} of step time, summed over the captures (replayed)._", "",
           "| kernels | where | runs | kernel time / run | launch gaps / run | saving | per step |",
           "|---|---|--:|--:|--:|--:|--:|"]
    for row in view["rows"]:
        out.append(f"| {escape(row['kernels'])} ({row['count']}) | {escape(row['where'])} | {row['runs']} | "
                   f"{row['kernel_time']} | {row['gaps']} | {row['saving']} | {row['per_step']} |")
    out.append("")
    return out
