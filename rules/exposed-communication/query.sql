-- Communication with no compute running on the same GPU (the 'comm' part of the time partition), per GPU and
-- collective type. A stretch in which several communication kernels run at once is shared evenly between them.
-- What ranks spend waiting for a late rank belongs to collective-straggler and is taken out here, so the two rules
-- never claim the same nanosecond.
with segs as (
    select device_id, start_ns, end_ns, duration_ns, comm_kernels
    from gpu_time_segments
    where capture_id = $capture_id and state = 'comm'
),
ops as (
    select device_id, collective, start_ns, end_ns, duration_ns, msg_bytes
    from collective_ops
    where capture_id = $capture_id
),
exposed as (
    select o.device_id, o.collective,
           sum((least(s.end_ns, o.end_ns) - greatest(s.start_ns, o.start_ns)) / s.comm_kernels) as exposed_ns
    from segs s
    join ops o on o.device_id = s.device_id and o.start_ns < s.end_ns and o.end_ns > s.start_ns
    group by all
),
waits as (
    -- every exposed wait for a late rank (collective_ranks), whether or not collective-straggler reports it
    select m.device_id, m.collective,
           sum((least(s.end_ns, m.start_ns + m.wait_ns) - greatest(s.start_ns, m.start_ns)) / s.comm_kernels)
               as straggler_wait_ns
    from collective_ranks m
    join segs s on s.device_id = m.device_id and s.start_ns < m.start_ns + m.wait_ns and s.end_ns > m.start_ns
    where m.capture_id = $capture_id and m.wait_ns > 0
    group by all
),
totals as (
    select device_id, collective, count(*) as kernels, sum(duration_ns) as comm_kernel_ns,
           sum(msg_bytes) as msg_bytes
    from ops
    group by all
),
device_share as (
    select p.device_id, p.duration_ns as device_exposed_ns,
           round(100.0 * p.duration_ns / nullif(w.duration_ns, 0), 3) as device_exposed_pct
    from gpu_time_partition p
    join analysis_window w on w.capture_id = p.capture_id
    where p.capture_id = $capture_id and p.part = 'comm'
)
select
    t.collective,
    t.device_id,
    r.rank,
    t.kernels,
    t.comm_kernel_ns,
    cast(round(coalesce(e.exposed_ns, 0)) as bigint) as exposed_ns,
    cast(round(coalesce(w.straggler_wait_ns, 0)) as bigint) as straggler_wait_ns,
    t.msg_bytes,
    d.device_exposed_ns,
    d.device_exposed_pct,
    greatest(cast(round(coalesce(e.exposed_ns, 0) - coalesce(w.straggler_wait_ns, 0)) as bigint), 0) as impact_ns
from totals t
join device_share d on d.device_id = t.device_id
join comm_ranks r on r.capture_id = $capture_id and r.device_id = t.device_id
left join exposed e on e.device_id = t.device_id and e.collective = t.collective
left join waits w on w.device_id = t.device_id and w.collective = t.collective
