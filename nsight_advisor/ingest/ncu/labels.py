"""Nsight Compute section labels → metric names, for CSV pages printed with labels (the default).

The details and summary pages print a section's *label* ("Duration", "Compute (SM) Throughput") unless
``--print-metric-name name`` was given. Labels changed between ncu versions ("SOL SM" in 2020, "Compute (SM)
[%]" in 2022.3, "Compute (SM) Throughput" in 2024.1) and a few are shared by two metrics that differ in unit
("Memory Throughput" is a % in Speed Of Light and byte/second in Memory Workload Analysis). The pairs below were
read from the real reports in ``shared/traces/ncu`` through ``ncu_report`` (``IMetric.label()``) and from the
2022.3/2024.1 CSV pages of the same reports; a test checks them against those reports.
"""

from __future__ import annotations

import re

# label -> metric name, for labels that name exactly one metric.
LABEL_TO_METRIC: dict[str, str] = {
    # GPU Speed Of Light Throughput (labels of 2020.x, 2022.3 and 2024.1+)
    "Duration": "gpu__time_duration.sum",
    "Elapsed Cycles": "gpc__cycles_elapsed.max",
    "SM Active Cycles": "sm__cycles_active.avg",
    "SM Frequency": "gpc__cycles_elapsed.avg.per_second",
    "DRAM Frequency": "dram__cycles_elapsed.avg.per_second",
    "Compute (SM) Throughput": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "Compute (SM) [%]": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "SM [%]": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "SOL SM": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "Memory [%]": "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "SOL Memory": "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "DRAM Throughput": "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
    "SOL DRAM": "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
    "L1/TEX Cache Throughput": "l1tex__throughput.avg.pct_of_peak_sustained_active",
    "SOL L1/TEX Cache": "l1tex__throughput.avg.pct_of_peak_sustained_active",
    "L2 Cache Throughput": "lts__throughput.avg.pct_of_peak_sustained_elapsed",
    "SOL L2 Cache": "lts__throughput.avg.pct_of_peak_sustained_elapsed",
    # Compute Workload Analysis
    "Executed Ipc Active": "sm__inst_executed.avg.per_cycle_active",
    "Executed Ipc Elapsed": "sm__inst_executed.avg.per_cycle_elapsed",
    "Issued Ipc Active": "sm__inst_issued.avg.per_cycle_active",
    "Issue Slots Busy": "sm__inst_issued.avg.pct_of_peak_sustained_active",
    "SM Busy": "sm__instruction_throughput.avg.pct_of_peak_sustained_active",
    # Memory Workload Analysis
    "Mem Busy": "gpu__compute_memory_access_throughput.avg.pct_of_peak_sustained_elapsed",
    "Max Bandwidth": "gpu__compute_memory_request_throughput.avg.pct_of_peak_sustained_elapsed",
    "Mem Pipes Busy": "sm__memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "L1/TEX Hit Rate": "l1tex__t_sector_hit_rate.pct",
    "L2 Hit Rate": "lts__t_sector_hit_rate.pct",
    "L2 Compression Success Rate": "lts__average_gcomp_input_sector_success_rate.pct",
    "L2 Compression Ratio": "lts__average_gcomp_output_sector_compression_achieved_rate.ratio",
    "DRAM Bandwidth": "dram__bytes.sum.per_second",
    "Local Memory Spilling Requests": "derived__local_spilling_requests",
    "Local Memory Spilling Request Overhead": "derived__local_spilling_requests_pct",
    # Scheduler and Warp State Statistics
    "One or More Eligible": "smsp__issue_active.avg.pct_of_peak_sustained_active",
    "No Eligible": "smsp__issue_inst0.avg.pct_of_peak_sustained_active",
    "Issued Warp Per Scheduler": "smsp__issue_active.avg.per_cycle_active",
    "Active Warps Per Scheduler": "smsp__warps_active.avg.per_cycle_active",
    "Eligible Warps Per Scheduler": "smsp__warps_eligible.avg.per_cycle_active",
    "GPU Maximum Warps Per Scheduler": "smsp__warps_active.avg.peak_sustained",
    "Warp Cycles Per Issued Instruction": "smsp__average_warp_latency_per_inst_issued.ratio",
    "Warp Cycles Per Executed Instruction": "smsp__average_warps_active_per_inst_executed.ratio",
    "Avg. Active Threads Per Warp": "smsp__thread_inst_executed_per_inst_executed.ratio",
    "Avg. Not Predicated Off Threads Per Warp": "smsp__thread_inst_executed_pred_on_per_inst_executed.ratio",
    # Instruction Statistics / Source Counters
    "Executed Instructions": "smsp__inst_executed.sum",
    "Issued Instructions": "smsp__inst_issued.sum",
    "Avg. Executed Instructions Per Scheduler": "smsp__inst_executed.avg",
    "Avg. Issued Instructions Per Scheduler": "smsp__inst_issued.avg",
    "Instructions Executed": "inst_executed",
    "Branch Instructions": "smsp__inst_executed_op_branch.sum",
    "Branch Instructions Ratio": "derived__smsp__inst_executed_op_branch_pct",
    "Branch Efficiency": "smsp__sass_average_branch_targets_threads_uniform.pct",
    "Avg. Divergent Branches": "smsp__sass_branch_targets_threads_divergent.avg",
    # Launch Statistics
    "Grid Size": "launch__grid_size",
    "Block Size": "launch__block_size",
    "Threads": "launch__thread_count",
    "Registers Per Thread": "launch__registers_per_thread",
    "Waves Per SM": "launch__waves_per_multiprocessor",
    "Static Shared Memory Per Block": "launch__shared_mem_per_block_static",
    "Dynamic Shared Memory Per Block": "launch__shared_mem_per_block_dynamic",
    "Driver Shared Memory Per Block": "launch__shared_mem_per_block_driver",
    "Shared Memory Configuration Size": "launch__shared_mem_config_size",
    "Function Cache Configuration": "launch__func_cache_config",
    "# SMs": "launch__sm_count",
    "# TPCs": "launch__tpc_count",
    "Stack Size": "launch__stack_size",
    "Cluster Size": "launch__cluster_size",
    "Cluster Scheduling Policy": "launch__cluster_scheduling_policy",
    # Occupancy
    "Theoretical Occupancy": "sm__maximum_warps_per_active_cycle_pct",
    "Theoretical Active Warps per SM": "sm__maximum_warps_avg_per_active_cycle",
    "Achieved Occupancy": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "Achieved Active Warps Per SM": "sm__warps_active.avg.per_cycle_active",
    "Block Limit SM": "launch__occupancy_limit_blocks",
    "Block Limit Registers": "launch__occupancy_limit_registers",
    "Block Limit Shared Mem": "launch__occupancy_limit_shared_mem",
    "Block Limit Warps": "launch__occupancy_limit_warps",
    "Block Limit Barriers": "launch__occupancy_limit_barriers",
    "Cluster Occupancy": "launch__occupancy_cluster_pct",
    "Max Active Clusters": "launch__cluster_max_active",
    "Max Cluster Size": "launch__cluster_max_potential_size",
    "Overall GPU Occupancy": "launch__occupancy_cluster_gpu_pct",
    # Roofline charts
    "Predicated-On FADD Thread Instructions Executed Per Cycle": "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum.per_cycle_elapsed",
    "Predicated-On FMUL Thread Instructions Executed Per Cycle": "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum.per_cycle_elapsed",
    "Predicated-On FFMA Thread Instructions Executed Per Cycle": "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum.per_cycle_elapsed",
    "Predicated-On DADD Thread Instructions Executed Per Cycle": "smsp__sass_thread_inst_executed_op_dadd_pred_on.sum.per_cycle_elapsed",
    "Predicated-On DMUL Thread Instructions Executed Per Cycle": "smsp__sass_thread_inst_executed_op_dmul_pred_on.sum.per_cycle_elapsed",
    "Predicated-On DFMA Thread Instructions Executed Per Cycle": "smsp__sass_thread_inst_executed_op_dfma_pred_on.sum.per_cycle_elapsed",
    "Theoretical DRAM Bytes Accessible": "dram__bytes.sum.peak_sustained",
    "Theoretical Predicated-On FFMA Thread Instructions Executed": "sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained",
    "Theoretical Predicated-On DFMA Thread Instructions Executed": "sm__sass_thread_inst_executed_op_dfma_pred_on.sum.peak_sustained",
    "L1/TEX Cache Frequency": "l1tex__cycles_elapsed.avg.per_second",
    "L2 Cache Frequency": "lts__cycles_elapsed.avg.per_second",
}

