-- All idle time of each GPU within the analysis window that the host caused (gpu_idle_gaps causes host, allocation
-- and unknown), short gaps included, plus the gaps in which the GPU waited with work queued (dependency), one row
-- per device and host activity (host_activity: what the launching thread did: io, wait, cpu, cuda-api, framework,
-- unattributed). Gaps under 20 us are launch latency (launch-overhead); startup and compilation (startup-cost),
-- synchronization (sync-stall) and synchronous copies (sync-memcpy) are claimed by those rules, so no gap is
-- charged twice. Each row names what the thread ran most: the calls, functions or PyTorch operators and their
-- share of that activity's time.
with gaps as (
    select h.device_id, h.start_ns, h.duration_ns, h.cause, h.pid, h.tid,
           case when h.cause = 'dependency' then 'dependency' else h.activity end as activity,
           h.coverage, h.detail, na_nvtx_name(g.host_activity) as cuda_label,  -- emit_nvtx's numbers removed
           case when h.cause = 'dependency' then g.host_activity
                when h.activity = 'io' then h.top_io
                when h.activity = 'wait' then h.top_wait
                when h.activity = 'cuda-api' then h.top_cuda_api
                when h.activity = 'framework' then h.top_operator
                when h.activity = 'framework-sync' then h.top_sync_operator
                when h.activity = 'dataloader' then h.top_dataloader
                when h.activity = 'cpu' then h.top_function
           end as what
    from host_activity h
    join gpu_idle_gaps g on g.capture_id = h.capture_id and g.device_id is not distinct from h.device_id
        and g.start_ns = h.start_ns
    where h.capture_id = $capture_id and h.cause in ('host', 'allocation', 'unknown', 'dependency')
),
named as (
    select device_id, activity, what, sum(duration_ns) as ns
    from gaps
    where what is not null
    group by all
),
tops as (
    -- the three names covering most of each activity's gaps, with their share of its idle time
    select device_id, activity,
           string_agg(what || ' ' || round(100 * ns / total)::bigint || '%', ', ' order by ns desc, what)
               filter (where rn <= 3) as top_names
    from (select *, row_number() over (partition by device_id, activity order by ns desc, what) as rn,
                 sum(ns) over (partition by device_id, activity) as total
          from named)
    group by all
),
per_activity as (
    select device_id, activity,
           count(*) as gaps,
           sum(duration_ns) as idle_ns,
           max(duration_ns) as longest_gap_ns,
           arg_max(start_ns, duration_ns) as longest_gap_start_ns,
           arg_max(detail, duration_ns) as longest_gap_detail,
           arg_max(coalesce(what, cuda_label), duration_ns) as host_activity,
           arg_max(pid, duration_ns) as pid,
           arg_max(tid, duration_ns) as tid,
           round(sum(coverage * duration_ns) / sum(duration_ns), 4) as coverage
    from gaps
    group by all
)
select
    p.device_id,
    p.activity,
    p.gaps,
    p.idle_ns,
    p.longest_gap_ns,
    p.longest_gap_start_ns,
    p.longest_gap_detail,
    p.coverage,
    coalesce(t.top_names, case p.activity when 'unattributed' then 'no host activity covers half of these gaps'
                                          else 'not named' end) as top_names,
    p.host_activity,
    p.pid,
    p.tid,
    sum(p.idle_ns) over (partition by p.device_id) as device_idle_ns,
    round(100.0 * sum(p.idle_ns) over (partition by p.device_id) / nullif(w.duration_ns, 0), 3) as device_idle_pct,
    case p.activity
        when 'io' then 'I/O on the launching thread: read ahead on another thread or process (a loader thread or '
                       || 'worker processes), keep files open and buffered, and stage inputs in pinned buffers'
        when 'wait' then 'the launching thread waits on another thread or process (locks, condition variables, '
                         || 'poll, MPI): overlap the communication with GPU work and launch the next work first'
        when 'cpu' then 'CPU work on the launching thread (result checks, validation, input generation): move it '
                        || 'out of the timed loop, overlap it with GPU work on another thread, or run it on the GPU'
        when 'cuda-api' then 'CUDA calls block the launching thread: allocate once up front (or cudaMallocAsync), '
                             || 'copy asynchronously from pinned memory, and synchronize less'
        when 'framework' then 'framework overhead: PyTorch operators on the host between kernels: capture the '
                              || 'step in CUDA graphs (torch.compile mode=''reduce-overhead''), use larger batches, '
                              || 'and avoid .item()/.cpu()/nonzero in the loop'
        when 'framework-sync' then 'PyTorch operators wait for the GPU (.item(), .cpu(), .to(''cpu''), nonzero, '
                                   || 'masked_select): call .item() less often (accumulate on the GPU and read once '
                                   || 'per step or per log interval), keep values on the GPU, copy with '
                                   || 'non_blocking=True into pinned memory, and avoid data-dependent shapes'
        when 'dataloader' then 'the DataLoader loads the next batch on the launching thread: more DataLoader '
                               || 'workers (num_workers), pin_memory=True, prefetch_factor and persistent_workers, '
                               || 'or a prefetcher that copies the next batch while this one runs'
        when 'dependency' then 'the GPU waits with work queued: for another stream or an event, a collective''s '
                               || 'peers or a host callback: balance the streams or ranks and record events earlier'
        else 'nothing recorded covers half of these gaps: record OS runtime calls and CPU samples (nsys profile '
             || '--trace=osrt --sample=process-tree) or add NVTX ranges to name them'
    end as fix_hint,
    p.idle_ns as impact_ns
from per_activity p
left join tops t on t.device_id is not distinct from p.device_id and t.activity = p.activity
cross join (select duration_ns from analysis_window where capture_id = $capture_id) w
