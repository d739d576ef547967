"""Display of the findings whose fixes change the same operations (``findings[].shares_fix_with`` and
``saving_together_ns``, from nsight_advisor.engine.shared_fixes): the others, linked where the report shows them,
and what their fixes save applied together."""

from __future__ import annotations

from typing import Any, Mapping

from nsight_advisor.report.formatting import clip, fmt_ns

#: Other findings named per finding (a group is rarely larger; the JSON lists them all).
SHOWN_OTHERS = 6


def shown_positions(shown: list[Mapping[str, Any]]) -> dict[tuple, int]:
    """Where each shown finding sits in the report (1-based), by capture and fingerprint: a fingerprint is unique
    within a capture, and ``shares_fix_with`` names findings of the finding's own capture."""
    return {(f.get("capture_id"), f.get("fingerprint")): n for n, f in enumerate(shown, 1)}


def shared_fix(finding: Mapping[str, Any], positions: Mapping[tuple, int]) -> dict[str, Any] | None:
    """``{"others": [{label, n, anchor}], "left_out": int, "saving": text, "alone": text}`` for a finding that
    shares its fix with others (``n`` and ``anchor`` None for one the report does not show; ``alone``: the savings
    of the fixes one at a time added up), else None."""
    others = finding.get("shares_fix_with")
    together = finding.get("saving_together_ns")
    if not isinstance(others, list) or not others or not isinstance(together, (int, float)) \
            or isinstance(together, bool):
        return None
    others = [o for o in others if isinstance(o, Mapping)]
    alone = sum(_ns(o.get("saving_ns")) for o in others) + _ns(finding.get("saving_ns"))
    rows = []
    for other in others[:SHOWN_OTHERS]:
        n = positions.get((finding.get("capture_id"), other.get("fingerprint")))
        label = " ".join(str(v) for v in (other.get("rule_id"), other.get("rule_name")) if v)
        rows.append({"label": clip(label, 120), "n": n, "anchor": f"finding-{n}" if n else None})
    if not rows:
        return None
    rows.sort(key=lambda o: o["n"] or float("inf"))  # in the report's order, those it leaves out last
    return {"others": rows, "left_out": max(len(others) - SHOWN_OTHERS, 0), "saving": fmt_ns(together),
            "alone": fmt_ns(alone)}


def _ns(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def shared_fix_text(view: Mapping[str, Any], escape) -> str:
    """The sentence the Markdown report writes (``escape``: its Markdown escaping)."""
    names = [f"finding {o['n']} ({escape(o['label'])})" if o["n"] else escape(o["label"]) for o in view["others"]]
    if view["left_out"]:
        names.append(f"{view['left_out']} more")
    listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    return (f" Its fix changes some of the same operations as {listed}. Fixed together, the steps would be "
            f"**{view['saving']}** shorter (replayed), against {view['alone']} for their savings one at a time "
            "added up.")


__all__ = ["shown_positions", "shared_fix", "shared_fix_text", "SHOWN_OTHERS"]
