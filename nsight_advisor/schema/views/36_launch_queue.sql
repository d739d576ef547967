-- The analysis layer: the launch queue, as HTA's queue length. A GPU operation is queued from the end of the CUDA
-- call that launched it (the earliest call of its correlation id; a launch into a full queue blocks that call
-- until there is room) until it starts on the GPU. Where a device idles with nothing queued it waits for its host
-- to launch (launch-bound); where it idles with work queued it waits on a dependency (another stream, an event, a
-- collective); where a stream's queue is full the host blocks in its launch calls while the GPU is busy.
-- No rule on the cold path reads these views: they join every GPU operation with its call.

-- @macro na_launch_queue_full()
-- Operations queued on one stream at which a launch blocks the host: 1022. CUDA's pending-launch limit per
-- stream is 1024 (HTA's CUDA_MAX_LAUNCH_QUEUE_PER_STREAM), and traces show launches blocking from 1022 to 1024.
create or replace macro na_launch_queue_full() as (1022);

-- @view launch_queue
-- The launch queue of each stream over time: one row per stretch of constant length (from one launch or start
-- on the stream to the next).
-- @column capture_id Capture (captures.capture_id).
-- @column device_id GPU.
-- @column stream_id CUDA stream.
-- @column start_ns Start of the stretch, ns.
-- @column end_ns End of the stretch, ns.
-- @column queued Operations launched on the stream and not yet started on the GPU during the stretch.
-- @column state empty (nothing queued), queued, or full (na_launch_queue_full() or more: a launch blocks the host).
create or replace view launch_queue as
with launched as (
    select o.capture_id, o.device_id, o.stream_id, o.start_ns, least(c.end_ns, o.start_ns) as queued_ns
    from gpu_ops o
    join (select capture_id, pid, correlation_id, arg_min(end_ns, start_ns) as end_ns
          from cuda_api_calls
          where correlation_id is not null and correlation_id <> 0
          group by all) c
        on c.capture_id = o.capture_id and c.pid = o.pid and c.correlation_id = o.correlation_id
),
steps as (
    select capture_id, device_id, stream_id, t_ns, sum(delta) as delta
    from (select capture_id, device_id, stream_id, queued_ns as t_ns, 1 as delta from launched
          union all
          select capture_id, device_id, stream_id, start_ns, -1 from launched)
    group by all
),
running as (
    select capture_id, device_id, stream_id, t_ns as start_ns,
           lead(t_ns) over (partition by capture_id, device_id, stream_id order by t_ns) as end_ns,
           sum(delta) over (partition by capture_id, device_id, stream_id order by t_ns rows unbounded preceding)
               as queued
    from steps
)
select capture_id, device_id, stream_id, start_ns, end_ns, queued::bigint as queued,
       case when queued <= 0 then 'empty' when queued >= na_launch_queue_full() then 'full' else 'queued' end
           as state
from running
where end_ns is not null;

-- @view launch_queue_summary
-- Per device: how its idle time in the analysis window splits between waiting for launches (nothing queued on
-- any stream) and waiting with work queued, and, over the whole capture, how deep its queues got and how long the
-- host blocked on a full one.
-- @column capture_id Capture (captures.capture_id).
-- @column device_id GPU.
-- @column max_queued The most operations queued on one of its streams at once.
-- @column idle_ns Idle time of the device in the window (gpu_idle_gaps), ns.
-- @column launch_bound_ns Idle time with nothing queued on any stream: from each gap's start to the first launch in it (the whole gap when the operation ending it was launched inside it), ns.
-- @column queued_idle_ns Idle time with work queued: the rest of idle_ns, ns.
-- @column full_ns Time a stream of the device held a full queue (summed over streams), ns.
-- @column blocked_launch_ns Time the host spent in launch calls made while their stream's queue was full, ns.
create or replace view launch_queue_summary as
with launched as (
    select o.capture_id, o.device_id, o.stream_id, o.start_ns, c.start_ns as call_start_ns, c.duration_ns as call_ns,
           least(c.end_ns, o.start_ns) as queued_ns
    from gpu_ops o
    join (select capture_id, pid, correlation_id, arg_min(end_ns, start_ns) as end_ns, min(start_ns) as start_ns,
                 arg_min(duration_ns, start_ns) as duration_ns
          from cuda_api_calls
          where correlation_id is not null and correlation_id <> 0
          group by all) c
        on c.capture_id = o.capture_id and c.pid = o.pid and c.correlation_id = o.correlation_id
),
gaps as (
    select g.capture_id, g.device_id, g.start_ns, g.end_ns
    from gpu_idle_gaps g
),
first_launch as (
    -- the first operation queued at or after each gap's start; queued before the gap's start means the device
    -- waited with work queued from the start
    select g.*, l.queued_ns as first_queued_ns
    from gaps g
    asof left join (select capture_id, device_id, queued_ns from launched) l
        on l.capture_id = g.capture_id and l.device_id = g.device_id and l.queued_ns >= g.start_ns
),
queued_at_start as (
    -- operations queued by the gap's start and not started before it: the gap ends with one of them
    select f.*, exists (select 1 from launched x
                        where x.capture_id = f.capture_id and x.device_id = f.device_id
                            and x.start_ns = f.end_ns and x.queued_ns < f.start_ns) as waiting
    from first_launch f
),
idle as (
    select capture_id, device_id, sum(end_ns - start_ns) as idle_ns,
           sum(case when waiting then 0
                    else least(coalesce(first_queued_ns, end_ns), end_ns) - start_ns end) as launch_bound_ns
    from queued_at_start
    group by all
),
queue as (
    select capture_id, device_id, max(queued) as max_queued,
           coalesce(sum(end_ns - start_ns) filter (where state = 'full'), 0) as full_ns
    from launch_queue
    group by all
),
blocked as (
    -- a launch call made while its stream was full: the stream's stretch at the call's start
    select l.capture_id, l.device_id, sum(l.call_ns) as blocked_launch_ns
    from launched l
    asof join launch_queue q on q.capture_id = l.capture_id and q.device_id = l.device_id
        and q.stream_id = l.stream_id and l.call_start_ns >= q.start_ns
    where q.state = 'full' and l.call_start_ns < q.end_ns
    group by all
)
select q.capture_id, q.device_id, q.max_queued, coalesce(i.idle_ns, 0)::bigint as idle_ns,
       coalesce(i.launch_bound_ns, 0)::bigint as launch_bound_ns,
       (coalesce(i.idle_ns, 0) - coalesce(i.launch_bound_ns, 0))::bigint as queued_idle_ns,
       q.full_ns::bigint as full_ns, coalesce(b.blocked_launch_ns, 0)::bigint as blocked_launch_ns
from queue q
left join idle i on i.capture_id = q.capture_id and i.device_id = q.device_id
left join blocked b on b.capture_id = q.capture_id and b.device_id = q.device_id;
