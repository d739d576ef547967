"""The tables Nsight Compute fills: the profiled kernels, their metrics (long form, base units) and Nsight Compute's
own rule verdicts."""

from __future__ import annotations

from nsight_advisor.schema.columns import CAPTURE_ID, Table, cols

NCU_TABLES: tuple[Table, ...] = (
    Table(
        "ncu_kernels",
        "One row per kernel profiled by Nsight Compute.",
        cols(
            CAPTURE_ID,
            ("kernel_id", "INTEGER", "Index of the profiled kernel within its capture (0-based, in report order)."),
            ("launch_id", "BIGINT", "Nsight Compute's own ID for the result, when recorded."),
            ("name", "VARCHAR", "Demangled name."),
            ("short_name", "VARCHAR", "Base function name."),
            ("mangled_name", "VARCHAR", "Mangled name, when recorded."),
            ("grid_x", "INTEGER", "Grid size in blocks, x."),
            ("grid_y", "INTEGER", "Grid size in blocks, y."),
            ("grid_z", "INTEGER", "Grid size in blocks, z."),
            ("block_x", "INTEGER", "Block size in threads, x."),
            ("block_y", "INTEGER", "Block size in threads, y."),
            ("block_z", "INTEGER", "Block size in threads, z."),
            ("blocks", "BIGINT", "Blocks in the grid."),
            ("threads_per_block", "INTEGER", "Threads per block."),
            ("registers_per_thread", "INTEGER", "Registers per thread."),
            ("shared_mem_bytes", "BIGINT", "Static + dynamic shared memory per block, bytes."),
            ("device_name", "VARCHAR", "GPU name."),
            ("compute_capability", "VARCHAR", "'major.minor'."),
            ("sm_count", "INTEGER", "SMs of the GPU."),
            ("duration_ns", "DOUBLE", "gpu__time_duration.sum, ns."),
            ("pid", "BIGINT", "Process id, when recorded."),
            ("stream_id", "BIGINT", "Stream, when recorded."),
            ("sections", "VARCHAR", "Comma-separated section identifiers present for this kernel."),
        ),
    ),
    Table(
        "ncu_metrics",
        "Every metric of every profiled kernel, long form, values in base units.",
        cols(
            CAPTURE_ID,
            ("kernel_id", "INTEGER", "ncu_kernels.kernel_id."),
            ("metric", "VARCHAR", "Metric name, e.g. dram__throughput.avg.pct_of_peak_sustained_elapsed."),
            ("value", "DOUBLE", "Numeric value in base units (ns, bytes, bytes/s, %, counts); NULL when not numeric."),
            ("unit", "VARCHAR", "Base unit after conversion: ns, byte, byte/second, %, cycle, ..., or '' for counts."),
            ("text_value", "VARCHAR", "Value as text when the metric is a string, else NULL."),
        ),
    ),
    Table(
        "ncu_rule_results",
        "Nsight Compute's own rule verdicts stored in the report or CSV.",
        cols(
            CAPTURE_ID,
            ("kernel_id", "INTEGER", "ncu_kernels.kernel_id."),
            ("section", "VARCHAR", "Section identifier, e.g. LaunchStats, Occupancy, SpeedOfLight."),
            ("rule_id", "VARCHAR", "Rule identifier, e.g. LaunchConfiguration, SOLBottleneck."),
            ("title", "VARCHAR", "Short title of the message, e.g. 'Small Grid'."),
            ("result_type", "VARCHAR", "ok, info, warning, error or optimization."),
            ("message", "VARCHAR", "Message text as Nsight Compute wrote it (shown, never rendered as markup)."),
            ("estimated_speedup_pct", "DOUBLE", "Estimated speedup in percent (2023.2 and newer), or NULL."),
            ("speedup_type", "VARCHAR", "local or global, or NULL."),
            ("focus_metrics", "VARCHAR", "Comma-separated focus metric names, or NULL."),
        ),
    ),
)
