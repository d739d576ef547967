"""Whole-`analyze` benchmark: ingest + every rule + the HTML report, against SQLite's scan and `nsys stats`.

    python benchmarks/bench_analyze.py                                 # 1M and 10M kernels
    python benchmarks/bench_analyze.py --kernels 1000000 --no-write    # one size, leave docs alone
    python benchmarks/bench_analyze.py --profile                       # also cProfile a cold run (first size)

Exports are built on the fly by replaying a real one (``bench_ingest.build_export``: each copy of the
event tables shifted in time, correlation ids kept unique) into --out (default: the temp folder), and
deleted afterwards unless --keep. The 10M-kernel export is about 6 GB: the free space is checked first.

Measured per size, all in one run, each command in a fresh process (peak RSS is that process tree's
largest resident set, from getrusage(RUSAGE_CHILDREN) of a wrapper that waits for it):

* ``sqlite scan``: SQLite itself aggregating every column our ingest reads, over the same tables
  (``bench_ingest.SCAN_COLUMNS``, in C: the floor for any reader); best of two after a warm-up;
* ``nsys stats``: gpukernsum, cudaapisum and gpumemtimesum, when ``nsys`` is on PATH;
* ``cold``: ``nsight-advisor analyze EXPORT --no-cache -o report.html`` with an empty cache (its store
  leaves out the tables no rule reads: NVTX ranges and GPU metrics, see ``capture_deferred``);
* ``ingest``: ``nsight-advisor ingest EXPORT --store S``: every table, NVTX ranges with their depth included;
* ``warm``: the same command again without --no-cache (the cached store is reused): best of three;
* ``rules + HTML on the cached store``: every rule and the render again on the cached store (what a warm
  run costs when rules or settings changed, so that the kept result cannot be reused);

then the ratios (cold / nsys stats, cold / sqlite scan), the HTML size, and the temporary files left
behind (cache folder, output folder and the temp folder are checked). The table is printed and written
into docs/performance.md between its ``bench:begin`` and ``bench:end`` markers.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

from bench_ingest import DEFAULT_SOURCE, SCAN_COLUMNS, build_export  # noqa: E402  (the one replay generator)

DOC = REPO / "docs" / "performance.md"
BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"
BYTES_PER_KERNEL = 620  # size of the replayed export per kernel row (575 MB per 1M kernels, measured)

# Runs `argv` in a child and prints {"wall_s", "peak_rss_mb", "rc"} as JSON: the child's own tree is the only
# thing this wrapper waits for, so RUSAGE_CHILDREN is exactly that tree's peak.
_MEASURE = r"""
import json, resource, subprocess, sys, time
t0 = time.perf_counter()
rc = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
wall = time.perf_counter() - t0
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
peak = usage.ru_maxrss / 1024
sys.stderr.write(rc.stderr.decode("utf-8", "replace")[-2000:])
print(json.dumps({"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime, "peak_rss_mb": peak, "rc": rc.returncode,
                  "stdout": rc.stdout.decode("utf-8", "replace")[-2000:]}))
"""


# The store comes from the cache, but every rule runs and the report renders: what a warm run costs when
# the rules or settings changed (the kept result cannot be reused).
_RULES_ON_CACHED_STORE = r"""
import sys
from pathlib import Path
from nsight_advisor import workflow
from nsight_advisor.engine.analyze import run_analysis
from nsight_advisor.report import render
con, ids = workflow.load([Path(sys.argv[1])], for_rules=True)  # the store the cold analyze built
con.execute(f"SET memory_limit = '{workflow.ANALYSIS_MEMORY_LIMIT}'")  # as analyze does
result = run_analysis(con, ids)
con.close()
Path(sys.argv[2]).write_text(render(result, "html"), encoding="utf-8")
print(sum(o.elapsed_s for o in result.outcomes))
"""


def compile_package(checkout: Path = REPO) -> None:
    """Write the bytecode of ``checkout``'s package, as ``pip install`` does for an installed copy: with stale or
    absent .pyc files (a fresh checkout, or PYTHONDONTWRITEBYTECODE set) every run would compile the sources
    again, 0.07 s of a small capture's cold run that no installed copy pays."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(checkout / "nsight_advisor")], check=True,
                   stdout=subprocess.DEVNULL)


def measure(argv: list[str], env: dict | None = None, cwd: Path = REPO) -> dict:
    """Wall time, CPU time, peak RSS (MB) and exit code of ``argv`` run in a fresh process tree, in ``cwd``
    (``python -m`` puts the working folder first on sys.path, ahead of PYTHONPATH: it decides which checkout
    runs)."""
    out = subprocess.run([sys.executable, "-c", _MEASURE, *argv], capture_output=True, text=True, cwd=cwd,
                         env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})})
    result = json.loads(out.stdout.strip().splitlines()[-1])
    if result["rc"] != 0:
        result["stderr"] = out.stderr.strip()[-1500:]
    return result


