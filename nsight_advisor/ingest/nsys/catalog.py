"""What an Nsight Systems SQLite export holds, read without changing it: its tables, columns, row counts,
version and enums (the catalog), and the file access every reader of an export shares.

The catalog is read with the standard library's sqlite3, read-only and ``immutable``; a WAL-mode export is read
from a private copy (SQLite would otherwise write -wal and -shm files beside the input). Environment tables
(TARGET_INFO_SYSTEM_ENV, META_DATA_CAPTURE, ProcessStreams) are never read.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sqlite3
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from nsight_advisor.common.errors import InputError
from nsight_advisor.common.sql_params import quote_ident
from nsight_advisor.ingest.nsys import count_prefetch, enums as E
from nsight_advisor.common.text import first_line

KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
MEMCPY = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET = "CUPTI_ACTIVITY_KIND_MEMSET"
SYNC = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"
NVTX = "NVTX_EVENTS"
GPU_INFO = "TARGET_INFO_GPU"
# nsys 2020-2021 exports describe each GPU here instead (CUPTI's device record): no TARGET_INFO_GPU rows.
CUDA_GPU_INFO = "TARGET_INFO_CUDA_GPU"
CUDA_DEVICE = "TARGET_INFO_CUDA_DEVICE"
GPU_METRICS = "GPU_METRICS"
GPU_METRICS_INFO = "TARGET_INFO_GPU_METRICS"

# Tables whose presence marks a file as an Nsight Systems export.
NSYS_MARKERS = ("StringIds", "TARGET_INFO_GPU", "TARGET_INFO_SESSION_START_TIME", RUNTIME, KERNEL, "ThreadNames")

PID_OF = "((({col}) >> 24) & 16777215)"  # globalTid/globalPid layout: <hw:8><vm:8><pid:24><tid:24>
TID_OF = "(({col}) & 16777215)"
# CUPTI writes 0xFFFFFFFF for "none" in 32-bit ids (e.g. streamId of a context sync): those become NULL.
INT32_OR_NULL = "CASE WHEN ({col}) BETWEEN -2147483648 AND 2147483647 THEN ({col}) END"


@dataclass
class ExportCatalog:
    """What an export holds: table -> column names, its version, and its enum rows."""

    path: Path
    tables: dict[str, list[str]] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    tool_version: str = "unknown"
    schema_version: str | None = None
    enums: dict[str, dict[int, tuple[str, str]]] = field(default_factory=dict)
    source: Path | None = None  # the file read, when not ``path`` itself (a WAL-mode export's private copy)
    views: list[str] = field(default_factory=list)  # views in the export: only StringIds is read (nsys_views)
    minimums: dict[str, int] = field(default_factory=dict)  # table -> rows it holds at least (at_least, not counted)

    @property
    def read_path(self) -> Path:
        return self.source or self.path

    def has(self, table: str, column: str | None = None) -> bool:
        cols = self.tables.get(table)
        if cols is None:
            return False
        return column is None or column in cols

    def count(self, table: str) -> int | None:
        """Rows of an export table, None when it is absent. Tables outside :data:`COUNTED_FIRST` are counted
        on first use: a large table's count is needed only when its rows are deferred."""
        if table not in self.tables:
            return None
        if table not in self.counts:
            self.counts[table] = self._rows(f"SELECT count(*) FROM {quote_ident(table)}")
        return self.counts[table]

    def at_least(self, table: str, rows: int) -> bool:
        """Whether ``table`` holds at least ``rows`` rows, reading no more than that many: a table found smaller
        is counted exactly on the way; a larger one is left for a reader that scans it anyway to count
        (:meth:`set_count`, as a deferred table's span does)."""
        if table not in self.tables:
            return False
        if table not in self.counts:
            if rows <= self.minimums.get(table, 0):  # asked before (a deferred table: ahead of its reader, then by it)
                return True
            found = self._rows(f"SELECT count(*) FROM (SELECT 1 FROM {quote_ident(table)} LIMIT {int(rows)})")
            if found < rows:
                self.counts[table] = found
            else:
                self.minimums[table] = max(found, self.minimums.get(table, 0))
            return found >= rows
        return self.counts[table] >= rows

    def set_count(self, table: str, rows: int) -> None:
        """Record the rows of ``table`` counted by a reader's own scan of it."""
        self.counts[table] = int(rows)

    def _rows(self, sql: str) -> int:
        """The count ``sql`` returns from the export (InputError naming the file where SQLite cannot read it)."""
        try:
            return int(sqlite_rows(self.read_path, sql)[0][0])
        except sqlite3.DatabaseError as exc:
            raise InputError(f"{self.path}: cannot be read as SQLite ({exc})") from None


