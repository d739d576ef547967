"""The trace store: one DuckDB file holding the normalized tables of one or more captures.

Writes are atomic: a new store is built in a temporary file beside the target and renamed into
place only when ingest succeeded, so a failed run never leaves a half-written store behind.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
from pathlib import Path
from typing import Iterator

import duckdb

from nsight_advisor.errors import InputError
from nsight_advisor.schema import create_schema


def connect(path: str | os.PathLike | None = None, *, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    """Open a store (``None`` = in memory). Extension autoloading is off: nothing is ever downloaded."""
    # No extension is ever installed or autoloaded (no network at run time), and DuckDB's own progress bar
    # stays off: it prints to stdout, which would corrupt `analyze --format json` written to stdout.
    config = {
        "autoinstall_known_extensions": "false",
        "autoload_known_extensions": "false",
    }
    database = ":memory:" if path is None else str(path)
    try:
        con = duckdb.connect(database, read_only=read_only, config=config)
    except duckdb.Error as exc:
        raise InputError(f"{path}: not a readable nsight-advisor store ({_first_line(exc)})") from exc
    con.execute("SET enable_progress_bar = false")
    if not read_only:
        create_schema(con)
    return con


@contextlib.contextmanager
def atomic_store(path: str | os.PathLike, *, fresh: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
    """Yield a connection to a temporary store beside ``path``; rename it over ``path`` on success.

    The temporary store starts as a copy of the store at ``path`` (so captures can be added to it), or empty
    with ``fresh=True``. On any error the temporary file is removed and the store at ``path`` is left exactly
    as it was. Temporary files are named ``.NAME.build-PID-RANDOM.tmp`` so that the leftovers of a killed
    process can be recognised and removed (``store_cache.remove_dead_temp_files``).
    """
    target = Path(path).resolve()
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.build-{os.getpid()}-{secrets.token_hex(4)}.tmp")
    try:
        if target.exists() and not fresh:
            _copy_store(target, tmp)
        con = connect(tmp)
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


def _copy_store(src: Path, dst: Path) -> None:
    # A plain file copy: the store at src is closed (DuckDB stores are single files after CHECKPOINT).
    shutil.copyfile(src, dst)
    con = connect(dst, read_only=True)
    con.close()


def insert_kernels(con: duckdb.DuckDBPyConnection, rows: list[dict]) -> None:
    """Insert kernel rows given as the ``kernels`` view's columns (``kernels`` is a view: see schema/tables.py).

    Names go into ``kernel_names`` once per capture (new ids after the capture's largest); the rest into
    ``kernel_rows``. For rule test cases, tests and notebooks; an ingest writes both tables in bulk.
    """
    from nsight_advisor.schema.tables import get_table

    view = get_table("kernels").column_names
    stored = get_table("kernel_rows").column_names
    name_columns = {"name": "name_id", "short_name": "short_name_id", "mangled_name": "mangled_name_id"}
    ids: dict[tuple[int, str], int] = {}
    for row in rows:
        unknown = sorted(set(row) - set(view))
        if unknown:
            raise ValueError(f"kernels has no column {unknown[0]!r}")
        row = {"capture_id": 1, **row}
        cid = row["capture_id"]
        out = {k: v for k, v in row.items() if k not in name_columns}
        for column, id_column in name_columns.items():
            name = row.get(column)
            if name is None:
                continue
            key = (cid, name)
            if key not in ids:
                found = con.execute("SELECT name_id FROM kernel_names WHERE capture_id = ? AND name = ?",
                                    [cid, name]).fetchone()
                if found is None:
                    found = con.execute("SELECT coalesce(max(name_id), 0) + 1 FROM kernel_names WHERE capture_id = ?",
                                        [cid]).fetchone()
                    con.execute("INSERT INTO kernel_names VALUES (?, ?, ?)", [cid, found[0], name])
                ids[key] = found[0]
            out[id_column] = ids[key]
        cols = [c for c in stored if c in out]
        con.execute(f"INSERT INTO kernel_rows ({', '.join(cols)}) VALUES ({', '.join('?' for _ in cols)})",
                    [out[c] for c in cols])


def insert_nvtx_ranges(con: duckdb.DuckDBPyConnection, rows: list[dict]) -> None:
    """Insert NVTX rows given as the ``nvtx_ranges`` view's columns (a view: see schema/tables.py).

    A missing domain or 'Default' is domain 0; another name is looked up in (or added to) ``nvtx_domains``.
    """
    from nsight_advisor.schema.tables import get_table

    view = get_table("nvtx_ranges").column_names
    stored = get_table("nvtx_rows").column_names
    for row in rows:
        unknown = sorted(set(row) - set(view))
        if unknown:
            raise ValueError(f"nvtx_ranges has no column {unknown[0]!r}")
        out = {"capture_id": 1, **row}
        domain = out.pop("domain", None)
        domain_id = 0
        if domain not in (None, "Default"):
            found = con.execute("SELECT domain_id FROM nvtx_domains WHERE capture_id = ? AND name = ?",
                                [out["capture_id"], domain]).fetchone()
            if found is None:
                found = con.execute("SELECT greatest(coalesce(max(domain_id), 0), 0) + 1 FROM nvtx_domains "
                                    "WHERE capture_id = ?", [out["capture_id"]]).fetchone()
                con.execute("INSERT INTO nvtx_domains VALUES (?, ?, ?)", [out["capture_id"], found[0], domain])
            domain_id = found[0]
        out["domain_id"] = domain_id
        cols = [c for c in stored if c in out]
        con.execute(f"INSERT INTO nvtx_rows ({', '.join(cols)}) VALUES ({', '.join('?' for _ in cols)})",
                    [out[c] for c in cols])


def next_capture_id(con: duckdb.DuckDBPyConnection) -> int:
    """The next free capture id in this store."""
    return int(con.execute("SELECT coalesce(max(capture_id), 0) + 1 FROM captures").fetchone()[0])


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
