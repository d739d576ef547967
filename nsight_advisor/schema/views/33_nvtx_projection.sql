-- The analysis layer, part 4: where in the program, NVTX ranges projected onto the GPU work they launched.
--
-- A GPU operation belongs to the NVTX ranges open on its launching thread when the launching CUDA call started
-- (the way Nsight Systems projects NVTX onto the GPU): a range [start, end) holds the operations whose call
-- started at or after its start and before its end. Push/pop ranges nest per thread and domain, so each one gets
-- a path, outermost to innermost ('train/step/forward'), within its domain.
--
-- Cost: nothing here is read on the cold path (no rule names it); it is computed when read. Millions of ranges
-- and launches are matched by sorted passes and as-of joins, never by an interval join (which the planner may run
-- as a nested loop): a range's parent is the last range one level up before it in start order (as-of), and the
-- innermost range open at each instant of a thread is a step function whose value at a launch is one as-of join.

-- @macro na_nvtx_name(text)
-- An NVTX range's text without what numbers each call: the ', seq = N, op_id = M, sizes = [...]' that PyTorch's
-- emit_nvtx appends to an operator's name, and the step number of the PyTorch profiler's 'ProfilerStep#N'; so
-- that ranges of the same code share a name and a path.
create or replace macro na_nvtx_name(text) as (
    regexp_replace(regexp_replace(text, ',\s*(seq|op_id|sizes|input_op_ids)\s*=.*$', ''), '^ProfilerStep#[0-9]+$',
                   'ProfilerStep')
);

