"""The time accounting model (docs/impact.md) on every real capture, and the analysis views it stands on.

The invariants are the contract of ``captures[].accounting`` and of every finding's ``impact_ns``: each device's
parts add up to its window exactly, the idle causes add up to the idle time, the findings on one device never
claim more than its window, host-wide findings never more than the capture, and nothing at warning or error
costs nothing.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sqlite3
from collections import defaultdict
from pathlib import Path

import pytest

from nsight_advisor import workflow
from nsight_advisor.engine.model import IDLE_CAUSES
from nsight_advisor.schema.views import documented_views
from nsight_advisor.store.database import connect
from conftest import TRACES, kineto_traces, ncu_csvs, ncu_reports, nsys_exports, trace_param

FUSER = TRACES / "nsys" / "fuser_h200_matmul.sqlite"
VECADD = TRACES / "nsys" / "csc746_vecadd.sqlite"


def _analysis(path: Path, **kw) -> dict:
    result = workflow.analyze([path], use_cache=False, **kw)
    return json.loads(json.dumps(result.to_dict()))


def _check_invariants(doc: dict) -> None:
    for cap in doc["captures"]:
        windows = {}
        for a in cap["accounting"]:
            window = a["window_end_ns"] - a["window_start_ns"]
            assert window > 0
            assert a["kernel_ns"] + a["comm_ns"] + a["copy_ns"] + a["memset_ns"] + a["idle_ns"] == window, a
            assert set(a["idle_by_cause"]) == set(IDLE_CAUSES)
            assert sum(a["idle_by_cause"].values()) == a["idle_ns"], a
            assert min(a["kernel_ns"], a["comm_ns"], a["copy_ns"], a["memset_ns"], a["idle_ns"],
                       a["before_window_ns"]) >= 0
            windows[a["device_id"]] = window
        claimed = defaultdict(int)
        for f in doc["findings"]:
            if f["capture_id"] != cap["capture_id"]:
                continue
            assert f["impact_ns"] >= 0 and f["impact_ns"] <= f["claimed_ns"]
            assert not (f["impact_ns"] == 0 and f["severity"] != "info"), f["message"]
            claimed[f["device_id"]] += f["impact_ns"]
            if f["device_id"] is not None and windows:
                assert f["device_id"] in windows, f"finding on a device without accounting: {f['rule_name']}"
        for device, total in claimed.items():
            limit = windows.get(device) if device is not None else cap["duration_ns"]
            if limit is None:  # a Nsight Compute report: the profiled kernel time
                limit = cap["duration_ns"]
            assert total <= limit, f"device {device}: findings claim {total} ns of {limit}"


@pytest.mark.slow
@pytest.mark.parametrize("path", trace_param(nsys_exports()))
def test_accounting_and_impacts_hold_on_every_nsys_capture(path, isolated_cache):
    _check_invariants(_analysis(path))


def kineto_traces() -> list[Path]:
    return sorted((TRACES / "kineto").rglob("*.json.gz")) if TRACES.exists() else []


@pytest.mark.slow
@pytest.mark.parametrize("path", trace_param(kineto_traces()))
def test_accounting_and_impacts_hold_on_every_pytorch_trace(path, isolated_cache):
    doc = _analysis(path)
    assert doc["captures"][0]["accounting"], "a PyTorch trace has a timeline: every device gets a partition"
    _check_invariants(doc)


@pytest.mark.slow
@pytest.mark.parametrize("path", trace_param(ncu_reports() + ncu_csvs()))
def test_impacts_stay_within_a_reports_profiled_kernel_time(path, isolated_cache):
    if path.suffix == ".ncu-rep":
        pytest.importorskip("ncu_report")
    try:
        doc = _analysis(path)
    except Exception as exc:  # a CSV layout the ncu ingest refuses (session or summary pages) is not analysed
        if type(exc).__name__ == "InputError":
            pytest.skip(f"{path.name}: {exc}")
        raise
    assert all(cap["accounting"] == [] for cap in doc["captures"])  # no timeline, no partition
    assert all(f["impact_basis"] == "profiled kernel time" for f in doc["findings"])
    _check_invariants(doc)


@pytest.fixture
def isolated_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("NSIGHT_ADVISOR_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)


def test_fuser_gaps_are_compilation_and_startup_not_host_work(isolated_cache):
    if not FUSER.exists():
        pytest.skip(f"real traces not present at {TRACES}")
    doc = _analysis(FUSER)
    (acct,) = doc["captures"][0]["accounting"]
    # the 397 ms gap under nvFuser's NVRTC ranges, and the 66 ms one holding 15 cuLibraryLoadData calls
    assert acct["idle_by_cause"]["jit"] >= 396_815_915
    assert acct["idle_by_cause"]["startup"] >= 66_219_596
    assert acct["idle_by_cause"]["host"] < 1_000_000
    rules = [f["rule_name"] for f in doc["findings"]]
    assert rules[0] == "startup-cost" and "gpu-idle-gap" not in rules
    top = doc["findings"][0]
    assert "run-time compilation" in top["message"] and top["device_id"] == 0
    assert "DataLoader" not in top["fix"] and "data load" not in top["fix"].lower()
    before = next(f for f in doc["findings"] if f["rule_name"] == "startup-cost" and f["device_id"] is None)
    assert before["severity"] == "info" and before["impact_basis"] == "capture"


@contextlib.contextmanager
def _ingested(path: Path, tmp_path: Path):
    """A read-only connection to a store of ``path`` in ``tmp_path`` (skips where the traces are absent)."""
    if not path.exists():
        pytest.skip(f"real traces not present at {TRACES}")
    store = tmp_path / (path.stem + ".duckdb")
    workflow.ingest_to_store([path], store)
    con = connect(store, read_only=True)
    try:
        yield con
    finally:
        con.close()


def test_gaps_of_the_store_match_a_direct_computation(tmp_path):
    # the sweep's idle gaps equal the gaps between the union of operations computed here in Python
    with _ingested(VECADD, tmp_path) as con:
        ops = sorted(con.execute("select start_ns, end_ns from gpu_ops where device_id = 0 and end_ns > start_ns")
                     .fetchall())
        gaps = con.execute("select start_ns, end_ns from gpu_idle_gaps where device_id = 0 order by 1").fetchall()
        part = dict(con.execute("select part, sum(duration_ns) from gpu_time_partition where device_id = 0 "
                                "group by 1").fetchall())
    expected, busy_until = [], ops[0][1]
    for start, end in ops[1:]:
        if start > busy_until:
            expected.append((busy_until, start))
        busy_until = max(busy_until, end)
    assert gaps == expected
    assert part["idle"] == sum(e - s for s, e in expected)


def _call(con, corr, name, start, end):
    """A CUDA call of process 1, thread 11, at start..end µs."""
    from nsight_advisor.store.database import insert_api_calls

    insert_api_calls(con, [{"capture_id": 1, "pid": 1, "tid": 11, "correlation_id": corr, "name": name,
                            "base_name": name, "kind": "runtime", "start_ns": start * 1000, "end_ns": end * 1000,
                            "duration_ns": (end - start) * 1000}])


def _kernel(con, corr, start, end):
    """A kernel of process 1 on GPU 0, stream 7, at start..end µs."""
    from nsight_advisor.store.database import insert_kernels

    insert_kernels(con, [{"capture_id": 1, "device_id": 0, "stream_id": 7, "pid": 1, "correlation_id": corr,
                          "start_ns": start * 1000, "end_ns": end * 1000, "duration_ns": (end - start) * 1000,
                          "name": "k", "short_name": "k"}])


def test_a_short_gap_after_a_synchronization_returned_is_sync_not_launch(memory_store):
    # a kernel (10-100 µs) the host waits for in cudaDeviceSynchronize (returns at 102), the next launch at 104 and
    # its kernel at 112: the 12 µs gap is the relaunch the synchronization exposed. A third kernel queued behind the
    # second starts 8 µs after it with no synchronization between: launch latency
    con = memory_store
    con.execute("insert into captures (capture_id, source_path, tool) values (1, 'x', 'nsys')")

    _call(con, 1, "cudaLaunchKernel", 0, 5)
    _kernel(con, 1, 10, 100)
    _call(con, 2, "cudaDeviceSynchronize", 6, 102)
    _call(con, 3, "cudaLaunchKernel", 104, 108)
    _kernel(con, 3, 112, 200)
    _call(con, 4, "cudaLaunchKernel", 109, 111)
    _kernel(con, 4, 208, 300)
    gaps = con.execute("select start_ns, end_ns, cause, host_activity, host_api_overlap_ns from gpu_idle_gaps "
                       "order by start_ns").fetchall()
    assert gaps == [(100_000, 112_000, "sync", "cudaDeviceSynchronize", 2_000),
                    (200_000, 208_000, "launch", None, None)]


def test_a_gap_spent_in_a_synchronous_copy_is_host_copy_and_in_an_asynchronous_one_host_work(memory_store):
    # two 100 µs gaps (100-200, 300-400 µs): the first spent in a cudaMemcpy (sync-memcpy's), the second in a
    # cudaMemsetAsync that blocked 90 µs. An asynchronous call that blocks is host work the GPU waited for, claimed
    # by gpu-idle-gap and named after the call; as host-copy no rule claimed it (nsys_ai_mfu_2gpu_after's GPU 0)
    con = memory_store
    con.execute("insert into captures (capture_id, source_path, tool) values (1, 'x', 'nsys')")
    for corr, (start, end) in enumerate(((10, 100), (200, 300), (400, 500)), start=1):
        _call(con, corr, "cudaLaunchKernel", start - 5, start - 2)
        _kernel(con, corr, start, end)
    _call(con, 10, "cudaMemcpy", 105, 190)
    _call(con, 11, "cudaMemsetAsync", 305, 395)
    gaps = con.execute("select start_ns // 1000, cause, host_activity from gpu_idle_gaps where position = 'between' "
                       "order by start_ns").fetchall()
    assert gaps == [(100, "host-copy", "cudaMemcpy"), (300, "host", "cudaMemsetAsync")]


def test_calls_and_ranges_are_matched_to_every_gap_they_overlap_and_to_no_other(memory_store):
    # three 100 µs gaps on GPU 0 (100-200, 300-400, 500-600 µs). An allocation spanning the first two covers half
    # of each (allocation); one inside a busy stretch overlaps no gap; one ending where the third gap begins touches
    # it with no time. An NVTX range spans all three and another sits in the third: the innermost names it (host)
    con = memory_store
    con.execute("insert into captures (capture_id, source_path, tool) values (1, 'x', 'nsys')")

    def nvtx(text, start, end, depth):
        con.execute("insert into nvtx_rows values (1, 1, 11, 0, ?, 'push_pop', ?, ?, ?, ?, null)",
                    [text, start * 1000, end * 1000, (end - start) * 1000, depth])

    for corr, (start, end) in enumerate(((10, 100), (200, 300), (400, 500), (600, 700)), start=1):
        _call(con, corr, "cudaLaunchKernel", start - 5, start - 2)
        _kernel(con, corr, start, end)
    _call(con, 10, "cudaMalloc", 150, 350)
    _call(con, 11, "cudaFree", 220, 280)
    _call(con, 12, "cudaMalloc", 420, 500)
    nvtx("outer", 50, 650, 0)
    nvtx("busy", 210, 290, 1)
    nvtx("inner", 520, 540, 1)
    gaps = con.execute("select start_ns // 1000, cause, host_activity, host_api_overlap_ns // 1000 from gpu_idle_gaps "
                       "where position = 'between' order by start_ns").fetchall()
    assert gaps == [(100, "allocation", "cudaMalloc", 50), (300, "allocation", "cudaMalloc", 50),
                    (500, "host", "inner", 0)]


def _timeline(con, kernels, calls):
    """Kernels (start, end µs) on GPU 0, each launched 10 µs before it, and other CUDA calls (name, start, end µs)."""
    con.execute("insert into captures (capture_id, source_path, tool) values (1, 'x', 'nsys')")
    for corr, (start, end) in enumerate(kernels, start=1):
        _call(con, corr, "cudaLaunchKernel", start - 10, start - 5)
        _kernel(con, corr, start, end)
    for corr, (name, start, end) in enumerate(calls, start=1000):
        _call(con, corr, name, start, end)


def test_calls_far_from_the_gaps_in_time_are_left_out_without_changing_a_gap(memory_store):
    # gpu_idle_gaps and host_activity take only the calls that may meet a gap (buckets of 2^20 ns, 1.05 ms, around
    # the judged gaps), a superset. Gaps: 1.1-5 ms (A), 5.007-5.02 s (C, after a 5 s busy kernel). A cudaMalloc
    # ends exactly where A begins, having started in the bucket before: it touches A (no time) and names it; a
    # cudaMalloc of 15 ms starting seven buckets before C covers 8 of its 13 ms; another, long before C and after
    # A, meets neither
    con = memory_store
    _timeline(con, [(100, 1100), (5000, 5_007_000), (5_020_000, 5_021_000)],
              [("cudaMalloc", 900, 1100), ("cudaMalloc", 5_000_000, 5_015_000), ("cudaFree", 2_000_000, 2_000_300)])
    gaps = con.execute("select start_ns // 1000, cause, host_activity, host_api_overlap_ns from gpu_idle_gaps "
                       "where position = 'between' order by start_ns").fetchall()
    assert gaps == [(1100, "host", "cudaMalloc", 0), (5_007_000, "allocation", "cudaMalloc", 8_000_000)]
    host = con.execute("select start_ns // 1000, activity, cuda_api_ns, top_cuda_api from host_activity "
                       "where cause <> 'before-window' order by start_ns").fetchall()
    # A: the next kernel's launch (5 µs of 3.9 ms); C: the 8 ms of the long cudaMalloc and the launch's 5 µs
    assert host == [(1100, "unattributed", 5_000, "cudaLaunchKernel"),
                    (5_007_000, "cuda-api", 8_005_000, "cudaMalloc")]


@pytest.mark.parametrize("gap_s", [5, 1200])
def test_a_call_deep_inside_a_long_gap_still_names_it(memory_store, gap_s):
    # a gap of 5 s (its 4,800 buckets listed) and one of 20 minutes (more buckets than gpu_idle_gaps lists for a
    # GPU: every call of its GPU goes on to be matched): a 0.5 ms synchronization halfway through, shorter than a
    # bucket and far from both ends, names it
    con = memory_store
    end = 1000 + gap_s * 1_000_000
    mid = end // 2
    _timeline(con, [(100, 1000), (end, end + 1000)], [("cudaStreamSynchronize", mid, mid + 500)])
    gaps = con.execute("select start_ns // 1000, cause, host_activity, host_api_overlap_ns from gpu_idle_gaps "
                       "where position = 'between'").fetchall()
    assert gaps == [(1000, "host", "cudaStreamSynchronize", 500_000)]
    host = con.execute("select cuda_api_ns, top_cuda_api from host_activity where cause = 'host'").fetchall()
    assert host == [(505_000, "cudaStreamSynchronize")]


def test_pipit_relaunches_after_its_synchronizations_are_claimed(isolated_cache, tmp_path):
    # pipit_cloverleaf_a100 synchronizes 1,312 times (cudaDeviceSynchronize after each kernel); read from the
    # export, 1,230 of its gaps under 20 µs hold a synchronization's return (10.8 ms): they are sync-stall's now,
    # and the findings claim nearly all of the GPU's idle time
    path = TRACES / "nsys" / "pipit_cloverleaf_a100.sqlite"
    with _ingested(path, tmp_path) as con:
        short = con.execute("""
            select count(*) filter (where cause = 'sync'), count(*) filter (where cause = 'launch'),
                   count(*) filter (where cause = 'sync' and host_activity = 'cudaDeviceSynchronize')
            from gpu_idle_gaps where duration_ns < 20000""").fetchone()
        # the same from the calls themselves: a synchronization blocked when the GPU ran dry, returned in the gap
        returned = con.execute("""
            select count(distinct g.start_ns) from gpu_idle_gaps g
            join cuda_api_calls a on a.capture_id = g.capture_id and a.api_class = 'sync'
                and a.start_ns <= g.start_ns and a.end_ns >= g.start_ns and a.end_ns < g.end_ns
            where g.duration_ns < 20000""").fetchone()[0]
    assert short[0] == returned >= 1200 and short[2] == short[0] and short[1] < 100
    # the store just written, analyzed rather than the export ingested again
    (acct,) = _analysis(tmp_path / (path.stem + ".duckdb"))["captures"][0]["accounting"]
    assert acct["idle_claimed_ns"] >= 0.95 * acct["idle_ns"]


@pytest.mark.parametrize("path", trace_param(nsys_exports() + kineto_traces()))
def test_short_gaps_are_sync_exactly_where_a_synchronization_returned_in_them(path, tmp_path):
    # the view finds each synchronization's gap by 32 us buckets of time (32_idle_gaps.sql, short_sync): here an
    # interval join of every short gap with every synchronization of its device's processes that was blocked at
    # the gap's start and returned within it; the one returning last names the gap
    with _ingested(path, tmp_path) as con:
        if not con.execute("select count(*) from gpu_ops").fetchone()[0]:
            pytest.skip("nothing profiled on the GPU")
        got = con.execute("""
            select capture_id, device_id, start_ns, host_activity, host_pid, host_tid from gpu_idle_gaps
            where duration_ns < 20000 and cause = 'sync' order by all""").fetchall()
        launch = con.execute("select count(*) from gpu_idle_gaps where duration_ns < 20000 and cause = 'launch'")
        launch = launch.fetchone()[0]
        expected = con.execute("""
            with procs as (select distinct capture_id, device_id, pid from gpu_ops where pid is not null),
            syncs as (
                select a.*, p.device_id as dev from cuda_api_calls a
                join procs p on p.capture_id = a.capture_id and p.pid = a.pid
                where a.api_class = 'sync'),
            found as (
                select g.capture_id, g.device_id, g.start_ns, max(s.end_ns) as last_end,
                       list(struct_pack(n := s.base_name, p := s.pid, t := s.tid, e := s.end_ns)) as calls
                from gpu_idle_gaps g
                join syncs s on s.capture_id = g.capture_id and s.dev is not distinct from g.device_id
                    and s.start_ns <= g.start_ns and s.end_ns >= g.start_ns and s.end_ns < g.end_ns
                where g.duration_ns < 20000
                group by all)
            select capture_id, device_id, start_ns, calls, last_end from found order by all""").fetchall()
        total = con.execute("select count(*) from gpu_idle_gaps where duration_ns < 20000").fetchone()[0]
    assert [r[:3] for r in got] == [r[:3] for r in expected]
    for (*_key, name, pid, tid), (*_same, calls, last) in zip(got, expected):
        # calls returning at the same nanosecond: any of them
        assert (name, pid, tid) in [(c["n"], c["p"], c["t"]) for c in calls if c["e"] == last]
    assert len(got) + launch == total


def test_an_export_with_only_target_info_cuda_gpu_gets_its_sm_count_and_compute_capability(tmp_path):
    # nsys 2020-2021 exports describe the GPU in TARGET_INFO_CUDA_GPU (CUPTI's device record: bandwidth in kB/s,
    # clock in kHz) and have no TARGET_INFO_GPU; built here from a real export
    if not VECADD.exists():
        pytest.skip(f"real traces not present at {TRACES}")
    old = tmp_path / "old.sqlite"
    shutil.copy(VECADD, old)
    db = sqlite3.connect(old)
    db.execute("DROP TABLE TARGET_INFO_GPU")
    db.execute("CREATE TABLE TARGET_INFO_CUDA_GPU (id INTEGER, deviceId INTEGER, name TEXT, numMultiprocessors "
               "INTEGER, computeCapabilityMajor INTEGER, computeCapabilityMinor INTEGER, globalMemoryBandwidth "
               "INTEGER, globalMemorySize INTEGER, coreClockRate INTEGER, maxWarpsPerMultiprocessor INTEGER, "
               "numThreadsPerWarp INTEGER)")
    db.execute("INSERT INTO TARGET_INFO_CUDA_GPU VALUES (0, 0, 'Tesla V100-SXM2-16GB', 80, 7, 0, 898048000, "
               "16945512448, 1530000, 64, 32)")
    db.commit()
    db.close()
    store = tmp_path / "s.duckdb"
    workflow.ingest_to_store([old], store)
    con = connect(store, read_only=True)
    try:
        row = con.execute("select name, sm_count, compute_capability, memory_bandwidth_bytes_per_s, clock_rate_hz, "
                          "max_warps_per_sm from gpus").fetchall()
        missing = con.execute("select data from capture_missing where data = 'gpus'").fetchall()
    finally:
        con.close()
    assert row == [("Tesla V100-SXM2-16GB", 80, "7.0", 898048000000.0, 1530000000, 64)]
    assert missing == []


def test_gpu_option_fills_what_a_trimmed_export_leaves_unknown(isolated_cache):
    trimmed = TRACES / "nsys" / "nsys_ai_h100_2gpu_1s.sqlite"  # no TARGET_INFO_GPU: names and SMs unknown
    if not trimmed.exists():
        pytest.skip(f"real traces not present at {TRACES}")
    plain = _analysis(trimmed)
    assert any("--gpu" in n for n in plain["captures"][0]["gpu_notes"])
    told = _analysis(trimmed, gpu="H100 SXM")
    assert {(g["sm_count"], g["compute_capability"]) for g in told["captures"][0]["gpus"]} == {(132, "9.0")}
    assert "H100 SXM" in told["captures"][0]["gpu_notes"][0]


def test_window_option_narrows_the_accounting(isolated_cache):
    if not FUSER.exists():
        pytest.skip(f"real traces not present at {TRACES}")
    doc = _analysis(FUSER, window="KernelExecutor::runFusion")  # nvFuser's NVTX range around the run
    (acct,) = doc["captures"][0]["accounting"]
    assert acct["window_end_ns"] - acct["window_start_ns"] == 1167870778 - 1163840970
    assert "runFusion" in acct["window_source"]
    _check_invariants(doc)
    by_seconds = _analysis(FUSER, window="0.5:0.6")
    (acct,) = by_seconds["captures"][0]["accounting"]
    start = by_seconds["captures"][0]["start_ns"]
    assert (acct["window_start_ns"] - start, acct["window_end_ns"] - start) == (500_000_000, 600_000_000)
    _check_invariants(by_seconds)


def test_every_analysis_view_documents_every_column_it_returns():
    con = connect(None)
    try:
        views = [v for v in documented_views() if v.kind == "view"]
        assert {"gpu_ops", "cuda_api_calls", "analysis_window", "gpu_time_segments", "gpu_busy_intervals",
                "gpu_idle_gaps", "gpu_time_partition", "copy_exposure", "launch_configs"} <= {v.name for v in views}
        for view in views:
            returned = [r[0] for r in con.execute(f"select * from {view.name} limit 0").description]
            documented = [name for name, _ in view.columns]
            assert documented == returned, f"{view.name}: documented {documented}, returns {returned}"
            assert view.doc and all(doc for _, doc in view.columns), view.name
    finally:
        con.close()


def test_the_analysis_views_page_is_current():
    from conftest import REPO

    from nsight_advisor.schema.views import views_markdown

    page = REPO / "docs" / "analysis-views.md"
    assert page.read_text(encoding="utf-8") == views_markdown(), (
        "docs/analysis-views.md is stale: run `python -m tools.gen_docs`")


def test_html_shows_each_devices_partition_as_one_stacked_bar(isolated_cache):
    two_gpus = TRACES / "nsys" / "nsys_ai_mfu_2gpu_before.sqlite"
    if not two_gpus.exists():
        pytest.skip(f"real traces not present at {TRACES}")
    from nsight_advisor.report import render

    result = workflow.analyze([two_gpus], use_cache=False)
    html = render(result, "html")
    assert html.count('class="partition-bar"') == 2
    for device in result.captures[0]["accounting"]:
        kernel_pct = 100.0 * device["kernel_ns"] / (device["window_end_ns"] - device["window_start_ns"])
        assert f"GPU {device['device_id']} · analysis window" in html
        assert f"kernel: " in html and f"({kernel_pct:.1f}%)" in html
