-- GPU idle time that follows a host synchronization: the gaps of gpu_idle_gaps whose cause is 'sync' (the host
-- was blocked in a synchronization call when the device ran dry, and the next work came late), one row per device,
-- API and thread. Each gap is charged once, to the call that was waiting when it began, however many more
-- synchronizations the host made during it; the host time blocked in that API is evidence, not impact.
with charged as (
    select
        device_id, host_activity as api, host_pid as pid, host_tid as tid,
        count(*) as gaps,
        max(duration_ns) as longest_gap_ns,
        sum(duration_ns) as gpu_idle_after_ns
    from gpu_idle_gaps
    where capture_id = $capture_id and cause = 'sync'
    group by all
),
blocked as (
    select base_name as api, pid, tid, count(*) as calls, sum(duration_ns) as blocked_ns,
           max(duration_ns) as max_blocked_ns
    from cuda_api_calls
    where capture_id = $capture_id and api_class = 'sync'
    group by all
)
select
    c.api,
    c.device_id,
    c.pid,
    c.tid,
    coalesce(b.calls, 0) as calls,
    coalesce(b.blocked_ns, 0) as blocked_ns,
    b.max_blocked_ns,
    c.gaps,
    c.longest_gap_ns,
    c.gpu_idle_after_ns,
    c.gpu_idle_after_ns as impact_ns
from charged c
left join blocked b on b.api = c.api and b.pid = c.pid and b.tid is not distinct from c.tid
