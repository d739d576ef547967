"""A job's report: the findings of many ranks grouped per rule (job_findings), in JSON, Markdown and HTML, on the 8
real DLRM ranks and on their result repeated to 256 ranks, the HTML checked in Chromium."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest

from conftest import TRACES
from nsight_advisor import workflow
from nsight_advisor.engine.combined_view import combined_view
from nsight_advisor.engine.model import AnalysisResult, severity_rank
from nsight_advisor.report import render
from test_report import validate_json_contract

DLRM = TRACES / "kineto" / "dlrm_8rank"


@pytest.fixture(scope="module")
def dlrm(tmp_path_factory):
    ranks = sorted(DLRM.glob("*.json.gz"))
    if len(ranks) != 8:
        pytest.skip(f"the DLRM ranks are not at {DLRM}")
    mp = pytest.MonkeyPatch()
    mp.setenv("NSIGHT_ADVISOR_CACHE", str(tmp_path_factory.mktemp("cache")))
    try:
        yield workflow.analyze(ranks)
    finally:
        mp.undo()


def test_dlrm_json_groups_each_rules_findings_with_their_ranks(dlrm):
    doc = validate_json_contract(render(dlrm, "json"))
    jobs, findings = doc["job_findings"], doc["findings"]
    assert len(findings) == 96  # the per-rank findings stay as they are
    assert len({(j["rule_id"], j["subject"]) for j in jobs}) == len(jobs)
    # every finding is in exactly one entry, under its own rank
    listed = sorted(i for j in jobs for row in j["per_rank"] for i in row["findings"])
    assert listed == list(range(len(findings)))
    for j in jobs:
        impacts = [row["impact_ns"] for row in j["per_rank"]]
        assert j["impact_ns_total"] == sum(impacts) == sum(
            findings[i]["impact_ns"] for row in j["per_rank"] for i in row["findings"])
        assert j["worst"]["impact_ns"] == max(impacts) == j["spread"]["max_ns"]
        assert j["spread"]["min_ns"] == min(impacts) and j["ranks_touched"] == len(j["per_rank"])
        assert all(findings[i]["rule_id"] == j["rule_id"] for row in j["per_rank"] for i in row["findings"])
    small = next(j for j in jobs if j["rule_name"] == "small-grid")
    assert small["ranks_touched"] == small["ranks_total"] == 8
    assert sorted(row["rank"] for row in small["per_rank"]) == list(range(8))
    # ranked as the findings are: severity, then the saving with the fix on every rank (else the total claim)
    order = [({"error": 2, "warning": 1, "info": 0}[j["severity"]], j.get("saving_all_ranks_ns", j["impact_ns_total"]))
             for j in jobs if j["ranks_touched"] > 1]
    assert order == sorted(order, reverse=True)


def test_dlrm_markdown_lists_each_rule_once(dlrm):
    text = render(dlrm, "md")
    table = text[text.index("| severity | finding | ranks |"):].split("\n\n", 1)[0].splitlines()[2:]
    rules = [re.search(r"`(NA\d+)`", row).group(1) for row in table]
    assert len(rules) == len(set(rules)) == 13
    assert "| 🔴 error | The GPU waits for its host | 8 of 8 | rank 5:" in text
    assert "96 per-rank findings grouped into 13 entries" in text


def test_dlrm_html_opens_with_the_job(dlrm):
    page = render(dlrm, "html")
    main = page[page.index("<main>"):]
    assert main.index('id="job"') < main.index('id="ranks-1"') < main.index('id="rank-strip"') \
        < main.index('id="job-findings"') < main.index('<details class="per-rank"') < main.index('id="captures"')


def test_names_on_dicts_read_as_jinja_reads_them(dlrm, monkeypatch):
    import jinja2

    from nsight_advisor.report import html

    ours = render(dlrm, "html")
    monkeypatch.setattr(html._Environment, "getattr", jinja2.Environment.getattr)  # Jinja's own lookup
    assert render(dlrm, "html") == ours
    env = html._Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    page = env.from_string("{{ d.a }} {{ d.items is callable }} {{ d.get('a') }} {{ o.real }}")
    assert page.render(d={"a": "<1>", "items": 2}, o=3) == "&lt;1&gt; True &lt;1&gt; 3"  # a method stays a method
    with pytest.raises(jinja2.UndefinedError):
        env.from_string("{{ d.missing }}").render(d={"a": 1})


def _replicated(result, copies: int):
    """The DLRM job as if it had ``copies`` times its 8 ranks: every capture, finding and rank row repeated under new
    capture ids and ranks (rank r of copy k is rank 8k + r). The page's layout at 256 ranks is what this checks; the
    analysis of 256 replayed ranks is tests/test_ranks_report.py's."""
    n = len(result.captures)
    captures, findings, ranks = [], [], []
    job = result.summary["ranks"][0]
    for k in range(copies):
        for c in result.captures:
            captures.append({**c, "capture_id": c["capture_id"] + k * n})
        for f in result.findings:
            findings.append(dataclasses.replace(f, capture_id=f.capture_id + k * n, internal={}))
        for r in job["ranks"]:
            ranks.append({**r, "capture_id": r["capture_id"] + k * n, "rank": r["rank"] + k * n})
    findings.sort(key=lambda f: (-severity_rank(f.severity), -f.impact_ns, f.rule_id, f.capture_id))
    summary = {**result.summary, "ranks": [{**job, "ranks": ranks, "rank_count": len(ranks)}]}
    summary.pop("combined", None)
    out = AnalysisResult(tool=result.tool, captures=captures, findings=findings, outcomes=result.outcomes,
                         summary=summary)
    out.summary["combined"] = combined_view(out)
    return out


