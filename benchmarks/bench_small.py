"""A small capture's cold ``analyze`` against the floor of any Python reader of it, measured side by side.

    python benchmarks/bench_small.py [EXPORT.sqlite ...] [--runs 5]

The floor: a fresh Python process that imports duckdb and pyarrow and reads the export's kernel table into Arrow
(DuckDB's sqlite scanner, as our ingest reads it). Against it, in fresh processes, interleaved run by run:

- ``cold``: ``nsight-advisor analyze EXPORT --no-cache -o report.html`` with a cache folder that holds no store and
  no kept result for the export, but the support files any earlier run on the machine leaves (the schema template
  and the compiled report templates; nsight_advisor/store/schema_template.py);
- ``first``: the same with an empty cache folder: the first run on a machine, which makes those files.

Wall and CPU seconds (user + sys of the process tree, from wait4), the ratios of each run, and the load average.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_analyze import compile_package  # noqa: E402  (one way of preparing the package for measurement)
DEFAULT = [REPO.parent / "shared" / "traces" / "nsys" / n for n in ("csc746_vecadd.sqlite", "cutlass_benchmark.sqlite",
                                                                       "nsys_ai_h100_2gpu_1s.sqlite")]
FLOOR = ("import sys, importlib.util, duckdb, pyarrow\n"
         "from pathlib import Path\n"
         "spec = importlib.util.find_spec('duckdb_extension_sqlite_scanner')\n"
         "ext = Path(list(spec.submodule_search_locations)[0]) / 'extensions' / f'v{duckdb.__version__}' / "
         "'sqlite_scanner.duckdb_extension'\n"
         "con = duckdb.connect()\n"
         "con.execute(f\"LOAD '{ext}'\")\n"
         "t = con.execute(f\"select * from sqlite_scan('{sys.argv[1]}', 'CUPTI_ACTIVITY_KIND_KERNEL')\").to_arrow_table()\n"
         "print(t.num_rows)\n")


def measure(cmd: list[str], env: dict | None = None) -> tuple[float, float]:
    """(wall s, CPU s of the process and its children) of ``cmd``."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{cmd[:4]} failed: {proc.stderr.read().decode()[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("exports", nargs="*", type=Path, default=DEFAULT)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    compile_package()  # what an installed copy runs: its bytecode written (bench_analyze.compile_package)
    work = Path(tempfile.mkdtemp(prefix="bench-small-"))
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cores, load average "
          f"{os.getloadavg()[0]:.1f} at the start")
    print("| export | run | floor wall s (CPU) | cold wall s (CPU) | cold / floor wall (CPU) | first wall s (CPU) "
          "| first / floor wall |\n|---|---|---|---|---|---|---|")
    try:
        warm = work / "warm-cache"  # the support folder a previous run leaves
        subprocess.run([sys.executable, "-m", "nsight_advisor", "analyze", str(args.exports[0]), "-q", "-o",
                        str(work / "w.html")], cwd=REPO, env={**os.environ, "NSIGHT_ADVISOR_CACHE": str(warm)},
                       check=True)
        for e, export in enumerate(args.exports):
            for i in range(args.runs):
                floor = measure([sys.executable, "-c", FLOOR, str(export)])
                cache = work / f"cold-{e}-{i}"
                shutil.copytree(warm / "support", cache / "support")
                cold = measure([sys.executable, "-m", "nsight_advisor", "analyze", str(export), "--no-cache", "-q",
                                "-o", str(work / "r.html")], {**os.environ, "NSIGHT_ADVISOR_CACHE": str(cache)})
                first = measure([sys.executable, "-m", "nsight_advisor", "analyze", str(export), "--no-cache", "-q",
                                 "-o", str(work / "r.html")],
                                {**os.environ, "NSIGHT_ADVISOR_CACHE": str(work / f"first-{e}-{i}")})
                print(f"| {export.name} | {i + 1} | {floor[0]:.2f} ({floor[1]:.2f}) | {cold[0]:.2f} ({cold[1]:.2f}) | "
                      f"{cold[0] / floor[0]:.2f}x ({cold[1] / floor[1]:.2f}x) | {first[0]:.2f} ({first[1]:.2f}) | "
                      f"{first[0] / floor[0]:.2f}x |", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"# load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
