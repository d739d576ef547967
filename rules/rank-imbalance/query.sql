-- The spread of work across the ranks of a job: per rank, the time a compute kernel ran (kernel part of the time
-- partition: communication excluded) and its analysis window. Reported once, on the capture and GPU of the busiest
-- rank, with every rank of the job as evidence.
with ranks as (
    select r.capture_id, r.device_id, r.job, r.rank
    from comm_ranks r
    where r.job in (select job from comm_ranks where capture_id = $capture_id)
),
busy as (
    select r.*, coalesce(k.duration_ns, 0) as busy_ns, coalesce(c.duration_ns, 0) as comm_ns, w.duration_ns as window_ns
    from ranks r
    join analysis_window w on w.capture_id = r.capture_id
    left join gpu_time_partition k on k.capture_id = r.capture_id and k.device_id = r.device_id and k.part = 'kernel'
    left join gpu_time_partition c on c.capture_id = r.capture_id and c.device_id = r.device_id and c.part = 'comm'
),
spread as (
    -- the busiest rank, one row of them (ties: the lowest rank): three arg_max calls could each take another tied row,
    -- and which one varied from run to run on a job's replicated ranks
    select job, count(*) as ranks, median(busy_ns) as median_busy_ns, max(busy_ns) as max_busy_ns,
           min(busy_ns) as min_busy_ns,
           first(struct_pack(rank := rank, capture_id := capture_id, device_id := device_id)
                 order by busy_ns desc, rank, capture_id, device_id) as busiest,
           median(window_ns) as median_window_ns, max(window_ns) as max_window_ns
    from busy
    group by job
    having count(*) >= 2
)
select
    b.rank,
    s.busiest.device_id as device_id,
    b.capture_id as rank_capture_id,
    b.device_id as rank_device_id,
    b.busy_ns,
    b.comm_ns,
    b.window_ns,
    cast(round(b.busy_ns - s.median_busy_ns) as bigint) as above_median_ns,
    s.ranks,
    s.busiest.rank as busiest_rank,
    cast(round(s.median_busy_ns) as bigint) as median_busy_ns,
    s.min_busy_ns,
    round(100.0 * (s.max_busy_ns - s.median_busy_ns) / nullif(s.median_busy_ns, 0), 2) as imbalance_pct,
    round(100.0 * (s.max_window_ns - s.median_window_ns) / nullif(s.median_window_ns, 0), 2) as window_spread_pct,
    case when b.rank = s.busiest.rank then cast(round(s.max_busy_ns - s.median_busy_ns) as bigint) else 0 end
        as impact_ns
from busy b
join spread s on s.job = b.job
where s.busiest.capture_id = $capture_id
