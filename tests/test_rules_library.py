"""The built-in rule library on the real captures: what each rule must find there, and the views the rules stand on.

(Every rule's cases.toml and `rules lint` run in tests/test_rule_cases.py; NVIDIA's verdicts in
tests/test_rules_agreement.py.)
"""

from __future__ import annotations

import pytest

from conftest import TRACES, ncu_reports, nsys_exports, trace_param
from rules_real import analyzed, evidence, findings, outcome

from nsight_advisor.store.database import insert_kernels

H100 = "nsys/nsys_ai_h100_2gpu_1s.sqlite"


def _rel(path) -> str:
    return str(path.relative_to(TRACES))


# --- kernel classes from names ----------------------------------------------------------------------------------

NAMES = [
    # (name as the timeline records it, category, math path, precision)
    ("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x256x8_stage3_warpsize1x4x1_ffma_aligna4_alignc4_execute_kernel"
     "__5x_cublas", "gemm_conv", "simt", "fp32"),
    ("volta_sgemm_32x128_nn", "gemm_conv", "simt", "fp32"),
    ("ampere_sgemm_128x64_nn", "gemm_conv", "simt", "fp32"),
    ("sm80_xmma_fprop_implicit_gemm_f16f16_f16f16_f16_nhwckrsc_nhwc_tilesize128x128x32_stage4_warpsize2x2x1_g1_"
     "tensor16x8x16_t1r3s3_aACCESS_execute_kernel_trt", "gemm_conv", "tensor_core", "fp16"),
    ("trt_ampere_h16816gemm_64x64_ldg8_relu_stages_64x5_tn_v1", "gemm_conv", "tensor_core", "fp16"),
    ("nvjet_hsh_256x128_64x4_1x2_h_bz_coopA_NTT", "gemm_conv", "tensor_core", "fp16"),
    ("ampere_tf32_s1688gemm_tf32_128x128_16x3_tn", "gemm_conv", "tensor_core", "tf32"),
    ("volta_h884gemm_64x64_ldg8_nn", "gemm_conv", "tensor_core", "fp16"),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel"
     "__5x_cublas_gmma", "gemm_conv", "tensor_core", "bf16"),
    ("void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::half_t>>(Flash_fwd_params)",
     "attention", "tensor_core", "fp16"),
    ("void cutlass::Kernel<cutlass::gemm::kernel::Gemm<cutlass::gemm::threadblock::MmaPipelined<cutlass::gemm::"
     "GemmShape<128, 128, 32>, float, cutlass::half_t, cutlass::layout::RowMajorTensorOpMultiplicandCrosswise<16, 32>>>>",
     "gemm_conv", "tensor_core", "fp16"),
    ("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm *, unsigned long, ncclWork *)", "communication", "unknown",
     None),
    ("add(int, float *, float *)", "elementwise", "unknown", "fp32"),
    ("main_46_gpu", "other", "unknown", None),
    ("tensor_core_matmul(__half *, __half *, float *, int, int, int)", "gemm_conv", "unknown", "fp16"),
    ("basic", "other", "unknown", None),
    ("gemv2T_kernel_val<int, int, float, float, float, float, 128, 16, 4, 4, false, false>", "gemm_conv", "unknown",
     "fp32"),
]


@pytest.mark.parametrize("name,category,math_path,precision", NAMES)
def test_kernel_names_classify(memory_store, name, category, math_path, precision):
    short = name.removeprefix("void ").split("(")[0].split("<")[0].split("::")[-1]  # as kernels.short_name holds it
    row = memory_store.execute("select na_kernel_category(?, ?), na_math_path(?), na_precision(?)",
                               [name, short, name, name]).fetchone()
    assert row == (category, math_path, precision)


def test_views_exist_on_an_empty_store(memory_store):
    for view in ("kernel_classes", "ncu_kernel_classes", "kernel_launches"):
        assert memory_store.execute(f"select count(*) from {view}").fetchone() == (0,)