# label -> {base unit: metric} for labels two metrics share; the unit tells them apart.
LABEL_BY_UNIT: dict[str, dict[str, str]] = {
    "Memory Throughput": {
        "%": "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
        "byte/second": "dram__bytes.sum.per_second",
    },
    "L1/TEX Cache Bandwidth": {"byte/second": "l1tex__t_bytes.sum.per_second"},
    "L2 Cache Bandwidth": {"byte/second": "lts__t_bytes.sum.per_second"},
}

# (body item label, label) -> metric, for the pipe-utilization charts of Compute Workload Analysis, whose bar
# labels ("FMA", "Tensor (All)") repeat in two charts that differ only in what they count.
_ACTIVE = "Pipe Utilization (% of active cycles)"
_INST = "Pipe Utilization (% of peak instructions executed)"
LABEL_IN_BODY: dict[tuple[str, str], str] = {
    **{(_ACTIVE, label): f"sm__pipe_{pipe}_cycles_active.avg.pct_of_peak_sustained_active" for label, pipe in (
        ("FMA", "fma"), ("ALU", "alu"), ("FP64", "fp64"), ("Shared (FP16+Tensor)", "shared"),
        ("Shared (FP64+FP16+Tensor)", "shared"), ("Tensor (All)", "tensor"), ("Tensor (FP)", "tensor_op_hmma"),
        ("Tensor (INT)", "tensor_op_imma"), ("Tensor (DP)", "tensor_op_dmma"), ("TC", "tc"), ("TMA", "tma"))},
    **{(_INST, label): f"sm__inst_executed_pipe_{pipe}.avg.pct_of_peak_sustained_active" for label, pipe in (
        ("LSU", "lsu"), ("FMA", "fma"), ("ALU", "alu"), ("ADU", "adu"), ("CBU", "cbu"), ("TEX", "tex"),
        ("FP16", "fp16"), ("FP64", "fp64"), ("Uniform", "uniform"), ("XU", "xu"), ("Tensor (FP)", "tensor_op_hmma"),
        ("Tensor (INT)", "tensor_op_imma"), ("Tensor (DP)", "tensor_op_dmma"), ("Tensor (Warp Group)", "tensor_op_gmma"),
        ("TC", "tc"), ("TMA", "tma"))},
}

