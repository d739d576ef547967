"""Small text helpers every renderer shares: clip a string, write a duration or a percentage."""

from __future__ import annotations

import math
from typing import Any

from nsight_advisor.common.text import format_duration_ns as fmt_ns  # noqa: F401 - the renderers' name for it


def clip(text: Any, limit: int) -> str:
    """``text`` as a string of at most ``limit`` characters, ending in '…' when it was cut."""
    s = "" if text is None else str(text)
    return s if len(s) <= limit else s[: max(0, limit - 1)] + "…"


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
