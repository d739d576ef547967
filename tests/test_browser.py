"""The HTML report in a real browser: headless Chromium driven over the DevTools pipe (tests/cdp.py).

Each test loads a rendered report from a file, then checks the DOM for the findings, that the page
attempted no request at all (every request is recorded and failed), that nothing was logged to the
console (CSP violations included), and that no dialog opened. Hostile kernel names must show as text.
Screenshots go to a temporary folder, or to docs/screenshots/ with NA_UPDATE_SCREENSHOTS=1.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest


from nsight_advisor.report import render

from cdp import Browser, find_chromium, load
from conftest import REPO, TRACES
from report_samples import HOSTILE_NAMES, hostile_result

pytestmark = pytest.mark.browser

# The three real captures the docs show: an nsys export with findings, an ncu report, and a clean capture.
SCREENSHOT_CAPTURES = {
    "nsys-findings": TRACES / "nsys" / "nsys_ai_h100_2gpu_1s.sqlite",
    "ncu-report": TRACES / "ncu" / "sglang_h800_flashattn.ncu-rep",
    # no findings: its kernels carry no metrics to judge (gpu_power_model, fully profiled, is latency-bound)
    "clean-capture": TRACES / "ncu" / "cs599k_gh200_silu.ncu-rep",
}


@pytest.fixture(scope="module")
def browser():
    exe = find_chromium()
    if exe is None:
        pytest.skip("no chromium on PATH (.ci/run installs Debian's chromium package; apt-get install chromium)")
    b = Browser(exe)
    yield b
    b.close()


@pytest.fixture(scope="module")
def shots_dir(tmp_path_factory) -> Path:
    if os.environ.get("NA_UPDATE_SCREENSHOTS") == "1":
        return REPO / "docs" / "screenshots"
    return tmp_path_factory.mktemp("screenshots")


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def assert_quiet(page) -> None:
    """No request beyond the report file, no console message or error, no dialog."""
    assert page.requests == [], f"the report attempted requests: {page.requests}"
    assert page.console_errors == [], f"console errors: {page.console_errors}"
    assert page.dialogs == [], f"dialogs opened: {page.dialogs}"


def test_hostile_names_show_as_text_and_nothing_runs(browser, tmp_path, shots_dir):
    result = hostile_result(n_findings=len(HOSTILE_NAMES))
    page = load(browser, write(tmp_path, "hostile.html", render(result, "html")))
    assert_quiet(page)
    # Our one script is the only script element, and no element came from a capture string.
    assert page.evaluate("document.scripts.length") == 1
    assert page.evaluate("document.querySelectorAll('img, iframe, object, embed, link, textarea').length") == 0
    assert page.evaluate("document.getElementById('pwned')") is None
    assert page.evaluate("document.querySelectorAll('svg [onload], [onerror]').length") == 0
    # Every hostile name is on the page, character for character, as text.
    text = page.evaluate("document.body.innerText")
    for name in HOSTILE_NAMES:
        assert name in text, name
    titles = page.evaluate("[...document.querySelectorAll('article.finding h3')].map(h => h.textContent)")
    assert len(titles) == len(HOSTILE_NAMES)
    assert any("<script>alert(1)</script>" in t for t in titles)
    assert any("T&amp; a" in t for t in titles)  # '&amp;' stays five characters
    # The style sheet still applies after a '</style>' in a name: the header bar is dark.
    assert page.evaluate("getComputedStyle(document.querySelector('header.top')).backgroundColor") == "rgb(21, 27, 35)"
    page.screenshot(shots_dir / "hostile-names.png", height=900)


def test_report_reads_well_without_javascript(browser, tmp_path):
    result = hostile_result(n_findings=3)
    page = load(browser, write(tmp_path, "nojs.html", render(result, "html")), javascript=False)
    assert_quiet(page)
    assert page.evaluate("document.querySelectorAll('article.finding').length") == 3
    # The top findings' evidence is open without a script; charts are inline SVG.
    assert page.evaluate("document.querySelectorAll('details[open] table tbody tr').length") >= 20
    assert page.evaluate("document.querySelectorAll('figure svg').length") == 3


def test_report_prints(browser, tmp_path):
    page = load(browser, write(tmp_path, "print.html", render(hostile_result(), "html")))
    pdf = page.print_pdf()
    assert pdf.startswith(b"%PDF") and len(pdf) > 10_000
    assert_quiet(page)


@pytest.mark.parametrize("key", list(SCREENSHOT_CAPTURES))
def test_real_capture_reports_in_the_browser(key, browser, tmp_path, shots_dir, tmp_path_factory):
    capture = SCREENSHOT_CAPTURES[key]
    if not capture.exists():
        pytest.skip(f"real traces not present at {capture}")
    from nsight_advisor import workflow

    result = workflow.analyze([capture], store_path=tmp_path_factory.mktemp("store") / "store.duckdb")
    page = load(browser, write(tmp_path, f"{key}.html", render(result, "html")))
    assert_quiet(page)
    articles = page.evaluate(
        "[...document.querySelectorAll('article.finding')].map(a => [a.dataset.ruleId, a.querySelector('h3').textContent])")
    # the engine's ranking (harness last, severity, then what the fix saves or else claims), which the page keeps
    expected = list(result.findings)
    assert [a[0] for a in articles] == [f.rule_id for f in expected]
    for (_, title), f in zip(articles, expected):
        assert f.title in title
    outcome_ids = page.evaluate("[...document.querySelectorAll('tr.outcome')].map(r => r.dataset.ruleId)")
    assert sorted(outcome_ids) == sorted(o.rule_id for o in result.outcomes)
    header = page.evaluate("document.getElementById('captures').innerText")
    assert capture.name in header
    if key == "clean-capture":
        assert not result.findings
        assert "No rule found a problem" in page.evaluate("document.body.innerText")
    if key == "ncu-report":
        assert page.evaluate("document.querySelectorAll('#chart-roofline circle').length") >= 1
    if key == "nsys-findings":
        assert result.findings
        assert page.evaluate("document.querySelectorAll('#chart-categories rect').length") >= 2
        assert page.evaluate("document.querySelectorAll('.chart-utilization path.area').length") == 1
    page.screenshot(shots_dir / f"{key}.png", height=900)  # the first screen a reviewer sees
    page.screenshot(tmp_path / f"{key}-full.png")  # the whole page renders too (kept out of docs: large)


@pytest.mark.parametrize("stem, tables", [("nsys_ai_mfu_2gpu_before", 2), ("nsys_ai_h100_2gpu_1s", 1)])
def test_no_panel_is_wider_than_its_column(stem, tables, browser, tmp_path, tmp_path_factory):
    # Two GPUs, savings on every rank: the widest tables the first screen has (the ranks table where the GPUs'
    # collectives match, and "what costs the most" with its saving columns). A table too wide for its column
    # scrolls inside its panel; the glance table fits at 1280 pixels.
    capture = TRACES / "nsys" / f"{stem}.sqlite"
    if not capture.exists():
        pytest.skip(f"real traces not present at {capture}")
    from nsight_advisor import workflow

    result = workflow.analyze([capture], store_path=tmp_path_factory.mktemp("store") / "store.duckdb")
    page = load(browser, write(tmp_path, "wide.html", render(result, "html")), width=1280)
    assert_quiet(page)
    assert page.evaluate("document.querySelectorAll('[id^=ranks-] table, table.glance').length") == tables
    overflowing = page.evaluate("[...document.querySelectorAll('.panel')]"
                                ".filter(p => p.scrollWidth > p.clientWidth + 1)"
                                ".map(p => (p.querySelector('h2') || p).textContent.slice(0, 60))")
    assert overflowing == []
    glance = page.evaluate("(s => s.scrollWidth - s.clientWidth)(document.querySelector('table.glance').parentElement)")
    assert glance <= 1, f"the glance table scrolls by {glance} px at 1280 px"


def test_one_column_puts_what_costs_the_most_after_the_capture(browser, tmp_path, tmp_path_factory):
    # A narrow window (a review tool's side panel) stacks the overview's two columns: the findings at a glance
    # must not fall below every chart of the left one
    capture = TRACES / "nsys" / "nsys_ai_mfu_2gpu_before.sqlite"
    if not capture.exists():
        pytest.skip(f"real traces not present at {capture}")
    from nsight_advisor import workflow

    result = workflow.analyze([capture], store_path=tmp_path_factory.mktemp("store") / "store.duckdb")
    html = write(tmp_path, "narrow.html", render(result, "html"))
    tops = ("['captures', 'glance', 'ranks-1', 'chart-categories', 'kernels']"
            ".map(id => document.getElementById(id).getBoundingClientRect().top)")
    narrow = load(browser, html, width=800).evaluate(tops)
    assert narrow == sorted(narrow), narrow  # capture, glance, ranks, charts, top kernels: one above the next
    wide = load(browser, html, width=1280).evaluate(tops)
    assert wide[1] == wide[0] and wide[2] > wide[0]  # two columns: the glance beside the capture


def test_the_harness_sees_requests_errors_and_dialogs(browser, tmp_path):
    # A page without our escaping or CSP: proves the checks above would catch what they look for.
    bad = ('<!doctype html><img src="http://example.invalid/pixel.png"><link rel=stylesheet href="https://cdn.invalid/x.css">'
           '<script>console.error("boom"); alert("ran")</script>')
    page = load(browser, write(tmp_path, "bad.html", bad))
    assert "http://example.invalid/pixel.png" in page.requests and "https://cdn.invalid/x.css" in page.requests
    assert page.dialogs == ["ran"]
    assert any("boom" in e for e in page.console_errors)
