"""One capture's normalized tables, ingested apart from any store: the unit of work a remote task runs.

Plain Python with no Ray in it, so that it is tested without a cluster: the capture is ingested into a store
file of its own in a temporary folder, its stored tables are read back as Arrow tables (they travel through
Ray's object store, so no file system is shared with the driver), and the folder is removed.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Collection

import duckdb

from nsight_advisor.ingest.arrow_scan import drop_view, stream_view
from nsight_advisor.common.errors import InputError
from nsight_advisor.schema import TABLES
from nsight_advisor.store.database import connect


def ingest_capture_tables(capture_id: int, path: Path, *, threads: int = 1, defer: Collection[str] = (),
                          expected_size: int | None = None, work_dir: Path | None = None) -> dict:
    """Ingest ``path`` as ``capture_id`` and return ``{table name: pyarrow.Table}`` for every stored table.

    ``expected_size``: the capture's size where the driver saw it; a worker on another machine that sees a
    file of another size (an older copy) raises InputError instead of ingesting different data.
    InputError for a capture that cannot be read, as ``ingest_capture`` raises it.
    """
    from nsight_advisor.ingest import ingest_capture

    path = Path(path)
    if expected_size is not None:
        try:
            size = os.stat(path).st_size
        except OSError as exc:
            raise InputError(f"{path}: cannot be read on this worker ({exc.strerror or exc})") from None
        if size != expected_size:
            raise InputError(f"{path}: {size} bytes on this worker, {expected_size} where the run started; "
                             "every node must see the same capture")
    folder = Path(tempfile.mkdtemp(prefix="nsa-capture-", dir=work_dir))
    try:
        con = connect(folder / f"capture-{capture_id}.duckdb")
        try:
            con.execute(f"SET threads = {int(threads)}")
            ingest_capture(con, capture_id, path, progress=False, defer=defer)
            return {table.name: con.execute(
                f"SELECT {', '.join(table.column_names)} FROM main.{table.name}").to_arrow_table()
                for table in TABLES if table.stored}
        finally:
            con.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def merge_capture_tables(con: duckdb.DuckDBPyConnection, tables: dict) -> None:
    """Append one capture's tables (from :func:`ingest_capture_tables`) to the store behind ``con``."""
    for table in TABLES:
        if not table.stored or table.name not in tables or not tables[table.name].num_rows:
            continue  # most of a capture's ~50 tables are empty: nothing to append
        cols = ", ".join(table.column_names)
        stream_view(con, "nsa_capture_part", tables[table.name])
        try:
            con.execute(f"INSERT INTO main.{table.name} ({cols}) SELECT {cols} FROM nsa_capture_part")
        finally:
            drop_view(con, "nsa_capture_part")
