-- Many short kernels whose launch calls take about as long as the kernels run: the host issues work no faster
-- than the GPU finishes it. One row per kernel name, over the launches that came from a launch API call (kernels
-- launched inside CUDA graphs are left out: they already avoid per-kernel launch cost).
-- Only the short name travels through the join and the grouping of a million launches; the full name is looked up
-- per short name at the end.
with launches as (
    select
        k.device_id,
        coalesce(k.short_name, k.name) as short_name,
        k.duration_ns as kernel_ns,
        a.duration_ns as api_ns,
        a.base_name as api
    from kernels k
    join cuda_api_calls a on a.capture_id = k.capture_id and a.correlation_id = k.correlation_id and a.pid = k.pid
    where k.capture_id = $capture_id and k.graph_node_id is null
      and a.api_class = 'launch' and a.base_name not ilike '%graph%'
),
per_name as (
    select
        device_id,
        short_name,
        any_value(api) as api,
        count(*) as launches,
        -- medians: a launch that blocks for milliseconds because the launch queue is full (the GPU is busy) is not
        -- launch overhead and must not dominate
        round(median(kernel_ns)) as median_kernel_ns,
        round(median(api_ns)) as median_launch_api_ns
    from launches
    group by device_id, short_name
),
full_names as (
    -- from the capture's few combinations of names (kernel_name_sets), not from every launch of kernels: the same
    -- names, as each launch's names are one of those combinations
    select coalesce(short_name, name) as short_name, min(name) as name
    from kernel_name_sets
    where capture_id = $capture_id
    group by 1
)
select
    short_name,
    device_id,
    api,
    launches,
    median_kernel_ns,
    median_launch_api_ns,
    round(median_launch_api_ns / nullif(median_kernel_ns, 0), 2) as launch_to_kernel_ratio,
    -- per launch, the time the host needs beyond what the kernel runs: the GPU waits that long when the host is
    -- the bottleneck (reconciled against the device's 'launch' idle time: short gaps between operations)
    cast(launches * greatest(median_launch_api_ns - median_kernel_ns, 0) as bigint) as impact_ns,
    f.name
from per_name
left join full_names f using (short_name)
where launches >= $min_launches and median_kernel_ns <= $max_median_kernel_ns