_SCAN = r"""
import json, sqlite3, sys, time
path, columns = sys.argv[1], json.loads(sys.argv[2])
def scan():
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    have = {r[0] for r in con.execute("select name from sqlite_master where type = 'table'")}
    t0, c0 = time.perf_counter(), time.process_time()
    for table, cols in columns.items():
        if table in have:
            present = {r[1] for r in con.execute(f"pragma table_info({table})")}
            aggs = ", ".join(f'max("{c}")' for c in cols if c in present)
            con.execute(f"select count(*), {aggs} from {table}").fetchone()
    con.execute("select count(*), max(value) from StringIds").fetchone()
    out = (time.perf_counter() - t0, time.process_time() - c0)
    con.close()
    return out
scan()
print(json.dumps(min(scan() for _ in range(2))))
"""


def sqlite_anchor(path: Path) -> dict:
    """SQLite's own aggregate scan of every column our ingest reads (bench_ingest.SCAN_COLUMNS), in C.

    Best of two after a warm-up, in a fresh process; ``scan_s``/``scan_cpu_s`` are the scan alone.
    """
    res = measure([sys.executable, "-c", _SCAN, str(path), json.dumps(SCAN_COLUMNS)])
    if res["rc"] == 0:
        res["scan_s"], res["scan_cpu_s"] = json.loads(res["stdout"].strip().splitlines()[-1])
    else:
        res["scan_s"] = res["scan_cpu_s"] = None
    return res


def nsys_anchor(path: Path, work: Path) -> dict | None:
    """`nsys stats` for the three summaries nsight-advisor's report covers, or None without nsys."""
    nsys = shutil.which("nsys")
    if not nsys:
        return None
    res = measure([nsys, "stats", "--report", "gpukernsum,cudaapisum,gpumemtimesum", "--format", "csv",
                   "--output", str(work / "nsys_stats"), str(path)])
    res["version"] = subprocess.run([nsys, "--version"], capture_output=True, text=True).stdout.strip()
    for f in work.glob("nsys_stats*"):
        f.unlink()
    return res


def analyze_runs(path: Path, work: Path, profile: bool, rerun: bool = True) -> dict:
    """Cold (--no-cache, empty cache) and warm analyze of ``path`` into an HTML report."""
    cache = work / "cache"
    report = work / "report.html"
    env = {"NSIGHT_ADVISOR_CACHE": str(cache)}
    base = [sys.executable, "-m", "nsight_advisor", "analyze", str(path), "-o", str(report), "--quiet"]
    cold = measure(base + ["--no-cache"], env)
    # Every table, NVTX included (analyze leaves out what no rule reads): the foundation's ingest target.
    full = work / "full.duckdb"
    ingest = measure([sys.executable, "-m", "nsight_advisor", "ingest", str(path), "--store", str(full), "--quiet"],
                     env)
    ingest["store_bytes"] = full.stat().st_size if full.exists() else None
    full.unlink(missing_ok=True)
    warm_runs = [measure(base, env) for _ in range(3)]
    warm = min(warm_runs, key=lambda r: r["wall_s"])
    warm["peak_rss_mb"] = max(r["peak_rss_mb"] for r in warm_runs)
    rerun_run = None
    if rerun:
        rerun_run = measure([sys.executable, "-c", _RULES_ON_CACHED_STORE, str(path), str(work / "rerun.html")], env)
        (work / "rerun.html").unlink(missing_ok=True)
    out = {"cold": cold, "ingest": ingest, "warm": warm, "rerun": rerun_run, "html_bytes": report.stat().st_size if report.exists() else None,
           "store_bytes": sum(p.stat().st_size for p in cache.glob("*.duckdb"))}
    # Kept: the stores and the kept results with their rendered reports; anything else (a lock, a temporary
    # build, a worker's folder, a spill folder) is a leftover.
    kept = set(cache.glob("*.duckdb")) | {p for p in cache.glob("results/*") if not p.name.startswith(".")}
    kept.add(cache / "results")
    leftovers = [str(p.relative_to(cache)) for p in cache.rglob("*") if p not in kept] if cache.exists() else []
    leftovers += [p.name for p in work.iterdir() if p.name not in ("cache", "report.html", "profile")]
    out["leftovers"] = leftovers
    if profile:
        out["profile"] = profile_cold(path, work)
    shutil.rmtree(cache, ignore_errors=True)
    report.unlink(missing_ok=True)
    return out


