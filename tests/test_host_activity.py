"""What the launching thread did while the GPU waited (the host_activity view, schema/views/35_host_activity.sql),
and the host-bound finding that claims that idle time (gpu-idle-gap), on the real captures.

The facts below were read by hand from the exports with sqlite3 (the SQL beside each), not from our store."""

from __future__ import annotations

import functools
import shutil
import tempfile
from pathlib import Path

import pytest

from conftest import TRACES, trace_param

FIVE = ("cuda_perf_sandbox", "cutlass_benchmark", "pipit_cloverleaf_a100", "uvmtorch", "jorgedavyd_cuda")
_TMP: list[Path] = []  # the module's store folder, made when a test first needs one (a run that selects none of
# this module's tests, with -k, leaves no folder behind)


def _tmp() -> Path:
    if not _TMP:
        _TMP.append(Path(tempfile.mkdtemp(prefix="na-host-activity-")))
    return _TMP[0]


def teardown_module(_module) -> None:
    for folder in _TMP:
        shutil.rmtree(folder, ignore_errors=True)


@functools.lru_cache(maxsize=None)
def _rows(name: str) -> list[dict]:
    """host_activity over the default window (first to last GPU operation) of ../shared/traces/nsys/<name>.sqlite."""
    from nsight_advisor import workflow

    path = TRACES / "nsys" / f"{name}.sqlite"
    if not path.exists():
        pytest.skip(f"real traces absent at {TRACES}")
    con, ids = workflow.load([path], store_path=_tmp() / f"{name}.duckdb", use_cache=False)
    cur = con.execute("select * from host_activity where capture_id = ? order by start_ns", [ids[0]])
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r)) for r in cur.fetchall()]


def _at(name: str, start_ns: int) -> dict:
    return next(r for r in _rows(name) if r["start_ns"] == start_ns)


@pytest.mark.parametrize("name", FIVE)
def test_every_gap_of_a_millisecond_carries_a_host_activity_with_its_coverage(name):
    rows = _rows(name)
    for r in rows:
        if r["duration_ns"] >= 1_000_000:
            assert r["activity"] in ("io", "wait", "cpu", "cuda-api", "framework", "framework-sync", "dataloader",
                                     "unattributed"), r
            assert r["coverage"] is not None and 0 <= r["coverage"] <= 1, r
            # never named after a sliver: a label covers at least half the gap
            assert r["activity"] == "unattributed" or r["coverage"] >= 0.5, r
            assert r["detail"], r


def test_pipit_gaps_spent_writing_output_are_io():
    # select s.value, sum(min(o.end, 543796740) - max(o.start, 542648423)) from OSRT_API o
    #   join StringIds s on s.id = o.nameId where o.globalTid % 16777216 = 1701896
    #   and o.start < 543796740 and o.end > 542648423 group by 1;      -> fflush 5630, write 1083718
    r = _at("pipit_cloverleaf_a100", 542648423)
    assert r["end_ns"] == 543796740 and r["tid"] == 1701896
    assert r["activity"] == "io" and r["top_io"] == "write" and r["io_ns"] == 1083718 + 5630
    assert r["detail"].startswith("io covers 95%, most in write 94%")
    # same query for 872642539 .. 873750504                         -> write 1025496
    r = _at("pipit_cloverleaf_a100", 872642539)
    assert r["activity"] == "io" and r["io_ns"] == 1025496


def test_a_gap_no_activity_covers_half_of_is_unattributed_with_what_covered_most():
    # pipit 539216752 .. 541776041 (2.56 ms): three CPU samples of thread 1701896 and a cudaMalloc cover 30% at most
    # select count(*) from COMPOSITE_EVENTS where globalTid % 16777216 = 1701896
    #   and start >= 539216752 and start < 541776041;                  -> 3
    r = _at("pipit_cloverleaf_a100", 539216752)
    assert r["samples"] == 3 and r["activity"] == "unattributed" and r["coverage"] < 0.5
    assert r["detail"].startswith("unattributed (30% covered by cpu")


