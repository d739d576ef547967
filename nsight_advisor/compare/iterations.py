"""Wall time per iteration in a comparison: each side's steady iterations (``captures[].iterations``, warm-up left
out) and the change of their median, with the bootstrap interval of :func:`~nsight_advisor.compare.stats.median_change`.

When both sides repeat a unit of work (a training step, a solver's time step), the headline is this change: it is
what a user waits for, copies, idle gaps and host time included, and it does not depend on how long the capture
window ran. Otherwise the headline stays with GPU kernel time (:func:`nsight_advisor.compare.comparison.verdict`), and the
notes say why no significance can be given per iteration.
"""

from __future__ import annotations

from typing import Any

from nsight_advisor.compare.stats import MIN_EFFECT_PCT, median_change


def side_iterations(captures: list[dict]) -> dict | None:
    """One side's steady iterations, or None when a capture has none (nothing repeats at least three times).

    With several captures (ranks of one job, which step together) the i-th iteration takes as long as its slowest
    rank, up to the fewest iterations any rank has.
    """
    found = [c.get("iterations") for c in captures]
    if not found or any(not it or not it.get("durations_ns") for it in found):
        return None
    steady = [it["durations_ns"][it.get("warmup") or 0:] for it in found]
    n = min(map(len, steady))
    if n == 0:
        return None
    durations = [max(s[i] for s in steady) for i in range(n)]
    ordered = sorted(durations)
    median = ordered[n // 2] if n % 2 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2
    return {"count": min(it["count"] for it in found), "warmup": max(it.get("warmup") or 0 for it in found),
            "steady": n, "median_ns": median, "source": ", ".join(sorted({str(it.get("source")) for it in found})),
            "durations_ns": durations}


def per_iteration(base: dict | None, head: dict | None) -> dict:
    """The comparison's ``iterations`` object: each side's counts and median, and the change of the median
    steady-iteration wall time with its 95% interval (None where a side has no iterations)."""

    def public(side):
        return None if side is None else {k: v for k, v in side.items() if k != "durations_ns"}

    out: dict[str, Any] = {"base": public(base), "head": public(head), "median_change_pct": None,
                           "ci_low_pct": None, "ci_high_pct": None, "significant": False}
    if base is None or head is None:
        missing = " and ".join(n for n, s in (("BASE", base), ("HEAD", head)) if s is None)
        out["note"] = (f"no iterations found in {missing} (nothing repeats at least three times): one iteration per "
                       "side, so no significance can be given for wall time per iteration")
        return out
    stats = median_change(base["durations_ns"], head["durations_ns"], "iterations")
    out.update(median_change_pct=stats["median_change_pct"], ci_low_pct=stats["ci_low_pct"],
               ci_high_pct=stats["ci_high_pct"], significant=stats["significant"], note=stats["note"])
    return out


def iteration_notes(change: dict, launches: tuple[int, int]) -> list[dict]:
    """Comparability notes: iteration counts (and warm-up) and kernel launches per iteration on each side."""
    base, head = change["base"], change["head"]
    if base is None or head is None:
        # neither side repeating is not a difference between them; one side alone is
        return [{"aspect": "iterations", "base": base["count"] if base else 1, "head": head["count"] if head else 1,
                 "same": base is None and head is None, "note": change["note"]}]
    counts = {"aspect": "iterations", "base": base["count"], "head": head["count"],
              "same": base["count"] == head["count"], "note": ""}
    if not counts["same"] or base["warmup"] or head["warmup"]:
        counts["note"] = (f"the capture windows hold {base['count']} and {head['count']} iterations "
                          f"({base['warmup']} and {head['warmup']} warm-up, left out): the verdict compares the "
                          f"median of {base['steady']} and {head['steady']} steady iterations")
    per = [round(n / side["count"], 1) for n, side in zip(launches, (base, head))]
    kernels = {"aspect": "kernel launches per iteration", "base": per[0], "head": per[1], "same": per[0] == per[1],
               "note": ""}
    if per[0] and abs(per[1] / per[0] - 1.0) * 100.0 >= MIN_EFFECT_PCT:
        kernels["note"] = (f"HEAD launches {(per[1] / per[0] - 1.0) * 100.0:+.1f}% kernels per iteration (launches in "
                           "the window over iterations): each iteration does different work")
    return [counts, kernels]


def iteration_verdict(change: dict, aside: str) -> dict:
    """The headline from wall time per iteration; ``aside`` adds the GPU kernel time's figure."""
    pct, low, high = change["median_change_pct"], change["ci_low_pct"], change["ci_high_pct"]
    out = {"measure": "per iteration", "change_pct": pct, "ci_low_pct": low, "ci_high_pct": high,
           "significant": bool(change["significant"])}
    b, h = change["base"], change["head"]
    basis = f"median of {b['steady']} and {h['steady']} steady iterations"
    interval = f", 95% CI {low:+.1f}% to {high:+.1f}%" if low is not None else ""
    if low is None:
        return {**out, "status": "no significance",
                "text": f"HEAD's wall time per iteration is {pct:+.1f}% of BASE's ({basis}); no significance can be "
                        f"given ({change['note']}){aside}"}
    if not change["significant"]:
        return {**out, "status": "no change",
                "text": f"no change: HEAD's wall time per iteration is {pct:+.1f}% of BASE's ({basis}), within "
                        f"noise or below {MIN_EFFECT_PCT:g}%{interval}{aside}"}
    status = "slower" if pct > 0 else "faster"
    return {**out, "status": status,
            "text": f"HEAD is {abs(pct):.1f}% {status} per iteration ({basis}){interval}{aside}"}
