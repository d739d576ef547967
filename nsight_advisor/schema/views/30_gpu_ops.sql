-- The analysis layer, part 1: what ran, and when the analysis looks at it.
--
-- Every view of the analysis layer (files 30_ to 39_) is documented the same way: a `@view` block names it and
-- says what one row is, then one `@column` line per column. nsight_advisor.schema.views reads these blocks, so
-- rules can name the views in [[requires]], `rules show` and docs/analysis-views.md list them, and a test checks
-- that every column a view returns is documented.

-- @macro na_api_class(base_name)
-- The class of a CUDA runtime or driver call from its base name (no _vNNNN suffix): launch, sync, memcpy,
-- memset, alloc, module (module and library loading), context (initialization and context creation), jit
-- (cuLink*: PTX linking), graph (instantiation and capture), other.
create or replace macro na_api_class(base_name) as (
    case
        when base_name ilike '%synchronize%' then 'sync'
        when base_name ilike 'cuLink%' then 'jit'
        when base_name ilike '%graphinstantiate%' or base_name ilike '%graphupload%'
            or base_name ilike '%begincapture%' or base_name ilike '%endcapture%' then 'graph'
        when base_name ilike '%launch%' then 'launch'
        when base_name ilike '%memcpy%' or base_name ilike '%memprefetch%' then 'memcpy'
        when base_name ilike '%memset%' then 'memset'
        when base_name ilike 'cuModuleLoad%' or base_name ilike 'cuLibraryLoad%' or base_name ilike 'cuModuleUnload%'
            or base_name ilike 'cuLibraryUnload%' or base_name ilike 'cudaLibraryLoad%' then 'module'
        when base_name in ('cuInit', 'cuDevicePrimaryCtxRetain', 'cuDevicePrimaryCtxReset', 'cuDevicePrimaryCtxRelease',
                           'cudaDeviceReset', 'cudaSetDevice', 'cudaInitDevice')
            or base_name ilike 'cuCtxCreate%' or base_name ilike 'cuCtxDestroy%' then 'context'
        when base_name ilike '%malloc%' or base_name ilike '%free%' or base_name ilike 'cuMemAlloc%'
            or base_name ilike '%hostalloc%' or base_name ilike '%hostregister%' or base_name ilike '%hostunregister%'
            or base_name in ('cuMemCreate', 'cuMemRelease', 'cuMemMap', 'cuMemUnmap', 'cuMemAddressReserve',
                             'cuMemAddressFree', 'cuMemSetAccess') then 'alloc'
        else 'other'
    end
);

-- @macro na_comm_kernel(name)
-- Whether a kernel name is a communication kernel: NCCL's collective and point-to-point kernels
-- (ncclKernel_AllReduce_RING_LL_Sum_float, ncclDevKernel_SendRecv, ...; NCCL 2.19 renamed ncclKernel_ to
-- ncclDevKernel_).
create or replace macro na_comm_kernel(name) as (name ilike 'nccl%kernel%');

