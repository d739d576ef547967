"""Our critical path of a step against HTA's (Holistic Trace Analysis, ``CriticalPathAnalysis``) on the same trace.

    python3 -m venv /tmp/hta-venv && /tmp/hta-venv/bin/pip install HolisticTraceAnalysis==0.5.0 "pandas<3"
    python3 benchmarks/bench_critical_path_hta.py                       # the DLRM ranks, a table on stdout
    python3 benchmarks/bench_critical_path_hta.py --json out.json       # ... and every number as JSON

HTA is never a dependency of the project: it runs in its own environment (``--hta-python``), in a child process
that writes its paths as JSON. (HTA 0.5.0 calls ``DataFrame.drop(axis=..., columns=...)``, which pandas 3 refuses:
its environment needs pandas < 3.) For each rank's trace, both tools take the first ``ProfilerStep``; ours is the
step graph of that rank alone (analysis/step_graph.py: CUDA calls and GPU operations), as HTA's is (CPU operators,
CUDA calls and GPU kernels). HTA's path is taken three ways:

* **raw**: HTA's own graph and rule (the longest path by weight, where operators, kernels, launch delays and
  kernel-to-kernel delays weigh their time and waits weigh nothing);
* **given our dependencies**: HTA's graph with the edges of ours that it lacks added as HTA's own zero-weight
  sync edges, HTA's rule again: a thread handoff (``backward()`` waiting for the autograd engine's thread: from the
  waited-for thread's last event by the waiting call to the waiting thread's first event after it), an inferred
  stream wait (from the waited-for kernel's end to the waiting kernel's start, its kernel-to-kernel or launch edge
  dropped where the waited-for kernel ended later, as HTA does itself from a trace's "Stream Wait Event"), a
  blocking call's wait for the GPU (from the kernel's end to the call's end, as HTA does from a "Stream Sync");
* **walked by last arrival**: that same graph, with our rule: from its latest node by the step's end back along the
  in-edge whose source is latest. It tells a difference of graphs from a difference of rules.

**The measure.** Each path is cut into stretches labelled by what the path is on: a GPU operation (``gpu:`` and
its correlation id), the launch latency of one (``launch``), a stream waiting between two kernels (``gpu-gap``),
or a host thread (``cpu:`` and its thread id: HTA's operators and our CUDA calls and the host's work before them
are the same time seen at two depths; our step's time before the first call its path reaches is that call's
thread's). Both are put on one clock by the kernels' correlation ids. **Agreement** is the share of the time both
paths cover on which they carry the same label; **disagreement, % of step** is the time both cover on different
labels, as a share of the step (our path's length: it tiles the step). Where the paths cover different parts of
the step, only the time both cover is compared, and each path's span is reported beside it.
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

#: Run by HTA's interpreter: the first ProfilerStep's critical path of the one trace in argv[1], as JSON on stdout:
#: HTA's own ("raw"), then ("given") HTA's graph with the dependencies of ours that it lacks (argv[2], a JSON list
#: of [kind, waited-for correlation id, waiting correlation id]) added as HTA's own zero-weight sync edges.
HTA_SCRIPT = r"""
import json, sys, time, logging
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
from hta.analyzers.critical_path_analysis import CPEdgeType
started = time.time()
a = TraceAnalysis(trace_dir=sys.argv[1])
rank = sorted(a.t.get_all_traces())[0]
g, ok = a.critical_path_analysis(rank=rank, annotation="ProfilerStep", instance_id=0)
df = a.t.get_trace(rank)
sym = a.t.symbol_table.get_sym_table()
by_index = df.set_index("index")

def path(edge_set=None):
    edges = []
    for e in g.critical_path_edges_set if edge_set is None else edge_set:
        b, t = g.node_list[e.begin], g.node_list[e.end]
        i = g.get_event_attribution_for_edge(e)
        row = by_index.loc[i] if i is not None else None
        side = by_index.loc[t.ev_idx]  # an edge no event is attributed to waits on the side it ends on
        edges.append({"begin": float(b.ts), "end": float(t.ts), "weight": float(e.weight), "type": e.type.value,
                      "stream": int((side if row is None else row)["stream"]),
                      "tid": int((side if row is None else row)["tid"]),
                      "correlation": -1 if row is None else int(row["correlation"]),
                      "name": "" if row is None else sym[int(row["name"])]})
    return edges