@pytest.mark.parametrize("report", trace_param(ncu_reports()))
def test_timeline_occupancy_matches_nsight_compute(report, memory_store):
    """kernel_launches' occupancy arithmetic, fed each profiled launch, gives Nsight Compute's block limits."""
    _, con = analyzed(_rel(report))
    rows = con.execute("""
        select k.kernel_id, k.blocks, k.threads_per_block, k.sm_count,
               max(m.value) filter (where metric = 'launch__registers_per_thread') as regs,
               max(m.value) filter (where metric = 'launch__shared_mem_per_block_static')
                 + max(m.value) filter (where metric = 'launch__shared_mem_per_block_dynamic') as smem,
               max(m.value) filter (where metric = 'device__attribute_max_warps_per_multiprocessor') as max_warps,
               max(m.value) filter (where metric = 'device__attribute_max_blocks_per_multiprocessor') as max_blocks,
               max(m.value) filter (where metric = 'device__attribute_max_registers_per_multiprocessor') as max_regs,
               max(m.value) filter (where metric = 'device__attribute_max_shared_memory_per_multiprocessor') as max_smem,
               max(m.value) filter (where metric = 'device__attribute_compute_capability_major') as cc_major,
               max(m.value) filter (where metric = 'launch__occupancy_limit_registers') as lim_regs,
               max(m.value) filter (where metric = 'launch__occupancy_limit_warps') as lim_warps,
               max(m.value) filter (where metric = 'launch__occupancy_limit_shared_mem') as lim_smem,
               max(m.value) filter (where metric = 'launch__occupancy_limit_blocks') as lim_blocks,
               max(m.value) filter (where metric = 'launch__waves_per_multiprocessor') as waves
        from ncu_kernels k join ncu_metrics m using (capture_id, kernel_id)
        group by all
    """).fetchall()
    checked = 0
    for (kid, blocks, threads, sms, regs, smem, max_warps, max_blocks, max_regs, max_smem, cc, lim_regs, lim_warps,
         lim_smem, lim_blocks, waves) in rows:
        if None in (blocks, threads, sms, regs, max_warps, max_regs, lim_regs, lim_warps, lim_blocks, waves):
            continue
        memory_store.execute("delete from kernel_rows")
        memory_store.execute("delete from gpus")
        memory_store.execute(
            "insert into gpus (capture_id, device_id, sm_count, cc_major, max_warps_per_sm, max_blocks_per_sm, "
            "max_registers_per_sm, max_shared_mem_per_sm_bytes, threads_per_warp) values (1, 0, ?, ?, ?, ?, ?, ?, 32)",
            [sms, cc, max_warps, max_blocks, max_regs, max_smem])
        insert_kernels(memory_store, [dict(capture_id=1, device_id=0, blocks=blocks, threads_per_block=threads,
                                           registers_per_thread=regs, shared_mem_bytes=smem or 0)])
        got = memory_store.execute(
            "select limit_registers, limit_warps, limit_shared_mem, resident_blocks_per_sm, waves "
            "from kernel_launches").fetchone()
        ours_regs, ours_warps, ours_smem, resident, our_waves = got
        assert ours_regs is None and regs == 0 or ours_regs == lim_regs, (kid, got, lim_regs)
        assert ours_warps == lim_warps, (kid, got, lim_warps)
        # Nsight Compute divides by the shared-memory carve-out configured at run time; the timeline only knows
        # the SM's maximum, so our shared-memory limit is an upper bound.
        if ours_smem is not None and lim_smem is not None:
            assert ours_smem >= lim_smem, (kid, got, lim_smem)
        if lim_smem is None or min(lim_regs, lim_warps, lim_blocks) <= lim_smem:
            assert resident == min(lim_regs, lim_warps, lim_blocks), (kid, got)
            assert our_waves == pytest.approx(waves, rel=1e-3), (kid, got, waves)
        checked += 1
    assert checked or not rows


# --- what must hold on the real captures ------------------------------------------------------------------------

def test_low_tensor_core_use_catches_the_fp32_cublas_gemms_of_the_h100_training_run(traces_dir):
    rows = evidence(H100, "low-tensor-core-use")
    assert rows and all("_ffma_" in r["short_name"] and "f32f32_f32f32" in r["short_name"] for r in rows)
    # they are most of the kernel time
    assert rows[0]["simt_gemm_share_pct"] > 80
    # one finding per GPU of the two-GPU capture, each on its own device's time
    per_device = findings(H100, "low-tensor-core-use")
    assert sorted(f.device_id for f in per_device) == [0, 1]
    assert all(f.severity in ("warning", "error") for f in per_device)


@pytest.mark.parametrize("rel,kernel", [("ncu/sgemm_rtx2080ti.ncu-rep", "volta_sgemm_32x128_nn"),
                                        ("ncu/esmm_a10g_sgemm.ncu-rep", "ampere_sgemm_128x64_nn")])
def test_low_tensor_core_use_catches_cublas_sgemm_in_nsight_compute_reports(traces_dir, rel, kernel):
    names = {r["short_name"] for r in evidence(rel, "low-tensor-core-use")}
    assert kernel in names
    if "esmm" in rel:
        # esmm's hand-written SGEMMs ('warptiling', ...) say nothing by their names: their counters (FMA pipe the
        # busiest, busier than DRAM) class them as SIMT GEMMs; 'basic' (FMA 4%) and smem_blocking (8%) wait on
        # memory access, not math, and are left to uncoalesced-access
        assert {"gmem_coalesce", "one_blocktiling", "two_blocktiling", "vectorized_blocktiling", "warptiling"} <= names
        assert not {"basic", "smem_blocking"} & names
    else:
        assert names == {kernel}


def test_hand_written_sgemms_class_as_gemm_from_counters(traces_dir):
    _, con = analyzed("ncu/esmm_a10g_sgemm.ncu-rep")
    rows = con.execute("select short_name, category, math_path, class_basis from ncu_kernel_classes").fetchall()
    assert len(rows) == 9
    for short_name, category, math_path, basis in rows:
        assert (category, math_path) == ("gemm_conv", "simt"), short_name
        assert basis.startswith("counters: FMA pipe"), (short_name, basis)


