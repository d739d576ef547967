-- The analysis layer: which PyTorch operator launched which GPU work (host_activity reads it).
--
-- A CUDA call belongs to the innermost operator (cpu_ops) of its thread whose time holds the call's start: the
-- way PyTorch's profiler nests them (its External ids name the same operator in recent traces, but older traces
-- number runtime events by their correlation instead, so time is the one link every trace has). The call's
-- correlation id then names the kernels, copies and memsets it issued (gpu_ops). Operators on one thread nest
-- properly (RecordFunction scopes), so the innermost holding operator is the most recent to start at the nesting
-- depth one below the number of operators open at that moment: found by counting, without a range join of every
-- call against every operator.

-- @macro na_sync_operator(name)
-- Whether a PyTorch operator makes the host wait for the GPU by its name alone: .item() and scalar reads
-- (aten::_local_scalar_dense, inside aten::item), aten::nonzero and the operators built on it that size their
-- output from the data (aten::masked_select, aten::unique). A copy to the host (aten::copy_ of .cpu() or
-- .to('cpu')) is one too, told by the device-to-host copy it launches (host_activity reads op_kernels for it).
create or replace macro na_sync_operator(name) as (
    name in ('aten::_local_scalar_dense', 'aten::nonzero', 'aten::masked_select', 'aten::_unique2', 'aten::unique_dim',
             'aten::unique_consecutive')
);

-- @view op_kernels
-- One row per GPU operation (kernel, copy or memset) whose launching CUDA call ran inside a PyTorch operator:
-- the innermost operator holding the call, the call, and the operation with its launch delay. Empty for captures
-- without operators (Nsight Systems exports).
-- @column capture_id Capture (captures.capture_id).
-- @column pid Process of the operator and the call.
-- @column tid Thread of the operator and the call.
-- @column op_name The operator (cpu_ops.name), e.g. aten::mm.
-- @column op_start_ns The operator's start, ns.
-- @column op_end_ns The operator's end, ns.
-- @column op_depth How many operators enclose it on its thread (0: a top-level operator).
-- @column external_id The operator's External id (cpu_ops.external_id), or NULL.
-- @column call The launching CUDA call (cuda_api_calls.base_name), e.g. cudaLaunchKernel.
-- @column call_start_ns The call's start, ns.
-- @column call_end_ns The call's end, ns.
-- @column correlation_id The call's correlation id: links it to the operation (gpu_ops, same pid).
-- @column device_id GPU the operation ran on.
-- @column stream_id CUDA stream.
-- @column op kernel, memcpy or memset (gpu_ops.op).
-- @column kernel The kernel's name, NULL for copies and memsets.
-- @column direction Copy direction (gpu_ops.direction), NULL for kernels and memsets.
-- @column start_ns The operation's start on the GPU, ns.
-- @column end_ns The operation's end, ns.
-- @column launch_delay_ns From the end of the launching call to the operation's start on the GPU, ns (HTA's launch delay): long where work waits in the queue behind other work, short or negative where the GPU waits for the host.
create or replace view op_kernels as
with ops as (
    select capture_id, pid, tid, name, start_ns, end_ns, external_id,
           -- operators started up to this one (in start order, an enclosing one first) and ended by its start
           row_number() over (partition by capture_id, pid, tid order by start_ns, end_ns desc) - 1 as started_before
    from cpu_ops
    where end_ns > start_ns
),
ends as (
    select capture_id, pid, tid, end_ns,
           count(*) over (partition by capture_id, pid, tid order by end_ns) as ended
    from ops
),
starts as (
    select capture_id, pid, tid, start_ns,
           count(*) over (partition by capture_id, pid, tid order by start_ns) as started
    from ops
),
depths as (
    select o.*, o.started_before - coalesce(e.ended, 0) as depth
    from ops o
    asof left join ends e on e.capture_id = o.capture_id and e.pid = o.pid and e.tid = o.tid and o.start_ns >= e.end_ns
),
calls as (
    select a.capture_id, a.pid, a.tid, a.correlation_id, a.base_name, a.start_ns, a.end_ns
    from cuda_api_calls a
    where a.correlation_id is not null and a.correlation_id <> 0
        and a.capture_id in (select capture_id from cpu_ops)
),
open_at as (
    -- operators open when the call starts: started at or before it, less those ended at or before it
    select c.*, s.started - coalesce(e.ended, 0) as open_ops
    from calls c
    asof join starts s on s.capture_id = c.capture_id and s.pid = c.pid and s.tid = c.tid and c.start_ns >= s.start_ns
    asof left join ends e on e.capture_id = c.capture_id and e.pid = c.pid and e.tid = c.tid and c.start_ns >= e.end_ns
),
held as (
    select c.*, d.name as op_name, d.start_ns as op_start_ns, d.end_ns as op_end_ns, d.depth as op_depth,
           d.external_id
    from open_at c
    asof join depths d on d.capture_id = c.capture_id and d.pid = c.pid and d.tid = c.tid
        and d.depth = c.open_ops - 1 and c.start_ns >= d.start_ns
    where c.open_ops >= 1 and d.end_ns > c.start_ns
)
select h.capture_id, h.pid, h.tid, h.op_name, h.op_start_ns, h.op_end_ns, h.op_depth, h.external_id,
       h.base_name as call, h.start_ns as call_start_ns, h.end_ns as call_end_ns, h.correlation_id,
       g.device_id, g.stream_id, g.op, case when g.op = 'kernel' then k.name end as kernel, g.direction, g.start_ns, g.end_ns,
       g.start_ns - h.end_ns as launch_delay_ns
from held h
join gpu_ops g on g.capture_id = h.capture_id and g.pid = h.pid and g.correlation_id = h.correlation_id
left join kernels k on k.capture_id = g.capture_id and k.device_id = g.device_id
    and k.correlation_id = g.correlation_id and k.start_ns = g.start_ns;
