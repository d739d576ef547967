"""An analysis report with a comparison against a baseline as one of its sections (``analyze --baseline``).

JSON: the analysis with a ``comparison`` key (the ``compare --format json`` object). Markdown: the comparison
first (what changed is what a pull request asks), then the analysis, the two within 65,536 characters. SARIF: HEAD's
findings with ``baselineState`` (and BASE's resolved ones), as ``compare --format sarif``. HTML: the report with
the comparison's tables as a section before the findings; that section has no script and no style of its own, so
the report's content security policy holds for it too.
"""

from __future__ import annotations

import json
from typing import Any

from nsight_advisor.report.data import as_dict, jsonable
from nsight_advisor.report.markdown import MAX_CHARS

_MD_NOTE = "\n\n> **Truncated**: cut to fit 65,536 characters with the comparison; `--format json` has everything.\n"


def render_with_baseline(result: Any, comparison: dict, base_result: Any, fmt: str) -> str:
    """HEAD's ``result`` as ``fmt`` with ``comparison`` (against ``base_result``) inside it."""
    from nsight_advisor.report import render
    from nsight_advisor.report.compare_report import render_comparison

    if fmt == "json":
        doc = jsonable(as_dict(result))
        doc["comparison"] = jsonable(comparison)
        return json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    if fmt == "sarif":
        return render_comparison(comparison, "sarif", (base_result, result))
    if fmt == "md":
        head = render_comparison(comparison, "md").replace("## ", "## Against the baseline: ", 1) + "\n"
        rest = render(result, "md")
        if len(head) + len(rest) > MAX_CHARS:
            cut = rest[: max(0, MAX_CHARS - len(head) - len(_MD_NOTE))]
            rest = cut[: cut.rfind("\n")] + _MD_NOTE
        return head + rest
    if fmt == "html":
        page = render(result, "html")
        section = _comparison_section(render_comparison(comparison, "html"))
        marker = '<section id="findings"'
        at = page.find(marker)
        if at < 0:  # a report without the findings section: the comparison goes at the end of the main content
            at = page.rfind("</main>")
        return page[:at] + section + page[at:]
    raise ValueError(f"unknown report format {fmt!r}")


def _comparison_section(compare_page: str) -> str:
    """The body of the comparison page (its headline and tables, everything already escaped) as a section."""
    headline_start = compare_page.index('<h1 id="headline">') + len('<h1 id="headline">')
    headline = compare_page[headline_start: compare_page.index("</h1>", headline_start)]
    body = compare_page[compare_page.index("<main>") + len("<main>"): compare_page.index("</main>")]
    body = body.replace('id="', 'id="baseline-').replace("<h2>", "<h3>").replace("</h2>", "</h3>")  # the report's own ids (findings, kernels) stay unique
    return (f'<section id="baseline" aria-label="Compared with the baseline">\n<h2>Compared with the baseline: '
            f'{headline}</h2>\n{body}\n</section>\n')
