-- Host-to-device copy volume per GPU, and the copy time that no kernel on the same GPU overlaps (exposed): time the
-- GPU's computation waits on, or could not use, because data was still arriving from the host.
with h2d as (
    select device_id, start_ns, end_ns, duration_ns, bytes, src_kind
    from memcpys
    where capture_id = $capture_id and direction ilike '%host-to-device%'
),
keyed_kernels as (
    -- The device is folded into the time key (device x 10^15 ns, about 11.6 days, far beyond any capture) so that
    -- the overlap join below is a pure range join, which DuckDB runs as an inequality join instead of comparing
    -- every copy with every kernel of its device.
    select device_id * 1000000000000000 + start_ns as key_start, device_id * 1000000000000000 + end_ns as key_end
    from kernels
    where capture_id = $capture_id
),
keyed_copies as (
    select device_id, start_ns, duration_ns,
           device_id * 1000000000000000 + start_ns as key_start, device_id * 1000000000000000 + end_ns as key_end
    from h2d
),
overlap as (
    -- kernel time inside each copy; kernels of one device rarely overlap each other, so the sum is close to the
    -- union (capped at the copy's own duration). An inner join: copies no kernel meets get 0 in per_copy.
    select c.device_id, c.start_ns, least(any_value(c.duration_ns), sum(o.overlap_ns)) as covered_ns
    from keyed_copies c
    join (
        select c2.key_start as copy_key,
               least(k.key_end, c2.key_end) - greatest(k.key_start, c2.key_start) as overlap_ns
        from keyed_copies c2
        join keyed_kernels k on k.key_start < c2.key_end and k.key_end > c2.key_start
    ) o on o.copy_key = c.key_start
    group by c.device_id, c.start_ns
),
per_copy as (
    select c.*, coalesce(o.covered_ns, 0) as covered_ns
    from h2d c
    left join overlap o on o.device_id = c.device_id and o.start_ns = c.start_ns
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
