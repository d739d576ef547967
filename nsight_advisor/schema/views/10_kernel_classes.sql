-- Kernel classes from kernel names, and launch geometry per device.
--
-- Names are the only per-kernel evidence an Nsight Systems timeline has about what a kernel computes. cuBLAS, cuDNN,
-- CUTLASS, TensorRT, nvjet (Hopper cuBLAS) and FlashAttention encode the operation, precision and math path in
-- their names, while a hand-written kernel's name says nothing, so it classifies as 'other' / 'unknown' and is never
-- used as evidence. Patterns are matched on the lower-cased demangled name.
--
-- Math path:
--   simt        : the FP32/FP64 FMA pipes: cuBLAS '*sgemm*'/'*dgemm*', 'gemmsn', xmma kernels built for
--                 '_ffma_'/'_dfma_' instructions, CUTLASS 'opclasssimt' templates, and 'f32f32_f32f32_f32' operands
--                 when no tensor-core marker is present. GEMV is left 'unknown': it is memory-bound whatever the
--                 pipe (Matrix Multiplication guide), so it is no evidence of missed tensor-core use.
--   tensor_core : 'tensorNxNxN' MMA shapes, 'hmma', 'gmma'/'wgmma', 'imma', 'tensorop' (CUTLASS), 'nvjet' (Hopper
--                 cuBLAS JIT GEMMs, tensor-core only), Volta/Turing/Ampere tile codes 'h884', 'h1688', 's1688',
--                 'h16816', 's16816', 'i8816', 'i16832', 'dmma', 'tf32' and 'bf16' GEMMs, FlashAttention ('flash_fwd',
--                 'flash_bwd', 'fmha').
--   unknown     : everything else (including names that say 'gemm' but not how).
-- The SIMT markers win when both appear: cuBLAS names its FP32 xmma kernels 'sm80_xmma_gemm_f32f32_..._ffma_...',
-- and 'xmma' alone therefore proves nothing.

-- Communication kernels by name: NCCL (ncclKernel_*, ncclDevKernel_*), RCCL/MSCCL, NVSHMEM, and the custom
-- all-reduce kernels of inference engines (vLLM's cross_device_reduce, TensorRT-LLM's oneShotAllReduceKernel). They
-- launch 1-32 blocks by design and wait on other GPUs, so their grid, occupancy and tails are NCCL's choice and their
-- cost belongs to the communication rules (exposed-communication, collective-straggler), never to the
-- kernel-efficiency rules, which leave them out with this macro.
create or replace macro na_comm_name(kname) as (
    regexp_matches(lower(coalesce(kname, '')),
        'nccl|rccl|msccl|nvshmem|cross_device_reduce|allreduce|all_reduce|allgather|all_gather|reducescatter|'
        || 'reduce_scatter|alltoall|all_to_all')
);

-- Category: communication, attention and GEMM/convolution are read from the full name (CUTLASS's base name is just
-- 'Kernel'), the memory-limited categories from the base name when there is one (PyTorch's template arguments
-- mention 'normal_distribution', 'copy' and the like inside elementwise kernels).
create or replace macro na_kernel_category(kname, kshort) as (
    case
        when na_comm_name(kname) then 'communication'
        when regexp_matches(lower(kname), 'flash|fmha|attention|_attn|attn_') then 'attention'
        when regexp_matches(lower(kname),
            'gemm|gemv|mat_?mul|matrix_?mul|conv|fprop|dgrad|wgrad|winograd|nvjet|cutlass::gemm|_mma_|wmma')
            then 'gemm_conv'
        when regexp_matches(lower(coalesce(kshort, kname)),
            'reduce|reduction|norm|softmax|pool|scan|mean|argmax|argmin|topk|sum_kernel|histogram')
            then 'reduction_norm'
        when regexp_matches(lower(coalesce(kshort, kname)),
            'copy|memcpy|transpose|permut|reformat|concat|gather|scatter|index_select|indexing|nchwtonhwc|nhwctonchw')
            then 'copy'
        when regexp_matches(lower(coalesce(kshort, kname)),
            'elementwise|pointwise|vectorized|unrolled|triton_poi|fill|activation|relu|gelu|silu|sigmoid|tanh|'
            || 'dropout|distribution|cupy_|^add$|^add_|vector_?add|vecadd|axpy|scale|bias')
            then 'elementwise'
        else 'other'
    end
);

create or replace macro na_math_path(kname) as (
    case
        when regexp_matches(lower(kname), '_ffma_|_dfma_|sgemm|dgemm|gemmsn|opclasssimt') then 'simt'
        when regexp_matches(lower(kname),
            'tensor\d+x\d+x\d+|hmma|gmma|imma|dmma|tensorop|nvjet|h884|h1688|s1688|h16816|s16816|i8816|i16832|'
            || 'tf32|bf16|flash_fwd|flash_bwd|flash_attn|fmha|mma_sync|wmma')
            then 'tensor_core'
        when regexp_matches(lower(kname), 'f32f32_f32f32_f32|f64f64_f64f64_f64') then 'simt'
        else 'unknown'
    end
);