def test_cuda_perf_sandbox_gap_is_cuda_calls():
    # select s.value, min(r.end, 1143927944) - max(r.start, 1142162249) from CUPTI_ACTIVITY_KIND_RUNTIME r
    #   join StringIds s on s.id = r.nameId where r.start < 1143927944 and r.end > 1142162249;
    #   -> cudaLaunchKernel_v7000 646481, cudaDeviceSynchronize_v3020 1115807
    r = _at("cuda_perf_sandbox", 1142162249)
    assert r["activity"] == "cuda-api" and r["cuda_api_ns"] == 646481 + 1115807
    assert r["top_cuda_api"] == "cudaDeviceSynchronize"


def test_time_before_the_first_gpu_operation_is_split_by_host_activity():
    # cutlass_benchmark: the main thread fills its inputs with rand() before the first copy
    # select count(*) from COMPOSITE_EVENTS where globalTid % 16777216 = 14652 and start < 11843799098;  -> 12859
    # select min(start) from COMPOSITE_EVENTS;                                                             -> 4650034
    # select min(start) from (select start from CUPTI_ACTIVITY_KIND_KERNEL union all
    #                         select start from CUPTI_ACTIVITY_KIND_MEMCPY);                               -> 11843799098
    [r] = [r for r in _rows("cutlass_benchmark") if r["cause"] == "before-window"]
    assert (r["start_ns"], r["end_ns"], r["samples"]) == (4650034, 11843799098, 12859)
    assert r["activity"] == "cpu" and r["coverage"] > 0.9 and r["top_function"] == "std::generate_canonical"
    # jorgedavyd_cuda: cudaMalloc covers half of its 170 ms before the first kernel
    [r] = [r for r in _rows("jorgedavyd_cuda") if r["cause"] == "before-window"]
    assert r["activity"] == "cuda-api" and r["top_cuda_api"] == "cudaMalloc" and r["coverage"] >= 0.5


def test_emit_nvtx_operators_of_an_nsys_export_name_the_gap_framework():
    # nsys_ai_mfu_2gpu_before, GPU 0's longest host gap, 60401707567 .. 60406200412 on thread 144:
    # select coalesce(n.text, s.value), n.start, n.end from NVTX_EVENTS n left join StringIds s on s.id = n.textId
    #   where n.eventType = 59 and n.globalTid % 16777216 = 144 and n.start < 60406200412 and n.end > 60401707567;
    #   -> aten::layer_norm, seq = 47588, op_id = 999617          60401580982 .. 60406234259
    #      aten::native_layer_norm, seq = 47588, op_id = 999618   60401582620 .. 60406225598
    #      aten::empty, op_id = 999619 / 999620 / 999621          from 60406154401, inside the one above
    # the same on CUPTI_ACTIVITY_KIND_RUNTIME                     -> cudaLaunchKernel_v7000 60406184991 .. 60406201262
    r = _at("nsys_ai_mfu_2gpu_before", 60401707567)
    assert (r["end_ns"], r["tid"]) == (60406200412, 144)
    assert r["cuda_api_ns"] == 60406200412 - 60406184991
    # the operators' union covers the whole gap; what the launch call covers is cuda-api time, not the operators'
    assert r["framework_ns"] == r["duration_ns"] - r["cuda_api_ns"]
    # of two operators covering the same time, the innermost (the shorter) is named, without emit_nvtx's numbers
    assert r["activity"] == "framework" and r["top_operator"] == "aten::native_layer_norm"
    assert r["detail"] == "framework covers 100%, most in aten::native_layer_norm 100%"


