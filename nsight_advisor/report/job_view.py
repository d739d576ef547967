"""Display data for a job (an analysis of several ranks' captures): its findings grouped per rule, each with the
ranks it touches (``job_findings`` of the JSON), and a heat strip of every rank's time partition.

Strings and geometry only, from the finished result (report/data.py's ``prepare``); the HTML template and the
Markdown renderer draw them. At many ranks each entry's table lists the worst ranks and says how many more, and
the strip gives each rank a column a few pixels wide, so the page stays small and readable at 256 ranks.
"""

from __future__ import annotations

from typing import Any, Mapping

from nsight_advisor.report.charts import FALLBACK_COLORS, PARTITION_COLORS
from nsight_advisor.report.data import clip, fmt_ns, fmt_pct

#: Ranks listed in an entry's per-rank table (the worst first); the others are counted.
MAX_RANK_ROWS = 16
STRIP_WIDTH = 900
STRIP_HEIGHT = 40
#: Entries shown in full; beyond, counted (every one is in the JSON).
MAX_ENTRIES = 60


def rank_label(row: Mapping[str, Any]) -> str:
    """'rank 3', else 'capture 4' where the capture names no rank."""
    return f"rank {row['rank']}" if row.get("rank") is not None else f"capture {row.get('capture_id')}"


def job_entries(r: Mapping[str, Any], max_rows: int = MAX_RANK_ROWS) -> list[dict[str, Any]]:
    """The grouped findings as the reports show them, ranked as in the JSON."""
    numbers = r.get("finding_n") or []
    out = []
    for i, e in enumerate((r.get("job_findings") or [])[:MAX_ENTRIES], 1):
        per = [p for p in e.get("per_rank") or [] if isinstance(p, Mapping)]
        spread = e.get("spread") or {}
        worst = e.get("worst") or {}
        rows = []
        for p in per[:max_rows]:
            cards = [numbers[k] for k in p.get("findings") or [] if isinstance(k, int) and 0 <= k < len(numbers)
                     and numbers[k]]
            rows.append({"rank": rank_label(p), "source": clip(p.get("source_name") or "", 80),
                         "device": "" if p.get("device_id") is None else f"GPU {p.get('device_id')}",
                         "impact": fmt_ns(p.get("impact_ns")) if p.get("impact_ns") else "–",
                         "share": fmt_pct(p.get("impact_pct")) if p.get("impact_pct") else "–",
                         "severity": str(p.get("severity") or "info"), "cards": cards})
        worst_cards = rows[0]["cards"] if rows else []  # the worst rank's finding speaks for the entry
        n = worst_cards[0] if worst_cards else None
        out.append({
            "n": i, "anchor": f"job-{i}", "severity": str(e.get("severity") or "info"),
            "title": clip(e.get("title") or e.get("rule_name"), 300), "subject": clip(e.get("subject") or "", 120),
            "rule_id": clip(e.get("rule_id"), 100), "rule_name": clip(e.get("rule_name"), 100),
            "ranks": f"{e.get('ranks_touched')} of {e.get('ranks_total')}",
            "all_ranks": e.get("ranks_touched") == e.get("ranks_total"),
            "total": fmt_ns(e.get("impact_ns_total")) if e.get("impact_ns_total") else "–",
            # with the fix on every rank it touches, replayed together; "" where not replayed
            "saving": fmt_ns(e.get("saving_all_ranks_ns")) if isinstance(e.get("saving_all_ranks_ns"), int) else "",
            "worst": rank_label(worst) if worst else "",
            "worst_impact": fmt_ns(worst.get("impact_ns")) if worst.get("impact_ns") else "–",
            "spread": (f"{fmt_ns(spread.get('min_ns'))} / {fmt_ns(spread.get('median_ns'))} / "
                       f"{fmt_ns(spread.get('max_ns'))}") if spread.get("max_ns") else "–",
            "rows": rows, "rows_left_out": max(0, len(per) - max_rows), "card": n,
        })
    return out


def device_ranks(summary: Mapping[str, Any]) -> dict[tuple[Any, Any], int]:
    """Each (capture_id, device_id)'s rank in the jobs of ``summary.ranks`` (a capture may hold several ranks, one
    per GPU; devices of no job are left out)."""
    ranks: dict[tuple[Any, Any], int] = {}
    for job in summary.get("ranks") or []:
        for row in (job.get("ranks") or []) if isinstance(job, Mapping) else []:
            if isinstance(row, Mapping) and row.get("rank") is not None:
                ranks[(row.get("capture_id"), row.get("device_id"))] = row["rank"]
    return ranks


def heat_strip(captures: list[Mapping[str, Any]], summary: Mapping[str, Any]) -> dict[str, Any] | None:
    """One column per rank (per device of each capture, in rank order): its analysis window cut into kernel, comm,
    copy, memset and idle by cause, top to bottom; None for fewer than two columns."""
    ranks = device_ranks(summary)
    columns = []
    for c in captures:
        for a in c.get("accounting") or []:
            if not isinstance(a, Mapping) or a.get("device_id") is None:
                continue
            window = float(a.get("window_end_ns", 0)) - float(a.get("window_start_ns", 0))
            if window <= 0:
                continue
            rank = ranks.get((c.get("capture_id"), a.get("device_id")))
            label = (f"rank {rank}" if rank is not None else
                     f"{clip(c.get('source_name') or c.get('capture_id'), 60)} GPU {a.get('device_id')}")
            parts = [("kernel", a.get("kernel_ns")), ("comm", a.get("comm_ns")), ("copy", a.get("copy_ns")),
                     ("memset", a.get("memset_ns"))]
            parts += sorted(((f"idle: {k}", v) for k, v in (a.get("idle_by_cause") or {}).items()),
                            key=lambda kv: kv[0])
            columns.append((rank if rank is not None else 1 << 40, c.get("capture_id") or 0, label, window, parts))
    if len(columns) < 2:
        return None
    columns.sort(key=lambda col: (col[0], col[1]))
    step = STRIP_WIDTH / len(columns)
    width = max(step - (1 if step >= 4 else 0), 1)
    used: dict[str, str] = {}
    drawn = []
    for i, (_rank, _cid, label, window, parts) in enumerate(columns):
        y, cells, busy = 0.0, [], 0.0
        for part, ns in parts:
            ns = float(ns or 0)
            if ns <= 0:
                continue
            h = STRIP_HEIGHT * ns / window
            color = PARTITION_COLORS.get(part, FALLBACK_COLORS[len(used) % len(FALLBACK_COLORS)])
            used[part] = color
            cells.append({"y": round(y, 2), "h": round(h, 2), "color": color})
            y += h
            if not part.startswith("idle"):
                busy += ns
        drawn.append({"x": round(i * step, 2), "w": round(width, 2), "cells": cells,
                      "title": f"{label}: busy {fmt_pct(100.0 * busy / window)} of {fmt_ns(window)}; " + "; ".join(
                          f"{part} {fmt_pct(100.0 * float(ns or 0) / window)}" for part, ns in parts if ns)})
    return {"width": STRIP_WIDTH, "height": STRIP_HEIGHT, "columns": drawn, "count": len(drawn),
            "first": columns[0][2], "last": columns[-1][2],
            "legend": [{"label": label, "color": color} for label, color in used.items()]}
