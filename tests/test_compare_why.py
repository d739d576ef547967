"""The "why" of a regression: new or worse findings overlapping it, offered first (hand-made analyses with the
arithmetic beside them; the real pair is checked at the end)."""

from __future__ import annotations

import json
from pathlib import Path

from nsight_advisor.compare.comparison import compare_results
from test_compare import AFTER, BEFORE, _cli, _need

GEMM = "void ns::gemm_kernel<128>(float *)"


def _finding(rule: str, subject: str, impact_ns: int, device: int | None = 0) -> dict:
    return {"rule_id": rule, "rule_name": rule.lower(), "severity": "warning", "title": f"{rule} title",
            "message": f"costs {impact_ns} ns", "impact_ns": impact_ns, "device_id": device,
            "evidence_columns": ["name", "n"], "evidence": [{"name": subject, "n": 3}]}


def _analysis(findings: list[dict]) -> dict:
    return {"tool": {"name": "nsight-advisor"}, "findings": findings, "outcomes": [],
            "captures": [{"source_name": "x.sqlite", "iterations": None, "gpus": [], "accounting": []}]}


def test_finding_naming_the_slower_kernel_comes_first() -> None:
    base_k = {GEMM: [1000, 1010, 990, 1005, 995] * 4, "copy_kernel": [500, 505, 495, 500, 502] * 4}
    head_k = {GEMM: [1500, 1510, 1490, 1505, 1495] * 4, "copy_kernel": [500, 505, 495, 500, 502] * 4}
    base = _analysis([_finding("NA101", "gemm_kernel", 1000), _finding("NA401", "host", 100),
                      _finding("NA403", "startup", 100)])
    head = _analysis([_finding("NA101", "gemm_kernel", 1500),  # worse: names the slower kernel by its short name
                      _finding("NA401", "host", 5000),  # worse, and its claim grew more, but names no kernel
                      _finding("NA403", "startup", 900),  # a one-time cost: not per-iteration, still counted here
                      _finding("NA999", "copy_kernel", 50)])  # new, names an unchanged kernel, claims 50 ns
    c = compare_results(base, head, base_k, head_k)
    assert c["verdict"]["status"] == "slower" and c["verdict"]["measure"] == "per window"
    added = 20 * 500  # 20 launches, each 500 ns longer
    why = c["why"]
    assert [w["rule_id"] for w in why] == ["NA101", "NA401", "NA403", "NA999"]
    assert why[0]["kernels"] == [GEMM] and why[0]["impact_change_ns"] == 500
    assert f"{100 * 4900 / added:.1f}% of the time added" in why[1]["text"]
    assert why[1]["device_id"] == 0 and why[1]["text"].startswith("worse NA401 na401 (GPU 0): NA401 title (")
    gemm = next(k for k in c["kernels"] if k["name"] == GEMM)
    assert gemm["status"] == "slower" and gemm["why"] == [why[0]["fingerprint"]]
    assert c["verdict"]["text"].endswith("first explanation: " + why[0]["text"])


def test_no_regression_offers_no_explanation() -> None:
    k = {GEMM: [1000, 1010, 990, 1005, 995] * 4}
    c = compare_results(_analysis([]), _analysis([_finding("NA401", "host", 5000)]), k, k)
    assert c["verdict"]["status"] == "no change" and c["why"] == []
    assert c["findings"][0]["status"] == "new"


def test_real_pair_why_leaves_one_time_costs_out(tmp_path: Path) -> None:
    _need(BEFORE, AFTER)
    out = tmp_path / "c.json"
    assert _cli("compare", str(BEFORE), str(AFTER), "-o", str(out), cwd=tmp_path).returncode == 0
    c = json.loads(out.read_text())
    assert c["verdict"]["measure"] == "per iteration" and c["verdict"]["status"] == "slower"
    # HEAD's new startup cost (NA403 on GPU 1) lies before the steps: it is no explanation of slower steps
    assert any(f["status"] == "new" and f["rule_id"] == "NA403" for f in c["findings"])
    assert c["why"] and all(w["rule_id"] != "NA403" for w in c["why"])
    grown = [w["impact_change_ns"] for w in c["why"]]
    assert grown == sorted(grown, reverse=True) and min(grown) > 0
    worse = {f["fingerprint"] for f in c["findings"] if f["status"] == "worse"
             and f["head_impact_ns"] > f["base_impact_ns"]}
    assert {w["fingerprint"] for w in c["why"]} == worse
    md = _cli("compare", str(BEFORE), str(AFTER), cwd=tmp_path).stdout
    assert "### Why" in md and md.index("### Why") < md.index("### Kernels")
