"""Our rules against NVIDIA's own verdicts on the same real captures.

* Nsight Systems: ``answers/NAME/analyze.txt`` holds ``nsys analyze`` (2022.4.2) on ``nsys/NAME.sqlite``. Wherever
  it lists calls for cuda-sync-api, cuda-sync-memcpy, cuda-sync-memset or cuda-async-memcpy, our sync-stall,
  sync-memcpy and pageable-memcpy rules report the same calls (same process, thread where listed, API and memory
  kinds); where gpu-starv lists gaps, gpu-idle-gap reports them.
* Nsight Compute: wherever a report's stored rule results say "Small Grid", small-grid fires for that kernel; every
  stored LaunchConfiguration, Occupancy, SOLBottleneck, ThreadDivergence and CPIStall verdict is compared with ours, and every disagreement
  must have a stated reason (``REASONS``); the table of them is printed with ``pytest -s``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import TRACES, ncu_reports, nsys_exports, trace_param
from rules_real import analyzed, evidence, outcome

ANSWERS = TRACES / "answers"
_VERSION = re.compile(r"_v\d+$")
#: nsys analyze prints the top 50 rows of each rule by default (``rows=50``); a full table may hide more.
TOP_ROWS = 50


def _same(mine: set, theirs: set, rows: list) -> bool:
    """Equal sets, or ours a superset when NVIDIA's table was cut at its top 50 rows."""
    return mine >= theirs if len(rows) >= TOP_ROWS else mine == theirs


def _base(api: str) -> str:
    return _VERSION.sub("", api)


def analyze_sections(text: str) -> dict[str, list[list[str]] | None]:
    """Rows (whitespace-split table lines) per nsys analyze rule; None where the rule was skipped."""
    sections: dict[str, list[list[str]] | None] = {}
    for block in re.split(r"^Processing \[", text, flags=re.M)[1:]:
        rule = re.search(r"nsys-rules/([\w-]+)\.py", block).group(1)
        if "SKIPPED:" in block:
            sections[rule] = None
            continue
        rows, in_table = [], False
        for line in block.splitlines():
            if re.match(r"^\s*-{3,}(\s+-{3,})*\s*$", line):
                in_table = True
                continue
            if in_table:
                if not line.strip():
                    break
                rows.append(line.split())
        sections[rule] = rows
    return sections


def _sections(export: Path) -> dict:
    answer = ANSWERS / export.stem / "analyze.txt"
    if not answer.exists():
        pytest.skip(f"no nsys analyze answer for {export.name}")
    return analyze_sections(answer.read_text(encoding="utf-8"))


def _rel(path: Path) -> str:
    return str(path.relative_to(TRACES))


def test_parser_reads_a_real_answer(traces_dir):
    sections = analyze_sections((ANSWERS / "nsys_ai_h100_2gpu_1s" / "analyze.txt").read_text())
    assert len(sections["cuda-sync-api"]) == 8
    assert sections["cuda-sync-api"][0] == ["428468918", "155636047407", "111", "111", "cudaStreamSynchronize_v3020"]
    assert len(sections["cuda-async-memcpy"]) == 4
    assert sections["gpu-starv"] == []
    assert sections["dx12-mem-op"] is None