@pytest.mark.browser
def test_256_ranks_open_with_the_job_in_chromium(dlrm, tmp_path):
    from cdp import Browser, find_chromium, load

    exe = find_chromium()
    if exe is None:
        pytest.skip("no chromium on PATH")
    result = _replicated(dlrm, 32)
    doc = json.loads(render(result, "json"))
    assert len(doc["findings"]) == 96 * 32 and len(doc["job_findings"]) == 13
    assert {j["ranks_total"] for j in doc["job_findings"]} == {256}
    page = render(result, "html")
    assert len(page.encode()) < 5 * 1024 * 1024
    md = render(result, "md")
    assert len(md) <= 65_536 and md.count("`NA101` small-grid |") == 1
    path = tmp_path / "job256.html"
    path.write_text(page, encoding="utf-8")
    browser = Browser(exe)
    try:
        loaded = load(browser, path, width=1280, height=900)
        assert loaded.requests == [] and loaded.console_errors == [] and loaded.dialogs == []
        # the first screen is the job: its heading and chart, not rank 0's panels (collapsed below)
        assert loaded.evaluate("document.querySelector('main').firstElementChild.id") == "job"
        assert loaded.evaluate("document.getElementById('ranks-1').getBoundingClientRect().top") < 900
        assert loaded.evaluate("document.getElementById('per-rank').open") is False
        assert loaded.evaluate("document.getElementById('captures').checkVisibility()") is False
        assert loaded.evaluate("document.getElementById('job-findings').checkVisibility()") is True
        assert loaded.evaluate("document.querySelectorAll('#rank-strip > svg > g').length") == 256
        # an entry's table lists the 16 worst ranks and counts the rest
        assert loaded.evaluate(
            "document.querySelector('#job-findings details').querySelectorAll(':scope tbody tr').length") == 16
        assert "240 more ranks not listed" in page
        loaded.screenshot(tmp_path / "job256.png")
    finally:
        browser.close()


_COMPILED = """
import sys, jinja2
compiled = []
real = jinja2.Environment.compile
def compile(self, source, name=None, *args, **kwargs):
    compiled.append(name)
    return real(self, source, name, *args, **kwargs)
jinja2.Environment.compile = compile
from nsight_advisor.report.html import _environment
_environment().get_template(sys.argv[1])
print(" ".join(sorted(n for n in compiled if n)))
"""


def test_the_first_template_compiled_stores_the_others_so_a_later_job_report_compiles_none(tmp_path):
    import os
    import subprocess
    import sys

    from nsight_advisor.common.resources import templates_dir

    env = {**os.environ, "NSIGHT_ADVISOR_CACHE": str(tmp_path / "cache")}

    def compiled(template: str) -> list[str]:
        proc = subprocess.run([sys.executable, "-c", _COMPILED, template], env=env, capture_output=True, text=True,
                              check=True)
        return proc.stdout.split()

    every = sorted(p.name for p in templates_dir().glob("*.j2"))
    assert "job.html.j2" in every and "report.html.j2" in every
    assert compiled("report.html.j2") == every  # a single capture's first run on the machine
    assert compiled("job.html.j2") == []  # a job's report after it: from the support folder
    assert compiled("compare.html.j2") == []
