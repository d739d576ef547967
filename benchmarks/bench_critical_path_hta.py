"""Our critical path of a step against HTA's (Holistic Trace Analysis, ``CriticalPathAnalysis``) on the same trace.

    python3 -m venv /tmp/hta-venv && /tmp/hta-venv/bin/pip install HolisticTraceAnalysis "pandas<3"
    python3 benchmarks/bench_critical_path_hta.py                       # the DLRM ranks, a table on stdout
    python3 benchmarks/bench_critical_path_hta.py --json out.json       # ... and every number as JSON

HTA is never a dependency of the project: it runs in its own environment (``--hta-python``), in a child process
that writes its path as JSON. (HTA 0.5.0 calls ``DataFrame.drop(axis=..., columns=...)``, which pandas 3 refuses:
its environment needs pandas < 3.) For each rank's trace, both tools take the first ``ProfilerStep`` and walk its
critical path; ours is the step graph of that rank alone (analysis/step_graph.py: CUDA calls and GPU operations), as
HTA's is (CPU operators, CUDA calls and GPU kernels).

Both paths are cut into stretches labelled by what the path is on: a GPU operation (``gpu`` with its correlation id),
the launch latency of one (``launch``), a gap between two kernels of a stream (``gpu-gap``), or the CPU (``cpu``:
HTA's operators and our CUDA calls and host work between them are the same time seen at two depths). Reported, per
rank: each path's span and the step's length; **agreement**, the share of the time both paths cover on which they
are on the same label (a GPU operation: the same one); the kernels on each path and those on both, with the share of
HTA's path length those held in common take. Times are put on one clock by the kernels' correlation ids.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
DEFAULT_TRACES = REPO.parent / "shared" / "traces" / "kineto" / "dlrm_8rank"

#: Run by HTA's interpreter: the first ProfilerStep's critical path of the one trace in argv[1], as JSON on stdout.
HTA_SCRIPT = r"""
import json, sys, time, logging
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
started = time.time()
a = TraceAnalysis(trace_dir=sys.argv[1])
rank = sorted(a.t.get_all_traces())[0]
g, ok = a.critical_path_analysis(rank=rank, annotation="ProfilerStep", instance_id=0)
df = a.t.get_trace(rank)
sym = a.t.symbol_table.get_sym_table()
edges = []
for e in g.critical_path_edges_set:
    b, t = g.node_list[e.begin], g.node_list[e.end]
    i = g.get_event_attribution_for_edge(e)
    row = df.loc[df["index"] == i].iloc[0] if i is not None else None
    edges.append({"begin": float(b.ts), "end": float(t.ts), "weight": float(e.weight), "type": e.type.value,
                  "stream": -1 if row is None else int(row["stream"]),
                  "correlation": -1 if row is None else int(row["correlation"]),
                  "name": "" if row is None else sym[int(row["name"])]})
kernels = df[(df["stream"] > 0) & (df["correlation"] > 0)]
steps = df[df["name"].map(lambda n: sym[int(n)]).str.startswith("ProfilerStep")].sort_values("ts")
json.dump({"ok": bool(ok), "seconds": time.time() - started, "edges": edges,
           "kernels": [[int(c), float(t)] for c, t in zip(kernels["correlation"], kernels["ts"])],
           "step": [float(steps["ts"].iloc[0]), float(steps["ts"].iloc[0] + steps["dur"].iloc[0])]}, sys.stdout)
"""

GPU_KINDS = {"kernel", "memcpy", "memset", "collective (after the last rank arrived)"}


def run_hta(python: str, trace: Path) -> dict:
    """HTA's critical path of the trace's first step (HTA reads a folder: the trace alone is linked into one)."""
    with tempfile.TemporaryDirectory(prefix="nsa-hta-") as folder:
        (Path(folder) / trace.name).symlink_to(trace.resolve())
        done = subprocess.run([python, "-c", HTA_SCRIPT, folder], capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"HTA failed on {trace.name}: {done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout)


def hta_stretches(answer: dict) -> list[tuple[float, float, str]]:
    """HTA's path as (start µs, end µs, label)."""
    out = []
    for e in answer["edges"]:
        if e["end"] <= e["begin"]:
            continue
        on_gpu = e["stream"] > 0
        if e["type"] == "critical_path_kernel_launch_delay":
            label = "launch"
        elif e["type"] == "critical_path_kernel_kernel_delay":
            label = "gpu-gap"
        elif e["type"] == "critical_path_operator" and on_gpu:
            label = f"gpu:{e['correlation']}"
        elif e["type"] == "critical_path_operator":
            label = "cpu"
        else:  # a dependency or synchronization edge: waiting, on the side it ends on
            label = "gpu-gap" if on_gpu else "cpu"
        out.append((e["begin"], e["end"], label))
    return sorted(out)