create or replace macro na_precision(kname) as (
    case
        when regexp_matches(lower(kname), 'fp8|e4m3|e5m2|qgmma') then 'fp8'
        when regexp_matches(lower(kname), 'bf16|bfloat16') then 'bf16'
        when regexp_matches(lower(kname), 'tf32') then 'tf32'
        when regexp_matches(lower(kname), 'f16f16|h884|h1688|h16816|hgemm|__half|c10::half|half_t|fp16|nvjet_h') then 'fp16'
        when regexp_matches(lower(kname), 'dgemm|f64f64|<double|double>|\bdouble\b|dfma') then 'fp64'
        when regexp_matches(lower(kname), 'sgemm|f32f32|<float|float>|\bfloat\b|ffma') then 'fp32'
        else null
    end
);

-- One row per timeline kernel, with its class: the columns of kernels, then category, math_path and precision. The
-- patterns run once per combination of names (kernel_name_sets), not per launch: a training capture launches a few
-- hundred kernel names millions of times. The rows are joined with the classified names on the name ids, as
-- kernels joins them (grouping a million launches by their name texts and joining them back on those texts cost
-- the 1M-kernel export 0.1 s per read).
create or replace view kernel_classes as
with names as (
    select
        capture_id, name_id, short_name_id, mangled_name_id, name, short_name, mangled_name,
        na_kernel_category(name, short_name) as category,
        na_math_path(name) as math_path,
        na_precision(name) as precision
    from kernel_name_sets
)
select r.capture_id, r.device_id, r.context_id, r.stream_id, r.pid, r.tid, r.correlation_id,
       r.start_ns, r.end_ns, r.duration_ns,
       n.name, n.short_name, n.mangled_name,
       r.grid_x, r.grid_y, r.grid_z, r.block_x, r.block_y, r.block_z, r.blocks, r.threads_per_block,
       r.registers_per_thread, r.static_shared_mem_bytes, r.dynamic_shared_mem_bytes, r.shared_mem_bytes,
       r.local_mem_per_thread_bytes, t.launch_type, r.graph_node_id, r.graph_id,
       n.category, n.math_path, n.precision
from kernel_rows r
left join names n
    on n.capture_id = r.capture_id and n.name_id is not distinct from r.name_id
   and n.short_name_id is not distinct from r.short_name_id and n.mangled_name_id is not distinct from r.mangled_name_id
left join kernel_launch_types t on t.capture_id = r.capture_id and t.launch_type_id = r.launch_type_id;

-- @macro na_limit_warps(max_warps_per_sm, warps_per_block)
-- The blocks per SM that the warp limit allows, or NULL where the capture lacks it.
create or replace macro na_limit_warps(max_warps_per_sm, warps_per_block) as (
    case when max_warps_per_sm > 0 and warps_per_block > 0 then max_warps_per_sm // warps_per_block end
);

