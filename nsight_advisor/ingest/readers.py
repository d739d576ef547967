"""The readers' entry points: a capture's format sniffed (``detect``) and the capture handed to the reader for that
format; a job's PyTorch traces read together. Imported through the package (``from nsight_advisor.ingest import
ingest_capture``), which loads this module, and DuckDB with it, on first use."""

from __future__ import annotations

from pathlib import Path
from typing import Collection, Sequence

import duckdb

from nsight_advisor.ingest.detect import detect_format
from nsight_advisor.common.errors import InputError
from nsight_advisor.common.text import is_utf8
from nsight_advisor.ingest.failures import classified, describe, is_data_error


def ingest_captures(con: duckdb.DuckDBPyConnection, items: Sequence[tuple[int, Path]], *,
                    progress: bool = False, defer: Collection[str] = ()) -> None:
    """Ingest each ``(capture_id, path)`` into the store behind ``con``."""
    for capture_id, path in items:
        ingest_capture(con, capture_id, Path(path), progress=progress, defer=defer)


def ingest_kineto_traces(con: duckdb.DuckDBPyConnection, items: Sequence[tuple[int, Path]], *,
                         progress: bool = False, defer: Collection[str] = ()) -> None:
    """Ingest PyTorch profiler (Kineto) traces together: as :func:`ingest_captures` would, with every statement
    after the parse run once for all of them (nsight_advisor.ingest.kineto.trace.ingest_kineto_many).

    For many small traces (a job's ranks), whose ingest is mostly the statements' fixed cost. A trace that cannot
    be read raises InputError naming it, the first in ``items`` order; a path that is not UTF-8 sends them all
    one at a time (their readers go through a link, ingest.failures).
    """
    items = [(cid, Path(path)) for cid, path in items]
    if len(items) < 2 or not all(is_utf8(str(path)) for _, path in items):
        ingest_captures(con, items, progress=progress, defer=defer)
        return
    from nsight_advisor.ingest.kineto.trace import ingest_kineto_many

    try:
        ingest_kineto_many(con, items, progress=progress, defer=defer)
    except InputError:
        raise
    except Exception as exc:
        # each trace's parse names its file; a statement run for all of them after the parse cannot
        if is_data_error(exc):
            names = ", ".join(path.name for _, path in items[:3]) + (", ..." if len(items) > 3 else "")
            raise InputError(f"{len(items)} PyTorch traces ({names}): cannot be read together: {describe(exc)}; "
                             "analyze them one at a time to find the damaged one") from exc
        raise


@classified
def ingest_capture(con: duckdb.DuckDBPyConnection, capture_id: int, path: Path, *, progress: bool = False,
                   defer: Collection[str] = ()) -> None:
    """Ingest one capture file as ``capture_id``.

    ``defer``: normalized tables the caller will not read, which an Nsight Systems or Kineto ingest may leave
    out (see :data:`~nsight_advisor.ingest.deferred.DEFERRABLE`; recorded in ``capture_deferred``). Other formats load everything.
    """
    fmt = detect_format(path)
    if fmt == "nsys-sqlite":
        from nsight_advisor.ingest.nsys.export import ingest_nsys_sqlite

        ingest_nsys_sqlite(con, capture_id, path, progress=progress, defer=defer)
    elif fmt == "nsys-rep":
        from nsight_advisor.ingest.nsys.raw import ingest_nsys_report

        ingest_nsys_report(con, capture_id, path, progress=progress, defer=defer)
    elif fmt == "ncu-rep":
        from nsight_advisor.ingest.ncu.rep_file import ingest_ncu_report

        ingest_ncu_report(con, capture_id, path, progress=progress)
    elif fmt == "ncu-csv":
        from nsight_advisor.ingest.ncu.csv_export import ingest_ncu_csv

        ingest_ncu_csv(con, capture_id, path, progress=progress)
    elif fmt == "kineto-json":
        from nsight_advisor.ingest.kineto.trace import ingest_kineto

        ingest_kineto(con, capture_id, path, progress=progress, defer=defer)
    else:  # detect_format raises for anything else; this guards new formats added there only
        raise AssertionError(f"no reader for format {fmt!r}")
