-- Who wrote the work and what it runs on: the program's stack per capture, and what each GPU can do.
--
-- Advice depends on both: `.item()` means nothing to an OpenACC program, and BF16 means nothing to a Turing GPU.
-- A rule's fix names the stack it is written for and the capabilities it needs (docs/rule-format.md), and the
-- engine picks the text from these two views (nsight_advisor/engine/advice.py).
-- No semicolons inside this file except between statements (the loader splits on them).

-- Evidence of a programming stack, one row per capture, stack and kind of evidence: which names (kernel names of
-- the timeline or of Nsight Compute, NVTX domain names) match the stack's patterns. Patterns are matched on the
-- lower-cased name. Sources of the patterns:
--   pytorch        : ATen kernels live in namespaces at::native / at::cuda, use c10 types, and the profiler's NVTX
--                    ranges are named aten::*, torch.compile's Triton kernels are named triton_poi/red/per/tem_fused*
--   jax            : XLA names its NVTX domain and kernels after the HLO fusion (loop_*_fusion, input_*_fusion)
--   tensorflow     : kernels instantiated in the tensorflow:: namespace and Eigen's EigenMetaKernel
--   tensorrt       : TensorRT's NVTX domain, its generic reformat kernels, Myelin (__myl_) and trt_ kernels
--   openacc-openmp : NVHPC names compute regions nvkernel_<func>_F<n>L<line>, PGI names them <func>_<line>_gpu,
--                    the PGI runtime's __pgi_uacc_* and clang/gcc offload's __omp_offloading_*
--   cuda-fortran   : NVHPC CUDA Fortran module procedures are mangled <module>_<kernel>_ (lower case, trailing _)
--                    and called through the NVHPC Fortran runtime (pgf90_*)
--   julia          : CUDA.jl compiles kernels named julia_<function>_<n>
--   cupy-numba     : CuPy's generated kernels are named cupy_*, Numba's carry cudapy in their mangled names
--   triton         : a stand-alone Triton kernel keeps its Python name, so only 'triton' in the name is evidence
create or replace view program_evidence as
with names as (
    select capture_id, name, 'kernel name' as source from kernel_names
    union all
    select distinct capture_id, name, 'Nsight Compute kernel name' as source from ncu_kernels where name is not null
    union all
    select capture_id, name, 'NVTX domain' as source from nvtx_domains where name is not null
),
-- Each pattern is a constant in its own branch: DuckDB compiles a constant pattern once, and one read from a
-- joined column once per row (80 ms of the 8 DLRM ranks' analysis for 1,100 names). The patterns are tried once
-- per distinct lower-cased name: the ranks of a job share their names (the 8 DLRM ranks' 868 kernel names are 113).
lowered as (
    select capture_id, name, source, lower(name) as l,
           case when source = 'NVTX domain' then 'domain' else 'name' end as kind
    from names
),
patterns (stack, priority, kind) as (
    values
        ('pytorch', 1, 'name'), ('pytorch', 1, 'domain'), ('jax', 2, 'name'), ('jax', 2, 'domain'),
        ('tensorflow', 3, 'name'), ('tensorflow', 3, 'domain'), ('tensorrt', 4, 'name'), ('tensorrt', 4, 'domain'),
        ('openacc-openmp', 5, 'name'), ('openacc-openmp', 5, 'domain'), ('cuda-fortran', 6, 'name'),
        ('julia', 7, 'name'), ('cupy-numba', 8, 'name'), ('triton', 9, 'name')
),
matched_names as (
    select d.l, d.kind, p.stack, p.priority
    from (select distinct l, kind from lowered) d
    join patterns p using (kind)
    where case p.stack || '/' || p.kind
        when 'pytorch/name' then regexp_matches(d.l, 'at::native|at::cuda|\bc10::|\baten::|triton_(poi|red|per|tem)_fused')
        when 'pytorch/domain' then regexp_matches(d.l, '^(pytorch|torch|aten)\b')
        when 'jax/name' then regexp_matches(d.l, '\bjax\b|\bxla\b|^(loop|input)_[a-z0-9_]*fusion(_[0-9]+)?$')
        when 'jax/domain' then regexp_matches(d.l, '^(xla|jax)\b')
        when 'tensorflow/name' then regexp_matches(d.l, 'tensorflow::|eigenmetakernel')
        when 'tensorflow/domain' then regexp_matches(d.l, '^tensorflow\b')
        when 'tensorrt/name' then regexp_matches(d.l, 'genericreformat::|__myl_|\btrt_|nvinfer1?::|tensorrt')
        when 'tensorrt/domain' then regexp_matches(d.l, '^tensorrt\b')
        when 'openacc-openmp/name' then regexp_matches(d.l, '^nvkernel_.*_f[0-9]+l[0-9]+|__pgi_uacc|__omp_offloading|_[0-9]+_gpu(__red)?$')
        when 'openacc-openmp/domain' then regexp_matches(d.l, '^(openacc|openmp)\b')
        when 'cuda-fortran/name' then regexp_matches(d.l, '^pgf90_|^[a-z][a-z0-9]*_[a-z0-9_]+_$')
        when 'julia/name' then regexp_matches(d.l, '^(_z[0-9]+)?julia_')
        when 'cupy-numba/name' then regexp_matches(d.l, '^cupy_|cudapy|\bnumba\b')
        when 'triton/name' then regexp_matches(d.l, 'triton')
        else false end
),
matched as (
    select n.capture_id, m.stack, m.priority, n.source, n.name
    from lowered n
    join matched_names m on m.l = n.l and m.kind = n.kind
)
select
    capture_id,                     -- captures.capture_id
    stack,                          -- pytorch | jax | tensorflow | tensorrt | openacc-openmp | cuda-fortran | julia | cupy-numba | triton
    min(priority) as priority,      -- 1 = most specific: when a capture shows several stacks, the lowest wins
    source,                         -- 'kernel name', 'Nsight Compute kernel name' or 'NVTX domain'
    count(*) as names,              -- how many distinct names of that source match
    min(name) as example            -- one matching name (the first in sort order)
from matched
group by capture_id, stack, source;

-- One row per capture: the programming stack its advice is written for, and the evidence. The stack with the
-- lowest priority among those with evidence wins (PyTorch programs also launch Triton and TensorRT kernels, not
-- the other way round). With no evidence a capture that ran kernels is plain CUDA C/C++ ('cuda-cpp') and one
-- that ran none is 'unknown' (its advice is the rules' general text).
create or replace view capture_program as
with ranked as (
    select capture_id, stack, min(priority) as priority,
           string_agg(source || ' ''' || left(example, 80) || '''' || case when names > 1 then ' (+' || (names - 1) || ' more)' else '' end, ', '
                      order by source) as evidence
    from program_evidence
    group by capture_id, stack
),
chosen as (
    -- per capture, in one pass: the stack with the lowest priority (ties: by name), and every stack seen
    select capture_id,
           arg_min(stack, struct_pack(p := priority, s := stack)) as stack,
           list(stack order by priority, stack) as stacks_seen,
           arg_min(evidence, struct_pack(p := priority, s := stack)) as evidence
    from ranked
    group by capture_id
),
ran_kernels as (
    select capture_id from kernel_names group by capture_id
    union
    select capture_id from ncu_kernels group by capture_id
)
select
    c.capture_id,                   -- captures.capture_id
    coalesce(
        p.stack,
        case when c.capture_id in (select capture_id from ran_kernels) then 'cuda-cpp' else 'unknown' end
    ) as stack,                     -- the stack advice is written for: one of program_evidence.stack, 'cuda-cpp' or 'unknown'
    coalesce(p.stacks_seen, []::varchar[]) as stacks_seen,  -- every stack with evidence, most specific first
    coalesce(
        p.evidence,
        case when c.capture_id in (select capture_id from ran_kernels)
             then 'no framework, compiler or library kernel names: plain CUDA C/C++ assumed'
             else 'no kernels and no NVTX domains to judge by' end
    ) as evidence                   -- the names that decided it, e.g. "kernel name 'void at::native::...' (+41 more)"
from captures c
left join chosen p on p.capture_id = c.capture_id
order by c.capture_id;

-- One row per GPU of a capture: compute capability and what it supports, with the peak numbers advice and impact
-- estimates use. Tensor cores and their precisions by compute capability (CUDA C++ Programming Guide, warp matrix
-- functions, and the architecture whitepapers): 7.0/7.2 (Volta, Xavier) FP16, 7.5 (Turing) FP16, INT8, INT4,
-- 8.x (Ampere) adds TF32 and BF16, and 8.0 FP64 (DMMA), 8.9 (Ada) and 9.0 (Hopper) add FP8, 9.0 keeps FP64,
-- 10.x and 12.x (Blackwell) add FP6 and FP4, 10.0 keeps FP64. Before 7.0 there are no tensor cores.
create or replace view gpu_capabilities as
with g as (
    select
        capture_id, device_id, name, sm_count, compute_capability,
        coalesce(cc_major, try_cast(split_part(compute_capability, '.', 1) as integer)) as cc_major,
        coalesce(cc_minor, try_cast(split_part(compute_capability, '.', 2) as integer)) as cc_minor,
        memory_bandwidth_bytes_per_s
    from gpus
),
caps as (
    select
        g.*,
        list_filter([
            case when cc_major >= 7 then 'tensor-cores' end,
            case when cc_major >= 7 then 'fp16-tensor' end,
            case when (cc_major = 7 and cc_minor >= 5) or cc_major >= 8 then 'int8-tensor' end,
            case when (cc_major = 7 and cc_minor >= 5) or cc_major = 8 then 'int4-tensor' end,
            case when cc_major >= 8 then 'tf32' end,
            case when cc_major >= 8 then 'bf16' end,
            case when (cc_major = 8 and cc_minor = 9) or cc_major >= 9 then 'fp8' end,
            case when cc_major >= 10 then 'fp6' end,
            case when cc_major >= 10 then 'fp4' end,
            case when (cc_major, cc_minor) in ((8, 0), (9, 0), (10, 0)) then 'fp64-tensor' end
        ], x -> x is not null) as capabilities
    from g
)
select
    capture_id,                     -- captures.capture_id
    device_id,                      -- gpus.device_id
    name,                           -- GPU name as recorded
    compute_capability,             -- 'major.minor', NULL when the capture does not say
    cc_major,                       -- compute capability major version
    cc_minor,                       -- compute capability minor version
    sm_count,                       -- streaming multiprocessors
    memory_bandwidth_bytes_per_s as dram_peak_bytes_per_s,  -- peak DRAM bandwidth, bytes/s (export, else built-in table)
    case when cc_major is null then null else list_contains(capabilities, 'tensor-cores') end as tensor_cores,  -- has tensor cores, NULL when the CC is unknown
    array_to_string(list_transform(list_filter(capabilities, x -> x like '%-tensor' or x in ('tf32', 'bf16', 'fp8', 'fp6', 'fp4')),
                                   x -> upper(replace(x, '-tensor', ''))), '/') as tensor_core_precisions,  -- e.g. 'FP16/INT8/INT4', '' without tensor cores
    case when cc_major is null then []::varchar[] else capabilities end as capabilities  -- the tags fix clauses may require (engine/advice.py CAPABILITIES), empty when the CC is unknown
from caps;
