"""The report's view of an analysis: the JSON contract as plain data, ranked, bounded and formatted.

Every output format starts from :func:`prepare`, which reads the result as the dict of the JSON contract
(``AnalysisResult.to_dict()``; fields the engine adds later are carried along, fields it lacks get
defaults), so the templates never see a half-filled object. Nothing here analyses a capture: it only
orders, truncates and formats what the engine found.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

from nsight_advisor.common.json_values import jsonable
from nsight_advisor.engine.harness import NOTE as HARNESS_NOTE
from nsight_advisor.common.severity import SEVERITIES, severity_rank
from nsight_advisor.report.formatting import clip, fmt_ns, fmt_pct  # noqa: F401 - used by every renderer
from nsight_advisor.report.waiver_text import waiver_text

STATUS_ORDER = {"errored": 0, "skipped": 1, "findings": 2, "clean": 3}
GUIDE_URL = "https://docs.nvidia.com/deeplearning/performance/index.html"
PROJECT_URL = "https://github.com/nsight-advisor/nsight-advisor"


@dataclass(frozen=True)
class Limits:
    """How much of an analysis one report shows; every list and string is cut to these, saying what was left out."""

    findings: int = 100
    evidence_rows: int = 20
    evidence_columns: int = 10
    cell_chars: int = 200
    text_chars: int = 2000
    outcomes: int = 500


HTML_LIMITS = Limits()
# Used when a report would still exceed the size budget (HTML_MAX_BYTES) with the normal limits.
HTML_TIGHT_LIMITS = Limits(findings=60, evidence_rows=5, evidence_columns=8, cell_chars=120, text_chars=800)
HTML_MAX_BYTES = 4_500_000


def as_dict(result: Any) -> dict[str, Any]:
    """The JSON-contract dict of ``result`` (an AnalysisResult or an already converted dict)."""
    if isinstance(result, Mapping):
        return dict(result)
    to_dict = getattr(result, "to_dict", None)
    if callable(to_dict):
        return to_dict()
    raise TypeError(f"cannot render {type(result).__name__}: expected an AnalysisResult or its to_dict()")



def fmt_value(value: Any) -> str:
    """An evidence cell or observed/threshold value as compact text."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if not math.isfinite(value):
            return ""
        if value == int(value) and abs(value) < 1e15:
            return f"{int(value):,}"
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        return f"{value:.3g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(fmt_value(v) for v in value)
    return str(value)


def fmt_cell(column: str, value: Any) -> str:
    """An evidence cell, with ns columns also shown in human units."""
    if column.endswith("_ns") and isinstance(value, (int, float)) and not isinstance(value, bool):
        return fmt_ns(value)
    if column.endswith("_pct") and isinstance(value, (int, float)) and not isinstance(value, bool):
        return fmt_pct(value)
    return fmt_value(value)


def safe_url(url: Any) -> str | None:
    """``url`` when it is an http(s) address, else None (a report never links anywhere else)."""
    if isinstance(url, str) and (url.startswith("https://") or url.startswith("http://")) and len(url) < 2000:
        if not any(c in url for c in "\"'<>` \n\r\t"):
            return url
    return None


def _saves_more_than_its_share(f: Mapping) -> bool:
    saving, impact, claimed = f.get("saving_ns"), _num(f.get("impact_ns")), _num(f.get("claimed_ns"))
    return isinstance(saving, (int, float)) and not isinstance(saving, bool) and claimed > impact > 0 \
        and saving > 1.05 * impact


def _num(value: Any) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return 0.0
    return v if math.isfinite(v) else 0.0


