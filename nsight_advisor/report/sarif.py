"""``--format sarif``: SARIF 2.1.0 for code-scanning tools: one result per finding, every rule in tool.driver.rules.

A finding's ``partialFingerprints`` is its stable identity (:mod:`nsight_advisor.engine.fingerprint`: rule, device,
subject; never the numbers of its message), so code scanning keeps one alert per problem across runs. A finding's
location is the capture file (by name, relative: a report never carries the absolute paths of
the machine that wrote it). Rules that were skipped or errored are reported as tool execution
notifications, so CI sees them without treating them as findings.
"""

from __future__ import annotations

import json
from typing import Any

from nsight_advisor.engine.fingerprint import FINGERPRINT_KEY, fingerprint
from nsight_advisor.report.source_view import logical_locations
from nsight_advisor.report.waiver_text import waiver_text
from nsight_advisor.report.data import GUIDE_URL, PROJECT_URL, as_dict, clip, jsonable, rank_findings, safe_url

SARIF_SCHEMA_URI = "https://json.schemastore.org/sarif-2.1.0.json"
LEVELS = {"error": "error", "warning": "warning", "info": "note"}
EVIDENCE_ROWS = 20


def _text(value: Any, limit: int = 4000) -> str:
    return clip(value, limit) or "(none)"


