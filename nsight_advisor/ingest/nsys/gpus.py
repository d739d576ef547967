"""The GPUs of an nsys export (TARGET_INFO_GPU, or TARGET_INFO_CUDA_GPU of 2020-2021 exports, else the device ids
the events name) and the GPU metrics it sampled, into ``gpus`` and ``gpu_metrics``.

The GPUs are read after the events (export.STEPS): an export with no GPU table names its devices only in its
kernels, copies and sets, which the store then already holds."""

from __future__ import annotations

from nsight_advisor.ingest.nsys.catalog import (
    CUDA_DEVICE, CUDA_GPU_INFO, GPU_INFO, GPU_METRICS, GPU_METRICS_INFO,
)
from nsight_advisor.ingest.nsys.reader import ExportReader
from nsight_advisor.schema.hardware import lookup_gpu

def read_gpus(reader: ExportReader) -> None:
    con, cat = reader.con, reader.cat
    if cat.has(GPU_INFO, "id"):
        g = "g"

        def column(name: str) -> str:
            return reader.col(GPU_INFO, name, g)

        shmem_block = f"coalesce(nullif({column('maxShmemPerBlockOptin')}, 0), {column('maxShmemPerBlock')})"
        rows = _gpu_rows(reader, column, shmem_block, g)
        for r in rows:
            _insert_gpu(reader, *r)
        return
    if cat.has(CUDA_GPU_INFO, "numMultiprocessors") and cat.count(CUDA_GPU_INFO):
        for r in _cuda_gpu_rows(reader):
            _insert_gpu(reader, *r)
        return
    # No GPU table (e.g. trimmed by its publisher): keep what can be recovered.
    reader.missing("gpus", f"no {GPU_INFO} table: GPU names and properties were not exported",
                 "nsys export --type sqlite with the full report (TARGET_INFO_GPU)")
    sm_by_dev: dict[int, int | None] = {}
    if cat.has(CUDA_DEVICE, "cudaId"):
        sm = reader.col(CUDA_DEVICE, "numMultiprocessors", "d")
        for dev, n in con.execute(f"SELECT d.cudaId, max({sm}) FROM {reader.table(CUDA_DEVICE)} d GROUP BY 1").fetchall():
            sm_by_dev[int(dev)] = n
    # the devices the stored kernels, copies and sets ran on (read before this step): SQLite would scan the whole
    # of each event table for them (the 1M-kernel replay of such an export: 0.16 to 0.27 s), the store reads one
    # column
    for (dev,) in reader.sql("""
            SELECT DISTINCT device_id FROM (
                SELECT device_id FROM kernel_rows WHERE capture_id = $cid
                UNION ALL SELECT device_id FROM memcpys WHERE capture_id = $cid
                UNION ALL SELECT device_id FROM memsets WHERE capture_id = $cid)
            WHERE device_id IS NOT NULL""", {"cid": reader.cid}).fetchall():
        sm_by_dev.setdefault(int(dev), None)
    for dev in sorted(sm_by_dev):
        _insert_gpu(reader, dev, None, None, sm_by_dev[dev], None, None, None, None, None, None, None, None, None,
                         None, None, None, None, None)


def _gpu_rows(reader: ExportReader, column, shmem_block: str, g: str) -> list[tuple]:
    rows = reader.sql(f"""
        SELECT {g}.id, {column('name')}, {column('chipName')}, {column('smCount')}, {column('computeMajor')}, {column('computeMinor')},
               {column('totalMemory')}, {column('l2CacheSize')}, {column('clockRate')}, {column('memoryBandwidth')},
               {column('maxWarpsPerSm')}, {column('maxBlocksPerSm')}, {column('maxThreadsPerBlock')}, {column('maxRegistersPerSm')},
               {column('maxRegistersPerBlock')}, {column('maxShmemPerSm')}, {shmem_block}, {column('threadsPerWarp')}
        FROM {reader.table(GPU_INFO)} {g} ORDER BY {g}.id""").fetchall()
    seen, out = set(), []
    for r in rows:
        if r[0] not in seen:
            seen.add(r[0])
            out.append(r)
    return out