# Section display name (CSV metric rows) -> section identifier (CSV rule rows, ncu_report), as the reports name them.
SECTION_IDS: dict[str, str] = {
    "GPU Speed Of Light Throughput": "SpeedOfLight",
    "GPU Speed Of Light": "SpeedOfLight",
    "GPU Speed Of Light Roofline Chart": "SpeedOfLight_RooflineChart",
    "GPU Speed Of Light Hierarchical Roofline Chart (Single Precision)": "SpeedOfLight_HierarchicalSingleRooflineChart",
    "GPU Speed Of Light Hierarchical Roofline Chart (Double Precision)": "SpeedOfLight_HierarchicalDoubleRooflineChart",
    "GPU Speed Of Light Hierarchical Roofline Chart (Half Precision)": "SpeedOfLight_HierarchicalHalfRooflineChart",
    "GPU Speed Of Light Hierarchical Roofline Chart (Tensor Core)": "SpeedOfLight_HierarchicalTensorRooflineChart",
    "GPU and Memory Workload Distribution": "WorkloadDistribution",
    "Compute Workload Analysis": "ComputeWorkloadAnalysis",
    "Instruction Statistics": "InstructionStats",
    "Launch Statistics": "LaunchStats",
    "Memory Workload Analysis": "MemoryWorkloadAnalysis",
    "Memory Workload Analysis Chart": "MemoryWorkloadAnalysis_Chart",
    "Memory Workload Analysis Tables": "MemoryWorkloadAnalysis_Tables",
    "NUMA Affinity": "NumaAffinity",
    "NVLink Tables": "Nvlink_Tables",
    "NVLink Topology": "Nvlink_Topology",
    "Occupancy": "Occupancy",
    "PM Sampling": "PmSampling",
    "Scheduler Statistics": "SchedulerStats",
    "Source Counters": "SourceCounters",
    "Warp State Statistics": "WarpStateStats",
}
# What `ncu --metrics a,b` prints as the section of metrics it was asked for by name: not a section.
NOT_A_SECTION = {"Command line profiler metrics"}

_METRIC_NAME = re.compile(r"^(?:[a-z0-9]+__[A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)*|inst_executed|thread_inst_executed(?:_true)?"
                          r"|memory_[a-z0-9_]+|sass__[a-z0-9_]+)$")
_LABEL_AND_NAME = re.compile(r"^(?P<label>.*)\((?P<name>[^()\s]+)\)\s*$")


def looks_like_metric_name(text: str) -> bool:
    """True when ``text`` is spelled like an ncu metric name (``unit__quantity.rollup...``)."""
    return bool(_METRIC_NAME.match(text))


def metric_for_label(label: str, base_unit: str, section: str = "") -> str:
    """The metric name a CSV ``Metric Name`` cell stands for.

    Accepts a metric name (``--print-metric-name name``), ``Label (name)`` (``label-name``) or a label.
    ``section`` may be ``"<section>/<body item label>"`` (``--print-details body|all``). A label this table
    does not know becomes ``label:<section>/<label>`` so it is kept, but never mistaken
    for a metric name.
    """
    text = label.strip()
    if looks_like_metric_name(text):
        return text
    both = _LABEL_AND_NAME.match(text)
    if both and looks_like_metric_name(both.group("name")):
        return both.group("name")
    body = section.split("/", 1)[1] if "/" in section else ""
    if (body, text) in LABEL_IN_BODY:
        return LABEL_IN_BODY[(body, text)]
    if text in LABEL_BY_UNIT:
        by_unit = LABEL_BY_UNIT[text]
        if base_unit in by_unit:
            return by_unit[base_unit]
    elif text in LABEL_TO_METRIC:
        return LABEL_TO_METRIC[text]
    return f"label:{section}/{text}" if section else f"label:{text}"


__all__ = ["LABEL_TO_METRIC", "LABEL_BY_UNIT", "LABEL_IN_BODY", "SECTION_IDS", "NOT_A_SECTION", "metric_for_label", "looks_like_metric_name"]
