"""``compare --format html``: one self-contained page (the headline, comparability, kernels, the partition side by
side, findings), with the analysis report's style sheet, no script at all, and a CSP that allows nothing else.

Every string from a capture is escaped by Jinja2's autoescape; captures are named by file name only.
"""

from __future__ import annotations

from typing import Any

from nsight_advisor.report.gate_text import gate_text
from nsight_advisor.report.waiver_text import waiver_text
from nsight_advisor.report.data import clip, fmt_ns
from nsight_advisor.report.html import _asset, _environment, _sha256

#: Kernel rows on the page (largest significant movers first, as the comparison orders them).
KERNEL_ROWS = 200
NAME_CHARS = 300


def _pct(v: float | None) -> str:
    return "–" if v is None else f"{v:+.1f}%"


def _ns(v: Any) -> str:
    return "–" if v is None else fmt_ns(v)


def _waived(waiver: dict | None) -> str:
    return f"; {clip(waiver_text(waiver), 300)}" if waiver else ""


def render_comparison_html(comparison: dict) -> str:
    """The comparison as one HTML page."""
    css = _asset("report.css")
    csp = (f"default-src 'none'; style-src {_sha256(css)}; script-src 'none'; img-src 'none'; font-src 'none'; "
           "connect-src 'none'; media-src 'none'; object-src 'none'; frame-src 'none'; worker-src 'none'; "
           "manifest-src 'none'; base-uri 'none'; form-action 'none'")
    c = comparison
    kernels = [{
        "name": clip(k.get("short_name") or k["name"], NAME_CHARS),
        "full_name": clip(k["name"], 4 * NAME_CHARS),
        "status": k["status"] + (" ✱" if k["significant"] else "") + _waived(k.get("waiver")),
        "launches": f"{k['base']['launches']} → {k['head']['launches']}",
        "total": f"{_ns(k['base']['total_ns'])} → {_ns(k['head']['total_ns'])}",
        "total_change": _pct(k["total_change_pct"]),
        "median": f"{_ns(k['base']['median_ns'])} → {_ns(k['head']['median_ns'])}",
        "median_change": _pct(k["median_change_pct"]),
        "ci": k["note"] if k["ci_low_pct"] is None else f"{k['ci_low_pct']:+.1f}% to {k['ci_high_pct']:+.1f}%",
    } for k in c["kernels"][:KERNEL_ROWS]]
    partition = [{
        "capture": dev["capture_index"] + 1, "device": dev["device_id"],
        "parts": [{"part": p["part"], "base": _ns(p["base_ns"]), "head": _ns(p["head_ns"]),
                   "change": _ns(p["change_ns"]) if p["change_ns"] is None or p["change_ns"] <= 0
                   else "+" + _ns(p["change_ns"])}
                  for p in dev["parts"] if p["base_ns"] or p["head_ns"]],
    } for dev in c["partition"]]
    findings = [{
        "status": f["status"] + _waived(f.get("waiver")), "rule": f"{f['rule_id']} {f['rule_name']}",
        "gpu": "host" if f["device_id"] is None else f["device_id"],
        "subject": clip(", ".join(f["subject"]), NAME_CHARS) or "–",
        "base": _ns(f["base_impact_ns"]), "head": _ns(f["head_impact_ns"]),
    } for f in c["findings"]]
    comparability = [{"aspect": n["aspect"], "same": n["same"], "note": n["note"] or "differs",
                      "base": clip(", ".join(map(str, n["base"])) if isinstance(n["base"], list) else n["base"], 300),
                      "head": clip(", ".join(map(str, n["head"])) if isinstance(n["head"], list) else n["head"], 300)}
                     for n in c["comparability"]]
    template = _environment().get_template("compare.html.j2")
    return template.render(
        csp=csp, css=css, title=f"compare {clip(c['base']['name'], 80)} → {clip(c['head']['name'], 80)}",
        tool=c["tool"].get("name", "nsight-advisor"), verdict=c["verdict"]["text"],
        base=clip(c["base"]["name"], 200), head=clip(c["head"]["name"], 200),
        kernel_chips=[(s, c["kernel_counts"].get(s, 0)) for s in ("slower", "faster", "added", "removed", "too few")],
        statistics=(c.get("statistics") or {}).get("text", ""),
        gate=gate_text(c["gate"]) if (c.get("gate") or {}).get("threshold_pct") is not None else "",
        gate_pct=f"{(c.get('gate') or {}).get('threshold_pct') or 0:g}",
        finding_chips=[(s, c["finding_counts"][s]) for s in ("new", "worse", "resolved", "better")],
        comparability=comparability, min_effect=f"{c['min_effect_pct']:g}", kernels=kernels,
        kernels_left_out=max(0, len(c["kernels"]) - KERNEL_ROWS), partition=partition, findings=findings,
        why=[clip(w["text"], 400) for w in (c.get("why") or [])[:10]],
        ncu=[{"name": clip(k["name"], NAME_CHARS), "duration": _pct(k["duration_change_pct"]),
              "explains": clip("; ".join(k["explains"]) or "no metric moved beyond the thresholds", 600)}
             for k in (c.get("ncu_kernels") or [])[:KERNEL_ROWS]],
    )
