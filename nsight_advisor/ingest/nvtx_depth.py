"""Nesting depth of NVTX push/pop ranges, computed while the ranges stream into the store.

Push/pop ranges on one thread nest like a stack, so a range's depth is the number of ranges on its thread that
were opened before it (in start order; at equal starts the longer one is the outer one) and are still open at
its start (end > its start): what a stack walk finds for properly nested ranges. tests/test_nvtx_depth.py
checks that against a stack walk on drawn nestings, tests/test_ingest_nsys.py on the real exports.

:class:`DepthStream` takes Arrow batches and gives them back with a ``depth`` column. It needs each thread's
ranges in start order *across* batches, in any order within one: Nsight Systems writes NVTX_EVENTS in start
order per thread (every real export in ../shared/traces), so the export is read as it lies, with no sort, and
the batches go straight into the store's INSERT. An export that breaks the order raises
:class:`NotStartOrdered`; the caller then streams the rows again sorted by DuckDB (which spills to disk when they
do not fit its memory limit). Why not SQL: over the 4.9M ranges of a 1M-kernel export, window functions (two
sorts and an ASOF join) took about 19 s; a sort, this walk and a join back on row id about 9 s (the join alone
6.6 s); this stream, insert included, 5.5 to 6.8 s, most of it DuckDB handing the rows to Arrow and writing
them (docs/performance.md).

Within a batch, each thread's ranges are sorted with numpy; the opens before a row are then its index and the
closes before it a binary search. Between batches the state per thread is ``carry``, the ends of its ranges
still open after its last walked start (for nested ranges the open stack: a handful of values), so memory stays
flat in the export's size.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from typing import Iterable, Iterator

import numpy as np
import pyarrow as pa

from nsight_advisor.ingest.arrow_buffers import bools, int_array, ints, rows_where

#: Rows per batch streamed from the export; a batch costs its Arrow columns plus about 40 bytes per row of numpy.
BATCH_ROWS = 250_000



class NotStartOrdered(Exception):
    """Some thread's nestable ranges came out of start order across batches: sort them and stream again."""


