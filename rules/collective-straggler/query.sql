-- Collectives this capture's ranks waited at: one row per rank and matched collective (collective_ranks) in which
-- the rank started its kernel before the last rank arrived. The wait that costs wall time is the part of it during
-- which the GPU did nothing but communicate (gpu_time_segments 'comm'); the rest was hidden behind compute.
with mine as (
    select * from collective_ranks where capture_id = $capture_id and wait_ns > 0
),
exposed as (
    -- the exposed part of each wait, on the rank's own clock: [start, start + wait) within 'comm' segments
    select m.device_id, m.collective, m.process_group, m."index",
           sum(least(s.end_ns, m.start_ns + m.wait_ns) - greatest(s.start_ns, m.start_ns)) as exposed_wait_ns
    from mine m
    join gpu_time_segments s on s.capture_id = m.capture_id and s.device_id = m.device_id and s.state = 'comm'
        and s.start_ns < m.start_ns + m.wait_ns and s.end_ns > m.start_ns
    group by all
),
late as (
    -- the last rank's own kernel of each of these collectives
    select l.capture_id, l.device_id, l.job, l.collective, l.process_group, l."index", l.start_ns
    from collective_ranks l
    where l.rank = l.last_rank and l.job in (select job from mine)
),
compute_kernels as (
    select capture_id, device_id, end_ns, coalesce(short_name, name) as kernel
    from kernels
    where (capture_id, device_id) in (select capture_id, device_id from late)
      and not na_comm_kernel(coalesce(short_name, name))
),
before_late as (
    -- what the late rank's GPU ran last before it arrived, and how long it then sat before the collective began
    select l.job, l.collective, l.process_group, l."index", k.kernel as late_rank_before,
           l.start_ns - k.end_ns as late_rank_gap_ns
    from late l
    asof left join compute_kernels k
        on k.capture_id = l.capture_id and k.device_id = l.device_id and l.start_ns >= k.end_ns
),
lasts as (
    -- which rank arrives last, and how often, over all matched collectives of the job
    select job, last_rank, count(*) as times_last, sum(count(*)) over (partition by job) as matched,
           row_number() over (partition by job order by count(*) desc, last_rank) as place
    from (select distinct job, collective, process_group, "index", last_rank from collective_ranks
          where job in (select job from mine))
    group by job, last_rank
)
select
    m.collective,
    m."index",
    m.device_id,
    m.rank,
    m.last_rank,
    m.skew_ns,
    m.longest_wait_rank,
    m.longest_wait_ns as wait_ns,
    m.wait_ns as rank_wait_ns,
    b.late_rank_before,
    b.late_rank_gap_ns,
    l.last_rank as most_often_last_rank,
    l.times_last,
    l.matched,
    m.msg_bytes,
    coalesce(e.exposed_wait_ns, 0) as impact_ns
from mine m
left join exposed e on e.device_id = m.device_id and e.collective = m.collective
    and e.process_group is not distinct from m.process_group and e."index" = m."index"
left join before_late b on b.job = m.job and b.collective = m.collective
    and b.process_group is not distinct from m.process_group and b."index" = m."index"
left join lasts l on l.job = m.job and l.place = 1
