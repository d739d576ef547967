-- Host threads blocked in CUDA synchronization calls, one row per process, thread and API, with the GPU bubble that
-- follows each call: the time from the call's return until the process's next GPU work starts, when nothing of that
-- process was running on the GPU at the moment the call returned (the queue had drained).
with syncs_ as (
    select a.pid, a.tid, a.base_name as api, a.start_ns, a.end_ns, a.duration_ns
    from api_calls a
    where a.capture_id = $capture_id
      and a.base_name in ('cudaDeviceSynchronize', 'cudaStreamSynchronize', 'cudaEventSynchronize',
                          'cudaThreadSynchronize', 'cuCtxSynchronize', 'cuStreamSynchronize', 'cuEventSynchronize')
),
gpu_ops as (
    select pid, start_ns, end_ns from kernels where capture_id = $capture_id
    union all
    select pid, start_ns, end_ns from memcpys where capture_id = $capture_id
    union all
    select pid, start_ns, end_ns from memsets where capture_id = $capture_id
),
busy as (
    -- how far the process's GPU work reaches at each start time: the running maximum of end times, one row per
    -- start time so that the as-of join below is deterministic
    select pid, start_ns, max(busy_until_ns) as busy_until_ns
    from (
        select pid, start_ns,
               max(end_ns) over (partition by pid order by start_ns, end_ns rows unbounded preceding) as busy_until_ns
        from gpu_ops
    )
    group by pid, start_ns
),
next_op as (
    select s.*, n.start_ns as next_gpu_start_ns
    from syncs_ s
    asof left join gpu_ops n on n.pid = s.pid and n.start_ns >= s.end_ns
),
bubbles as (
    select
        o.*,
        case
            when o.next_gpu_start_ns is null then 0
            when b.busy_until_ns > o.end_ns then 0   -- work was still running when the call returned
            else o.next_gpu_start_ns - o.end_ns
        end as idle_after_ns
    from next_op o
    asof left join busy b on b.pid = o.pid and b.start_ns < o.end_ns
),
wall as (
    select duration_ns as capture_ns from captures where capture_id = $capture_id
)
select
    api,
    pid,
    tid,
    count(*) as calls,
    sum(duration_ns) as blocked_ns,
    max(duration_ns) as max_blocked_ns,
    round(100.0 * sum(duration_ns) / nullif(any_value(w.capture_ns), 0), 2) as blocked_share_pct,
    sum(idle_after_ns) as gpu_idle_after_ns,
    sum(idle_after_ns) as impact_ns
from bubbles
left join wall w on true
group by api, pid, tid
