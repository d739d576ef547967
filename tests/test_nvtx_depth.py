"""The NVTX depth walk (nsight_advisor/ingest/nvtx_depth.py) against a stack walk, across batch boundaries.

The real exports are checked in test_ingest_nsys.py; here hypothesis draws nestings the exports lack (equal
starts, zero-length ranges, many threads, a batch boundary inside a run of equal starts) and the batch size is
shrunk to a few rows so that the state carried between batches is exercised on every example. Rows are fed in
both orders the ingest uses: as an export lies (start order per thread, threads interleaved, equal starts in any
order) and sorted per thread by DuckDB.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nsight_advisor.ingest import nvtx_depth
from nsight_advisor.ingest.arrow_buffers import bools


def _nested(draw, lo: int, hi: int, budget: list[int], out: list[tuple[int, int]]) -> None:
    """Draw properly nested ranges inside [lo, hi] (siblings in order, children inside their parent)."""
    t = lo
    while budget[0] > 0 and t <= hi and draw(st.booleans()):
        start = draw(st.integers(t, hi))
        end = draw(st.integers(start, min(hi, start + 20)))
        budget[0] -= 1
        out.append((start, end))
        _nested(draw, start, end, budget, out)
        t = end  # the next sibling may start where this one ended (end <= start counts as closed)


@st.composite
def nested_threads(draw):
    rows = []
    for thread in range(draw(st.integers(1, 3))):
        ranges: list[tuple[int, int]] = []
        _nested(draw, 0, 60, [draw(st.integers(0, 25))], ranges)
        rows += [(thread, s, e) for s, e in ranges]
    return draw(st.permutations(rows))  # the pass must not rely on input order


def _stack_walk(rows):
    """Depth by walking each thread's ranges in (start, longer first, row) order with a stack of open ends."""
    depth = {}
    order = sorted(range(len(rows)), key=lambda i: (rows[i][0], rows[i][1], -rows[i][2], i))
    stacks: dict[int, list[int]] = {}
    for i in order:
        thread, start, end = rows[i]
        stack = stacks.setdefault(thread, [])
        while stack and stack[-1] <= start:
            stack.pop()
        depth[i] = len(stack)
        stack.append(end)
    return [depth[i] for i in range(len(rows))]


_SCHEMA = pa.schema([("rid", pa.int64()), ("thread", pa.int64()), ("start_ns", pa.int64()), ("end_ns", pa.int64()),
                     ("nestable", pa.bool_())])


def _export_order(rows) -> list[int]:
    """Start order, threads interleaved, equal starts in the (drawn) order they come: how nsys writes them."""
    return sorted(range(len(rows)), key=lambda i: rows[i][1])


def _sorted_order(rows) -> list[int]:
    """What the fallback's ORDER BY thread, start_ns, end_ns DESC gives."""
    return sorted(range(len(rows)), key=lambda i: (rows[i][0], rows[i][1], -rows[i][2]))


def _pass(rows, batch_rows: int, order=_export_order, nestable=None):
    """Depth per row (None where not nestable) from DepthStream fed ``rows`` in ``order``, ``batch_rows`` at a time."""
    nestable = nestable or [True] * len(rows)
    idx = order(rows)
    table = pa.table({"rid": idx, "thread": [rows[i][0] for i in idx], "start_ns": [rows[i][1] for i in idx],
                      "end_ns": [rows[i][2] for i in idx], "nestable": [nestable[i] for i in idx]}, schema=_SCHEMA)
    stream = nvtx_depth.DepthStream()
    depth: dict[int, int | None] = {}
    for batch in stream.batches(table.to_batches(max_chunksize=batch_rows)):
        assert batch.schema == stream.output_schema(_SCHEMA)
        for rid, d in zip(batch.column("rid").to_pylist(), batch.column("depth").to_pylist()):
            assert rid not in depth, "every row comes back once"
            depth[rid] = d
    assert sorted(depth) == list(range(len(rows))), "every row comes back"
    return [depth[i] for i in range(len(rows))]


@settings(max_examples=60, deadline=None)
@given(rows=nested_threads(), batch_rows=st.sampled_from([1, 2, 3, 7, 1000]))
def test_depth_matches_stack_walk_in_export_order_at_any_batch_size(rows, batch_rows) -> None:
    assert _pass(rows, batch_rows) == _stack_walk(rows)


@settings(max_examples=60, deadline=None)
@given(rows=nested_threads(), batch_rows=st.sampled_from([1, 2, 3, 7, 1000]))
def test_depth_matches_stack_walk_sorted_per_thread_at_any_batch_size(rows, batch_rows) -> None:
    assert _pass(rows, batch_rows, order=_sorted_order) == _stack_walk(rows)


def test_zero_length_ranges_sharing_a_start_across_a_batch_boundary() -> None:
    # Three ranges start at 10 on one thread: the outer [10, 50] and two zero-length marks-as-ranges. With
    # batches of 2 rows the run of equal starts is split; the held-back rows must still see each other.
    rows = [(0, 0, 100), (0, 10, 50), (0, 10, 10), (0, 10, 10), (0, 20, 30), (0, 60, 70)]
    assert _pass(rows, 2) == _stack_walk(rows) == [0, 1, 2, 2, 2, 1]


