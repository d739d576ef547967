"""The statistics of a comparison: is a change in a kernel's or the GPU's time outside the noise?

Per kernel: a seeded bootstrap 95% confidence interval of the change of the median launch duration (HEAD's median
over BASE's, minus one, in percent), resampling each side's launches. The resampled medians are drawn directly
from their distribution rather than by drawing whole resamples: the k-th smallest of n draws with replacement
from a sorted sample is the value at floor(n * U) where U is the k-th smallest of n uniforms, distributed
Beta(k, n - k + 1); the next one up is U + (1 - U) * Beta(1, n - k). That is the same bootstrap distribution at a
cost independent of n, so every launch is used. Over the whole GPU time: the sum of every
launch's duration, with the variance of a sum of launches resampled within each kernel (the amount of each kernel's
work held as it is), and a normal interval of the ratio by the delta method. A change counts as significant only
when its interval excludes zero *and* it is at least :data:`MIN_EFFECT_PCT`: with thousands of launches a
bootstrap finds sub-percent differences "real" that no one would act on, and clock and scheduling noise between
two runs of the same program is of that order.
"""

from __future__ import annotations

import zlib
from typing import Sequence

import numpy as np

#: Bootstrap resamples per kernel: the 2.5th and 97.5th percentiles of 1000 are stable to a few tenths of a percent.
BOOTSTRAP_RESAMPLES = 1000
#: The smallest change of a median (or of the GPU time) reported as a regression or an improvement, in percent.
MIN_EFFECT_PCT = 2.0
#: The seed of every bootstrap (mixed with the kernel's key): the same pair always gives the same intervals.
SEED = 20260
#: Two-sided 95% normal quantile.
Z95 = 1.959964


def pct_change(base: float, head: float) -> float | None:
    """(head / base - 1) in percent; None when base is 0 (no ratio)."""
    if not base:
        return None
    return (head / base - 1.0) * 100.0


def _rng(key: str) -> np.random.Generator:
    return np.random.default_rng([SEED, zlib.crc32(key.encode("utf-8", "replace"))])


def bootstrap_medians(values: np.ndarray, rng: np.random.Generator, resamples: int = BOOTSTRAP_RESAMPLES) -> np.ndarray:
    """``resamples`` medians of resamples (n draws with replacement) of ``values``, drawn from the order-statistic
    distribution (module docstring) instead of by resampling: O(n log n) for the sort, then O(resamples)."""
    x = np.sort(np.asarray(values, dtype=np.float64))
    n = len(x)
    k = (n + 1) // 2  # the median's rank for odd n, the lower of the two middle ranks for even n
    low = rng.beta(k, n - k + 1, resamples)
    pick = np.minimum((low * n).astype(np.int64), n - 1)
    if n % 2:
        return x[pick]
    high = low + (1.0 - low) * rng.beta(1, n - k, resamples)
    return (x[pick] + x[np.minimum((high * n).astype(np.int64), n - 1)]) / 2.0


def median_change(base: Sequence[float], head: Sequence[float], key: str, *, interval: bool = True) -> dict:
    """The change of the median launch duration from ``base`` to ``head`` with its bootstrap 95% interval
    (``interval=False``: the change alone, not significant).

    Returns ``median_change_pct``, ``ci_low_pct``, ``ci_high_pct`` (None when no interval can be given),
    ``significant`` and ``note`` (why not significant, in words). ``key`` seeds the resampling.
    """
    b = np.asarray(base, dtype=np.float64)
    h = np.asarray(head, dtype=np.float64)
    out = {"median_change_pct": None, "ci_low_pct": None, "ci_high_pct": None, "significant": False, "note": ""}
    if len(b) == 0 or len(h) == 0:
        out["note"] = "on one side only"
        return out
    mb, mh = float(np.median(b)), float(np.median(h))
    out["median_change_pct"] = pct_change(mb, mh)
    if not interval:
        return out
    if len(b) < 2 or len(h) < 2:
        out["note"] = "no significance can be given (one launch on a side)"
        return out
    if mb <= 0:
        out["note"] = "no significance can be given (median duration 0)"
        return out
    rng = _rng(key)
    bm, hm = bootstrap_medians(b, rng), bootstrap_medians(h, rng)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.where(bm > 0, hm / bm - 1.0, np.nan) * 100.0
    ratios = ratios[np.isfinite(ratios)]
    if len(ratios) < BOOTSTRAP_RESAMPLES // 2:
        out["note"] = "no significance can be given (durations of 0)"
        return out
    low, high = (float(x) for x in np.percentile(ratios, [2.5, 97.5]))
    out["ci_low_pct"], out["ci_high_pct"] = low, high
    outside = low > 0 or high < 0
    big = out["median_change_pct"] is not None and abs(out["median_change_pct"]) >= MIN_EFFECT_PCT
    out["significant"] = bool(outside and big)
    if not out["significant"]:
        out["note"] = "within noise" if not outside else f"below {MIN_EFFECT_PCT:g}%"
    return out