def _threads_whose_syncs_starve_the_gpu(con, capture_id: int = 1) -> set[tuple[int, int, str]]:
    """(pid, tid, api) of synchronization calls after which a device ran dry for 20 us or more, in a gap that is
    not start-up: the call was blocked when the device's last operation ended and returned before the next one
    started, or sat in half the gap. Written here from the raw tables (merged busy intervals per device in Python),
    apart from the views."""
    ops = con.execute("""
        select device_id, start_ns, end_ns from kernels where capture_id = ? and end_ns > start_ns
        union all select device_id, start_ns, end_ns from memcpys where capture_id = ? and end_ns > start_ns
        union all select device_id, start_ns, end_ns from memsets where capture_id = ? and end_ns > start_ns
        order by 1, 2""", [capture_id] * 3).fetchall()
    gaps, last = [], {}
    for device, start, end in ops:
        if device in last and start - last[device] >= 20_000:
            gaps.append((last[device], start))
        last[device] = max(last.get(device, end), end)
    # docs/impact.md: a gap that module loading, CUDA initialization or a launch blocking 1 ms or more (lazy
    # loading) covers for a tenth is startup, whatever else the host did in it
    loading = con.execute("""
        select start_ns, end_ns from api_calls
        where capture_id = ? and (base_name ilike 'cuModuleLoad%' or base_name ilike 'cuLibraryLoad%'
              or base_name in ('cuInit', 'cuDevicePrimaryCtxRetain') or base_name ilike 'cuCtxCreate%'
              or (base_name ilike '%launch%' and duration_ns >= 1000000))""", [capture_id]).fetchall()

    def startup(g0: int, g1: int) -> bool:
        return sum(max(0, min(e, g1) - max(s, g0)) for s, e in loading) >= (g1 - g0) / 10

    gaps = [g for g in gaps if not startup(*g)]
    calls = con.execute("""
        select distinct pid, tid, base_name, start_ns, end_ns from api_calls
        where capture_id = ? and base_name ilike '%synchronize%'""", [capture_id]).fetchall()
    out = set()
    for pid, tid, api, start, end in calls:
        for g0, g1 in gaps:
            waited = start <= g0 <= end < g1
            covered = min(end, g1) - max(start, g0) >= (g1 - g0) / 2
            if waited or covered:
                out.add((int(pid), int(tid), api))
                break
    return out


@pytest.mark.parametrize("export", trace_param(nsys_exports()))
def test_sync_api_calls_match_nsys_analyze(export):
    # nsys analyze lists every synchronizing call; sync-stall reports those that left a device idle (docs/impact.md:
    # a call that cost no GPU time makes no finding). So: every call it reports is one nsys lists (or one of the
    # APIs NVIDIA's rule does not cover), and every call nsys lists that it does not report starved no GPU.
    rows = _sections(export).get("cuda-sync-api")
    ours = {(int(r["pid"]), int(r["tid"]), r["api"]) for r in evidence(_rel(export), "sync-stall")}
    theirs = {(int(r[2]), int(r[3]), _base(r[4])) for r in rows or []}
    covered = {"cudaDeviceSynchronize", "cudaStreamSynchronize"}
    if rows is not None and len(rows) < TOP_ROWS:
        assert {o for o in ours if o[2] in covered} <= theirs, f"ours {sorted(ours)} vs nsys {sorted(theirs)}"
    _, con = analyzed(_rel(export))
    starving = _threads_whose_syncs_starve_the_gpu(con)
    assert theirs - ours <= theirs - starving, (
        f"{sorted((theirs - ours) & starving)} left a GPU idle after a sync, and sync-stall does not report it")
    assert {o for o in starving if o[2] in covered} <= ours, f"starving {sorted(starving)}, reported {sorted(ours)}"


@pytest.mark.parametrize("export", trace_param(nsys_exports()))
def test_sync_memcpy_and_memset_calls_match_nsys_analyze(export):
    sections = _sections(export)
    ours = evidence(_rel(export), "sync-memcpy")
    copies = sections.get("cuda-sync-memcpy")
    theirs = {(int(r[5]), _base(r[9]), r[2].lower(), r[3].lower()) for r in copies or []}
    mine = {(int(r["pid"]), r["api"], r["src_kind"], r["dst_kind"]) for r in ours if r["direction"] != "Memset"}
    if copies is not None:
        assert _same(mine, theirs, copies), f"ours {sorted(mine)} vs nsys analyze {sorted(theirs)}"
    sets = sections.get("cuda-sync-memset")
    theirs_sets = {(int(r[4]), _base(r[-1])) for r in sets or []}
    mine_sets = {(int(r["pid"]), r["api"]) for r in ours if r["direction"] == "Memset"}
    if sets is not None:
        assert _same(mine_sets, theirs_sets, sets)


