"""The combined view of an analysis of several captures (one per rank of a multi-GPU job, say).

Built from the finished :class:`~nsight_advisor.engine.model.AnalysisResult` alone (no SQL), so it costs
nothing next to the rules. It answers two questions a per-capture report leaves to the reader:

* which capture is slowest: the longest wall time, and how far it is behind the fastest; and which
  keeps its GPUs least busy;
* which problems every rank shares: findings of the same rule about the same subject (the rule's
  ``group_by`` value, when it has one) merged into one row with the captures they occur in.
"""

from __future__ import annotations

from typing import Any

from nsight_advisor.engine.model import AnalysisResult, severity_rank


def combined_view(result: AnalysisResult) -> dict[str, Any] | None:
    """``summary["combined"]`` for a result over two or more captures; None for a single capture."""
    captures = _capture_rows(result)
    if len(captures) < 2:
        return None
    timed = [c for c in captures if c["wall_ns"]]
    slowest = max(timed, key=lambda c: c["wall_ns"], default=None)
    fastest = min(timed, key=lambda c: c["wall_ns"], default=None)
    busy = [c for c in captures if c["gpu_busy_pct"] is not None]
    least_busy = min(busy, key=lambda c: c["gpu_busy_pct"], default=None)
    return {
        "capture_count": len(captures),
        "captures": captures,
        "slowest": _pick(slowest, fastest),
        "least_busy": _pick(least_busy, None),
        "findings": merged_findings(result),
    }


def _capture_rows(result: AnalysisResult) -> list[dict[str, Any]]:
    facts = {c.get("capture_id"): c for c in (result.summary or {}).get("captures") or []}
    per_capture: dict[int, list] = {}
    for f in result.findings:
        per_capture.setdefault(f.capture_id, []).append(f)
    rows = []
    for cap in result.captures:
        cid = cap.get("capture_id")
        fact = facts.get(cid, {})
        found = per_capture.get(cid, [])
        rows.append({
            "capture_id": cid,
            "source_name": cap.get("source_name"),
            "wall_ns": fact.get("wall_ns", cap.get("duration_ns")),
            "busy_ns": fact.get("busy_ns"),
            "gpu_busy_pct": fact.get("gpu_busy_pct"),
            "kernel_count": fact.get("kernel_count"),
            "kernel_time_ns": fact.get("kernel_time_ns"),
            "findings": len(found),
            "impact_ns": sum(int(f.impact_ns or 0) for f in found),
        })
    return rows


def _pick(row: dict[str, Any] | None, baseline: dict[str, Any] | None) -> dict[str, Any] | None:
    if row is None:
        return None
    out = {k: row[k] for k in ("capture_id", "source_name", "wall_ns", "gpu_busy_pct")}
    if baseline is not None and baseline["wall_ns"]:
        out["fastest_capture_id"] = baseline["capture_id"]
        out["behind_fastest_ns"] = row["wall_ns"] - baseline["wall_ns"]
        out["behind_fastest_pct"] = round(100.0 * (row["wall_ns"] - baseline["wall_ns"]) / baseline["wall_ns"], 2)
    return out


def finding_subject(finding) -> str:
    """What a finding is about within its rule: the rule's group_by value, or '' for one finding per capture."""
    subject = getattr(finding, "subject", None)
    return "" if subject is None else str(subject)


def merged_findings(result: AnalysisResult) -> list[dict[str, Any]]:
    """Findings merged across captures by (rule, subject), largest total impact first."""
    merged: dict[tuple[str, str], dict[str, Any]] = {}
    for f in result.findings:
        key = (f.rule_id, finding_subject(f))
        row = merged.get(key)
        if row is None:
            row = merged[key] = {
                "rule_id": f.rule_id, "rule_name": f.rule_name, "title": f.title, "subject": key[1],
                "severity": f.severity, "capture_ids": [], "impact_ns_total": 0, "impact_ns_max": 0,
                "impact_pct_max": 0.0, "worst_capture_id": f.capture_id,
            }
        if severity_rank(f.severity) > severity_rank(row["severity"]):
            row["severity"] = f.severity
        if f.capture_id not in row["capture_ids"]:
            row["capture_ids"].append(f.capture_id)
        impact = int(f.impact_ns or 0)
        row["impact_ns_total"] += impact
        if impact > row["impact_ns_max"]:
            row["impact_ns_max"] = impact
            row["worst_capture_id"] = f.capture_id
        row["impact_pct_max"] = max(row["impact_pct_max"], float(f.impact_pct or 0.0))
    n = len(result.captures)
    rows = sorted(merged.values(), key=lambda r: (-r["impact_ns_total"], r["rule_id"], r["subject"]))
    for row in rows:
        row["capture_ids"].sort()
        row["in_all_captures"] = len(row["capture_ids"]) == n
    return rows
