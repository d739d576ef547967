"""What ``compare --fail-on-regression`` decided, in words (for the Markdown and HTML comparison pages)."""

from __future__ import annotations

from nsight_advisor.report.formatting import clip


def gate_text(gate: dict) -> str:
    """What ``--fail-on-regression`` decided, in words: not tripped, or what tripped it."""
    if not gate["tripped"]:
        return (f"not tripped: no significant slowdown of the run, and no significantly slower kernel costing "
                f"{gate['threshold_pct']:g}% of its time")
    parts = []
    for t in gate["tripped_by"]:
        if t["what"] == "run":
            parts.append(f"the run is {t['change_pct']:+.1f}% {t['name']}")
        else:
            parts.append(f"{clip(t.get('short_name') or t['name'], 120)} is {t['change_pct']:+.1f}% (median), costing "
                         f"{t['cost_pct']:.2f}% of the run's time")
    return "tripped: " + "; ".join(parts)
