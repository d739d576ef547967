-- Profiled kernels whose shared-memory wavefronts are partly caused by bank conflicts.
select
    coalesce(short_name, name) as short_name,
    count(*) as launches,
    round(avg(bank_conflict_pct), 1) as bank_conflict_pct,
    round(avg(l1_pct), 1) as l1_pct,
    coalesce(any_value(ncu_verdicts), 'none stored') as ncu_verdicts,
    case
        when any_value(ncu_verdicts) is null then 'no verdicts stored'
        when regexp_matches(any_value(ncu_verdicts), 'SharedMemoryConflicts|UncoalescedSharedAccess') then 'agrees'
        else 'states no such verdict'
    end as ncu_agreement,
    cast(sum(duration_ns) as bigint) as duration_ns,
    cast(sum(duration_ns * bank_conflict_pct / 100.0 * coalesce(l1_pct, 0) / 100.0) as bigint) as impact_ns,
    name
from ncu_kernel_efficiency
where capture_id = $capture_id and isfinite(duration_ns) and bank_conflict_pct is not null
group by name, short_name
