"""Many ranks: cold ``analyze`` of the 8 DLRM ranks against HTA, of 64 ranks against 8; ingest on the pool and Ray.

    python benchmarks/bench_ranks.py --hta /tmp/hta-venv/bin/python --runs 3   # analyze: 8 ranks vs HTA, 64 ranks
    python benchmarks/bench_ranks.py --ingest                                 # ingest at 64, 128, 256 ranks
    python benchmarks/bench_ranks.py --ingest --ranks 256 --no-analyze

Analyze (the default): each run, in fresh processes and in this order, HTA's ``TraceAnalysis`` on the 8 real DLRM
ranks with its temporal, communication/computation overlap, kernel and idle time breakdowns (``--hta``: a Python
with HolisticTraceAnalysis installed, never a dependency of this project), then a cold ``nsight-advisor analyze``
of the same 8 files (``--no-cache -o report.html``: ingest, every rule, the HTML; a cache folder holding only the
support files an earlier run leaves, as bench_small.py's cold), then of 64 ranks written by
``../shared/tools/replicate_ranks.py`` (rank r a copy of real rank r % 8 with its rank and world size rewritten),
then the 8 ranks again with an empty cache folder (the first run on a machine). Reported per run: wall seconds,
the driver's peak RSS, and the ratios of that run.

Ingest (``--ingest``):

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
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_analyze import compile_package  # noqa: E402  (one way of preparing the package for measurement)
from synthetic_rank_files import write_ranks  # noqa: E402

DLRM = REPO.parent / "shared" / "traces" / "kineto" / "dlrm_8rank"
TEMPLATE = DLRM / "worker0_step_12.1694128201545.pt.trace.json.gz"
REPLICATE = REPO.parent / "shared" / "tools" / "replicate_ranks.py"

# HTA's four breakdowns on a folder of ranks, as its own examples call them; prints the frames' sizes.
_HTA = ("import sys, time\n"
        "from hta.trace_analysis import TraceAnalysis\n"
        "a = TraceAnalysis(trace_dir=sys.argv[1])\n"
        "t = a.get_temporal_breakdown(visualize=False)\n"
        "o = a.get_comm_comp_overlap(visualize=False)\n"
        "k = a.get_gpu_kernel_breakdown(visualize=False)\n"
        "i = a.get_idle_time_breakdown(visualize=False)\n"
        "print(len(t), len(o), len(k[0]), len(i[0]))\n")

# The command line in a process that writes its own peak RSS (kB on Linux) to a file when it exits.
_DRIVER = ("import atexit, resource, sys\n"
           "out = sys.argv.pop(1)\n"
           "atexit.register(lambda: open(out, 'w').write(str(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)))\n"
           "from nsight_advisor.cli import run\n"
           "run()\n")


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


def timed(cmd: list[str], env: dict | None = None) -> dict:
    """Wall seconds and the peak RSS (MB) of ``cmd``'s own process (GNU time's %M: worker processes not counted)."""
    start = time.perf_counter()
    proc = subprocess.run(["/usr/bin/time", "-f", "%M", *cmd], cwd=REPO, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{cmd[:3]}: exit {proc.returncode}: {proc.stderr[-2000:]}")
    return {"wall_s": round(wall, 2), "peak_rss_mb": round(int(proc.stderr.strip().splitlines()[-1]) / 1024)}


def analyze_runs(args, work: Path) -> None:
    """The 8 DLRM ranks against HTA and 64 ranks against 8, ``args.runs`` times, one line per run.

    ``cold`` (what the ratios use) is as in bench_small.py: a cache folder holding no store and no kept result,
    only the support files any earlier run on the machine leaves (the schema template, the compiled report
    templates, the rules' parsed TOML); ``first`` is the 8 ranks with an empty cache folder, the first run on a
    machine, which makes those files."""
    eight = work / "dlrm8"
    eight.mkdir()
    for f in sorted(DLRM.glob("*.json.gz")):  # a copy: HTA writes nothing, but its folder must hold only ranks
        shutil.copy(f, eight / f.name)
    many = work / f"ranks{args.many}"
    subprocess.run([sys.executable, str(REPLICATE), str(DLRM), str(many), str(args.many)], check=True,
                   capture_output=True)
    warm = work / "warm-cache"  # the support folder a previous run leaves
    subprocess.run([sys.executable, "-m", "nsight_advisor", "analyze", str(TEMPLATE), "-q", "-o",
                    str(work / "w.html")], cwd=REPO, env={**os.environ, "NSIGHT_ADVISOR_CACHE": str(warm)}, check=True)
    load = os.getloadavg()[0]
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cores, load average "
          f"{load:.1f} at the start", flush=True)
    rows = []
    for i in range(args.runs):
        row = {"run": i + 1}
        if args.hta:
            row["hta"] = timed([args.hta, "-c", _HTA, str(eight)])
        for label, folder, support in (("8", eight, True), (str(args.many), many, True), ("8 first", eight, False)):
            cache = work / f"cache-{label.replace(' ', '-')}-{i}"
            if support:
                shutil.copytree(warm / "support", cache / "support")
            env = {**os.environ, "NSIGHT_ADVISOR_CACHE": str(cache)}
            row[label] = timed([sys.executable, "-m", "nsight_advisor", "analyze",
                                *map(str, sorted(folder.glob("*.json.gz"))), "--no-cache", "-q",
                                "-o", str(work / f"report-{label.replace(' ', '-')}.html")], env)
        if args.hta:
            row["8 / hta"] = round(row["8"]["wall_s"] / row["hta"]["wall_s"], 2)
            row["8 first / hta"] = round(row["8 first"]["wall_s"] / row["hta"]["wall_s"], 2)
        row[f"{args.many} / 8"] = round(row[str(args.many)]["wall_s"] / row["8"]["wall_s"], 2)
        rows.append(row)
        print(json.dumps(row), flush=True)
    print(f"| run | HTA s | analyze 8 s (first) | 8 / HTA (first) | analyze {args.many} s | {args.many} / 8 | "
          f"peak RSS MB: HTA / 8 / {args.many} |\n|---|---|---|---|---|---|---|")
    for r in rows:
        hta = r.get("hta") or {}
        print(f"| {r['run']} | {hta.get('wall_s', '-')} | {r['8']['wall_s']} ({r['8 first']['wall_s']}) | "
              f"{r.get('8 / hta', '-')}x ({r.get('8 first / hta', '-')}x) | {r[str(args.many)]['wall_s']} | "
              f"{r[f'{args.many} / 8']}x | {hta.get('peak_rss_mb', '-')} / {r['8']['peak_rss_mb']} / "
              f"{r[str(args.many)]['peak_rss_mb']} |")
    print(f"# load average {os.getloadavg()[0]:.1f} at the end")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ingest", action="store_true", help="measure ingest on the local pool and Ray instead")
    ap.add_argument("--hta", metavar="PYTHON", help="a Python with HolisticTraceAnalysis installed (the anchor)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--many", type=int, default=64, help="ranks of the larger job (default 64)")
    ap.add_argument("--ranks", type=int, nargs="+", default=[64, 128, 256])
    ap.add_argument("--ray-cpus", type=int, default=2)
    ap.add_argument("--no-analyze", action="store_true", help="with --ingest: measure the ingest only")
    args = ap.parse_args()
    compile_package()  # what an installed copy runs: its bytecode written (bench_analyze.compile_package)
    if not args.ingest:
        work = Path(tempfile.mkdtemp(prefix="bench-ranks-"))
        try:
            analyze_runs(args, work)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return
    ingest_runs(args)


def ingest_runs(args) -> None:
    """Ingest at ``args.ranks`` on the local pool and on Ray, and analyze at the largest count."""
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