def _cuda_gpu_rows(reader: ExportReader) -> list[tuple]:
    """GPU facts of a 2020-2021 export (TARGET_INFO_CUDA_GPU), in :meth:`_insert_gpu`'s order.

    The table mirrors CUPTI's device activity record, whose units differ from TARGET_INFO_GPU's: memory
    bandwidth in kB/s and the core clock in kHz (CUpti_ActivityDevice). A bandwidth too large to be kB/s of any
    GPU (over 10^10, i.e. 10 TB/s) is taken as bytes/s already.
    """
    g = "g"

    def column(name: str) -> str:
        return reader.col(CUDA_GPU_INFO, name, g)

    device = column("deviceId") if reader.cat.has(CUDA_GPU_INFO, "deviceId") else column("id")
    name = column("name")
    if not reader.cat.has(CUDA_GPU_INFO, "name") and reader.cat.has(CUDA_GPU_INFO, "nameId"):
        name = f"(SELECT value FROM {reader.strings()} WHERE id = {column('nameId')})"
    rows = reader.sql(f"""
        SELECT {device}, {name}, {column('numMultiprocessors')}, {column('computeCapabilityMajor')},
               {column('computeCapabilityMinor')}, {column('globalMemorySize')}, {column('l2CacheSize')}, {column('coreClockRate')},
               {column('globalMemoryBandwidth')}, {column('maxWarpsPerMultiprocessor')}, {column('maxBlocksPerMultiprocessor')},
               {column('maxThreadsPerBlock')}, {column('maxRegistersPerMultiprocessor')}, {column('maxRegistersPerBlock')},
               {column('maxSharedMemoryPerMultiprocessor')}, {column('maxSharedMemoryPerBlock')}, {column('numThreadsPerWarp')}
        FROM {reader.table(CUDA_GPU_INFO)} {g} ORDER BY 1""").fetchall()
    seen, out = set(), []
    for (dev, nm, sm, major, minor, mem, l2, clock_khz, bw, warps, blocks, threads, regs_sm, regs_block,
         shmem_sm, shmem_block, warp) in rows:
        if dev is None or dev in seen:
            continue
        seen.add(dev)
        bandwidth = None
        if isinstance(bw, (int, float)) and bw > 0:
            bandwidth = float(bw) if bw > 1e10 else float(bw) * 1000.0
        clock = int(clock_khz) * 1000 if isinstance(clock_khz, (int, float)) and clock_khz > 0 else None
        out.append((dev, nm, None, sm, major, minor, mem, l2, clock, bandwidth, warps, blocks, threads, regs_sm,
                    regs_block, shmem_sm, shmem_block, warp))
    return out


def _insert_gpu(reader: ExportReader, dev, name, chip, sm_count, cc_major, cc_minor, total_mem, l2, clock, bandwidth, warps_sm,
                blocks_sm, threads_block, regs_sm, regs_block, shmem_sm, shmem_block, warp_size) -> None:
    name = name.strip() if isinstance(name, str) else name
    spec = lookup_gpu(name)
    cc = f"{cc_major}.{cc_minor}" if cc_major is not None and cc_minor is not None else None
    bandwidth = bandwidth if bandwidth else (spec.dram_bytes_per_s if spec else None)
    # Exports that name the GPU but lack its SM count (a .qdrep re-exported by nsys 2022.4 has no smCount column)
    # take it from the model's datasheet, as the DRAM bandwidth above: a raw report and its export then judge
    # grids alike.
    sm_count = sm_count if sm_count else (spec.sm_count if spec else None)
    reader.sql("INSERT INTO gpus VALUES (" + ", ".join(["?"] * 24) + ")", [
        reader.cid, dev, name, chip, sm_count, cc, cc_major, cc_minor, total_mem, l2, clock, bandwidth,
        warps_sm, blocks_sm, threads_block, regs_sm, regs_block, shmem_sm, shmem_block, warp_size,
        spec.fp32_flops_per_s if spec else None, spec.fp16_tensor_flops_per_s if spec else None,
        spec.tf32_tensor_flops_per_s if spec else None, spec.fp8_tensor_flops_per_s if spec else None,
    ])


def gpu_metrics_span_sql(reader: ExportReader) -> str | None:
    """The GPU metrics table's rows and the span of those with a known metric (each sample joins one distinct
    metric row), as ExportReader.deferred takes it; None without the tables."""
    if not (reader.cat.has(GPU_METRICS, "timestamp") and reader.cat.has(GPU_METRICS_INFO, "metricName")):
        return None
    return f"""
        SELECT count(*), min(g.timestamp) FILTER (WHERE i.typeId IS NOT NULL),
               max(g.timestamp) FILTER (WHERE i.typeId IS NOT NULL)
        FROM {reader.table(GPU_METRICS)} g
        LEFT JOIN (SELECT DISTINCT typeId, metricId FROM {reader.table(GPU_METRICS_INFO)}) i
          ON i.typeId = g.typeId AND i.metricId = g.metricId"""


def read_gpu_metrics(reader: ExportReader) -> None:
    if not (reader.cat.has(GPU_METRICS, "timestamp") and reader.cat.has(GPU_METRICS_INFO, "metricName")):
        reader.missing("gpu_metrics", f"no {GPU_METRICS} table: GPU metrics were not sampled",
                     "nsys profile --gpu-metrics-devices=all")
        return
    if reader.deferred("gpu_metrics", GPU_METRICS, gpu_metrics_span_sql(reader)):
        return
    reader.sql(f"""
        INSERT INTO gpu_metrics
        SELECT ?, (g.typeId & 255)::INTEGER, g.timestamp, i.metricName, g.value::DOUBLE
        FROM {reader.table(GPU_METRICS)} g
        JOIN (SELECT DISTINCT typeId, metricId, metricName FROM {reader.table(GPU_METRICS_INFO)}) i
          ON i.typeId = g.typeId AND i.metricId = g.metricId
        WHERE g.timestamp IS NOT NULL""", [reader.cid])
    if reader.inserted("gpu_metrics") == 0:
        reader.missing("gpu_metrics", f"{GPU_METRICS} is empty", "nsys profile --gpu-metrics-devices=all")
