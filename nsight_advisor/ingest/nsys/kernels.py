"""What ran on the GPU and the CUDA calls that asked for it, from an nsys export: CUDA API calls, kernels, memory
copies, memsets and synchronizations, each with one ``insert ... select`` over the attached export (strings and
enum labels resolved inside DuckDB)."""

from __future__ import annotations

from nsight_advisor.ingest.nsys import enums as E
from nsight_advisor.ingest.nsys.catalog import INT32_OR_NULL, KERNEL, MEMCPY, MEMSET, PID_OF, RUNTIME, SYNC, TID_OF
from nsight_advisor.ingest.nsys.reader import ExportReader
from nsight_advisor.ingest.sql_bounds import product_or_null, sum_or_null


def read_api_calls(reader: ExportReader) -> None:
    if not reader.cat.has(RUNTIME, "start"):
        reader.missing("api_calls", f"no {RUNTIME} table: no CUDA API calls were traced", "nsys profile --trace=cuda")
        return
    r = "r"
    event_class = reader.col(RUNTIME, "eventClass", r)
    # Names as the export's string ids; the strings (with their base names) go into api_names once (api_calls is
    # a view joining them).
    reader.sql(f"""
        INSERT INTO api_call_rows
        SELECT ?, {PID_OF.format(col='r.globalTid')}, {TID_OF.format(col='r.globalTid')}, r.correlationId, r.nameId,
               CASE WHEN {event_class} = {E.EVENT_CLASS_CUDA_DRIVER} THEN 'driver'
                    WHEN {event_class} = {E.EVENT_CLASS_CUDA_RUNTIME} THEN 'runtime'
                    WHEN s.value LIKE 'cuda%' THEN 'runtime'
                    WHEN s.value LIKE 'cu%' THEN 'driver' END,
               r.start, r."end", r."end" - r.start, {reader.col(RUNTIME, 'returnValue', r)}
        FROM {reader.table(RUNTIME)} r
        LEFT JOIN {reader.strings()} s ON s.id = r.nameId
        WHERE {reader.valid_rows(r)}""", [reader.cid])
    # a call whose name id the export's strings lack keeps its id, with no name (as the join gave it before)
    reader.sql(f"""
        INSERT INTO api_names
        SELECT $cid, s.id, s.value, regexp_replace(s.value, '_v[0-9]+$', '') FROM {reader.strings()} s
        WHERE s.id IN (SELECT DISTINCT name_id FROM api_call_rows WHERE capture_id = $cid)""", {"cid": reader.cid})
    reader.dropped_note("api_calls", RUNTIME)
    if not reader.cat.count(RUNTIME):
        reader.missing("api_calls", f"{RUNTIME} is empty: no CUDA API calls were traced", "nsys profile --trace=cuda")


def read_kernels(reader: ExportReader) -> None:
    cat = reader.cat
    if not cat.has(KERNEL, "start"):
        reader.missing("kernels", f"no {KERNEL} table: no kernels were traced", "nsys profile --trace=cuda")
        return
    k = "k"

    def column(name: str) -> str:
        return reader.col(KERNEL, name, k)

    static = f"{column('staticSharedMemory')}"
    dynamic = f"{column('dynamicSharedMemory')}"
    launch = reader.enum("ENUM_CUDA_KERNEL_LAUNCH_TYPE")
    # tid: from the launching API call (same correlation id and process); one row per (pid, corr). Only calls
    # named *Launch* (cudaLaunchKernel*, cuLaunchKernel*, cudaGraphLaunch, cuGraphLaunch, ...) can launch a
    # kernel, and reading only those keeps the lookup small.
    # Names as the export's string ids; the strings go into kernel_names once (kernels is a view joining them), and
    # the launch type as its code, its label going into kernel_launch_types.
    reader.sql(f"""
        INSERT INTO kernel_rows
        WITH launcher AS (
            SELECT pid, correlation_id, min(tid) AS tid FROM api_call_rows
            WHERE capture_id = $cid AND correlation_id IS NOT NULL
              AND name_id IN (SELECT name_id FROM api_names WHERE capture_id = $cid AND contains(name, 'Launch'))
            GROUP BY pid, correlation_id
        ), src AS (
            SELECT {INT32_OR_NULL.format(col=column('deviceId'))} AS device_id, {INT32_OR_NULL.format(col=column('contextId'))} AS context_id,
                   {INT32_OR_NULL.format(col=column('streamId'))} AS stream_id,
                   {PID_OF.format(col=column('globalPid'))} AS pid, {column('correlationId')} AS correlation_id,
                   k.start, k."end", {column('demangledName')} AS dn, {column('shortName')} AS sn, {column('mangledName')} AS mn,
                   {INT32_OR_NULL.format(col=column('gridX'))} AS gx, {INT32_OR_NULL.format(col=column('gridY'))} AS gy,
                   {INT32_OR_NULL.format(col=column('gridZ'))} AS gz, {INT32_OR_NULL.format(col=column('blockX'))} AS bx,
                   {INT32_OR_NULL.format(col=column('blockY'))} AS by_, {INT32_OR_NULL.format(col=column('blockZ'))} AS bz,
                   {INT32_OR_NULL.format(col=column('registersPerThread'))} AS regs, {static} AS smem_static, {dynamic} AS smem_dynamic,
                   {column('localMemoryPerThread')} AS local_mem, {column('launchType')} AS launch_type,
                   {column('graphNodeId')} AS graph_node_id, {column('graphId')} AS graph_id
            FROM {reader.table(KERNEL)} k
            WHERE {reader.valid_rows(k)}
        )
        SELECT $cid, src.device_id, src.context_id, src.stream_id, src.pid, l.tid, src.correlation_id,
               src.start, src."end", src."end" - src.start,
               src.dn, src.sn, src.mn,
               src.gx, src.gy, src.gz, src.bx, src.by_, src.bz,
               {product_or_null('src.gx', 'src.gy', 'src.gz')},
               {product_or_null('src.bx', 'src.by_', 'src.bz', 'INTEGER')},
               src.regs, src.smem_static, src.smem_dynamic,
               {sum_or_null('src.smem_static', 'src.smem_dynamic')}, src.local_mem,
               lt.id, src.graph_node_id, src.graph_id
        FROM src
        LEFT JOIN {launch} lt ON lt.id = src.launch_type
        LEFT JOIN launcher l ON l.pid = src.pid AND l.correlation_id = src.correlation_id
        """, {"cid": reader.cid})
    reader.sql(f"""
        INSERT INTO kernel_names
        SELECT $cid, s.id, s.value FROM {reader.strings()} s
        WHERE s.id IN (SELECT unnest([name_id, short_name_id, mangled_name_id])
                       -- the few combinations first: unnesting every launch's three ids took 0.04 s at 1M kernels
                       FROM (SELECT DISTINCT name_id, short_name_id, mangled_name_id FROM kernel_rows
                             WHERE capture_id = $cid))""", {"cid": reader.cid})
    # the launch types' labels once (kernel_rows holds each launch's id: kernels is a view joining them)
    reader.sql(f"INSERT INTO kernel_launch_types SELECT $cid, id, word FROM {launch}", {"cid": reader.cid})
    reader.dropped_note("kernels", KERNEL)
    if not reader.cat.count(KERNEL):
        reader.missing("kernels", f"{KERNEL} is empty: no kernels were traced", "nsys profile --trace=cuda")