def profile_cold(path: Path, work: Path, top: int = 25) -> str:
    """cProfile of one cold analyze (in-process, fresh interpreter): the top functions by cumulative time."""
    prof = work / "profile" / "cold.prof"
    prof.parent.mkdir(exist_ok=True)
    code = ("import cProfile, sys; from pathlib import Path; from nsight_advisor import workflow\n"
            "def run():\n"
            "    r = workflow.analyze([Path(sys.argv[1])], use_cache=False)\n"
            "    workflow.write_report(r, 'html', Path(sys.argv[3]))\n"
            "cProfile.run('run()', sys.argv[2])\n")
    env = {**os.environ, "PYTHONPATH": str(REPO), "NSIGHT_ADVISOR_CACHE": str(work / "profile" / "cache")}
    subprocess.run([sys.executable, "-c", code, str(path), str(prof), str(work / "profile" / "r.html")],
                   cwd=REPO, env=env, check=True, capture_output=True)
    import io
    import pstats

    buf = io.StringIO()
    pstats.Stats(str(prof), stream=buf).sort_stats("cumulative").print_stats(top)
    shutil.rmtree(prof.parent, ignore_errors=True)
    return "\n".join(line for line in buf.getvalue().splitlines() if line.strip())


def new_temp_entries(before: set[str]) -> list[str]:
    """Entries of the temp folder that appeared during the run and are named the way nsight-advisor names its
    temporary files (others share the temp folder): ingest work folders, store builds, crash reports."""
    tmp = Path(tempfile.gettempdir())
    now = {p.name for p in tmp.iterdir()}
    ours = ("nsight-advisor", ".nsight-advisor")
    return sorted(n for n in now - before if n.startswith(ours) or ".build-" in n)


def check_space(out: Path, kernels: int) -> None:
    need = kernels * BYTES_PER_KERNEL * 2.5  # the export, its store, and the store's temporary build
    free = shutil.disk_usage(out).free
    if free < need:
        sys.exit(f"not enough free space in {out}: {free / 2**30:.1f} GiB free, about {need / 2**30:.1f} GiB needed "
                 f"for {kernels:,} kernels (pick another --out)")


def bench_size(source: Path, kernels: int, out: Path, keep: bool, profile: bool, rerun: bool = True) -> dict:
    check_space(out, kernels)
    t0 = time.perf_counter()
    export = build_export(source, kernels, out)
    built_s = time.perf_counter() - t0
    work = Path(tempfile.mkdtemp(prefix="bench-analyze-", dir=out))
    try:
        row = {"kernels": kernels, "export_bytes": export.stat().st_size, "build_s": built_s,
               "activity_rows": activity_rows(export)}
        row["sqlite"] = sqlite_anchor(export)
        row["nsys"] = nsys_anchor(export, work)
        row.update(analyze_runs(export, work, profile, rerun))
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if not keep:
            export.unlink(missing_ok=True)
    return row


def activity_rows(export: Path) -> int:
    import sqlite3

    from bench_ingest import EVENT_TABLES

    con = sqlite3.connect(f"file:{export}?mode=ro", uri=True)
    try:
        have = {r[0] for r in con.execute("select name from sqlite_master where type = 'table'")}
        return sum(con.execute(f"select count(*) from {t}").fetchone()[0] for t in EVENT_TABLES if t in have)
    finally:
        con.close()


def _s(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}"


def _ratio(a: float | None, b: float | None) -> str:
    return "n/a" if not a or not b else f"{a / b:.2f}x"


