"""Read an Nsight Systems SQLite export (`nsys export --type sqlite`, nsys 2021.3 to 2026.x) into the store.

The export is attached read-only through DuckDB's sqlite scanner (loaded from its pinned pip package,
signature checks on, nothing downloaded) and every normalized table is filled with one
``INSERT ... SELECT`` that projects only the columns it needs; StringIds joins and enum labels are
resolved inside DuckDB. Why not the standard library: on a 1M-kernel export (8M event rows) merely
iterating the projected rows with Python's sqlite3 took 2.5x SQLite's own aggregate scan, before
any conversion or insert, while the scanner reads in parallel at about 1.5x (``benchmarks/``).
The catalog (tables, columns, ENUM tables, version) is read with sqlite3, also read-only.
Environment tables (TARGET_INFO_SYSTEM_ENV, META_DATA_CAPTURE, ProcessStreams) are never read.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import gc
import importlib.util
import os
import shutil
import sqlite3
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Collection, Iterator

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from nsight_advisor import sql_params
from nsight_advisor.errors import InputError
from nsight_advisor.ingest import nsys_enums as E
from nsight_advisor.ingest.nvtx_depth import BATCH_ROWS, DepthStream, NotStartOrdered, prefetched
from nsight_advisor.progress import Progress
from nsight_advisor.schema.hardware import lookup_gpu
from nsight_advisor.schema.tables import get_table
from nsight_advisor.text import first_line

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
_NSYS_MARKERS = ("StringIds", "TARGET_INFO_GPU", "TARGET_INFO_SESSION_START_TIME", RUNTIME, KERNEL, "ThreadNames")

_PID = "((({col}) >> 24) & 16777215)"  # globalTid/globalPid layout: <hw:8><vm:8><pid:24><tid:24>
_TID = "(({col}) & 16777215)"
# CUPTI writes 0xFFFFFFFF for "none" in 32-bit ids (e.g. streamId of a context sync): those become NULL.
_I32 = "CASE WHEN ({col}) BETWEEN -2147483648 AND 2147483647 THEN ({col}) END"


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

    @property
    def read_path(self) -> Path:
        return self.source or self.path

    def has(self, table: str, column: str | None = None) -> bool:
        cols = self.tables.get(table)
        if cols is None:
            return False
        return column is None or column in cols

    def count(self, table: str) -> int | None:
        """Rows of an export table, None when it is absent. Tables outside :data:`_COUNTED_FIRST` are counted
        on first use: counting NVTX_EVENTS took 0.19 s at 4.9M rows, needed only when its ranges are deferred."""
        if table not in self.tables:
            return None
        if table not in self.counts:
            try:
                self.counts[table] = int(_sqlite_rows(self.read_path, f"SELECT count(*) FROM {_quote(table)}")[0][0])
            except sqlite3.DatabaseError as exc:
                raise InputError(f"{self.path}: cannot be read as SQLite ({exc})") from None
        return self.counts[table]


#: Tables an ingest may leave out when the caller says nothing will read them (see ``capture_deferred``);
#: cpu_ops exists in PyTorch profiler traces only (an nsys export has nothing to defer there).
DEFERRABLE = ("nvtx_ranges", "gpu_metrics", "cpu_ops")
#: A deferrable table is left out only when its export table holds at least this many rows: smaller ones load in
#: well under a second and the analysis layer reads them when present (NVTX ranges name idle gaps' causes).
DEFER_MIN_ROWS = 250_000


def ingest_nsys_sqlite(con: duckdb.DuckDBPyConnection, capture_id: int, path: Path, *, progress: bool = False,
                       defer: Collection[str] = ()) -> None:
    """Fill the normalized tables for one nsys SQLite export as ``capture_id``.

    Raises InputError (one line naming the file) when ``path`` is not a readable nsys export.
    What the export lacks is recorded in ``capture_missing``; dropped rows in ``ingest_notes``.
    Tables named in ``defer`` (from :data:`DEFERRABLE`) are left empty and listed in ``capture_deferred``;
    the capture's start, end and duration still cover their rows.
    """
    path = Path(path)
    source, private = _attachable(path)
    try:
        catalog = read_catalog(path, read_from=source)
    except BaseException:
        _remove(private)
        raise
    alias = f"nsys_src_{capture_id}"
    scratch = f"nsys_scratch_{capture_id}"  # in memory, seen by every connection (a TEMP table is not)
    steps = ["gpus", "api_calls", "kernels", "memcpys", "memsets", "syncs", "nvtx_ranges", "gpu_metrics", "captures"]
    unknown = set(defer) - set(DEFERRABLE)
    if unknown:
        raise ValueError(f"cannot defer {sorted(unknown)}: only {DEFERRABLE}")
    try:
        load_sqlite_scanner(con)
    except BaseException:
        _remove(private)
        raise
    try:
        con.execute(f"ATTACH '{_sql_str(str(source))}' AS {alias} (TYPE sqlite, READ_ONLY)")
    except duckdb.Error as exc:
        _remove(private)
        raise InputError(f"{path}: cannot be opened as SQLite ({first_line(exc)})") from None
    con.execute(f"ATTACH ':memory:' AS {scratch}")
    ing = _Ingest(con, capture_id, catalog, alias, scratch, defer=frozenset(defer))
    saved, ing.memory_bounded = _bound_memory(con)
    try:
        with Progress(f"ingest {path.name}", len(steps), enabled=progress) as bar:
            ing.run("prepare")
            for step in steps:
                ing.run(step)
                bar.step(step)
    except duckdb.Error as exc:
        text = str(exc)
        if any(word in text.lower() for word in ("malformed", "disk image", "not a database", "sqlite")):
            raise InputError(f"{path}: cannot be read as an nsys export ({first_line(exc)})") from None
        raise
    finally:
        ing.cleanup()
        for name in (alias, scratch):
            with contextlib.suppress(duckdb.Error):
                con.execute(f"DETACH {name}")
        _remove(private)
        for name, value in saved.items():
            with contextlib.suppress(duckdb.Error):
                con.execute(f"SET {name} = '{_sql_str(str(value))}'")


#: Memory DuckDB may use while ingesting into an on-disk store; beyond it joins and sorts spill to disk,
#: so peak memory stays flat however large the export is. Measured on a 1M-kernel export: 2GB gave a
#: 2.2 GB peak RSS (the NVTX depth windows fill it), 600MB a 0.85 GB peak for 30% more ingest time; the
#: whole analyze must stay under 1 GB (docs/performance.md).
INGEST_MEMORY_LIMIT = "600MB"


#: DuckDB's memory while NVTX ranges stream through Arrow batches held outside DuckDB (an on-disk store only).
#: Measured at 10M kernels (the depth pass before the stream): with the ingest limit kept, the peak RSS went from
#: 0.80 to 1.03 GB; with this one the whole ingest peaks at 0.84 GB (docs/performance.md).
DEPTH_MEMORY_LIMIT = "350MB"


@contextlib.contextmanager
def _memory_limit(con: duckdb.DuckDBPyConnection, limit: str | None):
    """Set DuckDB's memory limit to ``limit`` for a block (None: leave it), and restore it after."""
    if limit is None:
        yield
        return
    before = str(con.execute("SELECT current_setting('memory_limit')").fetchone()[0])
    lowered = False
    with contextlib.suppress(duckdb.Error):  # DuckDB refuses when it cannot evict enough: keep the limit then
        con.execute(f"SET memory_limit = '{limit}'")
        lowered = True
    try:
        yield
    finally:
        if lowered:
            with contextlib.suppress(duckdb.Error):
                con.execute(f"SET memory_limit = '{_sql_str(before)}'")