-- @view cuda_api_calls
-- CUDA runtime and driver calls as api_calls holds them, less nested duplicates, with their class. Some nsys
-- versions record one call twice under the same correlation id: the outer row under its plain name and an inner
-- row, nested inside it in time, under its versioned name (cudaMemcpy and cudaMemcpy_v3020). api_calls keeps both
-- (nsys stats counts both), and every rule that counts or sums calls reads this view, which keeps the outer row only.
-- @column capture_id Capture (captures.capture_id).
-- @column pid Process id.
-- @column tid Thread id.
-- @column correlation_id Links to the GPU operations the call issued (same pid).
-- @column name Function name as recorded, with its version suffix.
-- @column base_name name without the _vNNNN suffix.
-- @column kind runtime or driver.
-- @column start_ns Start, ns.
-- @column end_ns End, ns.
-- @column duration_ns end_ns - start_ns, ns.
-- @column return_value cudaError_t / CUresult returned, or NULL.
-- @column api_class The call's class (na_api_class): launch, sync, memcpy, memset, alloc, module, context, jit, graph, other.
create or replace view cuda_api_calls as
with repeated as (
    -- correlation ids recorded more than once on one thread: the only candidates for a nested duplicate
    select capture_id, pid, tid, correlation_id
    from api_call_rows
    where correlation_id is not null and correlation_id <> 0
    group by all
    having count(*) > 1
),
nested as (
    select inner_call.capture_id, inner_call.pid, inner_call.tid, inner_call.correlation_id,
           inner_call.start_ns, inner_call.end_ns, inner_call.name
    from repeated r
    join api_calls inner_call using (capture_id, pid, tid, correlation_id)
    join api_calls outer_call using (capture_id, pid, tid, correlation_id)
    where outer_call.start_ns <= inner_call.start_ns and outer_call.end_ns >= inner_call.end_ns
      -- the outer row of two identical ones is the one whose name sorts first
      and (outer_call.start_ns < inner_call.start_ns or outer_call.end_ns > inner_call.end_ns
           or outer_call.name < inner_call.name)
    group by all
),
names as (
    -- a capture calls a few hundred distinct functions: classify each name once, not each of a million calls
    select capture_id, name_id, name, base_name, na_api_class(base_name) as api_class
    from api_names
)
-- api_call_rows with their names, as the api_calls view gives them, and the class ('other' without a name, as
-- na_api_class says of NULL)
select a.capture_id, a.pid, a.tid, a.correlation_id, c.name, c.base_name, a.kind, a.start_ns, a.end_ns,
       a.duration_ns, a.return_value, coalesce(c.api_class, 'other') as api_class
from api_call_rows a
left join names c on c.capture_id = a.capture_id and c.name_id = a.name_id
anti join nested n
    on n.capture_id = a.capture_id and n.pid = a.pid and n.tid is not distinct from a.tid
    and n.correlation_id = a.correlation_id and n.start_ns = a.start_ns and n.end_ns = a.end_ns
    and n.name is not distinct from c.name;

