-- Profiled kernels whose warp instructions run with few active (or not predicated-off) threads.
select
    coalesce(short_name, name) as short_name,
    count(*) as launches,
    round(avg(threads_active), 1) as threads_active,
    round(avg(threads_pred_on), 1) as threads_pred_on,
    round(avg(least(threads_active, coalesce(threads_pred_on, threads_active))), 1) as useful_threads,
    round(avg(sm_pct), 1) as sm_pct,
    coalesce(any_value(ncu_verdicts), 'none stored') as ncu_verdicts,
    case
        when any_value(ncu_verdicts) is null then 'no verdicts stored'
        when regexp_matches(any_value(ncu_verdicts), 'ThreadDivergence') then 'agrees'
        else 'states no such verdict'
    end as ncu_agreement,
    cast(sum(duration_ns) as bigint) as duration_ns,
    cast(sum(duration_ns * (1 - least(threads_active, coalesce(threads_pred_on, threads_active)) / 32.0)
             * coalesce(sm_pct, 0) / 100.0) as bigint) as impact_ns,
    name
from ncu_kernel_efficiency
where capture_id = $capture_id and isfinite(duration_ns) and threads_active is not null
group by name, short_name
