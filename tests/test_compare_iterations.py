"""Wall time per iteration in a comparison, on hand-made analyses whose arithmetic is written beside them (the real
pairs are in test_compare.py)."""

from __future__ import annotations

from nsight_advisor.compare.comparison import compare_results
from nsight_advisor.compare.iterations import side_iterations


def _analysis(durations: list[int] | None, warmup: int = 0) -> dict:
    iterations = None if durations is None else {
        "count": len(durations), "warmup": warmup, "source": "NVTX range 'ProfilerStep#N'", "durations_ns": durations,
        "median_ns": sorted(durations)[len(durations) // 2], "p10_ns": 0, "p90_ns": 0}
    return {"tool": {"name": "nsight-advisor"}, "findings": [], "outcomes": [],
            "captures": [{"source_name": "x.sqlite", "iterations": iterations, "gpus": [], "accounting": []}]}


KERNELS = {"k": [100, 101, 99, 100, 102, 98]}


def test_ranks_step_together_at_the_slowest_rank() -> None:
    a = _analysis([900, 100, 100, 100], warmup=1)["captures"][0]
    b = _analysis([100, 130, 90], warmup=0)["captures"][0]
    side = side_iterations([a, b])
    # warm-up left out per rank, then the i-th step of each rank: max(100, 100), max(100, 130), max(100, 90)
    assert side["durations_ns"] == [100, 130, 100] and side["steady"] == 3 and side["median_ns"] == 100
    assert side_iterations([a, _analysis(None)["captures"][0]]) is None


def test_slower_steps_make_the_headline() -> None:
    base = [1000 + d for d in (0, 5, -5, 3, -3, 2, -2, 4, -4, 1)]
    head = [round(1.10 * b) for b in base]  # every step 10% longer; the kernels themselves did not move
    c = compare_results(_analysis(base), _analysis(head), KERNELS, KERNELS)
    v = c["verdict"]
    assert v["measure"] == "per iteration" and v["status"] == "slower" and v["significant"]
    assert abs(v["change_pct"] - 10.0) < 0.2 and v["ci_low_pct"] > 5.0
    assert "median of 10 and 10 steady iterations" in v["text"] and "GPU kernel time per window +0.0%" in v["text"]
    notes = {n["aspect"]: n for n in c["comparability"]}
    assert notes["iterations"]["same"] and notes["kernel launches per iteration"]["base"] == 0.6


def test_same_steps_within_noise() -> None:
    base = [1000 + d for d in (0, 5, -5, 3, -3, 2, -2, 4, -4, 1)]
    head = [1000 + d for d in (1, -4, 4, -2, 2, -3, 3, -5, 5, 0)]
    v = compare_results(_analysis(base), _analysis(head), KERNELS, KERNELS)["verdict"]
    assert v["measure"] == "per iteration" and v["status"] == "no change" and not v["significant"]
    assert v["ci_low_pct"] <= 0 <= v["ci_high_pct"]


def test_one_iteration_a_side_gives_no_significance() -> None:
    c = compare_results(_analysis(None), _analysis(None), KERNELS, KERNELS)
    it = c["iterations"]
    assert it["base"] is it["head"] is None and it["median_change_pct"] is None and not it["significant"]
    assert "one iteration per side, so no significance can be given" in it["note"]
    assert c["verdict"]["measure"] == "per window"  # the headline falls back to GPU kernel time
    note = next(n for n in c["comparability"] if n["aspect"] == "iterations")
    assert (note["base"], note["head"]) == (1, 1) and "no significance" in note["note"]
    # only one side repeating is a difference between the runs
    c = compare_results(_analysis([1000, 1001, 999]), _analysis(None), KERNELS, KERNELS)
    note = next(n for n in c["comparability"] if n["aspect"] == "iterations")
    assert not note["same"] and "no iterations found in HEAD" in note["note"]
