"""`compare` against analyzing both sides: two replayed exports of --kernels kernels each, cold caches.

    python benchmarks/bench_compare.py                       # 1M kernels
    python benchmarks/bench_compare.py --kernels 200000

BASE is a replay of a real export (``bench_ingest.build_export``); HEAD is a copy of it with every kernel's
duration jittered by a seeded +-1%, so both ingests and every bootstrap run in full. Measured, each command in a
fresh process with an empty cache: ``analyze BASE`` + ``analyze HEAD`` (JSON), then ``compare BASE HEAD`` (JSON),
which analyzes both (HEAD in a second process while BASE is analyzed) and compares. The target: compare takes no
longer than the two analyses (docs/performance.md). CPU seconds are printed beside wall time: on a loaded machine
the two processes of compare may take a larger share of the cores than one analyze does.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sqlite3
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_analyze import measure  # noqa: E402
from bench_ingest import DEFAULT_SOURCE, build_export  # noqa: E402


def jittered_copy(src: Path, dst: Path, fraction: float = 0.01, seed: int = 7) -> Path:
    """``src`` copied to ``dst`` with every kernel's duration scaled by a seeded factor in 1 +- ``fraction``."""
    shutil.copyfile(src, dst)
    con = sqlite3.connect(dst)
    con.execute("PRAGMA journal_mode=OFF")
    rng = random.Random(seed)
    rows = con.execute("SELECT rowid, start, \"end\" FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchall()
    con.executemany('UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET "end" = ? WHERE rowid = ?',
                    [(s + max(1, round((e - s) * (1 + rng.uniform(-fraction, fraction)))), r) for r, s, e in rows])
    con.commit()
    con.close()
    return dst


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    ap.add_argument("--kernels", type=int, default=1_000_000)
    ap.add_argument("--keep", action="store_true", help="keep the exports")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-compare-"))
    try:
        base = build_export(args.source, args.kernels, work)
        head = jittered_copy(base, work / "head.sqlite")
        times = {}
        for label, argv in (
            ("analyze BASE", ["analyze", str(base), "--format", "json", "-o", str(work / "a.json")]),
            ("analyze HEAD", ["analyze", str(head), "--format", "json", "-o", str(work / "b.json")]),
            ("compare BASE HEAD", ["compare", str(base), str(head), "-o", str(work / "c.json")]),
        ):
            cache = work / f"cache-{len(times)}"
            r = measure([sys.executable, "-m", "nsight_advisor", *argv], env={"NSIGHT_ADVISOR_CACHE": str(cache)})
            if r["rc"] != 0:
                raise SystemExit(f"{label} failed: {r.get('stderr')}")
            times[label] = r
            shutil.rmtree(cache, ignore_errors=True)
        both = times["analyze BASE"]["wall_s"] + times["analyze HEAD"]["wall_s"]
        cpu = times["analyze BASE"]["cpu_s"] + times["analyze HEAD"]["cpu_s"]
        print(f"| {args.kernels:,} kernels a side | wall s | CPU s | peak RSS MB (largest process) |")
        print("|---|---|---|---|")
        for label, r in times.items():
            print(f"| {label} | {r['wall_s']:.2f} | {r['cpu_s']:.2f} | {r['peak_rss_mb']:.0f} |")
        c = times["compare BASE HEAD"]
        print(f"| compare / (analyze BASE + analyze HEAD) | {c['wall_s'] / both:.2f} | {c['cpu_s'] / cpu:.2f} | |")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
