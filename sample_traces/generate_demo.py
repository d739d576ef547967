"""Write sample_traces/demo_training_step.sqlite: a made-up training step as an nsys SQLite export.

    python sample_traces/generate_demo.py [OUT]

The tables and columns follow what `nsys export --type sqlite` 2024.6 writes (StringIds, META_DATA_EXPORT,
TARGET_INFO_GPU, ENUM_* tables, CUPTI_ACTIVITY_KIND_{KERNEL,RUNTIME,MEMCPY,MEMSET,SYNCHRONIZATION},
NVTX_EVENTS), so the ingest reads it exactly like a real export. The workload is invented to show common
problems: FP32 cuBLAS-style SGEMMs (no tensor cores), elementwise kernels with small grids, many tiny
launches, idle gaps, cudaStreamSynchronize/cudaDeviceSynchronize after each step, and pageable
cudaMemcpyAsync. Output is deterministic (fixed seed, no clock); no environment tables are written.
"""

from __future__ import annotations

import os
import random
import sqlite3
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent / "demo_training_step.sqlite"

PID = 4242
TID = 4242
GLOBAL_PID = (PID << 24)
GLOBAL_TID = GLOBAL_PID | TID
DEVICE = 0
CONTEXT = 1
STREAM = 7

DDL = """
CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE META_DATA_EXPORT (name TEXT NOT NULL, value TEXT);
CREATE TABLE TARGET_INFO_GPU (vmId INTEGER NOT NULL, id INTEGER NOT NULL, name TEXT, busLocation TEXT, isDiscrete INTEGER,
  l2CacheSize INTEGER, totalMemory INTEGER, memoryBandwidth INTEGER, clockRate INTEGER, smCount INTEGER, pwGpuId INTEGER,
  uuid TEXT, luid INTEGER, chipName TEXT, cuDevice INTEGER, ctxswDevPath TEXT, ctrlDevPath TEXT, revision INTEGER,
  nodeMask INTEGER, constantMemory INTEGER, maxIPC INTEGER, maxRegistersPerBlock INTEGER, maxShmemPerBlock INTEGER,
  maxShmemPerBlockOptin INTEGER, maxShmemPerSm INTEGER, maxRegistersPerSm INTEGER, threadsPerWarp INTEGER,
  asyncEngines INTEGER, maxWarpsPerSm INTEGER, maxBlocksPerSm INTEGER, maxThreadsPerBlock INTEGER, maxBlockDimX INTEGER,
  maxBlockDimY INTEGER, maxBlockDimZ INTEGER, maxGridDimX INTEGER, maxGridDimY INTEGER, maxGridDimZ INTEGER,
  computeMajor INTEGER, computeMinor INTEGER, smMajor INTEGER, smMinor INTEGER);
CREATE TABLE ENUM_CUDA_MEMCPY_OPER (id INTEGER NOT NULL PRIMARY KEY, name TEXT NOT NULL, label TEXT);
CREATE TABLE ENUM_CUDA_MEM_KIND (id INTEGER NOT NULL PRIMARY KEY, name TEXT NOT NULL, label TEXT);
CREATE TABLE ENUM_CUPTI_SYNC_TYPE (id INTEGER NOT NULL PRIMARY KEY, name TEXT NOT NULL, label TEXT);
CREATE TABLE ENUM_CUDA_KERNEL_LAUNCH_TYPE (id INTEGER NOT NULL PRIMARY KEY, name TEXT NOT NULL, label TEXT);
CREATE TABLE ENUM_CUDA_UNIF_MEM_MIGRATION (id INTEGER NOT NULL PRIMARY KEY, name TEXT NOT NULL, label TEXT);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
  contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
  demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL, mangledName INTEGER, launchType INTEGER, cacheConfig INTEGER,
  registersPerThread INTEGER NOT NULL, gridX INTEGER NOT NULL, gridY INTEGER NOT NULL, gridZ INTEGER NOT NULL,
  blockX INTEGER NOT NULL, blockY INTEGER NOT NULL, blockZ INTEGER NOT NULL, staticSharedMemory INTEGER NOT NULL,
  dynamicSharedMemory INTEGER NOT NULL, localMemoryPerThread INTEGER NOT NULL, localMemoryTotal INTEGER NOT NULL,
  gridId INTEGER NOT NULL, sharedMemoryExecuted INTEGER, graphNodeId INTEGER, sharedMemoryLimitConfig INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL,
  globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL, callchainId INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
  contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
  bytes INTEGER NOT NULL, copyKind INTEGER NOT NULL, deprecatedSrcId INTEGER, srcKind INTEGER, dstKind INTEGER,
  srcDeviceId INTEGER, srcContextId INTEGER, dstDeviceId INTEGER, dstContextId INTEGER, migrationCause INTEGER,
  graphNodeId INTEGER, virtualAddress INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
  contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
  value INTEGER NOT NULL, bytes INTEGER NOT NULL, graphNodeId INTEGER, memKind INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_SYNCHRONIZATION (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
  contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
  syncType INTEGER NOT NULL, eventId INTEGER NOT NULL);
CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, rangeId INTEGER,
  category INTEGER, color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, textId INTEGER, domainId INTEGER,
  uint64Value INTEGER, int64Value INTEGER, doubleValue REAL, uint32Value INTEGER, int32Value INTEGER, floatValue REAL,
  jsonTextId INTEGER, jsonText TEXT, binaryData TEXT);
"""

