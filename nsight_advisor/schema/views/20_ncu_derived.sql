-- Roofline numbers per Nsight Compute kernel, and the link from ncu kernels to Nsight Systems timeline kernels.
-- Reads only normalized tables (ncu_kernels, ncu_metrics, gpus, kernels, captures). Every value is NULL when the
-- capture lacks its inputs: capture_missing then names the --section that collects them (data='ncu_metrics:<metric>').
-- No semicolons inside this file except between statements (the loader splits on them).

-- One row per (capture_id, kernel_id) with the metrics the derived views need, pivoted from ncu_metrics.
-- Each column is the value of the metric named in its FILTER, in base units (% / Hz / bytes / bytes/s / counts),
-- *_per_cycle columns are per elapsed SMSP cycle, *_peak_per_cycle per SM cycle, NULL when not collected.
create or replace view ncu_kernel_inputs as
with m as (
    select capture_id, kernel_id, metric, value
    from ncu_metrics
    where value is not null
),
pivoted as (
    select
        capture_id,
        kernel_id,
        max(value) filter (where metric = 'sm__throughput.avg.pct_of_peak_sustained_elapsed') as sm_throughput_pct,
        max(value) filter (where metric = 'gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed') as memory_throughput_pct,
        max(value) filter (where metric = 'gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed') as gpu_dram_throughput_pct,
        max(value) filter (where metric = 'dram__throughput.avg.pct_of_peak_sustained_elapsed') as dram_throughput_alt_pct,
        max(value) filter (where metric = 'sm__warps_active.avg.pct_of_peak_sustained_active') as achieved_occupancy_pct,
        max(value) filter (where metric = 'sm__maximum_warps_per_active_cycle_pct') as theoretical_occupancy_pct,
        max(value) filter (where metric = 'launch__waves_per_multiprocessor') as waves_per_sm,
        max(value) filter (where metric = 'sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_elapsed') as fma_elapsed_pct,
        max(value) filter (where metric = 'sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active') as fma_active_pct,
        max(value) filter (where metric = 'sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active') as fma_inst_active_pct,
        max(value) filter (where metric = 'smsp__cycles_elapsed.avg.per_second') as smsp_hz,
        max(value) filter (where metric = 'sm__cycles_elapsed.avg.per_second') as sm_hz,
        max(value) filter (where metric = 'gpc__cycles_elapsed.avg.per_second') as gpc_hz,
        max(value) filter (where metric = 'smsp__cycles_elapsed.avg') as smsp_cycles,
        max(value) filter (where metric = 'dram__cycles_elapsed.avg.per_second') as dram_hz,
        max(value) filter (where metric = 'dram__bytes.sum') as dram_bytes_sum,
        max(value) filter (where metric = 'dram__bytes_read.sum') as dram_read_bytes,
        max(value) filter (where metric = 'dram__bytes_write.sum') as dram_write_bytes,
        max(value) filter (where metric = 'dram__bytes.sum.per_second') as dram_bytes_per_s,
        max(value) filter (where metric = 'dram__bytes.sum.peak_sustained') as dram_peak_bytes_per_cycle,
        max(value) filter (where metric = 'sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained') as ffma_peak_per_cycle,
        max(value) filter (where metric = 'sm__sass_thread_inst_executed_op_dfma_pred_on.sum.peak_sustained') as dfma_peak_per_cycle,
        max(value) filter (where metric = 'sm__sass_thread_inst_executed_op_hfma_pred_on.sum.peak_sustained') as hfma_peak_per_cycle,
        -- operation counts: sm__ and smsp__ .sum totals (either spelling), else per-cycle rates (roofline sections)
        max(value) filter (where metric in ('sm__sass_thread_inst_executed_op_fadd_pred_on.sum', 'smsp__sass_thread_inst_executed_op_fadd_pred_on.sum')) as fadd,
        max(value) filter (where metric in ('sm__sass_thread_inst_executed_op_fmul_pred_on.sum', 'smsp__sass_thread_inst_executed_op_fmul_pred_on.sum')) as fmul,
        max(value) filter (where metric in ('sm__sass_thread_inst_executed_op_ffma_pred_on.sum', 'smsp__sass_thread_inst_executed_op_ffma_pred_on.sum')) as ffma,
        max(value) filter (where metric in ('sm__sass_thread_inst_executed_op_fadd2_pred_on.sum', 'smsp__sass_thread_inst_executed_op_fadd2_pred_on.sum')) as fadd2,
        max(value) filter (where metric in ('sm__sass_thread_inst_executed_op_fmul2_pred_on.sum', 'smsp__sass_thread_inst_executed_op_fmul2_pred_on.sum')) as fmul2,
        max(value) filter (where metric in ('sm__sass_thread_inst_executed_op_ffma2_pred_on.sum', 'smsp__sass_thread_inst_executed_op_ffma2_pred_on.sum')) as ffma2,
        max(value) filter (where metric in ('sm__sass_thread_inst_executed_op_dadd_pred_on.sum', 'smsp__sass_thread_inst_executed_op_dadd_pred_on.sum')) as dadd,
        max(value) filter (where metric in ('sm__sass_thread_inst_executed_op_dmul_pred_on.sum', 'smsp__sass_thread_inst_executed_op_dmul_pred_on.sum')) as dmul,
        max(value) filter (where metric in ('sm__sass_thread_inst_executed_op_dfma_pred_on.sum', 'smsp__sass_thread_inst_executed_op_dfma_pred_on.sum')) as dfma,
        max(value) filter (where metric in ('sm__sass_thread_inst_executed_op_hadd_pred_on.sum', 'smsp__sass_thread_inst_executed_op_hadd_pred_on.sum')) as hadd,
        max(value) filter (where metric in ('sm__sass_thread_inst_executed_op_hmul_pred_on.sum', 'smsp__sass_thread_inst_executed_op_hmul_pred_on.sum')) as hmul,
        max(value) filter (where metric in ('sm__sass_thread_inst_executed_op_hfma_pred_on.sum', 'smsp__sass_thread_inst_executed_op_hfma_pred_on.sum')) as hfma,
        max(value) filter (where metric = 'smsp__sass_thread_inst_executed_op_fadd_pred_on.sum.per_cycle_elapsed') as fadd_per_cycle,
        max(value) filter (where metric = 'smsp__sass_thread_inst_executed_op_fmul_pred_on.sum.per_cycle_elapsed') as fmul_per_cycle,
        max(value) filter (where metric = 'smsp__sass_thread_inst_executed_op_ffma_pred_on.sum.per_cycle_elapsed') as ffma_per_cycle,
        max(value) filter (where metric = 'smsp__sass_thread_inst_executed_op_fadd2_pred_on.sum.per_cycle_elapsed') as fadd2_per_cycle,
        max(value) filter (where metric = 'smsp__sass_thread_inst_executed_op_fmul2_pred_on.sum.per_cycle_elapsed') as fmul2_per_cycle,
        max(value) filter (where metric = 'smsp__sass_thread_inst_executed_op_ffma2_pred_on.sum.per_cycle_elapsed') as ffma2_per_cycle,
        max(value) filter (where metric = 'smsp__sass_thread_inst_executed_op_dadd_pred_on.sum.per_cycle_elapsed') as dadd_per_cycle,
        max(value) filter (where metric = 'smsp__sass_thread_inst_executed_op_dmul_pred_on.sum.per_cycle_elapsed') as dmul_per_cycle,
        max(value) filter (where metric = 'smsp__sass_thread_inst_executed_op_dfma_pred_on.sum.per_cycle_elapsed') as dfma_per_cycle,
        max(value) filter (where metric = 'smsp__sass_thread_inst_executed_op_hadd_pred_on.sum.per_cycle_elapsed') as hadd_per_cycle,
        max(value) filter (where metric = 'smsp__sass_thread_inst_executed_op_hmul_pred_on.sum.per_cycle_elapsed') as hmul_per_cycle,
        max(value) filter (where metric = 'smsp__sass_thread_inst_executed_op_hfma_pred_on.sum.per_cycle_elapsed') as hfma_per_cycle
    from m
    group by capture_id, kernel_id
),
-- Tensor-pipe busy %: the metric names differ by architecture (Turing-Hopper sm__pipe_tensor_cycles_active,
-- Ada 2025+ ..._v2, Blackwell sm__pipe_tc_cycles_active and subpipes), so take the busiest one present,
-- preferring % of elapsed cycles over % of active cycles, and on ties the name listed first here.
tensor_names (metric, elapsed, prio) as (
    values
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
tensor as (
    select m.capture_id, m.kernel_id,
           first(m.value order by t.elapsed desc, m.value desc, t.prio) as pct,
           first(m.metric order by t.elapsed desc, m.value desc, t.prio) as metric
    from m
    join tensor_names t using (metric)
    group by m.capture_id, m.kernel_id
)
select
    p.*,
    t.pct as tensor_pipe_pct,
    t.metric as tensor_pipe_metric
from pivoted p
left join tensor t using (capture_id, kernel_id);

create or replace view ncu_kernel_summary as
with k as (
    select
        k.capture_id, k.kernel_id, k.name, k.short_name, k.device_name, k.compute_capability, k.sm_count,
        k.grid_x, k.grid_y, k.grid_z, k.block_x, k.block_y, k.block_z, k.blocks, k.threads_per_block,
        k.registers_per_thread, k.duration_ns,
        i.*  exclude (capture_id, kernel_id),
        coalesce(i.smsp_hz, i.sm_hz, i.gpc_hz) as sm_clock_hz
    from ncu_kernels k
    left join ncu_kernel_inputs i using (capture_id, kernel_id)
),
g as (
    select capture_id, name,
           any_value(peak_fp32_flops_per_s) as datasheet_fp32_flops_per_s,
           any_value(memory_bandwidth_bytes_per_s) as datasheet_dram_bytes_per_s
    from gpus
    group by capture_id, name
),
counts as (
    select
        k.*,
        -- elapsed SMSP cycles turn per-cycle rates into counts
        coalesce(k.smsp_cycles, k.sm_clock_hz * k.duration_ns * 1e-9) as elapsed_cycles,
        coalesce(
            k.fadd + k.fmul + 2 * k.ffma + 2 * coalesce(k.fadd2, 0) + 2 * coalesce(k.fmul2, 0) + 4 * coalesce(k.ffma2, 0),
            (k.fadd_per_cycle + k.fmul_per_cycle + 2 * k.ffma_per_cycle + 2 * coalesce(k.fadd2_per_cycle, 0)
                + 2 * coalesce(k.fmul2_per_cycle, 0) + 4 * coalesce(k.ffma2_per_cycle, 0))
                * coalesce(k.smsp_cycles, k.sm_clock_hz * k.duration_ns * 1e-9)) as flops_fp32,
        coalesce(
            k.dadd + k.dmul + 2 * k.dfma,
            (k.dadd_per_cycle + k.dmul_per_cycle + 2 * k.dfma_per_cycle)
                * coalesce(k.smsp_cycles, k.sm_clock_hz * k.duration_ns * 1e-9)) as flops_fp64,
        coalesce(
            2 * k.hadd + 2 * k.hmul + 4 * k.hfma,
            (2 * k.hadd_per_cycle + 2 * k.hmul_per_cycle + 4 * k.hfma_per_cycle)
                * coalesce(k.smsp_cycles, k.sm_clock_hz * k.duration_ns * 1e-9)) as flops_fp16,
        coalesce(
            k.dram_bytes_sum,
            k.dram_read_bytes + k.dram_write_bytes,
            k.dram_bytes_per_s * k.duration_ns * 1e-9) as dram_bytes,
        2 * k.ffma_peak_per_cycle * k.sm_clock_hz as report_peak_fp32_flops_per_s,
        2 * k.dfma_peak_per_cycle * k.sm_clock_hz as report_peak_fp64_flops_per_s,
        4 * k.hfma_peak_per_cycle * k.sm_clock_hz as report_peak_fp16_flops_per_s,
        k.dram_peak_bytes_per_cycle * k.dram_hz as report_peak_dram_bytes_per_s
    from k
),
rates as (
    select
        c.*,
        c.flops_fp32 / (c.duration_ns * 1e-9) as flops_fp32_per_s,
        c.flops_fp64 / (c.duration_ns * 1e-9) as flops_fp64_per_s,
        c.flops_fp16 / (c.duration_ns * 1e-9) as flops_fp16_per_s,
        coalesce(c.dram_bytes_per_s, c.dram_bytes / (c.duration_ns * 1e-9)) as achieved_dram_bytes_per_s,
        case
            when coalesce(c.flops_fp64, 0) > coalesce(c.flops_fp32, 0) and coalesce(c.flops_fp64, 0) >= coalesce(c.flops_fp16, 0) then 'fp64'
            when coalesce(c.flops_fp16, 0) > coalesce(c.flops_fp32, 0) then 'fp16'
            else 'fp32'
        end as dominant_precision,
        coalesce(c.report_peak_fp32_flops_per_s, g.datasheet_fp32_flops_per_s) as peak_fp32_flops_per_s,
        coalesce(c.report_peak_dram_bytes_per_s, g.datasheet_dram_bytes_per_s) as peak_dram_bytes_per_s,
        case when c.report_peak_fp32_flops_per_s is not null then 'report'
             when g.datasheet_fp32_flops_per_s is not null then 'datasheet' end as peak_flops_source,
        case when c.report_peak_dram_bytes_per_s is not null then 'report'
             when g.datasheet_dram_bytes_per_s is not null then 'datasheet' end as peak_dram_source
    from counts c
    left join g on g.capture_id = c.capture_id and g.name is not distinct from c.device_name
),
roof as (
    select
        r.*,
        case r.dominant_precision when 'fp64' then r.flops_fp64 when 'fp16' then r.flops_fp16 else r.flops_fp32 end as flops,
        case r.dominant_precision when 'fp64' then r.report_peak_fp64_flops_per_s
                                  when 'fp16' then r.report_peak_fp16_flops_per_s
                                  else r.peak_fp32_flops_per_s end as peak_flops_per_s
    from rates r
)
select
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
    coalesce(gpu_dram_throughput_pct, dram_throughput_alt_pct) as dram_throughput_pct,  -- DRAM throughput, % of peak (gpu__dram_throughput, else dram__throughput)
    achieved_occupancy_pct,         -- achieved warps / max warps per SM, % (sm__warps_active.avg.pct_of_peak_sustained_active)
    theoretical_occupancy_pct,      -- occupancy the launch configuration allows, % (sm__maximum_warps_per_active_cycle_pct)
    waves_per_sm,                   -- launch__waves_per_multiprocessor: blocks / (SMs x resident blocks per SM), < 1 means idle SMs
    tensor_pipe_pct,                -- busiest tensor pipe, % of peak (elapsed cycles when recorded, else active cycles)
    tensor_pipe_metric,             -- the metric tensor_pipe_pct came from (its name depends on the architecture)
    coalesce(fma_elapsed_pct, fma_active_pct, fma_inst_active_pct) as fma_pipe_pct,  -- FMA (FP32) pipe busy, %
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
    flops / (duration_ns * 1e-9) as achieved_flops_per_s,  -- FLOP/s of the dominant precision
    flops / nullif(dram_bytes, 0) as arithmetic_intensity_flop_per_byte,  -- FLOPs of the dominant precision per DRAM byte
    peak_flops_per_s,               -- peak FLOP/s of the dominant precision at the profiled clock (FP32 falls back to the datasheet)
    peak_flops_source,              -- 'report' (2 x ffma peak per cycle x SM clock) or 'datasheet' (built-in GPU table)
    peak_fp32_flops_per_s,          -- peak FP32 FLOP/s (report when recorded, else datasheet)
    report_peak_fp64_flops_per_s as peak_fp64_flops_per_s,  -- peak FP64 FLOP/s at the profiled clock, from the report
    peak_dram_bytes_per_s,          -- peak DRAM bandwidth, bytes/s (dram__bytes.sum.peak_sustained x DRAM clock, else datasheet)
    peak_dram_source,               -- 'report' or 'datasheet'
    100 * (flops / (duration_ns * 1e-9)) / nullif(peak_flops_per_s, 0) as pct_of_peak_flops,  -- achieved / peak FLOP/s of the dominant precision, %
    100 * achieved_dram_bytes_per_s / nullif(peak_dram_bytes_per_s, 0) as pct_of_peak_dram_bandwidth,  -- achieved / peak DRAM bandwidth, %
    peak_flops_per_s / nullif(peak_dram_bytes_per_s, 0) as ridge_flop_per_byte,  -- ops:byte ridge point of the GPU: peak FLOP/s / peak bytes/s
    case
        when flops is null or dram_bytes is null or peak_flops_per_s is null or peak_dram_bytes_per_s is null then null
        when dram_bytes = 0 then 'compute'
        when flops / dram_bytes < peak_flops_per_s / peak_dram_bytes_per_s then 'memory'
        else 'compute'
    end as roofline_side,           -- side of the ridge the kernel's intensity sits on: 'memory' (left) or 'compute' (right)
    case
        when sm_throughput_pct is null or memory_throughput_pct is null then null
        when sm_throughput_pct < 60 and memory_throughput_pct < 60 then 'latency'
        when memory_throughput_pct >= sm_throughput_pct then 'memory'
        else 'compute'
    end as bound                    -- from the SOL throughputs as Nsight Compute's bottleneck rule judges them: both < 60 % = 'latency', else the larger one
from roof;

-- Nsight Compute kernels matched to Nsight Systems timeline kernels of another capture in the same store, by name
-- (demangled, else short name) and launch configuration (grid and block), with the kernel's share of that timeline.
create or replace view ncu_timeline_match as
with nsys_caps as (
    -- none when the store holds no Nsight Compute kernel: the timeline's kernels are then never read (their
    -- scans below end at once), and a million-kernel capture's rule that reads this view costs 0.05 s, not 0.15
    select capture_id from captures where tool = 'nsys' and exists (select 1 from ncu_kernels)
),
totals as (
    select capture_id, sum(duration_ns) as gpu_kernel_ns
    from kernels
    where capture_id in (select capture_id from nsys_caps)
    group by capture_id
),
timeline as (
    -- only kernels a report profiled (by name or base name) are grouped: a store without reports costs nothing
    select capture_id, name, short_name, grid_x, grid_y, grid_z, block_x, block_y, block_z,
           count(*) as launches, sum(duration_ns) as total_ns, median(duration_ns) as median_ns
    from kernels
    where capture_id in (select capture_id from nsys_caps)
      and (name in (select name from ncu_kernels) or short_name in (select short_name from ncu_kernels))
    group by all
),
pairs as (
    select
        n.capture_id as ncu_capture_id, n.kernel_id, n.name as ncu_name,
        t.capture_id as nsys_capture_id, t.name as timeline_name, t.launches, t.total_ns, t.median_ns,
        n.duration_ns as ncu_duration_ns,
        case when n.name = t.name then 'name' else 'short_name' end as matched_by
    from ncu_kernels n
    join timeline t
      on (n.name = t.name or (n.short_name = t.short_name and n.short_name is not null))
     and n.grid_x = t.grid_x and n.grid_y = t.grid_y and n.grid_z = t.grid_z
     and n.block_x = t.block_x and n.block_y = t.block_y and n.block_z = t.block_z
),
best as (
    -- an exact name match beats a short-name match for the same ncu kernel and timeline
    select * from pairs
    qualify rank() over (partition by ncu_capture_id, kernel_id, nsys_capture_id
                         order by case matched_by when 'name' then 0 else 1 end) = 1
)
select
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
    100.0 * b.total_ns / nullif(t.gpu_kernel_ns, 0) as timeline_share_pct  -- share of all kernel time in that timeline, %
from best b
join totals t on t.capture_id = b.nsys_capture_id
