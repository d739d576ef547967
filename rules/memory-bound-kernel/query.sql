-- Memory-limited kernels. Timeline: kernels in the guide's memory-limited categories (elementwise, reduction and
-- normalization, copies) that launch enough blocks to fill the GPU (with fewer, latency limits them, not memory:
-- see small-grid). Nsight Compute: kernels whose DRAM throughput is high and clearly above their SM throughput.
-- One row per kernel name; the judgement is the share of the capture's kernel time all such kernels take.
with timeline_total as (
    select sum(total_ns) as total_ns from kernel_configs where capture_id = $capture_id
),
-- Launches are summed per kernel name first (from their sums per configuration, kernel_configs) and each name is
-- classified once (a training capture launches a few hundred names millions of times). The classifiers read
-- any_value() of the group's name rather than the group key, so that the optimizer cannot push the category filter
-- below the sums and run them on every launch.
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
        null::double as sm_pct,
        null::bigint as roofline_ns,
        -- Estimate: the timeline has no byte counts. Fusing a memory-limited kernel into its producer or consumer,
        -- or 16-bit instead of 32-bit data, removes about bytes_saved_fraction of its bytes and so of its time.
        cast(duration_ns * $bytes_saved_fraction as bigint) as impact_ns,
        'name' as class_basis,
        'estimate: ' || cast(round(100 * $bytes_saved_fraction) as integer) || '% of the time (class from the name, no byte counts)' as impact_basis,
        null::double as local_traffic_pct
    from (
        select
            k.name,
            k.short_name,
            na_kernel_category(any_value(k.name), any_value(k.short_name)) as category,
            na_precision(any_value(k.name)) as precision,
            sum(k.launches)::bigint as launches,
            sum(k.total_ns) as duration_ns
        from kernel_configs k
        left join gpus g on g.capture_id = k.capture_id and g.device_id = k.device_id
        where k.capture_id = $capture_id
          and coalesce(k.blocks / nullif(g.sm_count, 0), $min_blocks_per_sm) >= $min_blocks_per_sm
        group by k.name, k.short_name
    )
    where category in ('elementwise', 'reduction_norm', 'copy')
),
-- Nsight Compute: the kernel's DRAM bytes against the GPU's achievable DRAM bandwidth. The time those bytes take at
-- achievable_dram_pct of the peak is the kernel's roofline time; the time above it is what better access could win
-- back. A kernel at the roofline gets (almost) no impact: only moving fewer bytes can help it, and how many fewer
-- is not in the capture.
ncu_total as (
    select sum(duration_ns) as total_ns from ncu_kernels where capture_id = $capture_id and isfinite(duration_ns)
),
ncu_roof as (
    select
        s.kernel_id,
        s.dram_throughput_pct as dram_pct,
        s.sm_throughput_pct as sm_pct,
        s.duration_ns,
        -- bytes / (peak x achievable share), else the throughput share of the duration (the same when both exist)
        coalesce(s.dram_bytes / nullif(s.peak_dram_bytes_per_s * $achievable_dram_pct / 100.0, 0) * 1e9,
                 s.duration_ns * s.dram_throughput_pct / $achievable_dram_pct) as roofline_ns
    from ncu_kernel_summary s
    where s.capture_id = $capture_id and isfinite(s.duration_ns)
      and s.dram_throughput_pct >= $min_dram_pct and s.dram_throughput_pct - coalesce(s.sm_throughput_pct, 0) >= $min_dram_over_sm_pct
),
profiled as (
    select
        'ncu' as source,
        c.name,
        coalesce(c.short_name, c.name) as short_name,
        c.category,
        c.precision,
        count(*) as launches,
        cast(sum(r.duration_ns) as bigint) as duration_ns,
        max(r.dram_pct) as dram_pct,
        max(r.sm_pct) as sm_pct,
        cast(sum(least(r.roofline_ns, r.duration_ns)) as bigint) as roofline_ns,
        cast(sum(greatest(r.duration_ns - r.roofline_ns, 0)) as bigint) as impact_ns,
        any_value(c.class_basis) as class_basis,
        'roofline: Nsight Compute DRAM bytes at ' || $achievable_dram_pct || '% of peak' as impact_basis,
        max(e.local_traffic_pct) as local_traffic_pct
    from ncu_kernel_classes c
    join ncu_roof r on r.kernel_id = c.kernel_id
    left join ncu_kernel_efficiency e on e.capture_id = c.capture_id and e.kernel_id = c.kernel_id
    where c.capture_id = $capture_id and c.category <> 'communication'
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
    class_basis,
    precision,
    launches,
    duration_ns,
    case source when 'ncu' then 'profiled kernel time' else 'kernel time' end as share_of,
    round(100.0 * duration_ns / nullif(total_ns, 0), 2) as kernel_share_pct,
    round(100.0 * sum(duration_ns) over (partition by source) / nullif(total_ns, 0), 2) as memory_bound_share_pct,
    round(dram_pct, 1) as dram_pct,
    round(sm_pct, 1) as sm_pct,
    roofline_ns,
    impact_ns,
    round(100.0 * impact_ns / nullif(duration_ns, 0), 1) as impact_share_pct,
    impact_basis,
    case
        when source = 'nsys' then 'memory-limited by its class: fuse it or move narrower data'
        -- traffic that register spills and stack arrays cause is not the data's: narrower types do not shrink it
        when local_traffic_pct >= 50 then 'at ' || round(dram_pct) || '% of DRAM peak, but ' || round(local_traffic_pct)
             || '% of its L1 sectors are local memory (register spills or stack arrays): remove those first '
             || '(local-memory-spills)'
        when dram_pct >= $near_roofline_pct then 'at ' || round(dram_pct) || '% of DRAM peak: only moving fewer bytes helps'
        else 'at ' || round(dram_pct) || '% of DRAM peak: access pattern or parallelism limit it below the roofline'
    end as verdict,
    -- The timeline's impact is a guess from the kernel's name (no byte counts): it informs, never warns.
    case when source = 'nsys' then 'info' end as estimate_severity,
    name
from rows_
