-- Host-to-device copy volume per GPU, and the copy time that no kernel on the same GPU overlaps (exposed): time the
-- GPU's computation waits on, or could not use, because data was still arriving from the host.
--
-- Overlap is exact and cheap: kernels are merged into busy segments per device (islands of overlapping kernels),
-- busy(t) = kernel-busy time on the device up to t is read with an as-of join, and a copy [a, b] is covered for
-- busy(b) - busy(a).
with h2d as (
    select device_id, start_ns, end_ns, duration_ns, bytes, src_kind
    from memcpys
    where capture_id = $capture_id and direction ilike '%host-to-device%'
),
ordered as (
    select
        device_id, start_ns, end_ns,
        max(end_ns) over (partition by device_id order by start_ns, end_ns
                          rows between unbounded preceding and 1 preceding) as busy_until_ns
    from kernels
    where capture_id = $capture_id
),
islands as (
    select
        device_id, start_ns, end_ns,
        sum(case when busy_until_ns is null or start_ns > busy_until_ns then 1 else 0 end)
            over (partition by device_id order by start_ns, end_ns rows unbounded preceding) as island
    from ordered
),
segments as (
    select device_id, min(start_ns) as seg_start_ns, max(end_ns) as seg_end_ns
    from islands
    group by device_id, island
),
cumulative as (
    select
        device_id, seg_start_ns, seg_end_ns,
        coalesce(sum(seg_end_ns - seg_start_ns) over (partition by device_id order by seg_start_ns
                                                      rows between unbounded preceding and 1 preceding), 0)
            as busy_before_ns
    from segments
),
copy_start as (
    select c.*, coalesce(s.busy_before_ns + least(c.start_ns, s.seg_end_ns) - s.seg_start_ns, 0) as busy_at_start_ns
    from h2d c
    asof left join cumulative s on s.device_id = c.device_id and s.seg_start_ns <= c.start_ns
),
per_copy as (
    select
        c.*,
        coalesce(s.busy_before_ns + least(c.end_ns, s.seg_end_ns) - s.seg_start_ns, 0) - c.busy_at_start_ns
            as covered_ns
    from copy_start c
    asof left join cumulative s on s.device_id = c.device_id and s.seg_start_ns <= c.end_ns
),
wall as (
    select duration_ns as capture_ns from captures where capture_id = $capture_id
)
select
    p.device_id,
    count(*) as copies,
    sum(p.bytes) as bytes,
    sum(p.bytes) filter (where p.src_kind = 'pageable') as pageable_bytes,
    sum(p.duration_ns) as transfer_ns,
    round(sum(p.bytes) / nullif(sum(p.duration_ns), 0), 2) as achieved_gb_per_s,
    sum(p.duration_ns - p.covered_ns) as exposed_ns,
    round(100.0 * sum(p.duration_ns - p.covered_ns) / nullif(any_value(w.capture_ns), 0), 2) as exposed_share_pct,
    sum(p.duration_ns - p.covered_ns) as impact_ns
from per_copy p
left join wall w on true
group by p.device_id
