"""Read an Nsight Systems SQLite export (`nsys export --type sqlite`, nsys 2021.3 to 2026.x) into the store.

The export is attached read-only through DuckDB's sqlite scanner (loaded from its pinned pip package,
signature checks on, nothing downloaded) and every normalized table is filled with one
``INSERT ... SELECT`` that projects only the columns it needs; StringIds joins and enum labels are
resolved inside DuckDB. Why not the standard library: merely iterating the projected rows with Python's
sqlite3 is slower than the scanner's parallel read, before any conversion or insert (docs/performance.md).
The readers of each table live beside this module: ``nsys_kernels`` (API calls, kernels, copies, memsets,
synchronizations), ``nsys_nvtx`` (NVTX ranges), ``nsys_gpus`` (GPUs and GPU metrics); ``nsys_catalog`` reads
what the export holds and ``nsys_reader`` is what they share. The catalog (tables, columns, ENUM tables, version) is read with sqlite3, also read-only.
Environment tables (TARGET_INFO_SYSTEM_ENV, META_DATA_CAPTURE, ProcessStreams) are never read.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
from pathlib import Path
from typing import Callable, Collection

import duckdb

from nsight_advisor.common.errors import InputError
from nsight_advisor.ingest.deferred import DEFERRABLE
from nsight_advisor.ingest.failures import damaged, describe, is_data_error
from nsight_advisor.ingest.nsys.catalog import (  # noqa: F401 - ExportCatalog, read_catalog: this format's API
    CUDA_GPU_INFO, GPU_INFO, GPU_METRICS, KERNEL, MEMCPY, MEMSET, NVTX, RUNTIME, SYNC, ExportCatalog, attachable,
    load_sqlite_scanner, read_catalog, remove_copy, sql_text,
)
from nsight_advisor.ingest.nsys.callchains import read_callchains
from nsight_advisor.ingest.nsys.gpus import gpu_metrics_span_sql, read_gpu_metrics, read_gpus
from nsight_advisor.ingest.nsys.kernels import read_api_calls, read_kernels, read_memcpys, read_memsets, read_syncs
from nsight_advisor.ingest.nsys.nvtx import nvtx_span_sql, read_nvtx_ranges
from nsight_advisor.ingest.nsys.reader import ExportReader, bound_memory
from nsight_advisor.ingest.nsys.side_steps import SideSteps, side_worthwhile
from nsight_advisor.common.progress import Progress
from nsight_advisor.common.text import first_line


def ingest_nsys_sqlite(con: duckdb.DuckDBPyConnection, capture_id: int, path: Path, *, progress: bool = False,
                       defer: Collection[str] = ()) -> None:
    """Fill the normalized tables for one nsys SQLite export as ``capture_id``.

    Raises InputError (one line naming the file) when ``path`` is not a readable nsys export.
    What the export lacks is recorded in ``capture_missing``; dropped rows in ``ingest_notes``.
    Tables named in ``defer`` (from :data:`DEFERRABLE`) are left empty and listed in ``capture_deferred``;
    the capture's start, end and duration still cover their rows.
    """
    path = Path(path)
    source, private = attachable(path)
    try:
        catalog = read_catalog(path, read_from=source)
    except BaseException:
        remove_copy(private)
        raise
    alias = f"nsys_src_{capture_id}"
    scratch = f"nsys_scratch_{capture_id}"  # in memory, seen by every connection (a TEMP table is not)
    unknown = set(defer) - set(DEFERRABLE)
    if unknown:
        raise ValueError(f"cannot defer {sorted(unknown)}: only {DEFERRABLE}")
    try:
        load_sqlite_scanner(con)
    except BaseException:
        remove_copy(private)
        raise
    try:
        con.execute(f"ATTACH '{sql_text(str(source))}' AS {alias} (TYPE sqlite, READ_ONLY)")
    except duckdb.Error as exc:
        remove_copy(private)
        raise InputError(f"{path}: cannot be opened as SQLite ({first_line(exc)})") from None
    con.execute(f"ATTACH ':memory:' AS {scratch}")
    ing = ExportReader(con, capture_id, catalog, alias, scratch, defer=frozenset(defer))
    saved, ing.memory_bounded = bound_memory(con)
    step = "prepare"
    try:
        with Progress(f"ingest {path.name}", len(STEPS), enabled=progress) as bar:
            ing.run("prepare", ExportReader.prepare)
            # the spans of the tables left out, asked while the others are read (they need only the export)
            ing.prefetch("nvtx_ranges", NVTX, nvtx_span_sql(ing))
            ing.prefetch("gpu_metrics", GPU_METRICS, gpu_metrics_span_sql(ing))
            for view in (v for v in catalog.views if v != "StringIds"):  # StringIds: read (its own note)
                ing.sql("INSERT INTO ingest_notes VALUES (?, ?, 0, ?)", [capture_id, view, (
                    f"{view} is a view in this export, not a table: not read (of an export's views only StringIds "
                    "is run, within limits); what it holds is missing from the analysis; export the capture again")])
            side = None
            try:
                for step, fill in STEPS.items():
                    if side is not None and step in side.steps:
                        continue  # read beside the kernels
                    if step == "kernels" and side_worthwhile(ing):
                        side = SideSteps(ing, {name: STEPS[name] for name in SIDE_STEPS})
                    ing.run(step, fill)
                    bar.step(step)
                    if side is not None and step == "kernels":
                        try:
                            side.wait()
                        except BaseException:
                            step = side.failed_step or step  # the error names the table it was reading
                            raise
                        for name in side.steps:
                            bar.step(name)
            finally:
                if side is not None:
                    side.close()  # ended and waited for before the export is detached, whatever failed
    except duckdb.Error as exc:
        # which of the export's tables was being read: DuckDB's text names the column at most
        reading = STEP_SOURCES.get(step, step)
        if any(word in str(exc).lower() for word in ("malformed", "disk image", "not a database", "sqlite")):
            raise InputError(f"{path}: cannot be read as an nsys export ({reading}: {first_line(exc)})") from None
        if is_data_error(exc):  # a value of the wrong type or range
            raise damaged(path, f"{reading}: {describe(exc)}") from exc
        raise
    finally:
        ing.cleanup()
        for name in (alias, scratch):
            with contextlib.suppress(duckdb.Error):
                con.execute(f"DETACH {name}")
        remove_copy(private)
        for name, value in saved.items():
            with contextlib.suppress(duckdb.Error):
                con.execute(f"SET {name} = '{sql_text(str(value))}'")


def write_capture_row(reader: ExportReader) -> None:
    """The capture's row: its file, tool version and the span of every event read (deferred tables included)."""
    path = reader.cat.path
    span = reader.sql("""
        SELECT min(s), max(e) FROM (
            -- the tables under the kernels and api_calls views: their names are not needed here
            SELECT min(start_ns) s, max(end_ns) e FROM kernel_rows WHERE capture_id = $cid UNION ALL
            SELECT min(start_ns), max(end_ns) FROM api_call_rows WHERE capture_id = $cid UNION ALL
            SELECT min(start_ns), max(end_ns) FROM memcpys WHERE capture_id = $cid UNION ALL
            SELECT min(start_ns), max(end_ns) FROM memsets WHERE capture_id = $cid UNION ALL
            SELECT min(start_ns), max(end_ns) FROM syncs WHERE capture_id = $cid UNION ALL
            SELECT min(start_ns), max(end_ns) FROM nvtx_ranges WHERE capture_id = $cid UNION ALL
            SELECT min(ts_ns), max(ts_ns) FROM gpu_metrics WHERE capture_id = $cid UNION ALL
            -- OS runtime calls and CPU samples: the program's own work before its first CUDA call
            SELECT min(start_ns), max(end_ns) FROM host_calls WHERE capture_id = $cid)""", {"cid": reader.cid}).fetchone()
    starts = [v for v in (span[0], *(d[0] for d in reader.deferred_spans)) if v is not None]
    ends = [v for v in (span[1], *(d[1] for d in reader.deferred_spans)) if v is not None]
    start, end = (min(starts) if starts else None), (max(ends) if ends else None)
    st = path.stat()
    reader.sql("INSERT INTO captures VALUES (?, ?, ?, ?, ?, 'nsys-sqlite', 'nsys', ?, ?, ?, ?, ?, ?)", [
        reader.cid, os.fsencode(path.resolve()).decode("utf-8", "backslashreplace"), path.name, st.st_size, st.st_mtime_ns, reader.cat.tool_version,
        reader.cat.schema_version, start, end, (end - start) if start is not None and end is not None else None,
        _dt.datetime.now(_dt.timezone.utc).replace(tzinfo=None),
    ])


