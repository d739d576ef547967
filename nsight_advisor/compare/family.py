"""Which kernels changed, when hundreds are compared at once: a rank test per kernel, false discoveries controlled
across all of them, and no verdict where the launches are too few to give one.

Per kernel found on both sides: the Wilcoxon-Mann-Whitney rank-sum test of BASE's launch durations against HEAD's
(two-sided; exact, from the permutation distribution of the rank sum with ties at their mid-ranks, when both sides
together hold at most :data:`EXACT_MAX_LAUNCHES` launches; else the normal approximation with the tie and
continuity corrections). It assumes nothing about the shape of a kernel's durations (often bimodal: cache-warm and
cold launches) and is exact where a bootstrap is not: a bootstrap of two values has no idea of their spread.

Too few to tell: with n launches a side the smallest two-sided p-value any outcome can give is
``2 / C(2n, n)``: 0.33 at 2, 0.10 at 3, 0.029 at 4. Below :data:`MIN_LAUNCHES` a side no outcome can reach 5%, so
such a kernel is not tested, is never significant and never trips a gate.

The family: the p-values of every kernel tested are adjusted by Benjamini-Hochberg (q-values); a kernel is a
discovery when its q-value is at most :data:`FDR_Q`, which keeps the expected share of false discoveries among the
kernels called changed at or below 5% however many are tested. The whole pass is vectorized over kernels: every
launch gets one integer key (kernel, then duration), each side's keys sorted as the store returns them, then one
``searchsorted`` and ``bincount`` per quantity over the runs of equal durations.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Sequence

import numpy as np

#: Launches needed on each side for a kernel to be tested (module docstring: 2 / C(8, 4) = 0.029 < 0.05).
MIN_LAUNCHES = 4
#: The false discovery rate controlled across the kernels tested (Benjamini-Hochberg).
FDR_Q = 0.05
#: Up to this many launches on both sides together, the rank test's p-value is exact (its permutation
#: distribution counted in float64, exact below 2**53: C(40, 20) is 1.4e11).
EXACT_MAX_LAUNCHES = 40


def too_few(n_base: int, n_head: int) -> bool:
    """True when either side has fewer than :data:`MIN_LAUNCHES` launches: too few for the test to mean anything."""
    return n_base < MIN_LAUNCHES or n_head < MIN_LAUNCHES


@lru_cache(maxsize=4096)
def _rank_sum_counts(doubled_ranks: tuple[int, ...], k: int) -> np.ndarray:
    """How many k-subsets of ``doubled_ranks`` (twice each mid-rank, so integers) have each sum: the permutation
    distribution of a side's rank sum, ties kept (counting, by dynamic programming over the launches)."""
    top = sum(sorted(doubled_ranks)[-k:])
    counts = np.zeros((k + 1, top + 1))
    counts[0, 0] = 1.0
    for r in doubled_ranks:
        # one more launch: a subset either leaves it out, or takes it (one more member, r more in the sum)
        counts[1:, r:] = counts[1:, r:] + counts[:-1, : top + 1 - r]
    return counts[k]


def _exact_p(base: np.ndarray, head: np.ndarray) -> float:
    pooled = np.concatenate([base, head])
    n = len(pooled)
    order = np.argsort(pooled, kind="stable")
    ranks = np.empty(n)
    ranks[order] = np.arange(1, n + 1, dtype=np.float64)
    _, inverse = np.unique(pooled, return_inverse=True)
    ranks = (np.bincount(inverse, weights=ranks) / np.bincount(inverse))[inverse]  # ties at their mid-rank
    doubled = np.rint(2 * ranks).astype(np.int64)
    small = base if len(base) <= len(head) else head  # the distribution of the smaller side's sum: fewer subsets
    k = len(small)
    observed = int(doubled[: len(base)].sum() if small is base else doubled[len(base):].sum())
    counts = _rank_sum_counts(tuple(sorted(int(d) for d in doubled)), k)
    sums = np.arange(len(counts))
    centre = k * (n + 1)  # the mean of a doubled rank sum of k launches
    extreme = np.abs(sums - centre) >= abs(observed - centre)
    return float(min(1.0, counts[extreme].sum() / counts.sum()))


def _keys(b_all: np.ndarray, h_all: np.ndarray, nb: np.ndarray, nh: np.ndarray) -> tuple[np.ndarray, np.ndarray,
                                                                                          np.int64]:
    """One int64 key per launch that sorts by kernel first, then by duration (``key // width`` is the kernel), each
    side's keys sorted. Integer nanoseconds are their own code; other values get dense codes."""
    m = len(nb)
    values = np.concatenate([b_all, h_all])
    low, high = float(values.min()), float(values.max())
    if np.array_equal(values, np.rint(values)) and (high - low + 1) * (m + 1) < 2.0**62:
        width = np.int64(high - low + 1)
        codes = (values - low).astype(np.int64)
    else:
        uniq, codes = np.unique(values, return_inverse=True)
        width = np.int64(len(uniq))
    keys = np.r_[np.repeat(np.arange(m, dtype=np.int64), nb), np.repeat(np.arange(m, dtype=np.int64), nh)] * width
    keys += codes
    kb, kh = keys[: len(b_all)], keys[len(b_all):]
    # the durations a side reads from the store are sorted already: sort only when they are not
    kb = kb if np.all(kb[1:] >= kb[:-1]) else np.sort(kb)
    kh = kh if np.all(kh[1:] >= kh[:-1]) else np.sort(kh)
    return kb, kh, width