def read_memcpys(reader: ExportReader) -> None:
    if not reader.cat.has(MEMCPY, "start"):
        reader.missing("memcpys", f"no {MEMCPY} table: no memory copies were recorded", "nsys profile --trace=cuda")
        return
    m = "m"

    def column(name: str) -> str:
        return reader.col(MEMCPY, name, m)

    oper, kind, mig = (reader.enum(e) for e in ("ENUM_CUDA_MEMCPY_OPER", "ENUM_CUDA_MEM_KIND",
                                               "ENUM_CUDA_UNIF_MEM_MIGRATION"))
    reader.sql(f"""
        INSERT INTO memcpys
        SELECT ?, {INT32_OR_NULL.format(col=column('deviceId'))}, {INT32_OR_NULL.format(col=column('contextId'))}, {INT32_OR_NULL.format(col=column('streamId'))}, {PID_OF.format(col=column('globalPid'))},
               {column('correlationId')}, m.start, m."end", m."end" - m.start, {column('bytes')},
               o.label, sk.word, dk.word, mc.word
        FROM {reader.table(MEMCPY)} m
        LEFT JOIN {oper} o ON o.id = {column('copyKind')}
        LEFT JOIN {kind} sk ON sk.id = {column('srcKind')}
        LEFT JOIN {kind} dk ON dk.id = {column('dstKind')}
        LEFT JOIN {mig} mc ON mc.id = {column('migrationCause')} AND {column('copyKind')} IN (11, 12, 13)
        WHERE {reader.valid_rows(m)}""", [reader.cid])
    reader.dropped_note("memcpys", MEMCPY)


def read_memsets(reader: ExportReader) -> None:
    if not reader.cat.has(MEMSET, "start"):
        reader.missing("memsets", f"no {MEMSET} table: no memsets were recorded", "nsys profile --trace=cuda")
        return
    m = "m"

    def column(name: str) -> str:
        return reader.col(MEMSET, name, m)

    kind = reader.enum("ENUM_CUDA_MEM_KIND")
    reader.sql(f"""
        INSERT INTO memsets
        SELECT ?, {INT32_OR_NULL.format(col=column('deviceId'))}, {INT32_OR_NULL.format(col=column('contextId'))}, {INT32_OR_NULL.format(col=column('streamId'))}, {PID_OF.format(col=column('globalPid'))},
               {column('correlationId')}, m.start, m."end", m."end" - m.start, {column('bytes')}, mk.word, {column('value')}
        FROM {reader.table(MEMSET)} m LEFT JOIN {kind} mk ON mk.id = {column('memKind')}
        WHERE {reader.valid_rows(m)}""", [reader.cid])
    reader.dropped_note("memsets", MEMSET)


def read_syncs(reader: ExportReader) -> None:
    if not reader.cat.has(SYNC, "start"):
        reader.missing("syncs", f"no {SYNC} table: no synchronizations were recorded", "nsys profile --trace=cuda")
        return
    s = "s"

    def column(name: str) -> str:
        return reader.col(SYNC, name, s)

    # nsys 2025.x+ moved older reports' codes to deprecatedSyncType.
    code = f"coalesce({column('syncType')}, {column('deprecatedSyncType')})"
    reader.sql(f"""
        INSERT INTO syncs
        SELECT ?, {INT32_OR_NULL.format(col=column('deviceId'))}, {INT32_OR_NULL.format(col=column('contextId'))}, {INT32_OR_NULL.format(col=column('streamId'))}, {PID_OF.format(col=column('globalPid'))},
               {column('correlationId')}, coalesce(st.word, 'unknown'), s.start, s."end", s."end" - s.start, {column('eventId')}
        FROM {reader.table(SYNC)} s LEFT JOIN {reader.enum('ENUM_CUPTI_SYNC_TYPE')} st ON st.id = {code}
        WHERE {reader.valid_rows(s)}""", [reader.cid])
    reader.dropped_note("syncs", SYNC)
