"""Cold `analyze` against `nsys stats`, as a ratio measured in the same run, repeated; optionally against a baseline.

    python benchmarks/bench_cold_ratio.py --runs 5                          # this checkout, 1M kernels
    python benchmarks/bench_cold_ratio.py --runs 5 --baseline /tmp/old     # and an older checkout, interleaved

Each run measures, one after the other on the same replayed export (bench_ingest.build_export): `nsys stats` with
the three summaries the report covers, then a cold `analyze --no-cache -o report.html` of this checkout (and of the
baseline checkout, run from its own folder through PYTHONPATH; the two take turns to run first). Cold is as in bench_small.py: no store and no kept
result, only the support files an earlier run on the machine leaves (the schema template, the compiled report
templates, the rules' parsed TOML); `--first` measures with an empty cache folder instead. On a small shared
machine the anchor moves as much as we do; the ratio of two commands run back to back, and the median over runs,
is what carries over. The table goes to stdout; the numbers of the last measurement are in docs/performance.md.
Without `nsys` on PATH the anchor is left out and, with --baseline, the ratio is this checkout's cold time over
the baseline's in the same run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

from bench_analyze import compile_package, measure, nsys_anchor  # noqa: E402  (one way of measuring a command)
from bench_ingest import DEFAULT_SOURCE, build_export  # noqa: E402  (the one replay generator)


def cold(path: Path, work: Path, checkout: Path, support: Path | None) -> dict:
    """One cold analyze of ``path`` by the code in ``checkout``: a cache folder with no store and no kept result,
    holding only ``support`` (the support files an earlier run left, as bench_small.py's cold), or empty."""
    cache = work / f"cache-{checkout.name}"
    shutil.rmtree(cache, ignore_errors=True)
    if support is not None:
        shutil.copytree(support, cache / "support")
    report = work / "report.html"
    res = measure([sys.executable, "-m", "nsight_advisor", "analyze", str(path), "--no-cache", "-o", str(report),
                   "--quiet"], {"NSIGHT_ADVISOR_CACHE": str(cache), "PYTHONPATH": str(checkout)}, cwd=checkout)
    shutil.rmtree(cache, ignore_errors=True)
    report.unlink(missing_ok=True)
    return res


def support_folder(path: Path, work: Path, label: str, checkout: Path) -> Path:
    """The support folder ``checkout`` leaves after one analyze of ``path`` (not measured)."""
    cache = work / f"warm-{label}"
    res = measure([sys.executable, "-m", "nsight_advisor", "analyze", str(path), "-o", str(work / "warm.html"),
                   "--quiet"], {"NSIGHT_ADVISOR_CACHE": str(cache), "PYTHONPATH": str(checkout)}, cwd=checkout)
    if res["rc"] != 0:
        sys.exit(f"{label}: analyze failed: {res.get('stderr', '')}")
    return cache / "support"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--baseline", type=Path, help="another checkout of nsight-advisor to measure alongside")
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    ap.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()))
    ap.add_argument("--first", action="store_true",
                    help="measure the first run on a machine instead: an empty cache folder, no support files")
    args = ap.parse_args()
    compile_package()  # what an installed copy runs: its bytecode written (bench_analyze.compile_package)
    if args.baseline:
        compile_package(args.baseline)
    have_nsys = shutil.which("nsys") is not None
    if not have_nsys and not args.baseline:
        sys.exit("nsys is not on PATH: the ratio needs `nsys stats` (Debian non-free: apt-get install nsight-systems) "
                 "or --baseline CHECKOUT")
    work = Path(tempfile.mkdtemp(prefix="na-bench-ratio-", dir=args.out))
    try:
        export = build_export(args.source, args.kernels, work)
        checkouts = [("this", REPO)] + ([("baseline", args.baseline.resolve())] if args.baseline else [])
        support = {label: None if args.first else support_folder(export, work, label, checkout)
                   for label, checkout in checkouts}
        rows = []
        for run in range(1, args.runs + 1):
            # without nsys the baseline's cold run is the anchor (ratio this / baseline)
            anchor = nsys_anchor(export, work) if have_nsys else None
            row = {"run": run, "nsys_s": anchor["wall_s"] if anchor else float("nan")}
            # the two checkouts take turns to run first, so that whatever running right after `nsys stats` does
            # (its files in the page cache, the machine's load) does not always fall on the same one
            for label, checkout in (checkouts if run % 2 else checkouts[::-1]):
                res = cold(export, work, checkout, support[label])
                if res["rc"] != 0:
                    sys.exit(f"{label}: cold analyze failed: {res.get('stderr', '')}")
                row[f"{label}_s"] = res["wall_s"]
                row[f"{label}_rss_mb"] = res["peak_rss_mb"]
                row[f"{label}_cpu_s"] = res["cpu_s"]
            for label, _ in checkouts:
                row[f"{label}_ratio"] = row[f"{label}_s"] / (anchor["wall_s"] if anchor else row["baseline_s"])
            rows.append(row)
            print(" ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()),
                  flush=True)
        print(f"\n{args.kernels:,} kernels, {args.runs} runs on {os.cpu_count()} CPUs; ratios against "
              + ("`nsys stats`" if have_nsys else "the baseline's cold run"))
        print("| run | nsys stats s | " + " | ".join(f"{label} cold s | {label} / nsys" for label, _ in checkouts)
              + " |")
        print("|---|---|" + "---|---|" * len(checkouts))
        for r in rows:
            print(f"| {r['run']} | {r['nsys_s']:.2f} | "
                  + " | ".join(f"{r[f'{label}_s']:.2f} | {r[f'{label}_ratio']:.2f}x" for label, _ in checkouts)
                  + " |")
        if args.baseline:
            # CPU seconds (user + system of the command's process tree) move less than wall time on a shared machine
            cpu = [r["this_cpu_s"] / r["baseline_cpu_s"] for r in rows]
            print(f"median CPU time this / baseline: {statistics.median(cpu):.2f}x (range {min(cpu):.2f}x to "
                  f"{max(cpu):.2f}x; this {statistics.median(r['this_cpu_s'] for r in rows):.2f} s, baseline "
                  f"{statistics.median(r['baseline_cpu_s'] for r in rows):.2f} s)")
        for label, _ in checkouts:
            ratios = [r[f"{label}_ratio"] for r in rows]
            print(f"median {label} / {'nsys stats' if have_nsys else 'baseline'}: {statistics.median(ratios):.2f}x "
                  f"(range {min(ratios):.2f}x to {max(ratios):.2f}x); peak RSS up to "
                  f"{max(r[f'{label}_rss_mb'] for r in rows):.0f} MB")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
