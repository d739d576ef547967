-- Profiled kernels that move more sectors or wavefronts than their accesses need, from the best evidence present:
-- Nsight Compute's own excess-sector count, else sectors per global load request, else L1 wavefronts per request.
with k as (
    select
        e.*,
        c.class_basis,
        case
            when e.excess_sectors_pct is not null then e.excess_sectors_pct
            when e.global_ld_sectors_per_request is not null then 100.0 * (1 - 4.0 / e.global_ld_sectors_per_request)
            when e.l1_wavefronts_per_request > $min_wavefronts_per_request
                then 100.0 * (1 - $min_wavefronts_per_request / e.l1_wavefronts_per_request)
            else 0
        end as excess,
        case
            when e.excess_sectors_pct is not null then 'excess global sectors (SourceCounters)'
            when e.global_ld_sectors_per_request is not null
                then round(e.global_ld_sectors_per_request, 1) || ' sectors per global load request (4 if coalesced)'
            when e.l1_wavefronts_per_request is not null
                then round(e.l1_wavefronts_per_request, 1) || ' L1 wavefronts per request (at most '
                     || $min_wavefronts_per_request || ' if coalesced)'
        end as basis
    from ncu_kernel_efficiency e
    left join ncu_kernel_classes c using (capture_id, kernel_id)
    where e.capture_id = $capture_id and isfinite(e.duration_ns)
)
select
    coalesce(short_name, name) as short_name,
    count(*) as launches,
    round(greatest(max(excess), 0), 1) as excess_pct,
    any_value(basis) as basis,
    round(max(mem_pct), 1) as mem_pct,
    round(max(l1_pct), 1) as l1_pct,
    round(max(dram_pct), 1) as dram_pct,
    round(max(sm_pct), 1) as sm_pct,
    any_value(class_basis) as class_basis,
    coalesce(any_value(k.ncu_verdicts), 'none stored') as ncu_verdicts,
    case
        when any_value(k.ncu_verdicts) is null then 'no verdicts stored'
        when regexp_matches(any_value(k.ncu_verdicts), 'UncoalescedGlobalAccess|Access Pattern|MemoryCacheAccessPattern') then 'agrees'
        else 'states no such verdict'
    end as ncu_agreement,
    cast(sum(duration_ns) as bigint) as duration_ns,
    cast(sum(duration_ns * greatest(excess, 0) / 100.0 * coalesce(mem_pct, 0) / 100.0) as bigint) as impact_ns,
    name
from k
group by name, short_name
