-- Memory-limited kernels. Timeline: kernels in the guide's memory-limited categories (elementwise, reduction and
-- normalization, copies) that launch enough blocks to fill the GPU (with fewer, latency limits them, not memory:
-- see small-grid). Nsight Compute: kernels whose DRAM throughput is high and clearly above their SM throughput.
-- One row per kernel name; the judgement is the share of the capture's kernel time all such kernels take.
with timeline_total as (
    select sum(duration_ns) as total_ns from kernels where capture_id = $capture_id
),
-- Launches are summed per kernel name first and each name is classified once (a training capture launches a few
-- hundred names millions of times). The classifiers read any_value() of the group's name rather than the group key,
-- so that the optimizer cannot push the category filter below the sums and run them on every launch.
timeline as (
    select
        'nsys' as source,
        name,
        coalesce(short_name, name) as short_name,
        category,
        precision,
        launches,
        duration_ns,
        null::double as dram_pct,
        null::double as sm_pct
    from (
        select
            k.name,
            k.short_name,
            na_kernel_category(any_value(k.name), any_value(k.short_name)) as category,
            na_precision(any_value(k.name)) as precision,
            count(*) as launches,
            sum(k.duration_ns) as duration_ns
        from kernels k
        left join gpus g on g.capture_id = k.capture_id and g.device_id = k.device_id
        where k.capture_id = $capture_id
          and coalesce(k.blocks / nullif(g.sm_count, 0), $min_blocks_per_sm) >= $min_blocks_per_sm
        group by k.name, k.short_name
    )
    where category in ('elementwise', 'reduction_norm', 'copy')
),
ncu_sol as (
    select
        m.kernel_id,
        max(m.value) filter (where m.metric in ('gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed',
                                               'dram__throughput.avg.pct_of_peak_sustained_elapsed')) as dram_pct,
        max(m.value) filter (where m.metric = 'sm__throughput.avg.pct_of_peak_sustained_elapsed') as sm_pct
    from ncu_metrics m
    where m.capture_id = $capture_id and isfinite(m.value)
    group by m.kernel_id
),
ncu_total as (
    select sum(duration_ns) as total_ns from ncu_kernels where capture_id = $capture_id and isfinite(duration_ns)
),
profiled as (
    select
        'ncu' as source,
        c.name,
        coalesce(c.short_name, c.name) as short_name,
        c.category,
        c.precision,
        count(*) as launches,
        cast(sum(c.duration_ns) as bigint) as duration_ns,
        max(s.dram_pct) as dram_pct,
        max(s.sm_pct) as sm_pct
    from ncu_kernel_classes c
    join ncu_sol s on s.kernel_id = c.kernel_id
    where c.capture_id = $capture_id and isfinite(c.duration_ns)
      and s.dram_pct >= $min_dram_pct and s.dram_pct - coalesce(s.sm_pct, 0) >= $min_dram_over_sm_pct
    group by c.name, c.short_name, c.category, c.precision
),
rows_ as (
    select t.*, (select total_ns from timeline_total) as total_ns from timeline t
    union all
    select p.*, (select total_ns from ncu_total) as total_ns from profiled p
)
select
    short_name,
    source,
    category,
    precision,
    launches,
    duration_ns,
    round(100.0 * duration_ns / nullif(total_ns, 0), 2) as kernel_share_pct,
    round(100.0 * sum(duration_ns) over (partition by source) / nullif(total_ns, 0), 2) as memory_bound_share_pct,
    round(dram_pct, 1) as dram_pct,
    round(sm_pct, 1) as sm_pct,
    -- Halving the bytes a memory-bound kernel moves (fusing it into its neighbour, or 16-bit instead of 32-bit
    -- data) halves its time.
    cast(duration_ns * $bytes_saved_fraction as bigint) as impact_ns,
    name
from rows_
