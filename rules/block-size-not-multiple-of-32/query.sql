-- Thread blocks whose size is not a multiple of the warp size: the last warp of every block runs with idle lanes.
-- From the timeline (kernel_configs: the launches summed per configuration) and Nsight Compute (ncu_kernels). One row
-- per kernel name and block size.
with sizes as (
    select 'nsys' as source, k.name, coalesce(k.short_name, k.name) as short_name, k.threads_per_block,
           sum(k.launches)::bigint as launches, sum(k.total_ns) as duration_ns
    from kernel_configs k
    where k.capture_id = $capture_id and k.threads_per_block > 0
    group by k.name, k.short_name, k.threads_per_block
    -- the name pattern once per group, not once per launch (any_value: a filter on a group key would be pushed
    -- below the grouping again)
    having not na_comm_name(any_value(k.name))
    union all
    select 'ncu' as source, k.name, coalesce(k.short_name, k.name) as short_name, k.threads_per_block,
           count(*) as launches, cast(sum(k.duration_ns) as bigint) as duration_ns
    from ncu_kernels k
    where k.capture_id = $capture_id and k.threads_per_block > 0 and not na_comm_name(k.name)
    group by k.name, k.short_name, k.threads_per_block
),
lanes as (
    select
        *,
        cast(ceil(threads_per_block / 32.0) as bigint) as warps_per_block,
        100.0 * (ceil(threads_per_block / 32.0) * 32 - threads_per_block) / (ceil(threads_per_block / 32.0) * 32)
            as idle_lane_pct
    from sizes
)
select
    short_name,
    source,
    launches,
    threads_per_block,
    warps_per_block,
    round(idle_lane_pct, 1) as idle_lane_pct,
    duration_ns,
    -- the share of issued lanes that do nothing, as time (an upper bound: only compute-bound kernels lose it all)
    cast(coalesce(duration_ns, 0) * idle_lane_pct / 100.0 as bigint) as impact_ns,
    name
from lanes
