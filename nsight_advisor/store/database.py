"""The trace store: one DuckDB file holding the normalized tables of one or more captures.

Writes are atomic: a new store is built in a temporary file beside the target and renamed into
place only when ingest succeeded, so a failed run never leaves a half-written store behind.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path
from typing import Iterator

import duckdb

from nsight_advisor.common.connections import ATTACHED_STORE
from nsight_advisor.common.errors import InputError
from nsight_advisor.common.sql_params import literal
from nsight_advisor.schema import create_schema
from nsight_advisor.common.text import first_line


#: Every DuckDB instance's configuration: no extension is ever installed or autoloaded (no network at run time).
CONNECT_CONFIG = {
    "autoinstall_known_extensions": "false",
    "autoload_known_extensions": "false",
}


def connect(path: str | os.PathLike | None = None, *, read_only: bool = False,
            schema: bool = True) -> duckdb.DuckDBPyConnection:
    """Open a store (``None`` = in memory). Extension autoloading is off: nothing is ever downloaded.

    A writable store gets the schema (tables created where absent, views replaced) unless ``schema`` is false:
    a copy of the schema template (nsight_advisor.store.schema_template) has it already."""
    database = ":memory:" if path is None else str(path)
    try:
        con = duckdb.connect(database, read_only=read_only, config=dict(CONNECT_CONFIG))
    except duckdb.Error as exc:
        raise InputError(f"{path}: not a readable nsight-advisor store ({first_line(exc)})") from exc
    _configure(con)
    if not read_only and schema:
        create_schema(con)
    return con


def _configure(con: duckdb.DuckDBPyConnection) -> None:
    # DuckDB's own progress bar stays off: it prints to stdout, which would corrupt `analyze --format json`
    # written to stdout.
    con.execute("SET enable_progress_bar = false")
    # DuckDB picks a nested-loop join when it estimates a side at 5 rows or fewer; the analysis layer's interval
    # joins (a few thousand idle gaps against a million calls or ranges) are then estimated tiny and run for
    # minutes. A range join (IEJoin) sorts both sides once.
    con.execute("SET nested_loop_join_threshold = 0")


def attach_store(con: duckdb.DuckDBPyConnection, path: Path, *, schema: bool = True) -> duckdb.DuckDBPyConnection:
    """``con`` (an in-memory instance, nsight_advisor.store.ingest_instance) with the writable store at ``path``
    attached as its default database: what :func:`connect` gives, the same file written the same way. DuckDB
    spills beside the store, as it does for a store opened directly (not into the working folder, an in-memory
    instance's default)."""
    try:
        con.execute(f"ATTACH {literal(str(path))} AS {ATTACHED_STORE}")
        con.execute(f"USE {ATTACHED_STORE}")
        con.execute(f"SET temp_directory = {literal(str(path) + '.tmp')}")
    except duckdb.Error as exc:
        con.close()
        raise InputError(f"{path}: not a readable nsight-advisor store ({first_line(exc)})") from exc
    _configure(con)
    if schema:
        create_schema(con)
    return con


@contextlib.contextmanager
def atomic_store(path: str | os.PathLike, *, fresh: bool = False, follow: bool = True,
                 instance=None) -> Iterator[duckdb.DuckDBPyConnection]:
    """Yield a connection to a temporary store beside ``path``; rename it over ``path`` on success.

    The temporary store starts as a copy of the store at ``path`` (so captures can be added to it), or empty
    with ``fresh=True`` (a copy of the schema template where there is one). On any error the temporary file is removed and the store at ``path`` is left exactly
    as it was. The temporary store lives in this run's folder beside ``path`` (:mod:`nsight_advisor.common.run_folder`:
    same file system for the rename, short names whatever the target's name, reclaimed after a SIGKILL).
    ``follow=False`` (cache entries): a symbolic link at ``path`` is replaced by the store, never followed.
    ``instance``: a prepared DuckDB instance (nsight_advisor.store.ingest_instance.PreparedInstance) to build the
    store with.
    """
    from nsight_advisor.common.run_folder import release, temp_path

    target = Path(path).resolve() if follow else Path(path).parent.resolve() / Path(path).name
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_path(".duckdb", near=target.parent)
    try:
        copied = False
        if target.exists() and not fresh:
            _copy_store(target, tmp)
        elif fresh:
            from nsight_advisor.store.schema_template import copy_template

            copied = copy_template(tmp)
        prepared = instance.take() if instance is not None else None
        con = connect(tmp, schema=not copied) if prepared is None else attach_store(prepared, tmp, schema=not copied)
        try:
            yield con
            con.execute("CHECKPOINT")
        finally:
            con.close()
        os.replace(tmp, target)
    finally:
        for leftover in (tmp, Path(str(tmp) + ".wal")):
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()
        shutil.rmtree(Path(str(tmp) + ".tmp"), ignore_errors=True)  # DuckDB's spill folder
        release(tmp.parent)


def _copy_store(src: Path, dst: Path) -> None:
    # A plain file copy: the store at src is closed (DuckDB stores are single files after CHECKPOINT). It is
    # opened first so that a damaged store is reported under its own name, not the copy's.
    connect(src, read_only=True).close()
    shutil.copyfile(src, dst)


def insert_kernels(con: duckdb.DuckDBPyConnection, rows: list[dict]) -> None:
    """Insert kernel rows given as the ``kernels`` view's columns (``kernels`` is a view: see schema/tables.py).

    Names go into ``kernel_names`` and launch types into ``kernel_launch_types`` once per capture; the rest into
    ``kernel_rows``. For rule test cases, tests and notebooks; an ingest writes these tables in bulk.
    """
    names = {"name": "name_id", "short_name": "short_name_id", "mangled_name": "mangled_name_id"}

    def ids(row: dict) -> dict:
        out = {id_column: _name_id(con, "kernel_names", "name_id", row["capture_id"], {"name": row[column]})
               for column, id_column in names.items() if row.get(column) is not None}
        if row.get("launch_type") is not None:
            out["launch_type_id"] = _name_id(con, "kernel_launch_types", "launch_type_id", row["capture_id"],
                                             {"launch_type": row["launch_type"]})
        return out

    _insert_through_view(con, "kernels", rows, ids)


def insert_api_calls(con: duckdb.DuckDBPyConnection, rows: list[dict]) -> None:
    """Insert CUDA API call rows given as the ``api_calls`` view's columns (a view: see schema/tables.py).

    Each call's name and base name, as given, go into ``api_names`` once per capture; the rest into
    ``api_call_rows``. For rule test cases, tests and notebooks; an ingest writes both tables in bulk.
    """
    def ids(row: dict) -> dict:
        if row.get("name") is None and row.get("base_name") is None:
            return {}
        names = {"name": row.get("name"), "base_name": row.get("base_name")}
        return {"name_id": _name_id(con, "api_names", "name_id", row["capture_id"], names)}

    _insert_through_view(con, "api_calls", rows, ids)


def insert_nvtx_ranges(con: duckdb.DuckDBPyConnection, rows: list[dict]) -> None:
    """Insert NVTX rows given as the ``nvtx_ranges`` view's columns (a view: see schema/tables.py).

    A missing domain or 'Default' is domain 0; another name is looked up in (or added to) ``nvtx_domains``.
    """
    def ids(row: dict) -> dict:
        domain = row.get("domain")
        return {"domain_id": 0 if domain in (None, "Default")
                else _name_id(con, "nvtx_domains", "domain_id", row["capture_id"], {"name": domain})}

    _insert_through_view(con, "nvtx_ranges", rows, ids)


def _insert_through_view(con: duckdb.DuckDBPyConnection, view: str, rows: list[dict], ids) -> None:
    """Rows given as ``view``'s columns into the stored table under it; ``ids(row)`` gives the id columns."""
    from nsight_advisor.schema.tables import get_table

    stored = get_table(view).rows_in
    view_columns, stored_columns = get_table(view).column_names, get_table(stored).column_names
    for row in rows:
        unknown = sorted(set(row) - set(view_columns))
        if unknown:
            raise ValueError(f"{view} has no column {unknown[0]!r}")
        row = {"capture_id": 1, **row}
        out = {**{k: v for k, v in row.items() if k in stored_columns}, **ids(row)}
        cols = [c for c in stored_columns if c in out]
        con.execute(f"INSERT INTO {stored} ({', '.join(cols)}) VALUES ({', '.join('?' for _ in cols)})",
                    [out[c] for c in cols])


def _name_id(con: duckdb.DuckDBPyConnection, table: str, id_column: str, capture_id: int,
             values: dict[str, str | None]) -> int:
    """The id of a name in one of a capture's name tables (kernel_names, nvtx_domains, api_names), given as the
    table's text columns (``{"name": ...}``; api_names: name and base_name, either of which may be None); a new
    name is added after the largest id (at least 1: domain 0 is the unnamed one)."""
    match = " AND ".join(f"{column} IS NOT DISTINCT FROM ?" for column in values)
    found = con.execute(f"SELECT {id_column} FROM {table} WHERE capture_id = ? AND {match}",
                        [capture_id, *values.values()]).fetchone()
    if found is None:
        found = con.execute(f"SELECT greatest(coalesce(max({id_column}), 0), 0) + 1 FROM {table} "
                            "WHERE capture_id = ?", [capture_id]).fetchone()
        con.execute(f"INSERT INTO {table} (capture_id, {id_column}, {', '.join(values)}) "
                    f"VALUES (?, ?, {', '.join('?' for _ in values)})", [capture_id, found[0], *values.values()])
    return int(found[0])


def next_capture_id(con: duckdb.DuckDBPyConnection) -> int:
    """The next free capture id in this store."""
    return int(con.execute("SELECT coalesce(max(capture_id), 0) + 1 FROM captures").fetchone()[0])