#: Export tables counted when the catalog is read (every ingest needs their counts for its dropped-row notes).
COUNTED_FIRST = (KERNEL, RUNTIME, MEMCPY, MEMSET, SYNC)


def read_catalog(path: Path, *, read_from: Path | None = None) -> ExportCatalog:
    """Tables, columns, row counts of the event tables, version and enums of an export (read-only).

    ``read_from``: the file to read when it is not ``path`` (a WAL-mode export's copy); messages name ``path``.
    """
    _check_not_truncated(path)
    uri = read_only_uri(read_from or path)
    try:
        src = sqlite3.connect(uri, uri=True)
    except sqlite3.Error as exc:
        raise InputError(f"{path}: cannot be opened as SQLite ({exc})") from None
    src.text_factory = lambda b: b.decode("utf-8", "replace")  # never crash on invalid UTF-8
    cat = ExportCatalog(path, source=read_from if read_from not in (None, path) else None)
    try:
        # Tables only: reading a view runs SQL stored in the file (one can loop forever); no nsys export has views.
        names = [r[0] for r in src.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        cat.views = sorted(str(r[0]) for r in src.execute("SELECT name FROM sqlite_master WHERE type = 'view'"))
        if not any(n in names for n in NSYS_MARKERS):
            raise InputError(f"{path}: SQLite database without Nsight Systems tables (no StringIds, TARGET_INFO_GPU "
                             f"or CUPTI_ACTIVITY_KIND_* tables); expected the output of `nsys export --type sqlite`")
        for name in names:
            cat.tables[name] = [r[0] for r in src.execute("SELECT name FROM pragma_table_info(?)", (name,))]
        counted = count_prefetch.take(read_from or path) or {}  # counted ahead on a thread, where asked
        for table in COUNTED_FIRST:
            if table in cat.tables:
                cat.counts[table] = counted[table] if table in counted else int(
                    src.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0])
        for meta in ("META_DATA_EXPORT", "EXPORT_META_DATA"):  # nsys >= 2023.3 renamed EXPORT_META_DATA
            if cat.has(meta, "name") and cat.has(meta, "value"):
                rows = dict(src.execute(
                    f"SELECT name, value FROM {meta} WHERE name IN ('EXPORT_PRODUCT_VERSION', 'EXPORT_SCHEMA_VERSION')"
                ).fetchall())
                cat.tool_version = str(rows.get("EXPORT_PRODUCT_VERSION") or "unknown")
                cat.schema_version = str(rows["EXPORT_SCHEMA_VERSION"]) if rows.get("EXPORT_SCHEMA_VERSION") else None
                break
        for enum, rows in E.BUILTIN_ENUMS.items():
            table = next((t for t in (enum, *E.ENUM_ALIASES.get(enum, ())) if cat.has(t, "id")), None)
            if table is not None and cat.has(table, "name") and cat.has(table, "label"):
                # rows whose id is no integer (text, NULL: an edited export) cannot be looked up: left out
                cat.enums[enum] = {int(i): (n, lab) for i, n, lab in src.execute(
                    f"SELECT id, name, label FROM {table} WHERE typeof(id) = 'integer'")}
            else:
                cat.enums[enum] = {i: (n, lab) for i, n, lab in rows}
    except sqlite3.DatabaseError as exc:
        raise InputError(f"{path}: cannot be read as SQLite ({exc})") from None
    finally:
        src.close()
    return cat