@pytest.mark.parametrize("export", trace_param(nsys_exports()))
def test_pageable_async_copies_match_nsys_analyze(export):
    rows = _sections(export).get("cuda-async-memcpy")
    theirs = {(int(r[5]), _base(r[9]), r[2].lower(), r[3].lower()) for r in rows or []}
    mine = {(int(r["pid"]), r["api"], r["src_kind"], r["dst_kind"]) for r in evidence(_rel(export), "pageable-memcpy")}
    if rows is not None:
        assert _same(mine, theirs, rows), f"ours {sorted(mine)} vs nsys analyze {sorted(theirs)}"


@pytest.mark.parametrize("export", trace_param(nsys_exports()))
def test_gpu_starvation_gaps_are_idle_gaps(export):
    rows = _sections(export).get("gpu-starv")
    if not rows:
        # NVIDIA's 500 ms default finds none on these captures; our 1 ms threshold may find more, never fewer.
        return
    ours = evidence(_rel(export), "gpu-idle-gap")
    longest = max(int(r["gap_ns"]) for r in ours) if ours else 0
    assert ours and longest >= max(int(r[1]) for r in rows)


# --- Nsight Compute -------------------------------------------------------------------------------------------

def _stored_verdicts(rel: str) -> list[dict]:
    _, con = analyzed(rel)
    sql = """
        select k.kernel_id, k.short_name, k.blocks, k.threads_per_block, r.rule_id, coalesce(r.title, '') as title,
               r.result_type, coalesce(r.message, '') as message
        from ncu_rule_results r join ncu_kernels k using (capture_id, kernel_id)
        where (r.rule_id in ('LaunchConfiguration', 'Occupancy', 'TheoreticalOccupancy', 'AchievedOccupancy',
                             'SOLBottleneck', 'ThreadDivergence') or r.rule_id like 'CPIStall%')
          and r.result_type in ('info', 'warning', 'error', 'optimization', 'ok')
        order by k.kernel_id, r.rule_id, title, r.result_type, message
    """
    cur = con.execute(sql)
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, row)) for row in cur.fetchall()]


def _verdict_title(v: dict) -> str:
    """The stored verdict's title; reports older than 2023.2 store none, so read it off the message."""
    if v["rule_id"].startswith("CPIStall"):
        # a CPIStall result that only says a metric is missing is no verdict: nothing was measured to judge
        return "Error" if v["result_type"] == "error" or "could not be found" in v["message"] else "Warp Stall"
    if v["rule_id"] == "AchievedOccupancy" and v["result_type"] != "error":
        return "Achieved Occupancy"
    # Before 2023.2 one Occupancy rule judged both: a kernel whose theoretical occupancy no limit lowers got its
    # message about the gap to achieved occupancy, which is achieved-occupancy's verdict
    if (v["rule_id"] == "Occupancy" and v["result_type"] != "error"
            and "not impacted by any block limit" in v["message"] and "achieved occupancy" in v["message"]):
        return "Achieved Occupancy"
    if v["rule_id"] in ("Occupancy", "TheoreticalOccupancy") and v["result_type"] != "error":
        return "Occupancy"
    if v["rule_id"] == "ThreadDivergence":
        return "Thread Divergence"
    if v["title"]:
        return v["title"]
    msg = v["message"]
    if v["result_type"] == "error":
        return "Error"
    if "partial wave" in msg:
        return "Tail Effect"
    if "grid for this launch is configured to execute only" in msg or "too small to fill" in msg:
        return "Small Grid"
    if "multiple of" in msg and "block" in msg.lower():
        return "Block Size"
    if "below 60.0% of peak" in msg or "latency issues" in msg:
        return "Latency Issue"
    return "?"


def _fires(rel: str, rule: str, short_name: str, blocks) -> bool:
    for row in evidence(rel, rule):
        if row.get("source", "ncu") == "ncu" and row.get("short_name") == short_name:
            if "blocks" not in row or blocks is None or row["blocks"] == blocks:
                return True
    return False


