-- The analysis layer, part 5: who communicates with whom. Collectives per rank, matched across ranks.
--
-- A rank is one GPU of one process of a distributed job. Ranks in separate captures (one PyTorch profiler trace per
-- rank, its rank in capture_distributed) and ranks as devices of one capture (an nsys capture of a whole node) are
-- the same case: every device that ran a communication kernel is a rank of a job. NCCL runs the collectives of one
-- communicator in the same order on every rank, so the k-th collective of a type on one rank is the k-th of that
-- type on every other: that index is what matches them.

-- @macro na_collective_type(name)
-- The collective of an NCCL kernel from its name: AllReduce, SendRecv, AllGather, ReduceScatter, Broadcast, Reduce,
-- ... (ncclKernel_AllReduce_RING_LL_Sum_float, ncclDevKernel_SendRecv); 'other' for a name without one.
create or replace macro na_collective_type(name) as (
    coalesce(nullif(regexp_extract(name, '^nccl(?:Dev)?Kernel_([A-Za-z]+)', 1), ''), 'other')
);

-- @view comm_ranks
-- One row per device that ran communication kernels: the job it belongs to and its rank there. A capture that
-- recorded its rank (capture_distributed) and used one device is that rank of the job 'world of N' (N: the world
-- size), so the captures of one job's ranks meet; any other capture is a job of its own whose ranks are its devices
-- in device order.
-- @column capture_id Capture (captures.capture_id).
-- @column device_id GPU.
-- @column job Which job the rank belongs to: 'world of N' (ranks recorded in the captures) or 'capture C'.
-- @column rank Rank within the job.
-- @column rank_source distributedInfo (recorded by the profiler) or device order (devices of one capture).
create or replace view comm_ranks as
with devices as (
    select distinct r.capture_id, r.device_id
    from kernel_rows r
    join (select capture_id, name_id from kernel_names where na_comm_kernel(name)) n
        on n.capture_id = r.capture_id and n.name_id = coalesce(r.short_name_id, r.name_id)
),
counted as (
    select capture_id, device_id, count(*) over (partition by capture_id) as devices,
           dense_rank() over (partition by capture_id order by device_id) - 1 as device_order
    from devices
)
select c.capture_id, c.device_id,
       case when d.rank is not null and c.devices = 1 then 'world of ' || coalesce(d.world_size::varchar, '?')
            else 'capture ' || c.capture_id end as job,
       case when d.rank is not null and c.devices = 1 then d.rank else c.device_order end as rank,
       case when d.rank is not null and c.devices = 1 then 'distributedInfo' else 'device order' end as rank_source
from counted c
left join capture_distributed d on d.capture_id = c.capture_id;

-- @view collective_ops
-- Every communication kernel with its rank, collective, message where recorded, and its index: the k-th kernel of
-- that collective (and process group, where recorded) on that rank. Times on the capture's own clock.
-- @column capture_id Capture (captures.capture_id).
-- @column device_id GPU.
-- @column job comm_ranks.job.
-- @column rank comm_ranks.rank.
-- @column pid Process that launched the kernel.
-- @column stream_id CUDA stream the kernel ran on.
-- @column correlation_id Links to the launching call.
-- @column name Kernel name.
-- @column collective na_collective_type(name): AllReduce, SendRecv, AllGather, ...
-- @column process_group Process group the PyTorch profiler recorded for the call (collectives.process_group), or NULL.
-- @column msg_bytes Input message size where recorded (collectives.in_msg_bytes), else NULL.
-- @column index 1-based order of the kernel among those of its collective and process group on its rank.
-- @column start_ns Start, ns.
-- @column end_ns End, ns.
-- @column duration_ns end_ns - start_ns, ns.
create or replace view collective_ops as
with k as (
    -- kernel_rows joined with the few communication names (as gpu_ops finds them), not the kernels view: its
    -- name joins would touch every kernel of the capture
    select r.capture_id, r.device_id, r.stream_id, r.pid, r.correlation_id, coalesce(f.name, n.name) as name,
           r.start_ns, r.end_ns, r.duration_ns
    from kernel_rows r
    join (select capture_id, name_id, name from kernel_names where na_comm_kernel(name)) n
        on n.capture_id = r.capture_id and n.name_id = coalesce(r.short_name_id, r.name_id)
    left join kernel_names f on f.capture_id = r.capture_id and f.name_id = r.name_id
),
recorded as (
    -- the profiler's record of the call that launched the kernel (Kineto kernel rows carry the call's arguments)
    select capture_id, correlation_id, any_value(process_group) as process_group,
           any_value(in_msg_bytes) as msg_bytes
    from collectives
    where source = 'kernel' and correlation_id is not null
    group by all
)
select k.capture_id, k.device_id, r.job, r.rank, k.pid, k.stream_id, k.correlation_id, k.name,
       na_collective_type(k.name) as collective, rec.process_group, rec.msg_bytes,
       row_number() over (partition by k.capture_id, k.device_id, rec.process_group, na_collective_type(k.name)
                          order by k.start_ns, k.end_ns) as "index",
       k.start_ns, k.end_ns, k.duration_ns