def total_change(base_groups: Sequence[Sequence[float]], head_groups: Sequence[Sequence[float]]) -> dict:
    """The change of the summed launch durations (each argument: one list of durations per kernel) with a 95%
    interval: the variance of each side's sum is that of resampling launches within each kernel.

    Returns ``base_ns``, ``head_ns``, ``change_pct``, ``ci_low_pct``, ``ci_high_pct``, ``significant``.
    """

    def moments(groups):
        total, var = 0.0, 0.0
        for g in groups:
            a = np.asarray(g, dtype=np.float64)
            if len(a) == 0:
                continue
            total += float(a.sum())
            if len(a) > 1:
                var += len(a) * float(a.var(ddof=1))
        return total, var

    tb, vb = moments(base_groups)
    th, vh = moments(head_groups)
    out = {"base_ns": int(round(tb)), "head_ns": int(round(th)), "change_pct": pct_change(tb, th),
           "ci_low_pct": None, "ci_high_pct": None, "significant": False}
    if tb <= 0 or th <= 0 or (vb == 0 and vh == 0):  # no spread to judge by: one launch per kernel
        return out
    ratio = th / tb
    se = ratio * np.sqrt(vh / th**2 + vb / tb**2)
    out["ci_low_pct"] = float((ratio - Z95 * se - 1.0) * 100.0)
    out["ci_high_pct"] = float((ratio + Z95 * se - 1.0) * 100.0)
    outside = out["ci_low_pct"] > 0 or out["ci_high_pct"] < 0
    out["significant"] = bool(outside and abs(out["change_pct"]) >= MIN_EFFECT_PCT)
    return out


def same_work_change(pairs: Sequence[tuple[Sequence[float], Sequence[float]]]) -> dict:
    """The change of GPU time for BASE's amount of work: each kernel found on both sides weighted by BASE's launch
    count (sum of n_base * mean_head over sum of n_base * mean_base), with a delta-method 95% interval from each
    side's launch variance. Unlike the summed time per window, it does not move when HEAD's window holds more or
    fewer launches of the same kernels.

    Returns ``change_pct``, ``ci_low_pct``, ``ci_high_pct``, ``significant`` and ``kernels`` (how many matched).
    """
    num = den = var_num = var_den = 0.0
    matched = 0
    for base, head in pairs:
        b = np.asarray(base, dtype=np.float64)
        h = np.asarray(head, dtype=np.float64)
        if len(b) == 0 or len(h) == 0:
            continue
        matched += 1
        n = len(b)
        num += n * float(h.mean())
        den += float(b.sum())
        if len(h) > 1:
            var_num += n * n * float(h.var(ddof=1)) / len(h)
        if len(b) > 1:
            var_den += n * float(b.var(ddof=1))
    out = {"change_pct": None, "ci_low_pct": None, "ci_high_pct": None, "significant": False, "kernels": matched}
    if den <= 0 or num <= 0:
        return out
    ratio = num / den
    out["change_pct"] = (ratio - 1.0) * 100.0
    if var_num == 0 and var_den == 0:  # no spread to judge by: one launch per kernel
        return out
    se = ratio * np.sqrt(var_num / num**2 + var_den / den**2)
    out["change_pct"] = (ratio - 1.0) * 100.0
    out["ci_low_pct"] = float((ratio - Z95 * se - 1.0) * 100.0)
    out["ci_high_pct"] = float((ratio + Z95 * se - 1.0) * 100.0)
    outside = out["ci_low_pct"] > 0 or out["ci_high_pct"] < 0
    out["significant"] = bool(outside and abs(out["change_pct"]) >= MIN_EFFECT_PCT)
    return out
