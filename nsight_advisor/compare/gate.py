"""``compare --fail-on-regression PCT``: the gate judges what users pay for.

It trips on a significant slowdown of the run of at least PCT percent (the headline: wall time per iteration when
both sides repeat a step, else GPU kernel time for the same work), or on a significantly slower kernel whose
slowdown costs at least PCT percent of the run's time; never on a kernel that takes 0.01% of it, and never on one
with too few launches to tell (:mod:`nsight_advisor.compare.family`). A kernel's cost is the time its median's
change adds to BASE's launches of it (``base.total_ns * median_change_pct / 100``) over the run's time: BASE's
analysis windows summed over its devices (the kernel's launches are summed over devices too), or BASE's GPU kernel
time where a capture has no timeline. A ``regression`` waiver keeps its kernel out, and the run's slowdown too
when every significantly slower kernel is waived (the slowdown is theirs).
"""

from __future__ import annotations

from typing import Any


def run_time_ns(base: dict, gpu_time_base_ns: int) -> tuple[int, str]:
    """The run's time that a kernel's cost is a share of, and what it is, in words."""
    windows = [a["window_end_ns"] - a["window_start_ns"] for c in base.get("captures", [])
               for a in c.get("accounting", [])]
    if windows and sum(windows) > 0:
        return int(sum(windows)), "BASE's analysis windows, summed over its devices"
    return int(gpu_time_base_ns), "BASE's GPU kernel time (no timeline)"


def kernel_cost_pct(kernel: dict, run_ns: int) -> float | None:
    """The share of the run's time (percent) that a matched kernel's median change adds (negative: saves)."""
    if kernel["median_change_pct"] is None or not run_ns:
        return None
    return 100.0 * kernel["base"]["total_ns"] * kernel["median_change_pct"] / 100.0 / run_ns


def _accepted(item: dict) -> bool:
    return (item.get("waiver") or {}).get("status") == "active"


def regression_gate(comparison: dict, threshold_pct: float | None) -> dict[str, Any]:
    """The gate's decision: ``threshold_pct``, ``tripped`` and ``tripped_by`` (each ``{"what": "run" | "kernel",
    "name", "change_pct", "cost_pct"}``; the run's ``name`` is its measure). With no threshold, nothing trips."""
    out: dict[str, Any] = {"threshold_pct": threshold_pct, "tripped": False, "tripped_by": []}
    if threshold_pct is None:
        return out
    slower = [k for k in comparison["kernels"] if k["status"] == "slower"]
    open_ = [k for k in slower if not _accepted(k)]
    v = comparison["verdict"]
    if (v["significant"] and v["change_pct"] is not None and v["change_pct"] > 0 and v["change_pct"] >= threshold_pct
            and (open_ or not slower)):
        out["tripped_by"].append({"what": "run", "name": v["measure"], "change_pct": v["change_pct"],
                                  "cost_pct": v["change_pct"]})
    for k in open_:
        cost = k.get("cost_pct")
        if k["significant"] and cost is not None and cost >= threshold_pct:
            out["tripped_by"].append({"what": "kernel", "name": k["name"], "short_name": k.get("short_name", k["name"]),
                                      "change_pct": k["median_change_pct"], "cost_pct": cost})
    out["tripped"] = bool(out["tripped_by"])
    return out
