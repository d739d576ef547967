"""The export being read: one attached nsys SQLite export and the helpers each table's reader shares.

A reader of one normalized table is a function of an :class:`ExportReader` (``nsys_kernels``, ``nsys_nvtx``,
``nsys_gpus``); the reader runs them, retrying one over a lenient copy of its text tables when the scanner meets
invalid UTF-8, and records what the export lacks (``capture_missing``) and what was dropped (``ingest_notes``).
"""

from __future__ import annotations

import contextlib
import sqlite3
from typing import Callable

import duckdb

from nsight_advisor.common import sql_params
from nsight_advisor.common.errors import InputError
from nsight_advisor.ingest.nsys.cursor_work import CursorWork
from nsight_advisor.ingest.nsys import enums as E
from nsight_advisor.ingest.nsys.catalog import (
    CUDA_GPU_INFO, GPU_INFO, GPU_METRICS_INFO, NVTX, ExportCatalog, check_unique_string_ids, ids_are_primary_key,
    read_only_uri, sqlite_rows, sql_text,
)
from nsight_advisor.common.sql_params import quote_ident
from nsight_advisor.ingest.sql_bounds import valid_span
from nsight_advisor.schema.tables import get_table

#: A deferrable table is left out only when its export table holds at least this many rows: smaller ones load in
#: well under a second and the analysis layer reads them when present (NVTX ranges name idle gaps' causes).
DEFER_MIN_ROWS = 250_000

#: Memory DuckDB may use while ingesting into an on-disk store; beyond it joins and sorts spill to disk,
#: so peak memory stays flat however large the export is; the whole analyze must stay under 1 GB
#: (docs/performance.md, "Measurements behind the code").
INGEST_MEMORY_LIMIT = "600MB"


