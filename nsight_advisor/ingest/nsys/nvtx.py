"""NVTX ranges and marks of an nsys export, streamed into ``nvtx_rows`` with the nesting depth of push/pop ranges
(see :mod:`.nvtx_depth`), their domains' names into ``nvtx_domains``."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Iterator

import duckdb

from nsight_advisor.ingest.arrow_scan import stream_view
from nsight_advisor.common import sql_params
from nsight_advisor.common.connections import second_connection
from nsight_advisor.ingest.nsys import enums as E
from nsight_advisor.ingest.gc_pause import gc_paused
from nsight_advisor.ingest.nsys.catalog import NVTX, PID_OF, TID_OF, sql_text
from nsight_advisor.ingest.nsys.reader import ExportReader, memory_limit
from nsight_advisor.ingest.sql_bounds import valid_span

if TYPE_CHECKING:
    import pyarrow as pa

    from nsight_advisor.ingest.nvtx_depth import DepthStream

# pyarrow, numpy and the depth walk are imported where the ranges stream: an export without NVTX ranges (most small
# ones) never loads them (0.5 s of a cold analyze; docs/performance.md, "Small captures").

#: DuckDB's memory while NVTX ranges stream through Arrow batches held outside DuckDB (an on-disk store only).
#: Lower than the ingest's so that the batches and DuckDB together stay within the ingest's peak
#: (docs/performance.md, "Measurements behind the code").
DEPTH_MEMORY_LIMIT = "350MB"
#: Rows per Arrow batch of the stream: nsight_advisor.ingest.nvtx_depth.BATCH_ROWS, written here so that this
#: module does not import numpy and pyarrow before a range streams (tests/test_ingest_nsys.py checks they agree).
BATCH_ROWS = 250_000


def nvtx_span_sql(reader: ExportReader) -> str | None:
    """The NVTX table's rows and the span of the rows the insert would keep (marks end where they start), as
    ExportReader.deferred takes it; None without the table."""
    if not reader.cat.has(NVTX, "start"):
        return None
    end = f"""CASE WHEN eventType = {E.NVTX_MARK} THEN coalesce("end", start) ELSE "end" END"""
    kinds = f"{E.NVTX_MARK}, {E.NVTX_PUSH_POP}, {E.NVTX_START_END}"
    kept = f"""eventType IN ({kinds}) AND {valid_span("start", f"({end})")}"""
    return f"""
        SELECT count(*), min(start) FILTER (WHERE {kept}), max({end}) FILTER (WHERE {kept})
        FROM {reader.table(NVTX)}"""


def read_nvtx_ranges(reader: ExportReader) -> None:
    if not reader.cat.has(NVTX, "start"):
        reader.missing("nvtx_ranges", f"no {NVTX} table: no NVTX ranges were traced", "nsys profile --trace=nvtx")
        return
    n = "n"

    def column(name: str) -> str:
        return reader.col(NVTX, name, n)

    kinds = f"({E.NVTX_MARK}, {E.NVTX_PUSH_POP}, {E.NVTX_START_END}, {E.NVTX_DOMAIN_CREATE})"
    if reader.deferred("nvtx_ranges", NVTX, nvtx_span_sql(reader)):
        return
    # The columns as they lie (each one costs on the way through Arrow): the insert derives the rest.
    source = f"""
        SELECT {column('globalTid')} AS thread, {column('domainId')} AS domain_id, {column('text')}::VARCHAR AS text,
               {column('textId')}::BIGINT AS text_id, n.eventType AS event_type, n.start AS start_ns,
               n."end" AS end_ns, {column('category')} AS category
        FROM {reader.table(NVTX)} n
        WHERE n.eventType IN {kinds}"""
    nvtx = NvtxStream(reader.con, source, reader.strings())
    try:
        insert_nvtx(reader, nvtx, ordered=False)  # as the export lies: nsys writes each thread in start order
    except Exception:  # the stream's error reaches us through DuckDB and Arrow, re-wrapped
        if not nvtx.unordered:
            raise
        nvtx = NvtxStream(reader.con, source, reader.strings())
        insert_nvtx(reader, nvtx, ordered=True)
    # A domain's name comes from its creation row (without one the view says 'domain N').
    for domain_id, name in sorted(nvtx.domains.items(), key=lambda item: item[0] or 0):
        if name is not None and domain_id:  # domain 0 is the unnamed one: 'Default'
            reader.sql("INSERT INTO nvtx_domains VALUES ($cid, $id, $name)",
                     {"cid": reader.cid, "id": domain_id, "name": name})
    inserted = reader.inserted("nvtx_ranges")
    reader.note("nvtx_ranges", nvtx.ranges - inserted,
              "dropped NVTX_EVENTS ranges with a NULL start, an unclosed end, end < start, or a duration "
              "beyond 64 bits")
    if inserted == 0:
        reader.missing("nvtx_ranges", f"{NVTX} has no ranges or marks", "nsys profile --trace=nvtx")


def insert_nvtx(reader: ExportReader, nvtx: NvtxStream, *, ordered: bool) -> None:
    """Stream the NVTX rows into ``nvtx_ranges`` with the depth of push/pop ranges (see :mod:`.nvtx_depth`).

    Unordered, the export is read in its own row order (kept by ``preserve_insertion_order`` while the
    query is planned; should DuckDB not keep it, the walk notices and the caller sorts); ordered, DuckDB
    sorts the rows per thread first. One INSERT reads the stream, so a failure leaves no rows.
    """
    import pyarrow as pa

    from nsight_advisor.ingest.nvtx_depth import DepthStream, prefetched

    valid = valid_span("start_ns", "end_ns")
    order = "ORDER BY thread, start_ns, end_ns DESC" if ordered else ""
    # Lowered only where the ingest bounds memory (an on-disk store, which can spill): Arrow batches live
    # outside DuckDB's limit.
    with memory_limit(reader.con, DEPTH_MEMORY_LIMIT if reader.memory_bounded else None), \
            _no_dictionary_compression(reader.con), gc_paused():
        # A second connection inserts while the first one streams the export (which may be a lenient TEMP
        # copy, seen by the first only). Nothing else may run on the first meanwhile: a new statement there
        # would end the stream.
        writer = second_connection(reader.con)
        keep_order = str(reader.sql("SELECT current_setting('preserve_insertion_order')").fetchone()[0])
        reads = batches = None
        try:
            # Row order is fixed when the source is planned; the insert must not keep it (it would buffer).
            reader.sql("SET preserve_insertion_order = true")
            rows = nvtx.open(f"{nvtx.source} {order}")
            writer.execute(f"SET preserve_insertion_order = {keep_order}")  # a global setting
            stream = DepthStream()
            # Three stages on three threads, each releasing the GIL for most of its work: DuckDB reads the
            # export into Arrow, numpy walks the depths, DuckDB inserts (one stage alone keeps under two cores
            # busy).
            reads = prefetched(iter(rows), name="nvtx-read")
            batches = prefetched(nvtx.walked(stream, reads))
            stream_view(writer, "nvtx_batches", pa.RecordBatchReader.from_batches(
                stream.output_schema(nvtx.schema(rows)), batches))
            sql_params.execute(writer, f"""
                INSERT INTO nvtx_rows
                SELECT $cid, {PID_OF.format(col='b.thread')}, {TID_OF.format(col='b.thread')}, coalesce(b.domain_id, 0),
                       b.text,
                       CASE b.event_type WHEN {E.NVTX_PUSH_POP} THEN 'push_pop'
                            WHEN {E.NVTX_START_END} THEN 'start_end' ELSE 'mark' END,
                       b.start_ns, b.end_ns, b.end_ns - b.start_ns, b.depth, b.category
                FROM (SELECT * REPLACE (CASE WHEN event_type = {E.NVTX_MARK} THEN coalesce(end_ns, start_ns)
                                             ELSE end_ns END AS end_ns)  -- a mark ends where it starts
                      FROM nvtx_batches) b
                WHERE {valid}""", {"cid": reader.cid})
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


class NvtxStream:
    """One read of an export's NVTX rows for :func:`insert_nvtx`.

    On the way it resolves registered strings (``text_id``) into ``text``, counts the ranges and marks, takes
    the domain-create rows out (their text names a domain) and notes whether a thread came out of start order
    (then the rows are read again, sorted). Strings are looked up here rather than joined in SQL: a join in
    the source would give up the export's row order, and one in the insert builds its hash table on the stream
    (DuckDB cannot tell how long a stream is), which grows past the memory limit on large exports.
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
        import pyarrow as pa

        return reader.schema.append(pa.field("nestable", pa.bool_()))

    def close(self) -> None:
        if self._lookup is not None:
            self._lookup.close()
            self._lookup = None

    def walked(self, stream: DepthStream, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from nsight_advisor.ingest.nvtx_depth import NotStartOrdered

        try:
            yield from stream.batches(self._ranges(batches))
        except NotStartOrdered:
            self.unordered = True
            raise

    def _ranges(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow.compute as pc

        from nsight_advisor.ingest.arrow_buffers import false_for_null, scalar

        for batch in batches:
            batch = self._resolved(batch)
            kind = batch.column("event_type")
            # Arrow scalars and arrays only: a Python value makes pyarrow import pandas (ingest/arrow_buffers.py)
            domain = false_for_null(pc.equal(kind, scalar(E.NVTX_DOMAIN_CREATE, kind.type)))
            if pc.any(domain).as_py():
                created = batch.filter(domain)
                for domain_id, text in zip(created.column("domain_id").to_pylist(), created.column("text").to_pylist()):
                    if text is not None:
                        self.domains.setdefault(domain_id, text)
                batch = batch.filter(pc.invert(domain))
            self.ranges += batch.num_rows
            # the rows the insert keeps as push/pop ranges (start and end recorded, end >= start) get a depth
            kind = batch.column("event_type")
            nestable = false_for_null(pc.and_(pc.equal(kind, scalar(E.NVTX_PUSH_POP, kind.type)),
                                              pc.greater_equal(batch.column("end_ns"), batch.column("start_ns"))))
            yield batch.append_column("nestable", nestable)

    def _resolved(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """``batch`` with ``text`` taken from StringIds where the export gave a string id instead."""
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        from nsight_advisor.ingest.arrow_buffers import int_array, string_array

        text_id = batch.column("text_id")
        wanted = pc.filter(text_id, pc.and_(pc.is_null(batch.column("text")), pc.is_valid(text_id)))
        if len(wanted) == 0:
            return batch
        new = [i for i in pc.unique(wanted).to_pylist() if i not in self._known]
        if new:
            if self._lookup is None:
                self._lookup = second_connection(self.con)
            ids = ", ".join(str(int(i)) for i in new)
            found = dict(self._lookup.execute(f"SELECT id, value FROM {self.strings} WHERE id IN ({ids})").fetchall())
            self._known.update((i, found.get(i)) for i in new)
        keys = int_array(np.array(list(self._known), dtype=np.int64), pa.int64())
        values = string_array(list(self._known.values()))
        looked_up = pc.take(values, pc.index_in(text_id, value_set=keys))
        text = pc.coalesce(batch.column("text"), looked_up)
        return batch.set_column(batch.schema.get_field_index("text"), "text", text)




@contextlib.contextmanager
def _no_dictionary_compression(con: duckdb.DuckDBPyConnection):
    """Leave DuckDB's dictionary compression out of the strings written in a block (restored after).

    For NVTX text (millions of ranges, few distinct texts) DuckDB analyses every segment for a dictionary and
    then chooses FSST for most of them anyway; without the dictionary the insert costs less CPU for a slightly
    larger store (docs/performance.md, "Measurements behind the code"). Segments are compressed as the
    insert writes them, so the setting matters while it runs.
    """
    name = "disabled_compression_methods"
    try:
        before = str(con.execute(f"SELECT current_setting('{name}')").fetchone()[0])
        con.execute(f"SET {name} = '{sql_text(','.join(filter(None, (before, 'dictionary'))))}'")
    except duckdb.Error:  # a DuckDB without the setting: compress as it likes
        yield
        return
    try:
        yield
    finally:
        with contextlib.suppress(duckdb.Error):
            con.execute(f"SET {name} = '{sql_text(before)}'")