-- @view kernel_totals
-- The kernels' time per name: one row per capture, GPU, kernel name and base name, with its launches and their
-- summed duration, over the whole capture. What reads only sums per name reads this (the summary, the findings'
-- shares of their kernels, the what-if's kernel fixes): it groups the kernel rows by their name ids and joins
-- the few names after, where the kernels view joins every launch with its names (a million-kernel capture: one
-- grouping of 0.014 s instead of five of 0.06 to 0.14 s).
-- @column capture_id Capture (captures.capture_id).
-- @column device_id GPU, or NULL where the capture does not record it.
-- @column name Kernel name, as kernels.name (demangled, else the base name).
-- @column short_name Base function name, as kernels.short_name.
-- @column launches Launches.
-- @column total_ns Their summed duration, ns.
create or replace view kernel_totals as
with sums as (
    select capture_id, device_id, name_id, short_name_id, count(*) as launches, sum(duration_ns) as total_ns
    from kernel_rows
    group by all
)
select s.capture_id, s.device_id, coalesce(n.name, sn.name) as name, sn.name as short_name, s.launches, s.total_ns
from sums s
left join kernel_names n on n.capture_id = s.capture_id and n.name_id = s.name_id
left join kernel_names sn on sn.capture_id = s.capture_id and sn.name_id = s.short_name_id;

-- @view gpu_ops
-- Every operation a GPU executed: kernels, memory copies and memory sets, one row each.
-- @column capture_id Capture (captures.capture_id).
-- @column device_id GPU the operation ran on.
-- @column stream_id CUDA stream.
-- @column pid Process that issued it.
-- @column correlation_id Links to the issuing call in cuda_api_calls (same pid).
-- @column op kernel, memcpy or memset.
-- @column start_ns Start, ns.
-- @column end_ns End, ns.
-- @column duration_ns end_ns - start_ns, ns.
-- @column bytes Bytes copied or set; NULL for kernels.
-- @column direction Copy direction as memcpys.direction labels it; NULL for kernels and sets.
-- @column comm Whether the operation is a communication kernel (na_comm_kernel: NCCL's kernels).
create or replace view gpu_ops as
-- kernel_rows, the table under the kernels view: gpu_ops carries no names, and the view's three name joins
-- would cost a million-row join each time the analysis layer reads it
-- (the communication kernels are found among the few distinct names and joined back by id)
select r.capture_id, r.device_id, r.stream_id, r.pid, r.correlation_id, 'kernel' as op, r.start_ns, r.end_ns,
       r.duration_ns, null::bigint as bytes, null::varchar as direction, c.name_id is not null as comm
from kernel_rows r
left join (select capture_id, name_id from kernel_names where na_comm_kernel(name)) c
    on c.capture_id = r.capture_id and c.name_id = coalesce(r.short_name_id, r.name_id)
union all
select capture_id, device_id, stream_id, pid, correlation_id, 'memcpy', start_ns, end_ns, duration_ns, bytes, direction,
       false
from memcpys
union all
select capture_id, device_id, stream_id, pid, correlation_id, 'memset', start_ns, end_ns, duration_ns, bytes, null,
       false
from memsets;

-- @view analysis_window
-- The span of each capture that the time accounting and the rules judge: by default from the start of the first
-- GPU operation to the end of the last one (one-time work before the first operation is reported apart, as
-- before_window_ns). An analysis starts it at the steady state where iterations are found, and `analyze --window`
-- replaces it (docs/impact.md).
-- @column capture_id Capture (captures.capture_id).
-- @column start_ns Window start, ns.
-- @column end_ns Window end, ns.
-- @column duration_ns end_ns - start_ns, ns.
-- @column source How the window was chosen: 'first to last GPU operation', or what the user gave.
create or replace view analysis_window as
select capture_id, min(start_ns) as start_ns, max(end_ns) as end_ns, max(end_ns) - min(start_ns) as duration_ns,
       'first to last GPU operation' as source
from gpu_ops
where end_ns >= start_ns
group by capture_id;

-- @view launch_configs
-- Kernels per launch configuration: one row per capture, device, kernel name, grid, block, registers and shared
-- memory, from the timeline (source 'timeline') and from Nsight Compute reports (source 'ncu').
-- @column capture_id Capture (captures.capture_id).
-- @column source timeline (Nsight Systems kernels) or ncu (Nsight Compute profiled kernels).
-- @column device_id GPU (NULL for ncu rows).
-- @column name Demangled kernel name.
-- @column short_name Base function name.
-- @column grid_x Grid size in blocks, x.
-- @column grid_y Grid size in blocks, y.
-- @column grid_z Grid size in blocks, z.
-- @column block_x Block size in threads, x.
-- @column block_y Block size in threads, y.
-- @column block_z Block size in threads, z.
-- @column blocks Blocks per launch.
-- @column threads_per_block Threads per block.
-- @column registers_per_thread Registers per thread.
-- @column shared_mem_bytes Shared memory per block, bytes.
-- @column launches Launches with this configuration.
-- @column total_ns Summed duration of those launches, ns.
-- @column median_ns Median duration, ns.
create or replace view launch_configs as
select capture_id, 'timeline' as source, device_id, name, short_name, grid_x, grid_y, grid_z, block_x, block_y,
       block_z, blocks, threads_per_block, registers_per_thread, shared_mem_bytes,
       count(*) as launches, sum(duration_ns) as total_ns, median(duration_ns) as median_ns
from kernels
group by all
union all
select capture_id, 'ncu', null::integer, name, short_name, grid_x, grid_y, grid_z, block_x, block_y, block_z,
       blocks, threads_per_block, registers_per_thread, shared_mem_bytes,
       count(*), sum(duration_ns), median(duration_ns)
from ncu_kernels
group by all;
