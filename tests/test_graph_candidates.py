"""What the replay adds to a report: findings ranked by saving, each finding's share of the critical path
(engine/path_share.py), CUDA-graph candidates (analysis/kernel_sequences.py).

Synthetic stores whose answers are known by construction (times in µs), then the real captures: the DLRM ranks'
graph candidates, nsys_ai_mfu_2gpu_before's report ranked by saving.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from nsight_advisor.analysis.replay import replay
from nsight_advisor.analysis.kernel_sequences import find_sequences, graph_candidates
from nsight_advisor.analysis.step_graph import build_graph
from nsight_advisor.engine.analyze import finding_rank
from nsight_advisor.engine.model import Finding
from nsight_advisor.engine.path_share import step_paths
from nsight_advisor.engine.whatif import kernel_ops
from nsight_advisor.report.data import rank_findings
from test_critical_path import _call, _kernel, _warm_up, us

TRACES = Path(__file__).resolve().parent.parent.parent / "shared" / "traces"


def _launch_bound_steps(con, third_kernel_of_step_2: str = "c") -> dict[int, list[tuple[int, int]]]:
    """Two steps of 200 µs, each (b = its start):

    host  c0 [b, b+2] launches big; c1 [b+2, b+4] launches x; c2..c5 at b+40, 60, 80, 100 (5 µs each) launch a..d;
          cudaDeviceSynchronize [b+110, b+120]: returns 5 µs after d ends; 80 µs of host work to the next step
    GPU   big [b+5, b+35]; x [b+36, b+38] (queued behind big: stream lag 1 µs, the typical one);
          a [b+45, b+55], b [b+65, b+75], c [b+85, b+95], d [b+105, b+115]: each 5 µs after its launch (the
          typical launch latency), the stream idle 7, 10, 10, 10 µs before them, the launch made after the stream
          drained: launch-bound.

    The run x, a, b, c, d (big is not: x waited for big, not for its launch) is the candidate. As one graph launch
    from c1: a..d wait only for the stream (1 µs each), so d ends at b+82, not b+115: 37 µs of gaps become 4, and
    the synchronization and everything after it move 33 µs earlier. Each step saves 33 µs; 66 µs in all.
    """
    corr = 0
    for i in range(2):
        b = 200 * i
        kernels = [("big", b, b + 2, b + 5, b + 35), ("x", b + 2, b + 4, b + 36, b + 38)]
        names = ["a", "b", third_kernel_of_step_2 if i else "c", "d"]
        kernels += [(n, b + 40 + 20 * j, b + 45 + 20 * j, b + 45 + 20 * j, b + 55 + 20 * j)
                    for j, n in enumerate(names)]
        for name, c_lo, c_hi, k_lo, k_hi in kernels:
            corr += 1
            _call(con, 1, corr, "cudaLaunchKernel", c_lo, c_hi)
            _kernel(con, 1, corr, name, 7, k_lo, k_hi)
        corr += 1
        _call(con, 1, corr, "cudaDeviceSynchronize", b + 110, b + 120)
    return {1: [(0, us(200)), (us(200), us(400))]}


def test_a_launch_bound_run_as_one_graph_saves_its_gaps(memory_store):
    steps = _launch_bound_steps(memory_store)
    g = build_graph(memory_store, [1])
    found = find_sequences(g, steps)
    assert [c.names for c in found] == [("x", "a", "b", "c", "d")]
    assert found[0].gap_ns == 2 * us(7 + 10 + 10 + 10)  # the launch-bound gaps of both steps
    answer = graph_candidates(g, steps, replay(g), {})
    (cand,) = answer["candidates"]
    assert cand["runs"] == 2 and cand["steps"] == 2 and cand["kernel_count"] == 5
    assert cand["run_gap_ns"] == us(37) and cand["run_kernel_ns"] == us(2 + 4 * 10)
    assert cand["saving_ns"] == us(66) and cand["saving_per_step_ns"] == us(33)
    assert cand["streams"] == [{"capture_id": 1, "device_id": 0, "stream_id": 7}]
    assert answer["all_saving_ns"] == {"1": us(66)}


def test_a_run_not_repeated_every_step_is_no_candidate(memory_store):
    steps = _launch_bound_steps(memory_store, third_kernel_of_step_2="other")
    g = build_graph(memory_store, [1])
    assert find_sequences(g, steps) == []
    assert graph_candidates(g, steps, replay(g), {})["candidates"] == []


def test_critical_path_share_of_a_kernel(memory_store):
    # the overlapped pair of test_critical_path: A (990 µs) ends the step's wait, B (500 µs) runs under it
    con = memory_store
    _call(con, 1, 1, "cudaLaunchKernel", 0, 5)
    _call(con, 1, 2, "cudaLaunchKernel", 5, 10)
    _call(con, 1, 3, "cudaDeviceSynchronize", 12, 1005)
    _kernel(con, 1, 1, "long_a", 7, 10, 1000)
    _kernel(con, 1, 2, "short_b", 8, 15, 515)
    g = build_graph(con, [1])
    paths = step_paths(g, {1: [(0, us(1005))]}, replay(g))
    assert paths.total_ns[1] == us(1005)  # the path tiles the step
    # the path: A's launch call (5 µs), its launch latency (5), A itself (990), the synchronization's return (5)
    held_a = paths.share_pct(1, {"own_scale": np.where(kernel_ops(g, "long_a"), 0.5, 1.0)})
    assert held_a == round(100 * 990 / 1005, 1)
    assert paths.share_pct(1, {"own_scale": np.where(kernel_ops(g, "short_b"), 0.5, 1.0)}) == 0.0
    assert paths.share_pct(2, {"own_scale": np.ones(len(g))}) is None  # no such capture
    # dropping the synchronization's wait: the path after its return until a GPU operation runs again is only the
    # 5 µs return here (the step ends), well within the time the host sat blocked
    sync = (g.ops["name"] == "cudaDeviceSynchronize")
    assert paths.share_pct(1, {"drop_wait": sync}) == round(100 * us(5) / us(1005), 1)
    assert paths.share_pct(1, {"drop_wait": np.zeros(len(g), bool)}) == 0.0


def test_critical_path_share_of_a_dropped_synchronization(memory_store):
    # after twenty warm-up launches (typical launch latency 5 µs, stream lag 2 µs): kernel A (5-400 µs) the host
    # waits for in a synchronization (6-402), 100 µs of host work, B's launch (502-507) and B (507-530); a second
    # synchronization (510-532), 200 µs of host work, C's launch (732-737) and C (737-790); a last one to 792
    con = memory_store
    _warm_up(con)
    _call(con, 1, 1, "cudaLaunchKernel", 0, 5)
    _kernel(con, 1, 1, "a", 7, 5, 400)
    _call(con, 1, 2, "cudaDeviceSynchronize", 6, 402)
    _call(con, 1, 3, "cudaLaunchKernel", 502, 507)
    _kernel(con, 1, 3, "b", 7, 507, 530)
    _call(con, 1, 4, "cudaDeviceSynchronize", 510, 532)
    _call(con, 1, 5, "cudaLaunchKernel", 732, 737)
    _kernel(con, 1, 5, "c", 7, 737, 790)
    _call(con, 1, 6, "cudaDeviceSynchronize", 738, 792)
    g = build_graph(con, [1])
    paths = step_paths(g, {1: [(-g.t0, us(792) - g.t0)]}, replay(g))
    syncs = np.flatnonzero((g.ops["name"] == "cudaDeviceSynchronize"))
    first, second = syncs[np.argsort(g.ops["start_ns"][syncs])][:2]
    only = np.zeros(len(g), bool)
    # the first gives back its return (2 µs), the 100 µs of host work and B's launch latency (5): 107 µs until B
    # runs, well within the 390-odd µs it sat blocked on the path (A's time, which the relaunch could hide behind)
    only[first] = True
    assert paths.share_pct(1, {"drop_wait": only}) == round(100 * us(107) / us(792), 1)
    # the second sat blocked on the path only from where it would have returned on its own to its return: of its
    # 207 µs relaunch it can take back no more than that
    only[:] = False
    only[second] = True
    blocked = us(532) - (us(510) + int(g.own_ns[second]))
    assert 0 < blocked < us(22)
    assert paths.share_pct(1, {"drop_wait": only}) == round(100 * blocked / us(792), 1)


def _finding(rule, severity, impact, saving=None):
    return Finding(rule_id=rule, rule_name=rule, severity=severity, title=rule, message="", capture_id=1,
                   impact_ns=impact, impact_pct=0.0, saving_ns=saving)


def test_findings_rank_by_saving_where_there_is_one():
    findings = [_finding("A", "warning", 900, saving=0),  # claims much, saves nothing: the work overlaps
                _finding("B", "warning", 500),  # no saving modeled: its claim stands
                _finding("C", "warning", 300, saving=700),  # saves more than it claims (unblocks the path)
                _finding("D", "warning", 400),
                _finding("E", "error", 10, saving=1),  # severity still comes first
                _finding("F", "warning", 300, saving=700)]  # a tie with C: the rule id decides, as before
    ranked = [f.rule_id for f in sorted(findings, key=finding_rank)]
    assert ranked == ["E", "C", "F", "B", "D", "A"]
    as_json = [f.to_dict() for f in findings]
    assert [f["rule_id"] for f in rank_findings(as_json)] == ranked  # the report ranks them the same way
    assert "saving_ns" not in as_json[1] and "critical_path_pct" not in as_json[1]


@pytest.fixture(scope="module")
def mfu_report(tmp_path_factory):
    capture = TRACES / "nsys" / "nsys_ai_mfu_2gpu_before.sqlite"
    if not capture.exists():
        pytest.skip(f"{capture} absent")
    import nsight_advisor

    run = nsight_advisor.open(capture, store=tmp_path_factory.mktemp("mfu") / "s.duckdb", use_cache=False)
    return json.loads(run.report("json")), run.report("md"), run.report("html")


def test_real_report_ranks_by_saving_and_says_so(mfu_report):
    data, md, html = mfu_report
    assert data["summary"]["savings"]["ranked_by"] == "saving_ns"
    findings = data["findings"]
    assert sum("saving_ns" in f for f in findings) >= 5
    for f in findings:
        assert ("saving_ns" in f) == ("critical_path_pct" in f)
        assert 0 <= f.get("critical_path_pct", 0) <= 100
    def saves(f):  # the rule's fix on every rank where it fires on several, else this finding's, else its claim
        return f.get("saving_all_ranks_ns", f.get("saving_ns", f["impact_ns"]))

    for a, b in zip(findings, findings[1:]):  # severity, then saving (else impact), never increasing
        if a["severity"] == b["severity"]:
            assert saves(a) >= saves(b)
    # both ranks' host gaps head the warnings: fixed on both they save more than the straggler claims
    assert [f["rule_name"] for f in findings[:2]] == ["gpu-idle-gap", "gpu-idle-gap"]
    # the memory-bound kernels: a large claim, a small saving (launch-bound), a real share of the critical path
    bound = [f for f in findings if f["rule_id"] == "NA201"]
    assert bound and all(f["saving_ns"] < 0.05 * f["impact_ns"] and f["critical_path_pct"] > 1 for f in bound)
    assert "ranked by what their fix saves" in html and "of the critical path" in html
    assert "| saving | on critical path |" in md and "Ranked by severity, then by what the fix would save" in md
    # the host runs ahead of its GPUs in most steps: no run of launch-bound kernels repeats in every step
    assert data["summary"]["graph_candidates"]["found"] == 0


def test_dlrm_ranks_have_graph_candidates(tmp_path):
    ranks = sorted((TRACES / "kineto" / "dlrm_8rank").glob("*.pt.trace.json.gz"))
    if len(ranks) < 8:
        pytest.skip("the DLRM ranks are absent")
    from nsight_advisor import workflow
    from nsight_advisor.engine.whatif import step_model

    con, ids = workflow.load(ranks)
    try:
        model = step_model(con, ids)
        answer = graph_candidates(model.graph, model.steps, model.base, model.kept,
                                  on_host={cid: model.on_host(cid) for cid in model.steps})
    finally:
        con.close()
    assert answer["found"] >= 10
    top = answer["candidates"][0]
    assert top["kernel_count"] >= 20 and top["saving_ns"] > 1_000_000  # over 1 ms per step where it runs
    assert top["saving_per_step_ns"] <= top["run_gap_ns"]  # at most the launch gaps it closes
    # every rank has candidates, and launched as graphs together they save 5 to 7 ms of each rank's step
    assert len(answer["all_saving_ns"]) == 8
    assert all(4_000_000 < v < 8_000_000 for v in answer["all_saving_ns"].values())


def test_reports_show_candidates_and_escape_their_names():
    from nsight_advisor.report import render
    from report_samples import hostile_result

    result = hostile_result()
    evil = "<script>alert(1)</script>|`x`"
    result.summary["graph_candidates"] = {
        "found": 1, "all_saving_ns": {"1": 150_000}, "params": {"short_kernel_ns": 50_000, "min_kernels": 3},
        "candidates": [{"streams": [{"capture_id": 1, "device_id": 0, "stream_id": 7}], "kernels": [evil] * 5,
                        "kernel_count": 5, "runs": 3, "steps": 3, "run_kernel_ns": 30_000, "run_gap_ns": 60_000,
                        "saving_ns": 150_000, "saving_per_step_ns": 50_000}]}
    html, md = render(result, "html"), render(result, "md")
    assert 'id="graph-candidates"' in html and "<script>alert" not in html and "150 µs" in html
    assert "CUDA-graph candidates" in md and "<script>" not in md and "… 1 more (5)" in md


def test_a_jobs_candidates_are_placed_by_rank_and_stream():
    # a job's captures are named by rank (their file names are long and alike), ranges compacted, one entry per
    # stream; a capture of no job keeps its name
    from nsight_advisor.report.graph_view import graph_candidates_view

    def where(streams, ranks):
        summary = {"ranks": [{"ranks": [{"capture_id": c, "rank": r} for c, r in ranks.items()]}] if ranks else [],
                   "graph_candidates": {"found": 1, "candidates": [{"streams": streams, "kernels": ["k"] * 3}]}}
        names = {c: f"worker{c}_step_12.pt.trace.json.gz" for c in range(1, 10)}
        return graph_candidates_view(summary, names)["rows"][0]["where"]

    ranks = {c: c - 1 for c in range(1, 9)}
    seven = [{"capture_id": c, "stream_id": 7} for c in (1, 2, 3, 4, 5, 7, 8)]
    assert where(seven, ranks) == "ranks 0-4, 6-7 (stream 7)"
    assert where([{"capture_id": 5, "stream_id": 7}], ranks) == "rank 4 (stream 7)"
    assert where(seven[:2] + [{"capture_id": 3, "stream_id": 13}], ranks) == "ranks 0-1 (stream 7); rank 2 (stream 13)"
    assert where(seven[:4], {}) == ("worker1_step_12.pt.trace.json.gz stream 7, worker2_step_12.pt.trace.json.gz "
                                    "stream 7, worker3_step_12.pt.trace.json.gz stream 7 and 1 more")


def test_one_capture_holding_two_ranks_names_each_gpus_rank():
    # two GPUs of one capture as ranks 0 and 1 (nsys_ai_mfu_2gpu_*): the rank is the GPU's, not the capture's
    from nsight_advisor.report.graph_view import graph_candidates_view

    summary = {"ranks": [{"ranks": [{"capture_id": 1, "device_id": 0, "rank": 0},
                                    {"capture_id": 1, "device_id": 1, "rank": 1}]}],
               "graph_candidates": {"found": 1, "candidates": [
                   {"streams": [{"capture_id": 1, "device_id": 0, "stream_id": 7}], "kernels": ["k"] * 3},
                   {"streams": [{"capture_id": 1, "device_id": 1, "stream_id": 13}], "kernels": ["k"] * 3}]}}
    rows = graph_candidates_view(summary, {1: "x.sqlite"})["rows"]
    assert [r["where"] for r in rows] == ["rank 0 (stream 7)", "rank 1 (stream 13)"]


def test_a_mostly_launch_bound_capture_closes_gaps_to_the_queued_lag(memory_store):
    # Two steps of big, x and then 30 kernels each launched 20 µs apart (10 µs kernels, 10 µs idle before each):
    # so many launch-bound gaps that the capture's typical (5% quantile) stream lag is 7 µs, not the 1 µs by which
    # x follows big when queued in time. As one graph, the 30 kernels follow each other 1 µs apart: each step
    # saves 7 + 29 * 10 - 30 * 1 = 267 µs.
    from nsight_advisor.analysis.kernel_sequences import back_to_back_ns

    con, per, corr = memory_store, 30, 0
    length = 40 + 20 * per + 100
    for i in range(2):
        b = length * i
        kernels = [("big", b, b + 2, b + 5, b + 35), ("x", b + 2, b + 4, b + 36, b + 38)]
        kernels += [(f"k{j}", b + 40 + 20 * j, b + 45 + 20 * j, b + 45 + 20 * j, b + 55 + 20 * j) for j in range(per)]
        for name, c_lo, c_hi, k_lo, k_hi in kernels:
            corr += 1
            _call(con, 1, corr, "cudaLaunchKernel", c_lo, c_hi)
            _kernel(con, 1, corr, name, 7, k_lo, k_hi)
        corr += 1
        last = b + 55 + 20 * (per - 1)
        _call(con, 1, corr, "cudaDeviceSynchronize", last - 5, last + 5)
    g = build_graph(con, [1])
    assert g.typical["stream"] > us(1) and back_to_back_ns(g) == us(1)
    steps = {1: [(0, us(length)), (us(length), us(2 * length))]}
    (cand,) = graph_candidates(g, steps, replay(g), {})["candidates"]
    assert cand["kernel_count"] == per + 1  # x and the 30
    assert cand["saving_per_step_ns"] == us(7 + 29 * 10 - 30)
