"""Kineto ingest benchmark: build a large PyTorch profiler trace by replaying a real one, then time our ingest
against a plain streaming parse of the same file, and report both peak RSS figures.

    python benchmarks/bench_kineto.py                    # ~2 GB (uncompressed) replay of hta_nccl_data
    python benchmarks/bench_kineto.py --gb 0.2           # a quick one
    python benchmarks/bench_kineto.py --duckdb-json      # also try DuckDB's own JSON reader on the file

The replay is the source trace's header followed by its events copied N times, each copy shifted in time past
the previous one (timestamps shifted by exact decimal arithmetic on the file's digits) and with correlation and
External ids offset so they stay unique. It goes to --out (default /tmp) and is reused when present; never
commit it.

Each measurement runs in a fresh process, one after the other, in the same run:

* parse: ijson's C backend (``yajl2_c``) iterating ``traceEvents`` one dict at a time and doing nothing with
  them: the plain streaming parse the target is set against (run before and after the ingest);
* parse, stdlib (``--stdlib-parse``): the same with the reader the ingest uses (``nsight_advisor.ingest.
  json_stream``: the standard library's C scanner over a window of the file), which is faster than ijson, so the
  ingest's cost beyond its own parser shows too;
* ingest: ``nsight-advisor ingest FILE --store STORE`` (store on disk), the whole command;
* cold analyze (optional): ``nsight-advisor analyze FILE --no-cache`` with an empty cache: the ingest without
  ``cpu_ops`` (no rule reads them; listed in ``capture_deferred``), every rule, a JSON report;
* duckdb-json (optional): DuckDB's ``read_json`` counting the events, with a 1 GB memory limit.

Reported: wall seconds and peak RSS of each, and ingest / parse.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import resource
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_SOURCE = REPO.parent / "shared" / "traces" / "kineto" / "hta_nccl_data.json.gz"


def build_replay(source: Path, out: Path, target_bytes: int) -> Path:
    """Write the replay of ``source`` (at least ``target_bytes`` long) to ``out``; reuse it when present."""
    if out.exists() and out.stat().st_size >= target_bytes:
        return out
    with gzip.open(source, "rt", encoding="utf-8") as fh:
        trace = json.load(fh, parse_float=Decimal)
    events = trace.pop("traceEvents")
    starts = [e["ts"] for e in events if "ts" in e]
    ends = [e["ts"] + e.get("dur", 0) for e in events if "ts" in e]
    period = (max(ends) - min(starts)) + 1000  # each copy starts 1 ms after the previous one ends
    max_id = max([int(e.get("args", {}).get(k, 0)) for e in events for k in ("correlation", "External id")
                  if isinstance(e.get("args", {}).get(k, 0), int)] + [0]) + 1
    templates = []
    for original in events:  # each event as text with markers where the copy's values go
        e = _with_decimals_as_text(original)
        fields = {}
        if "ts" in e:
            fields["__TS__"] = Decimal(original["ts"])
            e["ts"] = "__TS__"
        args = e.get("args") or {}
        for key, marker in (("correlation", "__CORR__"), ("External id", "__EXT__")):
            if isinstance(args.get(key), int):
                fields[marker] = args[key]
                args[key] = marker
        templates.append((_DECIMAL.sub(r"\1", json.dumps(e)), fields))
    header = _DECIMAL.sub(r"\1", json.dumps(_with_decimals_as_text(trace)))[:-1]  # without the closing brace
    tmp = out.with_name(out.name + ".part")
    written = 0
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(header + (", " if trace else "") + '"traceEvents": [\n')
        copy, first = 0, True
        while written < target_bytes:
            shift = period * copy
            for text, fields in templates:
                for marker, value in fields.items():
                    if marker == "__TS__":
                        text = text.replace('"__TS__"', str(value + shift))
                    else:
                        text = text.replace(f'"{marker}"', str(value + max_id * copy))
                fh.write(("" if first else ",\n") + text)
                first = False
            written = fh.tell()
            copy += 1
        fh.write('\n], "traceName": "replay"}\n')
    os.replace(tmp, out)
    return out


_DECIMAL = re.compile(r'"@@(-?[0-9.]+)@@"')


def _with_decimals_as_text(value):
    """``value`` with each Decimal as a marked string, so its digits survive json.dumps unchanged."""
    if isinstance(value, Decimal):
        return f"@@{value}@@"
    if isinstance(value, dict):
        return {k: _with_decimals_as_text(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_with_decimals_as_text(v) for v in value]
    return value


_PARSE = """
import ijson, sys
n = 0
with open(sys.argv[1], 'rb') as fh:
    for _ in ijson.items(fh, 'traceEvents.item', buf_size=1 << 20):
        n += 1
print(n)
"""

# The same plain parse with the reader the ingest uses (the standard library's C scanner over a window of the
# file), so the ingest's cost beyond its own parser shows too.
_PARSE_STDLIB = """
import sys
from nsight_advisor.ingest.kineto.json_stream import iter_array
n = 0
with open(sys.argv[1], 'rb') as fh:
    for _ in iter_array(fh, 'traceEvents'):
        n += 1
