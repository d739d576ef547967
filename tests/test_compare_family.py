"""The family of kernel tests: the rank test against brute-force permutation and against the textbook normal
approximation, Benjamini-Hochberg by hand, the minimum launches, short names and the gate, on hand-made data whose
arithmetic is written beside it (the real captures are in test_compare_noise.py)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from nsight_advisor.compare.comparison import compare_results
from nsight_advisor.compare.family import MIN_LAUNCHES, benjamini_hochberg, rank_test_p, too_few
from nsight_advisor.compare.gate import regression_gate
from nsight_advisor.compare.short_names import short_kernel_key, short_name


def _brute_p(base: list[float], head: list[float]) -> float:
    """Two-sided permutation p-value of BASE's rank sum, every split of the pooled launches enumerated."""
    pooled = np.array(base + head, dtype=float)
    ranks = np.array([np.sum(pooled < v) + (np.sum(pooled == v) + 1) / 2 for v in pooled])
    n, k = len(pooled), len(base)
    centre = k * (n + 1) / 2
    observed = abs(ranks[:k].sum() - centre)
    sums = [abs(ranks[list(c)].sum() - centre) for c in itertools.combinations(range(n), k)]
    return sum(s >= observed - 1e-9 for s in sums) / len(sums)


def _normal_p(base: list[float], head: list[float]) -> float:
    """The textbook normal approximation with tie and continuity corrections, one kernel at a time."""
    pooled = np.array(base + head, dtype=float)
    nb, nh, n = len(base), len(head), len(pooled)
    u = sum((h < b) + 0.5 * (h == b) for b in base for h in head)
    _, t = np.unique(pooled, return_counts=True)
    var = nb * nh / 12 * ((n + 1) - (t**3 - t).sum() / (n * (n - 1)))
    return math.erfc(max(abs(u - nb * nh / 2) - 0.5, 0) / math.sqrt(var) / math.sqrt(2))


def test_exact_p_is_the_permutation_p_with_ties() -> None:
    rng = np.random.default_rng(3)
    pairs = [([1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]),  # fully separated: 2 / C(8, 4) = 2/70
             ([10, 10, 11, 12, 12], [10, 12, 13, 13]),  # ties across the sides
             ([5, 5, 5, 5], [5, 5, 5, 6])]
    pairs += [(list(rng.integers(0, 6, int(rng.integers(4, 8)))), list(rng.integers(1, 8, int(rng.integers(4, 7)))))
              for _ in range(6)]
    got = rank_test_p(pairs)  # all in one vectorized call, each exact (at most 40 launches)
    for (b, h), p in zip(pairs, got):
        assert p == pytest.approx(_brute_p([float(x) for x in b], [float(x) for x in h]), abs=1e-12), (b, h)
    assert got[0] == pytest.approx(2 / 70)


def test_smallest_p_below_the_minimum_cannot_reach_5_percent() -> None:
    # fully separated samples give the smallest two-sided p-value there is: 2 / C(2n, n)
    for n, smallest in ((2, 1 / 3), (3, 0.1), (4, 2 / 70)):
        p = rank_test_p([(list(range(n)), list(range(100, 100 + n)))])[0]
        assert p == pytest.approx(smallest)
        assert (p > 0.05) == too_few(n, n) == (n < MIN_LAUNCHES)
    assert too_few(2, 500) and too_few(500, 3) and not too_few(4, 4)


def test_large_samples_match_the_normal_approximation_kernel_by_kernel() -> None:
    rng = np.random.default_rng(11)
    pairs = []
    for i in range(12):  # ragged sizes, coarse clocks (ties), some shifted
        nb, nh = int(rng.integers(25, 90)), int(rng.integers(25, 90))
        scale = 1.0 + 0.03 * (i % 3)
        pairs.append((list(np.round(rng.lognormal(6, 0.1, nb) / 8) * 8),
                      list(np.round(scale * rng.lognormal(6, 0.1, nh) / 8) * 8)))
    got = rank_test_p(pairs)
    for (b, h), p in zip(pairs, got):
        if len(b) + len(h) > 40:
            assert p == pytest.approx(_normal_p(b, h), rel=1e-9, abs=1e-15)
        else:
            assert p == pytest.approx(_brute_p(b, h) if len(b) + len(h) <= 14 else p)
    scipy_stats = pytest.importorskip("scipy.stats")
    for (b, h), p in zip(pairs, got):
        if len(b) + len(h) > 40:
            ref = scipy_stats.mannwhitneyu(b, h, alternative="two-sided", method="asymptotic").pvalue
            assert p == pytest.approx(ref, rel=1e-6)


