-- The analysis layer, part 2: the time partition of each GPU over the analysis window.
--
-- One sweep over the start and end of every GPU operation (clipped to the window) cuts each device's window into
-- segments in which the set of running operation kinds does not change. A segment is 'kernel' when a compute
-- kernel runs, else 'comm' when only communication kernels (NCCL) run, else 'copy' when a copy runs, else 'memset'
-- when a set runs, else 'idle'. Their lengths therefore add up to the window exactly, and overlapping work on
-- concurrent streams counts once: communication overlapped by compute is kernel time, the rest is exposed.

-- The states of gpu_time_segments, a closed vocabulary kept as one byte: the segments' table is written once and read
-- by every stage after it (2.54M rows for the 1M-kernel export, whose five-letter texts cost the table's write and
-- each read's comparisons about 0.1 CPU-s; the states compare and print as text).
create type if not exists na_gpu_state as enum ('kernel', 'comm', 'copy', 'memset', 'idle');

-- @view gpu_time_segments
-- The pieces of each device's analysis window, one row per stretch in which the running operation kinds stay the
-- same (zero-length stretches left out). Every device that ran any operation in the capture has segments
-- covering the whole window.
-- @column capture_id Capture (captures.capture_id).
-- @column device_id GPU.
-- @column start_ns Segment start, ns.
-- @column end_ns Segment end, ns.
-- @column duration_ns end_ns - start_ns, ns.
-- @column state kernel (a compute kernel runs), comm (only communication kernels run), copy (copies and no kernel),
-- memset (only sets) or idle.
-- @column kernels Kernels running in the segment, communication kernels included.
-- @column h2d_copies Host-to-device copies running (directions containing 'Host-to-Device').
-- @column d2h_copies Device-to-host copies running (directions containing 'Device-to-Host').
-- @column other_copies Other copies running (device-to-device, peer, host-to-host).
-- @column memsets Memory sets running.
-- @column comm_kernels Communication kernels (gpu_ops.comm) running in the segment.
create or replace view gpu_time_segments as
with w as (
    select capture_id, start_ns, end_ns from analysis_window
),
ops as (
    -- each operation as one packed counter: 12 bits per kind (kernel, host-to-device copy, device-to-host copy,
    -- other copy, memset, communication kernel: counted as a kernel too), so that one running sum counts all six
    -- (a device runs at most 128 concurrent kernels and a handful of copies: no field overflows; the sixth field
    -- reaches past 64 bits in the running sum, which DuckDB keeps as a hugeint, while each delta fits a bigint)
    select
        o.capture_id, o.device_id,
        greatest(o.start_ns, w.start_ns) as start_ns,
        least(o.end_ns, w.end_ns) as end_ns,
        case when o.op = 'kernel' and o.comm then 1 + 1152921504606846976
             when o.op = 'kernel' then 1
             when o.op = 'memcpy' and o.direction ilike '%host-to-device%' then 4096
             when o.op = 'memcpy' and o.direction ilike '%device-to-host%' then 16777216
             when o.op = 'memcpy' then 68719476736
             else 281474976710656 end as delta
    from gpu_ops o
    join w on w.capture_id = o.capture_id
    where o.end_ns > w.start_ns and o.start_ns < w.end_ns and o.end_ns > o.start_ns
),
devices as (
    select distinct capture_id, device_id from gpu_ops
),
events as (
    -- each operation's start and end from one read of ops (two reads made DuckDB keep a copy of every operation)
    select capture_id, device_id, unnest([start_ns, end_ns]) as t_ns, unnest([delta, -delta]) as delta from ops
    union all
    -- the window's two ends, on every device: the leading and trailing idle stretches
    select dv.capture_id, dv.device_id, unnest([w.start_ns, w.end_ns]), 0 from devices dv join w using (capture_id)
),
swept as (
    -- after each event, how many operations of each kind run, until the next event
    select
        capture_id, device_id,
        t_ns as start_ns,
        lead(t_ns) over w_dev as end_ns,
        sum(delta) over (w_dev rows unbounded preceding) as packed
    from events
    window w_dev as (partition by capture_id, device_id order by t_ns)
),
counted as (
    -- the hugeint split once, into the five fields below bit 60 (a bigint) and the sixth, and those unpacked:
    -- twelve hugeint shifts and masks over 2.5M segments cost the 1M-kernel export about 0.05 s more
    select capture_id, device_id, start_ns, end_ns,
           (low & 4095)::integer as kernels, ((low >> 12) & 4095)::integer as h2d_copies,
           ((low >> 24) & 4095)::integer as d2h_copies, ((low >> 36) & 4095)::integer as other_copies,
           ((low >> 48) & 4095)::integer as memsets, comm_kernels
    from (select capture_id, device_id, start_ns, end_ns, (packed & 1152921504606846975)::bigint as low,
                 ((packed >> 60) & 4095)::integer as comm_kernels
          from swept
          where end_ns > start_ns)
)
select
    capture_id, device_id, start_ns, end_ns, end_ns - start_ns as duration_ns,
    case when kernels > comm_kernels then 'kernel'::na_gpu_state
         when kernels > 0 then 'comm'::na_gpu_state
         when h2d_copies + d2h_copies + other_copies > 0 then 'copy'::na_gpu_state
         when memsets > 0 then 'memset'::na_gpu_state
         else 'idle'::na_gpu_state end as state,
    kernels, h2d_copies, d2h_copies, other_copies, memsets, comm_kernels
from counted;

-- @view gpu_busy_intervals
-- The union of each device's operations within the analysis window: one row per stretch in which the device ran
-- anything (kernels, copies or sets, on any stream), between two idle gaps.
-- @column capture_id Capture (captures.capture_id).
-- @column device_id GPU.
-- @column start_ns Start of the busy stretch, ns.
-- @column end_ns End of the busy stretch, ns.
-- @column duration_ns end_ns - start_ns, ns.
create or replace view gpu_busy_intervals as
with marked as (
    select capture_id, device_id, start_ns, end_ns, state,
           -- busy stretches are numbered by the idle segments before them
           sum((state = 'idle')::integer) over (partition by capture_id, device_id order by start_ns
                                                 rows unbounded preceding) as island
    from gpu_time_segments
)
select capture_id, device_id, min(start_ns) as start_ns, max(end_ns) as end_ns, max(end_ns) - min(start_ns) as duration_ns
from marked
where state <> 'idle'
group by capture_id, device_id, island;

-- @view copy_exposure
-- Per device and copy direction, the copies and the part of their time during which no kernel ran on the device
-- (exposed: the 'copy' state of gpu_time_segments). A stretch in which copies of two directions run at once is
-- shared evenly between them, so the directions never claim the same nanosecond.
-- @column capture_id Capture (captures.capture_id).
-- @column device_id GPU.
-- @column direction h2d (host to device), d2h (device to host) or other.
-- @column copies Copies of that direction in the whole capture.
-- @column bytes Bytes copied.
-- @column pageable_bytes Bytes copied from or to pageable host memory.
-- @column transfer_ns Summed copy durations, ns.
-- @column achieved_gb_per_s bytes / transfer_ns, GB/s.
-- @column exposed_ns Copy time within the analysis window with no kernel running on the device, ns.
create or replace view copy_exposure as
with copies as (
    select capture_id, device_id,
           case when direction ilike '%host-to-device%' then 'h2d'
                when direction ilike '%device-to-host%' then 'd2h' else 'other' end as direction,
           bytes, duration_ns,
           case when src_kind = 'pageable' or dst_kind = 'pageable' then bytes else 0 end as pageable_bytes
    from memcpys
),
totals as (
    select capture_id, device_id, direction, count(*) as copies, sum(bytes) as bytes,
           sum(pageable_bytes) as pageable_bytes, sum(duration_ns) as transfer_ns
    from copies
    group by all
),
shares as (
    select capture_id, device_id, duration_ns,
           (h2d_copies > 0)::integer as h, (d2h_copies > 0)::integer as d, (other_copies > 0)::integer as o
    from gpu_time_segments
    where state = 'copy'
),
exposed as (
    select capture_id, device_id, 'h2d' as direction, sum(duration_ns * h / (h + d + o)) as exposed_ns
    from shares where h > 0 group by all
    union all
    select capture_id, device_id, 'd2h', sum(duration_ns * d / (h + d + o)) from shares where d > 0 group by all
    union all
    select capture_id, device_id, 'other', sum(duration_ns * o / (h + d + o)) from shares where o > 0 group by all
)
select t.capture_id, t.device_id, t.direction, t.copies, t.bytes, t.pageable_bytes, t.transfer_ns,
       round(t.bytes / nullif(t.transfer_ns, 0), 2) as achieved_gb_per_s,
       cast(round(coalesce(e.exposed_ns, 0)) as bigint) as exposed_ns
from totals t
left join exposed e on e.capture_id = t.capture_id and e.device_id is not distinct from t.device_id
    and e.direction = t.direction;
