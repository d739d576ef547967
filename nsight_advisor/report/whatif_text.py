"""The ``whatif`` command's answer as text: the step before and after, per capture, and what its critical path
holds."""

from __future__ import annotations

from typing import Any

from nsight_advisor.common.text import printable


def _ms(ns: float) -> str:
    return f"{ns / 1e6:,.3f} ms"


def render_whatif(answer: dict[str, Any]) -> str:
    """Lines for a terminal (every capture string made printable)."""
    change = answer["change"]
    said = []
    if "kernel_names" in change:
        names = change["kernel_names"]
        shown = "; ".join(printable(n[:80]) for n in names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3
                                                                    else "")
        said.append(f"{change['launches']} launches of {shown} ran {change['speedup']:g}x faster")
    for fix in change.get("fixes", []):
        plural = "s" if fix["findings"] != 1 else ""
        said.append(f"the {fix['findings']} finding{plural} of {printable(fix['rule'])} were fixed" +
                    (f" ({fix['replayed']} of them replayed: the others' fixes change nothing in these steps)"
                     if fix["replayed"] < fix["findings"] else ""))
    before, after = answer["median_iteration_ns"], answer["predicted_median_iteration_ns"]
    lines = ["what if " + ", and ".join(said),
             f"median step: {_ms(before)} -> {_ms(after)} predicted "
             f"({_pct(before - after, before)} shorter)"]
    for cap in answer["captures"]:
        name = printable(cap.get("source_name") or f"capture {cap['capture_id']}")
        lines.append(f"  {name}: {cap['steps']} steps ({printable(cap['step_source'])}), median "
                     f"{_ms(cap['median_iteration_ns'])} -> {_ms(cap['predicted_median_iteration_ns'])}; "
                     f"all steps {_ms(cap['saving_ns'])} shorter" + (" (its GPUs' together)" if cap.get("gpus") else ""))
        for gpu in cap.get("gpus", []):
            lines.append(f"    GPU {gpu['device_id']} (its own processes): median {_ms(gpu['median_iteration_ns'])} -> "
                         f"{_ms(gpu['predicted_median_iteration_ns'])}; all steps {_ms(gpu['saving_ns'])} shorter")
        path = cap["critical_path"]
        parts = ", ".join(f"{printable(k)} {_pct(v, path['length_ns'])}" for k, v in list(path["by_kind_ns"].items())[:5])
        lines.append(f"    critical path of its median step ({_ms(path['length_ns'])}): {parts}")
    return "\n".join(lines)


def _pct(part: float, whole: float) -> str:
    return f"{100.0 * part / whole:.1f}%" if whole else "0%"
