"""The interval arithmetic of the analysis layer, through the rules and the report summary, against plain Python.

The time partition (views/31_time_partition.sql) is one sorted pass with running counts; sync-stall,
h2d-transfer-volume and the summary's GPU busy time read it. Here random small timelines, with ties, overlaps,
nested and zero-length intervals on purpose, must give exactly what the obvious definition gives.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from nsight_advisor.engine.rules import load_rules
from nsight_advisor.engine.runner import bind_params
from nsight_advisor.store.database import connect, insert_api_calls, insert_kernels

RULES = {r.name: r for r in load_rules([], include_builtin=True)}
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# (device_id, pid, start_ns, length_ns): small ranges so that equal starts and ends are common
intervals = st.lists(st.tuples(st.integers(0, 1), st.integers(1, 2), st.integers(0, 40), st.integers(0, 12)),
                     max_size=12)


def _store(kernels=(), memcpys=(), memsets=(), api_calls=()):
    con = connect(None)
    for i, (dev, pid, start, length) in enumerate(kernels):
        insert_kernels(con, [dict(capture_id=1, device_id=dev, pid=pid, correlation_id=i, name="k", short_name="k",
                                  start_ns=start, end_ns=start + length, duration_ns=length)])
    for dev, pid, start, length, direction in memcpys:
        con.execute("insert into memcpys (capture_id, device_id, pid, start_ns, end_ns, duration_ns, bytes, direction) "
                    "values (1, ?, ?, ?, ?, ?, 1024, ?)", [dev, pid, start, start + length, length, direction])
    for dev, pid, start, length in memsets:
        con.execute("insert into memsets (capture_id, device_id, pid, start_ns, end_ns, duration_ns, bytes) "
                    "values (1, ?, ?, ?, ?, ?, 64)", [dev, pid, start, start + length, length])
    for pid, tid, api, start, end in api_calls:
        insert_api_calls(con, [dict(capture_id=1, pid=pid, tid=tid, name=api, base_name=api, start_ns=start,
                                    end_ns=end, duration_ns=end - start)])
    con.execute("insert into captures (capture_id, source_name, format, tool, tool_version, start_ns, end_ns, "
                "duration_ns) values (1, 'case', 'case', 'case', 'case', 0, 100, 100)")
    return con


def _rule_rows(con, name: str) -> list[dict]:
    rule = RULES[name]
    cur = con.execute(rule.query, bind_params(rule, rule.query, 1))
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r)) for r in cur.fetchall()]


def _union(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[list[int]] = []
    for a, b in sorted(spans):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return [(a, b) for a, b in merged]


def _covered(union: list[tuple[int, int]], a: int, b: int) -> int:
    return sum(max(0, min(b, y) - max(a, x)) for x, y in union)


def _gaps(ops: list[tuple[int, int, int, int]], scale: int = 1) -> dict[int, list[tuple[int, int]]]:
    """Per device, the idle stretches of the analysis window (first operation's start to last one's end, over all
    devices): the window less the union of the device's operations."""
    spans = [(d, s * scale, (s + n) * scale) for d, _p, s, n in ops]
    w0, w1 = min(s for _, s, _ in spans), max(e for _, _, e in spans)
    out = {}
    for dev in {d for d, _, _ in spans}:
        t, gaps = w0, []
        for a, b in _union([(s, e) for d, s, e in spans if d == dev and e > s]):
            if a > t:
                gaps.append((t, a))
            t = max(t, b)
        if t < w1:
            gaps.append((t, w1))
        out[dev] = gaps
    return out


@SETTINGS
@given(kernels=intervals,
       copies=st.lists(st.tuples(st.integers(0, 1), st.integers(0, 45), st.integers(0, 15)), min_size=1, max_size=8))
def test_h2d_exposed_time_matches_the_union_of_kernels(kernels, copies):
    # exposed = the time a device runs host-to-device copies and no kernel: the union of its copies less the
    # union of its kernels (two copies at once are one stretch of wall time, not two)
    con = _store(kernels=kernels, memcpys=[(d, 1, s, n, "Host-to-Device") for d, s, n in copies])
    try:
        got = {r["device_id"]: (r["copies"], r["exposed_ns"]) for r in _rule_rows(con, "h2d-transfer-volume")}
    finally:
        con.close()
    want = {}
    for dev in {d for d, _, _ in copies}:
        kernel_union = _union([(s, s + n) for d, _, s, n in kernels if d == dev and n > 0])
        copy_union = _union([(s, s + n) for d, s, n in copies if d == dev and n > 0])
        exposed = sum((b - a) - _covered(kernel_union, a, b) for a, b in copy_union)
        want[dev] = (sum(1 for d, _, _ in copies if d == dev), exposed)
    assert got == want


@SETTINGS
@given(ops=intervals,
       syncs=st.lists(st.tuples(st.integers(1, 2), st.integers(0, 50), st.integers(1, 10)), min_size=1, max_size=6))
