-- Roofline numbers per Nsight Compute kernel, and the link from ncu kernels to Nsight Systems timeline kernels.
-- Reads only normalized tables (ncu_kernels, ncu_metrics, gpus, kernels, captures). Every value is NULL when the
-- capture lacks its inputs: capture_missing then names the --section that collects them (data='ncu_metrics:<metric>').
-- No semicolons inside this file except between statements (the loader splits on them).

-- One row per (capture_id, kernel_id) with the metrics the derived views need, pivoted from ncu_metrics.
-- Each column is the value of the metric named in its FILTER, in base units (% / Hz / bytes / bytes/s / counts),
-- *_per_cycle columns are per elapsed SMSP cycle, *_peak_per_cycle per SM cycle, NULL when not collected.
CREATE OR REPLACE VIEW ncu_kernel_inputs AS
WITH m AS (
    SELECT capture_id, kernel_id, metric, value
    FROM ncu_metrics
    WHERE value IS NOT NULL
),
pivoted AS (
    SELECT
        capture_id,
        kernel_id,
        max(value) FILTER (WHERE metric = 'sm__throughput.avg.pct_of_peak_sustained_elapsed') AS sm_throughput_pct,
        max(value) FILTER (WHERE metric = 'gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed') AS memory_throughput_pct,
        max(value) FILTER (WHERE metric = 'gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed') AS gpu_dram_throughput_pct,
        max(value) FILTER (WHERE metric = 'dram__throughput.avg.pct_of_peak_sustained_elapsed') AS dram_throughput_alt_pct,
        max(value) FILTER (WHERE metric = 'sm__warps_active.avg.pct_of_peak_sustained_active') AS achieved_occupancy_pct,
        max(value) FILTER (WHERE metric = 'sm__maximum_warps_per_active_cycle_pct') AS theoretical_occupancy_pct,
        max(value) FILTER (WHERE metric = 'launch__waves_per_multiprocessor') AS waves_per_sm,
        max(value) FILTER (WHERE metric = 'sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_elapsed') AS fma_elapsed_pct,
        max(value) FILTER (WHERE metric = 'sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active') AS fma_active_pct,
        max(value) FILTER (WHERE metric = 'sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active') AS fma_inst_active_pct,
        max(value) FILTER (WHERE metric = 'smsp__cycles_elapsed.avg.per_second') AS smsp_hz,
        max(value) FILTER (WHERE metric = 'sm__cycles_elapsed.avg.per_second') AS sm_hz,
        max(value) FILTER (WHERE metric = 'gpc__cycles_elapsed.avg.per_second') AS gpc_hz,
        max(value) FILTER (WHERE metric = 'smsp__cycles_elapsed.avg') AS smsp_cycles,
        max(value) FILTER (WHERE metric = 'dram__cycles_elapsed.avg.per_second') AS dram_hz,
        max(value) FILTER (WHERE metric = 'dram__bytes.sum') AS dram_bytes_sum,
        max(value) FILTER (WHERE metric = 'dram__bytes_read.sum') AS dram_read_bytes,
        max(value) FILTER (WHERE metric = 'dram__bytes_write.sum') AS dram_write_bytes,
        max(value) FILTER (WHERE metric = 'dram__bytes.sum.per_second') AS dram_bytes_per_s,
        max(value) FILTER (WHERE metric = 'dram__bytes.sum.peak_sustained') AS dram_peak_bytes_per_cycle,
        max(value) FILTER (WHERE metric = 'sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained') AS ffma_peak_per_cycle,
        max(value) FILTER (WHERE metric = 'sm__sass_thread_inst_executed_op_dfma_pred_on.sum.peak_sustained') AS dfma_peak_per_cycle,
        max(value) FILTER (WHERE metric = 'sm__sass_thread_inst_executed_op_hfma_pred_on.sum.peak_sustained') AS hfma_peak_per_cycle,
        -- operation counts: sm__ and smsp__ .sum totals (either spelling), else per-cycle rates (roofline sections)
        max(value) FILTER (WHERE metric IN ('sm__sass_thread_inst_executed_op_fadd_pred_on.sum', 'smsp__sass_thread_inst_executed_op_fadd_pred_on.sum')) AS fadd,
        max(value) FILTER (WHERE metric IN ('sm__sass_thread_inst_executed_op_fmul_pred_on.sum', 'smsp__sass_thread_inst_executed_op_fmul_pred_on.sum')) AS fmul,
        max(value) FILTER (WHERE metric IN ('sm__sass_thread_inst_executed_op_ffma_pred_on.sum', 'smsp__sass_thread_inst_executed_op_ffma_pred_on.sum')) AS ffma,
        max(value) FILTER (WHERE metric IN ('sm__sass_thread_inst_executed_op_fadd2_pred_on.sum', 'smsp__sass_thread_inst_executed_op_fadd2_pred_on.sum')) AS fadd2,
        max(value) FILTER (WHERE metric IN ('sm__sass_thread_inst_executed_op_fmul2_pred_on.sum', 'smsp__sass_thread_inst_executed_op_fmul2_pred_on.sum')) AS fmul2,
        max(value) FILTER (WHERE metric IN ('sm__sass_thread_inst_executed_op_ffma2_pred_on.sum', 'smsp__sass_thread_inst_executed_op_ffma2_pred_on.sum')) AS ffma2,
        max(value) FILTER (WHERE metric IN ('sm__sass_thread_inst_executed_op_dadd_pred_on.sum', 'smsp__sass_thread_inst_executed_op_dadd_pred_on.sum')) AS dadd,
        max(value) FILTER (WHERE metric IN ('sm__sass_thread_inst_executed_op_dmul_pred_on.sum', 'smsp__sass_thread_inst_executed_op_dmul_pred_on.sum')) AS dmul,
        max(value) FILTER (WHERE metric IN ('sm__sass_thread_inst_executed_op_dfma_pred_on.sum', 'smsp__sass_thread_inst_executed_op_dfma_pred_on.sum')) AS dfma,
        max(value) FILTER (WHERE metric IN ('sm__sass_thread_inst_executed_op_hadd_pred_on.sum', 'smsp__sass_thread_inst_executed_op_hadd_pred_on.sum')) AS hadd,
        max(value) FILTER (WHERE metric IN ('sm__sass_thread_inst_executed_op_hmul_pred_on.sum', 'smsp__sass_thread_inst_executed_op_hmul_pred_on.sum')) AS hmul,
        max(value) FILTER (WHERE metric IN ('sm__sass_thread_inst_executed_op_hfma_pred_on.sum', 'smsp__sass_thread_inst_executed_op_hfma_pred_on.sum')) AS hfma,
        max(value) FILTER (WHERE metric = 'smsp__sass_thread_inst_executed_op_fadd_pred_on.sum.per_cycle_elapsed') AS fadd_per_cycle,
        max(value) FILTER (WHERE metric = 'smsp__sass_thread_inst_executed_op_fmul_pred_on.sum.per_cycle_elapsed') AS fmul_per_cycle,
        max(value) FILTER (WHERE metric = 'smsp__sass_thread_inst_executed_op_ffma_pred_on.sum.per_cycle_elapsed') AS ffma_per_cycle,
        max(value) FILTER (WHERE metric = 'smsp__sass_thread_inst_executed_op_fadd2_pred_on.sum.per_cycle_elapsed') AS fadd2_per_cycle,
        max(value) FILTER (WHERE metric = 'smsp__sass_thread_inst_executed_op_fmul2_pred_on.sum.per_cycle_elapsed') AS fmul2_per_cycle,
        max(value) FILTER (WHERE metric = 'smsp__sass_thread_inst_executed_op_ffma2_pred_on.sum.per_cycle_elapsed') AS ffma2_per_cycle,
        max(value) FILTER (WHERE metric = 'smsp__sass_thread_inst_executed_op_dadd_pred_on.sum.per_cycle_elapsed') AS dadd_per_cycle,
        max(value) FILTER (WHERE metric = 'smsp__sass_thread_inst_executed_op_dmul_pred_on.sum.per_cycle_elapsed') AS dmul_per_cycle,
        max(value) FILTER (WHERE metric = 'smsp__sass_thread_inst_executed_op_dfma_pred_on.sum.per_cycle_elapsed') AS dfma_per_cycle,
        max(value) FILTER (WHERE metric = 'smsp__sass_thread_inst_executed_op_hadd_pred_on.sum.per_cycle_elapsed') AS hadd_per_cycle,
        max(value) FILTER (WHERE metric = 'smsp__sass_thread_inst_executed_op_hmul_pred_on.sum.per_cycle_elapsed') AS hmul_per_cycle,
        max(value) FILTER (WHERE metric = 'smsp__sass_thread_inst_executed_op_hfma_pred_on.sum.per_cycle_elapsed') AS hfma_per_cycle
    FROM m
    GROUP BY capture_id, kernel_id
),
-- Tensor-pipe busy %: the metric names differ by architecture (Turing-Hopper sm__pipe_tensor_cycles_active,
-- Ada 2025+ ..._v2, Blackwell sm__pipe_tc_cycles_active and subpipes), so take the busiest one present,
-- preferring % of elapsed cycles over % of active cycles, and on ties the name listed first here.
tensor_names (metric, elapsed, prio) AS (
    VALUES
        ('sm__pipe_tc_cycles_active.avg.pct_of_peak_sustained_elapsed', true, 0),
        ('sm__pipe_tensor_cycles_active_v2.avg.pct_of_peak_sustained_elapsed', true, 1),
        ('sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed', true, 2),
        ('sm__pipe_tensor_subpipe_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed', true, 3),
        ('sm__pipe_tensor_op_hmma_cycles_active_v2.avg.pct_of_peak_sustained_elapsed', true, 4),
        ('sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed', true, 5),
        ('sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_elapsed', true, 6),
        ('sm__inst_executed_pipe_tensor_op_gmma.avg.pct_of_peak_sustained_elapsed', true, 7),
        ('sm__inst_executed_pipe_tensor_op_hmma.avg.pct_of_peak_sustained_elapsed', true, 8),
        ('sm__pipe_tc_cycles_active.avg.pct_of_peak_sustained_active', false, 0),
        ('sm__pipe_tensor_cycles_active_v2.avg.pct_of_peak_sustained_active', false, 1),
        ('sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active', false, 2),
        ('sm__pipe_tensor_subpipe_hmma_cycles_active.avg.pct_of_peak_sustained_active', false, 3),
        ('sm__pipe_tensor_op_hmma_cycles_active_v2.avg.pct_of_peak_sustained_active', false, 4),
        ('sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active', false, 5),
        ('sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active', false, 6),
        ('sm__inst_executed_pipe_tensor_op_gmma.avg.pct_of_peak_sustained_active', false, 7),
        ('sm__inst_executed_pipe_tensor_op_hmma.avg.pct_of_peak_sustained_active', false, 8)
),
tensor AS (
    SELECT m.capture_id, m.kernel_id,
           first(m.value ORDER BY t.elapsed DESC, m.value DESC, t.prio) AS pct,
           first(m.metric ORDER BY t.elapsed DESC, m.value DESC, t.prio) AS metric
    FROM m
    JOIN tensor_names t USING (metric)
    GROUP BY m.capture_id, m.kernel_id
)
SELECT
    p.*,
    t.pct AS tensor_pipe_pct,
    t.metric AS tensor_pipe_metric
