"""Small text helpers every renderer shares: clip a string, write a duration or a percentage."""

from __future__ import annotations

import math
from typing import Any

from nsight_advisor.common.text import format_duration_ns as fmt_ns  # noqa: F401 - the renderers' name for it


def clip(text: Any, limit: int) -> str:
    """``text`` as a string of at most ``limit`` characters, ending in '…' when it was cut."""
    s = "" if text is None else str(text)
    return s if len(s) <= limit else s[: max(0, limit - 1)] + "…"


def tool_version(version: Any) -> str:
    """A capture's tool version as a report shows it: '' where the capture does not say (a PyTorch profiler trace
    records none: its store row holds 'unknown', which reads as a broken field next to the tool's name)."""
    text = "" if version is None else str(version)
    return "" if text.strip().lower() in ("", "unknown") else text


def fmt_pct(pct: Any, digits: int = 1) -> str:
    """A percentage (0..100) as text, '–' when unknown."""
    try:
        v = float(pct)
    except (TypeError, ValueError):
        return "–"
    if not math.isfinite(v):
        return "–"
    if 0 < abs(v) < 0.1:
        return "<0.1%"
    return f"{v:.{digits}f}%"
