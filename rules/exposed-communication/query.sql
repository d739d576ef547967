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
job_ranks as (
    -- How many of the job's ranks the loaded captures hold, and the world size where a profiler recorded it: a wait
    -- for a late rank can only be seen between ranks that are present.
    select r.job, count(distinct r.rank) as ranks_present, max(d.world_size) as world_size
    from comm_ranks r
    left join capture_distributed d on d.capture_id = r.capture_id
    group by r.job
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
    j.ranks_present,
    j.world_size,
    case
        when j.world_size > j.ranks_present then
            'is exposed; only ' || j.ranks_present || ' of the job''s ' || j.world_size || ' ranks '
            || case when j.ranks_present = 1 then 'is' else 'are' end || ' in the capture, so whether it waits for a late rank cannot be told from it'
        when j.world_size is null and j.ranks_present = 1 then
            'is exposed; 1 rank is in the capture and the job''s size is not recorded, so whether it waits for a '
            || 'late rank cannot be told from it'
        else 'of it is not waiting for a late rank (' || j.ranks_present || ' rank(s) of the job compared)'
    end as rank_scope,
    greatest(cast(round(coalesce(e.exposed_ns, 0) - coalesce(w.straggler_wait_ns, 0)) as bigint), 0) as impact_ns
from totals t
join device_share d on d.device_id = t.device_id
join comm_ranks r on r.capture_id = $capture_id and r.device_id = t.device_id
join job_ranks j on j.job = r.job
left join exposed e on e.device_id = t.device_id and e.collective = t.collective
left join waits w on w.device_id = t.device_id and w.collective = t.collective