def test_the_outer_range_may_come_second_at_an_equal_start() -> None:
    # The export may write a child before its parent when both start at the same nanosecond, even in
    # different batches: the child is held back with the parent's start and sorted after it.
    rows = [(0, 10, 20), (0, 10, 50), (0, 30, 40)]
    assert _pass(rows, 1, order=lambda r: [0, 1, 2]) == [1, 0, 1]


def test_rows_that_do_not_nest_get_no_depth_and_do_not_count() -> None:
    rows = [(0, 0, 100), (0, 5, 5), (0, 10, 20)]  # a mark inside the range
    assert _pass(rows, 1, nestable=[True, False, True]) == [0, None, 1]


def test_empty_input_gives_no_rows() -> None:
    assert _pass([], 3) == []


@pytest.mark.parametrize("batch_rows", [1, 4])
def test_threads_do_not_share_their_stacks(batch_rows) -> None:
    rows = [(1, 0, 100), (2, 5, 6), (1, 5, 6), (2, 0, 3)]
    assert _pass(rows, batch_rows) == [0, 0, 1, 0]


@pytest.mark.parametrize("batch_rows", [1, 2])
def test_a_thread_going_back_in_time_across_batches_is_reported(batch_rows) -> None:
    rows = [(0, 10, 20), (0, 30, 40), (0, 5, 50)]
    with pytest.raises(nvtx_depth.NotStartOrdered):
        _pass(rows, batch_rows, order=lambda r: [0, 1, 2])


def test_going_back_within_one_batch_is_sorted_out() -> None:
    rows = [(0, 10, 20), (0, 30, 40), (0, 5, 50)]
    assert _pass(rows, 3, order=lambda r: [0, 1, 2]) == _stack_walk(rows) == [1, 1, 0]


def test_prefetched_gives_every_batch_in_order() -> None:
    batches = [pa.record_batch([pa.array([i])], names=["x"]) for i in range(10)]
    assert [b.column(0)[0].as_py() for b in nvtx_depth.prefetched(iter(batches), ahead=2)] == list(range(10))


def test_prefetched_raises_the_producers_error() -> None:
    def broken():
        yield pa.record_batch([pa.array([1])], names=["x"])
        raise nvtx_depth.NotStartOrdered("thread 1")

    got = []
    with pytest.raises(nvtx_depth.NotStartOrdered):
        for batch in nvtx_depth.prefetched(broken()):
            got.append(batch)
    assert len(got) == 1


def test_a_consumer_that_stops_early_stops_the_producer() -> None:
    import threading

    produced = []

    def endless():
        while True:
            produced.append(1)
            yield pa.record_batch([pa.array([len(produced)])], names=["x"])

    stream = nvtx_depth.prefetched(endless(), ahead=2)
    next(stream)
    stream.close()  # what DuckDB's insert failing does to the Arrow stream
    assert not any(t.name == "nvtx-depth" for t in threading.enumerate())
    assert len(produced) <= 4  # one consumed, two queued, one waiting to be queued


@settings(max_examples=200, deadline=None)
@given(rows=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 30), st.integers(0, 30)), max_size=40),
       by_start=st.booleans())
def test_the_cheap_thread_order_is_the_full_sort(rows, by_start) -> None:
    """Grouping by thread (the fast path for rows already in start order per thread) gives lexsort's order."""
    import numpy as np

    if by_start:  # as an export lies: start order per thread; equal starts in any order
        rows = sorted(rows, key=lambda r: r[1])
    thread, start, end = (np.array([r[i] for r in rows], dtype=np.int64) for i in range(3))
    expected = np.lexsort((-end, start, thread))
    order, *columns = nvtx_depth._by_thread(thread, start, end)
    assert order.tolist() == expected.tolist()
    assert [c.tolist() for c in columns] == [c[expected].tolist() for c in (thread, start, end)]


def test_chained_stages_close_in_order_and_pass_errors_on() -> None:
    """How the ingest chains a reading stage and a walking stage: closing both, in order, joins both threads."""
    import threading

    def reading():
        for i in range(100):
            yield pa.record_batch([pa.array([i])], names=["x"])

    reads = nvtx_depth.prefetched(reading(), name="test-read")
    walks = nvtx_depth.prefetched((b for b in reads), name="test-walk")
    assert next(walks).column(0)[0].as_py() == 0
    for stage in (walks, reads):
        stage.close()
    assert not any(t.name in ("test-read", "test-walk") for t in threading.enumerate())

    def failing():
        yield pa.record_batch([pa.array([1])], names=["x"])
        raise nvtx_depth.NotStartOrdered("thread 7")

    reads = nvtx_depth.prefetched(failing(), name="test-read")
    with pytest.raises(nvtx_depth.NotStartOrdered, match="thread 7"):
        list(nvtx_depth.prefetched((b for b in reads), name="test-walk"))
    reads.close()
    assert not any(t.name in ("test-read", "test-walk") for t in threading.enumerate())


def test_booleans_unpack_from_bits_at_any_offset() -> None:
    """``nestable`` is read from Arrow's bit-packed buffer; slices start inside a byte, NULL reads as False."""
    import numpy as np

    values = [True, None, False, True, True, False, None, True, False, True, True]
    column = pa.chunked_array([pa.array(values[:3]), pa.array(values).slice(3, 5), pa.array(values).slice(8)])
    assert bools(column).tolist() == [bool(v) for v in values]
    assert bools(pa.chunked_array([], type=pa.bool_())).dtype == np.bool_
