-- Asynchronous copies (runtime cudaMemcpy*Async, driver cuMemcpy*Async) from or to pageable host memory: the driver stages them through a pinned
-- buffer, so they block the host and cannot overlap with kernels. One row per process, API, direction and kinds.
select
    a.base_name as api,
    m.direction,
    m.src_kind,
    m.dst_kind,
    a.pid,
    count(*) as calls,
    sum(m.bytes) as bytes,
    sum(a.duration_ns) as api_ns,
    sum(m.duration_ns) as transfer_ns,
    -- The host waits in the API call for the staged copy; with pinned memory the call returns at once. A copy to
    -- pageable memory is waited for either way (the host needs the data, and the call first waits for the GPU work
    -- queued before it, often most of its time: a synchronization, not a cost of pageable memory): what pinned
    -- memory saves there is the host's copy out of the staging buffer, the call's time after its copy ended.
    sum(case when m.dst_kind = 'pageable' and m.src_kind <> 'pageable'
             then greatest(least(a.end_ns - m.end_ns, a.duration_ns), 0)
             else a.duration_ns end) as impact_ns
from cuda_api_calls a
join memcpys m on m.capture_id = a.capture_id and m.correlation_id = a.correlation_id and m.pid = a.pid
where a.capture_id = $capture_id
  and (a.base_name ilike 'cudaMemcpy%async%' or a.base_name ilike 'cuMemcpy%async%')
  and (m.src_kind = 'pageable' or m.dst_kind = 'pageable')
group by a.base_name, m.direction, m.src_kind, m.dst_kind, a.pid
