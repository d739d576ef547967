-- Nsight Compute kernels with their class, from counters whenever the report has them, else from the name.
--
-- A hand-written SGEMM is named 'basic' or 'warptiling', and a Hopper GEMM may be named after the model layer: the
-- name says nothing, the pipes do. Counter classes (pipe metrics of the Speed Of Light and Compute Workload sections,
-- present from the 'basic' set on):
--   tensor-core GEMM : the busiest tensor pipe (ncu_kernel_inputs.tensor_pipe_pct) at min 5% of peak: only matrix
--                      instructions (HMMA/IMMA/GMMA) run there
--   SIMT GEMM        : the FMA pipe is the busiest math pipe (at least the ALU pipe), carries at least 35% of the
--                      issue rate (sm__inst_executed, % of peak) so the instruction mix is mostly FMA, is at least 2%
--                      busy, and is busier than DRAM: FMAs reuse data from registers and shared memory, which
--                      elementwise arithmetic (one FADD per loaded element, DRAM far busier) does not. On the real
--                      reports this holds for every esmm_a10g_sgemm kernel and cuBLAS's volta/ampere_sgemm, and for
--                      none of the elementwise, RNG and copy kernels.
--   FP64 GEMM        : the FP64 pipe busiest and busier than DRAM, and a GEMM-like name (na_kernel_category
--                      'gemm_conv': gemm, matmul, matrixMul, ...). FP64 arithmetic with reuse is not only GEMM: a
--                      pairwise-distance or stencil kernel keeps the FP64 pipe as busy, and only the name tells.
-- Attention and communication names keep their category (a FlashAttention kernel uses the tensor pipe too).
-- No semicolons inside this file except between statements (the loader splits on them).
create or replace view ncu_kernel_classes as
with pipes as (
    select
        capture_id, kernel_id,
        max(value) filter (where metric = 'sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_elapsed') as fma_pipe_pct,
        max(value) filter (where metric = 'sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_elapsed') as alu_pipe_pct,
        max(value) filter (where metric = 'sm__pipe_fp64_cycles_active.avg.pct_of_peak_sustained_elapsed') as fp64_pipe_pct,
        max(value) filter (where metric = 'sm__inst_executed.avg.pct_of_peak_sustained_elapsed') as issue_pct,
        max(value) filter (where metric in ('gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed',
                                            'dram__throughput.avg.pct_of_peak_sustained_elapsed')) as dram_pct
    from ncu_metrics
    where metric in ('sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_elapsed',
                     'sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_elapsed',
                     'sm__pipe_fp64_cycles_active.avg.pct_of_peak_sustained_elapsed',
                     'sm__inst_executed.avg.pct_of_peak_sustained_elapsed',
                     'gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed',
                     'dram__throughput.avg.pct_of_peak_sustained_elapsed')
      and isfinite(value)
    group by capture_id, kernel_id
),
c as (
    select
        k.*,
        na_kernel_category(k.name, k.short_name) as name_category,
        na_math_path(k.name) as name_math_path,
        na_precision(k.name) as name_precision,
        p.fma_pipe_pct, p.alu_pipe_pct, p.fp64_pipe_pct, p.issue_pct, p.dram_pct,
        i.tensor_pipe_pct,
        case
            when i.tensor_pipe_pct >= 5 then 'tensor'
            when p.fma_pipe_pct >= 2 and p.fma_pipe_pct >= coalesce(p.alu_pipe_pct, 0)
                 and p.fma_pipe_pct >= coalesce(p.fp64_pipe_pct, 0)
                 and p.fma_pipe_pct >= 0.35 * p.issue_pct and p.fma_pipe_pct > coalesce(p.dram_pct, 0) then 'fma'
            when p.fp64_pipe_pct >= 2 and p.fp64_pipe_pct >= coalesce(p.alu_pipe_pct, 0)
                 and p.fp64_pipe_pct > coalesce(p.fma_pipe_pct, 0) and p.fp64_pipe_pct > coalesce(p.dram_pct, 0)
                 and na_kernel_category(k.name, k.short_name) = 'gemm_conv' then 'fp64'
        end as counter_class
    from ncu_kernels k
    left join pipes p on p.capture_id = k.capture_id and p.kernel_id = k.kernel_id
    left join ncu_kernel_inputs i on i.capture_id = k.capture_id and i.kernel_id = k.kernel_id
)
select
    c.* exclude (name_category, name_math_path, name_precision, counter_class),
    case
        when c.name_category in ('attention', 'communication') then c.name_category
        when c.counter_class is not null then 'gemm_conv'
        else c.name_category
    end as category,               -- gemm_conv | attention | communication | reduction_norm | copy | elementwise | other
    case c.counter_class
        when 'tensor' then 'tensor_core'
        when 'fma' then 'simt'
        when 'fp64' then 'simt'
        else c.name_math_path
    end as math_path,              -- tensor_core | simt | unknown
    case
        when c.counter_class = 'fp64' then 'fp64'
        when c.counter_class = 'fma' then coalesce(c.name_precision, 'fp32')
        else c.name_precision
    end as precision,              -- fp8 | bf16 | tf32 | fp16 | fp32 | fp64 | NULL
    case
        when c.counter_class = 'tensor' then 'counters: tensor pipe ' || round(c.tensor_pipe_pct, 1) || '% busy'
        when c.counter_class = 'fma' then 'counters: FMA pipe ' || round(c.fma_pipe_pct, 1) || '% busy (ALU '
             || round(coalesce(c.alu_pipe_pct, 0), 1) || '%, DRAM ' || round(coalesce(c.dram_pct, 0), 1) || '%)'
        when c.counter_class = 'fp64' then 'counters: FP64 pipe ' || round(c.fp64_pipe_pct, 1) || '% busy'
        else 'name'
    end as class_basis             -- what decided the class: 'counters: ...' with the pipe numbers, or 'name'
from c;
