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
-- One time-ordered stream per process: every GPU operation at its start, every sync call at its return. At equal
-- times a call's return sorts before an operation's start: that operation comes after the call (it may be the next
-- one), and it was not yet running when the call returned. One sorted pass gives both answers below (1.27M
-- operations: 0.5 s, against 0.8 s for two as-of joins and a grouping).
stream as (
    select pid, start_ns as t_ns, 1 as kind, end_ns as op_end_ns,
           null::varchar as api, null::bigint as tid, null::bigint as duration_ns
    from gpu_ops
    where pid is not null
    union all
    select pid, end_ns as t_ns, 0 as kind, null::bigint as op_end_ns, api, tid, duration_ns
    from syncs_
),
bubbles as (
    select
        api, pid, tid, duration_ns, t_ns as end_ns,
        -- how far the process's GPU work reached when the call returned (a call's own row adds nothing to the max)
        max(op_end_ns) over (w rows unbounded preceding) as busy_until_ns,
        -- when the process's next GPU operation starts
        lead(case when kind = 1 then t_ns end ignore nulls) over w as next_gpu_start_ns
    from stream
    window w as (partition by pid order by t_ns, kind)
    qualify kind = 0
),
idle as (
    select
        *,
        case
            when next_gpu_start_ns is null then 0
            when busy_until_ns > end_ns then 0   -- work was still running when the call returned
            else next_gpu_start_ns - end_ns
        end as idle_after_ns
    from bubbles
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
from idle
left join wall w on true
group by api, pid, tid
