-- Profiled kernels whose achieved occupancy is well below what their launch configuration allows.
select
    coalesce(short_name, name) as short_name,
    count(*) as launches,
    round(avg(theoretical_occupancy_pct), 1) as theoretical_occupancy_pct,
    round(avg(achieved_occupancy_pct), 1) as achieved_occupancy_pct,
    round(avg(theoretical_occupancy_pct - achieved_occupancy_pct), 1) as gap_points,
    round(avg(waves_per_sm), 2) as waves_per_sm,
    round(avg(issue_active_pct), 1) as issue_active_pct,
    coalesce(any_value(ncu_verdicts), 'none stored') as ncu_verdicts,
    case
        when any_value(ncu_verdicts) is null then 'no verdicts stored'
        when regexp_matches(any_value(ncu_verdicts), 'AchievedOccupancy|Occupancy') then 'agrees'
        else 'states no such verdict'
    end as ncu_agreement,
    cast(sum(duration_ns) as bigint) as duration_ns,
    cast(sum(duration_ns * least((theoretical_occupancy_pct - achieved_occupancy_pct) / theoretical_occupancy_pct,
                                 coalesce(1 - issue_active_pct / 100.0, 1.0),
                                 coalesce(1 - max_throughput_pct / 100.0, 1.0))) as bigint) as impact_ns,
    name
from ncu_kernel_efficiency
where capture_id = $capture_id and isfinite(duration_ns) and not na_comm_name(name)
  and theoretical_occupancy_pct > 0 and achieved_occupancy_pct is not null
group by name, short_name