def _runs(sorted_keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct keys of a sorted array and how many times each occurs."""
    starts = np.flatnonzero(np.r_[True, sorted_keys[1:] != sorted_keys[:-1]])
    return sorted_keys[starts], np.diff(np.r_[starts, len(sorted_keys)])


def rank_test_p(pairs: Sequence[tuple[Sequence[float], Sequence[float]]]) -> np.ndarray:
    """The two-sided Wilcoxon-Mann-Whitney p-value of each (BASE durations, HEAD durations) pair (module
    docstring). Every side of every pair must hold at least one launch."""
    m = len(pairs)
    if m == 0:
        return np.zeros(0)
    nb = np.array([len(b) for b, _ in pairs], dtype=np.int64)
    nh = np.array([len(h) for _, h in pairs], dtype=np.int64)
    b_all = np.concatenate([np.asarray(b, dtype=np.float64) for b, _ in pairs])
    h_all = np.concatenate([np.asarray(h, dtype=np.float64) for _, h in pairs])
    kb, kh, width = _keys(b_all, h_all, nb, nh)
    offsets_b = np.r_[0, np.cumsum(nb)]
    offsets_h = np.r_[0, np.cumsum(nh)]
    # each side's runs of equal durations (its keys sorted: a run is one duration of one kernel)
    vb, cb = _runs(kb)
    vh, ch = _runs(kh)
    # U of BASE: for each BASE launch, HEAD's launches of the same kernel below it, and half of those equal to it
    below = np.searchsorted(kh, vb, "left")
    upto = np.searchsorted(kh, vb, "right")
    u = np.bincount(vb // width, weights=cb * (below + upto) / 2.0, minlength=m) - nb * offsets_h[:-1]
    # tie correction: sum of t^3 - t over the runs of equal durations in each kernel's pooled launches, a run of
    # the pooled launches being a BASE run joined with HEAD's launches of that duration (upto - below), or a HEAD
    # run alone
    both = (cb + (upto - below)).astype(np.float64)
    inh = (upto - below).astype(np.float64)
    ties = (np.bincount(vh // width, weights=ch.astype(np.float64) ** 3 - ch, minlength=m)
            + np.bincount(vb // width, weights=(both**3 - both) - (inh**3 - inh), minlength=m))
    n = (nb + nh).astype(np.float64)
    var = nb * nh / 12.0 * ((n + 1) - ties / np.maximum(n * (n - 1), 1.0))
    dev = np.maximum(np.abs(u - nb * nh / 2.0) - 0.5, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(var > 0, dev / np.sqrt(np.maximum(var, 1e-300)), 0.0)
    p = np.array([math.erfc(v / math.sqrt(2.0)) for v in z])
    # exact where few launches make the normal approximation coarse (its worst case, and where it matters)
    for i in np.flatnonzero(nb + nh <= EXACT_MAX_LAUNCHES):
        p[i] = _exact_p(b_all[offsets_b[i]: offsets_b[i + 1]], h_all[offsets_h[i]: offsets_h[i + 1]])
    p[var <= 0] = 1.0  # every launch of both sides equal: nothing moved
    return np.minimum(p, 1.0)


def benjamini_hochberg(p: np.ndarray) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values (q-values) of a family: a test is a discovery at false discovery rate
    q when its q-value is at most q."""
    p = np.asarray(p, dtype=np.float64)
    m = len(p)
    if m == 0:
        return p
    order = np.argsort(p, kind="stable")
    scaled = p[order] * m / np.arange(1, m + 1)
    q = np.minimum.accumulate(scaled[::-1])[::-1]
    out = np.empty(m)
    out[order] = np.minimum(q, 1.0)
    return out


def family_q_values(pairs: Sequence[tuple[Sequence[float], Sequence[float]]]) -> tuple[np.ndarray, np.ndarray,
                                                                                         np.ndarray]:
    """For each (BASE, HEAD) pair of launch durations: whether it is tested (enough launches a side), its rank
    test's p-value and its Benjamini-Hochberg q-value over the tested ones (NaN where not tested)."""
    tested = np.array([not too_few(len(b), len(h)) for b, h in pairs], dtype=bool)
    p = np.full(len(pairs), np.nan)
    q = np.full(len(pairs), np.nan)
    chosen = np.flatnonzero(tested)
    if len(chosen):
        p[chosen] = rank_test_p([pairs[i] for i in chosen])
        q[chosen] = benjamini_hochberg(p[chosen])
    return tested, p, q


def kernel_verdict(stats: dict, n_base: int, n_head: int, q: float, tested_count: int) -> tuple[str, dict]:
    """A matched kernel's status and statistics: ``stats`` (its median change and bootstrap interval, from
    :func:`~nsight_advisor.compare.stats.median_change`, or just the median change when not tested) joined with
    the family's verdict. Significant only when tested, its q-value is at most :data:`FDR_Q`, its interval excludes
    0 and the change is at least the minimum effect."""
    out = dict(stats)
    out["p_value"] = out["q_value"] = None
    if too_few(n_base, n_head):
        out.update(significant=False, ci_low_pct=None, ci_high_pct=None,
                   note=f"too few launches to tell ({n_base} and {n_head}; the rank test needs at least "
                        f"{MIN_LAUNCHES} a side to reach 5%)")
        return "too few", out
    out["q_value"] = float(q)
    if out["significant"] and q > FDR_Q:
        out["significant"] = False
        out["note"] = f"within noise (q = {q:.2g} > {FDR_Q:g} over {tested_count} kernels tested)"
    if not out["significant"]:
        return "unchanged", out
    return ("slower" if out["median_change_pct"] > 0 else "faster"), out
