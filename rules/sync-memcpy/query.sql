-- Synchronous (non-Async) cudaMemcpy*/cudaMemset* calls that block the host, joined to the copies and sets they
-- issued, one row per process, API, direction and memory kinds. As in Nsight Systems' own rules, host-to-device
-- copies of 64 KiB or less are left out (the call returns once the data is staged), and synchronous memsets count
-- only on pinned or managed memory (a memset of device memory does not block the host).
with copies as (
    select
        a.pid, a.base_name as api, m.direction, m.src_kind, m.dst_kind,
        a.duration_ns as blocked_ns, m.duration_ns as gpu_ns, m.bytes
    from api_calls a
    join memcpys m on m.capture_id = a.capture_id and m.correlation_id = a.correlation_id and m.pid = a.pid
    where a.capture_id = $capture_id
      and a.base_name like 'cudaMemcpy%' and a.base_name not ilike '%async%'
      and not (m.direction = 'Host-to-Device' and m.bytes <= $max_staged_h2d_bytes)
),
sets as (
    select
        a.pid, a.base_name as api, 'Memset' as direction, s.mem_kind as src_kind, s.mem_kind as dst_kind,
        a.duration_ns as blocked_ns, s.duration_ns as gpu_ns, s.bytes
    from api_calls a
    join memsets s on s.capture_id = a.capture_id and s.correlation_id = a.correlation_id and s.pid = a.pid
    where a.capture_id = $capture_id
      and a.base_name like 'cudaMemset%' and a.base_name not ilike '%async%'
      and s.mem_kind in ('pinned', 'managed')
),
calls as (
    select * from copies
    union all
    select * from sets
)
select
    api,
    direction,
    src_kind,
    dst_kind,
    pid,
    count(*) as calls,
    sum(bytes) as bytes,
    sum(blocked_ns) as blocked_ns,
    sum(gpu_ns) as transfer_ns,
    -- The host waits for the whole call; with an async copy from pinned memory it could run ahead meanwhile.
    sum(blocked_ns) as impact_ns
from calls
group by api, direction, src_kind, dst_kind, pid
