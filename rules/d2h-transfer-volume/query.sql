-- Device-to-host copy volume per GPU, and the copy time within the analysis window during which no kernel ran on
-- the same GPU (exposed): time the GPU spends handing results back to the host instead of computing, the
-- other half of the traffic h2d-transfer-volume judges. copy_exposure shares a stretch in which both directions
-- copy between them, so the two rules never claim the same nanosecond.
select
    e.device_id,
    e.copies,
    e.bytes,
    e.pageable_bytes,
    e.transfer_ns,
    e.achieved_gb_per_s,
    e.exposed_ns,
    round(100.0 * e.exposed_ns / nullif(w.duration_ns, 0), 2) as exposed_share_pct,
    e.exposed_ns as impact_ns
from copy_exposure e
join analysis_window w on w.capture_id = e.capture_id
where e.capture_id = $capture_id and e.direction = 'd2h'