raw, seconds = path(), time.time() - started
# the events of HTA's graph: host (operators and CUDA calls) and GPU, by correlation id
ev = by_index.loc[sorted(g.event_to_start_node_map)]
ev = ev.assign(end=ev["ts"] + ev["dur"])
host, gpu = ev[ev["stream"] < 0], ev[ev["stream"] >= 0]
calls = {int(c): i for i, c in zip(host.index, host["correlation"]) if c > 0}
kernels = {int(c): i for i, c in zip(gpu.index, gpu["correlation"]) if c > 0}
cpu_rows = by_index[by_index["stream"] < 0]
any_call = {int(c): i for i, c in zip(cpu_rows.index, cpu_rows["correlation"]) if c > 0}
start_node = lambda i: g.node_list[g.event_to_start_node_map[i]]
end_node = lambda i: g.node_list[g.event_to_end_node_map[i]]
added = {"thread": 0, "stream": 0, "sync": 0, "unmatched": []}
for kind, waited, waiting in json.loads(open(sys.argv[2]).read()) if len(sys.argv) > 2 else []:
    if kind == "thread" and waited in any_call and waiting in any_call:
        # the waited-for thread's last event by the waiting call's start, to the waiting thread's first event after
        # (a zero-length call can be missing from HTA's graph: the calls themselves are looked up in the trace)
        u, c = by_index.loc[any_call[waited]], by_index.loc[any_call[waiting]]
        mine = host[(host["tid"] == u["tid"]) & (host["end"] <= c["ts"])]
        src = mine.sort_values(["end", "ts"], ascending=[False, True]).index[0]
        theirs = host[(host["tid"] == c["tid"]) & (host["ts"] >= host.loc[src, "end"]) & (host["ts"] <= c["ts"])]
        dst = theirs.sort_values(["ts", "dur"], ascending=[True, False]).index[0]
        g._add_edge_helper(end_node(src), start_node(dst), type=CPEdgeType.SYNC_DEPENDENCY)
    elif kind == "stream" and waited in kernels and waiting in kernels:
        # as HTA does from a trace's "Stream Wait Event": the waiting kernel's kernel-to-kernel or launch edge
        # only where the waited-for kernel ended earlier
        src, dst = end_node(kernels[waited]), start_node(kernels[waiting])
        for u, _v, e in list(g.in_edges(dst.idx, data="object")):
            if e.type in (CPEdgeType.KERNEL_KERNEL_DELAY, CPEdgeType.KERNEL_LAUNCH_DELAY) and \
                    g.node_list[u].ts < src.ts:
                g.remove_edge(u, dst.idx)
        g._add_edge_helper(src, dst, type=CPEdgeType.SYNC_DEPENDENCY)
    elif kind == "sync" and waited in kernels and waiting in calls:
        g._add_gpu_cpu_sync_edge(end_node(kernels[waited]), calls[waiting])  # as HTA does from a "Stream Sync"
    else:
        added["unmatched"].append([kind, waited, waiting])
        continue
    added[kind] += 1
given_ok = bool(g.critical_path()) if len(sys.argv) > 2 else False
given = path() if len(sys.argv) > 2 else []
kern = df[(df["stream"] > 0) & (df["correlation"] > 0)]
steps = df[df["name"].map(lambda n: sym[int(n)]).str.startswith("ProfilerStep")].sort_values("ts")
step_end = float(steps["ts"].iloc[0] + steps["dur"].iloc[0])
# the same graph walked back by last arrival (our rule) from its latest node by the step's end: at each node the
# in-edge whose source is latest (a tie to the weighted edge)
v = max((n for n in g.nodes if g.node_list[n].ts <= step_end), key=lambda n: (g.node_list[n].ts, n))
walked = set()
while True:
    ins = list(g.in_edges(v, data="object"))
    if not ins:
        break
    u, _v, e = max(ins, key=lambda x: (g.node_list[x[0]].ts, x[2].weight))
    walked.add(e)
    v = u
