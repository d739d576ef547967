"""``compare --format json|md|sarif|html``: a comparison (:func:`nsight_advisor.compare.comparison.compare_results`) as strict
JSON, as Markdown short enough for a pull-request comment (at most 65,536 characters), or as SARIF 2.1.0 with each
result's ``baselineState`` (new, unchanged, updated, absent) for code scanning.

The JSON Schema ships beside this module as ``comparison.schema.json``. Nothing is computed here.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from nsight_advisor.engine.fingerprint import FINGERPRINT_KEY
from nsight_advisor.report.waiver_text import waiver_text
from nsight_advisor.report.data import fmt_ns, jsonable
from nsight_advisor.report.gate_text import gate_text
from nsight_advisor.report.markdown import MAX_CHARS, md_code, md_escape

SCHEMA_FILE = "comparison.schema.json"
#: Kernel rows in the Markdown table, largest movers of time first (tighter levels when the text is too long).
_KERNEL_ROWS = (25, 10, 3)
_NAME_CHARS = (100, 60, 40)


def render_comparison(comparison: dict, fmt: str, analyses: tuple[Any, Any] | None = None) -> str:
    """The comparison as ``json``, ``md``, ``html`` (:mod:`~nsight_advisor.report.compare_html`) or ``sarif`` (which needs ``analyses``: BASE's and HEAD's AnalysisResult
    or its ``to_dict()``, the ones the comparison was made from)."""
    if fmt == "json":
        return json.dumps(jsonable(comparison), indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    if fmt == "md":
        return render_comparison_markdown(comparison)
    if fmt == "html":
        from nsight_advisor.report.compare_html import render_comparison_html

        return render_comparison_html(comparison)
    if fmt == "sarif":
        if analyses is None:
            raise ValueError("the SARIF of a comparison needs both analyses")
        return render_comparison_sarif(comparison, *analyses)
    raise ValueError(f"unknown comparison format {fmt!r}")


#: What a matched finding's status is in SARIF's terms.
BASELINE_STATES = {"new": "new", "unchanged": "unchanged", "better": "updated", "worse": "updated",
                   "resolved": "absent"}


def render_comparison_sarif(comparison: dict, base: Any, head: Any) -> str:
    """HEAD's findings and BASE's resolved ones as one SARIF 2.1.0 run: ``baselineState`` from the comparison,
    ``partialFingerprints`` from the finding's fingerprint (rule, device, subject; never its numbers)."""
    from nsight_advisor.report.data import as_dict, rank_findings
    from nsight_advisor.report.sarif import _artifact_name, render_sarif

    bd, hd = jsonable(as_dict(base)), jsonable(as_dict(head))
    union = dict(hd)
    findings = []
    for m in comparison["findings"]:
        side, index = ("head", m["head_index"]) if m["head_index"] is not None else ("base", m["base_index"])
        f = dict((hd if side == "head" else bd)["findings"][index])
        f["_match"] = (m, side)
        findings.append(f)
    union["findings"] = findings
    log = json.loads(render_sarif(union))
    run = log["runs"][0]
    base_caps = {c.get("capture_id"): c for c in bd.get("captures") or []}
    for result, f in zip(run["results"], rank_findings(findings), strict=True):
        m, side = f["_match"]
        if result["ruleId"] != str(f.get("rule_id") or "unknown"):
            raise RuntimeError("SARIF results out of step with the findings they were rendered from")
        result["baselineState"] = BASELINE_STATES[m["status"]]
        result["partialFingerprints"] = {FINGERPRINT_KEY: m["fingerprint"]}
        result["properties"].update(comparison_status=m["status"], base_impact_ns=m["base_impact_ns"],
                                    head_impact_ns=m["head_impact_ns"])
        if side == "base":
            cid = f.get("capture_id")
            uri = _artifact_name(base_caps.get(cid), cid)
            result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] = uri
            result["locations"][0]["message"]["text"] = f"BASE capture {uri} (resolved in HEAD)"
    uris = {a["location"]["uri"] for a in run["artifacts"]}
    for cid, cap in base_caps.items():
        uri = _artifact_name(cap, cid)
        if uri not in uris:
            uris.add(uri)
            run["artifacts"].append({"location": {"uri": uri}, "roles": ["analysisTarget"]})
    run["properties"] = {"verdict": comparison["verdict"]["text"]}
    return json.dumps(log, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def comparison_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of ``compare --format json``."""
    text = resources.files("nsight_advisor.report").joinpath(SCHEMA_FILE).read_text(encoding="utf-8")
    return json.loads(text)


def _pct(value: float | None, signed: bool = True) -> str:
    if value is None:
        return "–"
    return f"{value:+.1f}%" if signed else f"{value:.1f}%"


def _ci(low: float | None, high: float | None) -> str:
    return "–" if low is None else f"{low:+.1f}% to {high:+.1f}%"


def _ns(value: float | None) -> str:
    return "–" if value is None else fmt_ns(value)


def render_comparison_markdown(comparison: dict) -> str:
    """GitHub-flavoured Markdown of at most MAX_CHARS characters: kernel rows shrink first, with a note."""
    for rows, chars in zip(_KERNEL_ROWS, _NAME_CHARS):
        text = _render(comparison, rows, chars)
        if len(text) <= MAX_CHARS:
            return text
    note = "\n\n> **Truncated**: cut to fit 65,536 characters; `--format json` has everything.\n"
    cut = text[: MAX_CHARS - len(note)]
    return cut[: cut.rfind("\n")] + note


def _waived(waiver: dict | None) -> str:
    return f"; {md_escape(_clip(waiver_text(waiver), 300))}" if waiver else ""


def _clip(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[: chars - 1] + "…"


def _cell_code(text: str, chars: int) -> str:
    """``text`` as a code span inside a table cell: a '|' would end the cell even there, so it is escaped."""
    return "`" + md_code(_clip(text, chars)).replace("|", "\\|") + "`"


def _render(c: dict, kernel_rows: int, name_chars: int) -> str:
    v = c["verdict"]
    out = [f"## {md_escape(c['tool'].get('name', 'nsight-advisor'))} compare: "
           f"{md_escape(c['base']['name'])} → {md_escape(c['head']['name'])}", ""]
    out.append(f"**{md_escape(v['text'])}**")
    out.append("")
    its = c.get("iterations") or {}
    if its.get("base") and its.get("head"):
        b, h = its["base"], its["head"]
        out.append(f"Wall time per iteration ({md_escape(h['source'])}): median {_ns(b['median_ns'])} → "
                   f"{_ns(h['median_ns'])} ({_pct(its['median_change_pct'])}, 95% CI "
                   f"{_ci(its['ci_low_pct'], its['ci_high_pct'])}) over {b['steady']} → {h['steady']} steady "
                   "iterations.")
        out.append("")
    differs = [n for n in c["comparability"] if not n["same"]]
    if differs:
        out.append("**Comparability**: " + "; ".join(
            f"{md_escape(n['aspect'])}: {md_escape(n['base'])} → {md_escape(n['head'])}"
            + (f" ({md_escape(n['note'])})" if n["note"] else "") for n in differs))
    else:
        out.append("**Comparability**: same GPUs, tool version, window length and amount of work.")
    out.append("")
    if c.get("why"):
        out.append("### Why")
        out.append("New or worse findings overlapping the slowdown, the likeliest first:")
        out.append("")
        out += [f"{i}. {md_escape(_clip(w['text'], 400))}" for i, w in enumerate(c["why"][:10], 1)]
        out.append("")
    kc = c["kernel_counts"]
    out.append("### Kernels")
    out.append(", ".join(f"{kc.get(s, 0)} {s}" for s in ("slower", "faster", "added", "removed", "unchanged", "too few"))
               + f" (a change counts when its 95% interval excludes 0 and it is at least {c['min_effect_pct']:g}%)")
    out.append("")
    if c.get("statistics"):
        out.append(f"{md_escape(c['statistics']['text'])}.")
        out.append("")
    gate = c.get("gate") or {}
    if gate.get("threshold_pct") is not None:
        out.append(f"**--fail-on-regression {gate['threshold_pct']:g}**: {md_escape(gate_text(gate))}")
        out.append("")
    shown = c["kernels"][:kernel_rows]
    if shown:
        out.append("| kernel | status | launches | total | total Δ | median | median Δ | 95% CI |")
        out.append("|---|---|---|---|---|---|---|---|")
        for k in shown:
            b, h = k["base"], k["head"]
            out.append(
                f"| {_cell_code(k.get('short_name') or k['name'], name_chars)} | {k['status']}"
                f"{' ✱' if k['significant'] else ''}{_waived(k.get('waiver'))} | {b['launches']} → {h['launches']} | "
                f"{_ns(b['total_ns'])} → {_ns(h['total_ns'])} | {_pct(k['total_change_pct'])} | "
                f"{_ns(b['median_ns'])} → {_ns(h['median_ns'])} | {_pct(k['median_change_pct'])} | "
                f"{_ci(k['ci_low_pct'], k['ci_high_pct']) if k['ci_low_pct'] is not None else md_escape(k['note'])} |")
        if len(c["kernels"]) > len(shown):
            out.append(f"\n{len(c['kernels']) - len(shown)} more kernels in `--format json`.")
        out.append("")
    if c.get("ncu_kernels"):
        out.append("### Nsight Compute metrics")
        out.append("Kernels profiled on both sides; what moved with their duration:")
        out.append("")
        for k in c["ncu_kernels"][:kernel_rows]:
            moved = "; ".join(k["explains"]) or "no metric moved beyond the thresholds"
            out.append(f"- {_cell_code(k['name'], name_chars)}: duration {_pct(k['duration_change_pct'])}: "
                       f"{md_escape(_clip(moved, 600))}")
        out.append("")
    out.append("### Time partition")
    for dev in c["partition"]:
        out.append(f"\nCapture {dev['capture_index'] + 1}, GPU {dev['device_id']}:\n")
        out.append("| part | BASE | HEAD | Δ |")
        out.append("|---|---|---|---|")
        for p in dev["parts"]:
            if not p["base_ns"] and not p["head_ns"]:
                continue
            out.append(f"| {md_escape(p['part'])} | {_ns(p['base_ns'])} | {_ns(p['head_ns'])} | "
                       f"{_ns(p['change_ns']) if p['change_ns'] is None or p['change_ns'] < 0 else '+' + _ns(p['change_ns'])} |")
    out.append("")
    fc = c["finding_counts"]
    out.append("### Findings")
    out.append(", ".join(f"{fc[s]} {s}" for s in ("new", "worse", "resolved", "better", "unchanged")))
    out.append("")
    if c["findings"]:
        out.append("| status | rule | GPU | subject | impact BASE → HEAD |")
        out.append("|---|---|---|---|---|")
        for f in c["findings"]:
            gpu = "host" if f["device_id"] is None else f["device_id"]
            subject = ", ".join(f["subject"]) or "–"
            out.append(f"| {f['status']}{_waived(f.get('waiver'))} | {md_escape(f['rule_id'])} {md_escape(f['rule_name'])} | {gpu} | "
                       f"{_cell_code(subject, name_chars)} | {_ns(f['base_impact_ns'])} → "
                       f"{_ns(f['head_impact_ns'])} |")
    return "\n".join(out) + "\n"
