"""Ingest benchmark: build large nsys exports by replaying a real one, then time our ingest against SQLite.

    python benchmarks/bench_ingest.py                      # 1M kernels
    python benchmarks/bench_ingest.py --kernels 1000000 10000000
    python benchmarks/bench_ingest.py --source ../shared/traces/nsys/nsys_ai_h100_2gpu_1s.sqlite --out /tmp

The large export is the source copied and its event tables (kernels, runtime, memcpy, memset, sync, NVTX)
replayed N times: each copy shifted in time past the previous one and with correlation ids offset so they stay
unique. Files go to --out (default /tmp) and are reused when present; never commit them.

Reported per size: file size; SQLite's own aggregate scan of the same tables (the sqlite3 library in C reading
every column we project: the floor for any reader); our ingest (wall time, in a fresh process, into a
store on disk); their ratio; `nsys stats` time when nsys is on PATH; and the ingest's peak RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_SOURCE = REPO.parent / "shared" / "traces" / "nsys" / "nsys_ai_h100_2gpu_1s.sqlite"
EVENT_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_MEMCPY",
                "CUPTI_ACTIVITY_KIND_MEMSET", "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "NVTX_EVENTS")

# Columns our ingest reads, per table (the same projection the scan baseline reads).
SCAN_COLUMNS = {
    "CUPTI_ACTIVITY_KIND_KERNEL": ["start", "end", "deviceId", "contextId", "streamId", "correlationId", "globalPid",
                                   "demangledName", "shortName", "mangledName", "gridX", "gridY", "gridZ", "blockX",
                                   "blockY", "blockZ", "registersPerThread", "staticSharedMemory",
                                   "dynamicSharedMemory", "localMemoryPerThread", "launchType", "graphNodeId"],
    "CUPTI_ACTIVITY_KIND_RUNTIME": ["start", "end", "eventClass", "globalTid", "correlationId", "nameId", "returnValue"],
    "CUPTI_ACTIVITY_KIND_MEMCPY": ["start", "end", "deviceId", "contextId", "streamId", "correlationId", "globalPid",
                                   "bytes", "copyKind", "srcKind", "dstKind", "migrationCause"],
    "CUPTI_ACTIVITY_KIND_MEMSET": ["start", "end", "deviceId", "contextId", "streamId", "correlationId", "globalPid",
                                   "bytes", "memKind", "value"],
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION": ["start", "end", "deviceId", "contextId", "streamId", "correlationId",
                                            "globalPid", "syncType", "eventId"],
    "NVTX_EVENTS": ["start", "end", "eventType", "text", "textId", "globalTid", "domainId", "category"],
}


def build_export(source: Path, kernels: int, out_dir: Path) -> Path:
    """A copy of ``source`` with its event tables replayed until it holds at least ``kernels`` kernel rows."""
    target = out_dir / f"nsys_replay_{kernels // 1000}k.sqlite"
    if target.exists():
        return target
    tmp = target.with_suffix(".building")
    shutil.copyfile(source, tmp)
    con = sqlite3.connect(tmp)
    con.execute("PRAGMA journal_mode=OFF")
    con.execute("PRAGMA synchronous=OFF")
    con.execute(f"ATTACH '{source}' AS o")
    per_copy = con.execute("SELECT count(*) FROM o.CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    # Each copy starts after everything of the one before (NVTX ranges included, which can outlast the last
    # kernel): every thread's events stay in start order, as in a real export.
    have = {r[0] for r in con.execute("SELECT name FROM o.sqlite_master WHERE type = 'table'")}
    bounds = [con.execute(f'SELECT min(start), max(coalesce("end", start)) FROM o.{t}').fetchone()
              for t in EVENT_TABLES if t in have]
    lo = min(b[0] for b in bounds if b[0] is not None)
    hi = max(b[1] for b in bounds if b[1] is not None)
    span = hi - lo + 1000
    corr = max(con.execute(f"SELECT coalesce(max(correlationId), 0) FROM o.{t}").fetchone()[0]
               for t in EVENT_TABLES[:5]) + 1
    copies = -(-kernels // per_copy)
    for table in EVENT_TABLES:
        cols = [r[1] for r in con.execute(f"PRAGMA o.table_info({table})")]
        if not cols:
            continue
        exprs = []
        for c in cols:
            if c in ("start", "end"):
                exprs.append(f'"{c}" + :k * {span}')
            elif c == "correlationId":
                exprs.append(f"correlationId + :k * {corr}")
            elif c == "eventId":  # NVTX_EVENTS primary key in 2026 exports
                exprs.append("NULL" if table == "NVTX_EVENTS" else c)
            else:
                exprs.append(f'"{c}"')
        sql = f"INSERT INTO main.{table} ({', '.join(chr(34) + c + chr(34) for c in cols)}) SELECT {', '.join(exprs)} FROM o.{table}"
        for k in range(1, copies):
            con.execute(sql, {"k": k})
        con.commit()
    con.close()
    os.replace(tmp, target)
    return target


def sqlite_scan_s(path: Path) -> tuple[float, float]:
    """(wall, CPU) seconds for SQLite itself to aggregate every column the ingest reads, over all event tables."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    have = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    t0, c0 = time.perf_counter(), time.process_time()
    for table, cols in SCAN_COLUMNS.items():
        if table not in have:
            continue
        present = {r[1] for r in con.execute(f"PRAGMA table_info({table})")}
        aggs = ", ".join(f'max("{c}")' for c in cols if c in present)
        con.execute(f"SELECT count(*), {aggs} FROM {table}").fetchone()
    con.execute("SELECT count(*), max(value) FROM StringIds").fetchone()
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    con.close()
    return elapsed, cpu


