-- Launches with fewer blocks than the GPU has SMs, from the timeline (kernel_config_occupancy) and from Nsight Compute
-- (ncu_kernels, SM count from launch__sm_count when recorded, else the device attribute). One row per kernel name
-- and launch configuration.
with floors as (
    -- The shortest kernel the capture recorded on each GPU, at most max_floor_ns: no grid size makes a launch
    -- finish faster than launch latency and a kernel's fixed cost, so a tiny launch already near it has little to
    -- win. (The cap keeps a capture of a few long kernels from taking their length for the floor.)
    select device_id, least(min(duration_ns), $max_floor_ns) as floor_ns
    from kernels
    where capture_id = $capture_id and duration_ns > 0
    group by device_id
),
timeline as (
    select
        'nsys' as source,
        l.name,
        coalesce(l.short_name, l.name) as short_name,
        l.device_id,
        sum(l.launches)::bigint as launches,
        any_value(l.blocks) as blocks,
        any_value(l.threads_per_block) as threads_per_block,
        any_value(l.sm_count) as sm_count,
        sum(l.total_ns) as duration_ns,
        any_value(f.floor_ns) as floor_ns
    from kernel_config_occupancy l
    left join floors f on f.device_id = l.device_id
    where l.capture_id = $capture_id and l.sm_count > 0 and l.blocks > 0
    group by l.name, l.short_name, l.device_id, l.grid_x, l.grid_y, l.grid_z, l.block_x, l.block_y, l.block_z
    -- communication kernels (NCCL & co.) size their grids by design: their cost is the communication rules'
    -- (the name pattern once per group, not once per launch; any_value keeps it above the grouping)
    having not na_comm_name(any_value(l.name))
),
ncu_sm as (
    select m.kernel_id, max(m.value) as sm_count
    from ncu_metrics m
    where m.capture_id = $capture_id and m.metric = 'launch__sm_count' and m.value > 0
    group by m.kernel_id
),
profiled as (
    select
        'ncu' as source,
        k.name,
        coalesce(k.short_name, k.name) as short_name,
        null::integer as device_id,
        count(*) as launches,
        any_value(k.blocks) as blocks,
        any_value(k.threads_per_block) as threads_per_block,
        any_value(cast(coalesce(s.sm_count, k.sm_count) as integer)) as sm_count,
        cast(sum(k.duration_ns) as bigint) as duration_ns,
        null::bigint as floor_ns
    from ncu_kernels k
    left join ncu_sm s on s.kernel_id = k.kernel_id
    where k.capture_id = $capture_id and coalesce(s.sm_count, k.sm_count) > 0 and k.blocks > 0
      and not na_comm_name(k.name)
    group by k.name, k.short_name, k.blocks, k.threads_per_block, coalesce(s.sm_count, k.sm_count)
),
launches as (
    select * from timeline
    union all
    select * from profiled
)
select
    source,
    name,
    short_name,
    device_id,
    launches,
    blocks,
    threads_per_block,
    sm_count,
    blocks / sm_count as blocks_per_sm,
    duration_ns,
    -- SMs without a block idle for the whole launch: the share (sm_count - blocks) / sm_count of the launch's
    -- SM time is lost, as in Nsight Compute's own estimate for this case, but a launch spread over every SM still
    -- takes at least the GPU's shortest kernel time (floor_ns), so per launch the gain is
    -- duration - max(duration x blocks / sm_count, floor_ns).
    cast(launches * greatest(coalesce(duration_ns, 0) / launches
                             - greatest(coalesce(duration_ns, 0) / launches * least(blocks, sm_count) / sm_count,
                                        coalesce(floor_ns, 0)), 0) as bigint) as impact_ns
from launches
