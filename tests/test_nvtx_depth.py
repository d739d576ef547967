"""The NVTX depth pass (nsight_advisor/ingest/nvtx_depth.py) against a stack walk, across batch boundaries.

The real exports are checked in test_ingest_nsys.py; here hypothesis draws nestings the exports lack (equal
starts, zero-length ranges, many threads, a batch boundary inside a run of equal starts) and the batch size is
shrunk to a few rows so that the carried state between batches is exercised on every example.
"""

from __future__ import annotations

import os

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nsight_advisor.ingest import nvtx_depth


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


def _pass(rows, tmp_path, batch_rows: int):
    con = duckdb.connect()
    table = pa.table({"rid": list(range(len(rows))), "thread": [r[0] for r in rows],
                      "start_ns": [r[1] for r in rows], "end_ns": [r[2] for r in rows]},
                     schema=pa.schema([("rid", pa.int64()), ("thread", pa.int64()), ("start_ns", pa.int64()),
                                       ("end_ns", pa.int64())]))
    con.register("ranges", table)
    out = tmp_path / f"depth-{os.getpid()}-{len(rows)}-{batch_rows}.parquet"
    old = nvtx_depth.BATCH_ROWS
    nvtx_depth.BATCH_ROWS = batch_rows
    try:
        nvtx_depth.write_depths(con, "SELECT * FROM ranges", out)
    finally:
        nvtx_depth.BATCH_ROWS = old
    got = pq.read_table(out).to_pydict()
    out.unlink()
    depth = dict(zip(got["rid"], got["depth"]))
    assert sorted(depth) == list(range(len(rows))), "every range gets exactly one depth"
    return [depth[i] for i in range(len(rows))]


@settings(max_examples=60, deadline=None)
@given(rows=nested_threads(), batch_rows=st.sampled_from([1, 2, 3, 7, 1000]))
def test_depth_matches_stack_walk_at_any_batch_size(rows, batch_rows, tmp_path_factory) -> None:
    tmp_path = tmp_path_factory.mktemp("depth")
    assert _pass(rows, tmp_path, batch_rows) == _stack_walk(rows)


def test_zero_length_ranges_sharing_a_start_across_a_batch_boundary(tmp_path) -> None:
    # Three ranges start at 10 on one thread: the outer [10, 50] and two zero-length marks-as-ranges. With
    # batches of 2 rows the run of equal starts is split; the held-back rows must still see each other.
    rows = [(0, 0, 100), (0, 10, 50), (0, 10, 10), (0, 10, 10), (0, 20, 30), (0, 60, 70)]
    assert _pass(rows, tmp_path, 2) == _stack_walk(rows) == [0, 1, 2, 2, 2, 1]


def test_empty_input_writes_an_empty_file(tmp_path) -> None:
    assert _pass([], tmp_path, 3) == []


@pytest.mark.parametrize("batch_rows", [1, 4])
def test_threads_do_not_share_their_stacks(tmp_path, batch_rows) -> None:
    rows = [(1, 0, 100), (2, 5, 6), (1, 5, 6), (2, 0, 3)]
    assert _pass(rows, tmp_path, batch_rows) == [0, 0, 1, 0]