FROM pivoted p
LEFT JOIN tensor t USING (capture_id, kernel_id);

CREATE OR REPLACE VIEW ncu_kernel_summary AS
WITH k AS (
    SELECT
        k.capture_id, k.kernel_id, k.name, k.short_name, k.device_name, k.compute_capability, k.sm_count,
        k.grid_x, k.grid_y, k.grid_z, k.block_x, k.block_y, k.block_z, k.blocks, k.threads_per_block,
        k.registers_per_thread, k.duration_ns,
        i.*  EXCLUDE (capture_id, kernel_id),
        coalesce(i.smsp_hz, i.sm_hz, i.gpc_hz) AS sm_clock_hz
    FROM ncu_kernels k
    LEFT JOIN ncu_kernel_inputs i USING (capture_id, kernel_id)
),
g AS (
    SELECT capture_id, name,
           any_value(peak_fp32_flops_per_s) AS datasheet_fp32_flops_per_s,
           any_value(memory_bandwidth_bytes_per_s) AS datasheet_dram_bytes_per_s
    FROM gpus
    GROUP BY capture_id, name
),
counts AS (
    SELECT
        k.*,
        -- elapsed SMSP cycles turn per-cycle rates into counts
        coalesce(k.smsp_cycles, k.sm_clock_hz * k.duration_ns * 1e-9) AS elapsed_cycles,
        coalesce(
            k.fadd + k.fmul + 2 * k.ffma + 2 * coalesce(k.fadd2, 0) + 2 * coalesce(k.fmul2, 0) + 4 * coalesce(k.ffma2, 0),
            (k.fadd_per_cycle + k.fmul_per_cycle + 2 * k.ffma_per_cycle + 2 * coalesce(k.fadd2_per_cycle, 0)
                + 2 * coalesce(k.fmul2_per_cycle, 0) + 4 * coalesce(k.ffma2_per_cycle, 0))
                * coalesce(k.smsp_cycles, k.sm_clock_hz * k.duration_ns * 1e-9)) AS flops_fp32,
        coalesce(
            k.dadd + k.dmul + 2 * k.dfma,
            (k.dadd_per_cycle + k.dmul_per_cycle + 2 * k.dfma_per_cycle)
                * coalesce(k.smsp_cycles, k.sm_clock_hz * k.duration_ns * 1e-9)) AS flops_fp64,
        coalesce(
            2 * k.hadd + 2 * k.hmul + 4 * k.hfma,
            (2 * k.hadd_per_cycle + 2 * k.hmul_per_cycle + 4 * k.hfma_per_cycle)
                * coalesce(k.smsp_cycles, k.sm_clock_hz * k.duration_ns * 1e-9)) AS flops_fp16,
        coalesce(
            k.dram_bytes_sum,
            k.dram_read_bytes + k.dram_write_bytes,
            k.dram_bytes_per_s * k.duration_ns * 1e-9) AS dram_bytes,
        2 * k.ffma_peak_per_cycle * k.sm_clock_hz AS report_peak_fp32_flops_per_s,
        2 * k.dfma_peak_per_cycle * k.sm_clock_hz AS report_peak_fp64_flops_per_s,
        4 * k.hfma_peak_per_cycle * k.sm_clock_hz AS report_peak_fp16_flops_per_s,
        k.dram_peak_bytes_per_cycle * k.dram_hz AS report_peak_dram_bytes_per_s
    FROM k
),
rates AS (
    SELECT
        c.*,
        c.flops_fp32 / (c.duration_ns * 1e-9) AS flops_fp32_per_s,
        c.flops_fp64 / (c.duration_ns * 1e-9) AS flops_fp64_per_s,
        c.flops_fp16 / (c.duration_ns * 1e-9) AS flops_fp16_per_s,
        coalesce(c.dram_bytes_per_s, c.dram_bytes / (c.duration_ns * 1e-9)) AS achieved_dram_bytes_per_s,
        CASE
            WHEN coalesce(c.flops_fp64, 0) > coalesce(c.flops_fp32, 0) AND coalesce(c.flops_fp64, 0) >= coalesce(c.flops_fp16, 0) THEN 'fp64'
            WHEN coalesce(c.flops_fp16, 0) > coalesce(c.flops_fp32, 0) THEN 'fp16'
            ELSE 'fp32'
        END AS dominant_precision,
        coalesce(c.report_peak_fp32_flops_per_s, g.datasheet_fp32_flops_per_s) AS peak_fp32_flops_per_s,
        coalesce(c.report_peak_dram_bytes_per_s, g.datasheet_dram_bytes_per_s) AS peak_dram_bytes_per_s,
        CASE WHEN c.report_peak_fp32_flops_per_s IS NOT NULL THEN 'report'
             WHEN g.datasheet_fp32_flops_per_s IS NOT NULL THEN 'datasheet' END AS peak_flops_source,
        CASE WHEN c.report_peak_dram_bytes_per_s IS NOT NULL THEN 'report'
             WHEN g.datasheet_dram_bytes_per_s IS NOT NULL THEN 'datasheet' END AS peak_dram_source
    FROM counts c
    LEFT JOIN g ON g.capture_id = c.capture_id AND g.name IS NOT DISTINCT FROM c.device_name
),
roof AS (
    SELECT
        r.*,
        CASE r.dominant_precision WHEN 'fp64' THEN r.flops_fp64 WHEN 'fp16' THEN r.flops_fp16 ELSE r.flops_fp32 END AS flops,
        CASE r.dominant_precision WHEN 'fp64' THEN r.report_peak_fp64_flops_per_s
                                  WHEN 'fp16' THEN r.report_peak_fp16_flops_per_s
                                  ELSE r.peak_fp32_flops_per_s END AS peak_flops_per_s
    FROM rates r
)
SELECT
    capture_id,                     -- captures.capture_id
    kernel_id,                      -- ncu_kernels.kernel_id
    name,                           -- demangled kernel name
    short_name,                     -- base function name
    device_name,                    -- GPU name as recorded
    compute_capability,             -- 'major.minor'
    sm_count,                       -- SMs available to the launch
    blocks,                         -- blocks in the grid
    threads_per_block,              -- threads per block
    registers_per_thread,           -- registers per thread
    duration_ns,                    -- gpu__time_duration.sum, ns
    sm_throughput_pct,              -- Compute (SM) throughput, % of peak (sm__throughput.avg.pct_of_peak_sustained_elapsed)
    memory_throughput_pct,          -- Memory throughput, % of peak (gpu__compute_memory_throughput...elapsed): busiest memory unit
    coalesce(gpu_dram_throughput_pct, dram_throughput_alt_pct) AS dram_throughput_pct,  -- DRAM throughput, % of peak (gpu__dram_throughput, else dram__throughput)
    achieved_occupancy_pct,         -- achieved warps / max warps per SM, % (sm__warps_active.avg.pct_of_peak_sustained_active)
    theoretical_occupancy_pct,      -- occupancy the launch configuration allows, % (sm__maximum_warps_per_active_cycle_pct)
    waves_per_sm,                   -- launch__waves_per_multiprocessor: blocks / (SMs x resident blocks per SM), < 1 means idle SMs
    tensor_pipe_pct,                -- busiest tensor pipe, % of peak (elapsed cycles when recorded, else active cycles)
    tensor_pipe_metric,             -- the metric tensor_pipe_pct came from (its name depends on the architecture)
    coalesce(fma_elapsed_pct, fma_active_pct, fma_inst_active_pct) AS fma_pipe_pct,  -- FMA (FP32) pipe busy, %
    sm_clock_hz,                    -- SM clock during profiling, Hz
    flops_fp32,                     -- FP32 FLOPs: fadd + fmul + 2 x ffma (+ Blackwell packed fadd2/fmul2/ffma2), from sass thread-op counters
    flops_fp64,                     -- FP64 FLOPs: dadd + dmul + 2 x dfma
    flops_fp16,                     -- FP16 FLOPs: 2 x hadd + 2 x hmul + 4 x hfma (packed half2), tensor-core work not included
    flops_fp32_per_s,               -- achieved FP32 FLOP/s
    flops_fp64_per_s,               -- achieved FP64 FLOP/s
    flops_fp16_per_s,               -- achieved FP16 (non-tensor) FLOP/s
    dominant_precision,             -- precision with the most FLOPs: fp32, fp64 or fp16 (fp32 when none counted)
    dram_bytes,                     -- DRAM bytes read + written (dram__bytes.sum, else read + write, else rate x duration)
    achieved_dram_bytes_per_s,      -- achieved DRAM bandwidth, bytes/s (dram__bytes.sum.per_second)
    flops / (duration_ns * 1e-9) AS achieved_flops_per_s,  -- FLOP/s of the dominant precision
    flops / nullif(dram_bytes, 0) AS arithmetic_intensity_flop_per_byte,  -- FLOPs of the dominant precision per DRAM byte
    peak_flops_per_s,               -- peak FLOP/s of the dominant precision at the profiled clock (FP32 falls back to the datasheet)
    peak_flops_source,              -- 'report' (2 x ffma peak per cycle x SM clock) or 'datasheet' (built-in GPU table)
    peak_fp32_flops_per_s,          -- peak FP32 FLOP/s (report when recorded, else datasheet)
    report_peak_fp64_flops_per_s AS peak_fp64_flops_per_s,  -- peak FP64 FLOP/s at the profiled clock, from the report
    peak_dram_bytes_per_s,          -- peak DRAM bandwidth, bytes/s (dram__bytes.sum.peak_sustained x DRAM clock, else datasheet)
    peak_dram_source,               -- 'report' or 'datasheet'
    100 * (flops / (duration_ns * 1e-9)) / nullif(peak_flops_per_s, 0) AS pct_of_peak_flops,  -- achieved / peak FLOP/s of the dominant precision, %
    100 * achieved_dram_bytes_per_s / nullif(peak_dram_bytes_per_s, 0) AS pct_of_peak_dram_bandwidth,  -- achieved / peak DRAM bandwidth, %
    peak_flops_per_s / nullif(peak_dram_bytes_per_s, 0) AS ridge_flop_per_byte,  -- ops:byte ridge point of the GPU: peak FLOP/s / peak bytes/s
    CASE
        WHEN flops IS NULL OR dram_bytes IS NULL OR peak_flops_per_s IS NULL OR peak_dram_bytes_per_s IS NULL THEN NULL
        WHEN dram_bytes = 0 THEN 'compute'
        WHEN flops / dram_bytes < peak_flops_per_s / peak_dram_bytes_per_s THEN 'memory'
        ELSE 'compute'
    END AS roofline_side,           -- side of the ridge the kernel's intensity sits on: 'memory' (left) or 'compute' (right)
    CASE
        WHEN sm_throughput_pct IS NULL OR memory_throughput_pct IS NULL THEN NULL
        WHEN sm_throughput_pct < 60 AND memory_throughput_pct < 60 THEN 'latency'
        WHEN memory_throughput_pct >= sm_throughput_pct THEN 'memory'
        ELSE 'compute'
    END AS bound                    -- from the SOL throughputs as Nsight Compute's bottleneck rule judges them: both < 60 % = 'latency', else the larger one
