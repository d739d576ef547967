-- Profiled kernels that execute local loads and stores (register spills or run-time indexed per-thread arrays).
select
    coalesce(e.short_name, e.name) as short_name,
    count(*) as launches,
    any_value(k.registers_per_thread) as registers_per_thread,
    round(avg(e.local_inst_pct), 2) as local_inst_pct,
    cast(sum(e.local_sectors) as bigint) as local_sectors,
    round(avg(e.local_traffic_pct), 1) as local_traffic_pct,
    round(avg(e.mem_pct), 1) as mem_pct,
    coalesce(any_value(e.ncu_verdicts), 'none stored') as ncu_verdicts,
    case
        when any_value(e.ncu_verdicts) is null then 'no verdicts stored'
        when regexp_matches(any_value(e.ncu_verdicts), 'LocalMemoryUsage') then 'agrees'
        else 'states no such verdict'
    end as ncu_agreement,
    cast(sum(e.duration_ns) as bigint) as duration_ns,
    -- Sized by the traffic the local accesses cause, not by their instruction count: the local share of the L1
    -- sectors times the share of the time memory is busy (Memory throughput, the busiest of L1, L2, DRAM), at
    -- least the issue slots the local instructions take. Without sector counts, the instruction share alone.
    cast(sum(e.duration_ns * coalesce(
        e.local_traffic_pct / 100.0 * greatest(coalesce(e.mem_pct, 0), e.local_inst_pct) / 100.0,
        e.local_inst_pct / 100.0)) as bigint) as impact_ns,
    e.name
from ncu_kernel_efficiency e
join ncu_kernels k using (capture_id, kernel_id)
where e.capture_id = $capture_id and isfinite(e.duration_ns) and e.local_inst_pct is not null
group by e.name, e.short_name
