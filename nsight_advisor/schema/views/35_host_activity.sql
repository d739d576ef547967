-- The analysis layer, part 6: what the host thread that feeds a GPU did while the GPU waited.
--
-- For each idle gap of 20 us or more (gpu_idle_gaps; shorter ones are launch or sync) the launching thread is the
-- thread whose CUDA call launched the operation that ends the gap (for a trailing gap: the one that began it). What
-- that thread did during the gap is read from every host source the capture recorded, each its own activity in a closed
-- vocabulary:
--   io           : OS runtime calls that read or write files, pipes or sockets (read, fread, getc, fopen, recv, ...)
--   wait         : OS runtime calls that wait for another thread or process (futex, pthread_cond_wait, poll, epoll,
--                  sem_wait, sleep, waitpid, ...)
--   cuda-api     : CUDA runtime and driver calls (and OS runtime calls made inside them, such as the driver's ioctl)
--   framework    : PyTorch operators outside the calls above: the profiler's cpu_ops, or in an Nsight Systems export
--                  of a program run under torch.autograd.profiler.emit_nvtx, the NVTX range it records for each
--                  operator (its text carries ', op_id = N'; PyTorch's record_function ranges included)
--   framework-sync : PyTorch operators that wait for the GPU (na_sync_operator: .item(), nonzero, and copies to
--                  the host: an aten::copy_ that launched a device-to-host copy, op_kernels), CUDA calls inside
--                  them included
--   dataloader   : a DataLoader fetching the next batch: the ranges PyTorch's profiler records as
--                  enumerate(DataLoader)#...__next__ (user annotations, in nvtx_ranges), whatever ran inside
--   cpu          : CPU samples of the thread outside blocking calls: the program's own work
--   unattributed : no activity covers half the gap
-- Coverage is time within the gap. OS runtime calls inside a CUDA call count as cuda-api; the operators' time is
-- what their union leaves after the calls inside them (io, wait, cuda-api); CPU samples count one sampling period
-- each (the median interval between a thread's consecutive samples), within what the rest leaves. A gap is named
-- after an activity only when it covers half the gap or more (na_host_label_share): below that it is
-- unattributed, and the evidence says how much the largest activity covered ("unattributed (12% covered by
-- cuda-api, most in cudaMalloc 12%)"), so no
-- gap is named after a sliver. framework-sync and dataloader are contexts that hold other activities' time (the
-- CUDA calls of .item(), the collate operators of a batch): where one covers half the gap it names the gap,
-- the DataLoader first, whatever the largest activity inside it. Half is the calibration on the five shared exports with host data: every gap of
-- 1 ms or more there is covered 50% or more by one activity, or by none above 40%; on the three with emit_nvtx
-- operator ranges, 64% or more (docs/impact.md).

-- @macro na_host_label_share()
-- The share of a gap an activity must cover to name it: 0.5.
create or replace macro na_host_label_share() as (0.5);

-- @macro na_osrt_class(name)
-- The activity of an OS runtime call from its function name: io (file, pipe and socket input and output), wait
-- (waiting for another thread or process, or sleeping), or other (memory mapping, ioctl, thread creation, ...).
create or replace macro na_osrt_class(name) as (
    case
        when regexp_matches(name, '^(read|pread|pread64|readv|preadv|preadv2|write|pwrite|pwrite64|writev|pwritev|'
                || 'fread|fwrite|fread_unlocked|fwrite_unlocked|getc|fgetc|getc_unlocked|fgets|getline|getdelim|gets|'
                || 'fscanf|scanf|vfscanf|fputs|fputc|putc|fprintf|fflush|fsync|fdatasync|sync_file_range|'
                || 'open|open64|openat|openat64|fopen|fopen64|fdopen|freopen|fclose|close|creat|creat64|'
                || 'recv|recvfrom|recvmsg|recvmmsg|send|sendto|sendmsg|sendmmsg|accept|accept4|connect|'
                || 'stat|stat64|fstat|fstat64|lstat|lstat64|statx|access|unlink|rename|readdir|readdir64|opendir|'
                || 'sendfile|sendfile64|splice|copy_file_range|aio_read|aio_write|io_submit|io_getevents)$') then 'io'
        when regexp_matches(name, '^(pthread_cond_wait|pthread_cond_timedwait|pthread_cond_clockwait|'
                || 'pthread_mutex_lock|pthread_mutex_timedlock|pthread_rwlock_rdlock|pthread_rwlock_wrlock|'
                || 'pthread_rwlock_timedrdlock|pthread_rwlock_timedwrlock|pthread_spin_lock|pthread_barrier_wait|'
                || 'pthread_join|pthread_timedjoin_np|sem_wait|sem_timedwait|sem_clockwait|futex|syscall|'
                || 'poll|ppoll|select|pselect|pselect6|epoll_wait|epoll_pwait|epoll_pwait2|'
                || 'sleep|usleep|nanosleep|clock_nanosleep|sched_yield|pause|sigwait|sigtimedwait|sigwaitinfo|'
                || 'wait|waitpid|wait3|wait4|waitid|msgrcv|semop|semtimedop|MPI_.*)$') then 'wait'
        else 'other'
    end
);

-- @macro na_program_frame(symbol, module, unresolved)
-- Whether a backtrace frame is the program's own: resolved, and not in the CUDA driver or runtime, the C or
-- threads library, the loader or the profiler's injection. The one definition: findings' source frames
-- (nsight_advisor.engine.source_frames) use it too.
create or replace macro na_program_frame(symbol, module, unresolved) as (
    symbol is not null and not coalesce(unresolved, false)
    and not regexp_matches(symbol, '^(_*cuda|_*cudart|cu[A-Z]|_*libcuda|_*libc|_*pthread|_*ioctl|0x[0-9a-fA-F]+$|\[)')
    and not regexp_matches(regexp_extract(coalesce(module, ''), '[^/]*$'),
                           '^(libcuda|libcudart|libc[.-]|libpthread|libdl|librt|ld-linux|libcupti|libToolsInjection|'
                           || 'libnvidia|\[)')
);

-- @macro na_short_symbol(symbol)
-- A function's name without its return type, arguments and template arguments, at most 80 characters: the name a report can
-- show (a CUDA lambda's full symbol runs to thousands of characters).
create or replace macro na_short_symbol(symbol) as (
    -- template arguments removed innermost first (six levels), then the arguments, then the return type
    left(regexp_extract(regexp_replace(
        regexp_replace(regexp_replace(regexp_replace(regexp_replace(regexp_replace(regexp_replace(symbol,
            '<[^<>]*>', '', 'g'), '<[^<>]*>', '', 'g'), '<[^<>]*>', '', 'g'), '<[^<>]*>', '', 'g'),
            '<[^<>]*>', '', 'g'), '<[^<>]*>', '', 'g'),
        '\(.*$', ''), '(\S+)\s*$', 1), 80)
);

-- @view host_samples
-- CPU samples (host_calls rows of source 'sample') with the program function each was taken in: the innermost
-- frame of its backtrace that is the program's own (na_program_frame), shortened (na_short_symbol).
-- @column capture_id Capture (captures.capture_id).
-- @column pid Process id.
-- @column tid Thread id.
-- @column t_ns When the sample was taken, ns.
-- @column function The innermost program frame's function, or NULL when the backtrace has none (all in libraries).
-- @column period_ns The thread's sampling period: the median interval between its consecutive samples, ns.
create or replace view host_samples as
with s as (
    select capture_id, pid, tid, start_ns as t_ns, callchain_id,
           start_ns - lag(start_ns) over (partition by capture_id, pid, tid order by start_ns) as step_ns
    from host_calls
    where source = 'sample'
),
frames as (
    select capture_id, callchain_id, na_short_symbol(arg_min(symbol, depth)) as function
    from callchain_frames
    where source = 'sample' and na_program_frame(symbol, module, unresolved)
    group by all
),
periods as (
    select capture_id, pid, tid, cast(median(step_ns) as bigint) as period_ns
    from s
    where step_ns > 0
    group by all
)
select s.capture_id, s.pid, s.tid, s.t_ns, nullif(f.function, '') as function, coalesce(p.period_ns, 1000000) as period_ns
from s
left join frames f on f.capture_id = s.capture_id and f.callchain_id = s.callchain_id
left join periods p on p.capture_id = s.capture_id and p.pid = s.pid and p.tid = s.tid;

-- @view host_activity
-- One row per idle gap of 20 us or more (gpu_idle_gaps; shorter ones are launch or sync), and one per capture for
-- the time before its analysis window (cause 'before-window', device_id NULL, on the thread that launched the window's
-- first operation): the thread that launches the device's work, what it did during the gap by activity (the
-- vocabulary above), and the activity that names the gap when one covers half of it or more.
-- @column capture_id Capture (captures.capture_id).
-- @column device_id GPU (NULL for the time before the window).
-- @column start_ns Gap start, ns.
-- @column end_ns Gap end, ns.
-- @column duration_ns end_ns - start_ns, ns.
-- @column cause The gap's cause (gpu_idle_gaps.cause), or before-window.
-- @column pid Process of the launching thread, or NULL when no launch call is recorded.
-- @column tid The launching thread, or NULL.
-- @column io_ns Time in the gap in io calls, ns.
-- @column wait_ns Time in wait calls, ns.
-- @column cuda_api_ns Time in CUDA calls, ns.
-- @column framework_ns Time in PyTorch operators (cpu_ops, or emit_nvtx operator ranges) outside those calls, ns.
-- @column cpu_ns CPU samples in the gap outside those calls, one sampling period each, ns.
-- @column samples CPU samples of the thread in the gap.
-- @column framework_sync_ns Time in operators that wait for the GPU (na_sync_operator, copies to the host), ns; it holds CUDA call time counted in cuda_api_ns.
-- @column dataloader_ns Time in DataLoader batch fetches (enumerate(DataLoader)#...__next__ ranges), ns; it holds the time of whatever ran inside.
-- @column activity dataloader or framework-sync when that covers na_host_label_share() of the gap or more, else the activity covering the most of the gap when it covers that share; else unattributed.
-- @column coverage That activity's share of the gap (for unattributed: the largest activity's share), 0 to 1.
-- @column top_io The io call covering most of the gap, or NULL.
-- @column top_wait The wait call covering most of the gap, or NULL.
-- @column top_cuda_api The CUDA call covering most of the gap, or NULL.
-- @column top_operator The PyTorch operator covering most of the gap, aten:: operators first, or NULL.
-- @column top_sync_operator The operator waiting for the GPU that covered most of the gap, or NULL.
-- @column top_dataloader The DataLoader range that covered most of the gap (its name), or NULL.
-- @column top_function The program function most samples in the gap were taken in, or NULL.
-- @column top_function_share That function's share of the gap's samples, 0 to 1, or NULL.
-- @column detail What names the gap in words: the activity and its share, and the call, operator or function that covered most ("cuda-api covers 100%, most in cudaDeviceSynchronize 63%"); for unattributed what covered most ("unattributed (12% covered by cuda-api, most in cudaMalloc 12%)").
create or replace view host_activity as
with gaps as (
    -- with the thread that launched the operation ending each gap (gpu_idle_gaps.launch_tid)
    select capture_id, device_id, coalesce(device_id, -1) as dev, start_ns, end_ns, duration_ns, cause,
           launch_pid as pid, launch_tid as tid
    from gpu_idle_gaps
    -- of 20 us or more: a shorter gap is launch latency, or a synchronization's relaunch (named by its call)
    where duration_ns >= 20000
),
before as (
    -- the time before the analysis window, on the thread that launched the window's first operation (the
    -- earliest call of its correlation id)
    select w.capture_id, null::integer as device_id, -2 as dev, c.start_ns, w.start_ns as end_ns,
           w.start_ns - c.start_ns as duration_ns, 'before-window' as cause,
           (select arg_min(struct_pack(pid := a.pid, tid := a.tid),
                           struct_pack(s := a.start_ns, c := o.correlation_id, p := a.pid, h := a.tid))
            from gpu_ops o
            join cuda_api_calls a on a.capture_id = o.capture_id and a.pid = o.pid
                and a.correlation_id = o.correlation_id
            where o.capture_id = w.capture_id and o.start_ns = w.start_ns and a.tid is not null
                and a.correlation_id <> 0) as t
    from analysis_window w
    join captures c on c.capture_id = w.capture_id
    where w.start_ns > c.start_ns
),
tg as (
    select capture_id, device_id, dev, start_ns, end_ns, duration_ns, cause, pid, tid
    from gaps
    union all
    select capture_id, device_id, dev, start_ns, end_ns, duration_ns, cause, t.pid, t.tid
    from before
),
gap_buckets as (
    -- each gap in every bucket of 2^20 ns (1.05 ms) it touches: a call, operator or sample meets only the gaps of
    -- its own buckets, a hash join where a range join of every call against every gap of its thread grows with
    -- their product (docs/performance.md)
    select capture_id, dev, pid, tid, start_ns, end_ns,
           -- at most 2^22 buckets (73 minutes) a gap: a damaged capture's absurd times would otherwise ask for a
           -- list of trillions (the hostile corpus's sqlite-absurd-values); a longer gap is matched on its first 73
           -- minutes only
           unnest(range(start_ns // 1048576, least((end_ns - 1) // 1048576 + 1, start_ns // 1048576 + 4194304)))
               as bucket
    from tg
    where tid is not null and end_ns > start_ns
),
api as not materialized (
    -- read where it is used: copied once, a million calls cost more than reading them twice
    select a.capture_id, a.pid, a.tid, a.start_ns, a.end_ns, a.base_name
    from cuda_api_calls a
    where a.capture_id in (select capture_id from tg) and a.tid is not null
),
osrt as (
    -- OS runtime calls outside CUDA calls (those inside are the driver's: cuda-api time)
    select h.capture_id, h.pid, h.tid, h.start_ns, h.end_ns, h.name, na_osrt_class(h.name) as class
    from host_calls h
    asof left join api a on a.capture_id = h.capture_id and a.pid = h.pid and a.tid = h.tid
        and h.start_ns >= a.start_ns
    where h.source = 'osrt' and h.end_ns > h.start_ns and (a.end_ns is null or h.end_ns > a.end_ns)
),
op_buckets as (
    -- the buckets an operator shorter than a bucket may start in and still meet a gap: those a gap touches, and
    -- each one before them (of any thread: a superset, matched on one key)
    select distinct bucket - shift as bucket
    from gap_buckets, (values (0), (1)) as v(shift)
),
all_ops as (
    select capture_id, pid, tid, start_ns, end_ns, name, false as emitted
    from cpu_ops
    where end_ns > start_ns and capture_id in (select capture_id from tg)
    union all
    -- a capture without them (an Nsight Systems export): the operators PyTorch's emit_nvtx recorded as NVTX ranges,
    -- each text carrying ', op_id = N' (na_nvtx_name removes it, below)
    select capture_id, pid, tid, start_ns, end_ns, text, true
    from nvtx_ranges
    where end_ns > start_ns and capture_id in (select capture_id from tg)
        and capture_id not in (select capture_id from cpu_ops) and contains(text, ', op_id = ')
),
ops as (
    -- only operators that may overlap a gap of their thread (a superset: no other can cover one); a PyTorch
    -- program's millions of operators would otherwise all be sorted into islands (a complete store of an export with
    -- 4.9M emit_nvtx ranges: this view took 2.9 s, 0.36 s so). An operator as long as a bucket or longer is kept; a shorter one is kept when it starts in
    -- one of op_buckets (it ends at most one bucket later).
    select o.capture_id, o.pid, o.tid, o.start_ns, o.end_ns,
           case when o.emitted then na_nvtx_name(o.name) else o.name end as name
    from all_ops o
    where o.start_ns // 1048576 in (select bucket from op_buckets) or o.end_ns - o.start_ns >= 1048576
),
op_reach as (
    select *, max(end_ns) over (partition by capture_id, pid, tid order by start_ns, end_ns desc
                                rows between unbounded preceding and 1 preceding) as reach
    from ops
),
op_islands as (
    -- the union of each thread's operators: nested operators counted once
    select capture_id, pid, tid, min(start_ns) as start_ns, max(end_ns) as end_ns
    from (select *, sum((reach is null or start_ns >= reach)::integer)
                        over (partition by capture_id, pid, tid order by start_ns, end_ns desc rows unbounded preceding)
                        as island
          from op_reach)
    group by capture_id, pid, tid, island
),
sync_ops as (
    select capture_id, pid, tid, start_ns, end_ns, name from ops where na_sync_operator(name)
    union
    -- a copy to the host: the operator that launched a device-to-host copy
    select capture_id, pid, tid, op_start_ns, op_end_ns, op_name
    from op_kernels
    where direction = 'Device-to-Host' and op_name in ('aten::copy_', 'aten::_to_copy', 'aten::to')
        and capture_id in (select capture_id from tg)
),
loader as (
    select capture_id, pid, tid, start_ns, end_ns, text
    from nvtx_ranges
    where text like 'enumerate(DataLoader)%' and end_ns > start_ns and capture_id in (select capture_id from tg)
),
near_calls as materialized (
    -- only the calls that may overlap a gap, as for the operators (op_buckets), once: the 1M-kernel export's 1.7M
    -- calls all went through the buckets' join twice for its 4,366 gaps (osrt's as-of join reads them all: which
    -- call an OS runtime call falls in must not depend on the gaps)
    select capture_id, pid, tid, start_ns, end_ns, base_name from api
    where start_ns // 1048576 in (select bucket from op_buckets) or end_ns - start_ns >= 1048576
),
intervals as not materialized (
    select capture_id, pid, tid, start_ns, end_ns, class as kind, name as label from osrt where class <> 'other'
    union all
    select capture_id, pid, tid, start_ns, end_ns, 'sync-op', name from sync_ops
    union all
    select capture_id, pid, tid, start_ns, end_ns, 'dataloader', text from loader
    union all
    select capture_id, pid, tid, start_ns, end_ns, 'cuda-api', base_name from near_calls
    union all
    select capture_id, pid, tid, start_ns, end_ns, 'ops', null from op_islands
    union all
    select capture_id, pid, tid, start_ns, end_ns, 'op', name from ops
),
covered as (
    -- each (interval, gap) pair once: in the first bucket both touch
    select g.capture_id, g.dev, g.start_ns as gap_start_ns, i.kind, i.label, i.end_ns - i.start_ns as span_ns,
           least(i.end_ns, g.end_ns) - greatest(i.start_ns, g.start_ns) as overlap_ns
    from (select *, start_ns // 1048576 as bucket
          from intervals
          union all
          -- those crossing a bucket's edge also in each later bucket they touch (few: unnest is dear)
          -- (at most 2^22 buckets, as gap_buckets)
          select *, unnest(range(start_ns // 1048576 + 1, least(greatest(end_ns - 1, start_ns) // 1048576 + 1,
                                                                  start_ns // 1048576 + 4194304))) as bucket
          from intervals
          where greatest(end_ns - 1, start_ns) // 1048576 > start_ns // 1048576) i
    join gap_buckets g on g.capture_id = i.capture_id and g.pid = i.pid and g.tid = i.tid and g.bucket = i.bucket
        and i.start_ns < g.end_ns and i.end_ns > g.start_ns
        and g.bucket = greatest(i.start_ns, g.start_ns) // 1048576
),
per_label as (
    select capture_id, dev, gap_start_ns, kind, label, sum(overlap_ns) as ns, min(span_ns) as span_ns
    from covered
    group by all
),
per_gap as (
    -- ties between calls or operators covering the same time go to the shorter one (of nested operators the
    -- innermost, the most specific: aten::cudnn_convolution within aten::_convolution), then to the first name
    -- in alphabetical order, so the same store always names the same one
    select capture_id, dev, gap_start_ns,
           sum(ns) filter (where kind = 'io') as io_ns,
           sum(ns) filter (where kind = 'wait') as wait_ns,
           sum(ns) filter (where kind = 'cuda-api') as cuda_ns,
           sum(ns) filter (where kind = 'ops') as ops_ns,
           sum(ns) filter (where kind = 'sync-op') as sync_op_ns,
           sum(ns) filter (where kind = 'dataloader') as dataloader_ns,
           arg_min(label, struct_pack(n := -ns, d := span_ns, l := label)) filter (where kind = 'sync-op') as top_sync_operator,
           max(ns) filter (where kind = 'sync-op') as top_sync_operator_ns,
           arg_min(label, struct_pack(n := -ns, d := span_ns, l := label)) filter (where kind = 'dataloader') as top_dataloader,
           arg_min(label, struct_pack(n := -ns, d := span_ns, l := label)) filter (where kind = 'io') as top_io,
           arg_min(label, struct_pack(n := -ns, d := span_ns, l := label)) filter (where kind = 'wait') as top_wait,
           arg_min(label, struct_pack(n := -ns, d := span_ns, l := label)) filter (where kind = 'cuda-api') as top_cuda_api,
           arg_min(label, struct_pack(a := -(label like 'aten::%')::integer, n := -ns, d := span_ns, l := label))
               filter (where kind = 'op') as top_operator,
           max(ns) filter (where kind = 'io') as top_io_ns,
           max(ns) filter (where kind = 'wait') as top_wait_ns,
           max(ns) filter (where kind = 'cuda-api') as top_cuda_api_ns,
           arg_min(ns, struct_pack(a := -(label like 'aten::%')::integer, n := -ns, d := span_ns, l := label))
               filter (where kind = 'op') as top_operator_ns
    from per_label
    group by all
),
sampled as (
    select g.capture_id, g.dev, g.start_ns as gap_start_ns, s.function, count(*) as n,
           any_value(s.period_ns) as period_ns
    from host_samples s
    join gap_buckets g on g.capture_id = s.capture_id and g.pid = s.pid and g.tid = s.tid
        and g.bucket = s.t_ns // 1048576 and s.t_ns >= g.start_ns and s.t_ns < g.end_ns
    group by all
),
per_gap_samples as (
    select capture_id, dev, gap_start_ns, sum(n) as samples, sum(n * period_ns) as sampled_ns,
           arg_min(function, struct_pack(n := -n, f := function)) filter (where function is not null) as top_function,
           max(n) filter (where function is not null) / sum(n) as top_function_share
    from sampled
    group by all
),
measured as (
    select g.*,
           least(coalesce(p.io_ns, 0), g.duration_ns) as io_ns,
           least(coalesce(p.wait_ns, 0), g.duration_ns) as wait_ns,
           least(coalesce(p.cuda_ns, 0), g.duration_ns) as cuda_api_ns,
           coalesce(p.ops_ns, 0) as ops_ns,
           least(coalesce(p.sync_op_ns, 0), g.duration_ns) as framework_sync_ns,
           least(coalesce(p.dataloader_ns, 0), g.duration_ns) as dataloader_ns,
           p.top_sync_operator, p.top_sync_operator_ns, p.top_dataloader,
           coalesce(s.samples, 0) as samples, coalesce(s.sampled_ns, 0) as sampled_ns,
           p.top_io, p.top_wait, p.top_cuda_api, p.top_operator, s.top_function, s.top_function_share,
           p.top_io_ns, p.top_wait_ns, p.top_cuda_api_ns, p.top_operator_ns
    from tg g
    left join per_gap p on p.capture_id = g.capture_id and p.dev = g.dev and p.gap_start_ns = g.start_ns
    left join per_gap_samples s on s.capture_id = g.capture_id and s.dev = g.dev and s.gap_start_ns = g.start_ns
),
split as (
    select *,
           greatest(least(ops_ns, duration_ns) - io_ns - wait_ns - cuda_api_ns, 0) as framework_ns
    from measured
),
rest as (
    select *,
           least(sampled_ns, greatest(duration_ns - io_ns - wait_ns - cuda_api_ns - framework_ns, 0)) as cpu_ns
    from split
),
ranked as (
    select *,
           -- the largest activity (ties: the order of the vocabulary)
           -- each with the call, operator or function that covered most of it, and how much that one covered
           [struct_pack(a := 'io', ns := io_ns::double, what := top_io, what_ns := top_io_ns::double),
            struct_pack(a := 'wait', ns := wait_ns::double, what := top_wait, what_ns := top_wait_ns::double),
            struct_pack(a := 'cuda-api', ns := cuda_api_ns::double, what := top_cuda_api, what_ns := top_cuda_api_ns::double),
            struct_pack(a := 'framework', ns := framework_ns::double, what := top_operator, what_ns := top_operator_ns::double),
            struct_pack(a := 'cpu', ns := cpu_ns::double, what := top_function,
                        what_ns := cpu_ns * top_function_share::double)] as acts
    from rest
),
topped as (
    -- a DataLoader fetch or an operator waiting for the GPU names the gap where it covers the share, before the
    -- largest activity (which may run inside it)
    select *,
           case when dataloader_ns > 0 and dataloader_ns >= na_host_label_share() * duration_ns then
                    struct_pack(a := 'dataloader', ns := dataloader_ns::double, what := top_dataloader,
                                what_ns := dataloader_ns::double)
                when framework_sync_ns > 0 and framework_sync_ns >= na_host_label_share() * duration_ns then
                    struct_pack(a := 'framework-sync', ns := framework_sync_ns::double, what := top_sync_operator,
                                what_ns := top_sync_operator_ns::double)
                else list_reduce(acts, (x, y) -> case when y.ns > x.ns then y else x end)
           end as top
    from ranked
)
select capture_id, device_id, start_ns, end_ns, duration_ns, cause, pid, tid,
       io_ns::bigint as io_ns, wait_ns::bigint as wait_ns, cuda_api_ns::bigint as cuda_api_ns,
       framework_ns::bigint as framework_ns, cpu_ns::bigint as cpu_ns, samples::bigint as samples,
       framework_sync_ns::bigint as framework_sync_ns, dataloader_ns::bigint as dataloader_ns,
       case when top.ns > 0 and top.ns >= na_host_label_share() * duration_ns then top.a else 'unattributed' end
           as activity,
       round(top.ns / duration_ns, 4) as coverage,
       top_io, top_wait, top_cuda_api, top_operator, top_sync_operator, top_dataloader, top_function, round(top_function_share, 4) as top_function_share,
       case
           when top.ns <= 0 then 'unattributed (nothing recorded on the launching thread covers it)'
           when top.ns >= na_host_label_share() * duration_ns then
               top.a || ' covers ' || round(100 * top.ns / duration_ns)::bigint || '%'
               || coalesce(', most in ' || top.what || ' ' || round(100 * least(top.what_ns, top.ns) / duration_ns)::bigint
                           || '%', '')
           else 'unattributed (' || round(100 * top.ns / duration_ns)::bigint || '% covered by ' || top.a
                || coalesce(', most in ' || top.what || ' ' || round(100 * least(top.what_ns, top.ns) / duration_ns)::bigint
                            || '%', '') || ')'
       end as detail
from topped;
