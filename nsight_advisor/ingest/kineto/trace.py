"""Read a PyTorch profiler (Kineto) trace (``*.pt.trace.json``, gzipped or not) into the store.

The trace is streamed (:mod:`.kineto_json`): events become rows in batches (:mod:`.kineto_rows`) that go into
DuckDB through Arrow, so memory stays bounded however long the trace is. Host-side rows (API calls, operators)
go straight into their tables; GPU-side rows are staged first, because Kineto writes the device as their
``pid`` and their host process is that of the API call with the same correlation id, which may come later in
the file. After the stream, SQL joins them, computes annotation depths and fills the small tables.

What the normalized store gets: kernels, api_calls, memcpys, memsets, syncs (``cuda_sync`` events, when the
trace has them), nvtx_ranges (annotations: domains ``user_annotation``, ``gpu_user_annotation`` and
``ProfilerStep``), gpus (``deviceProperties``), and the tables only Kineto fills: cpu_ops, collectives,
capture_distributed and kernel_occupancy. What Kineto does not record is listed in ``capture_missing``.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import functools
from pathlib import Path
from typing import Collection

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from nsight_advisor.ingest.arrow_scan import drop_view, stream_view
from nsight_advisor.common import sql_params
from nsight_advisor.common.errors import InputError
from nsight_advisor.ingest.gc_pause import gc_paused
from nsight_advisor.ingest.kineto.header import CUDA_OPTION, write_header_tables
from nsight_advisor.ingest.kineto.json_events import iter_events, read_header
from nsight_advisor.ingest.kineto.ranges import write_ranges
from nsight_advisor.ingest.kineto.rows import COLUMNS, DOMAINS, EventRows, MAX_NAME_CHARS
from nsight_advisor.ingest.nvtx_depth import BATCH_ROWS as DEPTH_BATCH_ROWS, DepthStream
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
    path = Path(path)
    header = read_header(path)
    ing = _Ingest(con, capture_id, path, header, defer_cpu_ops="cpu_ops" in defer)
    saved = _bound_memory(con)
    steps = ["events", "gpu_rows", "annotations", "collectives", "header_tables", "captures"]
    try:
        with Progress(f"ingest {path.name}", len(steps), enabled=progress) as bar:
            ing.create_stage()
            for step in steps:
                getattr(ing, step)()
                bar.step(step)
    finally:
        ing.drop_stage()
        for name, value in saved.items():
            with contextlib.suppress(duckdb.Error):
                con.execute(f"SET {name} = '{value}'")


#: DuckDB's memory while a trace streams into an on-disk store (beyond it, DuckDB spills): with the parser's
#: batches beside it, the whole ingest of a 2 GB trace stays under 1 GB (docs/performance.md).
MEMORY_LIMIT = "400MB"


@functools.lru_cache(maxsize=None)
def _struct(columns: tuple[str, ...]) -> pa.DataType:
    return pa.struct([(name, _TYPES.get(name, pa.int64())) for name in columns])


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
    """One trace's ingest: ``events`` streams the file, each later step fills tables from what it staged."""

    def __init__(self, con: duckdb.DuckDBPyConnection, capture_id: int, path: Path, header: dict, *,
                 defer_cpu_ops: bool = False) -> None:
        self.con, self.cid, self.path, self.header = con, capture_id, path, header
        self.defer_cpu_ops = defer_cpu_ops
        self.tmp = f"_kineto_{capture_id}"
        self.rows: EventRows | None = None

    def sql(self, sql: str, params=None) -> duckdb.DuckDBPyConnection:
        return sql_params.execute(self.con, sql, params)

    def stage(self, table: str) -> str:
        return f"{self.tmp}_{table}"

    def create_stage(self) -> None:
        for table, columns in COLUMNS.items():
            if table in _DIRECT:
                continue
            cols = ", ".join(f"{c} {_SQL_TYPES.get(_TYPES.get(c), 'BIGINT')}" for c in columns)
            self.sql(f"CREATE OR REPLACE TEMP TABLE {self.stage(table)} ({cols})")

    def drop_stage(self) -> None:
        for table in (*COLUMNS, "launcher"):
            with contextlib.suppress(duckdb.Error):
                self.sql(f"DROP TABLE IF EXISTS {self.stage(table)}")

    def missing(self, data: str, reason: str, option: str) -> None:
        self.sql("INSERT INTO capture_missing VALUES (?, ?, ?, ?)", [self.cid, data, reason, option])

    def note(self, data: str, rows: int, note: str) -> None:
        if rows:
            self.sql("INSERT INTO ingest_notes VALUES (?, ?, ?, ?)", [self.cid, data, rows, note])

    def count(self, table: str, stored: bool = False) -> int:
        where = " WHERE capture_id = $cid" if stored else ""
        return int(self.sql(f"SELECT count(*) FROM {table}{where}", {"cid": self.cid}).fetchone()[0])

    # -- the stream ------------------------------------------------------------------------------------------
    def write(self, table: str, columns: tuple[str, ...], rows: list[tuple]) -> None:
        """Sink of :class:`EventRows`: one batch into its table (direct) or its stage."""
        batch = self._arrow(table, columns, rows)
        stream_view(self.con, "kineto_batch", batch)
        try:
            if table == "api_calls":
                self.sql("""
                    INSERT INTO api_calls (capture_id, pid, tid, correlation_id, name, base_name, kind, start_ns,
                                           end_ns, duration_ns)
                    SELECT $cid, pid, tid, correlation_id, name,
                           CASE WHEN contains(name, '_v') THEN regexp_replace(name, '_v[0-9]+$', '') ELSE name END,
                           kind, start_ns, end_ns, end_ns - start_ns
                    FROM kineto_batch""", {"cid": self.cid})
            elif table == "cpu_ops":
                self.sql("""
                    INSERT INTO cpu_ops
                    SELECT $cid, pid, tid, name, start_ns, end_ns, end_ns - start_ns, external_id, sequence_number,
                           fwd_thread_id
                    FROM kineto_batch""", {"cid": self.cid})
            else:
                self.sql(f"INSERT INTO {self.stage(table)} SELECT * FROM kineto_batch")
        finally:
            drop_view(self.con, "kineto_batch")

    def _arrow(self, table: str, columns: tuple[str, ...], rows: list[tuple]) -> pa.Table:
        """The batch as an Arrow table; InputError naming the column when a value does not fit its type."""
        try:  # the tuples converted in one go (a third of the cost of a column at a time)
            batch = pa.Table.from_struct_array(pa.array(rows, type=_struct(columns)))
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError, ValueError):
            batch = self._arrow_by_column(table, columns, rows)
        for name in ("name", "text"):
            if name in columns and batch.num_rows and pc.max(pc.utf8_length(batch[name])).as_py() > MAX_NAME_CHARS:
                raise InputError(f"{self.path}: an event for {table} has a name of more than {MAX_NAME_CHARS:,} "
                                 "characters: not a name")
        return batch

    def _arrow_by_column(self, table: str, columns: tuple[str, ...], rows: list[tuple]) -> pa.Table:
        """The slow path of :meth:`_arrow`, a column at a time: numbers with long fractions (floats kept), or
        an error naming the column that holds a value of the wrong type."""
        arrays = []
        for name, values in zip(columns, zip(*rows)):
            kind = _TYPES.get(name, pa.int64())
            try:
                if kind == _FRACTION:
                    kind, values = pa.float64(), [None if v is None else float(v) for v in values]
                arrays.append(pa.array(values, type=kind))
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError, ValueError):
                raise InputError(f"{self.path}: an event for {table} holds a {name} that is not "
                                 f"{_WHAT.get(_TYPES.get(name), 'a whole number within 64 bits')}") from None
        return pa.Table.from_arrays(arrays, names=list(columns))

    def events(self) -> None:
        rows = self.rows = EventRows(self.write, cpu_ops=not self.defer_cpu_ops)
        try:
            with gc_paused():
                rows.consume(iter_events(self.path))
        except InputError as exc:
            text = str(exc)
            raise InputError(text if text.startswith(str(self.path)) else f"{self.path}: {text}") from None
        except RecursionError:
            raise InputError(f"{self.path}: an event nested too deeply to be a trace event") from None
        for table, n in sorted(rows.dropped.items()):
            self.note(table, n, "dropped events with a negative duration")
        self.sql("CREATE OR REPLACE TEMP TABLE " + self.stage("launcher") + """ AS
                  SELECT correlation_id, min(pid) AS pid, min(tid) AS tid FROM api_calls
                  WHERE capture_id = $cid AND correlation_id IS NOT NULL GROUP BY correlation_id""",
                 {"cid": self.cid})
        if self.defer_cpu_ops:
            self.sql("INSERT INTO capture_deferred VALUES (?, ?, ?)", [self.cid, "cpu_ops", rows.cpu_op_count])
        if not self.count("api_calls", stored=True):
            self.missing("api_calls", "no cuda_runtime or cuda_driver events: CUDA API calls were not traced",
                         CUDA_OPTION)

    # -- GPU rows --------------------------------------------------------------------------------------------
    def gpu_rows(self) -> None:
        """Kernels, copies, memsets and syncs with their host process (and, for kernels, launching thread)."""
        k, launcher = self.stage("kernels"), self.stage("launcher")
        self.sql(f"""
            INSERT INTO kernel_rows (capture_id, device_id, context_id, stream_id, pid, tid, correlation_id, start_ns,
                                     end_ns, duration_ns, name_id, short_name_id, grid_x, grid_y, grid_z, block_x,
                                     block_y, block_z, blocks, threads_per_block, registers_per_thread,
                                     shared_mem_bytes)
            SELECT $cid, {_ids('k')}, l.pid, l.tid, k.correlation_id, k.start_ns, k.end_ns,
                   k.end_ns - k.start_ns, k.name_id, k.short_name_id, k.gx, k.gy, k.gz, k.bx, k.by_, k.bz,
                   TRY_CAST(k.gx::HUGEINT * k.gy * k.gz AS BIGINT), TRY_CAST(k.bx::HUGEINT * k.by_ * k.bz AS INTEGER),
                   {_i32('k.registers_per_thread')}, k.shared_mem_bytes
            FROM (SELECT *, {_i32('grid_x')} AS gx, {_i32('grid_y')} AS gy, {_i32('grid_z')} AS gz,
                         {_i32('block_x')} AS bx, {_i32('block_y')} AS by_, {_i32('block_z')} AS bz FROM {k}) k
            LEFT JOIN {launcher} l ON l.correlation_id = k.correlation_id""", {"cid": self.cid})
        names = self.rows.kernel_names
        if names:
            table = pa.table({"name_id": pa.array(list(names.values()), pa.int64()),
                              "name": pa.array(list(names), pa.string())})
            stream_view(self.con, "kineto_names", table)
            try:
                self.sql("INSERT INTO kernel_names SELECT $cid, name_id, name FROM kineto_names", {"cid": self.cid})
            finally:
                drop_view(self.con, "kineto_names")
        self.sql(f"""
            INSERT INTO kernel_occupancy
            SELECT $cid, {_i32('device_id')}, {_i32('stream_id')}, correlation_id, start_ns, blocks_per_sm,
                   warps_per_sm, occupancy_pct
            FROM {k} WHERE coalesce(blocks_per_sm, warps_per_sm, occupancy_pct) IS NOT NULL""", {"cid": self.cid})
        self.sql(f"""
            INSERT INTO memcpys
            SELECT $cid, {_ids('m')}, l.pid, m.correlation_id, m.start_ns, m.end_ns, m.end_ns - m.start_ns,
                   m.bytes, m.direction, m.src_kind, m.dst_kind, NULL
            FROM {self.stage('memcpys')} m LEFT JOIN {launcher} l ON l.correlation_id = m.correlation_id""",
                 {"cid": self.cid})
        self.sql(f"""
            INSERT INTO memsets
            SELECT $cid, {_ids('m')}, l.pid, m.correlation_id, m.start_ns, m.end_ns, m.end_ns - m.start_ns,
                   m.bytes, m.mem_kind, NULL
            FROM {self.stage('memsets')} m LEFT JOIN {launcher} l ON l.correlation_id = m.correlation_id""",
                 {"cid": self.cid})
        self.sql(f"""
            INSERT INTO syncs
            SELECT $cid, {_ids('s')}, l.pid, s.correlation_id, s.sync_type, s.start_ns, s.end_ns,
                   s.end_ns - s.start_ns, s.event_id
            FROM {self.stage('syncs')} s LEFT JOIN {launcher} l ON l.correlation_id = s.correlation_id""",
                 {"cid": self.cid})
        write_ranges(self, self.rows.profiler_ranges)
        if not self.count("kernel_rows", stored=True):
            self.missing("kernels", "no kernel events: GPU activity was not traced", CUDA_OPTION)
        if not self.count("syncs", stored=True):
            self.missing("syncs", "no cuda_sync events: this PyTorch profiler did not record CUDA synchronization",
                         f"{CUDA_OPTION} on a PyTorch whose profiler writes cuda_sync events")
        self.missing("gpu_metrics", "PyTorch profiler traces hold no sampled GPU metrics",
                     "nsys profile --gpu-metrics-devices=all (Nsight Systems)")

    # -- annotations -----------------------------------------------------------------------------------------
    def annotations(self) -> None:
        """Annotations into nvtx_rows with their nesting depth per thread (GPU ones: per device and stream)."""
        a = self.stage("annotations")
        # The host process of GPU annotations: the trace's only process making CUDA calls, when there is one.
        host = self.sql("SELECT CASE WHEN count(DISTINCT pid) = 1 THEN min(pid) END FROM api_calls "
                        "WHERE capture_id = $cid", {"cid": self.cid}).fetchone()[0]
        source = f"""
            SELECT domain_id, coalesce(pid, $host) AS pid, tid, text, start_ns, end_ns,
                   CASE WHEN device_id IS NULL THEN hash(0, pid, tid)
                        ELSE hash(1, device_id, stream_id) END AS thread,
                   true AS nestable
            FROM {a} ORDER BY thread, start_ns, end_ns DESC"""
        reader = sql_params.execute(self.con, source, {"host": host}).to_arrow_reader(DEPTH_BATCH_ROWS)
        stream = DepthStream()
        writer = self.con.cursor()  # the first connection is busy streaming the stage
        try:
            stream_view(writer, "kineto_ranges", pa.RecordBatchReader.from_batches(
                stream.output_schema(reader.schema), stream.batches(reader)))
            sql_params.execute(writer, """
                INSERT INTO nvtx_rows
                SELECT $cid, pid, tid, domain_id, text, 'push_pop', start_ns, end_ns, end_ns - start_ns, depth, NULL
                FROM kineto_ranges""", {"cid": self.cid})
        finally:
            writer.close()
        used = {r[0] for r in self.sql(f"SELECT DISTINCT domain_id FROM {a}").fetchall()}
        for name, domain_id in DOMAINS.items():
            if domain_id in used:
                self.sql("INSERT INTO nvtx_domains VALUES (?, ?, ?)", [self.cid, domain_id, name])
        if not used:
            self.missing("nvtx_ranges", "no user_annotation, gpu_user_annotation or ProfilerStep events",
                         "torch.profiler.record_function(...) ranges, or a profiler schedule (ProfilerStep#N)")

    # -- collectives -----------------------------------------------------------------------------------------
    def collectives(self) -> None:
        """Collectives; a host row gets the correlation id of the first NCCL kernel its thread launched within it."""
        c = self.stage("collectives")
        self.sql(f"""
            INSERT INTO collectives
            WITH nccl AS (
                SELECT a.pid, a.tid, a.start_ns, a.correlation_id
                FROM api_calls a JOIN kernels k ON k.capture_id = a.capture_id AND k.correlation_id = a.correlation_id
                WHERE a.capture_id = $cid AND k.name ILIKE '%nccl%'
                  AND a.pid IN (SELECT pid FROM {c}) AND a.tid IN (SELECT tid FROM {c})
            ), linked AS (
                SELECT c.*, (SELECT n.correlation_id FROM nccl n
                             WHERE n.pid = c.pid AND n.tid = c.tid AND n.start_ns BETWEEN c.start_ns AND c.end_ns
                             ORDER BY n.start_ns LIMIT 1) AS launched
                FROM {c} c
            )
            SELECT $cid, source, pid, tid, {_i32('device_id')}, start_ns, end_ns, end_ns - start_ns, collective,
                   dtype, in_msg_nelems, out_msg_nelems, in_msg_bytes, out_msg_bytes, {_i32('group_size')},
                   group_ranks, process_group, external_id, coalesce(correlation_id, launched)
            FROM linked""", {"cid": self.cid})
    # -- GPUs and the capture --------------------------------------------------------------------------------
    def header_tables(self) -> None:
        """gpus (deviceProperties) and capture_distributed (distributedInfo), from the trace's header."""
        for data, reason, option in write_header_tables(self.con, self.cid, self.header):
            self.missing(data, reason, option)

    def captures(self) -> None:
        span = self.sql("""
            SELECT min(s), max(e) FROM (
                SELECT min(start_ns) s, max(end_ns) e FROM kernel_rows WHERE capture_id = $cid UNION ALL
                SELECT min(start_ns), max(end_ns) FROM api_calls WHERE capture_id = $cid UNION ALL
                SELECT min(start_ns), max(end_ns) FROM memcpys WHERE capture_id = $cid UNION ALL
                SELECT min(start_ns), max(end_ns) FROM memsets WHERE capture_id = $cid UNION ALL
                SELECT min(start_ns), max(end_ns) FROM syncs WHERE capture_id = $cid UNION ALL
                SELECT min(start_ns), max(end_ns) FROM nvtx_rows WHERE capture_id = $cid UNION ALL
                SELECT min(start_ns), max(end_ns) FROM cpu_ops WHERE capture_id = $cid)""",
                        {"cid": self.cid}).fetchone()
        starts = [v for v in (span[0], *self.rows.cpu_op_span[:1]) if v is not None]
        ends = [v for v in (span[1], *self.rows.cpu_op_span[1:]) if v is not None]
        start, end = (min(starts) if starts else None), (max(ends) if ends else None)
        version = self.header.get("schemaVersion")
        st = self.path.stat()
        self.sql("INSERT INTO captures VALUES (?, ?, ?, ?, ?, ?, ?, 'unknown', ?, ?, ?, ?, ?)", [
            # absolute(), not resolve(): a name that is not UTF-8 comes as a link (ingest.failures), never followed
            self.cid, str(self.path.absolute()), self.path.name, st.st_size, st.st_mtime_ns, FORMAT, TOOL,
            str(version)[:40] if version is not None else None, start, end,
            (end - start) if start is not None and end is not None else None,
            _dt.datetime.now(_dt.timezone.utc).replace(tzinfo=None),
        ])




def _ids(alias: str) -> str:
    """SQL: the device, context and stream of a staged GPU row (``alias``), each as an INTEGER or NULL."""
    return ", ".join(_i32(f"{alias}.{c}") for c in ("device_id", "context_id", "stream_id"))


def _i32(column: str) -> str:
    """SQL: ``column`` when it fits an INTEGER, else NULL (CUPTI writes 0xFFFFFFFF for "no stream")."""
    return f"CASE WHEN {column} BETWEEN -2147483648 AND 2147483647 THEN {column} END"


__all__ = ["ingest_kineto", "FORMAT", "TOOL"]