def python_rows_s(path: Path) -> float:
    """Seconds for Python's sqlite3 merely to iterate the same rows (a floor for a standard-library reader)."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    have = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    t0 = time.perf_counter()
    for table, cols in SCAN_COLUMNS.items():
        if table not in have:
            continue
        present = {r[1] for r in con.execute(f"PRAGMA table_info({table})")}
        cur = con.execute(f"SELECT {', '.join(chr(34) + c + chr(34) for c in cols if c in present)} FROM {table}")
        while cur.fetchmany(100_000):
            pass
    elapsed = time.perf_counter() - t0
    con.close()
    return elapsed


def ingest_once(path: Path) -> dict:
    """Ingest in a fresh process (cold interpreter, store on disk); returns seconds and peak RSS."""
    code = (
        "import json, resource, sys, time\n"
        "from pathlib import Path\n"
        "t0 = time.perf_counter()\n"
        "from nsight_advisor.workflow import ingest_to_store\n"
        "ingest_to_store([Path(sys.argv[1])], Path(sys.argv[2]))\n"
        "ru = resource.getrusage(resource.RUSAGE_SELF)\n"
        "print(json.dumps({'ingest_s': time.perf_counter() - t0, 'ingest_cpu_s': ru.ru_utime + ru.ru_stime,\n"
        "                  'peak_rss_mb': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))\n"
    )
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "bench.duckdb"
        out = subprocess.run([sys.executable, "-c", code, str(path), str(store)], cwd=REPO, check=True,
                             capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
        return json.loads(out.stdout.strip().splitlines()[-1])


def nsys_stats_s(path: Path) -> float | None:
    """Seconds `nsys stats` takes for the kernel and API summaries, or None without nsys."""
    nsys = shutil.which("nsys")
    if not nsys:
        return None
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([nsys, "stats", "--report", "gpukernsum,cudaapisum", "--format", "csv", "--output",
                        str(Path(tmp) / "s"), str(path)], check=False, capture_output=True)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    ap.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()))
    ap.add_argument("--kernels", type=int, nargs="+", default=[1_000_000])
    ap.add_argument("--python-rows", action="store_true",
                    help="also time iterating the rows with Python's sqlite3 (the standard-library alternative)")
    args = ap.parse_args()
    if not args.source.exists():
        sys.exit(f"source export not found: {args.source}")
    print("wall = elapsed seconds; cpu = CPU seconds of the process (all threads), robust to a busy machine")
    print(f"{'kernels':>10} {'size_mb':>8} {'scan_wall_s':>11} {'scan_cpu_s':>10} {'ingest_wall_s':>13} "
          f"{'ingest_cpu_s':>12} {'wall_ratio':>10} {'cpu_ratio':>9} {'nsys_stats_s':>12} {'peak_rss_mb':>11}")
    for n in args.kernels:
        t0 = time.perf_counter()
        path = build_export(args.source, n, args.out)
        build_s = time.perf_counter() - t0
        sqlite_scan_s(path)  # warm the page cache so both sides read from memory
        scan, scan_cpu = min(sqlite_scan_s(path) for _ in range(2))
        run = ingest_once(path)
        stats = nsys_stats_s(path)
        py = python_rows_s(path) if args.python_rows else None
        size_mb = path.stat().st_size / 2**20
        print(f"{n:>10} {size_mb:>8.0f} {scan:>11.2f} {scan_cpu:>10.2f} {run['ingest_s']:>13.2f} "
              f"{run['ingest_cpu_s']:>12.2f} {run['ingest_s'] / scan:>10.1f} {run['ingest_cpu_s'] / scan_cpu:>9.1f} "
              f"{'n/a' if stats is None else f'{stats:.1f}':>12} {run['peak_rss_mb']:>11.0f}"
              f"   (built in {build_s:.0f}s: {path})", flush=True)
        if py is not None:
            print(f"{'':>10} python sqlite3 row iteration alone: {py:.2f} s ({py / scan:.1f}x the SQLite scan)", flush=True)


if __name__ == "__main__":
    main()
