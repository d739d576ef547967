-- api_calls: one row per CUDA runtime or driver call, with its name. The rows live in api_call_rows with the name
-- (and its base name) as an id into api_names, each stored once per capture: the two text columns written on
-- every call of the 1M-kernel export (1.7M calls) cost its ingest 0.4 CPU-seconds.
-- Columns and their meaning: nsight_advisor/schema/tables.py, table "api_calls".
create or replace view api_calls as
select r.capture_id, r.pid, r.tid, r.correlation_id, n.name, n.base_name, r.kind, r.start_ns, r.end_ns,
       r.duration_ns, r.return_value
from api_call_rows r
left join api_names n on n.capture_id = r.capture_id and n.name_id = r.name_id;