#: The normalized tables in the order they are filled (kernels look their launching thread up in api_calls; an
#: export with no GPU table has its GPUs from the stored kernels, copies and sets; the capture's span is taken
#: last, over every table).
STEPS: dict[str, Callable[[ExportReader], None]] = {
    "api_calls": read_api_calls,
    "kernels": read_kernels,
    "memcpys": read_memcpys,
    "memsets": read_memsets,
    "syncs": read_syncs,
    "gpus": read_gpus,
    "nvtx_ranges": read_nvtx_ranges,
    "gpu_metrics": read_gpu_metrics,
    "callchains": read_callchains,
    "captures": write_capture_row,
}

#: Steps that need nothing the kernels' step writes: read on a second connection while the kernels are read, where
#: the export's kernels are many (ingest/nsys/side_steps.py).
SIDE_STEPS = ("memcpys", "memsets", "syncs")

#: What each step reads from the export, as a damaged value's error names it (DuckDB's text names the column only).
STEP_SOURCES: dict[str, str] = {
    "prepare": "reading StringIds and the ENUM tables",
    "api_calls": f"reading {RUNTIME}",
    "kernels": f"reading {KERNEL}",
    "memcpys": f"reading {MEMCPY}",
    "memsets": f"reading {MEMSET}",
    "syncs": f"reading {SYNC}",
    "gpus": f"reading {GPU_INFO} or {CUDA_GPU_INFO}",
    "nvtx_ranges": f"reading {NVTX}",
    "gpu_metrics": f"reading {GPU_METRICS}",
    "callchains": "reading the backtraces and OS runtime calls (OSRT_API, COMPOSITE_EVENTS, *_CALLCHAINS)",
    "captures": "finishing the capture",
}

__all__ = ["ingest_nsys_sqlite", "read_catalog", "load_sqlite_scanner", "ExportCatalog", "STEPS"]
