-- Idle gaps of each GPU within the analysis window (gpu_idle_gaps: concurrent streams count as busy, and the
-- stretches before a device's first and after its last operation count when they lie inside the window), that
-- last at least min_gap_ns and whose cause is host work, allocation or unknown. Gaps caused by startup or
-- compilation (startup-cost), synchronization (sync-stall), synchronous copies (sync-memcpy) and launch latency
-- (launch-overhead) are claimed by those rules, so no gap is charged twice.
select
    device_id,
    start_ns as gap_start_ns,
    duration_ns as gap_ns,
    position,
    cause,
    coalesce(host_activity, case cause when 'unknown' then 'no CUDA API trace'
                                       else 'no CUDA call or NVTX range' end) as host_activity,
    host_pid as pid,
    host_tid as tid,
    host_api_overlap_ns,
    duration_ns as impact_ns
from gpu_idle_gaps
where capture_id = $capture_id and cause in ('host', 'allocation', 'unknown')