ENUMS = {
    "ENUM_CUDA_MEMCPY_OPER": [(0, "CUDA_MEMCPY_KIND_UNKNOWN", "Unknown"), (1, "CUDA_MEMCPY_KIND_HTOD", "Host-to-Device"),
                              (2, "CUDA_MEMCPY_KIND_DTOH", "Device-to-Host"), (8, "CUDA_MEMCPY_KIND_DTOD", "Device-to-Device")],
    "ENUM_CUDA_MEM_KIND": [(0, "CUDA_MEMOPR_MEMORY_KIND_PAGEABLE", "Pageable"), (1, "CUDA_MEMOPR_MEMORY_KIND_PINNED", "Pinned"),
                           (2, "CUDA_MEMOPR_MEMORY_KIND_DEVICE", "Device")],
    "ENUM_CUPTI_SYNC_TYPE": [(0, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_UNKNOWN", "Unknown"),
                             (3, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE", "Stream sync"),
                             (4, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE", "Context sync")],
    "ENUM_CUDA_KERNEL_LAUNCH_TYPE": [(0, "CUDA_KERNEL_LAUNCH_TYPE_UNKNOWN", "Unknown"),
                                     (1, "CUDA_KERNEL_LAUNCH_TYPE_REGULAR", "Regular")],
    "ENUM_CUDA_UNIF_MEM_MIGRATION": [(0, "CUDA_UNIFIED_MEMORY_MIGRATION_CAUSE_UNKNOWN", "Unknown")],
}

# (demangled name, short name, grid, block, registers, static smem B, duration ns)
SGEMM = ("ampere_sgemm_128x64_nn", "ampere_sgemm_128x64_nn", (16, 8, 1), (128, 1, 1), 122, 32768, 180_000)
SGEMM_TN = ("ampere_sgemm_64x32_sliced1x4_tn", "ampere_sgemm_64x32_sliced1x4_tn", (32, 4, 1), (128, 1, 1), 90, 16384, 95_000)
RELU = ("void elementwise_kernel<128, 4, relu_functor<float>>(int, relu_functor<float>)", "elementwise_kernel",
        (40, 1, 1), (128, 1, 1), 24, 0, 9_000)
ADD = ("void vectorized_elementwise_kernel<4, add_functor<float>>(int, add_functor<float>, float*, const float*)",
       "vectorized_elementwise_kernel", (20, 1, 1), (128, 1, 1), 20, 0, 6_000)
SCALE = ("scale_bias_kernel(float*, const float*, float, int)", "scale_bias_kernel", (1, 1, 1), (256, 1, 1), 16, 0, 2_500)
REDUCE = ("void reduce_kernel<512, float>(const float*, float*, int)", "reduce_kernel", (1, 1, 1), (512, 1, 1), 32, 2048, 14_000)
ADAM = ("adam_update_kernel(float*, float*, float*, const float*, float, int)", "adam_update_kernel",
        (54, 1, 1), (256, 1, 1), 40, 0, 30_000)


class Writer:
    """Accumulates rows and interns strings the way the exporter does."""

    def __init__(self) -> None:
        self.strings: dict[str, int] = {}
        self.rows: dict[str, list[tuple]] = {}
        self.correlation = 100
        self.grid_id = 1

    def sid(self, text: str) -> int:
        if text not in self.strings:
            self.strings[text] = len(self.strings) + 1
        return self.strings[text]

    def add(self, table: str, row: tuple) -> None:
        self.rows.setdefault(table, []).append(row)

    def api(self, name: str, start: int, duration: int) -> tuple[int, int]:
        self.correlation += 1
        self.add("CUPTI_ACTIVITY_KIND_RUNTIME", (start, start + duration, 0, GLOBAL_TID, self.correlation,
                                                 self.sid(name), 0, None))
        return self.correlation, start + duration

    def kernel(self, spec: tuple, cpu_ns: int, gpu_ns: int, rng: random.Random) -> tuple[int, int]:
        """Launch on the CPU at cpu_ns; run on the GPU no earlier than gpu_ns. Returns (cpu, gpu) times after it."""
        name, short, grid, block, regs, smem, dur = spec
        corr, cpu_end = self.api("cudaLaunchKernel_v7000", cpu_ns, rng.randint(3_000, 6_000))
        start = max(gpu_ns, cpu_ns + 4_000)
        duration = int(dur * rng.uniform(0.95, 1.05))
        self.grid_id += 1
        self.add("CUPTI_ACTIVITY_KIND_KERNEL", (start, start + duration, DEVICE, CONTEXT, None, STREAM, corr, GLOBAL_PID,
                                                self.sid(name), self.sid(short), None, 1, 0, regs, *grid, *block, smem, 0,
                                                0, 0, self.grid_id, smem, None, 0))
        return cpu_end + rng.randint(500, 1_500), start + duration

    def memcpy(self, api: str, kind: int, src: int, dst: int, nbytes: int, cpu_ns: int, gpu_ns: int,
               rng: random.Random) -> tuple[int, int]:
        corr, cpu_end = self.api(api, cpu_ns, rng.randint(8_000, 15_000))
        start = max(gpu_ns, cpu_ns + 5_000)
        duration = int(nbytes / 6.0) + 2_000  # ~6 B/ns: a pageable PCIe copy
        self.add("CUPTI_ACTIVITY_KIND_MEMCPY", (start, start + duration, DEVICE, CONTEXT, None, STREAM, corr, GLOBAL_PID,
                                                nbytes, kind, None, src, dst, DEVICE, CONTEXT, DEVICE, CONTEXT, None,
                                                None, None))
        return max(cpu_end, start + duration if api.startswith("cudaMemcpy_") else cpu_end), start + duration

    def sync(self, api: str, sync_type: int, cpu_ns: int, gpu_ns: int) -> int:
        end = max(cpu_ns + 2_000, gpu_ns + 1_500)
        corr, _ = self.api(api, cpu_ns, end - cpu_ns)
        self.add("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", (cpu_ns, end, DEVICE, CONTEXT, None,
                                                         STREAM if sync_type == 3 else 4294967295, corr, GLOBAL_PID,
                                                         sync_type, 0))
        return end

    def nvtx(self, text: str, start: int, end: int) -> None:
        self.add("NVTX_EVENTS", (start, end, 59, None, None, None, text, GLOBAL_TID, None, None, 0, None, None, None,
                                 None, None, None, None, None, None))


def build(steps: int = 6, seed: int = 7) -> Writer:
    """The demo workload: a few identical training steps of a small MLP."""
    rng = random.Random(seed)
    w = Writer()
    cpu = gpu = 1_000_000_000
    for step in range(steps):
        step_start = cpu
        cpu, gpu = w.memcpy("cudaMemcpyAsync_v3020", 1, 0, 2, 4 << 20, cpu, gpu, rng)  # pageable batch upload
        fwd_start = cpu
        for _layer in range(4):
            cpu, gpu = w.kernel(SGEMM, cpu, gpu, rng)
            cpu, gpu = w.kernel(ADD, cpu, gpu, rng)
            cpu, gpu = w.kernel(RELU, cpu, gpu, rng)
            for _ in range(8):  # many tiny launches
                cpu, gpu = w.kernel(SCALE, cpu, gpu, rng)
        w.nvtx("forward", fwd_start, cpu)
        bwd_start = cpu
        for _layer in range(4):
            cpu, gpu = w.kernel(SGEMM_TN, cpu, gpu, rng)
            cpu, gpu = w.kernel(SGEMM, cpu, gpu, rng)
            cpu, gpu = w.kernel(RELU, cpu, gpu, rng)
        cpu, gpu = w.kernel(REDUCE, cpu, gpu, rng)
        w.nvtx("backward", bwd_start, cpu)
        cpu = w.sync("cudaStreamSynchronize_v3020", 3, cpu, gpu)
        cpu += 350_000 + rng.randint(0, 50_000)  # host-side work: the GPU idles
        opt_start = cpu
        corr, cpu = w.api("cudaMemsetAsync_v3020", cpu, 4_000)
        mstart = max(gpu, cpu + 3_000)
        w.add("CUPTI_ACTIVITY_KIND_MEMSET", (mstart, mstart + 3_000, DEVICE, CONTEXT, None, STREAM, corr, GLOBAL_PID,
                                             0, 1 << 20, None, 2))
        gpu = mstart + 3_000
        for _ in range(6):
            cpu, gpu = w.kernel(ADAM, cpu, gpu, rng)
        cpu, gpu = w.memcpy("cudaMemcpyAsync_v3020", 2, 2, 0, 4096, cpu, gpu, rng)  # loss to pageable host memory
        cpu = w.sync("cudaDeviceSynchronize_v3020", 4, cpu, gpu)
        w.nvtx("optimizer", opt_start, cpu)
        w.nvtx(f"train_step {step}", step_start, cpu)
        cpu += 120_000 + rng.randint(0, 20_000)
    return w


def write(path: Path = OUT) -> Path:
    """Write the demo export to ``path`` (replacing it) and return the path."""
    w = build()
    tmp = path.with_name(path.name + ".tmp")
    if tmp.exists():
        tmp.unlink()
    con = sqlite3.connect(tmp)
    con.executescript(DDL)
    con.executemany("INSERT INTO META_DATA_EXPORT VALUES (?, ?)", [
        ("EXPORT_PRODUCT_NAME", "nsight-advisor demo generator (nsys export layout)"),
        ("EXPORT_PRODUCT_VERSION", "2024.6.2.225"), ("EXPORT_SCHEMA_VERSION", "3.16.1")])
    con.execute("INSERT INTO TARGET_INFO_GPU (vmId, id, name, l2CacheSize, totalMemory, memoryBandwidth, clockRate, "
                "smCount, chipName, maxRegistersPerBlock, maxShmemPerBlock, maxShmemPerBlockOptin, maxShmemPerSm, "
                "maxRegistersPerSm, threadsPerWarp, maxWarpsPerSm, maxBlocksPerSm, maxThreadsPerBlock, computeMajor, "
                "computeMinor) VALUES (0, 0, 'NVIDIA A100-SXM4-40GB', 41943040, 42505273344, 1555200000000, "
                "1410000000, 108, 'GA100', 65536, 49152, 166912, 167936, 65536, 32, 64, 32, 1024, 8, 0)")
    for table, rows in ENUMS.items():
        con.executemany(f"INSERT INTO {table} VALUES (?, ?, ?)", rows)
    con.executemany("INSERT INTO StringIds VALUES (?, ?)", [(i, s) for s, i in w.strings.items()])
    for table, rows in w.rows.items():
        if table == "NVTX_EVENTS":  # nsys writes ranges in start order (an outer range before its first child)
            rows = sorted(rows, key=lambda r: (r[0], -(r[1] if r[1] is not None else r[0])))
        con.executemany(f"INSERT INTO {table} VALUES ({', '.join(['?'] * len(rows[0]))})", rows)
    con.commit()
    con.execute("VACUUM")
    con.close()
    os.replace(tmp, path)
    return path


if __name__ == "__main__":
    print(write(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT))
