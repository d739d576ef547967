-- Profiled kernels where neither the SM nor memory is busy although the grid fills the GPU: latency limits them.
-- One row per kernel name and launch configuration.
select
    coalesce(short_name, name) as short_name,
    count(*) as launches,
    round(avg(sm_pct), 1) as sm_pct,
    round(avg(mem_pct), 1) as mem_pct,
    round(avg(max_throughput_pct), 1) as max_throughput_pct,
    round(avg(issue_active_pct), 1) as issue_active_pct,
    round(avg(active_warps), 2) as active_warps,
    round(avg(eligible_warps), 2) as eligible_warps,
    round(avg(achieved_occupancy_pct), 1) as achieved_occupancy_pct,
    any_value(top_stalls) as top_stalls,
    coalesce(any_value(ncu_verdicts), 'none stored') as ncu_verdicts,
    case
        when any_value(ncu_verdicts) is null then 'no verdicts stored'
        when regexp_matches(any_value(ncu_verdicts), 'Latency Issue|IssueSlotUtilization|CPIStall') then 'agrees'
        else 'states no such verdict'
    end as ncu_agreement,
    cast(sum(duration_ns) as bigint) as duration_ns,
    -- Nsight Compute's issue-slot model: the cycles no instruction issued, capped by the busier unit's headroom.
    cast(sum(duration_ns * least(1 - max_throughput_pct / 100.0,
                                 coalesce(1 - issue_active_pct / 100.0, 1.0))) as bigint) as impact_ns,
    name
from ncu_kernel_efficiency
where capture_id = $capture_id and isfinite(duration_ns) and max_throughput_pct is not null
  and not na_comm_name(name)
  and coalesce(waves_per_sm, $min_waves) >= $min_waves
group by name, short_name
