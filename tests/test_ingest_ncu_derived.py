"""Derived roofline numbers (ncu_kernel_summary) and the ncu ↔ nsys timeline match (ncu_timeline_match)."""

from __future__ import annotations

from collections import namedtuple

import pytest

from conftest import TRACES, ncu_reports, trace_param
from nsight_advisor.ingest import ingest_capture
from nsight_advisor.store.database import insert_kernels

SGEMM = TRACES / "ncu" / "sgemm_rtx2080ti.ncu-rep"
Match = namedtuple("Match", "ncu_capture_id kernel_id nsys_capture_id matched_by launches total_ns timeline_share_pct")


def match_ncu_to_timeline(con, ncu_capture_id=None) -> list[Match]:
    """The ncu_timeline_match view's rows (of one ncu capture, or all), as a rule reads them."""
    rows = con.execute("""select ncu_capture_id, kernel_id, nsys_capture_id, matched_by, launches, total_ns,
                                 timeline_share_pct
                          from ncu_timeline_match where $cid is null or ncu_capture_id = $cid
                          order by ncu_capture_id, kernel_id, nsys_capture_id""", {"cid": ncu_capture_id}).fetchall()
    return [Match(*row) for row in rows]


def _need(path):
    if not path.exists():
        pytest.skip(f"{path} absent")
    pytest.importorskip("ncu_report", reason="NVIDIA's ncu-report wheel (Linux x86_64) is not installed")
    return path


def _summary(con, cid: int = 1, kernel_id: int = 0) -> dict:
    rel = con.execute("SELECT * FROM ncu_kernel_summary WHERE capture_id = ? AND kernel_id = ?", [cid, kernel_id])
    cols = [d[0] for d in rel.description]
    row = rel.fetchone()
    return dict(zip(cols, row))


def test_views_exist_on_an_empty_store(memory_store):
    for view in ("ncu_kernel_inputs", "ncu_kernel_summary", "ncu_timeline_match"):
        assert memory_store.execute(f"SELECT count(*) FROM {view}").fetchone() == (0,)
    assert match_ncu_to_timeline(memory_store) == []


def test_sgemm_roofline_numbers_next_to_stored_verdicts(memory_store):
    """volta_sgemm_32x128_nn on an RTX 2080 Ti (ncu 2023.1, --set full).

    Worked by hand from the report (reference/ncu-export.md §3.8): ffma 936.30 + fmul 14.63 per cycle → 1887
    FLOP/cycle x 1.306 GHz = 2.46 TFLOP/s; peak 2 x 4352 x 1.306 GHz = 11.37 TFLOP/s → 21.7 % (Nsight
    Compute's stored SOLFPRoofline message: "22% of this device's fp32 peak"); DRAM 76.4 GB/s → about 32 FLOP/B.
    """
    con = memory_store
    ingest_capture(con, 1, _need(SGEMM))
    s = _summary(con)
    assert s["flops_fp32_per_s"] == pytest.approx(2.46e12, rel=0.01)
    assert s["flops_fp32"] == pytest.approx(26.42e6, rel=0.001)
    assert s["flops_fp64"] == 0 and s["dominant_precision"] == "fp32"
    assert s["peak_flops_per_s"] == pytest.approx(11.37e12, rel=0.001) and s["peak_flops_source"] == "report"
    assert s["pct_of_peak_flops"] == pytest.approx(21.7, abs=0.05)
    assert round(s["pct_of_peak_flops"]) == 22  # what the stored SOLFPRoofline message says
    assert s["dram_bytes"] == 819456  # dram__bytes_read.sum + dram__bytes_write.sum
    assert s["arithmetic_intensity_flop_per_byte"] == pytest.approx(32.2, abs=0.1)
    assert s["peak_dram_bytes_per_s"] == pytest.approx(96 * 6.6388e9, rel=0.001)  # 96 B/cycle x DRAM clock
    assert s["ridge_flop_per_byte"] == pytest.approx(17.83, abs=0.01)
    assert s["roofline_side"] == "compute"  # 32.2 FLOP/B is right of the 17.8 FLOP/B ridge
    assert s["pct_of_peak_dram_bandwidth"] == pytest.approx(12.0, abs=0.05)
    # SM 22.8 % and memory 22.8 % are both under 60 %: latency-bound, like the stored "Small Grid" verdict says
    assert s["bound"] == "latency"
    assert s["sm_throughput_pct"] == pytest.approx(22.77, abs=0.01)
    assert s["tensor_pipe_pct"] == 0.0  # cuBLAS volta_sgemm: FP32 FFMA, no tensor cores
    assert s["tensor_pipe_metric"] == "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed"
    assert s["fma_pipe_pct"] == pytest.approx(22.06, abs=0.01)
    assert s["waves_per_sm"] == pytest.approx(50 / (68 * 4))  # stored focus metric: "0.184 < 1.000"
    assert s["blocks"] == 50 and s["sm_count"] == 68  # stored LaunchConfiguration: 50 blocks < 68 SMs
    assert s["theoretical_occupancy_pct"] == 100.0
    assert s["achieved_occupancy_pct"] == pytest.approx(24.93, abs=0.01)
    verdicts = {r[0]: r[1] for r in con.execute("SELECT rule_id, title FROM ncu_rule_results").fetchall()}
    assert verdicts["LaunchConfiguration"] == "Small Grid" and verdicts["SOLBottleneck"] == "Small Grid"