def _rules(data: dict[str, Any], findings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rules: dict[str, dict[str, Any]] = {}
    for f in findings:
        rid = str(f.get("rule_id") or "unknown")
        if rid in rules:
            continue
        principles = [p for p in (f.get("principles") or []) if isinstance(p, dict)]
        urls = [safe_url(p.get("url")) for p in principles]
        help_uri = next((u for u in urls if u), None)
        why_text = "; ".join(f"{p.get('title') or p.get('id')}: {p.get('url')}" for p in principles)
        why_md = "; ".join(f"[{p.get('title') or p.get('id')}]({u})" if u else str(p.get("title") or p.get("id"))
                           for p, u in zip(principles, urls))
        fix = clip(f.get("fix") or "", 4000)
        rule = {
            "id": rid,
            "name": clip(f.get("rule_name") or rid, 200),
            "shortDescription": {"text": _text(f.get("title") or f.get("rule_name") or rid, 500)},
            "fullDescription": {"text": _text(f.get("title") or f.get("rule_name") or rid, 1000)},
            "help": {
                "text": _text(f"Fix: {fix}" + (f"\nWhy: {why_text}" if why_text else "")
                              + f"\nSilence with --ignore {rid}; tune with --set {f.get('rule_name') or rid}.PARAM=VALUE."),
                "markdown": _text(f"**Fix:** {fix}" + (f"\n\n**Why:** {why_md}" if why_md else "")
                                  + f"\n\nSilence with `--ignore {rid}`; tune with `--set {f.get('rule_name') or rid}.PARAM=VALUE`."),
            },
            "helpUri": help_uri or GUIDE_URL,
            "defaultConfiguration": {"level": LEVELS.get(str(f.get("severity")), "warning")},
            "properties": {"tags": [t for t in ["performance", "gpu", clip(f.get("category") or "", 60)] if t]},
        }
        rules[rid] = rule
    for o in data.get("outcomes") or []:
        rid = str(o.get("rule_id") or "")
        if rid and rid not in rules:
            name = clip(o.get("rule_name") or rid, 200)
            rules[rid] = {
                "id": rid,
                "name": name,
                "shortDescription": {"text": _text(name, 500)},
                "help": {"text": f"See: nsight-advisor rules show {rid}"},
                "helpUri": GUIDE_URL,
                "properties": {"tags": ["performance", "gpu"]},
            }
    return list(rules.values())


def _artifact_name(cap: dict[str, Any] | None, capture_id: Any) -> str:
    name = (cap or {}).get("source_name") or f"capture-{capture_id}"
    # A relative URI reference: the file name, percent-encoding what a URI cannot hold.
    from urllib.parse import quote

    return quote(str(name), safe="._-+~")


def render_sarif(result: Any) -> str:
    """The analysis as a SARIF 2.1.0 log (one run)."""
    data = jsonable(as_dict(result))
    findings = rank_findings([f for f in (data.get("findings") or []) if isinstance(f, dict)])
    caps = {c.get("capture_id"): c for c in (data.get("captures") or []) if isinstance(c, dict)}
    rules = _rules(data, findings)
    index = {r["id"]: i for i, r in enumerate(rules)}
    tool = data.get("tool") or {}
    results = []
    for f in findings:
        rid = str(f.get("rule_id") or "unknown")
        uri = _artifact_name(caps.get(f.get("capture_id")), f.get("capture_id"))
        evidence = (f.get("evidence") or [])[:EVIDENCE_ROWS]
        result = {
            "ruleId": rid,
            "ruleIndex": index[rid],
            "level": LEVELS.get(str(f.get("severity")), "warning"),
            "message": {"text": _text(f"{f.get('title')}: {f.get('message')}" if f.get("title") else f.get("message"))},
            "locations": [{
                "physicalLocation": {"artifactLocation": {"uri": uri}},
                "message": {"text": _text(f"capture {(caps.get(f.get('capture_id')) or {}).get('source_name') or f.get('capture_id')}", 300)},
            }],
            "partialFingerprints": {FINGERPRINT_KEY: f.get("fingerprint") or fingerprint(f)},
            "properties": {
                "impact_ns": f.get("impact_ns"),
                "impact_pct": f.get("impact_pct"),
                "capture_id": f.get("capture_id"),
                "observed": f.get("observed"),
                "threshold": f.get("threshold"),
                "fix": clip(f.get("fix") or "", 4000),
                "evidence": evidence,
                "evidence_total_rows": max(int(f.get("evidence_total_rows") or 0), len(f.get("evidence") or [])),
            },
        }
        # where the analysis has them: the GPU, and what the fix saves (the ranking's measure) beside what the
        # finding claims; a bot ordering or gating on results reads them here
        for key in ("device_id", "saving_ns", "saving_all_ranks_ns", "critical_path_pct"):
            if f.get(key) is not None:
                result["properties"][key] = f[key]
        frames = logical_locations(f)
        if frames:  # the functions behind the finding: no file or line is recorded, so no physical location
            result["locations"][0]["logicalLocations"] = frames
            result["properties"]["source_frames"] = f.get("source_frames")
        waiver = f.get("waiver")
        if waiver:
            result["properties"]["waiver"] = waiver
        if waiver and waiver.get("status") == "active":
            # an accepted finding: reported, and marked suppressed in the source of truth outside the log
            result["suppressions"] = [{"kind": "external", "status": "accepted",
                                       "justification": _text(waiver_text(waiver), 4000)}]
        results.append(result)
    notifications = []
    for o in data.get("outcomes") or []:
        status = o.get("status")
        if status not in ("skipped", "errored"):
            continue
        rid = str(o.get("rule_id") or "")
        text = f"{rid} {o.get('rule_name') or ''} {status}: {o.get('reason') or ''}".strip()
        if o.get("capture_option"):
            text += f" (capture with: {o.get('capture_option')})"
        note = {"level": "error" if status == "errored" else "note", "message": {"text": _text(text)}}
        if rid in index:
            note["associatedRule"] = {"id": rid, "index": index[rid]}
        notifications.append(note)
    artifacts = [{"location": {"uri": _artifact_name(c, cid)}, "roles": ["analysisTarget"]}
                 for cid, c in caps.items()]
    log = {
        "$schema": SARIF_SCHEMA_URI,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": str(tool.get("name") or "nsight-advisor"),
                "version": str(tool.get("version") or "0"),
                "informationUri": PROJECT_URL,
                "rules": rules,
            }},
            "invocations": [{
                "executionSuccessful": True,  # an errored rule is reported, never fatal to the run
                "toolExecutionNotifications": notifications,
            }],
            "artifacts": artifacts,
            "results": results,
        }],
    }
    return json.dumps(log, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
