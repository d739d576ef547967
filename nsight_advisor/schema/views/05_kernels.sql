-- kernels: one row per kernel execution, with its names. The rows live in kernel_rows with names as ids into
-- kernel_names (each name stored once per capture: writing ~400 characters of names for every launch was a
-- third of an nsys ingest's kernel step). The name is the demangled one, else the short one, as nsys prints.
-- Columns and their meaning: nsight_advisor/schema/tables.py, table "kernels".

-- kernel_name_sets: one row per capture and combination of name ids its kernel rows use (name, short name,
-- mangled name), with the three names. A capture launches a few hundred such combinations, millions of times:
-- kernels joins its rows with them once, on the ids, where it joined kernel_names three times (each join probed
-- every row; DuckDB keeps a LEFT JOIN whose columns a query does not read). The analysis materializes it once
-- (nsight_advisor.analysis.accounting), so its rules' reads of kernels and kernel_classes join a table of a few
-- hundred rows (the 1M-kernel export: seven kernel rules 0.85 -> 0.65 CPU-seconds; docs/performance.md,
-- "Twenty-fourth pass").
create or replace view kernel_name_sets as
select r.capture_id, r.name_id, r.short_name_id, r.mangled_name_id,
       coalesce(n.name, s.name) as name, s.name as short_name, m.name as mangled_name
from (select distinct capture_id, name_id, short_name_id, mangled_name_id from kernel_rows) r
left join kernel_names n on n.capture_id = r.capture_id and n.name_id = r.name_id
left join kernel_names s on s.capture_id = r.capture_id and s.name_id = r.short_name_id
left join kernel_names m on m.capture_id = r.capture_id and m.name_id = r.mangled_name_id;

create or replace view kernels as
select r.capture_id, r.device_id, r.context_id, r.stream_id, r.pid, r.tid, r.correlation_id,
       r.start_ns, r.end_ns, r.duration_ns,
       n.name, n.short_name, n.mangled_name,
       r.grid_x, r.grid_y, r.grid_z, r.block_x, r.block_y, r.block_z, r.blocks, r.threads_per_block,
       r.registers_per_thread, r.static_shared_mem_bytes, r.dynamic_shared_mem_bytes, r.shared_mem_bytes,
       r.local_mem_per_thread_bytes, t.launch_type, r.graph_node_id, r.graph_id
from kernel_rows r
left join kernel_name_sets n
    on n.capture_id = r.capture_id and n.name_id is not distinct from r.name_id
   and n.short_name_id is not distinct from r.short_name_id and n.mangled_name_id is not distinct from r.mangled_name_id
-- the launch type's label, as the names, from a table of a few rows: a text column written for every launch cost
-- the 1M-kernel export's ingest 0.2 CPU-s, this join about 0.01 per read of a million launches
left join kernel_launch_types t on t.capture_id = r.capture_id and t.launch_type_id = r.launch_type_id;
