"""Turn an analysis into a report: html (default, for reviewers), json (the contract), md (pull requests), sarif (CI).

``render(result, fmt)`` is the one entry point; no analysis happens here, only layout of what the engine
found. Every string from a capture is untrusted: HTML escapes it (Jinja2 autoescape), Markdown escapes it,
JSON and SARIF carry it as JSON strings; HTML and Markdown lose control characters (:mod:`~nsight_advisor.common.control_chars`).
"""

from __future__ import annotations

from typing import Any

FORMATS = ("html", "json", "md", "sarif")


def render(result: Any, fmt: str = "html") -> str:
    """``result`` (an AnalysisResult or its ``to_dict()``) rendered as ``fmt``: html, json, md or sarif."""
    from nsight_advisor.common.control_chars import strip_controls

    if fmt == "html":
        from nsight_advisor.report.html import render_html

        return strip_controls(render_html(result))
    if fmt == "json":
        from nsight_advisor.report.json_report import render_json

        return render_json(result)
    if fmt == "md":
        from nsight_advisor.report.markdown import render_markdown

        return strip_controls(render_markdown(result))
    if fmt == "sarif":
        from nsight_advisor.report.sarif import render_sarif

        return render_sarif(result)
    raise ValueError(f"unknown report format {fmt!r}; expected one of {', '.join(FORMATS)}")
