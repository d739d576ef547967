"""Display data for the ranks of a distributed job (``summary["ranks"]``): the rank x time chart of collectives
and the per-rank table. Geometry and strings only; the template draws them as inline SVG, escaped by Jinja.

At many ranks the chart holds the arrival bands and the outlier ranks the summary chose, and the table the ranks
that stand out (longest waits, most compute, most often last) with the spread over all of them, so the page stays
small at any rank count.
"""

from __future__ import annotations

from statistics import median
from typing import Any, Mapping

from nsight_advisor.report.data import clip, fmt_ns

CHART_WIDTH = 900
LABEL_WIDTH = 170
ROW_HEIGHT = 14
ROW_GAP = 4
#: Up to this many ranks the table lists every rank; beyond, the outliers and the spread.
MAX_TABLE_RANKS = 64
TABLE_OUTLIERS = 8
COLLECTIVE_COLORS = ("#8e5fb5", "#2f6fb0", "#3d9a6a", "#c78a1c", "#b42318", "#4f8fbf", "#7a9a3d", "#9aa3ae")


def rank_view(job: Any) -> dict[str, Any] | None:
    """The chart and table of one job, as the template draws them; None when there is nothing to draw."""
    if not isinstance(job, Mapping) or not job.get("ranks"):
        return None
    chart = job.get("chart") or {}
    span = max(float(job.get("span_ns") or 0), 1.0)
    colors: dict[str, str] = {}
    rows = [*({"label": b.get("label"), "bars": b.get("bars") or [], "band": True} for b in chart.get("bands") or []),
            *({"label": r.get("label"), "bars": r.get("bars") or [], "band": False} for r in chart.get("rows") or [])]
    scale = (CHART_WIDTH - LABEL_WIDTH - 10) / span
    drawn = []
    for i, row in enumerate(rows):
        y = i * (ROW_HEIGHT + ROW_GAP)
        rects = []
        for start, end, collective in row["bars"]:
            name = str(collective)
            color = colors.setdefault(name, COLLECTIVE_COLORS[len(colors) % len(COLLECTIVE_COLORS)])
            x = LABEL_WIDTH + max(float(start), 0.0) * scale
            rects.append({"x": round(x, 1), "w": round(max(1.0, (float(end) - float(start)) * scale), 1),
                          "color": color,
                          "title": clip(f"{row['label']}: {name} from +{fmt_ns(start)} for {fmt_ns(end - start)}", 160)})
        drawn.append({"y": y, "label": clip(row["label"], 40), "band": row["band"], "rects": rects})
    ranks = list(job["ranks"])
    return {
        "job": clip(job.get("job"), 60),
        "rank_count": len(ranks),
        "matched": int(job.get("matched_collectives") or 0),
        "span": fmt_ns(span),
        "clock": _clock_note(job.get("clock") or {}),
        "width": CHART_WIDTH,
        "height": max(len(drawn) * (ROW_HEIGHT + ROW_GAP), ROW_HEIGHT),
        "label_width": LABEL_WIDTH,
        "row_height": ROW_HEIGHT,
        "rows": drawn,
        "all_ranks": bool(chart.get("all_ranks", True)),
        "legend": [{"label": clip(k, 40), "color": v} for k, v in colors.items()],
        **_table(ranks),
    }


def _clock_note(clock: Mapping[str, Any]) -> str:
    corrected = int(clock.get("corrected_captures") or 0)
    if corrected:
        return (f"Clocks aligned on the collectives' ends: {corrected} capture(s) corrected, by up to "
                f"{fmt_ns(clock.get('max_correction_ns'))}.")
    return (f"One clock: the collectives' ends agree within {fmt_ns(clock.get('max_measured_offset_ns'))} "
            "across captures (below 10 µs, no correction applied).")


def _table(ranks: list[Mapping[str, Any]]) -> dict[str, Any]:
    if len(ranks) <= MAX_TABLE_RANKS:
        shown = ranks
    else:
        keep: dict[int, Mapping[str, Any]] = {}
        for key in ("wait_ns", "kernel_ns", "times_last"):
            for r in sorted(ranks, key=lambda r, key=key: (-(r.get(key) or 0), r.get("rank")))[:TABLE_OUTLIERS]:
                keep[r["rank"]] = r
        shown = sorted(keep.values(), key=lambda r: r["rank"])
    spread = {}
    for key in ("kernel_ns", "comm_ns", "wait_ns"):
        values = [float(r.get(key) or 0) for r in ranks]
        spread[key] = f"{fmt_ns(min(values))} / {fmt_ns(median(values))} / {fmt_ns(max(values))}"
    return {
        "table": [{
            "rank": r.get("rank"), "where": clip(f"capture {r.get('capture_id')}, GPU {r.get('device_id')}", 60),
            "kernel": fmt_ns(r.get("kernel_ns")), "comm": fmt_ns(r.get("comm_ns")), "wait": fmt_ns(r.get("wait_ns")),
            "last": f"{int(r.get('times_last') or 0)} of {int(r.get('collectives') or 0)}",
            "clock": fmt_ns(r.get("clock_offset_ns")) if r.get("clock_offset_ns") else "",
        } for r in shown],
        "table_left_out": len(ranks) - len(shown),
        "spread": spread,
    }
