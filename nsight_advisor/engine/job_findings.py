"""A job's findings: one entry per rule and subject across every rank, with the ranks it touches inside.

An analysis of a multi-GPU job runs each rule on each rank's capture, so a problem every rank shares comes back as
one finding per rank (the 8 DLRM ranks: small-grid eight times). ``findings[]`` keeps them as they are (SARIF, CI
gates and compare read them); ``job_findings`` is the same findings grouped, for a reader who wants the job first:
each entry names the worst rank, the spread over the ranks it touches and the total, and lists its ranks
(``per_rank``, worst first) with the indexes of their findings in ``findings[]``. The entries are ranked as the
findings are: by severity, then by what the fix saves on every rank it touches where the steps were replayed, else
by the time claimed in all. Built from the finished result alone, like nsight_advisor.engine.combined_view.
"""

from __future__ import annotations

from statistics import median
from typing import Any

from nsight_advisor.common.severity import severity_rank


def rank_of(summary: dict[str, Any]) -> dict[tuple[int, Any], int]:
    """(capture_id, device_id) -> the job's rank, from ``summary["ranks"]``; a capture holding one rank also maps
    (capture_id, None) to it."""
    out: dict[tuple[int, Any], int] = {}
    per_capture: dict[int, set[int]] = {}
    for job in (summary or {}).get("ranks") or []:
        for r in (job.get("ranks") or []) if isinstance(job, dict) else []:
            if not isinstance(r, dict) or r.get("rank") is None:
                continue
            out[(r.get("capture_id"), r.get("device_id"))] = int(r["rank"])
            per_capture.setdefault(r.get("capture_id"), set()).add(int(r["rank"]))
    for cid, ranks in per_capture.items():
        if len(ranks) == 1:
            out.setdefault((cid, None), next(iter(ranks)))
    return out


def job_findings(result) -> list[dict[str, Any]]:
    """The findings of a result over two or more captures, one entry per (rule, subject); [] for one capture."""
    if len(result.captures) < 2:
        return []
    names = {c.get("capture_id"): c.get("source_name") for c in result.captures}
    ranks = rank_of(result.summary or {})
    # Every rank of the job: the ranks the summary knows, else one per capture.
    all_ranks = len({v for v in ranks.values()}) or len(result.captures)
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for index, f in enumerate(result.findings):
        key = (f.rule_id, _subject(f))
        entry = groups.get(key)
        if entry is None:
            entry = groups[key] = {"rule_id": f.rule_id, "rule_name": f.rule_name, "title": f.title,
                                   "subject": key[1], "category": f.category, "severity": f.severity,
                                   "per": {}, "first": index}
        if severity_rank(f.severity) > severity_rank(entry["severity"]):
            entry["severity"] = f.severity
        rank = ranks.get((f.capture_id, f.device_id), ranks.get((f.capture_id, None)))
        where = (f.capture_id, rank if rank is not None else f.device_id)
        row = entry["per"].get(where)
        if row is None:
            row = entry["per"][where] = {"rank": rank, "capture_id": f.capture_id, "device_id": f.device_id,
                                         "source_name": names.get(f.capture_id), "impact_ns": 0, "impact_pct": 0.0,
                                         "severity": f.severity, "findings": []}
        row["impact_ns"] += int(f.impact_ns or 0)
        row["impact_pct"] = round(row["impact_pct"] + float(f.impact_pct or 0.0), 3)
        if severity_rank(f.severity) > severity_rank(row["severity"]):
            row["severity"] = f.severity
        if row["device_id"] != f.device_id:
            row["device_id"] = None  # findings on several devices of one rank's capture
        row["findings"].append(index)
        entry.setdefault("savings", []).append(getattr(f, "saving_ns", None))
        if getattr(f, "saving_all_ranks_ns", None) is not None:
            entry["saving_all_ranks_ns"] = f.saving_all_ranks_ns  # the same on every finding of the group
    ranked = [(entry, _finish(entry, all_ranks)) for entry in groups.values()]
    ranked.sort(key=lambda pair: (-severity_rank(pair[1]["severity"]), -_measure(*pair), pair[1]["first_finding"]))
    return [done for _, done in ranked]


def _measure(entry: dict[str, Any], done: dict[str, Any]) -> int:
    """What an entry is ranked by after its severity, as the findings are (engine.analyze.finding_rank): the
    saving with the fix on every rank it touches, else its one finding's saving, else the time its findings claim
    in all."""
    if entry.get("saving_all_ranks_ns") is not None:
        return int(entry["saving_all_ranks_ns"])
    savings = entry["savings"]
    if len(savings) == 1 and savings[0] is not None:
        return int(savings[0])
    return done["impact_ns_total"]


def _subject(finding) -> str:
    """As nsight_advisor.engine.combined_view.finding_subject (not imported: model imports this module)."""
    subject = getattr(finding, "subject", None)
    return "" if subject is None else str(subject)


def _finish(entry: dict[str, Any], all_ranks: int) -> dict[str, Any]:
    per = sorted(entry["per"].values(), key=lambda r: (-r["impact_ns"], _order(r)))
    impacts = [r["impact_ns"] for r in per]
    worst = per[0]
    return {
        "rule_id": entry["rule_id"], "rule_name": entry["rule_name"], "title": entry["title"],
        "subject": entry["subject"], "category": entry["category"], "severity": entry["severity"],
        "impact_ns_total": sum(impacts),
        **({"saving_all_ranks_ns": entry["saving_all_ranks_ns"]} if "saving_all_ranks_ns" in entry else {}),
        "ranks_touched": len(per), "ranks_total": max(all_ranks, len(per)),
        "worst": {k: worst[k] for k in ("rank", "capture_id", "device_id", "source_name", "impact_ns", "impact_pct")},
        # over the ranks the entry touches: its smallest, median and largest claim
        "spread": {"min_ns": min(impacts), "median_ns": int(median(impacts)), "max_ns": max(impacts)},
        "first_finding": entry["first"],
        "per_rank": per,
    }


def _order(row: dict[str, Any]) -> tuple:
    return (row["rank"] is None, row["rank"] if row["rank"] is not None else 0, row["capture_id"] or 0)
