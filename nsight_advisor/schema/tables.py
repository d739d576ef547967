"""Table definitions of the normalized trace store.

Conventions (they hold for every table):

* Times are integer nanoseconds on the capture's own timeline (``*_ns``); sizes are bytes (``*_bytes``);
  rates are per second (``*_per_s``); percentages are 0..100 (``*_pct``).
* Every row carries ``capture_id``; one store can hold many captures.
* Strings are resolved (no string ids) and enum codes are labelled (lowercase words, see each column).
* A column the export did not record is NULL, never a made-up default.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nsight_advisor.schema.columns import (  # noqa: F401 - Column: part of this module's API
    CAPTURE_ID, DEVICE_ID, TIMES, Column, Table, cols, ids_for_text,
)
from nsight_advisor.schema.tables_host import HOST_TABLES
from nsight_advisor.schema.tables_ncu import NCU_TABLES

if TYPE_CHECKING:  # the rule loader reads table names without loading duckdb (fast warm `analyze`)
    import duckdb



_KERNELS = Table(
    "kernels",
    "One row per kernel execution on a GPU (Nsight Systems CUPTI_ACTIVITY_KIND_KERNEL). A view: kernel_rows "
    "with its names from kernel_names and its launch type from kernel_launch_types; write rows with "
    "nsight_advisor.store.database.insert_kernels.",
    cols(
        CAPTURE_ID,
        DEVICE_ID,
        ("context_id", "INTEGER", "CUDA context."),
        ("stream_id", "INTEGER", "CUDA stream."),
        ("pid", "BIGINT", "Process id, decoded from globalPid."),
        ("tid", "BIGINT", "Thread that launched it (from the launching API call with the same correlation id), or NULL."),
        ("correlation_id", "BIGINT", "Links to api_calls.correlation_id of the launching call (same pid)."),
        *TIMES,
        ("name", "VARCHAR", "Demangled name exactly as `nsys stats` prints it by default."),
        ("short_name", "VARCHAR", "Base function name without templates or arguments."),
        ("mangled_name", "VARCHAR", "Mangled name when the export has it, else NULL."),
        ("grid_x", "INTEGER", "Grid size in blocks, x."),
        ("grid_y", "INTEGER", "Grid size in blocks, y."),
        ("grid_z", "INTEGER", "Grid size in blocks, z."),
        ("block_x", "INTEGER", "Block size in threads, x."),
        ("block_y", "INTEGER", "Block size in threads, y."),
        ("block_z", "INTEGER", "Block size in threads, z."),
        ("blocks", "BIGINT", "grid_x * grid_y * grid_z."),
        ("threads_per_block", "INTEGER", "block_x * block_y * block_z."),
        ("registers_per_thread", "INTEGER", "Registers per thread."),
        ("static_shared_mem_bytes", "BIGINT", "Static shared memory per block, bytes."),
        ("dynamic_shared_mem_bytes", "BIGINT", "Dynamic shared memory per block, bytes."),
        ("shared_mem_bytes", "BIGINT", "Static + dynamic shared memory per block, bytes."),
        ("local_mem_per_thread_bytes", "BIGINT", "Local memory per thread, bytes (non-zero often means register spills)."),
        ("launch_type", "VARCHAR", "Launch type label (regular, cooperative_single_device, ...), or NULL."),
        ("graph_node_id", "BIGINT", "CUDA graph node that launched it, or NULL."),
        ("graph_id", "BIGINT", "CUDA graph id when recorded, or NULL."),
    ),
    rows_in="kernel_rows",
)


_API_CALLS = Table(
    "api_calls",
    "Host-side CUDA runtime and driver API calls (Nsight Systems CUPTI_ACTIVITY_KIND_RUNTIME). A view: "
    "api_call_rows with its names from api_names; write rows with nsight_advisor.store.database.insert_api_calls.",
    cols(
        CAPTURE_ID,
        ("pid", "BIGINT", "Process id, decoded from globalTid."),
        ("tid", "BIGINT", "Thread id, decoded from globalTid."),
        ("correlation_id", "BIGINT", "Links to the GPU rows this call produced (same pid)."),
        ("name", "VARCHAR", "Function name as recorded, with its version suffix (cudaLaunchKernel_v7000)."),
        ("base_name", "VARCHAR", "name without the _vNNNN version suffix (cudaLaunchKernel)."),
        ("kind", "ENUM('runtime', 'driver')", "runtime or driver (an ENUM, like nvtx_ranges.event_type), or NULL."),
        *TIMES,
        ("return_value", "BIGINT", "cudaError_t / CUresult returned, or NULL."),
    ),
    rows_in="api_call_rows",
)


_NVTX_RANGES = Table(
    "nvtx_ranges",
    "NVTX ranges and marks (NVTX_EVENTS), with text resolved and nesting depth computed. A view: nvtx_rows "
    "with its domain names from nvtx_domains; write rows with nsight_advisor.store.database.insert_nvtx_ranges.",
    cols(
        CAPTURE_ID,
        ("pid", "BIGINT", "Process id, decoded from globalTid."),
        ("tid", "BIGINT", "Thread that opened the range."),
        ("domain", "VARCHAR", "NVTX domain name; 'Default' for the unnamed domain."),
        ("text", "VARCHAR", "Range or mark text."),
        # An ENUM (the values compare and print as text): a closed vocabulary, stored as one byte per row and
        # far cheaper to write than VARCHAR (docs/performance.md, "Measurements behind the code").
        ("event_type", "ENUM('push_pop', 'start_end', 'mark')", "push_pop, start_end or mark (an ENUM: compare with text)."),
        ("start_ns", "BIGINT", "Start, ns."),
        ("end_ns", "BIGINT", "End, ns; equal to start_ns for marks."),
        ("duration_ns", "BIGINT", "end_ns - start_ns, ns."),
        ("depth", "INTEGER", "Nesting depth of push/pop ranges on their thread (0 = outermost); NULL for others."),
        ("category", "INTEGER", "User category number, or NULL."),
    ),
    rows_in="nvtx_rows",
)


TABLES: tuple[Table, ...] = (
    Table(
        "captures",
        "One row per ingested capture file.",
        cols(
            CAPTURE_ID,
            ("source_path", "VARCHAR", "Absolute path of the capture as given to ingest."),
            ("source_name", "VARCHAR", "File name of the capture, without folders."),
            ("source_size_bytes", "BIGINT", "Size of the capture file, bytes."),
            ("source_mtime_ns", "BIGINT", "Modification time of the capture file, ns since the Unix epoch."),
            ("format", "VARCHAR", "Input format: nsys-sqlite, nsys-rep, ncu-rep, ncu-csv, kineto-json."),
            ("tool", "VARCHAR", "Profiler that produced it: nsys, ncu or kineto (the PyTorch profiler)."),
            ("tool_version", "VARCHAR", "Profiler version as recorded in the export, or 'unknown'."),
            ("export_schema_version", "VARCHAR", "The export's own schema version (nsys EXPORT_SCHEMA_VERSION, Kineto schemaVersion), or NULL."),
            ("start_ns", "BIGINT", "Earliest recorded event, ns on the capture's timeline."),
            ("end_ns", "BIGINT", "Latest recorded event end, ns on the capture's timeline."),
            ("duration_ns", "BIGINT", "Wall time covered by the capture's events (end_ns - start_ns), ns; for ncu captures the sum of the profiled kernels' durations."),
            ("ingested_at", "TIMESTAMP", "When nsight-advisor ingested it (UTC)."),
        ),
    ),
    Table(
        "capture_missing",
        "What a capture does not contain, and which profiler option would have recorded it.",
        cols(
            CAPTURE_ID,
            ("data", "VARCHAR", "Normalized table or data kind that is empty because the capture lacks it (e.g. kernels)."),
            ("reason", "VARCHAR", "Why it is missing, in words (e.g. 'no CUPTI_ACTIVITY_KIND_KERNEL table')."),
            ("capture_option", "VARCHAR", "The profiler option that records it (e.g. 'nsys profile --trace=cuda')."),
        ),
    ),
    Table(
        "capture_deferred",
        "Tables a capture's ingest left out because nothing in that run reads them (analyze's cached store loads "
        "only what its rules read); any command that needs them rebuilds the store in full.",
        cols(
            CAPTURE_ID,
            ("data", "VARCHAR", "Normalized table left empty for this capture (e.g. nvtx_ranges)."),
            ("export_rows", "BIGINT", "Rows of the export table it would be read from (e.g. NVTX_EVENTS), or NULL."),
        ),
    ),
    Table(
        "ingest_notes",
        "Rows an ingest dropped or repaired, and why (e.g. end < start). Reports show these.",
        cols(
            CAPTURE_ID,
            ("data", "VARCHAR", "Normalized table the note is about."),
            ("rows", "BIGINT", "How many rows the note covers."),
            ("note", "VARCHAR", "What was done and why."),
        ),
    ),
    Table(
        "gpus",
        "One row per GPU a capture describes. Peak numbers come from a built-in table keyed by GPU name.",
        cols(
            CAPTURE_ID,
            DEVICE_ID,
            ("name", "VARCHAR", "Marketing name, e.g. 'NVIDIA A100-SXM4-40GB'."),
            ("chip_name", "VARCHAR", "Chip, e.g. GA100, when recorded."),
            ("sm_count", "INTEGER", "Streaming multiprocessors."),
            ("compute_capability", "VARCHAR", "Compute capability as 'major.minor', e.g. '8.0'."),
            ("cc_major", "INTEGER", "Compute capability major version."),
            ("cc_minor", "INTEGER", "Compute capability minor version."),
            ("total_memory_bytes", "BIGINT", "Device memory, bytes."),
            ("l2_cache_bytes", "BIGINT", "L2 cache size, bytes."),
            ("clock_rate_hz", "BIGINT", "SM clock rate as recorded, Hz."),
            ("memory_bandwidth_bytes_per_s", "DOUBLE", "Peak DRAM bandwidth, bytes/s (export's memoryBandwidth, else built-in table)."),
            ("max_warps_per_sm", "INTEGER", "Resident warps per SM at most."),
            ("max_blocks_per_sm", "INTEGER", "Resident blocks per SM at most."),
            ("max_threads_per_block", "INTEGER", "Threads per block at most."),
            ("max_registers_per_sm", "INTEGER", "32-bit registers per SM."),
            ("max_registers_per_block", "INTEGER", "32-bit registers per block at most."),
            ("max_shared_mem_per_sm_bytes", "BIGINT", "Shared memory per SM, bytes."),
            ("max_shared_mem_per_block_bytes", "BIGINT", "Shared memory per block (opt-in maximum when recorded), bytes."),
            ("threads_per_warp", "INTEGER", "Warp size (32 on every NVIDIA GPU so far)."),
            ("peak_fp32_flops_per_s", "DOUBLE", "Peak dense FP32 SIMT FLOP/s (built-in table; NULL for unknown GPUs)."),
            ("peak_fp16_tensor_flops_per_s", "DOUBLE", "Peak dense FP16/BF16 tensor-core FLOP/s, FP32 accumulate (built-in table)."),
            ("peak_tf32_tensor_flops_per_s", "DOUBLE", "Peak dense TF32 tensor-core FLOP/s (built-in table)."),
            ("peak_fp8_tensor_flops_per_s", "DOUBLE", "Peak dense FP8 tensor-core FLOP/s (built-in table; NULL before Hopper/Ada)."),
        ),
    ),
    _KERNELS,
    Table(
        "kernel_rows",
        # Names are stored once per capture, not per launch: three long names written for every launch dominate
        # the ingest's kernel step (docs/performance.md, "Measurements behind the code"). So is the launch type's
        # label: a text column written for a million launches cost the ingest 0.2 CPU-s ("Twenty-eighth pass").
        "What the kernels view is made of: one row per kernel execution, its names as ids into kernel_names, its "
        "launch type as an id into kernel_launch_types.",
        ids_for_text(_KERNELS.columns, {
            "name": ("name_id", "BIGINT", "kernel_names.name_id of the demangled name, or NULL."),
            "short_name": ("short_name_id", "BIGINT", "kernel_names.name_id of the short name, or NULL."),
            "mangled_name": ("mangled_name_id", "BIGINT", "kernel_names.name_id of the mangled name, or NULL."),
            "launch_type": ("launch_type_id", "BIGINT",
                            "kernel_launch_types.launch_type_id of the launch type label, or NULL."),
        }),
    ),
    Table(
        "kernel_launch_types",
        "The kernel launch type labels of each capture (kernel_rows refers to them by launch_type_id).",
        cols(
            CAPTURE_ID,
            ("launch_type_id", "BIGINT", "Id of the label within its capture (for nsys, the export's launch type code)."),
            ("launch_type", "VARCHAR", "The label (regular, cooperative_single_device, ...)."),
        ),
    ),
    Table(
        "kernel_names",
        "The kernel names of each capture, once each (kernel_rows refers to them by name_id).",
        cols(
            CAPTURE_ID,
            ("name_id", "BIGINT", "Id of the name within its capture (the export's string id for nsys)."),
            ("name", "VARCHAR", "The name."),
        ),
    ),
    Table(
        "kernel_name_sets",
        "A view: each capture's combinations of kernel name ids that its kernel_rows use, with their names (a "
        "capture launches a few hundred combinations millions of times; kernels and kernel_classes join each "
        "launch with its combination once, on the ids).",
        cols(
            CAPTURE_ID,
            ("name_id", "BIGINT", "kernel_rows.name_id."),
            ("short_name_id", "BIGINT", "kernel_rows.short_name_id."),
            ("mangled_name_id", "BIGINT", "kernel_rows.mangled_name_id."),
            ("name", "VARCHAR", "kernels.name: the demangled name, else the short one."),
            ("short_name", "VARCHAR", "kernels.short_name."),
            ("mangled_name", "VARCHAR", "kernels.mangled_name."),
        ),
        rows_in="kernel_rows",
    ),
    _API_CALLS,
    Table(
        "api_call_rows",
        # The names as ids: two text columns written on every call cost the 1M-kernel export's ingest 0.4 CPU-s
        # (docs/performance.md, "Twenty-first pass").
        "What the api_calls view is made of: one row per call, its name (with its base name) as an id into "
        "api_names.",
        tuple(c for c in ids_for_text(_API_CALLS.columns, {
            "name": ("name_id", "BIGINT", "api_names.name_id of the call's name and base name, or NULL."),
        }) if c.name != "base_name"),
    ),
    Table(
        "api_names",
        "The CUDA API call names of each capture, once each with their base name (api_call_rows refers to them "
        "by name_id).",
        cols(
            CAPTURE_ID,
            ("name_id", "BIGINT", "Id of the name within its capture (the export's string id for nsys)."),
            ("name", "VARCHAR", "api_calls.name."),
            ("base_name", "VARCHAR", "api_calls.base_name."),
        ),
    ),
    Table(
        "memcpys",
        "Memory copies executed by a GPU's copy engines (CUPTI_ACTIVITY_KIND_MEMCPY).",
        cols(
            CAPTURE_ID,
            DEVICE_ID,
            ("context_id", "INTEGER", "CUDA context."),
            ("stream_id", "INTEGER", "CUDA stream."),
            ("pid", "BIGINT", "Process id, decoded from globalPid."),
            ("correlation_id", "BIGINT", "Links to the api_calls row that issued it."),
            *TIMES,
            ("bytes", "BIGINT", "Bytes copied."),
            ("direction", "VARCHAR", "Copy direction as nsys stats labels it: Host-to-Device, Device-to-Host, Device-to-Device, Host-to-Host, Peer-to-Peer, Unified Host-to-Device, ..."),
            ("src_kind", "VARCHAR", "Source memory kind: pageable, pinned, device, array, managed, device_static, managed_static, unknown."),
            ("dst_kind", "VARCHAR", "Destination memory kind, same labels as src_kind."),
            ("migration_cause", "VARCHAR", "Unified-memory migration cause label, or NULL."),
        ),
    ),
    Table(
        "memsets",
        "Memory sets executed on a GPU (CUPTI_ACTIVITY_KIND_MEMSET).",
        cols(
            CAPTURE_ID,
            DEVICE_ID,
            ("context_id", "INTEGER", "CUDA context."),
            ("stream_id", "INTEGER", "CUDA stream."),
            ("pid", "BIGINT", "Process id, decoded from globalPid."),
            ("correlation_id", "BIGINT", "Links to the api_calls row that issued it."),
            *TIMES,
            ("bytes", "BIGINT", "Bytes set."),
            ("mem_kind", "VARCHAR", "Memory kind, labels as memcpys.src_kind."),
            ("value", "BIGINT", "Byte value written."),
        ),
    ),
    Table(
        "syncs",
        "Synchronization intervals recorded by CUPTI (CUPTI_ACTIVITY_KIND_SYNCHRONIZATION).",
        cols(
            CAPTURE_ID,
            DEVICE_ID,
            ("context_id", "INTEGER", "CUDA context."),
            ("stream_id", "INTEGER", "CUDA stream (for stream syncs)."),
            ("pid", "BIGINT", "Process id, decoded from globalPid."),
            ("correlation_id", "BIGINT", "Links to the synchronizing api_calls row."),
            ("sync_type", "VARCHAR", "event_synchronize, stream_wait_event, stream_synchronize, context_synchronize or unknown."),
            *TIMES,
            ("event_id", "BIGINT", "CUDA event the call synchronized on, or NULL."),
        ),
    ),
    _NVTX_RANGES,
    Table(
        "nvtx_rows",
        # The domain as an id: its name as text on every range is the costly part of writing ranges.
        "What the nvtx_ranges view is made of: one row per range or mark, its domain as an id into nvtx_domains.",
        ids_for_text(_NVTX_RANGES.columns, {
            "domain": ("domain_id", "BIGINT", "NVTX domain id (0: the unnamed domain); its name in nvtx_domains."),
        }),
    ),
    Table(
        "nvtx_domains",
        "Names of the NVTX domains a capture created (a domain without a row here is 'Default' for id 0, else "
        "'domain N').",
        cols(
            CAPTURE_ID,
            ("domain_id", "BIGINT", "NVTX domain id."),
            ("name", "VARCHAR", "Domain name."),
        ),
    ),
    Table(
        "gpu_metrics",
        "GPU metrics sampled by `nsys profile --gpu-metrics-devices` (long form).",
        cols(
            CAPTURE_ID,
            DEVICE_ID,
            ("ts_ns", "BIGINT", "Sample time, ns on the capture's timeline."),
            ("metric", "VARCHAR", "Metric name as recorded, e.g. 'SM Active', 'Tensor Active', 'DRAM Read Bandwidth'."),
            ("value", "DOUBLE", "Sampled value (a percentage for the throughput metrics)."),
        ),
    ),
    Table(
        "cpu_ops",
        "PyTorch operators on the host (Kineto cat cpu_op): one row per operator call. Only PyTorch profiler "
        "traces fill it; it is most of such a trace's events.",
        cols(
            CAPTURE_ID,
            ("pid", "BIGINT", "Process id."),
            ("tid", "BIGINT", "Thread id."),
            ("name", "VARCHAR", "Operator name, e.g. aten::mm or autograd::engine::evaluate_function: MmBackward0."),
            *TIMES,
            ("external_id", "BIGINT", "The trace's External id: links the operator to the CUDA API calls and GPU work it issued."),
            ("sequence_number", "BIGINT", "Autograd sequence number (links a forward operator to its backward), or NULL."),
            ("fwd_thread_id", "BIGINT", "Thread of the forward operator, for backward operators, or NULL."),
        ),
    ),
    Table(
        "capture_distributed",
        "Where a capture sits in a distributed job, as the PyTorch profiler recorded it (Kineto distributedInfo); "
        "one row per capture that recorded it.",
        cols(
            CAPTURE_ID,
            ("rank", "INTEGER", "Global rank of the process that wrote the trace."),
            ("world_size", "INTEGER", "Processes in the job, or NULL when not recorded."),
            ("backend", "VARCHAR", "Communication backend, e.g. nccl or gloo, or NULL."),
            ("nccl_version", "VARCHAR", "NCCL version, e.g. 2.17.1, or NULL."),
            ("process_groups", "VARCHAR", "The process groups as recorded (pg_config: JSON text), or NULL."),
        ),
    ),
    Table(
        "collectives",
        "Collective communication calls with their message metadata (Kineto record_param_comms operators and "
        "NCCL kernels carrying the same arguments).",
        cols(
            CAPTURE_ID,
            ("source", "VARCHAR", "Event the row comes from: record_param_comms (host) or kernel (the NCCL kernel)."),
            ("pid", "BIGINT", "Process id (host rows), or NULL."),
            ("tid", "BIGINT", "Thread id (host rows), or NULL."),
            ("device_id", "INTEGER", "GPU (kernel rows), or NULL."),
            *TIMES,
            ("collective", "VARCHAR", "Collective name as recorded: allreduce, broadcast, all_to_all, wait, ..."),
            ("dtype", "VARCHAR", "Element type as recorded: Float, Half, BFloat16, Long, Byte, ..."),
            ("in_msg_nelems", "BIGINT", "Elements in the input message."),
            ("out_msg_nelems", "BIGINT", "Elements in the output message."),
            ("in_msg_bytes", "BIGINT", "Input message size, bytes: as recorded (In msg size), else elements x dtype size; NULL for an unknown dtype."),
            ("out_msg_bytes", "BIGINT", "Output message size, bytes, as in_msg_bytes."),
            ("group_size", "INTEGER", "Ranks in the process group."),
            ("group_ranks", "INTEGER[]", "Global ranks of the process group, or NULL when not recorded as a list."),
            ("process_group", "VARCHAR", "Process group name (and description when recorded), or NULL."),
            ("external_id", "BIGINT", "The trace's External id of the event."),
            ("correlation_id", "BIGINT", "kernel rows: the kernel's correlation id; host rows: that of the first NCCL kernel launched from the same thread within the call, or NULL."),
        ),
    ),
    Table(
        "kernel_occupancy",
        "Occupancy the profiler estimated for each kernel launch from its configuration (Kineto 'blocks per SM', "
        "'warps per SM', 'est. achieved occupancy %'); joins kernels on capture, device, stream and correlation id.",
        cols(
            CAPTURE_ID,
            DEVICE_ID,
            ("stream_id", "INTEGER", "CUDA stream."),
            ("correlation_id", "BIGINT", "kernels.correlation_id of the launch."),
            ("start_ns", "BIGINT", "Start of the kernel, ns (with the correlation id, a unique key)."),
            ("blocks_per_sm", "DOUBLE", "Blocks of the grid per SM (grid size / SM count), as estimated."),
            ("warps_per_sm", "DOUBLE", "Warps of the grid per SM, as estimated."),
            ("est_achieved_occupancy_pct", "DOUBLE", "Estimated achieved occupancy, 0..100."),
        ),
    ),
    *HOST_TABLES,
    *NCU_TABLES,
)


def table_names() -> list[str]:
    """Names of every normalized table (the views among them included: see :attr:`Table.stored`)."""
    return [t.name for t in TABLES]


def stored_table_names() -> list[str]:
    """Names of the normalized tables that hold rows (what a copy or a delete of a store's rows touches)."""
    return [t.name for t in TABLES if t.stored]


def get_table(name: str) -> Table:
    """The table definition named ``name``."""
    for table in TABLES:
        if table.name == name:
            return table
    raise KeyError(name)


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def create_schema(con: duckdb.DuckDBPyConnection) -> None:
    """Create every normalized table (if absent) with table and column comments."""
    # One batch in one transaction: a commit per column comment makes creating a store slow.
    statements = []
    for table in TABLES:
        if not table.stored:
            continue  # a view: created with the views below, then commented
        cols = ", ".join(f"{c.name} {c.type}" for c in table.columns)
        statements.append(f"CREATE TABLE IF NOT EXISTS {table.name} ({cols})")
        statements.append(f"COMMENT ON TABLE {table.name} IS {_quote(table.doc)}")
        statements.extend(f"COMMENT ON COLUMN {table.name}.{c.name} IS {_quote(c.doc)}" for c in table.columns)
    import duckdb

    try:
        con.execute("BEGIN TRANSACTION")
        own = True
    except duckdb.TransactionException:  # the caller's transaction is open: run inside it
        own = False
    try:
        con.execute(";\n".join(statements))
        _create_views(con)
        if own:
            con.execute("COMMIT")
    except BaseException:
        if own:
            con.execute("ROLLBACK")
        raise


def _create_views(con: duckdb.DuckDBPyConnection) -> None:
    """The analysis views and their comments, in the caller's transaction (a commit per view: 0.35 s against
    0.14 s for a new store; docs/performance.md, "Small captures")."""
    from nsight_advisor.schema.views import create_views

    views = [t for t in TABLES if not t.stored]
    stale = con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() AND schema_name = 'main' "
        f"AND table_name IN ({', '.join(_quote(t.name) for t in views)})").fetchall()
    if stale:  # a store from before kernels became a view (schema version 2): its rows cannot be carried over
        from nsight_advisor.common.errors import InputError

        raise InputError(f"store written by an older nsight-advisor (its {stale[0][0]} is a table, not a view): "
                         "ingest the captures into a new store")
    create_views(con)
    con.execute(";\n".join([
        *(f"COMMENT ON VIEW {t.name} IS {_quote(t.doc)}" for t in views),
        *(f"COMMENT ON COLUMN {t.name}.{c.name} IS {_quote(c.doc)}" for t in views for c in t.columns),
    ]))
