-- One-time costs: CUDA initialization, module and library loading (lazy loading on a kernel's first launch
-- included) and run-time compilation. Inside the analysis window they are the idle gaps of gpu_idle_gaps whose
-- cause is 'startup' or 'jit': one row per device and cause. Before the window, the time from the capture's first
-- event to its first GPU operation is one host-wide row (device_id NULL): setup that no device's window holds,
-- always reported at info, with the CUDA calls made in it as evidence and what the launching thread did meanwhile
-- by host activity (host_activity: io, wait, cuda-api, framework, cpu), so the program's own CPU work before its
-- first kernel is told apart from initialization.
with gaps as (
    select
        device_id,
        cause,
        count(*) as gaps,
        max(duration_ns) as longest_gap_ns,
        arg_max(host_activity, duration_ns) as named_by,
        sum(duration_ns) as cost_ns
    from gpu_idle_gaps
    where capture_id = $capture_id and cause in ('startup', 'jit')
    group by all
),
window_start as (
    select w.start_ns, c.start_ns as capture_start_ns,
           case when w.source = 'first to last GPU operation' then 'the first GPU operation'
                else 'the analysis window' end as boundary
    from analysis_window w
    join captures c on c.capture_id = w.capture_id
    where w.capture_id = $capture_id
),
step_at_start as (
    -- a PyTorch profiler step after the first (ProfilerStep#N, N >= 1) running when the GPU work starts: a capture that begins inside a
    -- training step spends that time on the step's own host work (data loading, the first operators), which
    -- recurs every step and is not one-time setup
    -- (read through profiler_steps: naming the NVTX table itself would load a large export's ranges on the cold path)
    select any_value(p.step order by p.start_ns) as step
    from profiler_steps p, window_start w
    where p.capture_id = $capture_id and p.step_number >= 1
      and p.start_ns <= w.start_ns and p.end_ns > w.start_ns
),
cuda_before as (
    select count(*) as calls, sum(a.duration_ns) as cuda_ns, arg_max(a.base_name, a.duration_ns) as named_by
    from cuda_api_calls a, window_start w
    where a.capture_id = $capture_id and a.end_ns <= w.start_ns
),
host as (
    -- what the thread that launched the window's first operation did before it (host_activity)
    select io_ns, wait_ns, cuda_api_ns, framework_ns, cpu_ns, activity, detail
    from host_activity
    where capture_id = $capture_id and cause = 'before-window'
),
rows_ as (
    select
        cause, device_id, gaps, longest_gap_ns, named_by, null::bigint as cuda_ns, cost_ns,
        'One-time startup and compilation cost' as kind,
        'on device ' || device_id as scope,
        case cause when 'jit' then 'run-time compilation' else 'module loading and initialization' end
            || ' leaves the GPU idle in ' || gaps || ' gap(s), the longest ' || round(longest_gap_ns / 1e6, 1)
            || ' ms, e.g. during ' || coalesce(named_by, 'host work')
            || case when named_by ilike '%launch%' then ' (lazy loading of the kernel''s module on its first launch)'
                    else '' end as what,
        null::varchar as severity, null::varchar as host_activity, null::bigint as io_ns, null::bigint as wait_ns,
        null::bigint as cuda_api_ns, null::bigint as framework_ns, null::bigint as cpu_ns
    from gaps
    union all
    select
        'before-window', null, null, null, b.named_by, least(coalesce(b.cuda_ns, 0), w.start_ns - w.capture_start_ns),
        w.start_ns - w.capture_start_ns,
        case when s.step is not null then 'Host work at the start of ' || s.step || ', not one-time startup,'
             -- the launching thread was busy with the program's own work (host_activity): not startup either
             when h.activity in ('cpu', 'io', 'dataloader', 'framework', 'framework-sync')
                 then 'Host work before the GPU starts (' || h.activity || '), not one-time startup,'
             else 'One-time startup and compilation cost' end,
        'before ' || w.boundary,
        'the capture runs ' || round((w.start_ns - w.capture_start_ns) / 1e6, 1) || ' ms before ' || w.boundary
            || case when b.calls > 0 then ', ' || round(least(b.cuda_ns, w.start_ns - w.capture_start_ns) / 1e6, 1)
                    || ' ms of it in ' || b.calls || ' CUDA call(s) such as ' || b.named_by else '' end
            || ' (not part of the analysis window)'
            || case when s.step is not null then '; the capture starts inside ' || s.step
                    || ', whose host work (data loading, its first operators) recurs every step' else '' end
            || coalesce('; the launching thread: ' || case h.activity
                   when 'cpu' then 'the program''s own CPU work, not startup: '
                   when 'io' then 'reading and writing files: '
                   when 'framework' then 'framework operators: '
                   when 'dataloader' then 'the DataLoader fetching the first batch: '
                   else '' end || h.detail
                   || ' (io ' || round(h.io_ns / 1e6, 1) || ' ms, wait ' || round(h.wait_ns / 1e6, 1)
                   || ' ms, cuda-api ' || round(h.cuda_api_ns / 1e6, 1) || ' ms, framework '
                   || round(h.framework_ns / 1e6, 1) || ' ms, cpu ' || round(h.cpu_ns / 1e6, 1) || ' ms)', ''),
        'info', h.activity, h.io_ns, h.wait_ns, h.cuda_api_ns, h.framework_ns, h.cpu_ns
    from window_start w, cuda_before b, step_at_start s
    left join host h on true
    where w.start_ns > w.capture_start_ns
)
select cause, device_id, gaps, longest_gap_ns, named_by, cuda_ns, kind, scope, what, severity, host_activity, io_ns,
       wait_ns, cuda_api_ns, framework_ns, cpu_ns, cost_ns, cost_ns as impact_ns
from rows_