@pytest.mark.parametrize("rel", ["nsys/memfusion.sqlite", "nsys/fuser_h200_matmul.sqlite",
                                 "ncu/sglang_h800_flashattn.ncu-rep", "nsys/cutlass_benchmark.sqlite"])
def test_low_tensor_core_use_is_silent_on_tensor_core_kernels(traces_dir, rel):
    assert outcome(rel, "low-tensor-core-use").status == "clean"


@pytest.mark.parametrize("rel,kernels", [("nsys/csc746_vecadd.sqlite", {"add"}),
                                         ("nsys/nsu_v100_openacc.sqlite", {"main_46_gpu", "main_41_gpu"})])
def test_small_grid_fires_on_one_block_launches(traces_dir, rel, kernels):
    rows = evidence(rel, "small-grid")
    assert {r["short_name"] for r in rows} == kernels
    assert all(r["blocks"] == 1 for r in rows)
    [finding] = findings(rel, "small-grid")
    assert finding.severity == "error"  # these kernels are most of the run


@pytest.mark.parametrize("export", trace_param(nsys_exports() + ncu_reports()))
def test_small_grid_never_fires_on_launches_that_fill_the_gpu(export):
    for row in evidence(_rel(export), "small-grid"):
        assert row["blocks"] < row["sm_count"], row


@pytest.mark.parametrize("export", trace_param(nsys_exports() + ncu_reports()))
def test_every_rule_runs_cleanly_on_every_real_capture(export):
    result, _ = analyzed(_rel(export))
    assert not [(o.rule_name, o.reason) for o in result.outcomes if o.status == "errored"]
    for f in result.findings:
        assert f.impact_ns >= 0 and f.message and f.fix and f.principles, f


def test_rules_lacking_data_are_skipped_with_the_capture_option(traces_dir):
    # cardiac_sim has no CUDA tables at all
    for rule in ("sync-stall", "sync-memcpy", "pageable-memcpy", "gpu-idle-gap", "launch-overhead"):
        o = outcome("nsys/cardiac_sim.sqlite", rule)
        assert o.status == "skipped" and "nsys profile" in o.capture_option, o


def test_sync_at_exit_is_info_and_drained_queues_cost_their_bubble(traces_dir):
    [f] = findings("nsys/csc746_vecadd.sqlite", "sync-stall")
    assert f.severity == "info"  # the one cudaDeviceSynchronize waits for the only kernel, at the end
    [f] = findings("nsys/pipit_cloverleaf_a100.sqlite", "sync-stall")
    # the steady window starts at the first of its 10 time steps: the drained queues cost 7.6 ms there (12.0 ms
    # with --window all, the field setup's synchronizations before the first step included)
    assert f.evidence[0]["calls"] == 1312 and f.impact_ns > 5_000_000


def test_gpu_idle_gaps_are_found_where_nsys_sees_low_utilization(traces_dir):
    # nsys analyze's gpu-low-util flags these captures, and an idle-time rule reports at least a millisecond of
    # each: gpu-idle-gap where the host works elsewhere, startup-cost where it compiles or loads modules (fuser's
    # NVRTC, recon_stream's CuPy modules, the first launches of nsys_ai_mock and cuda_perf_sandbox). The steady
    # H100 training loop, which nsys does not flag, leaves gpu-idle-gap clean.
    idle_rules = ("gpu-idle-gap", "startup-cost", "sync-stall", "sync-memcpy")
    for rel in ("nsys/csc746_vecadd.sqlite", "nsys/fuser_h200_matmul.sqlite", "nsys/recon_stream.sqlite",
                "nsys/nsys_ai_mock.sqlite", "nsys/cuda_perf_sandbox.sqlite"):
        in_window = [f for name in idle_rules for f in findings(rel, name) if f.device_id is not None]
        assert sum(f.impact_ns for f in in_window) >= 1_000_000, rel
    assert findings("nsys/fuser_h200_matmul.sqlite", "startup-cost")
    assert findings("nsys/csc746_vecadd.sqlite", "gpu-idle-gap")
    assert outcome(H100, "gpu-idle-gap").status == "clean"


def test_launch_overhead_uses_typical_launches_not_queue_full_stalls(traces_dir):
    rows = evidence(H100, "launch-overhead")
    top = rows[0]
    assert top["short_name"] == "vectorized_elementwise_kernel"
    # medians: a few microseconds per launch, not the 7 ms launches that waited on a full queue
    assert 1_000 < top["median_launch_api_ns"] < 20_000


def test_h2d_transfer_volume_shows_the_h100_slice_is_mostly_uploads(traces_dir):
    # 225 copies of about 113 MB per GPU, 25.5 GB each, that no kernel overlaps: the slice's biggest cost
    found = findings(H100, "h2d-transfer-volume")
    assert sorted(r["device_id"] for f in found for r in f.evidence) == [0, 1]
    for f in found:
        assert f.evidence[0]["bytes"] == 25_475_253_792 and f.evidence[0]["exposed_share_pct"] > 90
    assert outcome("nsys/pipit_cloverleaf_a100.sqlite", "h2d-transfer-volume").status == "clean"
