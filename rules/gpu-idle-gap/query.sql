-- Gaps in each GPU's work, per process and device (the union of kernels, copies and sets, so concurrent streams
-- count as busy), leaving out the time before the first and after the last operation, as Nsight Systems' gpu_gaps
-- rule does. Each gap is attributed to what the process's host threads were doing meanwhile: the CUDA API class
-- that overlaps the gap the longest, or 'cpu' when no CUDA call was running (Python, data loading, I/O).
with ops as (
    select pid, device_id, start_ns, end_ns from kernels where capture_id = $capture_id
    union all
    select pid, device_id, start_ns, end_ns from memcpys where capture_id = $capture_id
    union all
    select pid, device_id, start_ns, end_ns from memsets where capture_id = $capture_id
),
ordered as (
    select
        pid, device_id, start_ns,
        max(end_ns) over (partition by pid, device_id order by start_ns, end_ns
                          rows between unbounded preceding and 1 preceding) as busy_until_ns
    from ops
),
gaps as (
    select pid, device_id, busy_until_ns as gap_start_ns, start_ns as gap_end_ns, start_ns - busy_until_ns as gap_ns
    from ordered
    where busy_until_ns is not null and start_ns - busy_until_ns >= $min_gap_ns
),
host as (
    select
        g.pid, g.device_id, g.gap_start_ns,
        case
            when a.base_name ilike '%synchronize%' or a.base_name ilike '%streamwaitevent%' or a.base_name ilike '%eventquery%'
                then 'sync'
            when a.base_name ilike '%memcpy%' or a.base_name ilike '%memset%' then 'memcpy'
            when a.base_name ilike '%launch%' then 'launch'
            when a.base_name ilike '%malloc%' or a.base_name ilike '%free%' or a.base_name ilike '%alloc%' then 'alloc'
            else 'other_cuda_api'
        end as activity,
        sum(least(a.end_ns, g.gap_end_ns) - greatest(a.start_ns, g.gap_start_ns)) as overlap_ns
    from gaps g
    join api_calls a on a.capture_id = $capture_id and a.pid = g.pid
        and a.start_ns < g.gap_end_ns and a.end_ns > g.gap_start_ns
    group by all
),
top_host as (
    select pid, device_id, gap_start_ns, arg_max(activity, overlap_ns) as activity, max(overlap_ns) as overlap_ns
    from host
    group by pid, device_id, gap_start_ns
),
wall as (
    select duration_ns as capture_ns from captures where capture_id = $capture_id
)
select
    g.device_id,
    g.pid,
    g.gap_start_ns,
    g.gap_ns,
    -- a CUDA call class covering under half the gap does not explain it: the host was mostly elsewhere.
    case when t.overlap_ns >= g.gap_ns / 2 then t.activity else 'cpu' end as host_activity,
    coalesce(t.overlap_ns, 0) as host_api_overlap_ns,
    round(100.0 * g.gap_ns / nullif(w.capture_ns, 0), 3) as gap_share_pct,
    g.gap_ns as impact_ns
from gaps g
left join top_host t on t.pid = g.pid and t.device_id = g.device_id and t.gap_start_ns = g.gap_start_ns
left join wall w on true