# a 10 us gap after a kernel the synchronization waited for: its relaunch, found by CI's run of this test
@example(ops=[(0, 1, 24, 12), (0, 1, 37, 0)], syncs=[(1, 36, 1)])
def test_sync_stall_bubbles_match_the_definition(ops, syncs):
    # Times in units of 10 us, so that gaps reach the 20 us below which a gap is launch latency. A gap of a
    # device is a sync bubble (docs/impact.md) when a synchronization call of a process using the device was
    # blocked as the device ran dry and returned inside the gap (a gap under 20 us too: the relaunch it exposed),
    # or, for a gap of 20 us or more, the calls sat in half of it; each gap counts once, however many calls. Half
    # of the operations are kernels, the rest copies: the rule treats them alike.
    unit = 10_000
    kernels = [(d, p, s * unit, n * unit) for d, p, s, n in ops[::2]]
    copies = [(d, p, s * unit, n * unit, "Device-to-Host") for d, p, s, n in ops[1::2]]
    calls = [(pid, pid, "cudaStreamSynchronize", (end - length) * unit, end * unit) for pid, end, length in syncs]
    con = _store(kernels=kernels, memcpys=copies, api_calls=calls)
    try:
        rows = _rule_rows(con, "sync-stall")
    finally:
        con.close()
    got_idle: dict = {}
    for r in rows:
        got_idle[r["device_id"]] = got_idle.get(r["device_id"], 0) + r["gpu_idle_after_ns"]
        assert r["calls"] == sum(1 for p, *_ in calls if p == r["pid"])
    want_idle: dict = {}
    if ops:
        users = {(d, p) for d, p, _s, _n in ops}
        for dev, gaps in _gaps(ops, unit).items():
            mine = [(start, end) for p, _t, _a, start, end in calls if (dev, p) in users]
            for g0, g1 in gaps:
                waited = any(start <= g0 <= end < g1 for start, end in mine)
                if g1 - g0 < 20_000:  # a short gap only when the call returned in it: the relaunch it exposed
                    if waited:
                        want_idle[dev] = want_idle.get(dev, 0) + (g1 - g0)
                    continue
                sat = sum(max(0, min(end, g1) - max(start, g0)) for start, end in mine
                          if start < g1 and end >= g0)
                if waited or sat >= (g1 - g0) / 2:
                    want_idle[dev] = want_idle.get(dev, 0) + (g1 - g0)
    assert got_idle == want_idle


@SETTINGS
@given(kernels=intervals, memsets=st.lists(st.tuples(st.integers(0, 1), st.integers(1, 2), st.integers(0, 40),
                                                      st.integers(0, 12)), max_size=4))
def test_summary_busy_pieces_tile_the_union(kernels, memsets):
    from nsight_advisor.analysis import summary

    con = _store(kernels=kernels, memsets=memsets)
    try:
        con.execute("create or replace temp table _summary_ids as select 1 as capture_id")
        busy = summary._busy_by_capture(con)
        pieces = con.execute("select device_id, start_ns, end_ns from _summary_islands "
                             "order by device_id, start_ns").fetchall()
    finally:
        con.close()
    want_ns = 0
    for dev in (0, 1):
        # zero-length intervals are left out
        union = _union([(s, s + n) for d, _, s, n in list(kernels) + list(memsets) if d == dev and n > 0])
        mine = [(a, b) for d, a, b in pieces if d == dev]
        assert all(a < b for a, b in mine)
        assert all(b <= c for (_, b), (c, _) in zip(mine, mine[1:])), "pieces overlap"
        assert _union(mine) == union
        want_ns += sum(b - a for a, b in union)
    if pieces:
        assert int(busy[1]["busy_ns"]) == want_ns
        assert busy[1]["active_devices"] == len({d for d, *_ in pieces})
    else:
        assert busy == {}


@pytest.mark.parametrize("name", ["memory-bound-kernel", "low-tensor-core-use"])
def test_classified_rules_sum_launches_per_name(name):
    """Names are classified after summing launches: counts and times must be those of every launch."""
    gemm = "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x256x8_stage3_warpsize1x4x1_ffma_execute_kernel"
    con = connect(None)
    try:
        con.execute("insert into gpus (capture_id, device_id, name, sm_count) values (1, 0, 'g', 2), (1, 1, 'g', 2)")
        rows = [(0, "vectorized_elementwise_kernel", 8, 100), (1, "vectorized_elementwise_kernel", 8, 50),
                (0, "vectorized_elementwise_kernel", 1, 70),  # one block on two SMs: latency-bound, left out
                (0, gemm, 64, 400), (1, gemm, 64, 200)]
        for i, (dev, kname, blocks, dur) in enumerate(rows):
            insert_kernels(con, [dict(capture_id=1, device_id=dev, pid=1, correlation_id=i, name=kname, short_name=kname,
                                      blocks=blocks, start_ns=i * 1000, end_ns=i * 1000 + dur, duration_ns=dur)])
        con.execute("insert into captures (capture_id, source_name, format, tool, tool_version, start_ns, end_ns, "
                    "duration_ns) values (1, 'case', 'case', 'case', 'case', 0, 5000, 5000)")
        got = [(r["short_name"], int(r["launches"]), int(r["duration_ns"])) for r in _rule_rows(con, name)]
    finally:
        con.close()
    if name == "memory-bound-kernel":
        assert got == [("vectorized_elementwise_kernel", 2, 150)]
    else:
        assert got == [(gemm, 2, 600)]
