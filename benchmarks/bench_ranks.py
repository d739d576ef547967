"""Many ranks on the local pool and on Ray: wall time and the driver's peak RSS at 64, 128 and 256 ranks.

    python benchmarks/bench_ranks.py                        # ingest at 64, 128, 256 ranks; analyze at 256
    python benchmarks/bench_ranks.py --ranks 256 --no-analyze

The ranks are Kineto traces written by ``tests/synthetic_rank_files.py`` from rank 0 of the real DLRM set (8
NCCL kernels among 245 per rank; rank 37 slow). For each executor, each command runs in a fresh process with an
empty cache: ``ingest RANKS --store S --executor E`` (the part the executor distributes), and at the largest
count ``analyze RANKS --format json --no-cache --executor E``. The driver's peak RSS is the command's own
``ru_maxrss`` (RUSAGE_SELF: local worker processes and Ray workers are not counted; they are other processes).
Ray runs on a local cluster of ``--ray-cpus`` CPUs that this script starts (``ray.init``) and stops.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from synthetic_rank_files import write_ranks  # noqa: E402

TEMPLATE = (REPO.parent / "shared" / "traces" / "kineto" / "dlrm_8rank"
            / "worker0_step_12.1694128201545.pt.trace.json.gz")

# The command line in a process that writes its own peak RSS (kB on Linux) to a file when it exits.
_DRIVER = ("import atexit, resource, sys\n"
           "out = sys.argv.pop(1)\n"
           "atexit.register(lambda: open(out, 'w').write(str(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)))\n"
           "from nsight_advisor.cli import main\n"
           "main()\n")


def run(argv: list[str], work: Path, label: str) -> dict:
    """Wall seconds and the driver's peak RSS (MB) of ``nsight-advisor argv``, with an empty cache."""
    cache = work / f"cache-{label}"
    rss_file = work / f"rss-{label}"
    env = {**os.environ, "NSIGHT_ADVISOR_CACHE": str(cache)}
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", _DRIVER, str(rss_file), *argv], cwd=REPO, env=env,
                          capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{label}: exit {proc.returncode}: {proc.stderr[-2000:]}")
    shutil.rmtree(cache, ignore_errors=True)
    return {"wall_s": round(wall, 1), "driver_peak_rss_mb": round(int(rss_file.read_text()) / 1024)}


def _executor(kind: str, address: str) -> list[str]:
    return ["--executor", "ray", "--ray-address", address] if kind == "ray" else ["--executor", "local"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, nargs="+", default=[64, 128, 256])
    ap.add_argument("--ray-cpus", type=int, default=2)
    ap.add_argument("--no-analyze", action="store_true", help="measure the ingest only")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-ranks-"))
    import ray

    ray.init(address="local", num_cpus=args.ray_cpus, include_dashboard=False, log_to_driver=False)
    address = ray.get_runtime_context().gcs_address
    rows = []
    try:
        ranks = write_ranks(TEMPLATE, work / "ranks", max(args.ranks), slow_rank=37)
        for n in sorted(args.ranks):
            for executor in ("local", "ray"):
                store = work / f"{executor}-{n}.duckdb"
                r = run(["ingest", *map(str, ranks[:n]), "--store", str(store), "-q", *_executor(executor, address)],
                        work, f"ingest-{executor}-{n}")
                store.unlink()
                rows.append({"command": "ingest", "ranks": n, "executor": executor, **r})
                print(json.dumps(rows[-1]), flush=True)
        if not args.no_analyze:
            n = max(args.ranks)
            for executor in ("local", "ray"):
                r = run(["analyze", *map(str, ranks[:n]), "--format", "json", "-o", str(work / "r.json"),
                         "--no-cache", "-q", *_executor(executor, address)], work, f"analyze-{executor}-{n}")
                rows.append({"command": "analyze", "ranks": n, "executor": executor, **r})
                print(json.dumps(rows[-1]), flush=True)
    finally:
        ray.shutdown()
        shutil.rmtree(work, ignore_errors=True)
    print("| command | ranks | executor | wall s | driver peak RSS MB |\n|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['command']} | {r['ranks']} | {r['executor']} | {r['wall_s']} | {r['driver_peak_rss_mb']} |")


if __name__ == "__main__":
    main()
