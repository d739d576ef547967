"""Small text helpers every layer shares: durations for people, one line out of an exception, printable text.

They sit below ingest, schema, engine and report (they import nothing of the package), so each layer uses the same
one instead of its own copy.
"""

from __future__ import annotations

import math
from typing import Any


def format_duration_ns(ns: Any) -> str:
    """A duration in ns as a short human string: '812 ns', '12.3 µs', '4.56 ms', '1.23 s', '2.5 min'; '–' if unknown."""
    try:
        v = float(ns)
    except (TypeError, ValueError):
        return "–"
    if not math.isfinite(v):
        return "–"
    a = abs(v)
    if a < 1e3:
        return f"{v:.0f} ns"
    if a < 1e6:
        return f"{v / 1e3:.3g} µs"
    if a < 1e9:
        return f"{v / 1e6:.3g} ms"
    if a < 60e9:
        return f"{v / 1e9:.3g} s"
    return f"{v / 60e9:.3g} min"


def printable(text: str) -> str:
    """``text`` with control characters (newlines, terminal escapes) written as escapes, so it stays one line."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def first_line(exc: BaseException | str, limit: int | None = None) -> str:
    """The first non-blank line of an exception's text (its type's name when it has none), stripped and cut to
    ``limit`` characters."""
    if isinstance(exc, BaseException):
        try:
            text = str(exc)
        except Exception:  # noqa: BLE001 - an exception whose text cannot even be built
            text = ""
        fallback = type(exc).__name__
    else:
        text, fallback = exc or "", "error"
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    line = lines[0] if lines else fallback
    if limit is not None and len(line) > limit:
        line = line[: max(0, limit - 3)] + "..."
    return line


def is_utf8(text: str) -> bool:
    """Whether ``text`` (a path) encodes as UTF-8; a reader is given a link to a path that does not
    (ingest/failures.py)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