# (stored verdict, our rule, does ours fire) -> why the two may differ; None = they agree.
REASONS = {
    ("Small Grid", "small-grid", True): None,
    ("Tail Effect", "tail-effect", True): None,
    ("Block Size", "block-size-not-multiple-of-32", True): None,
    ("High Memory Throughput", "memory-bound-kernel", True): None,
    ("Tail Effect", "tail-effect", False):
        "our tail estimate (1 - last-wave fill) / ceil(waves) is under 10%: Nsight Compute's 1/(1 + full waves) "
        "ignores how full the last wave is",
    ("High Memory Throughput", "memory-bound-kernel", False):
        "Nsight Compute's memory throughput is the busiest of DRAM, L1 and L2; we call a kernel memory-bound on "
        "DRAM throughput only (the guide's ops:byte sense); L1/L2-bound kernels are an access-pattern problem",
    ("Occupancy", "low-occupancy", True): None,
    ("Occupancy", "low-occupancy", False):
        "low-occupancy fires only under 50% theoretical occupancy limited by registers or shared memory, never on "
        "kernels whose tensor pipe is busy (library-tuned GEMMs and attention, by their counters); Nsight Compute's "
        "theoretical-occupancy rule fires from 80% down, on nearly every kernel (the gap between achieved and "
        "theoretical occupancy is achieved-occupancy's)",
    ("Latency Issue", "latency-bound", True): None,
    ("Achieved Occupancy", "achieved-occupancy", True): None,
    ("Thread Divergence", "thread-divergence", True): None,
    ("High Throughput", None, False): None,
    ("Balanced Throughput", None, False): None,
    ("Error", None, False): "Nsight Compute could not collect this kernel's metrics; neither do we judge it",
    ("High Compute Throughput", "low-tensor-core-use", True): None,
    ("High Compute Throughput", "low-tensor-core-use", False):
        "compute-heavy kernels have no rule of their own: low-tensor-core-use judges the SIMT GEMMs among them, and "
        "this kernel is no GEMM (or already on tensor cores)",
    ("Warp Stall", "dominant-stall", True): None,
    ("Warp Stall", "dominant-stall", False):
        "CPIStall reports every reason above 30% of the cycles between instructions; dominant-stall (or "
        "latency-bound, which names the top stalls of its kernels) reports the largest one per kernel",
}

_TITLE_RULE = {"Small Grid": "small-grid", "Tail Effect": "tail-effect", "Block Size": "block-size-not-multiple-of-32",
               "High Memory Throughput": "memory-bound-kernel", "Occupancy": "low-occupancy",
               "Latency Issue": "latency-bound", "Thread Divergence": "thread-divergence",
               "Achieved Occupancy": "achieved-occupancy", "High Compute Throughput": "low-tensor-core-use",
               "Warp Stall": "dominant-stall"}


def _fires_for(rel: str, title: str, rule: str, short_name: str, blocks) -> str | None:
    """Which rule of ours meets a stored verdict on the kernel, or None. A stall verdict is met by dominant-stall,
    or by latency-bound, which names the top stall reasons of the kernels it reports (dominant-stall leaves those
    out)."""
    if _fires(rel, rule, short_name, blocks):
        return rule
    if title == "Warp Stall" and _fires(rel, "latency-bound", short_name, blocks):
        return "latency-bound"
    return None


def compare_ncu(rel: str) -> list[dict]:
    """Every stored verdict beside ours: one dict per (kernel, verdict) with agree/reason."""
    out = []
    for v in _stored_verdicts(rel):
        title = _verdict_title(v)
        rule = _TITLE_RULE.get(title)
        met_by = _fires_for(rel, title, rule, v["short_name"], v["blocks"]) if rule else None
        fired = met_by is not None
        key = (title, rule, fired)
        out.append({"report": rel, "kernel": f'{v["kernel_id"]}:{v["short_name"]}', "ncu": f'{v["rule_id"]}/{title}',
                    "ours": f"{met_by or rule}={'fires' if fired else 'silent'}" if rule else "-",
                    "known": key in REASONS, "reason": REASONS.get(key)})
    # The other direction: launch findings of ours on a kernel where Nsight Compute stored no such verdict.
    stored = {(v["short_name"], _verdict_title(v)) for v in _stored_verdicts(rel)}
    for rule, title in (("small-grid", "Small Grid"), ("tail-effect", "Tail Effect"),
                        ("memory-bound-kernel", "High Memory Throughput"), ("low-occupancy", "Occupancy"),
                        ("latency-bound", "Latency Issue"), ("thread-divergence", "Thread Divergence"),
                        ("achieved-occupancy", "Achieved Occupancy"), ("dominant-stall", "Warp Stall")):
        for row in evidence(rel, rule):
            if row.get("source", "ncu") == "ncu" and (row["short_name"], title) not in stored:
                out.append({"report": rel, "kernel": row["short_name"], "ncu": f"no '{title}'", "ours": f"{rule}=fires",
                            "known": True, "reason": _EXTRA_REASONS[rule]})
    return out


