-- Profiled kernels whose warps spend a dominant share of the cycles between instructions stalled for one reason
-- (Nsight Compute's CPIStall rule), wherever latency-bound does not already report them: below one wave, or with
-- SM or memory throughput above its bound. One row per kernel name.
select
    coalesce(short_name, name) as short_name,
    count(*) as launches,
    any_value(top_stall) as top_stall,
    round(avg(top_stall_pct), 1) as top_stall_pct,
    any_value(top_stalls) as top_stalls,
    round(avg(issue_active_pct), 1) as issue_active_pct,
    round(avg(max_throughput_pct), 1) as max_throughput_pct,
    round(avg(waves_per_sm), 2) as waves_per_sm,
    coalesce(any_value(ncu_verdicts), 'none stored') as ncu_verdicts,
    case
        when any_value(ncu_verdicts) is null then 'no verdicts stored'
        when regexp_matches(any_value(ncu_verdicts), 'CPIStall') then 'agrees'
        else 'states no such verdict'
    end as ncu_agreement,
    cast(sum(duration_ns) as bigint) as duration_ns,
    -- CPIStall's estimate: the stall's share of the cycles between instructions, capped by what more issue slots
    -- and the busier unit's headroom allow, less what achieved-occupancy (with tail-effect) already claims of that
    -- headroom: too few warps and stalled warps leave the same issue slots empty, and they are counted once.
    cast(sum(duration_ns * greatest(least(top_stall_pct / 100.0, headroom) - occupancy_claim, 0)) as bigint)
        as impact_ns,
    name
from (
    select
        *,
        least(coalesce(1 - issue_active_pct / 100.0, 1.0), coalesce(1 - max_throughput_pct / 100.0, 1.0))
            as headroom,
        case when theoretical_occupancy_pct - achieved_occupancy_pct >= $achieved_occupancy_min_gap_points
             then least(1 - achieved_occupancy_pct / theoretical_occupancy_pct,
                        coalesce(1 - issue_active_pct / 100.0, 1.0), coalesce(1 - max_throughput_pct / 100.0, 1.0))
             else 0 end as occupancy_claim
    from ncu_kernel_efficiency
)
where capture_id = $capture_id and isfinite(duration_ns) and top_stall_pct is not null
  and not na_comm_name(name)
  and coalesce(issue_active_pct, 0) < $max_issue_active_pct
  -- latency-bound's kernels (a full wave, both units below its bound) get their stalls named there
  and not (coalesce(max_throughput_pct, 100) < $latency_bound_max_throughput_pct
           and coalesce(waves_per_sm, $latency_bound_min_waves) >= $latency_bound_min_waves)
group by name, short_name