FROM roof;

-- Nsight Compute kernels matched to Nsight Systems timeline kernels of another capture in the same store, by name
-- (demangled, else short name) and launch configuration (grid and block), with the kernel's share of that timeline.
CREATE OR REPLACE VIEW ncu_timeline_match AS
WITH nsys_caps AS (
    SELECT capture_id FROM captures WHERE tool = 'nsys'
),
totals AS (
    SELECT capture_id, sum(duration_ns) AS gpu_kernel_ns
    FROM kernels
    WHERE capture_id IN (SELECT capture_id FROM nsys_caps)
    GROUP BY capture_id
),
timeline AS (
    -- only kernels a report profiled (by name or base name) are grouped: a store without reports costs nothing
    SELECT capture_id, name, short_name, grid_x, grid_y, grid_z, block_x, block_y, block_z,
           count(*) AS launches, sum(duration_ns) AS total_ns, median(duration_ns) AS median_ns
    FROM kernels
    WHERE capture_id IN (SELECT capture_id FROM nsys_caps)
      AND (name IN (SELECT name FROM ncu_kernels) OR short_name IN (SELECT short_name FROM ncu_kernels))
    GROUP BY ALL
),
pairs AS (
    SELECT
        n.capture_id AS ncu_capture_id, n.kernel_id, n.name AS ncu_name,
        t.capture_id AS nsys_capture_id, t.name AS timeline_name, t.launches, t.total_ns, t.median_ns,
        n.duration_ns AS ncu_duration_ns,
        CASE WHEN n.name = t.name THEN 'name' ELSE 'short_name' END AS matched_by
    FROM ncu_kernels n
    JOIN timeline t
      ON (n.name = t.name OR (n.short_name = t.short_name AND n.short_name IS NOT NULL))
     AND n.grid_x = t.grid_x AND n.grid_y = t.grid_y AND n.grid_z = t.grid_z
     AND n.block_x = t.block_x AND n.block_y = t.block_y AND n.block_z = t.block_z
),
best AS (
    -- an exact name match beats a short-name match for the same ncu kernel and timeline
    SELECT * FROM pairs
    QUALIFY rank() OVER (PARTITION BY ncu_capture_id, kernel_id, nsys_capture_id
                         ORDER BY CASE matched_by WHEN 'name' THEN 0 ELSE 1 END) = 1
)
SELECT
    b.ncu_capture_id,               -- capture_id of the Nsight Compute capture
    b.kernel_id,                    -- ncu_kernels.kernel_id
    b.ncu_name,                     -- ncu kernel name (demangled)
    b.nsys_capture_id,              -- capture_id of the Nsight Systems capture
    b.timeline_name,                -- kernels.name of the matching timeline kernels
    b.matched_by,                   -- 'name' (demangled names equal) or 'short_name' (base names equal)
    b.launches,                     -- timeline launches with that name and launch configuration
    b.total_ns,                     -- their summed GPU time, ns
    b.median_ns,                    -- their median duration, ns
    b.ncu_duration_ns,              -- duration of the profiled instance, ns (replayed, clocks locked: compare with care)
    100.0 * b.total_ns / nullif(t.gpu_kernel_ns, 0) AS timeline_share_pct  -- share of all kernel time in that timeline, %
FROM best b
JOIN totals t ON t.capture_id = b.nsys_capture_id
