"""Read a PyTorch profiler (Kineto) trace (``*.pt.trace.json``, gzipped or not) into the store.

The trace is streamed (:mod:`.kineto_json`): events become rows in batches (:mod:`.kineto_rows`) that go into
DuckDB through Arrow, so memory stays bounded however long the trace is. Host-side rows (API calls, operators)
go straight into their tables; GPU-side rows are staged first, because Kineto writes the device as their
``pid`` and their host process is that of the API call with the same correlation id, which may come later in
the file. After the stream, SQL joins them, computes annotation depths and fills the small tables. Several traces
(a job's ranks) may be read together (:func:`ingest_kineto_many`): each is parsed in turn into the same stage, and
every statement after the parse runs once for all of them.

What the normalized store gets: kernels, api_calls, memcpys, memsets, syncs (``cuda_sync`` events, when the
trace has them), nvtx_ranges (annotations: domains ``user_annotation``, ``gpu_user_annotation`` and
``ProfilerStep``), gpus (``deviceProperties``), and the tables only Kineto fills: cpu_ops, collectives,
capture_distributed and kernel_occupancy. What Kineto does not record is listed in ``capture_missing``.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import functools
import os
from pathlib import Path
from typing import Collection, Sequence

import duckdb
import numpy as np
import pyarrow as pa

from nsight_advisor.ingest.arrow_buffers import int_array, longest_at_most, string_array
from nsight_advisor.ingest.arrow_scan import drop_view, stream_view
from nsight_advisor.common import sql_params
from nsight_advisor.common.connections import second_connection
from nsight_advisor.common.errors import InputError
from nsight_advisor.ingest.failures import classified
from nsight_advisor.ingest.gc_pause import gc_paused
from nsight_advisor.ingest.kineto.arrow_rows import ColumnTypeError, rows_table
from nsight_advisor.ingest.kineto.header import CUDA_OPTION, write_header_tables
from nsight_advisor.ingest.kineto.json_events import iter_events, read_header
from nsight_advisor.ingest.kineto.early_parse import ParsedTrace
from nsight_advisor.ingest.kineto.parallel_parse import parse_traces
from nsight_advisor.ingest.kineto.ranges import write_ranges
from nsight_advisor.ingest.kineto.rows import BATCH_ROWS, COLUMNS, DOMAINS, EventRows, MAX_NAME_CHARS
from nsight_advisor.ingest.nvtx_depth import BATCH_ROWS as DEPTH_BATCH_ROWS, DepthStream
from nsight_advisor.ingest.sql_bounds import product_or_null
from nsight_advisor.common.progress import Progress

FORMAT = "kineto-json"
TOOL = "kineto"

# Kineto's fractional numbers (occupancy estimates) arrive as Decimal: Arrow takes them as decimals (a float
# column would refuse them), the stage stores DOUBLE.
_FRACTION = pa.decimal128(38, 18)

# Arrow types of the batch columns (everything else is BIGINT).
_TYPES = {
    "name": pa.string(), "kind": pa.string(), "direction": pa.string(), "src_kind": pa.string(),
    "dst_kind": pa.string(), "mem_kind": pa.string(), "sync_type": pa.string(), "text": pa.string(),
    "source": pa.string(), "collective": pa.string(), "dtype": pa.string(), "process_group": pa.string(),
    "blocks_per_sm": _FRACTION, "warps_per_sm": _FRACTION, "occupancy_pct": _FRACTION,
    "group_ranks": pa.list_(pa.int64()),
}
_WHAT = {pa.string(): "text", _FRACTION: "a number", pa.list_(pa.int64()): "a list of whole numbers"}
_SQL_TYPES = {pa.string(): "VARCHAR", _FRACTION: "DOUBLE", pa.list_(pa.int64()): "BIGINT[]"}

# Batches that go into a stored table directly (the others are staged: see the module docstring).
_DIRECT = ("api_calls", "cpu_ops")


def ingest_kineto(con: duckdb.DuckDBPyConnection, capture_id: int, path: Path, *, progress: bool = False,
                  defer: Collection[str] = ()) -> None:
    """Fill the normalized tables for one Kineto trace as ``capture_id``.

    Raises InputError (one line naming the file) when ``path`` is not a readable, complete trace: truncated or
    corrupt gzip, JSON that is not a trace, an event without the fields its category needs, a name longer than
    :data:`~nsight_advisor.ingest.kineto.rows.MAX_NAME_CHARS`. ``defer`` may name ``cpu_ops``, the bulk of a
    trace, which then stays empty and is listed in ``capture_deferred`` (the capture's span still covers it);
    other tables are always loaded.
    """
    ingest_kineto_many(con, [(capture_id, path)], progress=progress, defer=defer)


def ingest_kineto_many(con: duckdb.DuckDBPyConnection, items: Sequence[tuple[int, Path]], *,
                       progress: bool = False, defer: Collection[str] = ()) -> None:
    """Fill the normalized tables for each ``(capture_id, path)`` Kineto trace, as :func:`ingest_kineto` would one
    at a time, with each statement after the parse run once for all of them.

    A small trace's ingest is mostly fixed cost: about 50 statements of 1 to 2 ms each (the 8 DLRM ranks: 0.47 s
    of statements one at a time). The traces are parsed in ``items`` order (the later half by a forked child where
    there are two cores and enough to parse: ingest.kineto.parallel_parse, with the same result), so the error
    raised is that of the first trace that cannot be read; their batches are staged together (flushed at
    :data:`~nsight_advisor.ingest.kineto.rows.BATCH_ROWS` rows, as one trace's are).
    """
    items = [(int(cid), Path(path)) for cid, path in items]
    if not items:
        return
    ing = _Ingest(con, items, defer_cpu_ops="cpu_ops" in defer)
    saved = _bound_memory(con)
    steps = ["gpu_rows", "annotations", "collectives", "header_tables", "captures"]
    try:
        with Progress(f"ingest {items[0][1].name}" if len(items) == 1 else f"ingest {len(items)} PyTorch traces",
                      len(items) + len(steps) + 1, enabled=progress) as bar:
            ing.create_stage()
            parse_traces(ing, items, lambda cid, path: _read_trace(con, cid, path, ing),
                         lambda path: bar.step(f"read {path.name}"))
            ing.after_events()
            bar.step("events")
            for step in steps:
                getattr(ing, step)()
                bar.step(step)
            ing.write_notes()
    finally:
        ing.drop_stage()
        for name, value in saved.items():
            with contextlib.suppress(duckdb.Error):
                con.execute(f"SET {name} = '{value}'")


@classified
def _read_trace(con: duckdb.DuckDBPyConnection, capture_id: int, path: Path, ing: "_Ingest") -> None:
    """Parse one trace into the ingest's stage (its errors name the file: ingest.failures.classified)."""
    ing.events(capture_id, path, read_header(path))


#: DuckDB's memory while a trace streams into an on-disk store (beyond it, DuckDB spills): with the parser's
#: batches beside it, the whole ingest of a 2 GB trace stays under 1 GB (docs/performance.md).
MEMORY_LIMIT = "400MB"


def _bound_memory(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """DuckDB's memory bounded at :data:`MEMORY_LIMIT` (on-disk stores only); returns the settings to restore."""
    saved: dict[str, str] = {}
    try:
        db_file = con.execute("SELECT file FROM pragma_database_list WHERE name = current_database()").fetchone()
        for name in ("memory_limit", "preserve_insertion_order"):
            saved[name] = str(con.execute(f"SELECT current_setting('{name}')").fetchone()[0])
        con.execute("SET preserve_insertion_order = false")  # row order carries no meaning in the store
        if db_file and db_file[0]:
            con.execute(f"SET memory_limit = '{MEMORY_LIMIT}'")
    except duckdb.Error:
        pass
    return saved


class _Ingest:
    """The ingest of one or more traces: ``events`` parses each into the stage, each later step fills tables from
    what was staged, for every trace at once (each staged row carries its ``capture_id``)."""

    def __init__(self, con: duckdb.DuckDBPyConnection, items: Sequence[tuple[int, Path]], *,
                 defer_cpu_ops: bool = False) -> None:
        self.con, self.defer_cpu_ops = con, defer_cpu_ops
        self.ids = [cid for cid, _ in items]
        self.paths = dict(items)
        self.in_ids = ", ".join(str(cid) for cid in self.ids)  # whole numbers: safe to write into the SQL
        self.tmp = f"_kineto_{self.ids[0]}"
        self.headers: dict[int, dict] = {}
        self.stats: dict[int, os.stat_result] = {}
        self.rows: dict[int, EventRows] = {}
        self.pending: dict[str, list[pa.Table]] = {table: [] for table in COLUMNS}
        self.pending_rows: dict[str, int] = dict.fromkeys(COLUMNS, 0)
        # capture_missing and ingest_notes rows in the order the steps found them, written in one statement each
        self.missing_rows: list[tuple] = []
        self.note_rows: list[tuple] = []

    def sql(self, sql: str, params=None) -> duckdb.DuckDBPyConnection:
        return sql_params.execute(self.con, sql, params)

    def stage(self, table: str) -> str:
        return f"{self.tmp}_{table}"

    def create_stage(self) -> None:
        for table, columns in COLUMNS.items():
            if table in _DIRECT:
                continue
            cols = ", ".join(f"{c} {_SQL_TYPES.get(_TYPES.get(c), 'BIGINT')}" for c in columns)
            self.sql(f"CREATE OR REPLACE TEMP TABLE {self.stage(table)} (capture_id BIGINT, {cols})")

    def drop_stage(self) -> None:
        for table in (*COLUMNS, "launcher"):
            with contextlib.suppress(duckdb.Error):
                self.sql(f"DROP TABLE IF EXISTS {self.stage(table)}")

    def missing(self, cid: int, data: str, reason: str, option: str) -> None:
        self.missing_rows.append((cid, data, reason, option))

    def note(self, cid: int, data: str, rows: int, note: str) -> None:
        if rows:
            self.note_rows.append((cid, data, rows, note))

    def write_notes(self) -> None:
        """The capture_missing and ingest_notes rows by capture, each capture's in the order the steps found them
        (as one trace at a time writes them; the sort is stable)."""
        for table, rows in (("capture_missing", self.missing_rows), ("ingest_notes", self.note_rows)):
            if rows:
                self.sql(f"INSERT INTO {table} {sql_params.values(sorted(rows, key=lambda row: row[0]))}")

    def counts(self, table: str) -> dict[int, int]:
        """Rows of each capture in stored ``table`` (captures with none left out)."""
        return dict(self.sql(f"SELECT capture_id, count(*) FROM {table} WHERE capture_id IN ({self.in_ids}) "
                             "GROUP BY capture_id").fetchall())

    # -- the stream ------------------------------------------------------------------------------------------
    def write(self, cid: int, table: str, columns: tuple[str, ...], rows: list[tuple]) -> None:
        """Sink of :class:`EventRows`: one batch, with its capture id, held until :data:`BATCH_ROWS` rows of
        ``table`` are (several small traces' batches then go in with one statement)."""
        batch = self._arrow(cid, table, columns, rows)
        self.append(table, batch.add_column(0, "capture_id", int_array(np.full(batch.num_rows, cid), pa.int64())))

    def append(self, table: str, batch: pa.Table) -> None:
        """Hold ``batch`` of ``table``; once :data:`BATCH_ROWS` rows of it are held, insert them."""
        self.pending[table].append(batch)
        self.pending_rows[table] += batch.num_rows
        if self.pending_rows[table] >= BATCH_ROWS:
            self.flush(table)

    def flush(self, table: str) -> None:
        """Insert the held batches of ``table`` into it (direct) or its stage."""
        batches, self.pending[table], self.pending_rows[table] = self.pending[table], [], 0
        if not batches:
            return
        stream_view(self.con, "kineto_batch", batches[0] if len(batches) == 1 else pa.concat_tables(batches))
        try:
            if table == "api_calls":  # names as ids (EventRows.api_names), the names written once after the parse
                self.sql("""
                    INSERT INTO api_call_rows (capture_id, pid, tid, correlation_id, name_id, kind, start_ns, end_ns,
                                               duration_ns)
                    SELECT capture_id, pid, tid, correlation_id, name_id, kind, start_ns, end_ns, end_ns - start_ns
                    FROM kineto_batch""")
            elif table == "cpu_ops":
                self.sql("""
                    INSERT INTO cpu_ops
                    SELECT capture_id, pid, tid, name, start_ns, end_ns, end_ns - start_ns, external_id,
                           sequence_number, fwd_thread_id
                    FROM kineto_batch""")
            else:
                self.sql(f"INSERT INTO {self.stage(table)} SELECT * FROM kineto_batch")
        finally:
            drop_view(self.con, "kineto_batch")

    def _arrow(self, cid: int, table: str, columns: tuple[str, ...], rows: list[tuple]) -> pa.Table:
        """The batch as an Arrow table (without pandas: ingest/kineto/arrow_rows.py), fractions as doubles as the
        stage stores them; InputError naming the column when a value does not fit its type."""
        try:
            batch = rows_table(rows, columns, _TYPES, _FRACTION)
        except ColumnTypeError as exc:
            name = exc.column
            raise InputError(f"{self.paths[cid]}: an event for {table} holds a {name} that is not "
                             f"{_WHAT.get(_TYPES.get(name), 'a whole number within 64 bits')}") from None
        for name in ("name", "text"):
            if name in columns and batch.num_rows and not longest_at_most(batch[name], MAX_NAME_CHARS):
                raise InputError(f"{self.paths[cid]}: an event for {table} has a name of more than "
                                 f"{MAX_NAME_CHARS:,} characters: not a name")
        return batch

    def events(self, cid: int, path: Path, header: dict) -> None:
        """Parse one trace into the stage (and api_calls, cpu_ops)."""
        self.headers[cid] = header
        rows = self.rows[cid] = EventRows(functools.partial(self.write, cid), cpu_ops=not self.defer_cpu_ops)
        try:
            with gc_paused():
                rows.consume(iter_events(path))
        except InputError as exc:
            text = str(exc)
            raise InputError(text if text.startswith(str(path)) else f"{path}: {text}") from None
        except RecursionError:
            raise InputError(f"{path}: an event nested too deeply to be a trace event") from None
        # the file as it was read: classified (ingest.failures) checks it did not change while this parse ran, so
        # the capture row's size and time (the cache's key) describe what was read, whatever happens to it later
        self._parse_over(cid, rows, path.stat())

    def parsed(self, cid: int, trace: ParsedTrace) -> None:
        """Stage a trace parsed in another process (ingest/kineto/early_parse.py) through the calls its parse
        here would have made, in the same order: the same batches, flushed at the same points."""
        self.headers[cid] = trace.header
        rows = self.rows[cid] = EventRows.restored(trace.state)
        for table, columns, batch in trace.batches:
            self.write(cid, table, columns, batch)
        self._parse_over(cid, rows, trace.stat)

    def _parse_over(self, cid: int, rows: EventRows, stat: os.stat_result) -> None:
        for table, n in sorted(rows.dropped.items()):
            self.note(cid, table, n, "dropped events with a negative duration")
        self.stats[cid] = stat

    def after_events(self) -> None:
        """Once every trace is parsed: the last batches in, each GPU row's launching process and thread."""
        for table in COLUMNS:
            self.flush(table)
        self.sql("CREATE OR REPLACE TEMP TABLE " + self.stage("launcher") + f""" AS
                  SELECT capture_id, correlation_id, min(pid) AS pid, min(tid) AS tid FROM api_call_rows
                  WHERE capture_id IN ({self.in_ids}) AND correlation_id IS NOT NULL
                  GROUP BY capture_id, correlation_id""")
        if self.defer_cpu_ops:
            self.sql("INSERT INTO capture_deferred " + sql_params.values(
                (cid, "cpu_ops", self.rows[cid].cpu_op_count) for cid in self.ids))
        self.names("api_names", "api_names", """
            SELECT capture_id, name_id, name,
                   CASE WHEN contains(name, '_v') THEN regexp_replace(name, '_v[0-9]+$', '') ELSE name END
            FROM kineto_names""")
        calls = self.counts("api_call_rows")
        for cid in self.ids:
            if not calls.get(cid):
                self.missing(cid, "api_calls", "no cuda_runtime or cuda_driver events: CUDA API calls were not traced",
                             CUDA_OPTION)

    def names(self, table: str, of: str, select: str) -> None:
        """Each capture's names of ``of`` (an EventRows dict of name -> id) into ``table``: ``select`` over the view
        ``kineto_names`` (capture_id, name_id, name)."""
        names = [(cid, name_id, name) for cid in self.ids for name, name_id in getattr(self.rows[cid], of).items()]
        if not names:
            return
        cids, name_ids, texts = zip(*names)
        batch = pa.table({"capture_id": int_array(np.array(cids), pa.int64()),
                          "name_id": int_array(np.array(name_ids), pa.int64()), "name": string_array(texts)})
        stream_view(self.con, "kineto_names", batch)
        try:
            self.sql(f"INSERT INTO {table} {select}")
        finally:
            drop_view(self.con, "kineto_names")

    # -- GPU rows --------------------------------------------------------------------------------------------
    def gpu_rows(self) -> None:
        """Kernels, copies, memsets and syncs with their host process (and, for kernels, launching thread)."""
        k, launcher = self.stage("kernels"), self.stage("launcher")
        self.sql(f"""
            INSERT INTO kernel_rows (capture_id, device_id, context_id, stream_id, pid, tid, correlation_id, start_ns,
                                     end_ns, duration_ns, name_id, short_name_id, grid_x, grid_y, grid_z, block_x,
                                     block_y, block_z, blocks, threads_per_block, registers_per_thread,
                                     shared_mem_bytes)
            SELECT k.capture_id, {_ids('k')}, l.pid, l.tid, k.correlation_id, k.start_ns, k.end_ns,
                   k.end_ns - k.start_ns, k.name_id, k.short_name_id, k.gx, k.gy, k.gz, k.bx, k.by_, k.bz,
                   {product_or_null('k.gx', 'k.gy', 'k.gz')}, {product_or_null('k.bx', 'k.by_', 'k.bz', 'INTEGER')},
                   {_i32('k.registers_per_thread')}, k.shared_mem_bytes
            FROM (SELECT *, {_i32('grid_x')} AS gx, {_i32('grid_y')} AS gy, {_i32('grid_z')} AS gz,
                         {_i32('block_x')} AS bx, {_i32('block_y')} AS by_, {_i32('block_z')} AS bz FROM {k}) k
            LEFT JOIN {launcher} l ON l.capture_id = k.capture_id AND l.correlation_id = k.correlation_id""")
        self.names("kernel_names", "kernel_names", "SELECT capture_id, name_id, name FROM kineto_names")
        self.sql(f"""
            INSERT INTO kernel_occupancy
            SELECT capture_id, {_i32('device_id')}, {_i32('stream_id')}, correlation_id, start_ns, blocks_per_sm,
                   warps_per_sm, occupancy_pct
            FROM {k} WHERE coalesce(blocks_per_sm, warps_per_sm, occupancy_pct) IS NOT NULL""")
        joined = "LEFT JOIN {launcher} l ON l.capture_id = {a}.capture_id AND l.correlation_id = {a}.correlation_id"
        self.sql(f"""
            INSERT INTO memcpys
            SELECT m.capture_id, {_ids('m')}, l.pid, m.correlation_id, m.start_ns, m.end_ns, m.end_ns - m.start_ns,
                   m.bytes, m.direction, m.src_kind, m.dst_kind, NULL
            FROM {self.stage('memcpys')} m {joined.format(launcher=launcher, a='m')}""")
        self.sql(f"""
            INSERT INTO memsets
            SELECT m.capture_id, {_ids('m')}, l.pid, m.correlation_id, m.start_ns, m.end_ns, m.end_ns - m.start_ns,
                   m.bytes, m.mem_kind, NULL
            FROM {self.stage('memsets')} m {joined.format(launcher=launcher, a='m')}""")
        self.sql(f"""
            INSERT INTO syncs
            SELECT s.capture_id, {_ids('s')}, l.pid, s.correlation_id, s.sync_type, s.start_ns, s.end_ns,
                   s.end_ns - s.start_ns, s.event_id
            FROM {self.stage('syncs')} s {joined.format(launcher=launcher, a='s')}""")
        for cid in self.ids:
            write_ranges(self, cid, self.rows[cid].profiler_ranges)
        kernels, syncs = self.counts("kernel_rows"), self.counts("syncs")
        for cid in self.ids:
            if not kernels.get(cid):
                self.missing(cid, "kernels", "no kernel events: GPU activity was not traced", CUDA_OPTION)
            if not syncs.get(cid):
                self.missing(cid, "syncs", "no cuda_sync events: this PyTorch profiler did not record CUDA "
                             "synchronization", f"{CUDA_OPTION} on a PyTorch whose profiler writes cuda_sync events")
            self.missing(cid, "gpu_metrics", "PyTorch profiler traces hold no sampled GPU metrics",
                         "nsys profile --gpu-metrics-devices=all (Nsight Systems)")

    # -- annotations -----------------------------------------------------------------------------------------
    def annotations(self) -> None:
        """Annotations into nvtx_rows with their nesting depth per thread (GPU ones: per device and stream)."""
        a = self.stage("annotations")
        # The host process of a trace's GPU annotations: its only process making CUDA calls, when there is one.
        source = f"""
            WITH host AS (
                SELECT capture_id, CASE WHEN count(DISTINCT pid) = 1 THEN min(pid) END AS pid FROM api_call_rows
                WHERE capture_id IN ({self.in_ids}) GROUP BY capture_id
            )
            SELECT a.capture_id, a.domain_id, coalesce(a.pid, h.pid) AS pid, a.tid, a.text, a.start_ns, a.end_ns,
                   CASE WHEN a.device_id IS NULL THEN hash(0, a.capture_id, a.pid, a.tid)
                        ELSE hash(1, a.capture_id, a.device_id, a.stream_id) END AS thread,
                   true AS nestable
            FROM {a} a LEFT JOIN host h ON h.capture_id = a.capture_id
            ORDER BY thread, a.start_ns, a.end_ns DESC"""
        reader = self.sql(source).to_arrow_reader(DEPTH_BATCH_ROWS)
        stream = DepthStream()
        writer = second_connection(self.con)  # the first connection is busy streaming the stage
        try:
            stream_view(writer, "kineto_ranges", pa.RecordBatchReader.from_batches(
                stream.output_schema(reader.schema), stream.batches(reader)))
            sql_params.execute(writer, """
                INSERT INTO nvtx_rows
                SELECT capture_id, pid, tid, domain_id, text, 'push_pop', start_ns, end_ns, end_ns - start_ns, depth,
                       NULL
                FROM kineto_ranges""")
        finally:
            writer.close()
        used = set(self.sql(f"SELECT DISTINCT capture_id, domain_id FROM {a}").fetchall())
        domains = [(cid, domain_id, name) for cid in self.ids for name, domain_id in DOMAINS.items()
                   if (cid, domain_id) in used]
        if domains:
            self.sql("INSERT INTO nvtx_domains " + sql_params.values(domains))
        for cid in self.ids:
            if not any(c == cid for c, _ in used):
                self.missing(cid, "nvtx_ranges", "no user_annotation, gpu_user_annotation or ProfilerStep events",
                             "torch.profiler.record_function(...) ranges, or a profiler schedule (ProfilerStep#N)")

    # -- collectives -----------------------------------------------------------------------------------------
    def collectives(self) -> None:
        """Collectives; a host row gets the correlation id of the first NCCL kernel its thread launched within it."""
        c = self.stage("collectives")
        self.sql(f"""
            INSERT INTO collectives
            WITH nccl AS (
                SELECT a.capture_id, a.pid, a.tid, a.start_ns, a.correlation_id
                FROM api_calls a JOIN kernels k ON k.capture_id = a.capture_id AND k.correlation_id = a.correlation_id
                WHERE a.capture_id IN ({self.in_ids}) AND k.name ILIKE '%nccl%'
                  AND a.pid IN (SELECT pid FROM {c}) AND a.tid IN (SELECT tid FROM {c})
            ), linked AS (
                SELECT c.*, (SELECT n.correlation_id FROM nccl n
                             WHERE n.capture_id = c.capture_id AND n.pid = c.pid AND n.tid = c.tid
                               AND n.start_ns BETWEEN c.start_ns AND c.end_ns
                             ORDER BY n.start_ns LIMIT 1) AS launched
                FROM {c} c
            )
            SELECT capture_id, source, pid, tid, {_i32('device_id')}, start_ns, end_ns, end_ns - start_ns, collective,
                   dtype, in_msg_nelems, out_msg_nelems, in_msg_bytes, out_msg_bytes, {_i32('group_size')},
                   group_ranks, process_group, external_id, coalesce(correlation_id, launched)
            FROM linked""")

    # -- GPUs and the capture --------------------------------------------------------------------------------
    def header_tables(self) -> None:
        """gpus (deviceProperties) and capture_distributed (distributedInfo), from each trace's header."""
        for cid, data, reason, option in write_header_tables(self.con, {c: self.headers[c] for c in self.ids}):
            self.missing(cid, data, reason, option)

    def captures(self) -> None:
        spans = {cid: (s, e) for cid, s, e in self.sql(f"""
            SELECT capture_id, min(s), max(e) FROM (
                SELECT capture_id, start_ns s, end_ns e FROM kernel_rows WHERE capture_id IN ({self.in_ids}) UNION ALL
                SELECT capture_id, start_ns, end_ns FROM api_call_rows WHERE capture_id IN ({self.in_ids}) UNION ALL
                SELECT capture_id, start_ns, end_ns FROM memcpys WHERE capture_id IN ({self.in_ids}) UNION ALL
                SELECT capture_id, start_ns, end_ns FROM memsets WHERE capture_id IN ({self.in_ids}) UNION ALL
                SELECT capture_id, start_ns, end_ns FROM syncs WHERE capture_id IN ({self.in_ids}) UNION ALL
                SELECT capture_id, start_ns, end_ns FROM nvtx_rows WHERE capture_id IN ({self.in_ids}) UNION ALL
                SELECT capture_id, start_ns, end_ns FROM cpu_ops WHERE capture_id IN ({self.in_ids}))
            GROUP BY capture_id""").fetchall()}
        now = _dt.datetime.now(_dt.timezone.utc).replace(tzinfo=None)
        values = []
        for cid in self.ids:
            span, ops = spans.get(cid, (None, None)), self.rows[cid].cpu_op_span
            starts = [v for v in (span[0], *ops[:1]) if v is not None]
            ends = [v for v in (span[1], *ops[1:]) if v is not None]
            start, end = (min(starts) if starts else None), (max(ends) if ends else None)
            version = self.headers[cid].get("schemaVersion")
            path, st = self.paths[cid], self.stats[cid]
            values.append([
                # absolute(), not resolve(): a name that is not UTF-8 comes as a link (ingest.failures), never
                # followed
                cid, str(path.absolute()), path.name, st.st_size, st.st_mtime_ns, FORMAT, TOOL, "unknown",
                str(version)[:40] if version is not None else None, start, end,
                (end - start) if start is not None and end is not None else None, now,
            ])
        self.sql("INSERT INTO captures " + sql_params.values(values))


def _ids(alias: str) -> str:
    """SQL: the device, context and stream of a staged GPU row (``alias``), each as an INTEGER or NULL."""
    return ", ".join(_i32(f"{alias}.{c}") for c in ("device_id", "context_id", "stream_id"))


def _i32(column: str) -> str:
    """SQL: ``column`` when it fits an INTEGER, else NULL (CUPTI writes 0xFFFFFFFF for "no stream")."""
    return f"CASE WHEN {column} BETWEEN -2147483648 AND 2147483647 THEN {column} END"


__all__ = ["ingest_kineto", "FORMAT", "TOOL"]