json.dump({"ok": bool(ok), "seconds": seconds, "edges": raw, "given_ok": given_ok, "given": given, "added": added,
           "walked": path(walked),
           "kernels": [[int(c), float(t)] for c, t in zip(kern["correlation"], kern["ts"])],
           "step": [float(steps["ts"].iloc[0]), float(steps["ts"].iloc[0] + steps["dur"].iloc[0])]}, sys.stdout)
"""

GPU_KINDS = {"kernel", "memcpy", "memset", "collective (after the last rank arrived)"}


def run_hta(python: str, trace: Path, deps: list) -> dict:
    """HTA's critical path of the trace's first step, raw and given ``deps`` (HTA reads a folder: the trace alone is
    linked into one)."""
    with tempfile.TemporaryDirectory(prefix="nsa-hta-") as folder:
        (Path(folder) / trace.name).symlink_to(trace.resolve())
        extra = Path(folder) / "deps.json.txt"  # not a trace: HTA reads *.json* files of the folder
        extra.write_text(json.dumps(deps))
        done = subprocess.run([python, "-c", HTA_SCRIPT, folder, str(extra)], capture_output=True, text=True,
                              timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"HTA failed on {trace.name}: {done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout)


def hta_stretches(edges: list) -> list[tuple[float, float, str]]:
    """HTA's path as (start µs, end µs, label)."""
    out = []
    for e in edges:
        if e["end"] <= e["begin"]:
            continue
        on_gpu = e["stream"] > 0
        if e["type"] == "critical_path_kernel_launch_delay":
            label = "launch"
        elif e["type"] == "critical_path_kernel_kernel_delay":
            label = "gpu-gap"
        elif e["type"] == "critical_path_operator" and on_gpu:
            label = f"gpu:{e['correlation']}"
        else:  # an operator or CUDA call, or a dependency or sync edge: waiting, on the side it ends on
            label = "gpu-gap" if on_gpu else f"cpu:{e['tid']}"
        out.append((e["begin"], e["end"], label))
    return sorted(out)


