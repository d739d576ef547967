"""The bootstrap of a median drawn from the order-statistic distribution matches brute-force resampling."""

from __future__ import annotations

import numpy as np
import pytest

from nsight_advisor.compare.stats import bootstrap_medians


@pytest.mark.parametrize("n", [5, 6, 31, 200, 201])
def test_order_statistic_bootstrap_matches_resampling(n: int) -> None:
    rng = np.random.default_rng(n)
    # kernel-like durations: a skewed spread with many ties (integer nanoseconds at a coarse clock)
    x = np.round(rng.lognormal(8.0, 0.3, n) / 32) * 32
    fast = bootstrap_medians(x, np.random.default_rng(1), 40_000)
    brute = np.median(x[np.random.default_rng(2).integers(0, n, (40_000, n))], axis=1)
    assert set(np.unique(fast)) <= set(np.unique(brute)) | {(a + b) / 2 for a in x for b in x}
    for q in (2.5, 25, 50, 75, 97.5):
        # the same distribution: quantiles agree to within the sampling error of 40,000 draws
        a, b = np.percentile(fast, q), np.percentile(brute, q)
        assert abs(a - b) <= 0.02 * np.median(x) + 1e-9, (q, a, b)
    assert abs(fast.mean() - brute.mean()) < 0.005 * np.median(x)


def test_one_value_and_constant_samples() -> None:
    rng = np.random.default_rng(0)
    assert set(bootstrap_medians(np.array([7.0]), rng, 100)) == {7.0}
    assert set(bootstrap_medians(np.full(10, 3.0), rng, 100)) == {3.0}