def test_benjamini_hochberg_by_hand() -> None:
    p = np.array([0.01, 0.04, 0.03, 0.005, 0.5])
    # sorted 0.005 0.01 0.03 0.04 0.5, times m/rank = 0.025 0.025 0.05 0.05 0.5, then the running minimum from the top
    assert benjamini_hochberg(p) == pytest.approx([0.025, 0.05, 0.05, 0.025, 0.5])
    # one small p among many is not a discovery: 0.01 * 100 / 1 = 1
    assert benjamini_hochberg(np.r_[0.01, np.full(99, 0.9)])[0] == pytest.approx(0.9)


def _empty() -> dict:
    return {"tool": {"name": "nsight-advisor"}, "captures": [], "findings": [], "outcomes": []}


def test_two_launches_a_side_are_too_few_to_tell() -> None:
    base = {"k2": [100, 101], "steady": [1000 + d for d in range(-10, 10)]}
    head = {"k2": [150, 151], "steady": [1000 + d for d in range(-10, 10)]}  # +50%, but two launches a side
    c = compare_results(_empty(), _empty(), base, head)
    k = next(k for k in c["kernels"] if k["name"] == "k2")
    assert k["status"] == "too few" and not k["significant"] and k["median_change_pct"] == pytest.approx(49.75, 0.01)
    assert k["ci_low_pct"] is None and k["p_value"] is None and k["q_value"] is None
    assert k["note"] == "too few launches to tell (2 and 2; the rank test needs at least 4 a side to reach 5%)"
    assert c["kernel_counts"]["too few"] == 1 and c["statistics"]["kernels_tested"] == 1
    assert not regression_gate(c, 0.0)["tripped"] or all(
        t["what"] == "run" for t in regression_gate(c, 0.0)["tripped_by"])


def test_gate_judges_the_share_of_the_run() -> None:
    rng = np.random.default_rng(5)
    big = [int(v) for v in rng.normal(10_000, 50, 200)]
    small = [int(v) for v in rng.normal(100, 1, 200)]
    base = {"big": big, "small": small}
    head = {"big": big, "small": [round(v * 1.5) for v in small]}  # a tiny kernel 50% slower
    window = {"captures": [{"accounting": [{"device_id": 0, "window_start_ns": 0, "window_end_ns": 4_000_000,
                                            "kernel_ns": 2_020_000, "comm_ns": 0, "copy_ns": 0, "memset_ns": 0,
                                            "idle_ns": 1_980_000, "idle_by_cause": {}}]}]}
    c = compare_results({**_empty(), **window}, {**_empty(), **window}, base, head)
    k = next(k for k in c["kernels"] if k["name"] == "small")
    assert k["status"] == "slower" and k["significant"] and k["q_value"] < 0.05
    # 200 launches of ~100 ns, +50%: ~10 us added to a 4 ms window, 0.25% of the run
    assert c["statistics"]["run_time_ns"] == 4_000_000
    assert k["cost_pct"] == pytest.approx(100 * k["base"]["total_ns"] * k["median_change_pct"] / 100 / 4e6)
    assert 0.2 < k["cost_pct"] < 0.3
    assert regression_gate(c, 3.0) == {"threshold_pct": 3.0, "tripped": False, "tripped_by": []}
    tripped = regression_gate(c, 0.2)
    assert tripped["tripped"] and [t["name"] for t in tripped["tripped_by"] if t["what"] == "kernel"] == ["small"]
    assert regression_gate(c, None)["tripped"] is False


def test_short_names() -> None:
    assert short_name("void at::native::vectorized_elementwise_kernel<(int)4, at::native::CUDAFunctor_add<float>, "
                      "at::detail::Array<char *, (int)3>>(int, T2, T3)") == "vectorized_elementwise_kernel"
    assert short_name("void at::native::elementwise_kernel<128, 2, void at::native::gpu_kernel_impl<X>(at::"
                      "TensorIteratorBase &, const T1 &)::{lambda(int)#1}>(int, T3)") == "elementwise_kernel"
    assert short_name("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<(unsigned long)4096>)") == \
        "ncclDevKernel_SendRecv"
    assert short_name("void (anonymous namespace)::softmax_warp_forward<float, (int)10>(T2 *, int)") == \
        "softmax_warp_forward"
    assert short_name("ampere_sgemm_128x64_tn") == "ampere_sgemm_128x64_tn"
    hostile = "evil|kernel<script>alert(1)</script>`x`"
    assert short_name(hostile) == hostile and short_name("f<int(") == "f<int("  # not a C++ name: kept whole
    assert short_name("<script>alert(1)</script>") == "<script>alert(1)</script>"
    assert short_name("void gemm<float, cutlass::arch::Sm80>(T&amp; a, const T* __restrict__ b)") == "gemm"
    assert short_kernel_key("void ns::k<int>(float *) <<<(1,2,3), (4,5,6)>>>") == "k <<<(1,2,3), (4,5,6)>>>"