from k
join comm_ranks r on r.capture_id = k.capture_id and r.device_id = k.device_id
left join recorded rec on rec.capture_id = k.capture_id and rec.correlation_id = k.correlation_id;

-- @view collective_clock_offsets
-- The correction that puts each capture of a job on one clock. Captures written on different hosts count time
-- from different clocks, but a collective ends within microseconds on every rank (no rank leaves before all have
-- arrived): the median, over the collectives matched with the job's lowest rank, of that rank's end minus this
-- capture's end is the offset between the two clocks. It is applied when it is 10 us or more; below that the
-- clocks agree as well as the anchor can tell, and the capture keeps its own times (offset 0).
-- @column capture_id Capture (captures.capture_id).
-- @column job comm_ranks.job.
-- @column reference_capture_id The capture of the job's lowest rank, whose clock the others are put on.
-- @column anchors Collectives matched with the reference rank (0: nothing to align by).
-- @column measured_offset_ns Median of the reference rank's collective ends minus this capture's, ns.
-- @column offset_ns The correction applied: added to this capture's times, ns.
create or replace view collective_clock_offsets as
with ref as (
    select job, arg_min(capture_id, rank) as reference_capture_id, min(rank) as reference_rank
    from comm_ranks
    group by job
),
pairs as (
    select o.capture_id, o.job, x.end_ns - o.end_ns as diff_ns
    from collective_ops o
    join ref f on f.job = o.job
    join collective_ops x on x.job = o.job and x.rank = f.reference_rank and x.collective = o.collective
        and x.process_group is not distinct from o.process_group and x."index" = o."index"
    where o.capture_id <> f.reference_capture_id
),
measured as (
    select capture_id, job, count(*) as anchors, cast(round(median(diff_ns)) as bigint) as measured_offset_ns
    from pairs
    group by all
)
select c.capture_id, c.job, f.reference_capture_id, coalesce(m.anchors, 0) as anchors,
       coalesce(m.measured_offset_ns, 0) as measured_offset_ns,
       case when abs(coalesce(m.measured_offset_ns, 0)) >= 10000 then m.measured_offset_ns else 0 end as offset_ns
from (select distinct capture_id, job from comm_ranks) c
join ref f on f.job = c.job
left join measured m on m.capture_id = c.capture_id and m.job = c.job;

-- @view collective_ranks
-- The collectives matched across ranks: one row per rank and collective that at least two ranks of its job ran
-- (same collective, process group and index), with the arrival skew and the time this rank waited for the last
-- one to arrive. Aligned times are on the clock of the job's reference capture (collective_clock_offsets).
-- @column capture_id Capture (captures.capture_id).
-- @column device_id GPU.
-- @column job comm_ranks.job.
-- @column rank comm_ranks.rank.
-- @column collective AllReduce, SendRecv, ... (collective_ops.collective).
-- @column process_group Process group, or NULL.
-- @column index The collective's index (collective_ops.index).
-- @column msg_bytes Message size where recorded, else NULL.
-- @column ranks Ranks that ran this collective.
-- @column start_ns This rank's kernel start on its own capture's clock, ns.
-- @column end_ns This rank's kernel end on its own capture's clock, ns.
-- @column aligned_start_ns start_ns plus the capture's clock offset, ns.
-- @column aligned_end_ns end_ns plus the capture's clock offset, ns.
-- @column skew_ns Latest aligned start minus earliest aligned start over the ranks, ns.
-- @column wait_ns Latest aligned start minus this rank's: how long this rank's kernel waited for the last rank, ns.
-- @column last_rank The rank that arrived last (the latest start; the lowest such rank on a tie).
-- @column longest_wait_rank The rank that arrived first and so waited longest (the lowest on a tie).
-- @column longest_wait_ns That rank's wait (= skew_ns), ns.
-- @column end_spread_ns Latest aligned end minus earliest aligned end, ns: how well the ends agree.
create or replace view collective_ranks as
with ops as (
    select o.*, o.start_ns + f.offset_ns as aligned_start_ns, o.end_ns + f.offset_ns as aligned_end_ns
    from collective_ops o
    join collective_clock_offsets f on f.capture_id = o.capture_id and f.job = o.job
),
matched as (
    select *,
           count(*) over g as ranks,
           max(aligned_start_ns) over g as last_start_ns,
           min(aligned_start_ns) over g as first_start_ns,
           max(aligned_end_ns) over g - min(aligned_end_ns) over g as end_spread_ns,
           -- ranks arriving at the same nanosecond: the lowest is named, so a run names the same rank every time
           arg_max(rank, [aligned_start_ns, -rank]) over g as last_rank,
           arg_min(rank, [aligned_start_ns, rank]) over g as longest_wait_rank
    from ops
    window g as (partition by job, process_group, collective, "index")
)
select capture_id, device_id, job, rank, collective, process_group, "index", msg_bytes, ranks, start_ns, end_ns,
       aligned_start_ns, aligned_end_ns, last_start_ns - first_start_ns as skew_ns,
       last_start_ns - aligned_start_ns as wait_ns, last_rank, longest_wait_rank,
       last_start_ns - first_start_ns as longest_wait_ns, end_spread_ns
from matched
where ranks >= 2;
