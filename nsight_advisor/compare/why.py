"""Why HEAD regressed: the new or worse findings that overlap a regression, offered first as its explanation.

A finding overlaps a slower kernel when it names it: in its subject or in one of its evidence rows (the rows a rule
returns are the kernels, APIs and gaps it is about). It overlaps the headline's slowdown when it names a slower
kernel, or when the time it claims grew (findings claim time out of each device's partition, so a grown claim is
grown time of that device), except that one-time costs (idle by cause ``startup`` or ``jit``, docs/impact.md) lie
before the steady iterations a per-iteration headline is measured on. Candidates are ranked: naming a slower kernel
first, then by how much their claim grew; each says what share of the added time its growth is.
"""

from __future__ import annotations

import re
from typing import Any

#: Subjects of one-time costs: outside the steady iterations (the accounting model's idle causes).
ONE_TIME = ("startup", "jit")
#: Evidence rows searched for kernel names, per finding.
EVIDENCE_ROWS = 50


def _bare(name: str) -> str:
    return name.rsplit(" <<<", 1)[0] if name.endswith(">>>") else name


def names_kernel(texts: set[str], kernel: str) -> bool:
    """True when one of ``texts`` is the kernel's name (without its launch configuration) or its short name, a
    whole identifier within it (``gemm_kernel`` names ``void ns::gemm_kernel<128>(float *)``)."""
    bare = _bare(kernel)
    for t in texts:
        if t == bare or (len(t) >= 4 and re.search(rf"(?<![A-Za-z0-9_]){re.escape(t)}(?![A-Za-z0-9_])", bare)
                         and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", t)):
            return True
    return False


def _named(finding: dict, analysis: dict | None, index: int | None) -> set[str]:
    texts = set(finding.get("subject") or [])
    if analysis is not None and index is not None:
        for row in (analysis["findings"][index].get("evidence") or [])[:EVIDENCE_ROWS]:
            texts.update(v for v in row.values() if isinstance(v, str))
    return texts


def _grown_ns(f: dict) -> int:
    return int((f["head_impact_ns"] or 0) - (f["base_impact_ns"] or 0))


def explain(comparison: dict, base: dict, head: dict, added_ns: float | None) -> list[dict[str, Any]]:
    """Fill ``kernels[].why`` (fingerprints of new or worse findings naming each slower kernel) and return the
    headline's explanation: the overlapping new or worse findings, best first, each with ``fingerprint``,
    ``rule_id``, ``rule_name``, ``title``, ``status``, ``device_id``, ``impact_change_ns``, ``kernels`` (slower
    kernels it names) and ``text``. ``added_ns``: the time the headline's slowdown added (None when it is not a slowdown)."""
    slower = [k for k in comparison["kernels"] if k["status"] == "slower"]
    candidates = [f for f in comparison["findings"] if f["status"] in ("new", "worse")]
    names = {}
    for f in candidates:
        names[f["fingerprint"]] = (_named(f, head, f["head_index"]) | _named(f, base, f["base_index"]))
    for k in comparison["kernels"]:
        k["why"] = [f["fingerprint"] for f in candidates if names_kernel(names[f["fingerprint"]], k["name"])] \
            if k["status"] == "slower" else []
    if added_ns is None or added_ns <= 0:
        return []
    per_iteration = comparison["verdict"]["measure"] == "per iteration"
    out = []
    for f in candidates:
        kernels = [k["name"] for k in slower if f["fingerprint"] in k["why"]]
        grown = _grown_ns(f)
        one_time = bool(f.get("subject")) and f["subject"][0] in ONE_TIME
        if not kernels and (grown <= 0 or (per_iteration and one_time)):
            continue
        where = f"names the slower kernel {_bare(kernels[0])}" if kernels else ""
        if grown > 0:
            where += (("; " if where else "") + f"its cost grew by {grown / 1e6:.3g} ms, "
                      f"{100.0 * grown / added_ns:.1f}% of the time added")
        # the GPU, as the analysis reports name it: two GPUs' findings of one rule read alike otherwise
        gpu = f" (GPU {f['device_id']})" if f.get("device_id") is not None else ""
        out.append({"fingerprint": f["fingerprint"], "rule_id": f["rule_id"], "rule_name": f["rule_name"],
                    "title": f["title"], "status": f["status"], "device_id": f.get("device_id"),
                    "impact_change_ns": grown, "kernels": kernels,
                    "text": f"{f['status']} {f['rule_id']} {f['rule_name']}{gpu}: {f['title']} ({where})"})
    out.sort(key=lambda e: (not e["kernels"], -e["impact_change_ns"], e["rule_id"]))
    return out


def added_time_ns(comparison: dict) -> float | None:
    """The time the headline's slowdown added: per iteration, the median's growth times HEAD's steady iterations;
    else HEAD's GPU kernel time minus BASE's. None when the headline is not a significant slowdown."""
    v = comparison["verdict"]
    if v["status"] != "slower":
        return None
    its = comparison.get("iterations") or {}
    if v["measure"] == "per iteration" and its.get("base") and its.get("head"):
        return (its["head"]["median_ns"] - its["base"]["median_ns"]) * its["head"]["steady"]
    return float(comparison["gpu_time"]["head_ns"] - comparison["gpu_time"]["base_ns"])