def ours(trace: Path) -> dict:
    """Our critical path of the trace's first step (the rank's own graph), times in µs of the trace's clock."""
    from nsight_advisor import workflow
    from nsight_advisor.analysis.critical_path import critical_path
    from nsight_advisor.engine.whatif import step_model

    started = time.time()
    con, ids = workflow.load([trace])
    try:
        model = step_model(con, ids)
        cid = ids[0]
        s, e = model.steps[cid][0]
        path = critical_path(model.graph, s, e, cid, model.base)
        seconds = time.time() - started
        g = model.graph
        ops = g.ops
        kernels = ops[ops["kind"] == 1]
        # the graph's clock back to the trace's (ns since its base; kineto's ts are µs)
        base = g.t0 - g.offsets.get(cid, 0)
        stretches = []
        for seg in path:
            op = seg["op"]
            what = seg["what"]
            corr = None if op is None else ops["correlation_id"].iloc[op]
            if what in GPU_KINDS:
                label = f"gpu:{int(corr)}"
            elif what == "launch latency":
                label = "launch"
            elif what in ("stream order", "wait for another stream"):
                label = "gpu-gap"
            else:  # CUDA call, host work, a wait for the GPU seen from the host, before any recorded op
                label = "cpu"
            stretches.append(((seg["start_ns"] + base) / 1e3, (seg["end_ns"] + base) / 1e3, label))
        return {"seconds": seconds, "stretches": stretches, "step": [(s + base) / 1e3, (e + base) / 1e3],
                "kernels": [[int(c), (t + base) / 1e3] for c, t in zip(kernels["correlation_id"], kernels["start_ns"])
                            if c == c]}
    finally:
        con.close()


def _offset(hta_kernels: list, our_kernels: list) -> float:
    """HTA's clock less ours, µs: the median over kernels matched by correlation id."""
    mine = {c: t for c, t in our_kernels}
    diffs = sorted(t - mine[c] for c, t in hta_kernels if c in mine)
    if not diffs:
        raise RuntimeError("no kernel of HTA's trace matched ours by correlation id")
    return diffs[len(diffs) // 2]


def _overlap(a: list, b: list) -> tuple[float, float, dict]:
    """Time both cover, time on the same label, and the disagreeing time by (a's label kind, b's)."""
    both = same = 0.0
    diff: dict[str, float] = {}
    j = 0
    for lo, hi, la in a:
        while j < len(b) and b[j][1] <= lo:
            j += 1
        k = j
        while k < len(b) and b[k][0] < hi:
            o = min(hi, b[k][1]) - max(lo, b[k][0])
            if o > 0:
                both += o
                if la == b[k][2]:
                    same += o
                else:
                    key = f"{la.split(':')[0]} / {b[k][2].split(':')[0]}"
                    diff[key] = diff.get(key, 0.0) + o
            k += 1
    return both, same, diff


def compare(trace: Path, hta_python: str) -> dict:
    """One rank: both paths and how well they agree."""
    theirs = run_hta(hta_python, trace)
    mine = ours(trace)
    shift = _offset(theirs["kernels"], mine["kernels"])
    a = [(lo + shift, hi + shift, label) for lo, hi, label in mine["stretches"]]
    b = hta_stretches(theirs)
    both, same, diff = _overlap(a, b)
    k_ours = {label for _lo, _hi, label in a if label.startswith("gpu:")}
    k_hta = {label for _lo, _hi, label in b if label.startswith("gpu:")}
    common = k_ours & k_hta
    hta_len = sum(hi - lo for lo, hi, _l in b)
    held = sum(hi - lo for lo, hi, label in b if label in common)
    step = theirs["step"]
    return {"trace": trace.name, "hta_ok": theirs["ok"], "step_us": step[1] - step[0],
            "our_path_us": sum(hi - lo for lo, hi, _l in a), "hta_path_us": hta_len,
            "hta_span_us": [min(lo for lo, _h, _l in b) - step[0], max(hi for _lo, hi, _l in b) - step[0]] if b else None,
            "both_cover_us": both, "agreement_pct": 100.0 * same / both if both else None,
            "disagreement_us": {k: round(v, 1) for k, v in sorted(diff.items(), key=lambda kv: -kv[1])},
            "kernels_ours": len(k_ours), "kernels_hta": len(k_hta), "kernels_common": len(common),
            "common_kernels_share_of_hta_pct": 100.0 * held / hta_len if hta_len else None,
            "hta_seconds": theirs["seconds"], "our_seconds": mine["seconds"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", type=Path, default=DEFAULT_TRACES, help="a folder of PyTorch profiler traces")
    parser.add_argument("--hta-python", default="/tmp/hta-venv/bin/python", help="an interpreter with HTA installed")
    parser.add_argument("--json", type=Path, help="also write every number here")
    args = parser.parse_args(argv)
    if not shutil.which(args.hta_python) and not Path(args.hta_python).exists():
        print(f"no HTA interpreter at {args.hta_python} (see this script's docstring)", file=sys.stderr)
        return 2
    traces = sorted(args.traces.glob("*.json*"))
    if not traces:
        print(f"no traces in {args.traces}", file=sys.stderr)
        return 2
    rows = [compare(t, args.hta_python) for t in traces]
    print("| trace | step | our path | HTA path (span in step) | both cover | agree | kernels ours / HTA / both "
          "| common kernels, % of HTA path |")
    print("|---|--:|--:|--:|--:|--:|--:|--:|")
    for r in rows:
        span = r["hta_span_us"] or [0, 0]
        print(f"| {r['trace'][:24]} | {r['step_us'] / 1e3:.2f} ms | {r['our_path_us'] / 1e3:.2f} ms | "
              f"{r['hta_path_us'] / 1e3:.2f} ms ({span[0] / 1e3:.2f}-{span[1] / 1e3:.2f}) | "
              f"{r['both_cover_us'] / 1e3:.2f} ms | {r['agreement_pct']:.1f}% | "
              f"{r['kernels_ours']} / {r['kernels_hta']} / {r['kernels_common']} | "
              f"{r['common_kernels_share_of_hta_pct']:.1f}% |")
    for r in rows:
        print(f"{r['trace'][:24]}: where they disagree (ours / HTA's, µs): {r['disagreement_us']}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