@pytest.mark.parametrize("path", trace_param(ncu_reports()))
def test_summary_row_per_kernel(memory_store, path):
    ingest_capture(memory_store, 1, _need(path))
    n = memory_store.execute("SELECT count(*) FROM ncu_kernels").fetchone()[0]
    rows = memory_store.execute("""SELECT duration_ns, pct_of_peak_flops, pct_of_peak_dram_bandwidth, tensor_pipe_pct,
                                   bound, roofline_side FROM ncu_kernel_summary""").fetchall()
    assert len(rows) == n
    for duration, flops_pct, bw_pct, tensor, bound, side in rows:
        assert flops_pct is None or 0 <= flops_pct <= 100
        assert bw_pct is None or 0 <= bw_pct <= 100
        assert tensor is None or 0 <= tensor <= 100
        assert bound in (None, "latency", "memory", "compute") and side in (None, "memory", "compute")
        assert duration is not None or bound is None


def test_tensor_pipe_metric_by_architecture(memory_store):
    """Hopper (H800) uses sm__pipe_tensor_cycles_active; Blackwell (GB200) reports the TC pipe."""
    h800, gb200 = TRACES / "ncu" / "sglang_h800_flashattn.ncu-rep", TRACES / "ncu" / "jaxtoolbox_gb200_cuda_graph.ncu-rep"
    ingest_capture(memory_store, 1, _need(h800))
    ingest_capture(memory_store, 2, _need(gb200))
    got = dict(memory_store.execute("""SELECT capture_id, any_value(tensor_pipe_metric) FROM ncu_kernel_summary
                                       WHERE tensor_pipe_metric IS NOT NULL GROUP BY capture_id""").fetchall())
    assert got == {1: "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed",
                   2: "sm__pipe_tc_cycles_active.avg.pct_of_peak_sustained_elapsed"}
    assert memory_store.execute("SELECT max(tensor_pipe_pct) FROM ncu_kernel_summary WHERE capture_id = 1").fetchone()[0] > 0


def test_flops_from_sum_counters_in_a_users_csv(memory_store):
    """esmm_research_metrics.csv: sm__sass_thread_inst_executed_op_{fadd,fmul,ffma}_pred_on.sum and dram__bytes.sum."""
    path = TRACES / "ncu-csv" / "esmm_research_metrics.csv"
    if not path.exists():
        pytest.skip(f"{path} absent")
    ingest_capture(memory_store, 1, path)
    s = _summary(memory_store)
    flops = 0 + 1_048_576 + 2 * 1_073_741_824  # fadd + fmul + 2 x ffma as printed: SGEMM 1024^3 plus alpha scaling
    assert s["flops_fp32"] == flops
    assert s["dram_bytes"] == 32_746_880
    assert s["arithmetic_intensity_flop_per_byte"] == pytest.approx(flops / 32_746_880)
    assert s["flops_fp32_per_s"] == pytest.approx(flops / 10_776_576e-9)
    assert s["ridge_flop_per_byte"] is None  # the CSV names no GPU, so there is no peak to compare with
    missing = {r[0] for r in memory_store.execute("SELECT data FROM capture_missing").fetchall()}
    assert "ncu_metrics:launch__waves_per_multiprocessor" in missing


