"""The step graph, its replay, critical path and what-if (analysis/step_graph.py, replay.py, critical_path.py, whatif.py).

Synthetic stores whose answers are known by construction (times in µs, written as ``us(...)``), then the real
traces: the DLRM ranks' critical paths tile their steps; a kernel stretched 1.3x with
../shared/tools/stretch_nsys.py and the what-if "that kernel 1.3x faster" gives back the original's step time.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from nsight_advisor.analysis.critical_path import critical_path, map_steps, slack
from nsight_advisor.analysis.replay import replay
from nsight_advisor.analysis.group_quantile import group_quantile
from nsight_advisor.analysis.step_graph import build_graph
from nsight_advisor.engine.whatif import kernel_ops
from nsight_advisor.store.database import insert_api_calls, insert_kernels

TRACES = Path(__file__).resolve().parent.parent.parent / "shared" / "traces"
STRETCH = TRACES.parent / "tools" / "stretch_nsys.py"
US = 1000


def us(x: float) -> int:
    return int(x * US)


def _call(con, cid, corr, name, start, end, tid=11):
    insert_api_calls(con, [{"capture_id": cid, "pid": 1, "tid": tid, "correlation_id": corr, "name": name,
                            "base_name": name, "kind": "runtime", "start_ns": us(start), "end_ns": us(end),
                            "duration_ns": us(end) - us(start)}])


def _kernel(con, cid, corr, name, stream, start, end):
    insert_kernels(con, [{"capture_id": cid, "device_id": 0, "stream_id": stream, "pid": 1, "correlation_id": corr,
                          "start_ns": us(start), "end_ns": us(end), "duration_ns": us(end) - us(start),
                          "name": name, "short_name": name}])


def _step_saving(con, ids, kernel: str, speedup: float, only_capture=None) -> dict[int, float]:
    """Per capture: the step (first op start to last op end) before less after the kernel is made faster."""
    g = build_graph(con, ids)
    base = replay(g)
    assert np.array_equal(base[0], g.ops["start_ns"]), "an unchanged replay gives back the recorded starts"
    assert np.array_equal(base[1], g.ops["end_ns"]), "... and the recorded ends"
    mask = kernel_ops(g, kernel)
    if only_capture is not None:
        mask &= g.ops["capture_id"] == only_capture
    assert mask.any()
    after = replay(g, own_scale=np.where(mask, 1 / speedup, 1.0))
    out = {}
    for cid in ids:
        mine = g.ops["capture_id"] == cid
        span = [(int(g.ops["start_ns"][mine].min()), int(g.ops["end_ns"][mine].max()))]
        out[cid] = map_steps(g, cid, span, base)[0] - map_steps(g, cid, span, after)[0]
    return out


def test_overlapped_kernel_saves_nothing(memory_store):
    # host: launch A, launch B, then cudaDeviceSynchronize until both streams are done (A ends last, at 1000)
    con = memory_store
    _call(con, 1, 1, "cudaLaunchKernel", 0, 5)
    _call(con, 1, 2, "cudaLaunchKernel", 5, 10)
    _call(con, 1, 3, "cudaDeviceSynchronize", 12, 1005)
    _kernel(con, 1, 1, "long_a", 7, 10, 1000)      # 990 µs on stream 7
    _kernel(con, 1, 2, "short_b", 8, 15, 515)      # 500 µs on stream 8, wholly under A
    saving = _step_saving(con, [1], "short_b", 2.0)
    assert saving[1] == 0  # B is off the critical path: halving it saves nothing
    # halving A (990 -> 495 µs, ending at 505) leaves the step waiting for B (ends at 515): 1000 - 515 = 485 µs
    assert _step_saving(con, [1], "long_a", 2.0)[1] == us(485)


def test_serial_chain_saves_the_time_removed(memory_store):
    # three kernels queued back to back on one stream, the host ahead of them, one sync at the end
    con = memory_store
    for k in range(3):
        _call(con, 1, k + 1, "cudaLaunchKernel", 5 * k, 5 * k + 4)
    _call(con, 1, 9, "cudaStreamSynchronize", 16, 415)
    _kernel(con, 1, 1, "k1", 7, 10, 110)
    _kernel(con, 1, 2, "k2", 7, 111, 311)
    _kernel(con, 1, 3, "k3", 7, 312, 410)
    assert _step_saving(con, [1], "k2", 2.0)[1] == us(100)  # 200 µs -> 100 µs: the step is 100 µs shorter
    g = build_graph(con, [1])
    path = critical_path(g, 0, us(415), 1)
    assert sum(s["end_ns"] - s["start_ns"] for s in path) == us(415)  # the path tiles the step
    on_path = {g.ops["name"][s["op"]] for s in path if s["what"] == "kernel"}
    assert on_path == {"k1", "k2", "k3"}
    assert slack(g)[kernel_ops(g, "k2")].max() == 0


def test_launches_stalled_on_a_full_queue_return_as_the_gpu_frees_it(memory_store):
    # ten 100 µs kernels back to back on one stream; the queue holds two waiting kernels: the first three launches
    # take 5 µs, each later one returns 2 µs after the kernel three ahead of it ends, then a synchronization
    con = memory_store
    returned = 15
    for k in range(10):
        end = 5 * k + 5 if k < 3 else 10 + 100 * (k - 2) + 2  # kernel k - 3 ends at 10 + 100 * (k - 2)
        _call(con, 1, k + 1, "cudaLaunchKernel", 5 * k if k < 3 else returned, end)
        returned = end
        _kernel(con, 1, k + 1, "step_kernel", 7, 10 + 100 * k, 110 + 100 * k)
    _call(con, 1, 11, "cudaDeviceSynchronize", 712, 1012)
    g = build_graph(con, [1])
    stalled = np.flatnonzero((g.ops["name"] == "cudaLaunchKernel") & (g.wait_pred >= 0)).tolist()
    assert len(stalled) == 7  # the launches of the 4th to 10th kernel waited for the 1st to 7th to end
    # twice as fast, the kernels free the queue twice as fast: the host launches the last kernel at 362 µs instead
    # of 712, and the synchronization returns 2 µs after the last kernel ends at 510: every microsecond of kernel
    # time removed is saved (with the launches' recorded durations kept, 295 µs: the host's own timeline)
    assert _step_saving(con, [1], "step_kernel", 2.0)[1] == us(1012 - 512)


def _rank(con, cid, rank, compute_end):
    """One rank: a compute kernel, then an all-reduce on the NCCL stream that waits for it (an event wait), then a
    sync. The all-reduce transfers for 100 µs after the last rank arrives at 510 µs."""
    con.execute("insert into capture_distributed (capture_id, rank, world_size, backend) values (?, ?, 2, 'nccl')",
                [cid, rank])
    _call(con, cid, 1, "cudaLaunchKernel", 0, 5)
    _call(con, cid, 2, "cudaLaunchKernel", 6, 8)
    _call(con, cid, 3, "cudaStreamSynchronize", 9, 617)
    _kernel(con, cid, 1, "gemm", 7, 10, compute_end)
    _kernel(con, cid, 2, "ncclDevKernel_AllReduce_Sum_f32", 20, compute_end + 2, 612)


def test_group_quantile_equals_pandas_per_group():
    # the stalled-call threshold's 5% quantile per call name, in one sort: equal to pandas' (and numpy's) to the bit
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(7)
    for q in (0.05, 0.5, 0.95, 0.0, 1.0, 0.8289626115560034):
        for _ in range(50):
            n = int(rng.integers(1, 300))
            group = rng.integers(0, int(rng.integers(1, 25)), n)
            values = rng.integers(0, 10**8, n)
            ids = pd.Series(group).groupby(group).ngroup().to_numpy(np.int64)
            expected = pd.Series(values).groupby(ids).transform(lambda d: d.quantile(q)).to_numpy(np.float64)
            assert np.array_equal(group_quantile(ids, values, q), expected)


def test_late_rank_gates_the_collective_saving_on_both(memory_store):
    con = memory_store
    _rank(con, 1, 0, 110)   # rank 0 arrives at 112 µs and waits 400 µs
    _rank(con, 2, 1, 510)   # rank 1 computes 500 µs and arrives last, at 512 µs
    saving = _step_saving(con, [1, 2], "gemm", 2.0, only_capture=2)
    # rank 1's gemm 500 -> 250 µs: it arrives 250 µs earlier, and both ranks' all-reduce ends 250 µs earlier
    assert saving == {1: us(250), 2: us(250)}
    # rank 0's own gemm gates nothing: rank 0 waits for rank 1 anyway
    assert _step_saving(con, [1, 2], "gemm", 2.0, only_capture=1) == {1: 0, 2: 0}
    g = build_graph(con, [1, 2])
    path = critical_path(g, 0, us(617), 1)
    ranks = {int(g.ops["capture_id"][s["op"]]) for s in path if s["op"] is not None}
    assert ranks == {1, 2}  # rank 0's path runs through rank 1's gemm
    assert sum(s["end_ns"] - s["start_ns"] for s in path) == us(617)


def test_exposed_communication_hides_the_transfer_after_the_last_rank_arrived(memory_store):
    # the two ranks above; rank 1 also runs a kernel on stream 8 from 490 to 540 µs, which overlaps the first 28 µs
    # of the all-reduce's transfer (512 to 612 µs, after rank 1 arrived)
    from types import SimpleNamespace

    from nsight_advisor.engine.finding_fixes import comm_fix

    con = memory_store
    _rank(con, 1, 0, 110)
    _rank(con, 2, 1, 510)
    _call(con, 2, 4, "cudaLaunchKernel", 8.2, 8.8)
    _kernel(con, 2, 4, "side", 8, 490, 540)
    g = build_graph(con, [1, 2])
    exposed = SimpleNamespace(capture_id=2, device_id=0, internal={"comm": "exposed"})
    change = comm_fix(con, g, exposed)
    nccl = np.flatnonzero(np.array([str(n).startswith("nccl") for n in g.ops["name"]]) & (g.ops["capture_id"] == 2))
    # the transfer keeps the 28 µs the side kernel hid; rank 0's 400 µs wait for rank 1 is not the transfer's
    assert change["own_scale"][nccl].tolist() == pytest.approx([0.28])
    after = replay(g, **change)
    saved = {}
    for cid in (1, 2):
        span = [(-g.t0 + g.offsets.get(cid, 0), us(617) - g.t0 + g.offsets.get(cid, 0))]
        saved[cid] = map_steps(g, cid, span, replay(g))[0] - map_steps(g, cid, span, after)[0]
    # rank 1's all-reduce ends at 540 with the side kernel, its synchronization returns 5 µs later: 617 -> 545;
    # rank 0's copy of the collective still transfers for 100 µs (fixed on every rank, both would save)
    assert saved == {1: 0, 2: us(72)}
    # a rule claiming the waits for a late rank is not replayed
    from nsight_advisor.engine.finding_fixes import fix_of

    wait = SimpleNamespace(capture_id=2, device_id=0, internal={"part": "comm", "comm": "wait"})
    assert fix_of(con, g, wait, {}) is None


def test_ranks_waiting_for_each_other_save_only_when_fixed_together(memory_store):
    # both ranks compute 500 µs before the all-reduce: either one's gemm made twice as fast alone saves nothing
    # (the other rank still arrives at 512 µs); both together save 250 µs of each rank's step
    from nsight_advisor.engine.whatif import combine_changes

    con = memory_store
    _rank(con, 1, 0, 510)
    _rank(con, 2, 1, 510)
    assert _step_saving(con, [1, 2], "gemm", 2.0, only_capture=1) == {1: 0, 2: 0}
    assert _step_saving(con, [1, 2], "gemm", 2.0, only_capture=2) == {1: 0, 2: 0}
    g = build_graph(con, [1, 2])
    base = replay(g)
    gemm, cids = kernel_ops(g, "gemm"), g.ops["capture_id"]
    one = [{"own_scale": np.where(gemm & (cids == c), 0.5, 1.0)} for c in (1, 2)]
    both = replay(g, **combine_changes(one))
    for c in (1, 2):
        mine = cids == c
        span = [(int(g.ops["start_ns"][mine].min()), int(g.ops["end_ns"][mine].max()))]
        assert map_steps(g, c, span, base)[0] - map_steps(g, c, span, both)[0] == us(250)
    merged = combine_changes([{"drop_wait": np.array([True, False])}, {"drop_wait": np.array([False, False])},
                              {"own_scale": np.array([0.5, 1.0])}, {"own_scale": np.array([0.5, 0.8])}])
    assert merged["drop_wait"].tolist() == [True, False] and merged["own_scale"].tolist() == [0.25, 0.8]


def _proc_call(con, pid, corr, name, start, end):
    insert_api_calls(con, [{"capture_id": 1, "pid": pid, "tid": pid, "correlation_id": corr, "name": name,
                            "base_name": name, "kind": "runtime", "start_ns": us(start), "end_ns": us(end),
                            "duration_ns": us(end) - us(start)}])


def _proc_kernel(con, pid, corr, name, start, end):
    insert_kernels(con, [{"capture_id": 1, "device_id": pid - 1, "stream_id": 7, "pid": pid, "correlation_id": corr,
                          "start_ns": us(start), "end_ns": us(end), "duration_ns": us(end) - us(start),
                          "name": name, "short_name": name}])


def test_gpus_driven_by_processes_of_their_own_save_each_their_own(memory_store):
    # one capture, two processes, each driving its own GPU through three steps of a launch, a 100 µs kernel and a
    # synchronization; the capture's steps are GPU 1's (its kernel sequence, started 40 µs later: 50 to 410 µs).
    # They hold two of GPU 0's kernels whole (130-230, 250-350; the first started at 10): halved, those shorten
    # GPU 0's part of the steps by 100 µs, though GPU 1's operations, which the capture's steps move with, do not
    # move.
    from nsight_advisor.analysis.critical_path import device_units
    from nsight_advisor.engine.fix_replays import saved_ns as _saved
    from nsight_advisor.engine.whatif import StepModel

    con = memory_store
    for pid, t0 in ((1, 0), (2, 40)):
        for k in range(3):
            at = t0 + 120 * k
            _proc_call(con, pid, 2 * k + 1, "cudaLaunchKernel", at, at + 5)
            _proc_kernel(con, pid, 2 * k + 1, "gemm", at + 10, at + 110)
            _proc_call(con, pid, 2 * k + 2, "cudaStreamSynchronize", at + 6, at + 112)
    g = build_graph(con, [1])
    units = device_units(g, 1)
    assert len(units) == 2 and not (units[0] & units[1]).any()
    steps = {1: [(us(50 + 120 * k), us(50 + 120 * (k + 1))) for k in range(3)]}  # GPU 1's kernels start them
    model = StepModel(g, steps, {1: "kernel sequence"}, base=replay(g))
    on_gpu0 = kernel_ops(g, "gemm") & (g.ops["device_id"] == 0)
    halved = replay(g, own_scale=np.where(on_gpu0, 0.5, 1.0))
    assert _saved(model, model.totals(), halved) == 0  # measured on the capture's one step definition
    model.units = {1: units}
    assert _saved(model, model.totals(), halved) == us(100)  # measured on each GPU's own operations
    # and each GPU's critical paths walked from its own operations: GPU 0's kernels hold a share of GPU 0's paths,
    # none of GPU 1's (a process of its own, no collective between them)
    from nsight_advisor.engine.path_share import step_paths

    paths = step_paths(g, steps, model.base, model.units)
    change = {"own_scale": np.where(on_gpu0, 0.5, 1.0)}
    assert paths.share_pct(1, change, 0) >= 40 and paths.share_pct(1, change, 1) == 0
    assert step_paths(g, steps, model.base).share_pct(1, change, 0) < paths.share_pct(1, change, 0)


def test_a_dropped_synchronization_saves_no_more_than_the_gpu_work_allows(memory_store):
    # the host launches a 990 µs kernel, waits for it in a synchronization, then polls an event: dropping the wait
    # lets the host finish at once, but the step's GPU work still ends at 1000 µs (not at the poll's new end)
    con = memory_store
    _call(con, 1, 1, "cudaLaunchKernel", 0, 5)
    _kernel(con, 1, 1, "long_a", 7, 10, 1000)
    _call(con, 1, 2, "cudaStreamSynchronize", 6, 1002)
    _call(con, 1, 3, "cudaEventQuery", 1003, 1008)
    g = build_graph(con, [1])
    base = replay(g)
    dropped = replay(g, drop_wait=(g.ops["name"] == "cudaStreamSynchronize"))
    span = [(0, us(1008))]
    assert map_steps(g, 1, span, base)[0] - map_steps(g, 1, span, dropped)[0] == us(8)  # 1008 -> 1000
    # steps the host marked end as its calls do: there the host's own time is the step
    assert map_steps(g, 1, span, base, on_host=True)[0] - map_steps(g, 1, span, dropped, on_host=True)[0] > us(900)


def _copy(con, corr, direction, start, end):
    con.execute("insert into memcpys (capture_id, device_id, stream_id, pid, correlation_id, start_ns, end_ns, "
                "duration_ns, bytes, direction) values (1, 0, 7, 1, ?, ?, ?, ?, 1048576, ?)",
                [corr, us(start), us(end), us(end) - us(start), direction])


def _warm_up(con):
    # twenty launches before, each kernel 5 µs after its launch's start and 2 µs after the previous kernel: the
    # capture's typical launch and stream lags (g.typical) are 5 and 2 µs
    for k in range(20):
        _call(con, 1, 100 + k, "cudaLaunchKernel", -1000 + 10 * k, -996 + 10 * k)
        _kernel(con, 1, 100 + k, "warm", 7, -995 + 10 * k, -987 + 10 * k)


def _staged_fix(con, gaps_us):
    from types import SimpleNamespace

    from nsight_advisor.engine.finding_fixes import idle_fix

    g = build_graph(con, [1])
    assert g.typical == {"launch": us(5), "stream": us(2)}
    finding = SimpleNamespace(capture_id=1, device_id=0)
    return g, idle_fix(g, finding, [(us(lo), us(hi), "host-copy") for lo, hi in gaps_us])


def test_staged_copies_made_asynchronous_run_back_to_back(memory_store):
    # four synchronous copies from pageable memory, 40 µs calls 1 µs apart, each copy (20 µs) starting 1 µs after
    # its call returned (the host staged it first): the GPU idles 20 µs between copies. Then a kernel launch, the
    # kernel after the last copy (185-235 µs) and a synchronization to 237 µs.
    con = memory_store
    _warm_up(con)
    for k in range(4):
        _call(con, 1, k + 1, "cudaMemcpy", 41 * k, 41 * k + 40)
        _copy(con, k + 1, "Host-to-Device", 41 * k + 41, 41 * k + 61)
    _call(con, 1, 5, "cudaLaunchKernel", 164, 169)
    _kernel(con, 1, 5, "k", 7, 185, 235)
    _call(con, 1, 6, "cudaDeviceSynchronize", 170, 237)
    # the finding's host-copy gaps: from the first call to the first copy and between the copies (the calls reach
    # past their ends)
    g, change = _staged_fix(con, [(0, 41), (61, 82), (102, 123), (143, 164)])
    after = replay(g, **change)
    span = [(-g.t0, us(237) - g.t0)]
    # made asynchronous from pinned memory, each call takes a launch's time (5 µs; calls at 0, 6, 12, 18 µs) and
    # each copy starts as its launch and stream allow: 5-25, 27-47, 49-69, 71-91 µs; the launch at 24 µs, the
    # kernel 1 µs after the last copy (its recorded stream lag) at 92-142, and the synchronization returns 2 µs
    # after it: the step ends at 144 µs instead of 237
    assert map_steps(g, 1, span, replay(g))[0] - map_steps(g, 1, span, after)[0] == us(237 - 144)
    copies = np.flatnonzero(g.ops["kind"] == 2)
    assert after[0][copies].tolist() == [us(t) - g.t0 for t in (5, 27, 49, 71)]


def test_a_staged_copy_to_the_host_is_still_waited_for(memory_store):
    # a synchronous copy to pageable memory: the call (100-160 µs) waits for its copy (105-145) and then copies
    # the data out of the staging buffer (15 µs, the GPU idle); a kernel launched after it
    con = memory_store
    _warm_up(con)
    _call(con, 1, 1, "cudaMemcpy", 100, 160)
    _copy(con, 1, "Device-to-Host", 105, 145)
    _call(con, 1, 2, "cudaLaunchKernel", 161, 166)
    _kernel(con, 1, 2, "k", 7, 171, 221)
    _call(con, 1, 3, "cudaDeviceSynchronize", 167, 222)
    g, change = _staged_fix(con, [(145, 171)])
    call = int(np.flatnonzero(g.ops["name"] == "cudaMemcpy")[0])
    assert not change["drop_wait"][call] and change["wait_lag_scale"][call] == 0
    after = replay(g, **change)
    # the call returns as its copy ends (145 µs: the host needs the data), 15 µs sooner, and the host's 1 µs of
    # work in the gap before the launch goes with the gap: the launch at 145, the kernel 10 µs after it, the
    # synchronization 1 µs after the kernel: 16 µs saved
    assert after[1][call] == us(145) - g.t0
    span = [(us(100) - g.t0, us(222) - g.t0)]
    assert map_steps(g, 1, span, replay(g))[0] - map_steps(g, 1, span, after)[0] == us(16)


def test_a_copy_finding_hides_the_exposed_part_of_its_copies(memory_store):
    # stream 7: kernel A (10-100 µs), a host-to-device copy (100-300) and kernel B (300-400), then a
    # synchronization to 402; kernel C on stream 8 (150-250) overlaps half the copy; a device-to-host copy on
    # stream 9 (120-140) lies under nothing but is another direction
    from types import SimpleNamespace

    from nsight_advisor.engine.finding_fixes import copy_fix

    con = memory_store
    _call(con, 1, 1, "cudaLaunchKernel", 0, 5)
    _kernel(con, 1, 1, "a", 7, 10, 100)
    _call(con, 1, 2, "cudaMemcpyAsync", 5, 9)
    _copy(con, 2, "Host-to-Device", 100, 300)
    _call(con, 1, 3, "cudaLaunchKernel", 9, 14)
    _kernel(con, 1, 3, "b", 7, 300, 400)
    _call(con, 1, 4, "cudaLaunchKernel", 14, 19)
    _kernel(con, 1, 4, "c", 8, 150, 250)
    _call(con, 1, 5, "cudaMemcpyAsync", 19, 22)
    _copy(con, 5, "Device-to-Host", 120, 140)
    con.execute("update memcpys set stream_id = 9 where correlation_id = 5")
    _call(con, 1, 6, "cudaDeviceSynchronize", 22, 402)
    g = build_graph(con, [1])
    h2d = SimpleNamespace(capture_id=1, device_id=0, internal={"copies": ("h2d",)})
    change = copy_fix(g, h2d)
    copies = np.flatnonzero(g.ops["kind"] == 2)
    # the host-to-device copy keeps the half a kernel overlapped; the other direction is untouched
    assert sorted(change["own_scale"][copies].tolist()) == [0.5, 1.0]
    span = [(-g.t0, us(402) - g.t0)]
    # the copy ends at 200 instead of 300, B runs 200-300, the synchronization returns at 302
    assert map_steps(g, 1, span, replay(g))[0] - map_steps(g, 1, span, replay(g, **change))[0] == us(100)
    # no directions named (a user's copy rule without impact_copies), or none of them copied: not modeled
    assert copy_fix(g, SimpleNamespace(capture_id=1, device_id=0, internal={})) is None
    assert copy_fix(g, SimpleNamespace(capture_id=1, device_id=0, internal={"copies": ("other",)})) is None


def test_a_rule_on_both_ranks_of_a_real_job_is_replayed_fixed_on_both():
    # nsys_ai_mfu_2gpu_before: two ranks that meet at collectives; the host gaps of each rank's GPU, closed on one
    # rank alone, save 7.4 and 3.3 ms; closed on both, more than either
    from rules_real import findings

    _need_traces()
    found = findings("nsys/nsys_ai_mfu_2gpu_before.sqlite", "gpu-idle-gap")
    assert sorted(f.device_id for f in found) == [0, 1]
    together = {f.saving_all_ranks_ns for f in found}
    assert len(together) == 1 and together.pop() > max(f.saving_ns for f in found)
    single = findings("nsys/nsys_ai_mfu_2gpu_before.sqlite", "startup-cost")  # fires on GPU 0 only
    assert single and all(f.saving_all_ranks_ns is None for f in single)


def test_a_kernel_fix_alone_takes_off_its_own_claim_not_its_settled_share():
    # nsu_v100_openacc: main_46_gpu and main_41_gpu run one block of one thread. small-grid and
    # block-size-not-multiple-of-32 each claim nearly all of their time, so the settlement gives each about half;
    # fixed alone, each takes off its own claim, and the steps (the kernels back to back) shrink by about that
    _need_traces()
    from rules_real import analyzed

    result, _ = analyzed("nsys/nsu_v100_openacc.sqlite")
    found = {f.rule_name: f for f in result.findings
             if f.rule_name in ("small-grid", "block-size-not-multiple-of-32")}
    assert len(found) == 2
    window = sum(f.impact_ns for f in found.values())
    for f in found.values():
        own = sum(ns for _kernel, ns in f.internal["device_claims"][f.device_id])
        assert f.impact_ns < 0.55 * own  # its settled share: about half of what it claims
        assert 0.95 * own <= f.saving_ns <= 1.02 * own  # replayed alone: what it claims
        assert f.saving_ns <= window
    from nsight_advisor.report import render

    html, md = render(result, "html"), render(result, "md")
    assert html.count("It saves more than it costs") == 2 and md.count("That is more than it costs") == 2
    # a finding whose saving is below its impact gets no such note (a copy: the analysis is shared by other tests)
    import copy

    alone = copy.copy(result)
    alone.findings = [f for f in result.findings if f.rule_name == "sync-stall"]
    assert alone.findings and "more than it costs" not in render(alone, "md")


def test_a_handoff_to_another_thread_is_on_the_path(memory_store):
    # the caller's thread (11) launches, then waits 1 ms while the autograd thread (12) launches the backward pass,
    # as PyTorch's backward() does; it resumes 20 µs after that thread's last call and launches the optimizer
    con = memory_store
    _call(con, 1, 1, "cudaLaunchKernel", 0, 5, tid=11)
    for k in range(5):  # 15 µs after the handoff, a 5 µs launch every 240 µs: 20 .. 985
        _call(con, 1, 10 + k, "cudaLaunchKernel", 20 + 240 * k, 25 + 240 * k, tid=12)
        _kernel(con, 1, 10 + k, f"bwd{k}", 7, 30 + 240 * k, 35 + 240 * k)
    _call(con, 1, 2, "cudaLaunchKernel", 1005, 1010, tid=11)
    _call(con, 1, 3, "cudaStreamSynchronize", 1011, 1030, tid=11)
    _kernel(con, 1, 1, "fwd", 7, 10, 15)
    _kernel(con, 1, 2, "opt", 7, 1015, 1025)
    # a watchdog thread (13) quiet from before the handoff to after it: the burst fits its quiet time too, but the
    # caller's calls come between, so nothing was handed to it
    _call(con, 1, 30, "cudaEventQuery", -100, -99, tid=13)
    _call(con, 1, 31, "cudaEventQuery", 1012, 1013, tid=13)
    g = build_graph(con, [1])
    corr, tids = g.ops["correlation_id"], g.ops["tid"]
    call = {int(c): i for i, c in enumerate(corr) if g.ops["kind"][i] == 0}
    assert g.pred[call[10], 0] == call[1] and g.lag[call[10], 0] == us(15)  # the burst's first call: after the caller
    assert g.pred[call[2], 0] == call[14] and g.lag[call[2], 0] == us(20)   # the caller resumes after the burst
    assert g.pred[call[31], 0] == call[30]  # the watchdog: its own thread's order
    base = replay(g)
    assert np.array_equal(base[0], g.ops["start_ns"])  # the recorded times, unchanged
    path = critical_path(g, 0, us(1030), 1, base)
    assert sum(s["end_ns"] - s["start_ns"] for s in path) == us(1030)
    on_path = {int(tids[s["op"]]) for s in path if s["op"] is not None and s["what"] in ("CUDA call", "host work")}
    assert on_path == {11, 12}  # through the other thread's calls, not 1 ms of the caller's "host work"
    # the other thread's host work halved (15 µs before its first call, 4 x 235 µs between its calls): the caller
    # resumes (15 + 4 x 235) / 2 = 477.5 µs earlier
    ns, _ne = replay(g, host_lag_scale=np.where(tids == 12, 0.5, 1.0))
    assert g.ops["start_ns"][call[2]] - ns[call[2]] == (us(15) + 4 * us(235)) / 2


def test_no_handoff_from_a_thread_busy_across_it(memory_store):
    # the other thread makes calls all along (every 200 µs, before, during and after the quiet time): its own work
    con = memory_store
    _call(con, 1, 1, "cudaLaunchKernel", 0, 5, tid=11)
    for k in range(6):
        _call(con, 1, 10 + k, "cudaEventQuery", -180 + 200 * k, 2 + 200 * k, tid=12)
    _call(con, 1, 2, "cudaLaunchKernel", 1005, 1010, tid=11)
    g = build_graph(con, [1])
    kinds, corr = g.ops["kind"], g.ops["correlation_id"]
    resumed = int(np.flatnonzero((kinds == 0) & (corr == 2))[0])
    assert g.ops["tid"][int(g.pred[resumed, 0])] == 11


def _need_traces():
    if not TRACES.exists():
        pytest.skip(f"real traces not present at {TRACES}")


def test_dlrm_critical_path_tiles_each_rank_step():
    _need_traces()
    from nsight_advisor import workflow
    from nsight_advisor.analysis.critical_path import path_summary
    from nsight_advisor.engine.whatif import step_model

    ranks = sorted((TRACES / "kineto" / "dlrm_8rank").glob("*.pt.trace.json.gz"))
    con, ids = workflow.load(ranks)
    try:
        model = step_model(con, ids)
    finally:
        con.close()
    g = model.graph
    assert np.array_equal(model.base[1], g.ops["end_ns"])
    assert sorted(model.steps) == sorted(ids)
    crossing = 0
    for cid, spans in model.steps.items():
        assert len(spans) == 1  # one ProfilerStep per rank
        (s, e), = spans
        path = critical_path(g, s, e, cid, model.base)
        assert path_summary(g, path)["length_ns"] == e - s
        assert all(a["end_ns"] == b["start_ns"] for a, b in zip(path, path[1:]))  # contiguous
        crossing += len({int(g.ops["capture_id"][x["op"]]) for x in path if x["op"] is not None}) > 1
        # backward() hands the step to the autograd engine's thread and waits: the path runs through both threads
        threads = {int(g.ops["tid"][x["op"]]) for x in path
                   if x["op"] is not None and g.kinds[x["op"]] == 0 and g.ops["capture_id"][x["op"]] == cid}
        assert len(threads) == 2
    assert crossing >= 1  # ranks waiting at a collective: their paths run into the last rank's


@pytest.mark.skipif(not STRETCH.exists(), reason=f"{STRETCH} absent")
def test_whatif_on_a_stretched_capture_predicts_the_original(tmp_path):
    _need_traces()
    from nsight_advisor import api

    source = TRACES / "nsys" / "pipit_cloverleaf_a100.sqlite"
    stretched = tmp_path / "pipit_stretched.sqlite"
    subprocess.run([sys.executable, str(STRETCH), str(source), str(stretched), "--kernel", "par_reduce_kernel",
                    "--factor", "1.3"], check=True, capture_output=True)
    original = api.whatif(source, kernel="par_reduce_kernel", speedup=1.0, store=tmp_path / "a.duckdb")
    answer = api.whatif(stretched, kernel="par_reduce_kernel", speedup=1.3, store=tmp_path / "b.duckdb")
    assert original["predicted_median_iteration_ns"] == original["median_iteration_ns"]
    assert answer["median_iteration_ns"] > original["median_iteration_ns"]  # the stretch made the step longer
    error = abs(answer["predicted_median_iteration_ns"] - original["median_iteration_ns"])
    assert error <= 0.05 * original["median_iteration_ns"]


def test_a_capped_model_replays_its_middle_steps():
    _need_traces()
    from nsight_advisor import workflow
    from nsight_advisor.engine.whatif import step_model

    con, ids = workflow.load([TRACES / "nsys" / "pipit_cloverleaf_a100.sqlite"])
    try:
        full = step_model(con, ids)
        capped = step_model(con, ids, max_ops=1500)
    finally:
        con.close()
    kept, total = capped.kept[ids[0]]
    assert total == len(full.steps[ids[0]]) == 10 and 1 <= kept < total
    assert len(capped.graph) < len(full.graph)
    assert np.array_equal(capped.base[1], capped.graph.ops["end_ns"])
    # the middle steps kept are the same steps, with the same durations
    middle = (total - kept) // 2
    assert capped.durations()[ids[0]] == full.durations()[ids[0]][middle:middle + kept]
    # a cap on steps alone keeps that many middle steps; with a cap on operations too, the smaller wins
    con, ids = workflow.load([TRACES / "nsys" / "pipit_cloverleaf_a100.sqlite"])
    try:
        four = step_model(con, ids, max_steps=4)
        both = step_model(con, ids, max_steps=4, max_ops=1500)
    finally:
        con.close()
    assert four.kept[ids[0]] == (4, 10)
    assert four.durations()[ids[0]] == full.durations()[ids[0]][3:7]
    assert both.kept[ids[0]][0] == min(4, kept)


def test_a_replay_from_the_first_change_equals_a_whole_replay():
    # the what-if replays only from the first operation it changes (analysis/replay.py): the same times as a
    # replay of the whole graph, which a graph copy without the kept unchanged replay does
    _need_traces()
    import dataclasses

    from nsight_advisor import workflow
    from nsight_advisor.analysis.replay import replay
    from nsight_advisor.engine.whatif import step_model

    con, ids = workflow.load([TRACES / "nsys" / "pipit_cloverleaf_a100.sqlite"])
    try:
        model = step_model(con, ids)
    finally:
        con.close()
    g = model.graph
    kernels = np.flatnonzero(g.kinds == 1)
    scale = np.ones(len(g))
    scale[kernels[len(kernels) // 2:]] = 0.5  # the second half of the kernels twice as fast
    lag = np.ones(len(g))
    lag[len(g) // 3:] = 0.0  # the host work of the last two thirds removed
    incremental = replay(g, own_scale=scale, host_lag_scale=lag)
    whole = replay(dataclasses.replace(g), own_scale=scale, host_lag_scale=lag)
    assert "_replay" in g.__dict__ and g.__dict__["_replay"]["base"] is not None
    assert np.array_equal(incremental[0], whole[0]) and np.array_equal(incremental[1], whole[1])
    assert not np.array_equal(whole[1], model.base[1])  # the change did change something


def test_whatif_on_two_gpus_of_their_own_answers_for_each(tmp_path):
    # nsys_ai_h100_2gpu_1s: two processes, one H100 each, no collectives; its steps are GPU 1's kernel sequence
    from nsight_advisor import api

    capture = TRACES / "nsys" / "nsys_ai_h100_2gpu_1s.sqlite"
    if not capture.exists():
        pytest.skip("nsys_ai_h100_2gpu_1s.sqlite is absent")
    answer = api.whatif(capture, kernel="gemm", speedup=2.0, store=tmp_path / "s.duckdb")
    (cap,) = answer["captures"]
    assert [g["device_id"] for g in cap["gpus"]] == [0, 1]
    assert all(g["saving_ns"] > 1_000_000 for g in cap["gpus"])  # both GPUs run the gemms: each saves its own
    assert cap["saving_ns"] == sum(g["saving_ns"] for g in cap["gpus"])
    slowest = max(cap["gpus"], key=lambda g: g["median_iteration_ns"])
    assert answer["predicted_median_iteration_ns"] == slowest["predicted_median_iteration_ns"]


def test_whatif_cli_json_and_bad_input(tmp_path):
    _need_traces()
    import json
    import os

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent),
           "NSIGHT_ADVISOR_CACHE": str(tmp_path / "cache")}
    capture = str(TRACES / "nsys" / "pipit_cloverleaf_a100.sqlite")

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "nsight_advisor", "whatif", capture, *args], env=env,
                              capture_output=True, text=True, timeout=300)

    done = cli("--kernel", "par_ranged2d_kernel", "--speedup", "2", "--format", "json")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["median_iteration_ns"] == 32_469_417  # the capture's own (captures[].iterations.median_ns)
    # par_ranged2d_kernel runs 87% of the time on a path that waits for every kernel: halved, a step loses ~40%
    assert 0.5 * answer["median_iteration_ns"] < answer["predicted_median_iteration_ns"] < answer["median_iteration_ns"]
    path = answer["captures"][0]["critical_path"]
    assert path["by_kind_ns"]["kernel"] > 0.8 * path["length_ns"]
    text = cli("--kernel", "par_ranged2d_kernel", "--speedup", "2")
    assert text.returncode == 0 and "predicted" in text.stdout
    for args, said in ((("--kernel", "no_such_kernel", "--speedup", "2"), "no kernel named"),
                       (("--kernel", "par", "--speedup", "0"), "speedup")):
        bad = cli(*args)
        assert bad.returncode == 2 and said in bad.stderr and "Traceback" not in bad.stderr


def test_reports_show_saving_beside_impact():
    from nsight_advisor.report import render
    from report_samples import hostile_result

    result = hostile_result()
    result.findings[0].saving_ns = 250_000
    html, md, data = render(result, "html"), render(result, "md"), result.to_dict()
    assert "saves 250 µs" in html and ">saving</th>" in html
    assert "**250 µs** shorter" in md
    assert data["findings"][0]["saving_ns"] == 250_000 and "saving_ns" not in data["findings"][1]
