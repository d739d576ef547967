-- Launches of a few waves whose last wave is only partly filled: while it runs most SMs idle (the tail effect).
-- Waves = blocks / (SMs x resident blocks per SM): from the timeline's launch geometry and the GPU's limits
-- (kernel_config_occupancy: kernel_launches' figures, once per launch configuration), or Nsight Compute's
-- launch__waves_per_multiprocessor. One row per kernel name and launch configuration.
with timeline as (
    select
        'nsys' as source,
        l.name,
        coalesce(l.short_name, l.name) as short_name,
        sum(l.launches)::bigint as launches,
        any_value(l.blocks) as blocks,
        any_value(l.sm_count) as sm_count,
        any_value(l.resident_blocks_per_sm) as resident_blocks_per_sm,
        any_value(l.waves) as waves,
        sum(l.total_ns) as duration_ns
    from kernel_config_occupancy l
    where l.capture_id = $capture_id and l.waves is not null
    group by l.name, l.short_name, l.device_id, l.grid_x, l.grid_y, l.grid_z, l.block_x, l.block_y, l.block_z,
             l.registers_per_thread, l.shared_mem_bytes
    -- the name pattern once per group, not once per launch (any_value keeps it above the grouping)
    having not na_comm_name(any_value(l.name))
),
ncu_waves as (
    select kernel_id, max(value) as waves
    from ncu_metrics
    where capture_id = $capture_id and metric = 'launch__waves_per_multiprocessor' and isfinite(value)
    group by kernel_id
),
profiled as (
    select
        'ncu' as source,
        k.name,
        coalesce(k.short_name, k.name) as short_name,
        count(*) as launches,
        any_value(k.blocks) as blocks,
        any_value(k.sm_count) as sm_count,
        null::bigint as resident_blocks_per_sm,
        any_value(w.waves) as waves,
        cast(sum(k.duration_ns) as bigint) as duration_ns
    from ncu_kernels k
    join ncu_waves w on w.kernel_id = k.kernel_id
    where k.capture_id = $capture_id and not na_comm_name(k.name)
    group by k.name, k.short_name, k.blocks, k.threads_per_block, w.waves
),
launches as (
    select * from timeline
    union all
    select * from profiled
),
tails as (
    select
        *,
        floor(waves) as full_waves,
        waves - floor(waves) as last_wave_fill,
        -- with equal block times the launch lasts ceil(waves) wave-times and the last one leaves (1 - fill) of
        -- the GPU idle
        100.0 * (1 - (waves - floor(waves))) / ceil(waves) as tail_idle_pct
    from launches
    where waves >= 1 and waves - floor(waves) > 0 and floor(waves) <= $max_full_waves
)
select
    short_name,
    source,
    launches,
    blocks,
    sm_count,
    resident_blocks_per_sm,
    round(waves, 3) as waves,
    round(last_wave_fill, 3) as last_wave_fill,
    round(tail_idle_pct, 1) as tail_idle_pct,
    duration_ns,
    cast(duration_ns * tail_idle_pct / 100.0 as bigint) as impact_ns,
    name
from tails
