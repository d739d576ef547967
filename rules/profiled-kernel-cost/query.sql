-- Timeline kernels of this Nsight Systems capture that a profiled Nsight Compute kernel matches (same name and launch
-- configuration, ncu_timeline_match), weighted by their share of this timeline, with the report's limiter and
-- verdicts. One row per timeline kernel name.
with matched as (
    select m.*
    from ncu_timeline_match m
    where m.nsys_capture_id = $capture_id
),
verdicts as (
    -- Nsight Compute's stored verdicts on each profiled kernel (not the 'ok' ones), with its speedup estimates
    select capture_id, kernel_id,
           string_agg(distinct coalesce(nullif(title, ''), rule_id)
                      || coalesce(' (est. ' || cast(round(estimated_speedup_pct) as integer) || '%)', ''), '; ') as ncu_verdicts
    from ncu_rule_results
    where result_type in ('warning', 'optimization', 'error') and coalesce(message, '') <> ''
    group by capture_id, kernel_id
),
profiled as (
    select
        m.timeline_name,
        m.kernel_id,
        m.launches,
        m.total_ns,
        m.timeline_share_pct,
        e.sm_pct, e.mem_pct, e.dram_pct, e.issue_active_pct, e.top_stalls, e.max_throughput_pct,
        s.bound,
        v.ncu_verdicts,
        case s.bound
            when 'latency' then least(1 - e.max_throughput_pct / 100.0, coalesce(1 - e.issue_active_pct / 100.0, 1.0))
            when 'memory' then greatest(0, 1 - coalesce(e.dram_pct, e.mem_pct) / $achievable_dram_pct)
            else 0
        end as recoverable
    from matched m
    join ncu_kernel_efficiency e on e.capture_id = m.ncu_capture_id and e.kernel_id = m.kernel_id
    left join ncu_kernel_summary s on s.capture_id = m.ncu_capture_id and s.kernel_id = m.kernel_id
    left join verdicts v on v.capture_id = m.ncu_capture_id and v.kernel_id = m.kernel_id
)
select
    any_value(k.short_name) as short_name,
    any_value(p.launches) as launches,
    any_value(p.total_ns) as timeline_ns,
    round(any_value(p.timeline_share_pct), 2) as timeline_share_pct,
    case mode(p.bound)
        when 'latency' then 'latency (SM ' || round(avg(p.sm_pct)) || '%, memory ' || round(avg(p.mem_pct))
                            || '% of peak; stalls: ' || coalesce(any_value(p.top_stalls), 'n/a') || ')'
        when 'memory' then 'memory (DRAM ' || round(avg(p.dram_pct)) || '% of peak)'
        when 'compute' then 'compute (SM ' || round(avg(p.sm_pct)) || '% of peak)'
        else 'unknown (no throughput counters)'
    end as limiter,
    round(100 * avg(p.recoverable), 1) as recoverable_pct,
    coalesce(any_value(p.ncu_verdicts), 'no warnings stored') as ncu_verdicts,
    cast(any_value(p.total_ns) * avg(p.recoverable) as bigint) as impact_ns,
    p.timeline_name as name
from profiled p
-- the matched names' short names alone (a capture holds a million kernels; the names matched are a few)
left join (select name, any_value(coalesce(short_name, name)) as short_name from kernels
           where capture_id = $capture_id and name in (select timeline_name from matched) group by name) k
    on k.name = p.timeline_name
group by p.timeline_name