def ours(trace: Path) -> dict:
    """Our critical path of the trace's first step (the rank's own graph), times in µs of the trace's clock, and
    the dependencies of our graph HTA's lacks: [kind, waited-for correlation id, waiting correlation id]."""
    import numpy as np

    from nsight_advisor import workflow
    from nsight_advisor.analysis.critical_path import critical_path
    from nsight_advisor.analysis.step_graph import HOST
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
        corr, tids, kinds = ops["correlation_id"], ops["tid"], g.kinds
        kernels = {c: ops[c][ops["kind"] == 1] for c in ("correlation_id", "start_ns")}
        # the graph's clock back to the trace's (ns since its base; kineto's ts are µs)
        base = g.t0 - g.offsets.get(cid, 0)
        stretches = []
        for seg in path:
            op = seg["op"]
            what = seg["what"]
            if what in GPU_KINDS:
                label = f"gpu:{int(corr[op])}"
            elif what == "launch latency":
                label = "launch"
            elif what in ("stream order", "wait for another stream"):
                label = "gpu-gap"
            elif op is not None and kinds[op] == HOST:  # a CUDA call, the host work before it, its wait for the GPU
                label = f"cpu:{int(tids[op])}"
            else:
                label = "untracked"
            stretches.append(((seg["start_ns"] + base) / 1e3, (seg["end_ns"] + base) / 1e3, label))
        # the step's time before the first call its path reaches is that call's thread's (its host work before any
        # recorded call: zero_grad, the batch's Python code), as HTA's operators on that thread show
        for k in range(len(stretches) - 1):
            if stretches[k][2] == "untracked" and stretches[k + 1][2].startswith("cpu:"):
                stretches[k] = (*stretches[k][:2], stretches[k + 1][2])
        deps = []
        for i in np.flatnonzero((kinds == HOST) & (g.pred[:, 0] >= 0)):
            p = g.pred[i, 0]
            if tids[p] != tids[i]:
                deps.append(["thread", int(corr[p]), int(corr[i])])
        for i in np.flatnonzero(g.binding == 3):
            deps.append(["stream", int(corr[g.pred[i, 3]]), int(corr[i])])
        for i in np.flatnonzero(g.wait_pred >= 0):
            deps.append(["sync", int(corr[g.wait_pred[i]]), int(corr[i])])
        return {"seconds": seconds, "stretches": stretches, "step": [(s + base) / 1e3, (e + base) / 1e3],
                "deps": [d for d in deps if d[1] == d[1] and d[2] == d[2]],
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


def _kind(label: str) -> str:
    return label.split(":")[0]


def agreement(ours_: list, theirs: list, step: list) -> dict:
    """The measure (module docstring) for one pair of paths."""
    both, same, diff = _overlap(ours_, theirs)
    covered = sum(hi - lo for lo, hi, _l in theirs)
    length = step[1] - step[0]
    return {"hta_path_us": covered, "hta_cover_pct": 100.0 * covered / length,
            "hta_span_us": [min(lo for lo, _h, _l in theirs) - step[0], max(hi for _lo, hi, _l in theirs) - step[0]]
            if theirs else None,
            "both_cover_us": both, "agreement_pct": 100.0 * same / both if both else None,
            "disagree_pct_of_step": 100.0 * (both - same) / length,
            "disagreement_us": {k: round(float(v), 1) for k, v in sorted(diff.items(), key=lambda kv: -kv[1])}}


def compare(trace: Path, hta_python: str) -> dict:
    """One rank: our path, HTA's raw and HTA's given our dependencies, and how well they agree."""
    mine = ours(trace)
    theirs = run_hta(hta_python, trace, mine["deps"])
    shift = _offset(theirs["kernels"], mine["kernels"])
    a = [(lo + shift, hi + shift, label) for lo, hi, label in mine["stretches"]]
    step = theirs["step"]
    counts: dict[str, int] = {}
    for kind, _u, _v in mine["deps"]:
        counts[kind] = counts.get(kind, 0) + 1
    return {"trace": trace.name, "step_us": step[1] - step[0], "our_path_us": sum(hi - lo for lo, hi, _l in a),
            "hta_ok": theirs["ok"], "raw": agreement(a, hta_stretches(theirs["edges"]), step),
            "given_ok": theirs["given_ok"], "given": agreement(a, hta_stretches(theirs["given"]), step),
            "walked": agreement(a, hta_stretches(theirs["walked"]), step),
            "our_dependencies": counts, "added_to_hta": theirs["added"],
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
    print("| rank trace | step | our path | HTA raw: path (span in step) | agree | disagree, % of step "
          "| HTA given our dependencies: path (span) | agree | disagree, % of step "
          "| ... walked by last arrival: path (span) | agree | disagree, % of step |")
    print("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
    for r in rows:
        cells = []
        for key in ("raw", "given", "walked"):
            m = r[key]
            span = m["hta_span_us"] or [0, 0]
            cells.append(f"{m['hta_path_us'] / 1e3:.2f} ms ({span[0] / 1e3:.2f}-{span[1] / 1e3:.2f}) | "
                         f"{m['agreement_pct']:.1f}% | {m['disagree_pct_of_step']:.1f}%")
        print(f"| {r['trace'][:24]} | {r['step_us'] / 1e3:.2f} ms | {r['our_path_us'] / 1e3:.2f} ms | "
              f"{cells[0]} | {cells[1]} | {cells[2]} |")
    for r in rows:
        print(f"{r['trace'][:24]}: our dependencies {r['our_dependencies']}, added to HTA's graph "
              f"{r['added_to_hta']}; where they disagree (ours / HTA's, µs): raw {r['raw']['disagreement_us']}, "
              f"given {r['given']['disagreement_us']}, walked {r['walked']['disagreement_us']}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
