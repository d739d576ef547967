-- nvtx_ranges: NVTX ranges and marks with their domain's name. The rows live in nvtx_rows with the domain as an
-- id, the names of created domains in nvtx_domains (writing 'Default' as text on each of 5M ranges cost a CPU-second).
-- Columns and their meaning: nsight_advisor/schema/tables.py, table "nvtx_ranges".
CREATE OR REPLACE VIEW nvtx_ranges AS
SELECT r.capture_id, r.pid, r.tid,
       coalesce(d.name, CASE WHEN r.domain_id = 0 THEN 'Default' ELSE 'domain ' || r.domain_id END) AS domain,
       r.text, r.event_type, r.start_ns, r.end_ns, r.duration_ns, r.depth, r.category
FROM nvtx_rows r
LEFT JOIN nvtx_domains d ON d.capture_id = r.capture_id AND d.domain_id = r.domain_id;