-- @macro na_limit_registers(max_registers_per_sm, registers_per_thread, warp_size, warps_per_block)
-- The blocks per SM that the register file allows (registers allocated per warp in units of 256), or NULL.
create or replace macro na_limit_registers(max_registers_per_sm, registers_per_thread, warp_size, warps_per_block) as (
    case when max_registers_per_sm > 0 and registers_per_thread > 0 and warps_per_block > 0
         then (max_registers_per_sm // (cast(ceil(registers_per_thread * warp_size / 256.0) as bigint) * 256))
              // warps_per_block end
);

-- @macro na_limit_shared_mem(max_shared_mem_per_sm_bytes, shared_mem_bytes, cc_major)
-- The blocks per SM that shared memory allows (allocated in units of 128 bytes, plus the 1 KiB the driver reserves
-- per block from compute capability 8.0 on), or NULL.
create or replace macro na_limit_shared_mem(max_shared_mem_per_sm_bytes, shared_mem_bytes, cc_major) as (
    case when max_shared_mem_per_sm_bytes > 0 and shared_mem_bytes > 0
         then max_shared_mem_per_sm_bytes
              // (cast(ceil(shared_mem_bytes / 128.0) as bigint) * 128 + case when cc_major >= 8 then 1024 else 0 end)
    end
);

-- @macro na_occupancy(rel)
-- The rows of ``rel`` (a CTE of launches or of launch configurations, each with its GPU's limits: blocks,
-- sm_count, cc_major, warp_size, max_warps_per_sm, max_blocks_per_sm, max_registers_per_sm,
-- max_shared_mem_per_sm_bytes, warps_per_block, registers_per_thread, shared_mem_bytes), followed by their
-- occupancy figures: the blocks per SM each limit allows, the theoretical resident blocks per SM (the least of them),
-- blocks per SM, waves, the last wave's fill and the theoretical occupancy. kernel_launches and
-- kernel_config_occupancy compute them with it.
create or replace macro na_occupancy(rel) as table
with limits as (
    select
        b.*,
        na_limit_warps(b.max_warps_per_sm, b.warps_per_block) as limit_warps,
        na_limit_registers(b.max_registers_per_sm, b.registers_per_thread, b.warp_size, b.warps_per_block)
            as limit_registers,
        na_limit_shared_mem(b.max_shared_mem_per_sm_bytes, b.shared_mem_bytes, b.cc_major) as limit_shared_mem
    from query_table(rel) b
),
resident as (
    select
        l.*,
        least(l.max_blocks_per_sm, l.limit_warps, l.limit_registers, l.limit_shared_mem) as resident_blocks_per_sm
    from limits l
)
select
    r.*,
    case when r.sm_count > 0 then r.blocks / r.sm_count end as blocks_per_sm,
    case when r.sm_count > 0 and r.resident_blocks_per_sm > 0
         then r.blocks / (r.sm_count * r.resident_blocks_per_sm) end as waves,
    case when r.sm_count > 0 and r.resident_blocks_per_sm > 0
         then (r.blocks / (r.sm_count * r.resident_blocks_per_sm))
              - floor(r.blocks / (r.sm_count * r.resident_blocks_per_sm)) end as last_wave_fraction,
    case when r.max_warps_per_sm > 0 and r.resident_blocks_per_sm is not null
         then 100.0 * least(r.resident_blocks_per_sm * r.warps_per_block, r.max_warps_per_sm) / r.max_warps_per_sm
         end as theoretical_occupancy_pct
from resident r;

-- One row per timeline kernel joined with its GPU: blocks per SM, theoretical resident blocks per SM (from the
-- registers, shared memory, warps and block limits the capture records), waves and the last wave's fill.
-- Register allocation is rounded to 256 registers per warp and shared memory to 128 bytes, plus the 1 KiB the
-- driver reserves per block from compute capability 8.0 on (CUDA Occupancy Calculator's rules). Where the capture
-- lacks a limit, that limit is left out (least() skips NULLs) and the result is an upper bound.
create or replace view kernel_launches as
with base as (
    select
        k.capture_id, k.device_id, k.stream_id, k.pid, k.tid, k.correlation_id,
        k.start_ns, k.end_ns, k.duration_ns, k.name, k.short_name,
        k.grid_x, k.grid_y, k.grid_z, k.block_x, k.block_y, k.block_z,
        k.blocks, k.threads_per_block, k.registers_per_thread, k.shared_mem_bytes, k.graph_node_id,
        g.name as gpu_name, g.sm_count, g.cc_major,
        coalesce(g.threads_per_warp, 32) as warp_size,
        g.max_warps_per_sm, g.max_blocks_per_sm, g.max_registers_per_sm, g.max_shared_mem_per_sm_bytes,
        cast(ceil(k.threads_per_block / coalesce(g.threads_per_warp, 32)) as bigint) as warps_per_block
    from kernels k
    left join gpus g on g.capture_id = k.capture_id and g.device_id = k.device_id
)
select * from na_occupancy(base);

-- @view kernel_configs
-- The timeline's kernels per launch configuration: one row per capture, GPU, kernel (its names) and configuration
-- (grid, block, registers and shared memory per block), with its launches and their durations. A capture launches a
-- few hundred configurations millions of times: a rule that judges configurations or sums per name reads these
-- rows, not every launch (the 1M-kernel export: 180 rows; grouping a million launches by their 400-character
-- names cost each kernel rule 0.05 to 0.13 CPU-s; docs/performance.md, "Twenty-seventh pass"). The GPU's facts
-- are kernel_config_occupancy's. The analysis materializes both once where several rules read them
-- (nsight_advisor.analysis.shared_views).
-- @column capture_id Capture (captures.capture_id).
-- @column device_id GPU.
-- @column name Demangled kernel name (kernels.name).
-- @column short_name Base function name (kernels.short_name).
-- @column mangled_name Mangled name (kernels.mangled_name).
-- @column grid_x Grid size in blocks, x.
-- @column grid_y Grid size in blocks, y.
-- @column grid_z Grid size in blocks, z.
-- @column block_x Block size in threads, x.
-- @column block_y Block size in threads, y.
-- @column block_z Block size in threads, z.
-- @column blocks Blocks per launch.
-- @column threads_per_block Threads per block.
-- @column registers_per_thread Registers per thread.
-- @column shared_mem_bytes Shared memory per block (static and dynamic), bytes.
-- @column launches Launches with this configuration.
-- @column total_ns Their summed duration, ns.
-- @column min_ns The shortest of them, ns.
-- @column max_ns The longest of them, ns.
create or replace view kernel_configs as
with configs as (
    -- grouped on the name ids (integers), the names joined to the few groups after
    select capture_id, device_id, name_id, short_name_id, mangled_name_id, grid_x, grid_y, grid_z,
           block_x, block_y, block_z, blocks, threads_per_block, registers_per_thread, shared_mem_bytes,
           count(*) as launches, sum(duration_ns) as total_ns, min(duration_ns) as min_ns, max(duration_ns) as max_ns
    from kernel_rows
    group by all
)
select c.capture_id, c.device_id, n.name, n.short_name, n.mangled_name,
       c.grid_x, c.grid_y, c.grid_z, c.block_x, c.block_y, c.block_z,
       c.blocks, c.threads_per_block, c.registers_per_thread, c.shared_mem_bytes,
       c.launches, c.total_ns, c.min_ns, c.max_ns
from configs c
left join kernel_name_sets n
    on n.capture_id = c.capture_id and n.name_id is not distinct from c.name_id
   and n.short_name_id is not distinct from c.short_name_id and n.mangled_name_id is not distinct from c.mangled_name_id;

-- @view kernel_config_occupancy
-- kernel_configs with the GPU each configuration ran on and the occupancy figures kernel_launches gives each of its
-- launches (the same computation, na_occupancy, once per configuration): its columns, then the GPU's facts and
-- limits, the blocks per SM each limit allows, waves and the theoretical occupancy.
-- @column capture_id Capture (captures.capture_id).
-- @column device_id GPU.
-- @column name Demangled kernel name (kernels.name).
-- @column short_name Base function name (kernels.short_name).
-- @column mangled_name Mangled name (kernels.mangled_name).
-- @column grid_x Grid size in blocks, x.
-- @column grid_y Grid size in blocks, y.
-- @column grid_z Grid size in blocks, z.
-- @column block_x Block size in threads, x.
-- @column block_y Block size in threads, y.
-- @column block_z Block size in threads, z.
-- @column blocks Blocks per launch.
-- @column threads_per_block Threads per block.
-- @column registers_per_thread Registers per thread.
-- @column shared_mem_bytes Shared memory per block (static and dynamic), bytes.
-- @column launches Launches with this configuration.
-- @column total_ns Their summed duration, ns.
-- @column min_ns The shortest of them, ns.
-- @column max_ns The longest of them, ns.
-- @column gpu_name The GPU's name (gpus.name).
-- @column sm_count SMs of the GPU.
-- @column cc_major Compute capability, major.
-- @column warp_size Threads per warp (32 where the capture does not say).
-- @column max_warps_per_sm Resident warps per SM at most.
-- @column max_blocks_per_sm Resident blocks per SM at most.
-- @column max_registers_per_sm Registers per SM.
-- @column max_shared_mem_per_sm_bytes Shared memory per SM, bytes.
-- @column warps_per_block Warps per block.
-- @column limit_warps Blocks per SM the warp limit allows (na_limit_warps), or NULL.
-- @column limit_registers Blocks per SM the registers allow (na_limit_registers), or NULL.
-- @column limit_shared_mem Blocks per SM shared memory allows (na_limit_shared_mem), or NULL.
-- @column resident_blocks_per_sm Theoretical resident blocks per SM: the least of the limits the capture records.
-- @column blocks_per_sm blocks / sm_count.
-- @column waves blocks / (sm_count x resident_blocks_per_sm).
-- @column last_wave_fraction The last wave's fill: waves - floor(waves).
-- @column theoretical_occupancy_pct Resident warps per SM as a share of the maximum, %.
create or replace view kernel_config_occupancy as
-- the GPU joined here, not in na_occupancy: a rule reading the GPU's facts is skipped where the kernels name no GPU,
-- and the runner finds what a rule reads through the views' SQL (engine/rule_checks.py), not through macros
with base as (
    select
        c.*,
        g.name as gpu_name, g.sm_count, g.cc_major,
        coalesce(g.threads_per_warp, 32) as warp_size,
        g.max_warps_per_sm, g.max_blocks_per_sm, g.max_registers_per_sm, g.max_shared_mem_per_sm_bytes,
        cast(ceil(c.threads_per_block / coalesce(g.threads_per_warp, 32)) as bigint) as warps_per_block
    from kernel_configs c
    left join gpus g on g.capture_id = c.capture_id and g.device_id = c.device_id
)
select * from na_occupancy(base);
