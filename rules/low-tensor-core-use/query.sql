-- GEMM/convolution kernels that run on the SIMT FMA pipes instead of tensor cores.
-- Timeline: the kernel name must say so (kernel_classes.math_path = 'simt'). Nsight Compute: the counters say so
-- (ncu_kernel_classes: FMA pipe the busiest, else the name), or a GEMM/convolution-named kernel shows the tensor pipe
-- idle while the FMA pipe is busy; class_basis says which. One row per kernel name,
-- with its share of the capture's kernel time (the judgement), the share all such kernels take together, and its
-- recoverable time.
with timeline_total as (
    select sum(total_ns) as total_ns from kernel_configs where capture_id = $capture_id
),
-- Launches are summed per kernel name and device first (from their sums per configuration, kernel_configs) and each
-- name is classified once (a training capture launches a few hundred names millions of times). The classifiers read
-- any_value() of the group's name rather than the group key, so that the optimizer cannot push the class filter below
-- the sums and run them on every launch.
per_name as (
    select
        capture_id,
        device_id,
        name,
        short_name,
        na_kernel_category(any_value(name), any_value(short_name)) as category,
        na_math_path(any_value(name)) as math_path,
        na_precision(any_value(name)) as precision,
        sum(launches)::bigint as launches,
        sum(total_ns) as duration_ns
    from kernel_configs
    where capture_id = $capture_id
    group by capture_id, device_id, name, short_name
),
timeline as (
    select
        'nsys' as source,
        c.name,
        coalesce(c.short_name, c.name) as short_name,
        c.precision,
        sum(c.launches) as launches,
        sum(c.duration_ns) as duration_ns,
        null::double as tensor_pipe_pct,
        null::double as fma_pipe_pct,
        any_value(g.peak_fp32_flops_per_s) as peak_simt_flops_per_s,
        any_value(coalesce(g.peak_fp16_tensor_flops_per_s, g.peak_tf32_tensor_flops_per_s)) as peak_tensor_flops_per_s,
        'name' as class_basis,
        bool_or(c.precision = 'fp64' and coalesce(list_contains(cap.capabilities, 'fp64-tensor'), false))
            as fp64_on_dmma_gpu
    from per_name c
    left join gpus g on g.capture_id = c.capture_id and g.device_id = c.device_id
    left join gpu_capabilities cap on cap.capture_id = c.capture_id and cap.device_id = c.device_id
    where c.category = 'gemm_conv' and c.math_path = 'simt'
    group by c.name, c.short_name, c.precision
),
ncu_pipes as (
    -- Tensor pipe: the first of the per-architecture names that the report holds (Turing..Hopper, then Blackwell);
    -- FMA pipe: active-cycle utilization. A missing or NaN value stays NULL and proves nothing.
    select
        m.kernel_id,
        max(m.value) filter (where m.metric in (
            'sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active',
            'sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed',
            'sm__inst_executed_pipe_tensor_op_hmma.avg.pct_of_peak_sustained_active',
            'sm__pipe_tc_cycles_active.avg.pct_of_peak_sustained_active',
            'sm__pipe_tensor_cycles_active_v2.avg.pct_of_peak_sustained_active')) as tensor_pipe_pct,
        max(m.value) filter (where m.metric in (
            'sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active',
            'sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_elapsed',
            'sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active')) as fma_pipe_pct
    from ncu_metrics m
    where m.capture_id = $capture_id and isfinite(m.value)
    group by m.kernel_id
),
ncu_gpus as (
    select
        name,
        any_value(peak_fp32_flops_per_s) as peak_simt_flops_per_s,
        any_value(coalesce(peak_fp16_tensor_flops_per_s, peak_tf32_tensor_flops_per_s)) as peak_tensor_flops_per_s,
        bool_or(list_contains(c.capabilities, 'fp64-tensor')) as fp64_tensor
    from gpus
    left join gpu_capabilities c using (capture_id, device_id, name)
    where capture_id = $capture_id
    group by name
),
ncu_total as (
    select sum(duration_ns) as total_ns from ncu_kernels where capture_id = $capture_id and isfinite(duration_ns)
),
profiled as (
    select
        'ncu' as source,
        c.name,
        coalesce(c.short_name, c.name) as short_name,
        c.precision,
        count(*) as launches,
        cast(sum(c.duration_ns) as bigint) as duration_ns,
        max(p.tensor_pipe_pct) as tensor_pipe_pct,
        max(p.fma_pipe_pct) as fma_pipe_pct,
        any_value(g.peak_simt_flops_per_s) as peak_simt_flops_per_s,
        any_value(g.peak_tensor_flops_per_s) as peak_tensor_flops_per_s,
        any_value(c.class_basis) as class_basis,
        bool_or(c.precision = 'fp64' and coalesce(g.fp64_tensor, false)) as fp64_on_dmma_gpu
    from ncu_kernel_classes c
    left join ncu_pipes p on p.kernel_id = c.kernel_id
    left join ncu_gpus g on g.name = c.device_name
    where c.capture_id = $capture_id and isfinite(c.duration_ns)
      and c.category in ('gemm_conv', 'other')
      -- A GEMM classed by its counters must keep the FMA pipe busy: one limited by memory access (esmm's naive
      -- 'basic' at 4% FMA, 99% L1) gains nothing from tensor cores until its access is fixed.
      -- An FP64 GEMM on a GPU with FP64 tensor cores (A100, H100, B200) is the exception: cuBLAS DGEMM runs it on
      -- DMMA with tiled access, which fixes a naive kernel's access and its math path at once.
      and (c.class_basis not like 'counters%' or p.fma_pipe_pct >= $min_fma_pipe_pct
           or (c.precision = 'fp64' and coalesce(g.fp64_tensor, false)))
      and (c.math_path = 'simt'
           or (c.category = 'gemm_conv' and c.math_path = 'unknown'
               and p.tensor_pipe_pct <= $max_tensor_pipe_pct and p.fma_pipe_pct >= $min_fma_pipe_pct))
    group by c.name, c.short_name, c.precision
),
rows_ as (
    select t.*, (select total_ns from timeline_total) as total_ns from timeline t
    union all
    select p.*, (select total_ns from ncu_total) as total_ns from profiled p
),
shares as (
    select
        r.*,
        round(100.0 * sum(r.duration_ns) over (partition by r.source) / nullif(r.total_ns, 0), 2)
            as simt_gemm_share_pct,
        -- Speed-up if the same GEMM ran on tensor cores in 16-bit (the advice): the GPU's FP16 tensor / FP32 SIMT
        -- peak ratio when known, capped by max_speedup (end-to-end gains the mixed-precision guide reports), else
        -- max_speedup itself.
        -- An FP64 GEMM kept in FP64 gains the FP64 tensor-core to FP64 pipe ratio: 2x on A100 (19.5 vs 9.7 TFLOPS)
        -- and H100 (67 vs 34); a naive kernel gains more from cuBLAS, so this is a floor there.
        case when r.fp64_on_dmma_gpu then least(2.0, $max_speedup)
             else least(coalesce(r.peak_tensor_flops_per_s / nullif(r.peak_simt_flops_per_s, 0), $max_speedup),
                        $max_speedup) end
            as assumed_speedup
    from rows_ r
)
select
    short_name,
    source,
    class_basis,
    precision,
    launches,
    duration_ns,
    round(100.0 * duration_ns / nullif(total_ns, 0), 2) as kernel_share_pct,
    simt_gemm_share_pct,
    tensor_pipe_pct,
    fma_pipe_pct,
    assumed_speedup,
    cast(duration_ns * (1 - 1 / assumed_speedup) as bigint) as impact_ns,
    name
from shares
