-- The analysis layer, part 3: why each GPU idled, and the partition with idle time split by cause.
--
-- Idle causes, a closed vocabulary (docs/impact.md explains each with an example):
--   launch     : a gap under 20 us, the GPU waiting for the next launch (launch latency, the host's enqueue rate),
--                unless a synchronization returned in it (sync)
--   startup    : CUDA initialization, module or library loading, lazy loading of a kernel on its first launch
--   jit        : run-time compilation (NVRTC, PTX JIT, cuLink), named by CUDA calls or NVTX ranges
--   allocation : cudaMalloc/cudaFree and their kin cover half the gap or more
--   host-copy  : synchronous copies or sets staged by the host cover half the gap or more
--   sync       : the host was blocked in a synchronization call when the GPU ran dry (and relaunched late), or
--                sat in one for half the gap or more (waiting on other work); a gap under 20 us too when such a
--                call returned in it: the relaunch latency a synchronization exposes (a drained queue), which a
--                host that did not wait would have hidden behind the kernels it queued ahead
--   host       : other host work (named by the innermost NVTX range over the gap, else the CUDA call covering
--                most of it)
--   dependency : the kernel that ends the gap had been launched (its launch call had returned) before the gap
--                began: the GPU waited for something other than the host (an event or another stream, a
--                collective's peers, a host callback), not for the next launch
--   unknown    : the capture has no CUDA API trace to tell
-- A gap gets exactly one cause (launch by its length alone, but for a synchronization returning in it; dependency
-- before any host cause, since the host had
-- already done its part). Module loading and compilation come with host work
-- the trace does not name (library initialization, kernel lookup, the compiler before a module load), so such
-- calls or ranges covering a tenth of a gap make it jit or startup, while allocation, host copies and
-- synchronization must cover half (or, for sync, be waiting when the GPU ran dry); a gap that none of these
-- explains but that holds a module load is still startup.

-- @view gpu_idle_gaps
-- The idle stretches of each device within the analysis window, one row per gap, with its cause.
-- @column capture_id Capture (captures.capture_id).
-- @column device_id GPU.
-- @column start_ns Gap start: the end of the device's last operation, or the window start, ns.
-- @column end_ns Gap end: the start of the device's next operation, or the window end, ns.
-- @column duration_ns end_ns - start_ns, ns.
-- @column position leading (before the device's first operation in the window), trailing (after its last) or between.
-- @column cause Why the GPU idled (see the vocabulary above): launch, dependency, startup, jit, allocation, host-copy, sync, host, unknown.
-- @column host_activity What names the cause: the CUDA call or NVTX range that covered most of the gap, what a dependency gap waited for ('waits for a collective', 'waits for another stream or an event', 'waits for an event or a host callback'), or NULL.
-- @column host_pid Process of that call or range, or NULL.
-- @column host_tid Thread of that call or range, or NULL.
-- @column host_api_overlap_ns Time within the gap covered by CUDA calls of the device's processes that can decide a cause (launches under 1 ms and calls of class 'other' left out), ns; for a sync gap under 20 us, the synchronization's part of it; NULL for launch gaps.
-- @column launch_pid Process of the thread that launched the operation ending the gap (for a trailing gap: the one it follows), from its earliest CUDA call; NULL for gaps under 20 us or when no call is recorded.
-- @column launch_tid That thread, or NULL.
create or replace view gpu_idle_gaps as
with gaps as (
    select s.capture_id, s.device_id, s.start_ns, s.end_ns, s.duration_ns,
           case when s.start_ns = w.start_ns then 'leading' when s.end_ns = w.end_ns then 'trailing'
                else 'between' end as position
    from gpu_time_segments s
    join analysis_window w on w.capture_id = s.capture_id
    where s.state = 'idle'
),
judged as (
    -- numbered in time order per device: a call or range overlaps a run of consecutive gaps, found below with two
    -- as-of joins (the first gap ending after it starts, the last gap starting before it ends) instead of an
    -- interval join that the planner may run as a nested loop over a million calls
    select *, coalesce(device_id, -1) as dev,
           row_number() over (partition by capture_id, device_id order by start_ns) as gap_no
    from gaps
    where duration_ns >= 20000
),
procs as (
    select distinct capture_id, device_id, pid from gpu_ops where pid is not null
),
-- what the host did during each judged gap: CUDA calls of the processes using the device (short launches and
-- calls of no telling class left out: a million of them in a launch-bound capture, and none decides a cause) ...
host_calls as (
    select a.capture_id, coalesce(p.device_id, -1) as dev, a.start_ns, a.end_ns, a.duration_ns, a.api_class,
           a.base_name, a.pid, a.tid
    from cuda_api_calls a
    join procs p on p.capture_id = a.capture_id and p.pid = a.pid
    where a.api_class not in ('launch', 'other') or a.duration_ns >= 1000000
),
judged_spans as (
    select capture_id, dev, start_ns // 1048576 as b0, end_ns // 1048576 as b1 from judged
),
wide as (
    -- a device whose judged gaps touch more than 2^20 buckets (18 minutes of gaps, or a damaged capture's absurd
    -- times): all its calls go on to the as-of joins, as before there were buckets
    select capture_id, dev from judged_spans group by all having sum(b1 - b0 + 2) > 1048576
),
judged_buckets as (
    -- the buckets of 2^20 ns (1.05 ms) each judged gap touches, its ends included, and the one before each: a call
    -- shorter than a bucket can meet a gap only if it starts in one of them (it ends at most one bucket later)
    select distinct s.capture_id, s.dev, unnest(range(s.b0 - 1, s.b1 + 1)) as bucket
    from judged_spans s
    anti join wide w on w.capture_id = s.capture_id and w.dev = s.dev
),
near_calls as (
    -- the calls that may overlap a judged gap (a superset): the as-of join below sorted every call (the 1M-kernel
    -- export's 340,000 copies and synchronizations for its 4,366 judged gaps: 0.12 s)
    -- (joined, not EXISTS: DuckDB runs a correlated EXISTS as a join per distinct key; both sides are distinct, so
    -- each call is kept once)
    select c.* from host_calls c
    left join judged_buckets b on b.capture_id = c.capture_id and b.dev = c.dev and b.bucket = c.start_ns // 1048576
    left join wide w on w.capture_id = c.capture_id and w.dev = c.dev
    where c.end_ns - c.start_ns >= 1048576 or b.bucket is not null or w.dev is not null
),
call_firsts as (
    -- a call overlaps a gap only if the first gap ending after its start begins before the call ends: the others
    -- are dropped here, and the second as-of join probes the few left (the same for the NVTX ranges below: over
    -- 4.9M ranges the two joins side by side took 1.9 s, one after the other 0.75 s)
    select c.*, f.gap_no as first_no
    from near_calls c
    asof join judged f on f.capture_id = c.capture_id and f.dev = c.dev and c.start_ns < f.end_ns
    where f.start_ns <= c.end_ns
),
call_spans as (
    select c.*, l.gap_no as last_no
    from call_firsts c
    asof join judged l on l.capture_id = c.capture_id and l.dev = c.dev and c.end_ns >= l.start_ns
    where c.first_no <= l.gap_no
),
calls as (
    select g.capture_id, g.device_id, g.start_ns as gap_start_ns, g.duration_ns as gap_ns,
           case when a.api_class = 'jit' then 'jit'
                when a.api_class in ('module', 'context') then 'startup'
                -- a launch that blocks for a millisecond with the GPU idle is the driver loading the kernel's
                -- module on its first launch (lazy loading), not a full launch queue
                when a.api_class = 'launch' and a.duration_ns >= 1000000 then 'startup'
                when a.api_class = 'alloc' then 'allocation'
                -- synchronous copies and sets only, as its vocabulary says (and sync-memcpy claims): an
                -- asynchronous one that blocked (staging pageable memory, or waiting on the driver) is host work
                -- the GPU waited for, which gpu-idle-gap names from the launching thread; as 'host-copy' its gap
                -- was claimed by no rule (nsys_ai_mfu_2gpu_after: a 4-byte cudaMemsetAsync blocking 5.7 ms)
                when a.api_class in ('memcpy', 'memset') and a.base_name not ilike '%async%' then 'host-copy'
                when a.api_class = 'sync' then 'sync'
                else 'other' end as cause,
           a.base_name as label, a.pid, a.tid,
           least(a.end_ns, g.end_ns) - greatest(a.start_ns, g.start_ns) as overlap_ns,
           -- blocked when the GPU ran dry, returned within the gap
           a.api_class = 'sync' and a.start_ns <= g.start_ns and a.end_ns < g.end_ns as sync_returned
    from (select *, unnest(range(first_no, last_no + 1)) as gap_no from call_spans) a
    join judged g on g.capture_id = a.capture_id and g.dev = a.dev and g.gap_no = a.gap_no
),
-- ... and NVTX ranges of those processes, found the same way
host_ranges as (
    select n.capture_id, coalesce(p.device_id, -1) as dev, n.start_ns, n.end_ns, n.text, n.pid, n.tid, n.depth
    from nvtx_ranges n
    join procs p on p.capture_id = n.capture_id and p.pid = n.pid
    where n.event_type <> 'mark' and n.end_ns > n.start_ns
),
range_firsts as (
    select n.*, f.gap_no as first_no
    from host_ranges n
    asof join judged f on f.capture_id = n.capture_id and f.dev = n.dev and n.start_ns < f.end_ns
    where f.start_ns < n.end_ns
),
range_spans as (
    select n.*, l.gap_no as last_no
    from range_firsts n
    asof join judged l on l.capture_id = n.capture_id and l.dev = n.dev and n.end_ns > l.start_ns
    where n.first_no <= l.gap_no
),
ranges as (
    select g.capture_id, g.device_id, g.start_ns as gap_start_ns,
           regexp_matches(n.text, '(?i)nvrtc|ptxas|ptx ?jit|jit ?compil|compileprogram|cuLink') as is_jit,
           n.text as label, n.pid, n.tid, n.depth,
           least(n.end_ns, g.end_ns) - greatest(n.start_ns, g.start_ns) as overlap_ns
    from (select *, unnest(range(first_no, last_no + 1)) as gap_no from range_spans) n
    join judged g on g.capture_id = n.capture_id and g.dev = n.dev and g.gap_no = n.gap_no
),
-- a gap under 20 us in which a synchronization of the device's processes (one of host_calls) returned, having
-- been blocked when the GPU ran dry (the one returning last names it): each synchronization finds the gap its
-- return falls in, so the few synchronizations probe the short gaps rather than a million short gaps probing them
-- (the other way round cost 0.9 s of the 1M-kernel export's analysis). By 32,768 ns buckets of time, a hash join:
-- a gap under 20 us holding the return starts in the return's bucket or the one before. The as-of join it
-- replaces (the latest short gap starting at or before the return) sorted the million short gaps: 0.1 CPU-s more.
short_sync as (
    select g.capture_id, g.device_id, g.start_ns as gap_start_ns,
           arg_max(s.base_name, s.end_ns) as label,
           arg_max(struct_pack(pid := s.pid, tid := s.tid), s.end_ns) as thread,
           max(s.end_ns) - g.start_ns as overlap_ns
    -- the synchronizations gathered into one list and unnested again: the same rows, but the planner then counts
    -- them as few and hashes them, not the million short gaps, in this join and in the short gaps' join to its
    -- result below (the 1M-kernel export: the two joins 0.1 CPU-s -> 0.01)
    from (select *, unnest([end_ns >> 15, (end_ns >> 15) - 1]) as bucket
          from (select unnest(calls, recursive := true)
                from (select list(struct_pack(capture_id := capture_id, dev := dev, base_name := base_name, pid := pid,
                                              tid := tid, start_ns := start_ns, end_ns := end_ns)) as calls
                      from host_calls where api_class = 'sync'))) s
    join (select *, coalesce(device_id, -1) as dev, start_ns >> 15 as bucket from gaps where duration_ns < 20000) g
        on g.capture_id = s.capture_id and g.dev = s.dev and g.bucket = s.bucket
    where g.start_ns <= s.end_ns and s.end_ns < g.end_ns and s.start_ns <= g.start_ns
    group by g.capture_id, g.device_id, g.start_ns
),
per_gap as (
    select capture_id, device_id, gap_start_ns,
           sum(overlap_ns) filter (where cause = 'jit') as jit_ns,
           sum(overlap_ns) filter (where cause = 'startup') as startup_ns,
           sum(overlap_ns) filter (where cause = 'allocation') as alloc_ns,
           sum(overlap_ns) filter (where cause = 'host-copy') as copy_ns,
           sum(overlap_ns) filter (where cause = 'sync') as sync_ns,
           bool_or(sync_returned) as sync_returned,
           sum(overlap_ns) as api_ns,
           arg_max(label, overlap_ns) as any_label,
           arg_max(struct_pack(pid := pid, tid := tid), overlap_ns) as any_thread,
           arg_max(label, overlap_ns) filter (where cause = 'jit') as jit_label,
           arg_max(label, overlap_ns) filter (where cause = 'startup') as startup_label,
           arg_max(label, overlap_ns) filter (where cause = 'allocation') as alloc_label,
           arg_max(label, overlap_ns) filter (where cause = 'host-copy') as copy_label,
           -- the call that was waiting when the GPU ran dry, else the one blocking longest in the gap
           arg_max(label, sync_returned::integer * 1e15 + overlap_ns) filter (where cause = 'sync') as sync_label,
           arg_max(struct_pack(pid := pid, tid := tid), overlap_ns) filter (where cause = 'jit') as jit_thread,
           arg_max(struct_pack(pid := pid, tid := tid), overlap_ns) filter (where cause = 'startup') as startup_thread,
           arg_max(struct_pack(pid := pid, tid := tid), overlap_ns) filter (where cause = 'allocation') as alloc_thread,
           arg_max(struct_pack(pid := pid, tid := tid), overlap_ns) filter (where cause = 'host-copy') as copy_thread,
           arg_max(struct_pack(pid := pid, tid := tid), sync_returned::integer * 1e15 + overlap_ns)
               filter (where cause = 'sync') as sync_thread
    from calls
    group by all
),
per_gap_ranges as (
    select capture_id, device_id, gap_start_ns,
           max(overlap_ns) filter (where is_jit) as jit_ns,
           arg_max(label, overlap_ns) filter (where is_jit) as jit_label,
           arg_max(struct_pack(pid := pid, tid := tid), overlap_ns) filter (where is_jit) as jit_thread,
           -- the innermost range over the gap names the host work
           arg_max(label, coalesce(depth, 0) * 1e15 + overlap_ns) as inner_label,
           arg_max(struct_pack(pid := pid, tid := tid), coalesce(depth, 0) * 1e15 + overlap_ns) as inner_thread
    from ranges
    group by all
),
-- the GPU operations at each judged gap's edges: side 0 starts at its end (the one that ends it), side 1 ends at
-- its start (the one it follows), each with the CUDA calls of its correlation id
edge_ops as (
    select g.capture_id, g.device_id, g.start_ns as gap_start_ns, 0 as side, o.pid, o.correlation_id, o.stream_id,
           o.op, o.comm
    from judged g
    join gpu_ops o on o.capture_id = g.capture_id and coalesce(o.device_id, -1) = g.dev and o.start_ns = g.end_ns
    union all
    select g.capture_id, g.device_id, g.start_ns, 1, o.pid, o.correlation_id, o.stream_id, o.op, o.comm
    from judged g
    join gpu_ops o on o.capture_id = g.capture_id and coalesce(o.device_id, -1) = g.dev and o.end_ns = g.start_ns
),
edge_calls as (
    select e.*, a.tid, a.start_ns, a.end_ns, a.api_class
    from edge_ops e
    join cuda_api_calls a on a.capture_id = e.capture_id and a.pid = e.pid and a.correlation_id = e.correlation_id
    where a.correlation_id <> 0
),
-- the thread that launched the operation ending the gap (the earliest call of its correlation id), for a trailing
-- gap the one it follows: the thread whose work the GPU waited for (host_activity reads what it did)
launcher as (
    -- ordered by structs, every tie broken: a double side * 1e18 + correlation_id rounded the correlation id
    -- to 128 (nearby ids compared equal), and which of the tied calls was taken varied from run to run
    select capture_id, device_id, gap_start_ns,
           arg_min(t, struct_pack(s := side, c := correlation_id, p := t.pid, h := t.tid)) as launch_thread
    from (select capture_id, device_id, gap_start_ns, side, correlation_id,
                 arg_min(struct_pack(pid := pid, tid := tid), struct_pack(s := start_ns, p := pid, h := tid)) as t
          from edge_calls
          where tid is not null
          group by all)
    group by all
),
-- a kernel ending the gap whose launch call returned before the gap began was waiting in the queue all along,
-- for something other than the host
queued as (
    select k.capture_id, k.device_id, k.gap_start_ns,
           arg_min(case when k.comm then 'collective' when k.stream_id is distinct from p.stream_id
                        then 'another stream or an event' else 'an event or a host callback' end, k.end_ns)
               as waits_for,
           arg_min(struct_pack(pid := k.pid, tid := k.tid), k.end_ns) as launch_thread
    from edge_calls k
    -- the operation the gap began after, for its stream
    left join (select capture_id, device_id, gap_start_ns, any_value(stream_id) as stream_id
               from edge_ops where side = 1 group by all) p
        on p.capture_id = k.capture_id and p.device_id is not distinct from k.device_id
        and p.gap_start_ns = k.gap_start_ns
    where k.side = 0 and k.op = 'kernel' and k.end_ns <= k.gap_start_ns and k.api_class = 'launch'
    group by all
),
traced as (
    select capture_id from captures
    where capture_id not in (select capture_id from capture_missing where data = 'api_calls')
),
decided as (
    -- a judged gap (20 us or more): what the host did in it
    select
        g.capture_id, g.device_id, g.start_ns, g.end_ns, g.duration_ns, g.position,
        c.api_ns,
        case
            when q.waits_for is not null then 'dependency'
            when coalesce(c.jit_ns, 0) + coalesce(r.jit_ns, 0) >= g.duration_ns / 10 then 'jit'
            when c.startup_ns >= g.duration_ns / 10 then 'startup'
            when c.alloc_ns >= g.duration_ns / 2 then 'allocation'
            when c.copy_ns >= g.duration_ns / 2 then 'host-copy'
            when c.sync_returned or c.sync_ns >= g.duration_ns / 2 then 'sync'
            -- code loaded for the first time inside the gap: the host was compiling or initializing before it
            -- (CuPy and Numba compile with NVRTC, then load the module), even when the load itself is short
            when c.startup_ns > 0 then 'startup'
            when t.capture_id is not null or r.inner_label is not null then 'host'
            else 'unknown'
        end as cause,
        c.jit_label as c_jit_label, r.jit_label as r_jit_label, c.startup_label, c.alloc_label, c.copy_label,
        c.sync_label, coalesce(r.inner_label, c.any_label) as host_label, q.waits_for, q.launch_thread,
        l.launch_thread as launcher,
        c.jit_thread as c_jit_thread, r.jit_thread as r_jit_thread, c.startup_thread, c.alloc_thread,
        c.copy_thread, c.sync_thread,
        case when r.inner_label is not null then r.inner_thread else c.any_thread end as host_thread,
        coalesce(c.jit_ns, 0) >= coalesce(r.jit_ns, 0) as jit_by_call
    from judged g
    left join per_gap c on c.capture_id = g.capture_id and c.device_id is not distinct from g.device_id
        and c.gap_start_ns = g.start_ns
    left join per_gap_ranges r on r.capture_id = g.capture_id and r.device_id is not distinct from g.device_id
        and r.gap_start_ns = g.start_ns
    left join traced t on t.capture_id = g.capture_id
    left join queued q on q.capture_id = g.capture_id and q.device_id is not distinct from g.device_id
        and q.gap_start_ns = g.start_ns
    left join launcher l on l.capture_id = g.capture_id and l.device_id is not distinct from g.device_id
        and l.gap_start_ns = g.start_ns
    union all by name
    -- a shorter gap (the million of a launch-bound capture): the next launch, unless a synchronization returned in
    -- it; apart from the judged gaps, so that only the few synchronizations are joined to them (the facts of the
    -- judged gaps joined to every gap made the planner hash the million gaps)
    select
        g.capture_id, g.device_id, g.start_ns, g.end_ns, g.duration_ns, g.position,
        case when ss.label is not null then 'sync' else 'launch' end as cause,
        ss.label as sync_label, ss.thread as sync_thread, ss.overlap_ns as short_sync_ns
    from gaps g
    left join short_sync ss on ss.capture_id = g.capture_id and ss.device_id is not distinct from g.device_id
        and ss.gap_start_ns = g.start_ns
    where g.duration_ns < 20000
),
named as (
    select
        *,
        case cause
            when 'jit' then case when jit_by_call then struct_pack(l := c_jit_label, t := c_jit_thread)
                                 else struct_pack(l := r_jit_label, t := r_jit_thread) end
            when 'startup' then struct_pack(l := startup_label, t := startup_thread)
            when 'allocation' then struct_pack(l := alloc_label, t := alloc_thread)
            when 'host-copy' then struct_pack(l := copy_label, t := copy_thread)
            when 'sync' then struct_pack(l := sync_label, t := sync_thread)
            when 'host' then struct_pack(l := host_label, t := host_thread)
            when 'dependency' then struct_pack(l := 'waits for ' || waits_for, t := launch_thread)
        end as named_by
    from decided
)
select
    capture_id, device_id, start_ns, end_ns, duration_ns, position, cause,
    named_by.l as host_activity, named_by.t.pid as host_pid, named_by.t.tid as host_tid,
    case when cause = 'launch' then null else coalesce(api_ns, short_sync_ns, 0) end as host_api_overlap_ns,
    launcher.pid as launch_pid, launcher.tid as launch_tid
from named;

-- @view gpu_time_partition
-- Each device's analysis window cut into kernel, copy, memset and idle time, idle split by cause: one row per
-- device, part and cause. The durations of a device add up to its window exactly.
-- @column capture_id Capture (captures.capture_id).
-- @column device_id GPU.
-- @column part kernel (a compute kernel running), comm (only communication kernels running: exposed communication),
-- copy (copies and no kernel), memset (only sets) or idle.
-- @column cause For idle rows the cause (gpu_idle_gaps.cause), else NULL.
-- @column duration_ns Time in that part, ns.
create or replace view gpu_time_partition as
select capture_id, device_id, state as part, null::varchar as cause, sum(duration_ns) as duration_ns
from gpu_time_segments
where state <> 'idle'
group by all
union all
select capture_id, device_id, 'idle', cause, sum(duration_ns)
from gpu_idle_gaps
group by all;
