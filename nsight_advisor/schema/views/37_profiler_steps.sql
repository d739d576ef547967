-- The analysis layer: PyTorch profiler steps (ProfilerStep#N ranges) where the store holds them.
-- A rule that only gains from these ranges reads them here, not from nvtx_ranges: a rule naming nvtx_ranges makes
-- analyze load that table on the cold path, and a large Nsight Systems export's NVTX ranges (millions of rows) are
-- deferred there. Where they are deferred this view is empty, and the rule does without (docs/performance.md).

-- @view profiler_steps
-- The ProfilerStep#N ranges torch.profiler writes around each step (in Kineto traces, and in Nsight Systems exports
-- of a program that ran torch.profiler's NVTX emission); empty where the store deferred nvtx_ranges.
-- @column capture_id Capture (captures.capture_id).
-- @column step The range's text, e.g. ProfilerStep#3.
-- @column step_number N of ProfilerStep#N.
-- @column start_ns Start of the step, ns.
-- @column end_ns End of the step, ns.
create or replace view profiler_steps as
select capture_id, text as step, cast(regexp_extract(text, '#([0-9]+)$', 1) as bigint) as step_number,
       start_ns, end_ns
from nvtx_ranges
where regexp_full_match(text, 'ProfilerStep#[0-9]+');
