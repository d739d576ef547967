"""Where an ingest's failures are classified: the capture's fault (one line, exit 2) or ours (a bug, exit 3).

Every reader raises :class:`~nsight_advisor.common.errors.InputError` for the damage it knows. Damage it does not
know still surfaces somewhere deeper: DuckDB cannot bind a column that was renamed or cast text to a number,
SQLite's error text carries invalid UTF-8, Nsight Compute's reader meets a record cut short. Those are the
capture's fault when they come out of reading one capture, so :func:`classified` turns them into one
InputError naming the file, here, once, for every format. A capture that changed while it was read (replaced,
rewritten, still being written) is reported as such, whatever the reader made of it.

Not the capture's fault, and passed through untouched: Ctrl-C, running out of memory or disk (the CLI names
the full folder), and errors that only a bug in our code raises (AttributeError, NameError, AssertionError).
"""

from __future__ import annotations

import functools
import os
import re
import sqlite3
import struct
from pathlib import Path
from typing import Callable, TypeVar

import duckdb

from nsight_advisor.common import sql_params
from nsight_advisor.common.errors import InputError
from nsight_advisor.common.regular_file import identity
from nsight_advisor.common.text import first_line, is_utf8, printable

F = TypeVar("F", bound=Callable)

#: A path inside a run folder (see run_folder): a temporary copy, link or export of the capture.
_RUN_FOLDER_PATH = re.compile(r"[^\s:'\"]*/\.nsa-run-[^\s:'\"]*")

#: Raised by reading damaged or hand-edited data (besides sqlite3.Error and most duckdb.Error).
_DATA_ERRORS = (ValueError, TypeError, LookupError, ArithmeticError, struct.error, sqlite3.Error, EOFError)

#: DuckDB errors about the machine or the user, not the data: passed through as they are.
_NOT_DATA = tuple(getattr(duckdb, name) for name in ("InterruptException", "OutOfMemoryException", "IOException",
                                                     "InternalException", "PermissionException")
                  if hasattr(duckdb, name))


def classified(ingest: F) -> F:
    """Decorate ``ingest(con, capture_id, path, ...)``: damage-caused errors become one InputError naming ``path``."""
    @functools.wraps(ingest)
    def wrapper(con, capture_id, path, *args, **kwargs):
        path = Path(path)
        before = identity(path)
        try:
            if is_utf8(str(path)):
                result = ingest(con, capture_id, path, *args, **kwargs)
            else:
                result = _through_link(ingest, con, capture_id, path, *args, **kwargs)
        except InputError as exc:
            _raise_if_changed(path, before)
            if _RUN_FOLDER_PATH.search(str(exc)):  # a temporary copy or export: the user knows the capture's name
                raise InputError(_RUN_FOLDER_PATH.sub(str(path).replace("\\", "\\\\"), str(exc))) from None
            raise
        except Exception as exc:
            _raise_if_changed(path, before, exc)
            if is_data_error(exc):
                raise damaged(path, _RUN_FOLDER_PATH.sub(path.name.replace("\\", "\\\\"), describe(exc))) from exc
            raise
        _raise_if_changed(path, before)
        return result

    return wrapper  # type: ignore[return-value]


def _through_link(ingest, con, capture_id: int, path: Path, *args, **kwargs):
    """Ingest a capture whose name is not valid UTF-8 (DuckDB and SQLite take UTF-8 paths) through a symlink
    with a plain name in the run folder; the store records the name with its bad bytes escaped."""
    from nsight_advisor.common.run_folder import release, temp_path

    suffix = path.suffix if is_utf8(path.suffix) else ""
    link = temp_path(suffix)
    os.symlink(path.resolve(), link)
    shown = str(path.resolve()).encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    try:
        result = ingest(con, capture_id, link, *args, **kwargs)
    except InputError as exc:
        raise InputError(str(exc).replace(str(link), str(path))) from None
    finally:
        link.unlink()
        release(link.parent)
    sql_params.execute(con, "UPDATE captures SET source_path = ?, source_name = ? WHERE capture_id = ?",
                       [shown, Path(shown).name, capture_id])
    return result


def damaged(path: Path, what: str) -> InputError:
    """The one line for a capture whose content a reader could not take: ``what`` went wrong, and what to do."""
    return InputError(f"{path}: cannot be read: {what}; the file is damaged or is not as the profiler writes it: "
                      "capture or export it again")


def is_data_error(exc: BaseException) -> bool:
    """True when ``exc``, raised while reading one capture, comes from what the capture holds."""
    if _disk_full(exc):
        return False
    if isinstance(exc, getattr(duckdb, "InternalException", ())) and "UTF-8" in str(exc):
        return True  # a string from the capture that is not valid UTF-8 reached DuckDB
    if isinstance(exc, _NOT_DATA):
        return False
    return isinstance(exc, (duckdb.Error, *_DATA_ERRORS))


def describe(exc: BaseException) -> str:
    """The first line of ``exc``'s text (invalid bytes and control characters made visible), at most 300 chars."""
    try:
        text = str(exc)
        if isinstance(exc, UnicodeDecodeError) and isinstance(exc.object, bytes):
            # an error text (SQLite's, quoting the damaged file) that was itself not UTF-8: show that text
            text = exc.object.decode("utf-8", "replace")
    except Exception:  # noqa: BLE001 - an exception whose text cannot even be built
        text = type(exc).__name__
    line = first_line(text) if text.strip() else type(exc).__name__
    return first_line(printable(line.encode("utf-8", "backslashreplace").decode("utf-8")), limit=300)


def _raise_if_changed(path: Path, before: tuple | None, cause: BaseException | None = None) -> None:
    if identity(path) != before:
        raise InputError(f"{path}: changed while it was being read (replaced or still being written); run again "
                         f"once the file is complete") from cause


def _disk_full(exc: BaseException) -> bool:
    text = f"{getattr(exc, 'strerror', '') or ''} {exc if not isinstance(exc, UnicodeError) else ''}"
    return "No space left on device" in text or "Disk quota exceeded" in text