print(n)
"""

_ANALYZE = """
import os, shutil, subprocess, sys
shutil.rmtree(sys.argv[2], ignore_errors=True)
env = dict(os.environ, NSIGHT_ADVISOR_CACHE=sys.argv[2])
proc = subprocess.run([sys.executable, "-m", "nsight_advisor", "analyze", sys.argv[1], "--no-cache", "-q",
                       "--format", "json", "-o", sys.argv[3]], env=env)
shutil.rmtree(sys.argv[2], ignore_errors=True)
print("analyzed" if proc.returncode in (0, 1) else f"analyze exit {proc.returncode}")
"""

_DUCKDB = """
import duckdb, sys
con = duckdb.connect()
con.execute("SET memory_limit = '1GB'")
print(con.execute(f"SELECT count(*) FROM (SELECT unnest(traceEvents) FROM read_json('{sys.argv[1]}', "
                  "maximum_object_size = 4000000000))").fetchone()[0])
"""


def timed(cmd: list[str], timeout: float | None = None) -> tuple[float, str]:
    """Run ``cmd``; its wall seconds and the last line it printed."""
    t = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=REPO)
        text = (proc.stdout + proc.stderr).strip()
    except subprocess.TimeoutExpired:
        text = f"timed out after {timeout:.0f} s"
    wall = time.perf_counter() - t
    return wall, text.splitlines()[-1] if text else ""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    ap.add_argument("--gb", type=float, default=2.0, help="size of the replay, GB uncompressed (default 2)")
    ap.add_argument("--out", type=Path, default=Path("/tmp"))
    ap.add_argument("--duckdb-json", action="store_true", help="also time DuckDB's read_json on the replay")
    ap.add_argument("--stdlib-parse", action="store_true",
                    help="also time the plain parse with the ingest's own reader (json_stream)")
    ap.add_argument("--analyze", action="store_true",
                    help="also time a cold `analyze` (cpu_ops deferred: no rule reads them), every rule included")
    args = ap.parse_args()
    target = int(args.gb * 1e9)
    replay = build_replay(args.source, args.out / f"kineto_replay_{args.gb:g}gb.json", target)
    size = replay.stat().st_size
    print(f"replay: {replay} ({size / 1e9:.2f} GB)")
    # Each command runs under a wrapper process whose only child it is, so the wrapper's RUSAGE_CHILDREN is that
    # command's own peak RSS (this process's children figure would be the largest of all of them).
    measured = [sys.executable, str(Path(__file__).resolve()), "--run-measured", sys.executable]
    store = args.out / "kineto_replay_bench.duckdb"
    store.unlink(missing_ok=True)
    # parse, ingest, parse again: the two parses bracket the ingest, so a change in the machine's load shows.
    results = {
        "parse": timed([*measured, "-c", _PARSE, str(replay)]),
        "ingest": timed([*measured, "-m", "nsight_advisor", "ingest", "-q", str(replay), "--store", str(store)]),
        "parse again": timed([*measured, "-c", _PARSE, str(replay)]),
    }
    if args.stdlib_parse:
        results["parse, stdlib"] = timed([*measured, "-c", _PARSE_STDLIB, str(replay)])
    if args.analyze:
        cache = args.out / "kineto_replay_bench_cache"
        results["cold analyze"] = timed([*measured, "-c", _ANALYZE, str(replay), str(cache),
                                         str(args.out / "kineto_replay_bench.json")])
    if args.duckdb_json:
        results["duckdb-json"] = timed([*measured, "-c", _DUCKDB, str(replay)], timeout=1800)
    for name, (wall, out) in results.items():
        print(f"{name:14s} {wall:8.1f} s  {out}")
    parse = (results["parse"][0] + results["parse again"][0]) / 2
    print(f"ingest / parse (wall, the parses' mean): {results['ingest'][0] / parse:.2f}x")
    cpu = {name: float(out.split("cpu ")[1].split(" s")[0]) for name, (_w, out) in results.items() if "cpu " in out}
    if {"parse", "parse again", "ingest"} <= set(cpu):
        print(f"ingest / parse (CPU seconds): {cpu['ingest'] / ((cpu['parse'] + cpu['parse again']) / 2):.2f}x")
    if "parse, stdlib" in cpu and "ingest" in cpu:
        print(f"ingest / stdlib parse: {results['ingest'][0] / results['parse, stdlib'][0]:.2f}x wall, "
              f"{cpu['ingest'] / cpu['parse, stdlib']:.2f}x CPU")
    if store.exists():
        print(f"store: {store.stat().st_size / 1e9:.2f} GB")
    return 0


def _run_measured(cmd: list[str]) -> int:
    """Run ``cmd`` and print its own peak RSS (this wrapper's children are only it)."""
    proc = subprocess.run(cmd, capture_output=True, text=True)
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    lines = (proc.stdout + proc.stderr).strip().splitlines()
    said = next((line for line in lines if "Error" in line), lines[-1] if lines else "")
    print(f"cpu {usage.ru_utime + usage.ru_stime:.1f} s; peak RSS {usage.ru_maxrss / 1024 / 1024:.2f} GB; "
          f"exit {proc.returncode}; {said.strip()[:200]}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--run-measured":
        sys.exit(_run_measured(sys.argv[2:]))
    sys.exit(main())