def rank_findings(findings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Findings as the engine ranks them: those on the product's kernels before those on test-harness kernels (the
    engine's harness note in the message), then severity (a rule may keep one-time costs at info), then what the
    fix would save (``saving_all_ranks_ns``, else ``saving_ns`` where the step graph was replayed with it, else the
    time claimed), then the time
    claimed, then rule id (stable for equal keys)."""
    def estimate(f: Mapping[str, Any]) -> float:
        saving = f.get("saving_all_ranks_ns")  # the rule's fix on every rank it fires on, as the engine ranks
        if not isinstance(saving, (int, float)):
            saving = f.get("saving_ns")
        return _num(saving) if isinstance(saving, (int, float)) and not isinstance(saving, bool) \
            else _num(f.get("impact_ns"))

    return sorted(
        findings,
        key=lambda f: (HARNESS_NOTE in str(f.get("message", "")), -severity_rank(str(f.get("severity"))),
                       -estimate(f), -_num(f.get("impact_ns")), str(f.get("rule_id", "")), str(f.get("title", ""))),
    )


def ranking_note(summary: Mapping[str, Any], findings: list[dict[str, Any]]) -> str:
    """How the findings are ranked, in words: by what their fix saves where the capture's steps were replayed
    (docs/impact.md), else by the time they cost; "" when no finding has a saving."""
    savings = summary.get("savings") if isinstance(summary, Mapping) else None
    if not isinstance(savings, Mapping) or not any(isinstance(f.get("saving_ns"), (int, float)) for f in findings):
        return ""
    steps = int(_num(savings.get("steps")))
    return (f"Ranked by severity, then by what the fix would save: the saving from replaying the dependency graph "
            f"of the {steps} step{'s' if steps != 1 else ''} with the fix applied (on every rank or GPU where the "
            f"rule fires on several), where the fix is modeled; else the time the finding claims. Savings do not add "
            f"up: \"nsight-advisor whatif CAPTURE --fix RULE --fix RULE\" replays several fixes together.")


def pct_basis(finding: Mapping[str, Any], capture_tool: str | None) -> str:
    """What a finding's impact_pct is a share of, in words: 'the analysis window of GPU 0', 'the capture',
    'profiled kernel time' (docs/impact.md)."""
    basis = finding.get("impact_basis")
    if basis == "analysis window":
        device = finding.get("device_id")
        return "the analysis window" + (f" of GPU {device}" if device is not None else "")
    if basis == "capture":
        return "the capture"
    if basis == "profiled kernel time" or capture_tool == "ncu":
        return "profiled kernel time"
    return "wall time"  # an analysis written before findings named their basis


def evidence_table(finding: Mapping[str, Any], limits: Limits) -> dict[str, Any]:
    """Columns, formatted rows and the count of rows and columns left out of one finding's evidence."""
    rows = [r for r in (finding.get("evidence") or []) if isinstance(r, Mapping)]
    columns = [str(c) for c in (finding.get("evidence_columns") or [])]
    if not columns:
        seen: dict[str, None] = {}
        for r in rows[: limits.evidence_rows]:
            for k in r:
                seen.setdefault(str(k), None)
        columns = list(seen)
    columns_left_out = max(0, len(columns) - limits.evidence_columns)
    columns = columns[: limits.evidence_columns]
    total = finding.get("evidence_total_rows")
    try:
        total = int(total)
    except (TypeError, ValueError):
        total = 0
    total = max(total, len(rows))
    shown = rows[: limits.evidence_rows]
    cells = [[clip(fmt_cell(c, r.get(c)), limits.cell_chars) for c in columns] for r in shown]
    full = [[clip(fmt_value(r.get(c)), 1000) for c in columns] for r in shown]
    numeric = [all(isinstance(r.get(c), (int, float)) and not isinstance(r.get(c), bool)
                   for r in shown if r.get(c) is not None) and any(r.get(c) is not None for r in shown)
               for c in columns]
    return {
        "columns": columns,
        "rows": cells,
        "full": full,
        "numeric": numeric,
        "total_rows": total,
        "rows_left_out": total - len(shown),
        "columns_left_out": columns_left_out,
    }


def prepare(result: Any, limits: Limits = HTML_LIMITS) -> dict[str, Any]:
    """The analysis as the report shows it: ranked, bounded findings; ordered outcomes; header facts."""
    from nsight_advisor.report.regions_view import finding_regions
    from nsight_advisor.report.shared_fix_view import shared_fix, shown_positions
    from nsight_advisor.report.source_view import finding_source

    data = as_dict(result)
    tool = jsonable(data.get("tool") or {})
    captures = [c for c in jsonable(data.get("captures") or []) if isinstance(c, Mapping)]
    summary = jsonable(data.get("summary") or {})
    all_findings = [f for f in (data.get("findings") or []) if isinstance(f, Mapping)]
    ranked = rank_findings(all_findings)
    # Only what is shown is converted: a huge analysis costs no more than the page it fits on.
    shown = [jsonable({**f, "evidence": list(f.get("evidence") or [])[: limits.evidence_rows],
                       "evidence_total_rows": max(int(_num(f.get("evidence_total_rows"))), len(f.get("evidence") or []))})
             for f in ranked[: limits.findings]]
    cap_names = {c.get("capture_id"): c.get("source_name") or c.get("source_path") for c in captures}
    tools = {c.get("capture_id"): c.get("tool") for c in captures}
    for c in summary.get("captures") or []:
        cap_names.setdefault(c.get("capture_id"), c.get("source_name"))

    positions = shown_positions(shown)
    findings = []
    for i, f in enumerate(shown, 1):
        principles = []
        for p in f.get("principles") or []:
            if isinstance(p, Mapping):
                principles.append({"id": clip(p.get("id"), 200), "title": clip(p.get("title") or p.get("id"), 300),
                                   "url": safe_url(p.get("url"))})
            elif isinstance(p, str):
                principles.append({"id": p, "title": p, "url": None})
        severity = str(f.get("severity") or "info")
        if severity not in SEVERITIES:
            severity = "info"
        findings.append({
            "n": i,
            "anchor": f"finding-{i}",
            "rule_id": clip(f.get("rule_id"), 100),
            "rule_name": clip(f.get("rule_name"), 100),
            "severity": severity,
            "title": clip(f.get("title") or f.get("rule_name") or f.get("rule_id"), 300),
            "message": clip(f.get("message"), limits.text_chars),
            "fix": clip(f.get("fix"), limits.text_chars),
            "category": clip(f.get("category"), 60),
            "capture_id": f.get("capture_id"),
            "capture_name": clip(cap_names.get(f.get("capture_id")) or "", 200),
            "impact_ns": _num(f.get("impact_ns")),
            "impact": fmt_ns(f.get("impact_ns")) if f.get("impact_ns") else "",
            "impact_pct": _num(f.get("impact_pct")),
            # the replayed step's saving (docs/impact.md); "" where the capture has no steps or the fix is not modeled
            "saving": fmt_ns(f.get("saving_ns")) if isinstance(f.get("saving_ns"), (int, float)) else "",
            # a fix that saves more than the finding costs: the time it claims is shared with other findings (impact_ns
            # is its share; the replay takes off the rule's own claim, docs/impact.md)
            "saving_shared": _saves_more_than_its_share(f),
            # the share of the steps' critical path the finding's operations hold; "" where not computed
            "critical_path": fmt_pct(f.get("critical_path_pct"))
            if isinstance(f.get("critical_path_pct"), (int, float)) else "",
            # the saving with the rule's fix on every rank or GPU it fires on; "" where it fires on one
            "saving_all_ranks": fmt_ns(f.get("saving_all_ranks_ns"))
            if isinstance(f.get("saving_all_ranks_ns"), (int, float)) else "",
            # the findings whose fixes change the same operations, and their fixes' saving together; None: none
            "shared_fix": shared_fix(f, positions),
            # 0 means the engine knew no wall time (e.g. an ncu report): say nothing rather than "0.0%".
            "impact_pct_text": fmt_pct(f.get("impact_pct")) if _num(f.get("impact_pct")) > 0 else "",
            "pct_basis": pct_basis(f, tools.get(f.get("capture_id"))),
            "device_id": f.get("device_id"),
            "observed": clip(fmt_value(f.get("observed")), 200),
            "threshold": clip(fmt_value(f.get("threshold")), 200),
            "principles": principles[:10],
            "evidence": evidence_table(f, limits),
            "waiver": clip(waiver_text(f.get("waiver")), limits.text_chars),
            "regions": finding_regions(f),
            "source": finding_source(f),
        })

    outcomes = [o for o in jsonable(data.get("outcomes") or []) if isinstance(o, Mapping)]
    outcomes = sorted(outcomes, key=lambda o: (STATUS_ORDER.get(str(o.get("status")), 9), str(o.get("rule_id", ""))))
    outcome_rows = [{
        "rule_id": clip(o.get("rule_id"), 100),
        "rule_name": clip(o.get("rule_name"), 100),
        "status": str(o.get("status") or ""),
        "reason": clip(o.get("reason"), limits.text_chars),
        "capture_option": clip(o.get("capture_option"), 500),
        "findings": int(_num(o.get("findings"))),
    } for o in outcomes[: limits.outcomes]]
    counts = {s: 0 for s in ("findings", "clean", "skipped", "errored")}
    for o in outcomes:
        status = str(o.get("status"))
        if status in counts:
            counts[status] += 1
    severity_counts = {s: 0 for s in ("error", "warning", "info")}
    for f in all_findings:
        sev = str(f.get("severity"))
        if sev in severity_counts:
            severity_counts[sev] += 1

    shown_n = {id(f): n for n, f in enumerate(ranked[: limits.findings], 1)}
    return {
        "tool": {"name": clip(tool.get("name") or "nsight-advisor", 100), "version": clip(tool.get("version"), 100)},
        "captures": captures,
        # a job's findings grouped per rule (report/job_view.py); finding_n: findings[] index -> its card's number
        "job_findings": [j for j in jsonable(data.get("job_findings") or []) if isinstance(j, Mapping)],
        "finding_n": [shown_n.get(id(f)) for f in all_findings],
        "summary": summary,
        "findings": findings,
        "findings_total": len(all_findings),
        "ranking": ranking_note(summary, all_findings),
        "findings_left_out": len(all_findings) - len(findings),
        "severity_counts": severity_counts,
        "outcomes": outcome_rows,
        "outcomes_left_out": max(0, len(outcomes) - len(outcome_rows)),
        "outcome_counts": counts,
        "limits": limits,
    }
