"""The comparison page in a real browser (tests/cdp.py): no request, no console message, no dialog, no script;
hostile kernel names and finding subjects show as text."""

from __future__ import annotations

import json

from pathlib import Path

import pytest

from cdp import Browser, find_chromium, load
from conftest import TRACES
from report_samples import HOSTILE_NAMES, hostile_result

from nsight_advisor.compare.short_names import short_name

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def browser():
    exe = find_chromium()
    if exe is None:
        pytest.skip("no chromium on PATH (.ci/run installs Debian's chromium package; apt-get install chromium)")
    b = Browser(exe)
    yield b
    b.close()


def _quiet(page) -> None:
    assert page.requests == [], f"the page attempted requests: {page.requests}"
    assert page.console_errors == [], f"console errors: {page.console_errors}"
    assert page.dialogs == [], f"dialogs opened: {page.dialogs}"


def test_hostile_names_are_text_on_the_comparison_page(browser, tmp_path: Path) -> None:
    from nsight_advisor.compare.comparison import compare_results
    from nsight_advisor.report.compare_report import render_comparison

    base, head = hostile_result(n_findings=len(HOSTILE_NAMES)), hostile_result(n_findings=2)
    durations = {name: [1000 + i, 1010 + i, 990 + i] for i, name in enumerate(HOSTILE_NAMES)}
    slower = {name: [2 * d for d in ds] for name, ds in durations.items()}
    c = compare_results(base, head, durations, slower, base_name="<b>base</b>", head_name="</title><i>head")
    path = tmp_path / "compare.html"
    path.write_text(render_comparison(c, "html"), encoding="utf-8")
    page = load(browser, path)
    _quiet(page)
    assert page.evaluate("document.scripts.length") == 0
    assert page.evaluate("document.querySelectorAll('img, iframe, object, embed, link, textarea, b, i').length") == 0
    assert page.evaluate("document.getElementById('pwned')") is None
    names = page.evaluate("[...document.querySelectorAll('#kernels td.name')].map(td => td.textContent)")
    assert sorted(names) == sorted(short_name(n) for n in HOSTILE_NAMES)  # the gemm's short name; the rest whole
    titles = page.evaluate("[...document.querySelectorAll('#kernels td.name')].map(td => td.title)")
    assert sorted(titles) == sorted(HOSTILE_NAMES)  # the full name on hover
    subjects = page.evaluate("[...document.querySelectorAll('#findings td.name')].map(td => td.textContent)")
    assert any("<script>alert(1)</script>" in s for s in subjects)
    assert "</title><i>head" in page.evaluate("document.body.innerText")
    # the style sheet applies (pinned by hash): the header bar is dark
    assert page.evaluate("getComputedStyle(document.querySelector('header.top')).backgroundColor") == "rgb(21, 27, 35)"


def test_real_pair_page(browser, tmp_path: Path) -> None:
    before, after = TRACES / "nsys" / "nsys_ai_mfu_2gpu_before.sqlite", TRACES / "nsys" / "nsys_ai_mfu_2gpu_after.sqlite"
    if not before.exists() or not after.exists():
        pytest.skip(f"real traces absent at {TRACES}")
    from test_compare import _cli

    out = tmp_path / "compare.html"
    proc = _cli("compare", str(before), str(after), "-o", str(out), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    page = load(browser, out)
    _quiet(page)
    # 17 steps in BASE's window, 15 in HEAD's of the same length: slower per iteration (test_compare.py checks it)
    assert page.evaluate("document.getElementById('headline').textContent").startswith("HEAD is 13.8% slower per iteration")
    assert page.evaluate("document.querySelectorAll('#kernels tbody tr').length") == 48
    assert page.evaluate("document.querySelectorAll('table.partition').length") == 2
    # one row per finding the comparison matched or left unmatched, as its JSON lists them
    as_json = tmp_path / "compare.json"
    assert _cli("compare", str(before), str(after), "-o", str(as_json), cwd=tmp_path).returncode == 0
    findings = json.loads(as_json.read_text(encoding="utf-8"))["findings"]
    assert len(findings) >= 11
    assert page.evaluate("document.querySelectorAll('#findings tbody tr').length") == len(findings)
    assert str(TRACES) not in page.evaluate("document.documentElement.outerHTML")


def test_report_with_baseline_section(browser, tmp_path: Path) -> None:
    before, after = TRACES / "nsys" / "nsys_ai_mfu_2gpu_before.sqlite", TRACES / "nsys" / "nsys_ai_mfu_2gpu_after.sqlite"
    if not before.exists() or not after.exists():
        pytest.skip(f"real traces absent at {TRACES}")
    from test_compare import _cli

    out = tmp_path / "report.html"
    proc = _cli("analyze", str(after), "--baseline", str(before), "-o", str(out), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    page = load(browser, out)
    _quiet(page)
    heading = page.evaluate("document.querySelector('#baseline h2').textContent")
    assert heading.startswith("Compared with the baseline: HEAD is 13.8% slower per iteration")
    assert page.evaluate("document.querySelectorAll('#baseline-kernels tbody tr').length") == 48
    # the section comes before the findings, and the report's own ids stay unique
    assert page.evaluate("document.querySelector('#baseline').compareDocumentPosition("
                         "document.querySelector('#findings')) & Node.DOCUMENT_POSITION_FOLLOWING") != 0
    assert page.evaluate("new Set([...document.querySelectorAll('[id]')].map(e => e.id)).size === "
                         "document.querySelectorAll('[id]').length")