-- @view nvtx_range_paths
-- One row per push/pop NVTX range recorded on a thread: its place in the nesting of its thread and domain, and its
-- path. Push/pop ranges nest per process, thread and domain; at equal starts the longer one is the outer one, at
-- equal spans the one pushed first.
-- @column capture_id Capture (captures.capture_id).
-- @column pid Process of the range.
-- @column tid Thread of the range.
-- @column domain NVTX domain ('Default' for the unnamed one; PyTorch's record_function ranges: user_annotation).
-- @column seq The range's number within its thread and domain, in start order (1 = first).
-- @column text The range's text.
-- @column name Its text as na_nvtx_name gives it (PyTorch's per-call numbers removed).
-- @column path Names of the ranges open around it in its domain, outermost first, and its own, joined by '/'.
-- @column lineage seq of the ranges on its path, outermost first (its own last).
-- @column depth Nesting level within its domain and thread (0 = outermost).
-- @column parent_seq seq of the range around it, NULL at depth 0.
-- @column start_ns When the range opened on the host, ns.
-- @column end_ns When the range closed on the host, ns.
create or replace view nvtx_range_paths as
with recursive
nestable as (
    select capture_id, pid, tid, domain, text, na_nvtx_name(text) as name, start_ns, end_ns,
           row_number() over (partition by capture_id, pid, tid, domain
                              order by start_ns, end_ns desc, coalesce(depth, 0)) as seq
    from nvtx_ranges
    where event_type = 'push_pop' and tid is not null and pid is not null and end_ns > start_ns
),
sweep as (
    -- open ranges after each start (ends at the same instant close first: a range is [start, end))
    select capture_id, pid, tid, domain, seq, kind,
           sum(step) over (partition by capture_id, pid, tid, domain order by t_ns, kind, seq
                           rows unbounded preceding) as open_ranges
    from (select capture_id, pid, tid, domain, start_ns as t_ns, 1 as kind, seq, 1 as step from nestable
          union all
          select capture_id, pid, tid, domain, end_ns, 0, seq, -1 from nestable)
),
leveled as (
    select n.*, s.open_ranges - 1 as depth
    from nestable n
    join sweep s using (capture_id, pid, tid, domain, seq)
    where s.kind = 1
),
parented as (
    -- the parent: the last range one level up that opened before it
    select c.*, p.seq as parent_seq
    from leveled c
    asof left join leveled p
        on p.capture_id = c.capture_id and p.pid = c.pid and p.tid = c.tid and p.domain = c.domain
        and p.depth = c.depth - 1 and p.seq < c.seq
),
paths(capture_id, pid, tid, domain, seq, path, lineage) as (
    select capture_id, pid, tid, domain, seq, name, [seq]
    from parented where depth = 0
    union all
    select c.capture_id, c.pid, c.tid, c.domain, c.seq, p.path || '/' || c.name, list_append(p.lineage, c.seq)
    from parented c
    join paths p on p.capture_id = c.capture_id and p.pid = c.pid and p.tid = c.tid and p.domain = c.domain
        and c.parent_seq = p.seq
)
select n.capture_id, n.pid, n.tid, n.domain, n.seq, n.text, n.name, p.path, p.lineage, n.depth::integer as depth,
       n.parent_seq, n.start_ns, n.end_ns
from parented n
join paths p using (capture_id, pid, tid, domain, seq);

-- @view nvtx_open_paths
-- The innermost push/pop NVTX range open on each thread, per domain, as a step function: one row per instant at
-- which it changes, holding from t_ns until the next row of the same thread and domain. Read it with an as-of
-- join (t_ns <= the instant asked about). After the last event at an instant: closes first, deepest first; then
-- opens, outermost first.
-- @column capture_id Capture (captures.capture_id).
-- @column pid Process.
-- @column tid Thread.
-- @column domain NVTX domain.
-- @column t_ns From when this row holds, ns.
-- @column inner_seq nvtx_range_paths.seq of the innermost open range; 0 when none is open.
-- @column path That range's path; NULL when none is open.
create or replace view nvtx_open_paths as
with steps as (
    select capture_id, pid, tid, domain, t_ns, arg_max(inner_seq, ord) as inner_seq
    from (select capture_id, pid, tid, domain, start_ns as t_ns, seq as inner_seq, 1000000 + depth as ord
          from nvtx_range_paths
          union all
          select capture_id, pid, tid, domain, end_ns, coalesce(parent_seq, 0), -depth from nvtx_range_paths)
    group by all
)
select s.capture_id, s.pid, s.tid, s.domain, s.t_ns, s.inner_seq, r.path
from steps s
left join nvtx_range_paths r
    on r.capture_id = s.capture_id and r.pid = s.pid and r.tid = s.tid and r.domain = s.domain
    and r.seq = s.inner_seq;

-- @view nvtx_op_paths
-- One row per GPU operation and NVTX domain in which a push/pop range was open on its launching thread when the
-- launching CUDA call started: the innermost such range and its path. Operations whose launching call is not in
-- the capture (no correlation) have no row.
-- @column capture_id Capture (captures.capture_id).
-- @column device_id GPU the operation ran on.
-- @column pid Process of the launching call.
-- @column tid Thread of the launching call.
-- @column correlation_id The operation's correlation id (gpu_ops.correlation_id).
-- @column op kernel, memcpy or memset.
-- @column start_ns Start of the operation on the GPU, ns.
-- @column end_ns End of it, ns.
-- @column duration_ns end_ns - start_ns, ns.
-- @column launch_ns When the launching call started on the host, ns.
-- @column domain NVTX domain of the range.
-- @column inner_seq nvtx_range_paths.seq of the innermost range open at launch.
-- @column path That range's path.
create or replace view nvtx_op_paths as
with
calls as (
    select capture_id, pid, correlation_id, arg_min(tid, start_ns) as tid, min(start_ns) as launch_ns
    from cuda_api_calls
    where correlation_id is not null and correlation_id <> 0 and tid is not null
    group by all
),
launched as (
    select o.capture_id, o.device_id, o.pid, c.tid, o.correlation_id, o.op, o.start_ns, o.end_ns, o.duration_ns,
           c.launch_ns
    from gpu_ops o
    join calls c on c.capture_id = o.capture_id and c.pid = o.pid and c.correlation_id = o.correlation_id
),
thread_domains as (
    select distinct capture_id, pid, tid, domain from nvtx_ranges
    where event_type = 'push_pop' and tid is not null and pid is not null and end_ns > start_ns
)
select l.*, td.domain, i.inner_seq, i.path
from launched l
join thread_domains td on td.capture_id = l.capture_id and td.pid = l.pid and td.tid = l.tid
asof join nvtx_open_paths i
    on i.capture_id = l.capture_id and i.pid = l.pid and i.tid = l.tid and i.domain = td.domain
    and l.launch_ns >= i.t_ns
where i.inner_seq <> 0;

-- @view nvtx_gpu_projection
-- One row per NVTX range that holds GPU work: its path and the GPU operations launched from within it (its own
-- and its nested ranges'), with the span and busy time they projected onto the GPU. Push/pop ranges nest per
-- process, thread and domain; a start/end range (not nested by definition) is a path of its own at depth 0.
-- Operations whose launching call is not in the capture (no correlation), and ranges recorded without a thread
-- (PyTorch's GPU-side annotations), are not projected.
-- @column capture_id Capture (captures.capture_id).
-- @column pid Process of the range and of the launching calls.
-- @column tid Thread of the range and of the launching calls.
-- @column domain NVTX domain ('Default' for the unnamed one; PyTorch's record_function ranges: user_annotation).
-- @column text The range's text.
-- @column name Its text as na_nvtx_name gives it (PyTorch's per-call numbers removed).
-- @column path Names of the ranges open around it in its domain, outermost first, and its own, joined by '/'.
-- @column depth Nesting level within its domain and thread (0 = outermost).
-- @column range_start_ns When the range opened on the host, ns.
-- @column range_end_ns When the range closed on the host, ns.
-- @column ops GPU operations (kernels, copies, sets) launched within the range.
-- @column kernels Of those, kernels.
-- @column gpu_start_ns Start of the first of those operations on the GPU, ns.
-- @column gpu_end_ns End of the last of them, ns.
-- @column gpu_span_ns gpu_end_ns - gpu_start_ns, ns.
-- @column gpu_busy_ns Time in which at least one of its operations ran (the union of their intervals, any device), ns.
-- @column gpu_ops_ns Summed durations of its operations (overlapping ones counted each), ns.
create or replace view nvtx_gpu_projection as
with
launched as (
    select o.capture_id, o.pid, c.tid, c.launch_ns, o.op, o.start_ns, o.end_ns, o.duration_ns
    from gpu_ops o
    join (select capture_id, pid, correlation_id, arg_min(tid, start_ns) as tid, min(start_ns) as launch_ns
          from cuda_api_calls
          where correlation_id is not null and correlation_id <> 0 and tid is not null
          group by all) c
        on c.capture_id = o.capture_id and c.pid = o.pid and c.correlation_id = o.correlation_id
),
held as (
    -- each operation in its innermost range and in every range around it
    select l.capture_id, l.pid, l.tid, l.domain, unnest(p.lineage) as seq, l.op, l.start_ns, l.end_ns, l.duration_ns
    from nvtx_op_paths l
    join nvtx_range_paths p on p.capture_id = l.capture_id and p.pid = l.pid and p.tid = l.tid
        and p.domain = l.domain and p.seq = l.inner_seq
),
free_ranges as (
    -- start/end ranges: few, and not nested, so matched to the launches of their thread directly
    select capture_id, pid, tid, domain, text, na_nvtx_name(text) as name, start_ns, end_ns,
           -row_number() over (partition by capture_id, pid, tid, domain order by start_ns, end_ns desc) as seq
    from nvtx_ranges
    where event_type = 'start_end' and tid is not null and pid is not null and end_ns > start_ns
),
held_free as (
    select r.capture_id, r.pid, r.tid, r.domain, r.seq, l.op, l.start_ns, l.end_ns, l.duration_ns
    from free_ranges r
    join launched l on l.capture_id = r.capture_id and l.pid = r.pid and l.tid = r.tid
        and l.launch_ns >= r.start_ns and l.launch_ns < r.end_ns
),
all_held as (
    select * from held union all select * from held_free
),
reached as (
    -- per range, operations in GPU start order with the furthest end before each: a new busy stretch starts where
    -- an operation starts after everything before it ended
    select *, max(end_ns) over (partition by capture_id, pid, tid, domain, seq order by start_ns, end_ns
                                rows between unbounded preceding and 1 preceding) as reach
    from all_held
),
stretched as (
    select *, sum((reach is null or start_ns > reach)::integer)
                  over (partition by capture_id, pid, tid, domain, seq order by start_ns, end_ns
                        rows unbounded preceding) as stretch
    from reached
),
stretches as (
    select capture_id, pid, tid, domain, seq, max(end_ns) - min(start_ns) as busy_ns, count(*) as ops,
           count(*) filter (where op = 'kernel') as kernels, min(start_ns) as gpu_start_ns, max(end_ns) as gpu_end_ns,
           sum(duration_ns) as ops_ns
    from stretched
    group by capture_id, pid, tid, domain, seq, stretch
),
per_range as (
    select capture_id, pid, tid, domain, seq, sum(ops) as ops, sum(kernels) as kernels,
           min(gpu_start_ns) as gpu_start_ns, max(gpu_end_ns) as gpu_end_ns, sum(busy_ns) as gpu_busy_ns,
           sum(ops_ns) as gpu_ops_ns
    from stretches
    group by all
),
described as (
    select capture_id, pid, tid, domain, seq, text, name, path, depth, start_ns, end_ns
    from nvtx_range_paths
    union all
    select capture_id, pid, tid, domain, seq, text, name, name, 0, start_ns, end_ns from free_ranges
)
select d.capture_id, d.pid, d.tid, d.domain, d.text, d.name, d.path, d.depth::integer as depth,
       d.start_ns as range_start_ns, d.end_ns as range_end_ns,
       r.ops::bigint as ops, r.kernels::bigint as kernels, r.gpu_start_ns, r.gpu_end_ns,
       r.gpu_end_ns - r.gpu_start_ns as gpu_span_ns, r.gpu_busy_ns::bigint as gpu_busy_ns,
       r.gpu_ops_ns::bigint as gpu_ops_ns
from per_range r
join described d using (capture_id, pid, tid, domain, seq);