@contextlib.contextmanager
def _gc_paused():
    """Python's cyclic garbage collector off for a block (restored after). The NVTX stream's threads make Arrow
    and numpy objects by the thousand, no cycles among them; collections traversing the interpreter's heap took
    2% of the step's CPU (perf)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


@contextlib.contextmanager
def _no_dictionary_compression(con: duckdb.DuckDBPyConnection):
    """Leave DuckDB's dictionary compression out of the strings written in a block (restored after).

    For NVTX text (a 1M-kernel export: 4.9M ranges, 16k distinct texts) DuckDB analysed every segment for a
    dictionary and then chose FSST for most of them anyway: without the dictionary the NVTX insert took 1.4
    CPU-seconds less (5.3 -> 3.9) for a store 10% larger (92 -> 101 MB). Segments are compressed as the
    insert writes them, so the setting matters while it runs.
    """
    name = "disabled_compression_methods"
    try:
        before = str(con.execute(f"SELECT current_setting('{name}')").fetchone()[0])
        con.execute(f"SET {name} = '{_sql_str(','.join(filter(None, (before, 'dictionary'))))}'")
    except duckdb.Error:  # a DuckDB without the setting: compress as it likes
        yield
        return
    try:
        yield
    finally:
        with contextlib.suppress(duckdb.Error):
            con.execute(f"SET {name} = '{_sql_str(before)}'")


def _bound_memory(con: duckdb.DuckDBPyConnection) -> tuple[dict[str, str], bool]:
    """Bound DuckDB's memory for the ingest (on-disk stores only: an in-memory store cannot spill).

    Returns the previous settings, to restore afterwards, and whether the memory limit was set.
    """
    saved: dict[str, str] = {}
    try:
        db_file = con.execute("SELECT file FROM pragma_database_list WHERE name = current_database()").fetchone()
        spill = con.execute("SELECT current_setting('temp_directory')").fetchone()[0]
        for name in ("memory_limit", "preserve_insertion_order"):
            saved[name] = str(con.execute(f"SELECT current_setting('{name}')").fetchone()[0])
    except duckdb.Error:
        return saved, False
    # Row order inside a table carries no meaning in the store; dropping it lets inserts stream.
    con.execute("SET preserve_insertion_order = false")
    bounded = bool(db_file and db_file[0] and spill)
    if bounded:
        con.execute(f"SET memory_limit = '{INGEST_MEMORY_LIMIT}'")
    return saved, bounded


# --------------------------------------------------------------------------------------------- catalog

#: Export tables counted when the catalog is read (every ingest needs their counts for its dropped-row notes).
_COUNTED_FIRST = (KERNEL, RUNTIME, MEMCPY, MEMSET, SYNC)


def read_catalog(path: Path, *, read_from: Path | None = None) -> ExportCatalog:
    """Tables, columns, row counts of the event tables, version and enums of an export (read-only).

    ``read_from``: the file to read when it is not ``path`` (a WAL-mode export's copy); messages name ``path``.
    """
    _check_not_truncated(path)
    uri = f"file:{_uri_path(read_from or path)}?mode=ro&immutable=1"
    try:
        src = sqlite3.connect(uri, uri=True)
    except sqlite3.Error as exc:
        raise InputError(f"{path}: cannot be opened as SQLite ({exc})") from None
    src.text_factory = lambda b: b.decode("utf-8", "replace")  # never crash on invalid UTF-8
    cat = ExportCatalog(path, source=read_from if read_from not in (None, path) else None)
    try:
        # Tables only: reading a view runs SQL stored in the file (one can loop forever); no nsys export has views.
        names = [r[0] for r in src.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        if not any(n in names for n in _NSYS_MARKERS):
            raise InputError(f"{path}: SQLite database without Nsight Systems tables (no StringIds, TARGET_INFO_GPU "
                             f"or CUPTI_ACTIVITY_KIND_* tables); expected the output of `nsys export --type sqlite`")
        for name in names:
            cat.tables[name] = [r[0] for r in src.execute("SELECT name FROM pragma_table_info(?)", (name,))]
        for table in _COUNTED_FIRST:
            if table in cat.tables:
                cat.counts[table] = int(src.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0])
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
    con.execute(f"LOAD '{_sql_str(str(ext))}'")


# ---------------------------------------------------------------------------------------------- ingest

class _Ingest:
    """One export's ingest: each method fills one normalized table."""

    def __init__(self, con: duckdb.DuckDBPyConnection, capture_id: int, cat: ExportCatalog, alias: str,
                 scratch: str, *, defer: frozenset[str] = frozenset()) -> None:
        self.con, self.cid, self.cat, self.src, self.scratch = con, capture_id, cat, alias, scratch
        self.tmp = f"_nsys_{capture_id}"
        self.copied: dict[str, str] = {}  # export table -> lenient temp copy (invalid UTF-8)
        self.defer = defer
        self.memory_bounded = False  # DuckDB's memory limit set for this ingest (an on-disk store)
        self.deferred_spans: list[tuple] = []  # (min start, max end) of deferred tables, for the capture span

    def deferred(self, table: str, source: str, span_sql: str) -> bool:
        """True when ``table`` is deferred: record it, the rows of its ``source`` table and their span."""
        if table not in self.defer or (self.cat.count(source) or 0) < DEFER_MIN_ROWS:
            return False
        self.sql("INSERT INTO capture_deferred VALUES (?, ?, ?)",
                 [self.cid, table, self.cat.count(source)])
        self.deferred_spans.append(self.sql(span_sql).fetchone())
        return True

    # helpers -------------------------------------------------------------------------------------
    def t(self, table: str) -> str:
        if table in self.copied:
            return self.copied[table]
        return f'{self.src}."{table}"'

    def run(self, step: str) -> None:
        """Run one step; when the scanner meets invalid UTF-8, copy the step's text tables leniently and retry."""
        try:
            getattr(self, step)()
        except duckdb.InvalidInputException as exc:
            if "unicode" not in str(exc).lower():
                raise
            wanted = dict.fromkeys((*_TEXT_TABLES.get(step, ()), "StringIds"))  # every step reads the strings
            tables = [t for t in wanted if t in self.cat.tables and t not in self.copied]
            if not tables:
                raise
            for table in tables:
                self.copy_leniently(table)
            if "StringIds" in tables and step != "prepare":  # resolved before the copy: resolve again
                self.fill_strings(replace=True)
            self.run(step)

    def copy_leniently(self, table: str) -> None:
        """Copy one export table through the standard library, replacing invalid UTF-8 (slow; rare files only)."""
        import pyarrow as pa

        name = f"{self.tmp}_copy_{len(self.copied)}"
        cols = self.cat.tables[table]
        types = {r[0]: (r[1] or "").upper()
                 for r in _sqlite_rows(self.cat.read_path, "SELECT name, type FROM pragma_table_info(?)", (table,))}
        schema = pa.schema([(c, pa.int64() if "INT" in types[c] else pa.float64() if types[c] in ("REAL", "FLOAT", "DOUBLE")
                             else pa.string()) for c in cols])
        created = False
        src = sqlite3.connect(f"file:{_uri_path(self.cat.read_path)}?mode=ro&immutable=1", uri=True)
        replaced = 0

        def decode(raw: bytes) -> str:
            nonlocal replaced
            try:
                return raw.decode("utf-8")
            except UnicodeDecodeError:
                replaced += 1
                return raw.decode("utf-8", "replace")

        src.text_factory = decode
        try:
            cur = src.execute(f'SELECT {", ".join(_quote(c) for c in cols)} FROM {_quote(table)}')
            while True:
                rows = cur.fetchmany(100_000)
                if not rows and created:
                    break
                columns = list(zip(*rows)) if rows else [[] for _ in cols]
                arrays = [pa.array([_lenient(v, f.type) for v in col], type=f.type) for col, f in zip(columns, schema)]
                view = f"{name}_batch"
                self.con.register(view, pa.table(arrays, schema=schema))
                try:
                    if created:
                        self.sql(f"INSERT INTO {name} SELECT * FROM {view}")
                    else:
                        self.sql(f"CREATE TEMP TABLE {name} AS SELECT * FROM {view}")
                        created = True
                finally:
                    self.con.unregister(view)
                if not rows:
                    break
        finally:
            src.close()
        self.copied[table] = name
        self.note(table, replaced, f"text values in {table} that were not valid UTF-8: invalid bytes shown as U+FFFD")

    def col(self, table: str, column: str, alias: str, default: str = "NULL") -> str:
        return f'{alias}."{column}"' if self.cat.has(table, column) else default

    def missing(self, data: str, reason: str, option: str) -> None:
        self.sql("INSERT INTO capture_missing VALUES (?, ?, ?, ?)", [self.cid, data, reason, option])

    def note(self, data: str, rows: int, note: str) -> None:
        if rows:
            self.sql("INSERT INTO ingest_notes VALUES (?, ?, ?, ?)", [self.cid, data, rows, note])

    def inserted(self, table: str) -> int:
        table = get_table(table).rows_in or table  # a view's rows, without joining their names
        return int(self.sql(f"SELECT count(*) FROM {table} WHERE capture_id = ?", [self.cid]).fetchone()[0])

    def dropped_note(self, table: str, source: str) -> None:
        total, inserted = self.cat.count(source) or 0, self.inserted(table)
        if inserted > total:  # a row read twice: the export changed while read, or a join multiplied rows
            raise InputError(f"{self.cat.path}: {inserted} {table} rows read from {source}, which holds {total}; "
                             f"the export changed while being read or is inconsistent: export it again")
        self.note(table, total - inserted,
                  f"dropped {source} rows with a NULL start/end, end < start, or a duration beyond 64 bits")

    def sql(self, sql: str, params=None) -> duckdb.DuckDBPyConnection:
        """``self.con.execute`` with parameters as literals (see :mod:`nsight_advisor.sql_params`)."""
        return sql_params.execute(self.con, sql, params)

    def strings(self) -> str:
        """StringIds, in the scratch database: seen by every connection (the NVTX stream looks strings up from
        a connection of its own)."""
        return f"{self.scratch}.strings"

    def enum(self, name: str) -> str:
        return f"{self.tmp}_{name.lower()}"

    def prepare(self) -> None:
        """Temp tables: StringIds (resolved once) and every enum with its label and word label."""
        con = self.con
        if self.cat.has("StringIds", "id"):
            self.fill_strings()
        else:
            con.execute(f"CREATE TABLE {self.strings()} (id BIGINT, value VARCHAR)")
        for enum, rows in self.cat.enums.items():
            con.execute(f"CREATE TEMP TABLE {self.enum(enum)} (id BIGINT, label VARCHAR, word VARCHAR)")
            values = [v for i, (sym, lab) in rows.items() for v in (i, lab, E.word_label(enum, sym, lab))]
            if values:  # one statement: executemany costs a round trip per row
                self.sql(f"INSERT INTO {self.enum(enum)} VALUES " + ", ".join(["(?, ?, ?)"] * (len(values) // 3)),
                         values)

    def fill_strings(self, *, replace: bool = False) -> None:
        """The scratch copy of StringIds. As nsys writes it (``id INTEGER PRIMARY KEY``) it is copied as is;
        otherwise it is checked: an id stored as text is read as its number (one that is no number cannot be
        looked up and is left out), and an id given two values makes the export unusable (every join through
        it would multiply rows), so it is refused with the count."""
        create = f"CREATE {'OR REPLACE ' if replace else ''}TABLE {self.strings()} AS"
        if self.cat.has("StringIds", "value") and _ids_are_primary_key(self.cat.read_path, "StringIds"):
            self.sql(f"{create} SELECT id, value FROM {self.t('StringIds')}")
            return
        value = self.col("StringIds", "value", "s", "NULL")
        self.sql(f"{create} SELECT TRY_CAST(s.id AS BIGINT) AS id, CAST({value} AS VARCHAR) AS value "
                 f"FROM {self.t('StringIds')} s WHERE TRY_CAST(s.id AS BIGINT) IS NOT NULL")
        check_unique_string_ids(self.con, self.strings(), self.cat.path)

    def cleanup(self) -> None:
        names = [*(self.enum(e) for e in self.cat.enums), *self.copied.values()]  # the scratch database is detached
        for name in names:
            with contextlib.suppress(duckdb.Error):
                self.sql(f"DROP TABLE IF EXISTS {name}")

    def _valid(self, a: str) -> str:
        return (f'{a}.start IS NOT NULL AND {a}."end" IS NOT NULL AND {a}."end" >= {a}.start '
                f'AND TRY_CAST({a}."end"::HUGEINT - {a}.start AS BIGINT) IS NOT NULL')

    # tables --------------------------------------------------------------------------------------
    def gpus(self) -> None:
        con, cat = self.con, self.cat
        if cat.has(GPU_INFO, "id"):
            g = "g"

            def c(column: str) -> str:
                return self.col(GPU_INFO, column, g)

            shmem_block = f"coalesce(nullif({c('maxShmemPerBlockOptin')}, 0), {c('maxShmemPerBlock')})"
            rows = self._gpu_rows(c, shmem_block, g)
            for r in rows:
                self._insert_gpu(*r)
            return
        if cat.has(CUDA_GPU_INFO, "numMultiprocessors") and cat.count(CUDA_GPU_INFO):
            for r in self._cuda_gpu_rows():
                self._insert_gpu(*r)
            return
        # No GPU table (e.g. trimmed by its publisher): keep what can be recovered.
        self.missing("gpus", f"no {GPU_INFO} table: GPU names and properties were not exported",
                     "nsys export --type sqlite with the full report (TARGET_INFO_GPU)")
        sm_by_dev: dict[int, int | None] = {}
        if cat.has(CUDA_DEVICE, "cudaId"):
            sm = self.col(CUDA_DEVICE, "numMultiprocessors", "d")
            for dev, n in con.execute(f"SELECT d.cudaId, max({sm}) FROM {self.t(CUDA_DEVICE)} d GROUP BY 1").fetchall():
                sm_by_dev[int(dev)] = n
        for table in (KERNEL, MEMCPY, MEMSET):
            if cat.has(table, "deviceId"):
                for (dev,) in con.execute(f'SELECT DISTINCT deviceId FROM {self.t(table)} WHERE deviceId IS NOT NULL').fetchall():
                    sm_by_dev.setdefault(int(dev), None)
        for dev in sorted(sm_by_dev):
            self._insert_gpu(dev, None, None, sm_by_dev[dev], None, None, None, None, None, None, None, None, None,
                             None, None, None, None, None)

    def _gpu_rows(self, c, shmem_block: str, g: str) -> list[tuple]:
        rows = self.sql(f"""
            SELECT {g}.id, {c('name')}, {c('chipName')}, {c('smCount')}, {c('computeMajor')}, {c('computeMinor')},
                   {c('totalMemory')}, {c('l2CacheSize')}, {c('clockRate')}, {c('memoryBandwidth')},
                   {c('maxWarpsPerSm')}, {c('maxBlocksPerSm')}, {c('maxThreadsPerBlock')}, {c('maxRegistersPerSm')},
                   {c('maxRegistersPerBlock')}, {c('maxShmemPerSm')}, {shmem_block}, {c('threadsPerWarp')}
            FROM {self.t(GPU_INFO)} {g} ORDER BY {g}.id""").fetchall()
        seen, out = set(), []
        for r in rows:
            if r[0] not in seen:
                seen.add(r[0])
                out.append(r)
        return out

    def _cuda_gpu_rows(self) -> list[tuple]:
        """GPU facts of a 2020-2021 export (TARGET_INFO_CUDA_GPU), in :meth:`_insert_gpu`'s order.

        The table mirrors CUPTI's device activity record, whose units differ from TARGET_INFO_GPU's: memory
        bandwidth in kB/s and the core clock in kHz (CUpti_ActivityDevice). A bandwidth too large to be kB/s of any
        GPU (over 10^10, i.e. 10 TB/s) is taken as bytes/s already.
        """
        g = "g"

        def c(column: str) -> str:
            return self.col(CUDA_GPU_INFO, column, g)

        device = c("deviceId") if self.cat.has(CUDA_GPU_INFO, "deviceId") else c("id")
        name = c("name")
        if not self.cat.has(CUDA_GPU_INFO, "name") and self.cat.has(CUDA_GPU_INFO, "nameId"):
            name = f"(SELECT value FROM {self.strings()} WHERE id = {c('nameId')})"
        rows = self.sql(f"""
            SELECT {device}, {name}, {c('numMultiprocessors')}, {c('computeCapabilityMajor')},
                   {c('computeCapabilityMinor')}, {c('globalMemorySize')}, {c('l2CacheSize')}, {c('coreClockRate')},
                   {c('globalMemoryBandwidth')}, {c('maxWarpsPerMultiprocessor')}, {c('maxBlocksPerMultiprocessor')},
                   {c('maxThreadsPerBlock')}, {c('maxRegistersPerMultiprocessor')}, {c('maxRegistersPerBlock')},
                   {c('maxSharedMemoryPerMultiprocessor')}, {c('maxSharedMemoryPerBlock')}, {c('numThreadsPerWarp')}
            FROM {self.t(CUDA_GPU_INFO)} {g} ORDER BY 1""").fetchall()
        seen, out = set(), []
        for (dev, nm, sm, major, minor, mem, l2, clock_khz, bw, warps, blocks, threads, regs_sm, regs_block,
             shmem_sm, shmem_block, warp) in rows:
            if dev is None or dev in seen:
                continue
            seen.add(dev)
            bandwidth = None
            if isinstance(bw, (int, float)) and bw > 0:
                bandwidth = float(bw) if bw > 1e10 else float(bw) * 1000.0
            clock = int(clock_khz) * 1000 if isinstance(clock_khz, (int, float)) and clock_khz > 0 else None
            out.append((dev, nm, None, sm, major, minor, mem, l2, clock, bandwidth, warps, blocks, threads, regs_sm,
                        regs_block, shmem_sm, shmem_block, warp))
        return out

    def _insert_gpu(self, dev, name, chip, sm_count, cc_major, cc_minor, total_mem, l2, clock, bandwidth, warps_sm,
                    blocks_sm, threads_block, regs_sm, regs_block, shmem_sm, shmem_block, warp_size) -> None:
        name = name.strip() if isinstance(name, str) else name
        spec = lookup_gpu(name)
        cc = f"{cc_major}.{cc_minor}" if cc_major is not None and cc_minor is not None else None
        bandwidth = bandwidth if bandwidth else (spec.dram_bytes_per_s if spec else None)
        self.sql("INSERT INTO gpus VALUES (" + ", ".join(["?"] * 24) + ")", [
            self.cid, dev, name, chip, sm_count, cc, cc_major, cc_minor, total_mem, l2, clock, bandwidth,
            warps_sm, blocks_sm, threads_block, regs_sm, regs_block, shmem_sm, shmem_block, warp_size,
            spec.fp32_flops_per_s if spec else None, spec.fp16_tensor_flops_per_s if spec else None,
            spec.tf32_tensor_flops_per_s if spec else None, spec.fp8_tensor_flops_per_s if spec else None,
        ])

    def api_calls(self) -> None:
        if not self.cat.has(RUNTIME, "start"):
            self.missing("api_calls", f"no {RUNTIME} table: no CUDA API calls were traced", "nsys profile --trace=cuda")
            return
        r = "r"
        event_class = self.col(RUNTIME, "eventClass", r)
        self.sql(f"""
            INSERT INTO api_calls
            SELECT ?, {_PID.format(col='r.globalTid')}, {_TID.format(col='r.globalTid')}, r.correlationId,
                   s.value, s.base_name,
                   CASE WHEN {event_class} = {E.EVENT_CLASS_CUDA_DRIVER} THEN 'driver'
                        WHEN {event_class} = {E.EVENT_CLASS_CUDA_RUNTIME} THEN 'runtime'
                        WHEN s.value LIKE 'cuda%' THEN 'runtime'
                        WHEN s.value LIKE 'cu%' THEN 'driver' END,
                   r.start, r."end", r."end" - r.start, {self.col(RUNTIME, 'returnValue', r)}
            FROM {self.t(RUNTIME)} r
            LEFT JOIN (SELECT id, value, regexp_replace(value, '_v[0-9]+$', '') AS base_name FROM {self.strings()}) s
              ON s.id = r.nameId
            WHERE {self._valid(r)}""", [self.cid])
        self.dropped_note("api_calls", RUNTIME)
        if not self.cat.count(RUNTIME):
            self.missing("api_calls", f"{RUNTIME} is empty: no CUDA API calls were traced", "nsys profile --trace=cuda")

    def kernels(self) -> None:
        cat = self.cat
        if not cat.has(KERNEL, "start"):
            self.missing("kernels", f"no {KERNEL} table: no kernels were traced", "nsys profile --trace=cuda")
            return
        k = "k"

        def c(column: str) -> str:
            return self.col(KERNEL, column, k)

        static = f"{c('staticSharedMemory')}"
        dynamic = f"{c('dynamicSharedMemory')}"
        launch = self.enum("ENUM_CUDA_KERNEL_LAUNCH_TYPE")
        # tid: from the launching API call (same correlation id and process); one row per (pid, corr). Only calls
        # named *Launch* (cudaLaunchKernel*, cuLaunchKernel*, cudaGraphLaunch, cuGraphLaunch, ...) can launch a
        # kernel: reading only those halves the lookup (measured: 3.5 -> 2.7 s at 1M kernels; it spills at 10M).
        # Names as the export's string ids; the strings go into kernel_names once (kernels is a view joining them).
        self.sql(f"""
            INSERT INTO kernel_rows
            WITH launcher AS (
                SELECT pid, correlation_id, min(tid) AS tid FROM api_calls
                WHERE capture_id = $cid AND correlation_id IS NOT NULL AND contains(name, 'Launch')
                GROUP BY pid, correlation_id
            ), src AS (
                SELECT {_I32.format(col=c('deviceId'))} AS device_id, {_I32.format(col=c('contextId'))} AS context_id,
                       {_I32.format(col=c('streamId'))} AS stream_id,
                       {_PID.format(col=c('globalPid'))} AS pid, {c('correlationId')} AS correlation_id,
                       k.start, k."end", {c('demangledName')} AS dn, {c('shortName')} AS sn, {c('mangledName')} AS mn,
                       {_I32.format(col=c('gridX'))} AS gx, {_I32.format(col=c('gridY'))} AS gy,
                       {_I32.format(col=c('gridZ'))} AS gz, {_I32.format(col=c('blockX'))} AS bx,
                       {_I32.format(col=c('blockY'))} AS by_, {_I32.format(col=c('blockZ'))} AS bz,
                       {_I32.format(col=c('registersPerThread'))} AS regs, {static} AS smem_static, {dynamic} AS smem_dynamic,
                       {c('localMemoryPerThread')} AS local_mem, {c('launchType')} AS launch_type,
                       {c('graphNodeId')} AS graph_node_id, {c('graphId')} AS graph_id
                FROM {self.t(KERNEL)} k
                WHERE {self._valid(k)}
            )
            SELECT $cid, src.device_id, src.context_id, src.stream_id, src.pid, l.tid, src.correlation_id,
                   src.start, src."end", src."end" - src.start,
                   src.dn, src.sn, src.mn,
                   src.gx, src.gy, src.gz, src.bx, src.by_, src.bz,
                   TRY_CAST(src.gx::HUGEINT * src.gy * src.gz AS BIGINT),
                   TRY_CAST(src.bx::HUGEINT * src.by_ * src.bz AS INTEGER),
                   src.regs, src.smem_static, src.smem_dynamic,
                   TRY_CAST(src.smem_static::HUGEINT + src.smem_dynamic AS BIGINT), src.local_mem,
                   lt.word, src.graph_node_id, src.graph_id
            FROM src
            LEFT JOIN {launch} lt ON lt.id = src.launch_type
            LEFT JOIN launcher l ON l.pid = src.pid AND l.correlation_id = src.correlation_id
            """, {"cid": self.cid})
        self.sql(f"""
            INSERT INTO kernel_names
            SELECT $cid, s.id, s.value FROM {self.strings()} s
            WHERE s.id IN (SELECT unnest([name_id, short_name_id, mangled_name_id]) FROM kernel_rows
                           WHERE capture_id = $cid)""", {"cid": self.cid})
        self.dropped_note("kernels", KERNEL)
        if not self.cat.count(KERNEL):
            self.missing("kernels", f"{KERNEL} is empty: no kernels were traced", "nsys profile --trace=cuda")

    def memcpys(self) -> None:
        if not self.cat.has(MEMCPY, "start"):
            self.missing("memcpys", f"no {MEMCPY} table: no memory copies were recorded", "nsys profile --trace=cuda")
            return
        m = "m"

        def c(column: str) -> str:
            return self.col(MEMCPY, column, m)

        oper, kind, mig = (self.enum(e) for e in ("ENUM_CUDA_MEMCPY_OPER", "ENUM_CUDA_MEM_KIND",
                                                   "ENUM_CUDA_UNIF_MEM_MIGRATION"))
        self.sql(f"""
            INSERT INTO memcpys
            SELECT ?, {_I32.format(col=c('deviceId'))}, {_I32.format(col=c('contextId'))}, {_I32.format(col=c('streamId'))}, {_PID.format(col=c('globalPid'))},
                   {c('correlationId')}, m.start, m."end", m."end" - m.start, {c('bytes')},
                   o.label, sk.word, dk.word, mc.word
            FROM {self.t(MEMCPY)} m
            LEFT JOIN {oper} o ON o.id = {c('copyKind')}
            LEFT JOIN {kind} sk ON sk.id = {c('srcKind')}
            LEFT JOIN {kind} dk ON dk.id = {c('dstKind')}
            LEFT JOIN {mig} mc ON mc.id = {c('migrationCause')} AND {c('copyKind')} IN (11, 12, 13)
            WHERE {self._valid(m)}""", [self.cid])
        self.dropped_note("memcpys", MEMCPY)

    def memsets(self) -> None:
        if not self.cat.has(MEMSET, "start"):
            self.missing("memsets", f"no {MEMSET} table: no memsets were recorded", "nsys profile --trace=cuda")
            return
        m = "m"

        def c(column: str) -> str:
            return self.col(MEMSET, column, m)

        kind = self.enum("ENUM_CUDA_MEM_KIND")
        self.sql(f"""
            INSERT INTO memsets
            SELECT ?, {_I32.format(col=c('deviceId'))}, {_I32.format(col=c('contextId'))}, {_I32.format(col=c('streamId'))}, {_PID.format(col=c('globalPid'))},
                   {c('correlationId')}, m.start, m."end", m."end" - m.start, {c('bytes')}, mk.word, {c('value')}
            FROM {self.t(MEMSET)} m LEFT JOIN {kind} mk ON mk.id = {c('memKind')}
            WHERE {self._valid(m)}""", [self.cid])
        self.dropped_note("memsets", MEMSET)

    def syncs(self) -> None:
        if not self.cat.has(SYNC, "start"):
            self.missing("syncs", f"no {SYNC} table: no synchronizations were recorded", "nsys profile --trace=cuda")
            return
        s = "s"

        def c(column: str) -> str:
            return self.col(SYNC, column, s)

        # nsys 2025.x+ moved older reports' codes to deprecatedSyncType.
        code = f"coalesce({c('syncType')}, {c('deprecatedSyncType')})"
        self.sql(f"""
            INSERT INTO syncs
            SELECT ?, {_I32.format(col=c('deviceId'))}, {_I32.format(col=c('contextId'))}, {_I32.format(col=c('streamId'))}, {_PID.format(col=c('globalPid'))},
                   {c('correlationId')}, coalesce(st.word, 'unknown'), s.start, s."end", s."end" - s.start, {c('eventId')}
            FROM {self.t(SYNC)} s LEFT JOIN {self.enum('ENUM_CUPTI_SYNC_TYPE')} st ON st.id = {code}
            WHERE {self._valid(s)}""", [self.cid])
        self.dropped_note("syncs", SYNC)

    def nvtx_ranges(self) -> None:
        if not self.cat.has(NVTX, "start"):
            self.missing("nvtx_ranges", f"no {NVTX} table: no NVTX ranges were traced", "nsys profile --trace=nvtx")
            return
        n = "n"

        def c(column: str) -> str:
            return self.col(NVTX, column, n)

        kinds = f"({E.NVTX_MARK}, {E.NVTX_PUSH_POP}, {E.NVTX_START_END}, {E.NVTX_DOMAIN_CREATE})"
        # The span of the rows the insert below would keep (marks end where they start).
        if self.deferred("nvtx_ranges", NVTX, f"""
                SELECT min(start), max(CASE WHEN eventType = {E.NVTX_MARK} THEN coalesce("end", start) ELSE "end" END)
                FROM {self.t(NVTX)} WHERE eventType IN ({E.NVTX_MARK}, {E.NVTX_PUSH_POP}, {E.NVTX_START_END})
                  AND start IS NOT NULL
                  AND CASE WHEN eventType = {E.NVTX_MARK} THEN coalesce("end", start) ELSE "end" END >= start
                  AND TRY_CAST((CASE WHEN eventType = {E.NVTX_MARK} THEN coalesce("end", start) ELSE "end" END)
                               ::HUGEINT - start AS BIGINT) IS NOT NULL"""):
            return
        # The columns as they lie (each one costs on the way through Arrow): the insert derives the rest.
        source = f"""
            SELECT {c('globalTid')} AS thread, {c('domainId')} AS domain_id, {c('text')}::VARCHAR AS text,
                   {c('textId')}::BIGINT AS text_id, n.eventType AS event_type, n.start AS start_ns,
                   n."end" AS end_ns, {c('category')} AS category
            FROM {self.t(NVTX)} n
            WHERE n.eventType IN {kinds}"""
        nvtx = _NvtxStream(self.con, source, self.strings())
        try:
            self._insert_nvtx(nvtx, ordered=False)  # as the export lies: nsys writes each thread in start order
        except Exception:  # the stream's error reaches us through DuckDB and Arrow, re-wrapped
            if not nvtx.unordered:
                raise
            nvtx = _NvtxStream(self.con, source, self.strings())
            self._insert_nvtx(nvtx, ordered=True)
        # A domain's name comes from its creation row (without one the view says 'domain N').
        for domain_id, name in sorted(nvtx.domains.items(), key=lambda item: item[0] or 0):
            if name is not None and domain_id:  # domain 0 is the unnamed one: 'Default'
                self.sql("INSERT INTO nvtx_domains VALUES ($cid, $id, $name)",
                         {"cid": self.cid, "id": domain_id, "name": name})
        inserted = self.inserted("nvtx_ranges")
        self.note("nvtx_ranges", nvtx.ranges - inserted,
                  "dropped NVTX_EVENTS ranges with a NULL start, an unclosed end, end < start, or a duration "
                  "beyond 64 bits")
        if inserted == 0:
            self.missing("nvtx_ranges", f"{NVTX} has no ranges or marks", "nsys profile --trace=nvtx")

    def _insert_nvtx(self, nvtx: _NvtxStream, *, ordered: bool) -> None:
        """Stream the NVTX rows into ``nvtx_ranges`` with the depth of push/pop ranges (see :mod:`.nvtx_depth`).

        Unordered, the export is read in its own row order (kept by ``preserve_insertion_order`` while the
        query is planned; should DuckDB not keep it, the walk notices and the caller sorts); ordered, DuckDB
        sorts the rows per thread first. One INSERT reads the stream, so a failure leaves no rows.
        """
        valid = ("start_ns IS NOT NULL AND end_ns IS NOT NULL AND end_ns >= start_ns "
                 "AND TRY_CAST(end_ns::HUGEINT - start_ns AS BIGINT) IS NOT NULL")
        order = "ORDER BY thread, start_ns, end_ns DESC" if ordered else ""
        # Lowered only where the ingest bounds memory (an on-disk store, which can spill): Arrow batches live
        # outside DuckDB's limit.
        with _memory_limit(self.con, DEPTH_MEMORY_LIMIT if self.memory_bounded else None), \
                _no_dictionary_compression(self.con), _gc_paused():
            # A second connection inserts while the first one streams the export (which may be a lenient TEMP
            # copy, seen by the first only). Nothing else may run on the first meanwhile: a new statement there
            # would end the stream.
            writer = self.con.cursor()
            keep_order = str(self.sql("SELECT current_setting('preserve_insertion_order')").fetchone()[0])
            reads = batches = None
            try:
                # Row order is fixed when the source is planned; the insert must not keep it (it would buffer).
                self.sql("SET preserve_insertion_order = true")
                reader = nvtx.open(f"{nvtx.source} {order}")
                writer.execute(f"SET preserve_insertion_order = {keep_order}")  # a global setting
                stream = DepthStream()
                # Three stages on three threads, each releasing the GIL for most of its work: DuckDB reads the
                # export into Arrow, numpy walks the depths, DuckDB inserts (one stage alone kept under two cores
                # busy: NVTX step at 1M kernels 6.2 -> 5.2 s).
                reads = prefetched(iter(reader), name="nvtx-read")
                batches = prefetched(nvtx.walked(stream, reads))
                writer.register("nvtx_batches", pa.RecordBatchReader.from_batches(
                    stream.output_schema(nvtx.schema(reader)), batches))
                sql_params.execute(writer, f"""
                    INSERT INTO nvtx_rows
                    SELECT $cid, {_PID.format(col='b.thread')}, {_TID.format(col='b.thread')}, coalesce(b.domain_id, 0),
                           b.text,
                           CASE b.event_type WHEN {E.NVTX_PUSH_POP} THEN 'push_pop'
                                WHEN {E.NVTX_START_END} THEN 'start_end' ELSE 'mark' END,
                           b.start_ns, b.end_ns, b.end_ns - b.start_ns, b.depth, b.category
                    FROM (SELECT * REPLACE (CASE WHEN event_type = {E.NVTX_MARK} THEN coalesce(end_ns, start_ns)
                                                 ELSE end_ns END AS end_ns)  -- a mark ends where it starts
                          FROM nvtx_batches) b
                    WHERE {valid}""", {"cid": self.cid})
            finally:
                # Joined in this order: the walking thread pulls from the reading one, which must be done with the
                # first connection before it is used again.
                for stage in (batches, reads):
                    if stage is not None:
                        stage.close()
                with contextlib.suppress(duckdb.Error):
                    writer.execute(f"SET preserve_insertion_order = {keep_order}")
                writer.close()
                nvtx.close()

    def gpu_metrics(self) -> None:
        if not (self.cat.has(GPU_METRICS, "timestamp") and self.cat.has(GPU_METRICS_INFO, "metricName")):
            self.missing("gpu_metrics", f"no {GPU_METRICS} table: GPU metrics were not sampled",
                         "nsys profile --gpu-metrics-devices=all")
            return
        if self.deferred("gpu_metrics", GPU_METRICS, f"""
                SELECT min(g.timestamp), max(g.timestamp) FROM {self.t(GPU_METRICS)} g
                WHERE EXISTS (SELECT 1 FROM {self.t(GPU_METRICS_INFO)} i
                              WHERE i.typeId = g.typeId AND i.metricId = g.metricId)"""):
            return
        self.sql(f"""
            INSERT INTO gpu_metrics
            SELECT ?, (g.typeId & 255)::INTEGER, g.timestamp, i.metricName, g.value::DOUBLE
            FROM {self.t(GPU_METRICS)} g
            JOIN (SELECT DISTINCT typeId, metricId, metricName FROM {self.t(GPU_METRICS_INFO)}) i
              ON i.typeId = g.typeId AND i.metricId = g.metricId
            WHERE g.timestamp IS NOT NULL""", [self.cid])
        if self.inserted("gpu_metrics") == 0:
            self.missing("gpu_metrics", f"{GPU_METRICS} is empty", "nsys profile --gpu-metrics-devices=all")

    def captures(self) -> None:
        path = self.cat.path
        span = self.sql("""
            SELECT min(s), max(e) FROM (
                SELECT min(start_ns) s, max(end_ns) e FROM kernels WHERE capture_id = $cid UNION ALL
                SELECT min(start_ns), max(end_ns) FROM api_calls WHERE capture_id = $cid UNION ALL
                SELECT min(start_ns), max(end_ns) FROM memcpys WHERE capture_id = $cid UNION ALL
                SELECT min(start_ns), max(end_ns) FROM memsets WHERE capture_id = $cid UNION ALL
                SELECT min(start_ns), max(end_ns) FROM syncs WHERE capture_id = $cid UNION ALL
                SELECT min(start_ns), max(end_ns) FROM nvtx_ranges WHERE capture_id = $cid UNION ALL
                SELECT min(ts_ns), max(ts_ns) FROM gpu_metrics WHERE capture_id = $cid)""", {"cid": self.cid}).fetchone()
        starts = [v for v in (span[0], *(d[0] for d in self.deferred_spans)) if v is not None]
        ends = [v for v in (span[1], *(d[1] for d in self.deferred_spans)) if v is not None]
        start, end = (min(starts) if starts else None), (max(ends) if ends else None)
        st = path.stat()
        self.sql("INSERT INTO captures VALUES (?, ?, ?, ?, ?, 'nsys-sqlite', 'nsys', ?, ?, ?, ?, ?, ?)", [
            self.cid, os.fsencode(path.resolve()).decode("utf-8", "backslashreplace"), path.name, st.st_size, st.st_mtime_ns, self.cat.tool_version,
            self.cat.schema_version, start, end, (end - start) if start is not None and end is not None else None,
            _dt.datetime.now(_dt.timezone.utc).replace(tzinfo=None),
        ])


class _NvtxStream:
    """One read of an export's NVTX rows for :meth:`_Ingest._insert_nvtx`.

    On the way it resolves registered strings (``text_id``) into ``text``, counts the ranges and marks, takes
    the domain-create rows out (their text names a domain) and notes whether a thread came out of start order
    (then the rows are read again, sorted). Strings are looked up here rather than joined in SQL: a join in
    the source would give up the export's row order, and one in the insert builds its hash table on the stream
    (DuckDB cannot tell how long a stream is), which grew past the memory limit at 4.9M ranges.
    """

    def __init__(self, con: duckdb.DuckDBPyConnection, source: str, strings: str) -> None:
        self.con, self.source, self.strings = con, source, strings
        self.ranges = 0  # rows other than domain creations
        self.domains: dict[int, str | None] = {}  # domain id -> name
        self.unordered = False
        self._lookup: duckdb.DuckDBPyConnection | None = None  # a third connection: the others are busy
        self._known: dict[int, str | None] = {}  # string id -> value, for the ids seen so far

    def open(self, sql: str) -> pa.RecordBatchReader:
        return self.con.execute(sql).to_arrow_reader(BATCH_ROWS)

    def schema(self, reader: pa.RecordBatchReader) -> pa.Schema:
        """The schema of the batches :meth:`walked` hands to the depth walk."""
        return reader.schema.append(pa.field("nestable", pa.bool_()))

    def close(self) -> None:
        if self._lookup is not None:
            self._lookup.close()
            self._lookup = None

    def walked(self, stream: DepthStream, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        try:
            yield from stream.batches(self._ranges(batches))
        except NotStartOrdered:
            self.unordered = True
            raise

    def _ranges(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            batch = self._resolved(batch)
            domain = pc.fill_null(pc.equal(batch.column("event_type"), E.NVTX_DOMAIN_CREATE), False)
            if pc.any(domain).as_py():
                created = batch.filter(domain)
                for domain_id, text in zip(created.column("domain_id").to_pylist(), created.column("text").to_pylist()):
                    if text is not None:
                        self.domains.setdefault(domain_id, text)
                batch = batch.filter(pc.invert(domain))
            self.ranges += batch.num_rows
            # the rows the insert keeps as push/pop ranges (start and end recorded, end >= start) get a depth
            nestable = pc.fill_null(pc.and_(pc.equal(batch.column("event_type"), E.NVTX_PUSH_POP),
                                            pc.greater_equal(batch.column("end_ns"), batch.column("start_ns"))), False)
            yield batch.append_column("nestable", nestable)

    def _resolved(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """``batch`` with ``text`` taken from StringIds where the export gave a string id instead."""
        text_id = batch.column("text_id")
        wanted = pc.filter(text_id, pc.and_(pc.is_null(batch.column("text")), pc.is_valid(text_id)))
        if len(wanted) == 0:
            return batch
        new = [i for i in pc.unique(wanted).to_pylist() if i not in self._known]
        if new:
            if self._lookup is None:
                self._lookup = self.con.cursor()
            ids = ", ".join(str(int(i)) for i in new)
            found = dict(self._lookup.execute(f"SELECT id, value FROM {self.strings} WHERE id IN ({ids})").fetchall())
            self._known.update((i, found.get(i)) for i in new)
        keys = pa.array(list(self._known), type=pa.int64())
        values = pa.array(list(self._known.values()), type=pa.string())
        looked_up = pc.take(values, pc.index_in(text_id, value_set=keys))
        text = pc.coalesce(batch.column("text"), looked_up)
        return batch.set_column(batch.schema.get_field_index("text"), "text", text)


# Export tables with text a step reads (the ones invalid UTF-8 can hide in).
_TEXT_TABLES = {"prepare": ("StringIds",), "gpus": (GPU_INFO, CUDA_GPU_INFO), "nvtx_ranges": (NVTX,),
                "gpu_metrics": (GPU_METRICS_INFO,)}


def _lenient(value, type_):
    import pyarrow as pa

    if value is None:
        return None
    if type_ == pa.string():
        return value.hex() if isinstance(value, bytes) else str(value)
    if isinstance(value, (bytes, str)):
        return None  # a text value in a numeric column: unreadable, not made up
    return int(value) if type_ == pa.int64() else float(value)


def check_unique_string_ids(con: duckdb.DuckDBPyConnection, table: str, path: Path) -> None:
    """InputError when ``table`` (a copy of an export's StringIds) gives one id more than one value."""
    ids, distinct = con.execute(f"SELECT count(*), count(DISTINCT id) FROM {table}").fetchone()
    if ids != distinct:
        raise InputError(f"{path}: StringIds gives {ids - distinct} string id(s) a second value ({ids} rows, "
                         f"{distinct} ids); an nsys export has one value per id, so this one was edited or is "
                         f"damaged: export it again")


def _ids_are_primary_key(path: Path, table: str) -> bool:
    """True when ``table``'s ``id`` is its INTEGER PRIMARY KEY (SQLite's rowid: no two rows share one)."""
    keys = _sqlite_rows(path, "SELECT name, upper(type) FROM pragma_table_info(?) WHERE pk > 0", (table,))
    return keys == [("id", "INTEGER")]


def _sqlite_rows(path: Path, sql: str, params: tuple = ()) -> list[tuple]:
    src = sqlite3.connect(f"file:{_uri_path(path)}?mode=ro&immutable=1", uri=True)
    try:
        return src.execute(sql, params).fetchall()
    finally:
        src.close()


def _attachable(path: Path) -> tuple[Path, Path | None]:
    """The file to attach: ``path`` itself, or a copy in a private temporary folder when it is in WAL mode.

    SQLite creates -wal and -shm files beside a WAL-mode database even to read it (the header's bytes 18-19
    are 2); the input's folder must stay exactly as it was, so such an export is read from a copy in the run
    folder. The copy's WAL is folded into it (journal mode DELETE): every reader then sees the same rows, the
    catalog's counts (read with ``immutable=1``, which ignores a WAL) included.
    """
    from nsight_advisor.run_folder import run_folder

    with open(path, "rb") as fh:
        head = fh.read(20)
    if head[18:20] != b"\x02\x02":
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
        _remove(folder)
        raise
    return copy, folder


def _remove(folder: Path | None) -> None:
    if folder is not None:
        from nsight_advisor.run_folder import release

        shutil.rmtree(folder, ignore_errors=True)
        release(folder.parent)


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _sql_str(text: str) -> str:
    return text.replace("'", "''")


def _uri_path(path: Path) -> str:
    from urllib.parse import quote

    return quote(os.fsencode(Path(path).resolve()), safe="/")  # bytes: a name need not be UTF-8


__all__ = ["ingest_nsys_sqlite", "read_catalog", "load_sqlite_scanner", "ExportCatalog"]
