"""NVTX ranges projected onto the GPU (views/33_nvtx_projection.sql) against a direct computation.

The reference below reads the stored tables (nvtx_ranges, api_calls, kernel_rows, memcpys, memsets) and rebuilds
the projection its own way: a stack walk per thread and domain for the paths, a binary search over each thread's
launches sorted by time for the operations a range holds, and a union of intervals in Python for the busy time.
"""

from __future__ import annotations

import bisect
import re
from collections import defaultdict
from pathlib import Path

import pytest

from nsight_advisor import workflow
from nsight_advisor.store.database import connect
from conftest import TRACES

#: The captures in ../shared/traces known to hold NVTX ranges (the test finds every one and checks these are among them).
NVTX_CAPTURES = {"nsys_ai_h100_2gpu_1s.sqlite", "nsys_ai_mfu_2gpu_before.sqlite", "nsys_ai_mfu_2gpu_after.sqlite",
                 "fuser_h200_matmul.sqlite", "memfusion.sqlite", "hta_ddp_v100_rank1.json.gz",
                 "v100_rank0.pt.trace.json.gz", "alexnet_trace.json.gz"}


def _captures() -> list[Path]:
    if not TRACES.exists():
        return []
    return sorted((TRACES / "nsys").glob("*.sqlite")) + sorted((TRACES / "kineto").rglob("*.json.gz"))


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    paths = _captures()
    if not paths:
        pytest.skip(f"real traces not present at {TRACES}")
    path = tmp_path_factory.mktemp("nvtx") / "store.duckdb"
    workflow.ingest_to_store(paths, path)
    con = connect(path)
    yield con
    con.close()


def _name(text: str) -> str:
    """PyTorch's emit_nvtx per-call numbers and the profiler's step number left out."""
    text = text.split(", seq = ")[0].split(", op_id = ")[0].split(", sizes = ")[0].split(", input_op_ids = ")[0]
    return "ProfilerStep" if re.fullmatch(r"ProfilerStep#\d+", text) else text


def _reference(con, cid: int) -> dict[tuple[str, str], tuple[int, int, int]]:
    """(domain, path) -> (ranges holding work, operations, summed per-range union of their GPU intervals)."""
    ranges = con.execute("""
        select pid, tid, domain, text, start_ns, end_ns, coalesce(depth, 0), event_type::varchar from nvtx_ranges
        where capture_id = ? and event_type <> 'mark' and tid is not null and pid is not null and end_ns > start_ns
        """, [cid]).fetchall()
    # the first (outermost) call of each correlation id launched the operation
    calls = {}
    for pid, tid, corr, start in con.execute("""
            select pid, tid, correlation_id, start_ns from api_calls
            where capture_id = ? and correlation_id is not null and correlation_id <> 0 and tid is not null""",
                                             [cid]).fetchall():
        if (pid, corr) not in calls or start < calls[(pid, corr)][1]:
            calls[(pid, corr)] = (tid, start)
    launches = defaultdict(list)  # (pid, tid) -> [(launch_ns, start, end)]
    for table in ("kernel_rows", "memcpys", "memsets"):
        for pid, corr, start, end in con.execute(
                f"select pid, correlation_id, start_ns, end_ns from {table} where capture_id = ?", [cid]).fetchall():
            call = calls.get((pid, corr))
            if call is not None:
                launches[(pid, call[0])].append((call[1], start, end))
    for ops in launches.values():
        ops.sort()

    def held(pid, tid, start, end):
        ops = launches.get((pid, tid), [])
        lo = bisect.bisect_left(ops, (start,))
        hi = bisect.bisect_left(ops, (end,))
        return ops[lo:hi]

    def busy(ops):
        total, reach_start, reach_end = 0, None, None
        for _, s, e in sorted(ops, key=lambda o: (o[1], o[2])):
            if reach_end is None or s > reach_end:
                if reach_end is not None:
                    total += reach_end - reach_start
                reach_start, reach_end = s, e
            else:
                reach_end = max(reach_end, e)
        return total + (0 if reach_end is None else reach_end - reach_start)

    out: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0, 0])
    threads = defaultdict(list)
    for pid, tid, domain, text, start, end, depth, kind in ranges:
        if kind == "start_end":
            ops = held(pid, tid, start, end)
            if ops:
                acc = out[(domain, _name(text))]
                acc[0] += 1; acc[1] += len(ops); acc[2] += busy(ops)
            continue
        threads[(pid, tid, domain)].append((start, -end, depth, text))
    for (pid, tid, domain), rows in threads.items():
        stack: list[tuple[int, str]] = []  # (end, path) of the open ranges
        for start, neg_end, _depth, text in sorted(rows):
            while stack and stack[-1][0] <= start:
                stack.pop()
            path = f"{stack[-1][1]}/{_name(text)}" if stack else _name(text)
            stack.append((-neg_end, path))
            ops = held(pid, tid, start, -neg_end)
            if ops:
                acc = out[(domain, path)]
                acc[0] += 1; acc[1] += len(ops); acc[2] += busy(ops)
    return {k: tuple(v) for k, v in out.items()}


@pytest.mark.slow
def test_projected_gpu_time_per_path_matches_a_direct_computation(store):
    captures = store.execute("""
        select capture_id, source_name from captures
        where capture_id in (select capture_id from nvtx_ranges where event_type <> 'mark')""").fetchall()
    names = {name for _, name in captures}
    assert NVTX_CAPTURES <= names, NVTX_CAPTURES - names
    checked = 0
    for cid, name in captures:
        view = {(domain, path): (int(n), int(ops), int(busy)) for domain, path, n, ops, busy in store.execute("""
            select domain, path, count(*), sum(ops), sum(gpu_busy_ns) from nvtx_gpu_projection
            where capture_id = ? group by all""", [cid]).fetchall()}
        expected = _reference(store, cid)
        assert view == expected, name
        checked += bool(expected)
    # the named captures all hold GPU work under their ranges
    assert checked >= len(NVTX_CAPTURES)


@pytest.mark.slow
def test_projection_rows_are_consistent(store):
    bad = store.execute("""
        select count(*) from nvtx_gpu_projection
        where ops < 1 or gpu_busy_ns > gpu_span_ns or gpu_busy_ns > gpu_ops_ns or kernels > ops
           or gpu_span_ns < 0 or (depth = 0) <> (path = name)""").fetchone()[0]
    assert bad == 0


@pytest.mark.slow
def test_pytorch_paths_read_naturally(store):
    # hta_ddp_v100_rank1: the optimizer's record_function ranges hold its kernels; ProfilerStep#N steps hold the
    # step's work, each step a path of its own (their texts differ by number)
    rows = dict(store.execute("""
        select p.path, sum(p.ops) from nvtx_gpu_projection p join captures c using (capture_id)
        where c.source_name = 'hta_ddp_v100_rank1.json.gz' group by all""").fetchall())
    assert rows.get("Optimizer.step#SGD.step", 0) > 0
    assert rows.get("ProfilerStep", 0) > 0 and not any(k.startswith("ProfilerStep#") for k in rows)
    nested = store.execute("""
        select count(*) from nvtx_gpu_projection p join captures c using (capture_id)
        where c.source_name = 'nsys_ai_h100_2gpu_1s.sqlite' and depth > 0 and path like '%/%'""").fetchone()[0]
    assert nested > 0
