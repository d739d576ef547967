-- Profiled kernels whose shared-memory wavefronts are partly caused by bank conflicts.
select
    coalesce(short_name, name) as short_name,
    count(*) as launches,
    round(avg(bank_conflict_pct), 1) as bank_conflict_pct,
    round(avg(l1_pct), 1) as l1_pct,
    cast(sum(duration_ns) as bigint) as duration_ns,
    cast(sum(duration_ns * bank_conflict_pct / 100.0 * coalesce(l1_pct, 0) / 100.0) as bigint) as impact_ns,
    name
from ncu_kernel_efficiency
where capture_id = $capture_id and isfinite(duration_ns) and bank_conflict_pct is not null
group by name, short_name
