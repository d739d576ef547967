"""Display strings for the source functions behind a finding (``findings[].source_frames``, computed by
nsight_advisor.engine.source_frames): a readable short name of each frame, its module and count."""

from __future__ import annotations

from typing import Any, Mapping

from nsight_advisor.report.formatting import clip

#: Frames shown per finding in the HTML and Markdown (the JSON has the engine's top ones).
SHOWN_FRAMES = 3
SYMBOL_CHARS = 120


def short_symbol(symbol: Any) -> str:
    """A demangled C++ symbol without its template arguments, argument types or return type, so that a frame reads
    as a function name ('void ns::f<int>(float*) const' gives 'ns::f()')."""
    text = "" if symbol is None else str(symbol).strip()
    if text.endswith(" const"):
        text = text[: -len(" const")]
    out, depth = [], 0
    for ch in text:
        if ch in "(<":
            if depth == 0 and ch == "(":
                out.append("(")
            depth += 1
        elif ch in ")>" and depth:
            depth -= 1
            if depth == 0 and ch == ")":
                out.append(")")
        elif depth == 0:
            out.append(ch)
    short = "".join(out).strip()
    short = short.rsplit(" ", 1)[-1] if " " in short else short  # the return type, when one is written
    return short or text


def finding_source(finding: Mapping[str, Any]) -> list[dict[str, str]]:
    """A finding's source frames as the report shows them: short name, full name, module and count. Frames whose
    short names are equal (instantiations of one template) show as one, their counts summed."""
    merged: dict[tuple[str, str], dict[str, Any]] = {}
    for frame in list(finding.get("source_frames") or []):
        if not isinstance(frame, Mapping):
            continue
        key = (short_symbol(frame.get("symbol")), str(frame.get("module") or ""))
        entry = merged.setdefault(key, {"full": frame.get("symbol"), "count": 0})
        entry["count"] += int(frame.get("count") or 0)
    shown = sorted(merged.items(), key=lambda kv: -kv[1]["count"])[:SHOWN_FRAMES]
    return [{"symbol": clip(sym, SYMBOL_CHARS), "full_symbol": clip(entry["full"], 2000), "module": clip(mod, 200),
             "count": f"{entry['count']:,} backtrace{'' if entry['count'] == 1 else 's'}"}
            for (sym, mod), entry in shown]


def logical_locations(finding: Mapping[str, Any]) -> list[dict[str, str]]:
    """SARIF logicalLocations of a finding's source frames (kind function; the exports hold no file or line)."""
    return [{"kind": "function", "name": clip(short_symbol(frame.get("symbol")), 1000),
             "fullyQualifiedName": clip(frame.get("symbol"), 4000)}
            for frame in list(finding.get("source_frames") or []) if isinstance(frame, Mapping) and frame.get("symbol")]
