-- nvtx_ranges: NVTX ranges and marks with their domain's name. The rows live in nvtx_rows with the domain as an
-- id, the names of created domains in nvtx_domains (writing 'Default' as text on each of 5M ranges cost a CPU-second).
-- Columns and their meaning: nsight_advisor/schema/tables.py, table "nvtx_ranges".
create or replace view nvtx_ranges as
select r.capture_id, r.pid, r.tid,
       coalesce(d.name, case when r.domain_id = 0 then 'Default' else 'domain ' || r.domain_id end) as domain,
       r.text, r.event_type, r.start_ns, r.end_ns, r.duration_ns, r.depth, r.category
from nvtx_rows r
left join nvtx_domains d on d.capture_id = r.capture_id and d.domain_id = r.domain_id;
