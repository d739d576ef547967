-- What limits a profiled kernel below the roofline: issue slots, warp stalls, divergence, access pattern, bank
-- conflicts and local memory, per Nsight Compute kernel. The rules latency-bound, uncoalesced-access,
-- thread-divergence, shared-bank-conflicts and local-memory-spills read these views. Every column is NULL when the
-- report lacks its metric (the section that collects it is named in the column's comment).
-- No semicolons inside this file except between statements (the loader splits on them).

-- Warp-stall reasons per kernel, one row per (kernel, reason): how many warps were stalled for that reason per
-- issued instruction (WarpStateStats: smsp__average_warps_issue_stalled_<reason>_per_issue_active.ratio), and its
-- share of all the warp cycles per issued instruction, the way Nsight Compute's CPIStall rule weighs them. Reports
-- with only PC sampling (SourceCounters: smsp__pcsamp_warps_issue_stalled_<reason>) give the share of the samples.
-- 'selected' (the warp issuing) is not a stall and is left out.
create or replace view ncu_warp_stalls as
with ratio as (
    select capture_id, kernel_id,
           regexp_extract(metric, '^smsp__average_warps_issue_stalled_(.*)_per_issue_active\.ratio$', 1) as reason,
           value
    from ncu_metrics
    where metric like 'smsp\_\_average\_warps\_issue\_stalled\_%\_per\_issue\_active.ratio' escape '\'
      and isfinite(value)
),
latency as (
    select capture_id, kernel_id, max(value) as warp_cycles_per_issue
    from ncu_metrics
    where metric = 'smsp__average_warp_latency_per_inst_issued.ratio' and isfinite(value)
    group by capture_id, kernel_id
),
from_ratio as (
    select r.capture_id, r.kernel_id, r.reason, r.value as warps_per_issue,
           100.0 * r.value / nullif(coalesce(l.warp_cycles_per_issue,
                                             sum(r.value) over (partition by r.capture_id, r.kernel_id)), 0) as share_pct,
           'warp state' as source
    from ratio r
    left join latency l using (capture_id, kernel_id)
    where r.reason <> 'selected'
),
samples as (
    select capture_id, kernel_id,
           regexp_extract(metric, '^smsp__pcsamp_warps_issue_stalled_(.*)$', 1) as reason,
           value
    from ncu_metrics
    where metric like 'smsp\_\_pcsamp\_warps\_issue\_stalled\_%' escape '\'
      and metric not like '%\_not\_issued' escape '\'
      and isfinite(value)
),
from_samples as (
    select s.capture_id, s.kernel_id, s.reason, null::double as warps_per_issue,
           100.0 * s.value / nullif(sum(s.value) over (partition by s.capture_id, s.kernel_id), 0) as share_pct,
           'pc sampling' as source
    from samples s
    where s.reason not in ('selected')
      and not exists (select 1 from ratio r where r.capture_id = s.capture_id and r.kernel_id = s.kernel_id)
)
select
    capture_id,                     -- captures.capture_id
    kernel_id,                      -- ncu_kernels.kernel_id
    reason,                         -- stall reason as Nsight Compute spells it: long_scoreboard, barrier, wait, ...
    warps_per_issue,                -- warps stalled for it per issued instruction (NULL from PC sampling)
    share_pct,                      -- its share of the warp cycles per issued instruction (or of the samples), %
    source                          -- 'warp state' (WarpStateStats ratios) or 'pc sampling' (SourceCounters samples)
from from_ratio
union all
select capture_id, kernel_id, reason, warps_per_issue, share_pct, source from from_samples;

-- One row per Nsight Compute kernel with the efficiency metrics, pivoted, in base units.
create or replace view ncu_kernel_efficiency as
with m as (
    select capture_id, kernel_id, metric, value from ncu_metrics where isfinite(value)
),
p as (
    select
        capture_id, kernel_id,
        max(value) filter (where metric = 'sm__throughput.avg.pct_of_peak_sustained_elapsed') as sm_pct,
        max(value) filter (where metric = 'gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed') as mem_pct,
        max(value) filter (where metric in ('gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed',
                                            'dram__throughput.avg.pct_of_peak_sustained_elapsed')) as dram_pct,
        max(value) filter (where metric = 'l1tex__throughput.avg.pct_of_peak_sustained_active') as l1_pct,
        max(value) filter (where metric = 'lts__throughput.avg.pct_of_peak_sustained_elapsed') as l2_pct,
        max(value) filter (where metric = 'launch__waves_per_multiprocessor') as waves_per_sm,
        max(value) filter (where metric = 'smsp__issue_active.avg.pct_of_peak_sustained_active') as smsp_issue_pct,
        max(value) filter (where metric = 'sm__issue_active.avg.pct_of_peak_sustained_elapsed') as sm_issue_pct,
        max(value) filter (where metric = 'smsp__warps_active.avg.per_cycle_active') as active_warps,
        max(value) filter (where metric = 'smsp__warps_eligible.avg.per_cycle_active') as eligible_warps,
        max(value) filter (where metric = 'sm__warps_active.avg.pct_of_peak_sustained_active') as achieved_occupancy_pct,
        max(value) filter (where metric = 'sm__maximum_warps_per_active_cycle_pct') as theoretical_occupancy_pct,
        max(value) filter (where metric = 'smsp__average_warp_latency_per_inst_issued.ratio') as warp_cycles_per_issue,
        max(value) filter (where metric = 'smsp__thread_inst_executed_per_inst_executed.ratio') as threads_active,
        max(value) filter (where metric = 'smsp__thread_inst_executed_pred_on_per_inst_executed.ratio') as threads_pred_on,
        max(value) filter (where metric = 'l1tex__data_pipe_lsu_wavefronts.avg.pct_of_peak_sustained_elapsed') as l1_wavefronts_pct,
        max(value) filter (where metric = 'l1tex__lsuin_requests.avg.pct_of_peak_sustained_elapsed') as l1_requests_pct,
        max(value) filter (where metric = 'l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum') as global_ld_sectors,
        max(value) filter (where metric = 'l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum') as global_ld_requests,
        max(value) filter (where metric = 'l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum') as global_st_sectors,
        max(value) filter (where metric = 'l1tex__t_requests_pipe_lsu_mem_global_op_st.sum') as global_st_requests,
        max(value) filter (where metric = 'memory_l2_theoretical_sectors_global') as l2_sectors_global,
        max(value) filter (where metric = 'memory_l2_theoretical_sectors_global_ideal') as l2_sectors_global_ideal,
        max(value) filter (where metric = 'l1tex__data_pipe_lsu_wavefronts_mem_shared.sum') as shared_wavefronts,
        max(value) filter (where metric = 'l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum') as shared_bank_conflicts,
        max(value) filter (where metric = 'l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum') as local_ld_sectors,
        max(value) filter (where metric = 'l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum') as local_st_sectors,
        max(value) filter (where metric = 'sass__inst_executed_local_loads') as local_loads,
        max(value) filter (where metric = 'sass__inst_executed_local_stores') as local_stores,
        max(value) filter (where metric = 'smsp__inst_executed.sum') as inst_executed
    from m
    group by capture_id, kernel_id
),
verdicts as (
    -- Nsight Compute's own stored verdicts (warnings and optimizations with a message), e.g.
    -- 'SOLBottleneck "Latency Issue" | AchievedOccupancy est. 12%'
    select capture_id, kernel_id,
           string_agg(distinct rule_id || coalesce(' "' || nullif(title, '') || '"', '')
                      || coalesce(' est. ' || cast(round(estimated_speedup_pct) as integer) || '%', ''), ' | '
                      order by rule_id || coalesce(' "' || nullif(title, '') || '"', '')
                      || coalesce(' est. ' || cast(round(estimated_speedup_pct) as integer) || '%', '')) as ncu_verdicts
    from ncu_rule_results
    where result_type in ('warning', 'optimization', 'error') and coalesce(message, '') <> ''
    group by capture_id, kernel_id
),
stalls as (
    select capture_id, kernel_id,
           string_agg(reason || ' ' || cast(round(share_pct) as integer) || '%', ', ' order by share_pct desc)
               filter (where rn <= 3) as top_stalls,
           max(reason) filter (where rn = 1) as top_stall,
           max(share_pct) filter (where rn = 1) as top_stall_pct
    from (select *, row_number() over (partition by capture_id, kernel_id order by share_pct desc nulls last) as rn
          from ncu_warp_stalls where share_pct > 0)
    group by capture_id, kernel_id
)
select
    k.capture_id,                   -- captures.capture_id
    k.kernel_id,                    -- ncu_kernels.kernel_id
    k.name,                         -- demangled kernel name
    k.short_name,                   -- base function name
    k.duration_ns,                  -- gpu__time_duration.sum, ns
    p.sm_pct,                       -- Compute (SM) throughput, % of peak (SpeedOfLight)
    p.mem_pct,                      -- Memory throughput, % of peak: the busiest of DRAM, L1, L2 (SpeedOfLight)
    p.dram_pct,                     -- DRAM throughput, % of peak (SpeedOfLight)
    p.l1_pct,                       -- L1/TEX cache throughput, % of peak over active cycles (SpeedOfLight)
    p.l2_pct,                       -- L2 cache throughput, % of peak (SpeedOfLight)
    greatest(p.sm_pct, p.mem_pct) as max_throughput_pct,  -- the busier of SM and memory, % of peak
    p.waves_per_sm,                 -- launch__waves_per_multiprocessor (LaunchStats)
    coalesce(p.smsp_issue_pct, p.sm_issue_pct) as issue_active_pct,  -- cycles a scheduler issued an instruction, % (SchedulerStats, else SpeedOfLight breakdown)
    p.active_warps,                 -- warps resident per scheduler per active cycle (SchedulerStats)
    p.eligible_warps,               -- warps ready to issue per scheduler per active cycle (SchedulerStats)
    p.achieved_occupancy_pct,       -- achieved warps / max warps per SM, % (Occupancy)
    p.theoretical_occupancy_pct,    -- occupancy the launch configuration allows, % (Occupancy)
    p.warp_cycles_per_issue,        -- cycles between two instructions of one warp: the latency each warp sees (WarpStateStats)
    s.top_stalls,                   -- the three largest stall reasons with their share, e.g. 'long_scoreboard 56%, wait 12%'
    s.top_stall,                    -- the largest stall reason
    s.top_stall_pct,                -- its share of the warp cycles per issued instruction, %
    p.threads_active,               -- threads active per executed warp instruction, of 32 (WarpStateStats)
    p.threads_pred_on,              -- threads not predicated off per executed warp instruction, of 32 (WarpStateStats)
    p.l1_wavefronts_pct / nullif(p.l1_requests_pct, 0) as l1_wavefronts_per_request,  -- L1 data-pipe wavefronts per LSU request, relative (both % of their peaks, SpeedOfLight breakdown): about 1 when warps access contiguous memory
    p.global_ld_sectors / nullif(p.global_ld_requests, 0) as global_ld_sectors_per_request,  -- 32-byte sectors per global load request: 4 for contiguous 4-byte accesses, up to 32 (MemoryWorkloadAnalysis_Tables)
    p.global_st_sectors / nullif(p.global_st_requests, 0) as global_st_sectors_per_request,  -- the same for global stores
    100.0 * (p.l2_sectors_global - p.l2_sectors_global_ideal) / nullif(p.l2_sectors_global, 0) as excess_sectors_pct,  -- global sectors beyond what perfectly coalesced accesses would move, % of all (SourceCounters)
    100.0 * p.shared_bank_conflicts / nullif(p.shared_wavefronts, 0) as bank_conflict_pct,  -- shared-memory wavefronts caused by bank conflicts, % of all shared wavefronts (MemoryWorkloadAnalysis_Tables)
    coalesce(p.local_ld_sectors, 0) + coalesce(p.local_st_sectors, 0) as local_sectors,  -- local-memory (register spill, stack) sectors through L1 (MemoryWorkloadAnalysis_Tables)
    100.0 * (coalesce(p.local_loads, 0) + coalesce(p.local_stores, 0)) / nullif(p.inst_executed, 0) as local_inst_pct,  -- local loads and stores, % of executed warp instructions (SourceCounters)
    100.0 * (coalesce(p.local_ld_sectors, 0) + coalesce(p.local_st_sectors, 0))
        / nullif(coalesce(p.local_ld_sectors, 0) + coalesce(p.local_st_sectors, 0) + coalesce(p.global_ld_sectors, 0)
                 + coalesce(p.global_st_sectors, 0), 0) as local_traffic_pct,  -- local sectors, % of the LSU's local + global sectors through L1: the share of the kernel's memory traffic that spills and stack arrays cause (MemoryWorkloadAnalysis_Tables)
    v.ncu_verdicts                  -- Nsight Compute's stored warnings and optimizations for the kernel (rule id, title, estimated speedup), NULL when none
from ncu_kernels k
left join p using (capture_id, kernel_id)
left join stalls s using (capture_id, kernel_id)
left join verdicts v using (capture_id, kernel_id);
