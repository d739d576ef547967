-- Synchronous (non-Async) copies and sets, runtime (cudaMemcpy*, cudaMemset*) and driver (cuMemcpy*, cuMemset*),
-- joined to the copies and sets they issued, one row per device, process, API, direction and memory kinds. As in
-- Nsight Systems' own rules, host-to-device copies of 64 KiB or less are left out (the call returns once the data
-- is staged), and synchronous memsets count only on pinned or managed memory (a memset of device memory does not
-- block the host). Impact: the idle gaps of the device whose cause is 'host-copy' (the host was staging a
-- synchronous copy while the GPU had nothing to run), shared among a call's rows by their blocked time.
with calls as (
    select pid, correlation_id, base_name, duration_ns
    from cuda_api_calls
    where capture_id = $capture_id and api_class in ('memcpy', 'memset') and base_name not ilike '%async%'
),
copies as (
    select
        m.device_id, a.pid, a.base_name as api, m.direction, m.src_kind, m.dst_kind,
        a.duration_ns as blocked_ns, m.duration_ns as gpu_ns, m.bytes
    from calls a
    join memcpys m on m.capture_id = $capture_id and m.correlation_id = a.correlation_id and m.pid = a.pid
    where (a.base_name like 'cudaMemcpy%' or a.base_name like 'cuMemcpy%')
      and not (m.direction = 'Host-to-Device' and m.bytes <= $max_staged_h2d_bytes)
),
sets as (
    select
        s.device_id, a.pid, a.base_name as api, 'Memset' as direction, s.mem_kind as src_kind, s.mem_kind as dst_kind,
        a.duration_ns as blocked_ns, s.duration_ns as gpu_ns, s.bytes
    from calls a
    join memsets s on s.capture_id = $capture_id and s.correlation_id = a.correlation_id and s.pid = a.pid
    where (a.base_name like 'cudaMemset%' or a.base_name like 'cuMemset%')
      and s.mem_kind in ('pinned', 'managed')
),
grouped as (
    select device_id, api, direction, src_kind, dst_kind, pid, count(*) as calls, sum(bytes) as bytes,
           sum(blocked_ns) as blocked_ns, sum(gpu_ns) as transfer_ns
    from (select * from copies union all select * from sets)
    group by all
),
staging as (
    select device_id, host_activity as api, host_pid as pid, sum(duration_ns) as idle_ns
    from gpu_idle_gaps
    where capture_id = $capture_id and cause = 'host-copy'
    group by all
)
select
    g.api,
    g.device_id,
    g.direction,
    g.src_kind,
    g.dst_kind,
    g.pid,
    g.calls,
    g.bytes,
    g.blocked_ns,
    g.transfer_ns,
    cast(coalesce(s.idle_ns * g.blocked_ns / nullif(sum(g.blocked_ns) over (partition by g.device_id, g.api, g.pid), 0), 0)
         as bigint) as gpu_idle_ns,
    cast(coalesce(s.idle_ns * g.blocked_ns / nullif(sum(g.blocked_ns) over (partition by g.device_id, g.api, g.pid), 0), 0)
         as bigint) as impact_ns
from grouped g
left join staging s on s.device_id is not distinct from g.device_id and s.api = g.api and s.pid = g.pid
