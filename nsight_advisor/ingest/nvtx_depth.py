"""Nesting depth of NVTX push/pop ranges: one sorted pass, memory bounded by a batch.

Push/pop ranges on one thread nest like a stack, so a range's depth is the number of ranges on its thread that
were opened before it (in start order; at equal starts the longer one is the outer one) and are still open at
its start (end > its start): what a stack walk finds for properly nested ranges. tests/test_nvtx_depth.py
checks that against a stack walk on drawn nestings, tests/test_ingest_nsys.py on the real exports.

DuckDB sorts the ranges (out of core when they do not fit its memory limit) and streams them back in batches;
each batch is counted with numpy. Why not window functions: over the 4.9M ranges of a 1M-kernel export, two
window sorts plus an ASOF join took about 19 s of a 23 s NVTX step, and one window over opens and closes
together 7 s; this pass takes about 2 s, because along a sorted array the opens are an index and the closes a
binary search, not a second and third sort.

Across batches the only state is ``carry``: the ends of earlier ranges on the thread that are still open after
the batch's last start. For nested ranges it is the open stack (a handful of values), so memory stays flat in
the export's size.
"""

from __future__ import annotations

import os

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

#: Rows per batch streamed from the sort; a batch costs about 40 bytes per row of numpy arrays.
BATCH_ROWS = 250_000


def write_depths(con: duckdb.DuckDBPyConnection, ranges_sql: str, parquet_path: str | os.PathLike) -> None:
    """Write ``rid, depth`` for every row ``ranges_sql`` returns to a Parquet file at ``parquet_path``.

    ``ranges_sql`` selects ``rid, thread, start_ns, end_ns`` (thread: any BIGINT key of the range's thread).
    The depths go to a file rather than a table because the sort is still streaming through ``con`` while
    they are written; the caller joins the file back on ``rid`` and removes it.
    """
    schema = pa.schema([("rid", pa.int64()), ("depth", pa.int32())])
    reader = con.execute(f"SELECT rid, thread, start_ns, end_ns FROM ({ranges_sql}) "
                         f"ORDER BY thread, start_ns, end_ns DESC, rid").to_arrow_reader(BATCH_ROWS)
    walker = _DepthWalker()
    with pq.ParquetWriter(str(parquet_path), schema, compression="none") as out:
        for batch in reader:
            for rid, depth in walker.feed(batch):
                out.write_table(pa.table({"rid": rid, "depth": depth}, schema=schema))
        for rid, depth in walker.finish():
            out.write_table(pa.table({"rid": rid, "depth": depth}, schema=schema))


class _DepthWalker:
    """Consumes ranges sorted by (thread, start, end desc, rid) and yields (rid, depth) arrays.

    Rows sharing the last start of a batch are held back and prepended to the next batch, so that every range
    that might close at or before a row's start (a zero-length range at the same start) is in the same batch
    as that row or an earlier one.
    """

    def __init__(self) -> None:
        self.pending: dict[str, np.ndarray] | None = None  # held-back rows (one thread, one start)
        self.thread: int | None = None  # thread the carry belongs to
        self.carry = np.empty(0, dtype=np.int64)  # sorted ends of earlier ranges still open

    def feed(self, batch: pa.RecordBatch):
        cols = {name: batch.column(name).to_numpy(zero_copy_only=False)
                for name in ("rid", "thread", "start_ns", "end_ns")}
        if self.pending is not None:
            cols = {k: np.concatenate((self.pending[k], cols[k])) for k in cols}
            self.pending = None
        n = len(cols["rid"])
        if n == 0:
            return
        # Hold back the trailing rows that share the last (thread, start): the next batch may hold more.
        same = (cols["thread"] == cols["thread"][-1]) & (cols["start_ns"] == cols["start_ns"][-1])
        others = np.flatnonzero(~same)  # the equal rows are the sorted batch's trailing run
        tail = int(others[-1]) + 1 if len(others) else 0
        if tail == 0:
            self.pending = cols
            return
        if tail < n:
            self.pending = {k: v[tail:] for k, v in cols.items()}
            cols = {k: v[:tail] for k, v in cols.items()}
        yield from self._walk(cols)

    def finish(self):
        if self.pending is not None:
            cols, self.pending = self.pending, None
            yield from self._walk(cols)

    def _walk(self, cols: dict[str, np.ndarray]):
        thread, start, end = cols["thread"], cols["start_ns"], cols["end_ns"]
        cuts = np.flatnonzero(thread[1:] != thread[:-1]) + 1
        bounds = np.concatenate(([0], cuts, [len(thread)]))
        depth = np.empty(len(thread), dtype=np.int32)
        for lo, hi in zip(bounds[:-1], bounds[1:]):
            if thread[lo] != self.thread:
                self.thread, self.carry = int(thread[lo]), np.empty(0, dtype=np.int64)
            s, e = start[lo:hi], end[lo:hi]
            ends = np.sort(e)
            # this run's ranges opened before each row, minus those of them closed by its start ...
            closed_before = np.searchsorted(ends, s, side="right") - _zero_length_from_here(s, e)
            # ... plus earlier batches' ranges still open at its start (carried ends beyond it)
            open_earlier = len(self.carry) - np.searchsorted(self.carry, s, side="right")
            depth[lo:hi] = np.arange(hi - lo) - closed_before + open_earlier
            # what stays open after this run's last start
            merged = np.concatenate((self.carry, ends))
            merged.sort()
            self.carry = merged[merged > s[-1]]
        yield cols["rid"], depth


def _zero_length_from_here(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per row: zero-length ranges at its start from this row on (itself included) in the sorted order.

    A count of ends <= start includes them, but they are not opened before the row (they sort after it, or
    are the row itself), so they must not be subtracted from its opened-before count. Zero-length ranges sort
    last among equal starts (longer first), so they form the tail of each run of equal starts.
    """
    n = len(start)
    zero = (end == start).astype(np.int64)
    from_here = np.cumsum(zero[::-1])[::-1]  # zero-length rows at index >= i
    run_end = np.searchsorted(start, start, side="right")  # start is sorted within one thread
    after_run = np.concatenate((from_here, [0]))[run_end]
    return from_here - after_run if n else zero