def _check_not_truncated(path: Path) -> None:
    # SQLite header: page size at bytes 16-17 (1 means 65536), page count at 28-31 (valid when the
    # change counter at 24-27 equals the version-valid-for number at 92-95).
    with open(path, "rb") as fh:
        head = fh.read(100)
    if len(head) < 100:
        raise InputError(f"{path}: truncated SQLite file ({len(head)} bytes, shorter than the 100-byte header)")
    page_size = int.from_bytes(head[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    page_count = int.from_bytes(head[28:32], "big")
    if head[24:28] == head[92:96] and page_count:
        expected = page_size * page_count
        actual = path.stat().st_size
        if actual < expected:
            raise InputError(f"{path}: truncated SQLite file ({actual} of {expected} bytes); copy or export it again")


def load_sqlite_scanner(con: duckdb.DuckDBPyConnection) -> None:
    """Load DuckDB's sqlite scanner from the pinned ``duckdb-extension-sqlite-scanner`` package.

    Signature checks stay on (``allow_unsigned_extensions`` is never set) and nothing is downloaded.
    """
    spec = importlib.util.find_spec("duckdb_extension_sqlite_scanner")
    if spec is None or not spec.submodule_search_locations:
        raise InputError("the duckdb-extension-sqlite-scanner package is not installed; "
                         "run: pip install duckdb-extension-sqlite-scanner==" + duckdb.__version__)
    ext = (Path(list(spec.submodule_search_locations)[0]) / "extensions" / f"v{duckdb.__version__}"
           / "sqlite_scanner.duckdb_extension")
    if not ext.exists():
        raise InputError(f"no sqlite scanner for duckdb {duckdb.__version__} at {ext}; "
                         f"install duckdb-extension-sqlite-scanner=={duckdb.__version__}")
    con.execute(f"LOAD '{sql_text(str(ext))}'")


def check_unique_string_ids(con: duckdb.DuckDBPyConnection, table: str, path: Path) -> None:
    """InputError when ``table`` (a copy of an export's StringIds) gives one id more than one value."""
    ids, distinct = con.execute(f"SELECT count(*), count(DISTINCT id) FROM {table}").fetchone()
    if ids != distinct:
        raise InputError(f"{path}: StringIds gives {ids - distinct} string id(s) a second value ({ids} rows, "
                         f"{distinct} ids); an nsys export has one value per id, so this one was edited or is "
                         f"damaged: export it again")


def ids_are_primary_key(path: Path, table: str) -> bool:
    """True when ``table``'s ``id`` is its INTEGER PRIMARY KEY (SQLite's rowid: no two rows share one)."""
    keys = sqlite_rows(path, "SELECT name, upper(type) FROM pragma_table_info(?) WHERE pk > 0", (table,))
    return keys == [("id", "INTEGER")]


def sqlite_rows(path: Path, sql: str, params: tuple = ()) -> list[tuple]:
    src = sqlite3.connect(read_only_uri(path), uri=True)
    try:
        return src.execute(sql, params).fetchall()
    finally:
        src.close()


def attachable(path: Path) -> tuple[Path, Path | None]:
    """The file to attach: ``path`` itself, or a copy in a private temporary folder when it is in WAL mode.

    SQLite creates -wal and -shm files beside a WAL-mode database even to read it (the header's bytes 18-19
    are 2); the input's folder must stay exactly as it was, so such an export is read from a copy in the run
    folder. The copy's WAL is folded into it (journal mode DELETE): every reader then sees the same rows, the
    catalog's counts (read with ``immutable=1``, which ignores a WAL) included.
    """
    from nsight_advisor.common.run_folder import run_folder

    with open(path, "rb") as fh:
        head = fh.read(20)
    if not wal_mode(head):
        return path, None
    folder = Path(tempfile.mkdtemp(prefix="wal-", dir=run_folder()))
    try:
        copy = folder / "export.sqlite"
        shutil.copyfile(path, copy)
        wal = Path(f"{path}-wal")
        if wal.is_file():
            shutil.copyfile(wal, Path(f"{copy}-wal"))
        try:
            fold = sqlite3.connect(str(copy))
            try:
                fold.execute("PRAGMA journal_mode = DELETE")
            finally:
                fold.close()
        except sqlite3.DatabaseError as exc:
            raise InputError(f"{path}: cannot be read as SQLite ({first_line(exc)})") from None
    except BaseException:
        remove_copy(folder)
        raise
    return copy, folder


def remove_copy(folder: Path | None) -> None:
    if folder is not None:
        from nsight_advisor.common.run_folder import release

        shutil.rmtree(folder, ignore_errors=True)
        release(folder.parent)


def sql_text(text: str) -> str:
    return text.replace("'", "''")


def wal_mode(head: bytes) -> bool:
    """Whether a SQLite file whose first bytes are ``head`` (20 at least) is in WAL mode (header bytes 18-19 are 2):
    SQLite would write -wal and -shm files beside it to read it (:func:`attachable`)."""
    return head[18:20] == b"\x02\x02"


def count_ahead(path: Path) -> None:
    """Have :data:`COUNTED_FIRST` of the export at ``path`` (read in place) counted on a thread, for
    :func:`read_catalog` to take (ingest/nsys/count_prefetch.py)."""
    count_prefetch.start(path, read_only_uri(path), COUNTED_FIRST)


def read_only_uri(path: Path) -> str:
    """The SQLite URI that opens ``path`` read-only and immutable (no lock, no journal, nothing written beside it)."""
    return f"file:{uri_path(path)}?mode=ro&immutable=1"


def uri_path(path: Path) -> str:
    from urllib.parse import quote

    return quote(os.fsencode(Path(path).resolve()), safe="/")  # bytes: a name need not be UTF-8
