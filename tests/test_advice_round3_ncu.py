"""Advice, round three (issue 28) on the shared Nsight Compute reports: one tail claimed once, spills sized by their
traffic, stalls reported below one wave, GEMM classes that need GEMM evidence."""

from __future__ import annotations

import pytest

from conftest import TRACES
from rules_real import analyzed, findings


def _need(rel: str) -> str:
    if not (TRACES / rel).exists():
        pytest.skip(f"{rel} not in ../shared/traces")
    return rel


def test_one_partial_wave_is_claimed_once_across_tail_and_achieved_occupancy():
    rel = _need("ncu/sglang_h800_flashattn.ncu-rep")
    [tail] = findings(rel, "tail-effect")
    [occupancy] = findings(rel, "achieved-occupancy")
    name = "distribution_elementwise_grid_stride_kernel"
    assert tail.evidence[0]["short_name"] == name and occupancy.evidence[0]["short_name"] == name
    row = occupancy.evidence[0]
    assert row["tail_idle_pct"] > 20  # 1.33 waves: the last wave leaves a quarter of the GPU idle
    # the occupancy gap (1 - 46.2 / 75 = 38%) is claimed once: tail-effect's share and the rest beside it
    gap = 1 - row["achieved_occupancy_pct"] / row["theoretical_occupancy_pct"]
    claimed = 1 - (1 - tail.claimed_ns / row["duration_ns"]) * (1 - occupancy.claimed_ns / row["duration_ns"])
    assert claimed <= gap + 0.01
    assert occupancy.claimed_ns < 0.2 * tail.claimed_ns  # was 21.1% of the report beside the tail's 26.9%


def test_spills_are_sized_by_their_share_of_the_memory_traffic():
    rel = _need("ncu/monte_carlo_pi.ncu-rep")
    [spills] = findings(rel, "local-memory-spills")
    rows = {r["short_name"]: r for r in spills.evidence}
    init = rows["initRNG"]
    # 3.3% of initRNG's instructions are local loads/stores, but they move 91% of its L1 sectors
    assert init["local_inst_pct"] < 4 and init["local_traffic_pct"] > 90
    assert init["impact_ns"] > 2 * init["duration_ns"] * init["local_inst_pct"] / 100
    assert "of its L1 sectors" in spills.message


def test_stalls_below_one_wave_are_reported():
    rel = _need("ncu/jaxtoolbox_gb200_cuda_graph.ncu-rep")
    [stall] = findings(rel, "dominant-stall")
    kernels = {r["short_name"]: r for r in stall.evidence}
    assert set(kernels) == {"kernelA", "kernelB", "kernelC"}
    assert all(r["waves_per_sm"] < 1 for r in kernels.values())  # latency-bound is silent below one wave
    assert kernels["kernelB"]["top_stall"] == "long_scoreboard" and kernels["kernelB"]["ncu_agreement"] == "agrees"
    assert not findings(rel, "latency-bound")


def test_gemm_classes_on_the_real_reports_rest_on_gemm_evidence():
    rel = _need("ncu/esmm_a10g_sgemm.ncu-rep")
    _, con = analyzed(rel)
    classes = dict(con.execute("select short_name, any_value(category) from ncu_kernel_classes group by 1").fetchall())
    # the hand-written SGEMMs are GEMMs by their FMA-pipe pattern, cuBLAS's by its name too
    assert classes["warptiling"] == "gemm_conv" and classes["ampere_sgemm_128x64_nn"] == "gemm_conv"
    for rel in ("ncu/monte_carlo_pi.ncu-rep", "ncu/cuda_mlp_inference.ncu-rep", "ncu/cs599k_gh200_silu.ncu-rep"):
        _, con = analyzed(_need(rel))
        assert not con.execute("select count(*) from ncu_kernel_classes where category = 'gemm_conv'").fetchone()[0]
        assert not findings(rel, "low-tensor-core-use")


def test_fp64_gemm_on_an_fp64_tensor_core_gpu_gets_the_dmma_advice():
    # no shared report holds an FP64 GEMM: the rule's own synthetic case (a naive DGEMM on an H100, cases.toml)
    from nsight_advisor.engine.analyze import read_captures, settle_impacts
    from nsight_advisor.authoring.cases import build_case_store, empty_store, load_cases
    from nsight_advisor.engine.rules import load_rules
    from nsight_advisor.engine.runner import run_rule_on_capture

    rule = next(r for r in load_rules() if r.name == "low-tensor-core-use")
    case = next(c for c in load_cases(rule) if c.name.startswith("naive FP64 GEMM on an H100"))
    con = build_case_store(case, empty_store())
    try:
        captures = read_captures(con, [1])
        found = run_rule_on_capture(con, rule, captures[0]).findings
        [finding], _ = settle_impacts(con, captures, found)
    finally:
        empty_store()
    assert finding.evidence[0]["class_basis"].startswith("counters: FP64 pipe")
    assert "FP64 tensor cores (DMMA) through cuBLAS DGEMM" in finding.fix
