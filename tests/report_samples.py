"""Hand-built analyses for the report tests: several findings whose strings are hostile, as captures can be.

Real analyses (``analyze`` on ../shared/traces) back the same tests where the engine can run them; these
make sure every format handles the worst strings and the largest sizes whatever the rule library finds.
"""

from __future__ import annotations

from nsight_advisor.engine.model import AnalysisResult, Finding, Outcome, PrincipleRef

HOSTILE_NAMES = (
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(2)>",
    "</style><b id=pwned>x</b>",
    "void gemm<float, cutlass::arch::Sm80>(T&amp; a, const T* __restrict__ b)",
    "</textarea><svg onload=alert(3)>",
    "a|b`c*d_e[f](javascript:alert(4))",
)

PRINCIPLE = PrincipleRef(
    "gpu-background.execution-model.waves", "GPU Execution Model",
    "https://docs.nvidia.com/deeplearning/performance/dl-performance-gpu-background/index.html#gpu-execution")


def hostile_result(n_findings: int = 4, evidence_rows: int = 30) -> AnalysisResult:
    """An analysis of one capture whose kernel names are hostile, with findings, skips and an error."""
    findings = []
    for i in range(n_findings):
        name = HOSTILE_NAMES[i % len(HOSTILE_NAMES)]
        rows = [{"name": name if r == 0 else f"{name} #{r}", "launches": 1000 - r, "blocks": 2 + r,
                 "sm_count": 108, "blocks_per_sm": (2 + r) / 108, "impact_ns": 1_000_000 * (n_findings - i) - r}
                for r in range(evidence_rows)]
        findings.append(Finding(
            rule_id=f"NA10{i % 10}", rule_name=f"hostile-rule-{i}", severity=("error", "warning", "info")[i % 3],
            title=f"Finding {i} about {name}", message=f"{evidence_rows} kernel(s) such as {name} launch few blocks "
            f"({(2) / 108:.2f} < 1 blocks/SM)", capture_id=1, impact_ns=1_000_000 * (n_findings - i),
            impact_pct=12.5 / (i + 1), evidence=rows[:20],
            evidence_columns=["name", "launches", "blocks", "sm_count", "blocks_per_sm", "impact_ns"],
            evidence_total_rows=evidence_rows, principles=[PRINCIPLE], fix=f"Launch more blocks than {name} does.",
            category="launch", observed=2 / 108, threshold=1.0,
            regions=[{"path": f"train/{name}", "share_pct": 60.0, "impact_ns": 600_000 * (n_findings - i)},
                     {"path": "(other)", "share_pct": 40.0, "impact_ns": 400_000 * (n_findings - i)}]))
    outcomes = [Outcome(f.rule_id, f.rule_name, "findings", findings=1) for f in findings]
    outcomes += [
        Outcome("NA201", "uncoalesced-<b>access</b>", "skipped", reason="no ncu_metrics rows for <this> capture",
                capture_option="ncu --section MemoryWorkloadAnalysis"),
        Outcome("NA301", "sync-<i>storm</i>", "errored", reason="Binder Error: column \"<x>\" not found"),
        Outcome("NA401", "gpu-idle", "clean"),
    ]
    summary = {
        "captures": [{"capture_id": 1, "source_name": "<script>alert(5)</script>.sqlite", "tool": "nsys",
                      "tool_version": "2024.5.1", "format": "nsys-sqlite", "start_ns": 0, "end_ns": 8_000_000,
                      "wall_ns": 8_000_000, "kernel_count": 1312, "kernel_time_ns": 5_000_000, "ncu_kernel_count": 0,
                      "busy_ns": 5_200_000, "active_devices": 1, "gpu_busy_pct": 65.0, "gpu_count": 4,
                      "gpus": [{"name": "NVIDIA A100-SXM4-80GB <b>", "sm_count": 108, "compute_capability": "8.0",
                                "count": 4}], "missing": []}],
        "top_kernels": [{"capture_id": 1, "name": n, "launches": 10 * (i + 1), "total_ns": 1_000_000 // (i + 1),
                         "avg_ns": 1000.0, "pct_of_kernel_time": 20.0 / (i + 1)} for i, n in enumerate(HOSTILE_NAMES)],
        "categories": [{"category": "GEMM/conv", "total_ns": 3_000_000, "pct": 60.0},
                       {"category": "<script>alert(6)</script>", "total_ns": 1_500_000, "pct": 30.0},
                       {"category": "copy", "total_ns": 500_000, "pct": 10.0}],
        "utilization": [{"capture_id": 1, "start_ns": 0, "bin_ns": 66_667,
                         "busy_pct": [(i * 37) % 100 for i in range(120)]}],
        "roofline": {"points": [{"capture_id": 1, "name": HOSTILE_NAMES[i % len(HOSTILE_NAMES)],
                                 "intensity_flop_per_byte": 0.5 * (i + 1) ** 2,
                                 "achieved_flops_per_s": 1e11 * (i + 1), "duration_ns": 1000.0} for i in range(6)],
                     "points_left_out": 0, "peak_flops_per_s": 19.5e12, "peak_bytes_per_s": 2.0e12},
    }
    return AnalysisResult(
        tool={"name": "nsight-advisor", "version": "0.1.0"},
        captures=[{"capture_id": 1, "source_name": "<script>alert(5)</script>.sqlite", "tool": "nsys",
                   "tool_version": "2024.5.1", "format": "nsys-sqlite", "duration_ns": 8_000_000,
                   # NVTX ranges are named by the program: as hostile as kernel names
                   "nvtx_paths": [{"path": f"train/{n}", "gpu_ns": 1_000_000 // (i + 1), "ops": 10 * (i + 1),
                                   "share_pct": 10.0} for i, n in enumerate(HOSTILE_NAMES)]}],
        findings=findings, outcomes=outcomes, summary=summary)