def table(rows: list[dict]) -> str:
    """The markdown table of results: wall seconds, with CPU seconds (user + sys) in parentheses."""
    head = ("| kernels | export | activity rows | SQLite scan s | nsys stats s | cold analyze s | cold / nsys stats "
            "| cold / SQLite scan | full ingest s | ingest / SQLite scan | warm analyze s "
            "| rules + HTML on the cached store s | peak RSS MB: nsys / cold / ingest / warm "
            "| HTML | store | temp files left |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    lines = [head]
    for r in rows:
        sq, n, cold, warm = r["sqlite"], r["nsys"], r["cold"], r["warm"]
        ok_n = n is not None and n["rc"] == 0
        nsys_s, nsys_cpu = (n["wall_s"], n["cpu_s"]) if ok_n else (None, None)
        cold_s, cold_cpu = (cold["wall_s"], cold["cpu_s"]) if cold["rc"] == 0 else (None, None)
        warm_s, warm_cpu = (warm["wall_s"], warm["cpu_s"]) if warm["rc"] == 0 else (None, None)
        ing = r.get("ingest") or {"rc": 1, "peak_rss_mb": 0}
        ing_s, ing_cpu = (ing["wall_s"], ing["cpu_s"]) if ing["rc"] == 0 else (None, None)
        rr = r.get("rerun") or {"rc": 1}
        rerun_s, rerun_cpu = (rr["wall_s"], rr["cpu_s"]) if rr["rc"] == 0 else (None, None)
        nsys_cell = f"{_s(nsys_s)} ({_s(nsys_cpu)})" if n else "not installed"
        left = r["leftovers"] + r.get("temp_left", [])
        lines.append(
            f"| {r['kernels']:,} | {r['export_bytes'] / 2**20:,.0f} MB | {r['activity_rows']:,} "
            f"| {_s(sq['scan_s'])} ({_s(sq['scan_cpu_s'])}) | {nsys_cell} | {_s(cold_s)} ({_s(cold_cpu)}) "
            f"| {_ratio(cold_s, nsys_s)} ({_ratio(cold_cpu, nsys_cpu)}) "
            f"| {_ratio(cold_s, sq['scan_s'])} ({_ratio(cold_cpu, sq['scan_cpu_s'])}) "
            f"| {_s(ing_s)} ({_s(ing_cpu)}) | {_ratio(ing_s, sq['scan_s'])} ({_ratio(ing_cpu, sq['scan_cpu_s'])}) "
            f"| {_s(warm_s)} ({_s(warm_cpu)}) "
            f"| {_s(rerun_s)} ({_s(rerun_cpu)}) | {n['peak_rss_mb'] if ok_n else 0:.0f} / {cold['peak_rss_mb']:.0f} "
            f"/ {ing['peak_rss_mb']:.0f} / {warm['peak_rss_mb']:.0f} "
            f"| {(r['html_bytes'] or 0) / 2**20:.2f} MB | {r['store_bytes'] / 2**20:,.0f} MB "
            f"| {', '.join(left) if left else 'none'} |"
        )
    return "\n".join(lines)


def machine() -> str:
    cores = os.cpu_count()
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    load = os.getloadavg()[0]
    return (f"{platform.machine()}, {cores} cores, {mem:.0f} GiB RAM, Python {platform.python_version()}, "
            f"load average {load:.1f} at the start")


def write_doc(text: str) -> None:
    doc = DOC.read_text(encoding="utf-8") if DOC.exists() else f"# Performance\n\n{BEGIN}\n{END}\n"
    if BEGIN not in doc or END not in doc:
        doc += f"\n{BEGIN}\n{END}\n"
    start, end = doc.index(BEGIN) + len(BEGIN), doc.index(END)
    DOC.write_text(doc[:start] + "\n" + text + "\n" + doc[end:], encoding="utf-8")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE, help="real nsys export to replay")
    ap.add_argument("--kernels", type=int, nargs="+", default=[1_000_000, 10_000_000])
    ap.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()), help="where exports are built")
    ap.add_argument("--keep", action="store_true", help="keep the built exports")
    ap.add_argument("--profile", action="store_true", help="cProfile one more cold analyze of the first size")
    ap.add_argument("--no-write", action="store_true", help="print only; leave docs/performance.md alone")
    ap.add_argument("--json", type=Path, help="also write the raw measurements here")
    ap.add_argument("--rerun-up-to", type=int, default=10**9, metavar="KERNELS",
                    help="measure 'rules + HTML on the cached store' only up to this many kernels")
    args = ap.parse_args()
    if not args.source.exists():
        sys.exit(f"source export not found: {args.source} (the real traces live in ../shared/traces)")
    started = dt.datetime.now(dt.timezone.utc)
    header = f"Measured {started:%Y-%m-%d %H:%M} UTC on {machine()}; source `{args.source.name}`."
    print(header, flush=True)
    rows = []
    for n in args.kernels:
        before = {p.name for p in Path(tempfile.gettempdir()).iterdir()}
        row = bench_size(args.source, n, args.out, args.keep, args.profile and n == args.kernels[0],
                         rerun=n <= args.rerun_up_to)
        row["temp_left"] = new_temp_entries(before)
        rows.append(row)
        print(table([row]).splitlines()[-1], flush=True)
        for key in ("cold", "ingest", "warm", "rerun"):
            if row[key] is not None and row[key]["rc"] != 0:
                print(f"  {key} analyze failed (exit {row[key]['rc']}): {row[key].get('stderr', '')}", flush=True)
        if row.get("profile"):
            print(row["profile"], flush=True)
    text = header + "\n\n" + table(rows)
    print("\n" + text)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2, default=str), encoding="utf-8")
    if not args.no_write:
        write_doc(text)
        print(f"\nwritten to {DOC.relative_to(REPO)}")


if __name__ == "__main__":
    main()