def test_emit_nvtx_ranges_are_not_read_where_the_profiler_recorded_operators(tmp_path):
    # a PyTorch profiler trace's operators are its cpu_ops; an NVTX range with emit_nvtx's ', op_id = N' added on
    # the launching thread over a gap changes nothing (no operator counted twice)
    from nsight_advisor import workflow
    from nsight_advisor.store.database import connect, insert_nvtx_ranges

    path = TRACES / "kineto" / "dlrm_8rank" / "worker0_step_12.1694128201545.pt.trace.json.gz"
    if not path.exists():
        pytest.skip(f"real traces absent at {TRACES}")
    store = tmp_path / "dlrm0.duckdb"
    workflow.load([path], store_path=store, use_cache=False)[0].close()
    query = "select * exclude (detail) from host_activity order by capture_id, device_id, start_ns"
    con = connect(store, read_only=True)
    before = con.execute(query).fetchall()
    con.close()
    # a gap the operators leave partly uncovered (cause, tid, framework_ns, duration_ns)
    gap = next(r for r in before if r[5] == "host" and r[7] is not None and r[11] < 0.9 * r[4])
    con = connect(store)
    insert_nvtx_ranges(con, [{"capture_id": gap[0], "pid": gap[6], "tid": gap[7], "start_ns": gap[2] - 1,
                              "end_ns": gap[3] + 1, "text": "aten::bogus, seq = 1, op_id = 2"}])
    assert con.execute(query).fetchall() == before
    con.close()


def test_uvmtorch_has_no_gpu_operation_and_so_no_gap():
    # select count(*) from CUPTI_ACTIVITY_KIND_KERNEL;  -> no such table (UVM only: 2 CUDA calls)
    assert _rows("uvmtorch") == []


def _all_captures() -> list[Path]:
    if not TRACES.exists():
        return []
    return sorted((TRACES / "nsys").glob("*.sqlite")) + sorted((TRACES / "kineto").rglob("*.json.gz"))


@pytest.mark.slow
@pytest.mark.parametrize("path", trace_param(_all_captures()))
def test_large_idle_is_claimed_by_the_findings(path):
    # wherever a device idles for 10% of its window or more, the findings claim at least 80% of that idle
    from rules_real import analyzed

    result, _ = analyzed(str(path.relative_to(TRACES)))
    for cap in result.captures:
        for a in cap["accounting"]:
            window = a["window_end_ns"] - a["window_start_ns"]
            assert 0 <= a["idle_claimed_ns"] <= a["idle_ns"]
            if window > 0 and a["idle_ns"] >= 0.1 * window:
                assert a["idle_claimed_ns"] >= 0.8 * a["idle_ns"], (path.name, a)


@pytest.mark.parametrize("path", trace_param(sorted((TRACES / "kineto" / "dlrm_8rank").glob("*.json.gz"))
                                             if TRACES.exists() else []))
def test_dlrm_host_bound_findings_name_aten_operators(path):
    from rules_real import findings

    [f] = findings(str(path.relative_to(TRACES)), "gpu-idle-gap")
    framework = [r for r in f.evidence if r["activity"] == "framework"]
    assert framework and "aten::" in framework[0]["top_names"], f.evidence


@pytest.mark.parametrize("name", ["nsys_ai_mfu_2gpu_before", "nsys_ai_mfu_2gpu_after"])
def test_nsys_export_host_bound_findings_name_the_emit_nvtx_operators(name):
    # these exports hold no OS runtime calls or CPU samples; PyTorch's emit_nvtx ranges on the launching thread
    # are what says the host ran operators there (each device's host-caused idle, mostly gaps under a millisecond)
    from rules_real import findings

    path = TRACES / "nsys" / f"{name}.sqlite"
    if not path.exists():
        pytest.skip(f"real traces absent at {TRACES}")
    found = findings(f"nsys/{name}.sqlite", "gpu-idle-gap")
    assert sorted(f.device_id for f in found) == [0, 1]
    for f in found:
        top = max(f.evidence, key=lambda r: r["idle_ns"])
        assert top["activity"] == "framework" and top["top_names"].startswith("aten::"), f.evidence
        # the rest is mostly CUDA calls blocking the thread: on mfu_after's GPU 0, 7.1 ms (15%) in a cudaMemsetAsync
        # that blocked 5.7 ms (an asynchronous call's gap is host work, not host-copy: 32_idle_gaps.sql)
        assert top["idle_ns"] >= 0.8 * f.impact_ns
        assert sum(r["idle_ns"] for r in f.evidence if r["activity"] in ("framework", "cuda-api")) >= 0.9 * f.impact_ns