class DepthStream:
    """Adds an INT32 ``depth`` column to streamed batches: the nesting depth of nestable rows, NULL for others.

    Input batches carry ``thread`` (any BIGINT key of the range's thread), ``start_ns``, ``end_ns`` and
    ``nestable`` (BOOLEAN: a push/pop range with a valid start and end, the rows that get a depth); other
    columns pass through untouched.

    Rows that share their thread's last start in a batch are held back until the next batch, since more rows at
    that start may follow; otherwise rows come back in their order. :meth:`batches` gives every row back once.
    """

    def __init__(self) -> None:
        self.pending: pa.Table | None = None  # held-back rows: per thread, those at its last start
        self.carry: dict[int, np.ndarray] = {}  # thread -> sorted ends of its ranges still open
        self.last_start: dict[int, int] = {}  # thread -> its last walked start

    def output_schema(self, schema: pa.Schema) -> pa.Schema:
        """The schema of the batches :meth:`batches` yields for input batches of ``schema``."""
        return schema.append(pa.field("depth", pa.int32()))

    def batches(self, source: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """Every row of ``source`` once, with its depth. Raises NotStartOrdered (see the class)."""
        for batch in source:
            table = pa.Table.from_batches([batch])
            if self.pending is not None:
                table, self.pending = pa.concat_tables([self.pending, table]), None
            yield from self._feed(table, final=False)
        if self.pending is not None:
            table, self.pending = self.pending, None
            yield from self._feed(table, final=True)

    def _feed(self, table: pa.Table, *, final: bool) -> Iterator[pa.RecordBatch]:
        nestable = bools(table.column("nestable"))  # NULL: not nestable
        rows = np.flatnonzero(nestable)
        depth = np.zeros(table.num_rows, dtype=np.int32)
        keep = np.ones(table.num_rows, dtype=bool)  # rows given back now (the others are held back)
        if len(rows):
            every = len(rows) == table.num_rows  # usual: every row a push/pop range, no gather needed
            thread, start, end = (_ints(table, name) if every else _ints(table, name)[rows]
                                  for name in ("thread", "start_ns", "end_ns"))
            order, thread, start, end = _by_thread(thread, start, end)  # per thread: start, longer range first
            rows = rows[order]
            cuts = np.flatnonzero(thread[1:] != thread[:-1]) + 1
            bounds = np.concatenate(([0], cuts, [len(thread)]))
            for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
                key = int(thread[lo])
                if key in self.last_start and start[lo] <= self.last_start[key]:
                    raise NotStartOrdered(f"thread {key}: a range starting at {start[lo]} came after one at "
                                          f"{self.last_start[key]}")
                if not final:  # hold back the rows at this thread's last start: the next batch may hold more
                    held = lo + int(np.searchsorted(start[lo:hi], start[hi - 1], side="left"))
                    keep[rows[held:hi]] = False
                    hi = held
                if hi > lo:
                    depth[rows[lo:hi]] = self._walk(key, start[lo:hi], end[lo:hi])
        column = int_array(depth, pa.int32(), valid=nestable)
        # In the input's order. The held-back rows lie near the end of a batch: the rows before the first of them
        # go out as a slice (no copy); only the tail is filtered (a copy of every column, text included).
        held = np.flatnonzero(~keep)
        cut = int(held[0]) if len(held) else table.num_rows
        if cut:
            yield from table.slice(0, cut).append_column("depth", column.slice(0, cut)).to_batches()
        if len(held):
            tail, tail_keep = table.slice(cut), keep[cut:]
            self.pending = rows_where(tail, ~tail_keep, copy=True)  # held: not the whole batch behind it
            kept = rows_where(tail.append_column("depth", column.slice(cut)), tail_keep)
            if kept.num_rows:
                yield from kept.to_batches()

    def _walk(self, key: int, start: np.ndarray, end: np.ndarray) -> np.ndarray:
        """Depths of one thread's ranges (sorted by start, longer first), updating its carry."""
        carry = self.carry.get(key, np.empty(0, dtype=np.int64))
        ends = np.sort(end)
        # ranges of this run opened before each row, minus those of them closed by its start ...
        closed_before = np.searchsorted(ends, start, side="right") - _zero_length_from_here(start, end)
        # ... plus earlier batches' ranges still open at its start (carried ends beyond it)
        open_earlier = len(carry) - np.searchsorted(carry, start, side="right")
        depth = (np.arange(len(start)) - closed_before + open_earlier).astype(np.int32)
        # what stays open after this run's last start
        merged = np.concatenate((carry, ends))
        merged.sort()
        self.carry[key] = merged[merged > start[-1]]
        self.last_start[key] = int(start[-1])
        return depth


def prefetched(batches: Iterator[pa.RecordBatch], ahead: int = 2, name: str = "nvtx-depth") -> Iterator[pa.RecordBatch]:
    """``batches``, produced on a thread of their own (called ``name``) up to ``ahead`` batches in advance.

    The ingest chains two: one thread has DuckDB read the export into Arrow, one walks the depths, while the
    consumer (DuckDB's insert, pulling through Arrow) writes the batch before; with the GIL released in DuckDB
    and numpy, the three overlap. An error on either side ends both: the producer's is raised here, and a
    consumer that stops pulling (or closes this generator) stops the producer, whose thread is joined before
    ``close`` returns.
    """
    items: queue.Queue = queue.Queue(maxsize=ahead)
    stop = threading.Event()
    done = object()

    def produce() -> None:
        try:
            for batch in batches:
                while not stop.is_set():
                    try:
                        items.put(batch, timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            items.put(done)
        except BaseException as exc:  # handed to the consumer, which raises it
            items.put(exc)

    worker = threading.Thread(target=produce, name=name, daemon=True)
    worker.start()
    try:
        while True:
            item = items.get()
            if item is done:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        while worker.is_alive():  # unblock a producer waiting on a full queue, then wait for it
            with contextlib.suppress(queue.Empty):
                items.get(timeout=0.1)
        worker.join()


def _by_thread(thread: np.ndarray, start: np.ndarray, end: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The permutation sorting rows by thread, then start, then longer first (stable: ties keep their order),
    and the three columns in that order.

    Nsight Systems writes each thread's rows in start order, so grouping by thread usually sorts them: a
    stable sort on the thread alone (none for one thread), checked, costs a fifth of the full three-key sort
    it falls back to.
    """
    if len(thread) and (thread == thread[0]).all():
        order = np.arange(len(thread))
    else:
        order = np.argsort(thread, kind="stable")
        thread, start, end = thread[order], start[order], end[order]
    same = thread[1:] == thread[:-1]
    step = np.diff(start)
    if np.any(same & ((step < 0) | ((step == 0) & (end[1:] > end[:-1])))):
        again = np.lexsort((-end, start, thread))  # stable, and ties are still in input order
        order, thread, start, end = order[again], thread[again], start[again], end[again]
    return order, thread, start, end


def _ints(table: pa.Table, name: str) -> np.ndarray:
    return ints(table.column(name))


def _zero_length_from_here(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per row: zero-length ranges at its start from this row on (itself included) in the sorted order.

    A count of ends <= start includes them, but they are not opened before the row (they sort after it, or
    are the row itself), so they must not be subtracted from its opened-before count. Zero-length ranges sort
    last among equal starts (longer first), so they form the tail of each run of equal starts.
    """
    n = len(start)
    zero = (end == start).astype(np.int64)
    if not zero.any():  # the usual case; the binary search below is a fifth of the walk's time
        return zero
    from_here = np.cumsum(zero[::-1])[::-1]  # zero-length rows at index >= i
    run_end = np.searchsorted(start, start, side="right")  # start is sorted within one thread
    after_run = np.concatenate((from_here, [0]))[run_end]
    return from_here - after_run if n else zero
