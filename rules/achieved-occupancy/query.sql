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
    round(100 * avg(tail_idle_share), 1) as tail_idle_pct,
    -- A partly filled last wave lowers achieved occupancy by its idle share, and tail-effect claims that share: the
    -- gap left here is what the tail does not explain, 1 - (achieved / theoretical) / (1 - tail share), so that
    -- the impact model's combination of the two, 1 - (1 - tail)(1 - rest), is the occupancy gap counted once.
    cast(sum(duration_ns * least(greatest(1 - achieved_occupancy_pct / theoretical_occupancy_pct
                                                / (1 - tail_idle_share), 0),
                                 coalesce(1 - issue_active_pct / 100.0, 1.0),
                                 coalesce(1 - max_throughput_pct / 100.0, 1.0))) as bigint) as impact_ns,
    name
from (
    select
        *,
        -- the idle share of a partly filled last wave, as tail-effect computes it: (1 - fill) / ceil(waves)
        case when waves_per_sm >= 1 and waves_per_sm > floor(waves_per_sm)
             then (1 - (waves_per_sm - floor(waves_per_sm))) / ceil(waves_per_sm) else 0 end as tail_idle_share
    from ncu_kernel_efficiency
)
where capture_id = $capture_id and isfinite(duration_ns) and not na_comm_name(name)
  and theoretical_occupancy_pct > 0 and achieved_occupancy_pct is not null
group by name, short_name