class ExportReader:
    """One export attached to a store while it is read: the helpers every table's reader uses (the export's
    tables, the columns it has, notes on what it lacks or what was dropped, and the capture id it fills)."""

    def __init__(self, con: duckdb.DuckDBPyConnection, capture_id: int, cat: ExportCatalog, alias: str,
                 scratch: str, *, defer: frozenset[str] = frozenset()) -> None:
        self.con, self.cid, self.cat, self.src, self.scratch = con, capture_id, cat, alias, scratch
        self.tmp = f"_nsys_{capture_id}"
        self.copied: dict[str, str] = {}  # export table -> lenient temp copy (invalid UTF-8)
        self.defer = defer
        self.memory_bounded = False  # DuckDB's memory limit set for this ingest (an on-disk store)
        self.deferred_spans: list[tuple] = []  # (min start, max end) of deferred tables, for the capture span
        self.prefetched: dict[str, SpanQuery] = {}  # deferred table -> its span, asked ahead on a second connection

    def defers(self, table: str, source: str) -> bool:
        """Whether ``table`` will be deferred: asked to, and its ``source`` table holds DEFER_MIN_ROWS rows."""
        return table in self.defer and self.cat.at_least(source, DEFER_MIN_ROWS)

    def prefetch(self, table: str, source: str, span_sql: str | None) -> None:
        """Start asking the span of a table that will be deferred (``span_sql`` as :meth:`deferred` takes it; None
        when the export lacks what it reads), on a second connection while the other tables are read:
        :meth:`deferred` takes the answer. SQLite scans a table on one core (4.9M NVTX rows: 0.5 to 0.8 s),
        while the inserts before it leave part of the other idle."""
        if span_sql is not None and table not in self.prefetched and self.defers(table, source):
            self.prefetched[table] = SpanQuery(self.con, span_sql)

    def deferred(self, table: str, source: str, span_sql: str) -> bool:
        """True when ``table`` is deferred: record it, the rows of its ``source`` table and their span.

        ``span_sql`` returns one row, (rows of ``source``, earliest start, latest end of the rows the table would
        hold), from one scan: SQLite counts a table by reading all of it (4.9M NVTX rows, 0.2 s), and the span
        reads it anyway. The answer of :meth:`prefetch` is taken when it asked the same."""
        if not self.defers(table, source):
            return False
        ahead = self.prefetched.pop(table, None)
        if ahead is not None and ahead.sql == span_sql:
            rows, start, end = ahead.result()
        else:
            if ahead is not None:
                ahead.close()
            rows, start, end = self.sql(span_sql).fetchone()
        self.cat.set_count(source, rows)
        self.sql("INSERT INTO capture_deferred VALUES (?, ?, ?)", [self.cid, table, rows])
        self.deferred_spans.append((start, end))
        return True

    def table(self, table: str) -> str:
        """The SQL name to read export ``table`` from (its lenient copy, when one was made)."""
        if table in self.copied:
            return self.copied[table]
        return f'{self.src}."{table}"'

    def run(self, step: str, fill: Callable[[ExportReader], None]) -> None:
        """Run ``fill`` (the reader of one step); when the scanner meets invalid UTF-8, copy the step's text tables
        leniently and retry."""
        try:
            fill(self)
        except duckdb.InvalidInputException as exc:
            if "unicode" not in str(exc).lower():
                raise
            wanted = dict.fromkeys((*TEXT_TABLES.get(step, ()), "StringIds"))  # every step reads the strings
            tables = [t for t in wanted if t in self.cat.tables and t not in self.copied]
            if not tables:
                raise
            for table in tables:
                self.copy_leniently(table)
            if "StringIds" in tables and step != "prepare":  # resolved before the copy: resolve again
                self.fill_strings(replace=True)
            self.run(step, fill)

    def copy_leniently(self, table: str) -> None:
        """Copy one export table through the standard library, replacing invalid UTF-8 (slow; rare files only)."""
        import pyarrow as pa

        name = f"{self.tmp}_copy_{len(self.copied)}"
        cols = self.cat.tables[table]
        types = {r[0]: (r[1] or "").upper()
                 for r in sqlite_rows(self.cat.read_path, "SELECT name, type FROM pragma_table_info(?)", (table,))}
        schema = pa.schema([(c, pa.int64() if "INT" in types[c] else pa.float64() if types[c] in ("REAL", "FLOAT", "DOUBLE")
                             else pa.string()) for c in cols])
        created = False
        src = sqlite3.connect(read_only_uri(self.cat.read_path), uri=True)
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
            cur = src.execute(f'SELECT {", ".join(quote_ident(c) for c in cols)} FROM {quote_ident(table)}')
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
        """``self.con.execute`` with parameters as literals (see :mod:`nsight_advisor.common.sql_params`)."""
        return sql_params.execute(self.con, sql, params)

    def strings(self) -> str:
        """StringIds, in the scratch database: seen by every connection (the NVTX stream looks strings up from
        a connection of its own)."""
        return f"{self.scratch}.strings"

    def enum(self, name: str) -> str:
        """The table of enum ``name``'s labels, in the scratch database (seen by every connection: the copies,
        sets and synchronizations may be read on a second one, ingest/nsys/side_steps.py)."""
        return f"{self.scratch}.{self.tmp}_{name.lower()}"

    def prepare(self) -> None:  # noqa: D401 - a step
        """Scratch tables: StringIds (resolved once) and every enum with its label and word label."""
        con = self.con
        if self.cat.has("StringIds", "id"):
            self.fill_strings()
        else:
            con.execute(f"CREATE TABLE {self.strings()} (id BIGINT, value VARCHAR)")
            if "StringIds" in self.cat.views:
                self.fill_strings_from_view()
        for enum, rows in self.cat.enums.items():
            con.execute(f"CREATE TABLE {self.enum(enum)} (id BIGINT, label VARCHAR, word VARCHAR)")
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
        if self.cat.has("StringIds", "value") and ids_are_primary_key(self.cat.read_path, "StringIds"):
            self.sql(f"{create} SELECT id, value FROM {self.table('StringIds')}")
            return
        value = self.col("StringIds", "value", "s", "NULL")
        self.sql(f"{create} SELECT TRY_CAST(s.id AS BIGINT) AS id, CAST({value} AS VARCHAR) AS value "
                 f"FROM {self.table('StringIds')} s WHERE TRY_CAST(s.id AS BIGINT) IS NOT NULL")
        check_unique_string_ids(self.con, self.strings(), self.cat.path)

    def fill_strings_from_view(self) -> None:
        """StringIds when the export has it as a view: read within limits (nsys_views), said in an ingest note."""
        import pyarrow as pa

        from nsight_advisor.ingest.nsys.string_views import VIEW_READ_S, ViewUnreadable, read_string_view

        try:
            rows = read_string_view(self.cat.read_path, "StringIds")
        except ViewUnreadable as exc:
            self.sql("INSERT INTO ingest_notes VALUES (?, 'StringIds', 0, ?)", [self.cid, (
                f"StringIds is a view in this export, not a table, and was not read: {exc}; names show as n/a; "
                "export the capture again")])
            return
        batch = pa.table({"id": pa.array([r[0] for r in rows], pa.int64()),
                          "value": pa.array([r[1] for r in rows], pa.string())})
        self.con.register("_na_string_view", batch)
        try:
            self.sql(f"INSERT INTO {self.strings()} SELECT id, value FROM _na_string_view")
        finally:
            self.con.unregister("_na_string_view")
        check_unique_string_ids(self.con, self.strings(), self.cat.path)
        self.sql("INSERT INTO ingest_notes VALUES (?, 'StringIds', ?, ?)", [self.cid, len(rows), (
            f"StringIds is a view in this export, not a table: its rows were read by running its SQL read-only "
            f"(at most {VIEW_READ_S:g} s)")])

    def cleanup(self) -> None:
        for ahead in self.prefetched.values():  # asked, never taken (the ingest failed first): ended, not waited for
            ahead.close()
        self.prefetched.clear()
        for name in self.copied.values():  # temp tables (the enums and strings go with the scratch database)
            with contextlib.suppress(duckdb.Error):
                self.sql(f"DROP TABLE IF EXISTS {name}")

    def valid_rows(self, a: str) -> str:
        """SQL that keeps rows of alias ``a`` with a start, an end not before it and a duration within 64 bits."""
        return valid_span(f"{a}.start", f'{a}."end"')


class SpanQuery(CursorWork):
    """One query answered on a thread, on its own connection to the instance (reading the attached export): its
    one row, or the error it raised, is taken with :meth:`result`."""

    def __init__(self, con: duckdb.DuckDBPyConnection, sql: str) -> None:
        # reads the export alone: attached to the instance, seen by every connection
        super().__init__(con.cursor(), "nsight-advisor-span")
        self.sql = sql
        self._row: tuple | None = None
        self.start()

    def work(self, cursor: duckdb.DuckDBPyConnection) -> None:
        self._row = sql_params.execute(cursor, self.sql).fetchone()

    def result(self) -> tuple:
        """The query's row (waits for it); raises what the query raised."""
        self.wait()
        return self._row


@contextlib.contextmanager
def memory_limit(con: duckdb.DuckDBPyConnection, limit: str | None):
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
                con.execute(f"SET memory_limit = '{sql_text(before)}'")


def bound_memory(con: duckdb.DuckDBPyConnection) -> tuple[dict[str, str], bool]:
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


# Export tables with text a step reads (the ones invalid UTF-8 can hide in).
TEXT_TABLES = {"prepare": ("StringIds",), "gpus": (GPU_INFO, CUDA_GPU_INFO), "nvtx_ranges": (NVTX,),
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
