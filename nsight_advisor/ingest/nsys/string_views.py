"""A view in an nsys export where nsys writes a table (StringIds as a view: an edited or re-packed export).

Reading a view runs SQL stored in the file. SQLite's SQL cannot touch files (extension loading stays off), so the
risk is the cost: a recursive view never ends, a view can build a value of a gigabyte. So a view is read through the
standard library with a time budget (:data:`VIEW_READ_S`, enforced by SQLite's progress handler), a cap on one
value's length and on its rows; a view past any of them is not read, and an ingest note says why.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from nsight_advisor.ingest.nsys.catalog import read_only_uri

#: Seconds a view may take to read in full.
VIEW_READ_S = 10.0
#: Longest value a view may give (SQLite's own limit is 1 GB).
MAX_VALUE_BYTES = 16 << 20
#: Most rows read from a view.
MAX_VIEW_ROWS = 50_000_000


class ViewUnreadable(Exception):
    """The view could not be read within the limits; the message says why."""


def read_string_view(path: Path, view: str) -> list[tuple[int, str]]:
    """``(id, value)`` rows of the StringIds-like ``view`` in the export at ``path`` (ids that are no integer left
    out, text that is not UTF-8 shown with U+FFFD); ViewUnreadable past the limits or when it lacks the columns."""
    src = sqlite3.connect(read_only_uri(path), uri=True)
    try:
        src.text_factory = lambda b: b.decode("utf-8", "replace")
        src.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
        columns = {r[1] for r in src.execute("SELECT * FROM pragma_table_info(?)", (view,))}
        if not {"id", "value"} <= columns:
            raise ViewUnreadable(f"no id and value columns (it has {', '.join(sorted(columns)) or 'none'})")
        deadline = time.monotonic() + VIEW_READ_S
        src.set_progress_handler(lambda: 1 if time.monotonic() > deadline else 0, 10_000)
        quoted = '"' + view.replace('"', '""') + '"'
        rows: list[tuple[int, str]] = []
        try:
            cur = src.execute(f"SELECT id, value FROM {quoted}")
            while batch := cur.fetchmany(100_000):
                rows += [(i, str(v) if v is not None else None) for i, v in batch
                         if type(i) is int and -(1 << 63) <= i < (1 << 63)]
                if len(rows) > MAX_VIEW_ROWS:
                    raise ViewUnreadable(f"more than {MAX_VIEW_ROWS:,} rows")
        except sqlite3.OperationalError as exc:
            if "interrupted" in str(exc):
                raise ViewUnreadable(f"not read in full within {VIEW_READ_S:g} s") from None
            raise ViewUnreadable(str(exc).splitlines()[0][:200]) from None
        except (sqlite3.DataError, MemoryError) as exc:
            raise ViewUnreadable(f"a value longer than {MAX_VALUE_BYTES:,} bytes ({exc})") from None
        return rows
    finally:
        src.close()


__all__ = ["read_string_view", "ViewUnreadable", "VIEW_READ_S", "MAX_VALUE_BYTES", "MAX_VIEW_ROWS"]
