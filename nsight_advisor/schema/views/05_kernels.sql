-- kernels: one row per kernel execution, with its names. The rows live in kernel_rows with names as ids into
-- kernel_names (each name stored once per capture: writing ~400 characters of names for every launch was a
-- third of an nsys ingest's kernel step). The name is the demangled one, else the short one, as nsys prints.
-- Columns and their meaning: nsight_advisor/schema/tables.py, table "kernels".
CREATE OR REPLACE VIEW kernels AS
SELECT r.capture_id, r.device_id, r.context_id, r.stream_id, r.pid, r.tid, r.correlation_id,
       r.start_ns, r.end_ns, r.duration_ns,
       coalesce(n.name, s.name) AS name, s.name AS short_name, m.name AS mangled_name,
       r.grid_x, r.grid_y, r.grid_z, r.block_x, r.block_y, r.block_z, r.blocks, r.threads_per_block,
       r.registers_per_thread, r.static_shared_mem_bytes, r.dynamic_shared_mem_bytes, r.shared_mem_bytes,
       r.local_mem_per_thread_bytes, r.launch_type, r.graph_node_id, r.graph_id
FROM kernel_rows r
LEFT JOIN kernel_names n ON n.capture_id = r.capture_id AND n.name_id = r.name_id
LEFT JOIN kernel_names s ON s.capture_id = r.capture_id AND s.name_id = r.short_name_id
LEFT JOIN kernel_names m ON m.capture_id = r.capture_id AND m.name_id = r.mangled_name_id;
