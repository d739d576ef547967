-- Kernels whose theoretical occupancy is low because of their registers or shared memory per block: the limits the
-- kernel's code sets (a block-count limit with tiny blocks is block-size-not-multiple-of-32's and small-grid's).
-- Timeline: kernel_launches' occupancy calculation, once per launch configuration (kernel_config_occupancy). Nsight
-- Compute: sm__maximum_warps_per_active_cycle_pct and the launch__occupancy_limit_* block limits. Timeline: GEMM,
-- convolution and attention kernels by name are left out (libraries tune their tiles and trade occupancy for data
-- reuse on purpose); Nsight Compute: tensor-core kernels by their counters (ncu_kernel_classes), whatever their
-- names.
with timeline as (
    select
        'nsys' as source,
        l.name,
        coalesce(l.short_name, l.name) as short_name,
        sum(l.launches)::bigint as launches,
        any_value(l.threads_per_block) as threads_per_block,
        any_value(l.registers_per_thread) as registers_per_thread,
        any_value(l.shared_mem_bytes) as shared_mem_bytes,
        any_value(l.theoretical_occupancy_pct) as theoretical_occupancy_pct,
        any_value(case
            when l.resident_blocks_per_sm = l.limit_registers then 'registers'
            when l.resident_blocks_per_sm = l.limit_shared_mem then 'shared_memory'
            when l.resident_blocks_per_sm = l.limit_warps then 'warps'
            else 'blocks' end) as limiter,
        null::double as issue_active_pct,
        sum(l.total_ns) as duration_ns
    from kernel_config_occupancy l
    where l.capture_id = $capture_id and l.theoretical_occupancy_pct is not null
    group by l.name, l.short_name, l.device_id, l.block_x, l.block_y, l.block_z, l.registers_per_thread,
             l.shared_mem_bytes
    -- the name patterns once per group, not once per launch (any_value: a filter on the group keys would be
    -- pushed below the grouping again)
    having na_kernel_category(any_value(l.name), any_value(l.short_name)) not in ('gemm_conv', 'attention', 'communication')
),
ncu_occ as (
    select
        kernel_id,
        max(value) filter (where metric = 'sm__maximum_warps_per_active_cycle_pct') as theoretical_occupancy_pct,
        max(value) filter (where metric = 'launch__occupancy_limit_registers') as limit_registers,
        max(value) filter (where metric = 'launch__occupancy_limit_shared_mem') as limit_shared_mem,
        max(value) filter (where metric = 'launch__occupancy_limit_warps') as limit_warps,
        max(value) filter (where metric = 'launch__occupancy_limit_blocks') as limit_blocks,
        max(value) filter (where metric = 'smsp__issue_active.avg.pct_of_peak_sustained_active') as issue_active_pct
    from ncu_metrics
    where capture_id = $capture_id and isfinite(value)
    group by kernel_id
),
profiled as (
    select
        'ncu' as source,
        c.name,
        coalesce(c.short_name, c.name) as short_name,
        count(*) as launches,
        any_value(c.threads_per_block) as threads_per_block,
        any_value(c.registers_per_thread) as registers_per_thread,
        any_value(c.shared_mem_bytes) as shared_mem_bytes,
        any_value(o.theoretical_occupancy_pct) as theoretical_occupancy_pct,
        any_value(case
            when least(o.limit_registers, o.limit_shared_mem, o.limit_warps, o.limit_blocks) = o.limit_registers
                then 'registers'
            when least(o.limit_registers, o.limit_shared_mem, o.limit_warps, o.limit_blocks) = o.limit_shared_mem
                then 'shared_memory'
            when least(o.limit_registers, o.limit_shared_mem, o.limit_warps, o.limit_blocks) = o.limit_warps
                then 'warps'
            else 'blocks' end) as limiter,
        avg(o.issue_active_pct) as issue_active_pct,
        cast(sum(c.duration_ns) as bigint) as duration_ns
    from ncu_kernel_classes c
    join ncu_occ o on o.kernel_id = c.kernel_id
    where c.capture_id = $capture_id and o.theoretical_occupancy_pct is not null
      -- Counters decide here, not names: only kernels whose tensor pipe is busy (tuned library GEMMs and attention
      -- that trade occupancy for reuse on purpose) and communication kernels are left out.
      and c.category <> 'communication' and c.math_path is distinct from 'tensor_core'
    group by c.name, c.short_name, c.threads_per_block, c.registers_per_thread, c.shared_mem_bytes
)
select
    short_name,
    source,
    launches,
    threads_per_block,
    registers_per_thread,
    shared_mem_bytes,
    limiter,
    round(theoretical_occupancy_pct, 1) as theoretical_occupancy_pct,
    round(issue_active_pct, 1) as issue_active_pct,
    duration_ns,
    -- Nsight Compute's own model for this case: the missing share of warp slots, capped (when measured) by the
    -- share of cycles the schedulers issued nothing.
    cast(coalesce(duration_ns, 0)
         * least(1 - theoretical_occupancy_pct / 100.0, coalesce(1 - issue_active_pct / 100.0, 1.0)) as bigint)
        as impact_ns,
    name
from (select * from timeline union all select * from profiled)
where limiter in ('registers', 'shared_memory')