_EXTRA_REASONS = {
    "small-grid": "Nsight Compute stored no LaunchConfiguration verdict for this kernel",
    "memory-bound-kernel": "Nsight Compute calls a unit at 80% of peak or more 'High Throughput' (the hardware is "
                           "well used) and stops there; we still call the kernel memory-bound when DRAM is the busy "
                           "unit, because the guide's fix (move fewer bytes) is what can still make it faster",
    "low-occupancy": "Nsight Compute stored no occupancy verdict for this kernel",
    "latency-bound": "both throughputs under 60% of peak is Nsight Compute's own 'Latency Issue' test; its "
                     "SOLBottleneck rule stored no verdict for this kernel in this report",
    "thread-divergence": "Nsight Compute stored no ThreadDivergence verdict for this kernel",
    "achieved-occupancy": "Nsight Compute 2023.1 and older had no separate AchievedOccupancy rule: their "
                          "combined Occupancy rule reported the limiters instead, and 2020.2's none at all",
    "dominant-stall": "Nsight Compute stored no CPIStall verdict for this kernel",
    "tail-effect": "Nsight Compute before 2025.1 also required achieved occupancy under 80% of theoretical before "
                   "it reported a tail; we judge the wave geometry alone",
}


@pytest.mark.parametrize("report", trace_param(ncu_reports()))
def test_small_grid_fires_wherever_nsight_compute_says_small_grid(report):
    rel = _rel(report)
    missed = [f'{v["kernel_id"]}:{v["short_name"]} ({v["rule_id"]})' for v in _stored_verdicts(rel)
              if _verdict_title(v) == "Small Grid" and v["rule_id"] == "LaunchConfiguration"
              and not _fires(rel, "small-grid", v["short_name"], v["blocks"])]
    assert not missed, f"Nsight Compute says Small Grid, small-grid is silent: {missed}"
    # SOLBottleneck's 'Small Grid' means under one wave; with fewer blocks than SMs ours must fire too.
    sol = [v for v in _stored_verdicts(rel) if _verdict_title(v) == "Small Grid" and v["rule_id"] == "SOLBottleneck"]
    for v in sol:
        row = next((k for k in analyzed(rel)[1].execute(
            "select blocks, sm_count from ncu_kernels where kernel_id = ?", [v["kernel_id"]]).fetchall()), None)
        if row and row[0] is not None and row[1] and row[0] < row[1]:
            assert _fires(rel, "small-grid", v["short_name"], v["blocks"]), v


@pytest.mark.parametrize("report", trace_param(ncu_reports()))
def test_launch_occupancy_and_bottleneck_verdicts_agree_or_are_explained(report):
    rows = compare_ncu(_rel(report))
    unexplained = [r for r in rows if not r["known"]]
    for r in rows:
        if r["reason"]:
            print(f'{r["report"]:40s} {r["kernel"]:55s} {r["ncu"]:40s} {r["ours"]:35s} {r["reason"]}')
    assert not unexplained, f"disagreements without a stated reason: {unexplained}"


@pytest.mark.parametrize("report", trace_param(ncu_reports()))
def test_every_rule_ran_on_the_report(report):
    result, _ = analyzed(_rel(report))
    errored = [(o.rule_name, o.reason) for o in result.outcomes if o.status == "errored"]
    assert not errored


def test_agreement_doc_is_current(traces_dir):
    """docs/ncu-agreement.md is what tools/ncu_agreement.py writes from the reports today."""
    from conftest import REPO
    from tools import ncu_agreement as tool

    current = (REPO / "docs" / "ncu-agreement.md").read_text(encoding="utf-8")
    assert current == tool.render(), "docs/ncu-agreement.md is stale: run `python -m tools.gen_docs`"
