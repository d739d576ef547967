"""Query results as text: an aligned table for a terminal, CSV, or a JSON array of objects (``query --format``)."""

from __future__ import annotations

import csv
import io
import json

from nsight_advisor.common.control_chars import strip_controls
from nsight_advisor.common.text import printable


def format_rows(columns: list[str], rows: list[tuple], fmt: str) -> str:
    """Format query rows as an aligned table, CSV, or a JSON array of objects."""
    if fmt == "json":
        return json.dumps([dict(zip(columns, r)) for r in rows], indent=2, default=str) + "\n"
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows(rows)
        return strip_controls(buf.getvalue())
    # control characters from a capture (terminal escapes in kernel names) are shown escaped, never sent raw
    cells = [columns] + [["NULL" if v is None else printable(str(v)) for v in r] for r in rows]
    widths = [min(60, max(len(row[i]) for row in cells)) for i in range(len(columns))]

    def fit(text: str, width: int) -> str:
        return text if len(text) <= width else text[: width - 1] + "…"

    lines = ["  ".join(fit(c, w).ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines.append(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")
    return "\n".join(lines) + "\n"
