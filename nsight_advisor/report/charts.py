"""Geometry of the report's inline SVG charts, from the summary's already computed series.

Functions return numbers and labels only; the template draws them (so every label a capture supplied is
escaped by Jinja2 like any other text). Every chart is bounded: a fixed number of bars, bins and points.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

from nsight_advisor.report.data import clip, fmt_ns, fmt_pct

CATEGORY_COLORS = {
    "GEMM/conv": "#2f6fb0",
    "attention": "#6a4fb3",
    "elementwise": "#3d9a6a",
    "reduction/norm": "#c78a1c",
    "copy": "#8a8f98",
    "communication": "#b8486b",
    "other": "#b9c0c9",
}
FALLBACK_COLORS = ("#4f8fa8", "#a0744f", "#7a9a3d", "#9a5fa0")


def category_bars(categories: list[Mapping[str, Any]], width: int = 340) -> dict[str, Any] | None:
    """Horizontal bars of GPU time per kernel category (largest first), or None without data."""
    rows = [c for c in categories if c.get("total_ns")][:8]
    if not rows:
        return None
    label_w, value_w, row_h = 112, 92, 22
    bar_w = width - label_w - value_w
    top = max(float(r["total_ns"]) for r in rows)
    bars = []
    for i, r in enumerate(rows):
        name = str(r.get("category") or "other")
        w = max(1.0, bar_w * float(r["total_ns"]) / top)
        bars.append({
            "label": clip(name, 18),
            "y": i * row_h,
            "w": round(w, 1),
            "color": CATEGORY_COLORS.get(name, FALLBACK_COLORS[i % len(FALLBACK_COLORS)]),
            "value": f"{fmt_pct(r.get('pct'), 0)} · {fmt_ns(r['total_ns'])}",
        })
    return {"width": width, "height": len(rows) * row_h, "label_w": label_w, "bar_x": label_w, "bar_w": bar_w,
            "bars": bars}


def utilization_area(series: Mapping[str, Any], width: int = 600, height: int = 110) -> dict[str, Any] | None:
    """An area chart of GPU busy % over time for one capture, or None without bins."""
    values = [float(v or 0.0) for v in (series.get("busy_pct") or [])]
    if not values:
        return None
    left, bottom, plot_h = 34, 18, height - 18 - 6
    plot_w = width - left - 6
    step = plot_w / len(values)
    pts = []
    for i, v in enumerate(values):
        y = 6 + plot_h * (1 - min(100.0, max(0.0, v)) / 100.0)
        pts.append((left + i * step, y))
        pts.append((left + (i + 1) * step, y))
    base = 6 + plot_h
    path = f"M{left:.1f},{base:.1f} " + " ".join(f"L{x:.1f},{y:.1f}" for x, y in pts) + f" L{left + plot_w:.1f},{base:.1f} Z"
    span_ns = float(series.get("bin_ns") or 0) * len(values)
    mean = sum(values) / len(values)
    return {
        "width": width, "height": height, "left": left, "top": 6, "plot_w": round(plot_w, 1), "plot_h": plot_h,
        "base": base, "path": path,
        "grid": [{"y": round(6 + plot_h * (1 - p / 100), 1), "label": f"{p}%"} for p in (0, 50, 100)],
        "mean_y": round(6 + plot_h * (1 - mean / 100), 1), "mean": fmt_pct(mean, 0),
        "end_label": fmt_ns(span_ns), "bin": fmt_ns(series.get("bin_ns")), "bins": len(values),
        "idle_bins": sum(1 for v in values if v < 1.0),
    }


def _log_ticks(lo: float, hi: float) -> list[float]:
    return [10.0 ** e for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)]


def _si(value: float, unit: str) -> str:
    for factor, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= factor:
            return f"{value / factor:.3g}{prefix}{unit}"
    return f"{value:.3g}{unit}"


def roofline(roof: Mapping[str, Any] | None, width: int = 420, height: int = 280) -> dict[str, Any] | None:
    """A log-log roofline: kernels as (FLOP/byte, FLOP/s) points under the memory and compute roofs."""
    if not roof or not roof.get("points"):
        return None
    points = [p for p in roof["points"]
              if (p.get("intensity_flop_per_byte") or 0) > 0 and (p.get("achieved_flops_per_s") or 0) > 0]
    if not points:
        return None
    peak_f = roof.get("peak_flops_per_s") or None
    peak_b = roof.get("peak_bytes_per_s") or None
    xs = [float(p["intensity_flop_per_byte"]) for p in points]
    ys = [float(p["achieved_flops_per_s"]) for p in points]
    ridge = peak_f / peak_b if peak_f and peak_b else None
    x_lo, x_hi = min(xs + ([ridge] if ridge else [])) / 4, max(xs + ([ridge] if ridge else [])) * 4
    y_hi = max(ys + ([peak_f] if peak_f else [])) * 2
    y_lo = min(ys) / 4
    x_lo, x_hi = 10 ** math.floor(math.log10(x_lo)), 10 ** math.ceil(math.log10(x_hi))
    y_lo, y_hi = 10 ** math.floor(math.log10(y_lo)), 10 ** math.ceil(math.log10(y_hi))
    left, right, top, bottom = 58, 22, 10, 34
    pw, ph = width - left - right, height - top - bottom

    def px(x: float) -> float:
        return left + pw * (math.log10(x) - math.log10(x_lo)) / (math.log10(x_hi) - math.log10(x_lo))

    def py(y: float) -> float:
        return top + ph * (1 - (math.log10(y) - math.log10(y_lo)) / (math.log10(y_hi) - math.log10(y_lo)))

    roof_path = None
    if peak_f and peak_b:
        x0 = x_lo
        y0 = x0 * peak_b
        if y0 < y_lo:  # start where the memory roof enters the plot
            x0, y0 = y_lo / peak_b, y_lo
        roof_path = f"M{px(x0):.1f},{py(y0):.1f} L{px(ridge):.1f},{py(peak_f):.1f} L{px(x_hi):.1f},{py(peak_f):.1f}"
    elif peak_f:
        roof_path = f"M{px(x_lo):.1f},{py(peak_f):.1f} L{px(x_hi):.1f},{py(peak_f):.1f}"
    dots = []
    # Numbered by time spent, longest first, so the legend lists the kernels that matter most.
    points = sorted(points, key=lambda p: -(p.get("duration_ns") or 0))
    for n, p in enumerate(points, 1):
        dots.append({
            "n": n,
            "x": round(px(float(p["intensity_flop_per_byte"])), 1),
            "y": round(py(float(p["achieved_flops_per_s"])), 1),
            "label": clip(p.get("name"), 160),
            "detail": f"{float(p['intensity_flop_per_byte']):.3g} FLOP/byte, {_si(float(p['achieved_flops_per_s']), 'FLOP/s')}",
        })
    return {
        "width": width, "height": height, "left": left, "top": top, "pw": pw, "ph": ph,
        "roof_path": roof_path,
        "ridge": {"x": round(px(ridge), 1), "label": f"ridge {ridge:.3g} FLOP/B"} if ridge else None,
        "x_ticks": [{"x": round(px(t), 1), "label": _si(t, "")} for t in _log_ticks(x_lo, x_hi) if x_lo <= t <= x_hi],
        "y_ticks": [{"y": round(py(t), 1), "label": _si(t, "")} for t in _log_ticks(y_lo, y_hi) if y_lo <= t <= y_hi],
        "dots": dots,
        "left_out": int(roof.get("points_left_out") or 0),
        "peak": _si(peak_f, "FLOP/s") if peak_f else None,
        "bandwidth": _si(peak_b, "B/s") if peak_b else None,
    }


PARTITION_COLORS = {
    "kernel": "#2f6fb0",
    "comm": "#8e5fb5",
    "copy": "#3d9a6a",
    "memset": "#7a9a3d",
    "idle: launch": "#e0c36a",
    "idle: startup": "#b9c0c9",
    "idle: jit": "#9aa3ae",
    "idle: allocation": "#c78a1c",
    "idle: host-copy": "#d9a05b",
    "idle: sync": "#b8486b",
    "idle: host": "#e07b5f",
    "idle: dependency": "#6a8fb8",
    "idle: unknown": "#dcdfe3",
}
MAX_PARTITION_DEVICES = 8
#: Idle time no finding explains is called out when it is at least this share of the device's window.
UNCLAIMED_IDLE_PCT = 5.0


def unclaimed_idle_text(a: Mapping[str, Any]) -> str:
    """"12.3 ms (15%) of idle time no finding explains" when the idle time the findings do not claim is at least
    :data:`UNCLAIMED_IDLE_PCT` of the window, else ""."""
    window = float(a.get("window_end_ns", 0)) - float(a.get("window_start_ns", 0))
    if window <= 0 or a.get("idle_claimed_ns") is None:
        return ""
    left = float(a.get("idle_ns") or 0) - float(a.get("idle_claimed_ns") or 0)
    if left <= 0 or 100.0 * left / window < UNCLAIMED_IDLE_PCT:
        return ""
    return f"{fmt_ns(left)} ({fmt_pct(100.0 * left / window)}) of idle time no finding explains"


def partition_bars(accounting: list[Mapping[str, Any]] | None, width: int = 340) -> dict[str, Any] | None:
    """One stacked bar per device: its analysis window cut into kernel, copy, memset and idle time by cause.

    Every part of the partition gets a segment (at least a pixel when it is not empty) and a legend entry with
    its time and share, so that the bar and the JSON's ``accounting`` tell the same numbers."""
    devices = [a for a in (accounting or []) if isinstance(a, Mapping)]
    if not devices:
        return None
    bars = []
    used: dict[str, str] = {}
    for a in devices[:MAX_PARTITION_DEVICES]:
        window = float(a.get("window_end_ns", 0)) - float(a.get("window_start_ns", 0))
        if window <= 0:
            continue
        parts = [("kernel", a.get("kernel_ns")), ("comm", a.get("comm_ns")), ("copy", a.get("copy_ns")),
                 ("memset", a.get("memset_ns"))]
        parts += [(f"idle: {cause}", ns) for cause, ns in (a.get("idle_by_cause") or {}).items()]
        x, segments = 0.0, []
        for label, ns in parts:
            ns = float(ns or 0)
            if ns <= 0:
                continue
            w = max(1.0, width * ns / window)
            color = PARTITION_COLORS.get(label, FALLBACK_COLORS[len(used) % len(FALLBACK_COLORS)])
            used[label] = color
            segments.append({"x": round(x, 2), "w": round(w, 2), "color": color, "label": label,
                             "title": f"{label}: {fmt_ns(ns)} ({fmt_pct(100.0 * ns / window)})"})
            x += w
        device = a.get("device_id")
        bars.append({"device": "host" if device is None else f"GPU {device}", "window": fmt_ns(window),
                     "unclaimed": unclaimed_idle_text(a),
                     "before": fmt_ns(a.get("before_window_ns")) if a.get("before_window_ns") else "",
                     "source": clip(a.get("window_source"), 120),
                     "segments": segments, "total": round(max(x, 1.0), 2)})
    legend = [{"label": label, "color": color} for label, color in used.items()]
    return {"width": width, "bars": bars, "legend": legend,
            "left_out": max(0, len(devices) - MAX_PARTITION_DEVICES)}