def test_basic_set_report_records_what_to_capture(memory_store):
    """esmm_a10g was captured with the basic set: no roofline counters, and capture_missing says which section."""
    ingest_capture(memory_store, 1, _need(TRACES / "ncu" / "esmm_a10g_sgemm.ncu-rep"))
    s = _summary(memory_store)
    assert s["flops_fp32"] is None and s["arithmetic_intensity_flop_per_byte"] is None
    assert s["bound"] == "memory" and s["ridge_flop_per_byte"] == pytest.approx(31.2e12 / 600e9)  # datasheet peaks
    options = dict(memory_store.execute("SELECT data, capture_option FROM capture_missing").fetchall())
    assert options["ncu_metrics:sm__sass_thread_inst_executed_op_ffma_pred_on.sum"].startswith(
        "ncu --section SpeedOfLight_RooflineChart")
    assert options["ncu_metrics:dram__bytes.sum"].startswith("ncu --section MemoryWorkloadAnalysis_Chart")


def _add_timeline(con, capture_id: int, launches: list[tuple[str, str, tuple, tuple, int]]) -> None:
    """A hand-made nsys capture: (name, short_name, grid, block, duration_ns) per launch."""
    con.execute("""INSERT INTO captures (capture_id, source_path, source_name, format, tool, tool_version)
                   VALUES (?, 'synthetic.sqlite', 'synthetic.sqlite', 'nsys-sqlite', 'nsys', 'test')""", [capture_id])
    t = 0
    for name, short, grid, block, dur in launches:
        insert_kernels(con, [dict(capture_id=capture_id, device_id=0, start_ns=t, end_ns=t + dur, duration_ns=dur,
                                  name=name, short_name=short, grid_x=grid[0], grid_y=grid[1], grid_z=grid[2],
                                  block_x=block[0], block_y=block[1], block_z=block[2])])
        t += dur + 1000


def test_ncu_kernels_matched_to_a_timeline(memory_store):
    """No nsys export of the same program is among the traces, so the timeline is hand-made around the real report:
    3 sgemm launches of 10 us with the profiled configuration, 1 with another grid (not matched), and 60 us of
    other kernels: the matched share is 30 / (40 + 60) = 30 %."""
    con = memory_store
    ingest_capture(con, 1, _need(SGEMM))
    sgemm = "volta_sgemm_32x128_nn"
    _add_timeline(con, 2, [(sgemm, sgemm, (2, 25, 1), (256, 1, 1), 10_000)] * 3
                  + [(sgemm, sgemm, (4, 25, 1), (256, 1, 1), 10_000),
                     ("void other_kernel<float>(float*)", "other_kernel", (1, 1, 1), (32, 1, 1), 60_000)])
    matches = match_ncu_to_timeline(con)
    assert len(matches) == 1
    m = matches[0]
    assert (m.ncu_capture_id, m.kernel_id, m.nsys_capture_id, m.matched_by, m.launches, m.total_ns) == (
        1, 0, 2, "name", 3, 30_000)
    assert m.timeline_share_pct == pytest.approx(30.0)


def test_short_name_match_when_demangled_names_differ(memory_store):
    con = memory_store
    ingest_capture(con, 1, _need(TRACES / "ncu" / "monte_carlo_pi.ncu-rep"))
    # nsys spelled the name without the return type; the base name and configuration still match
    _add_timeline(con, 2, [("computeValue<float>(unsigned int*, curandStateXORWOW*, unsigned int)", "computeValue",
                            (1220, 1, 1), (128, 1, 1), 7_600_000)])
    matches = match_ncu_to_timeline(con, 1)
    assert [(m.kernel_id, m.matched_by, m.timeline_share_pct) for m in matches] == [(1, "short_name", 100.0)]
