"""Where each value of an array lies: from its first position to its last, for arrays whose equal values lie together
(a step graph's ops and its paths' segments, capture by capture)."""

from __future__ import annotations

import numpy as np


def value_windows(values: np.ndarray) -> dict[int, slice]:
    """Each value of ``values`` (integers) and the slice from its first position to just past its last. Where a
    value's positions are not all together, its slice also holds the others between them: callers still test each
    position's value, and the slice is only how far they need to look."""
    windows: dict[int, slice] = {}
    if len(values):
        cuts = np.flatnonzero(values[1:] != values[:-1]) + 1
        for a, b in zip(np.r_[0, cuts].tolist(), np.r_[cuts, len(values)].tolist()):
            v = int(values[a])
            windows[v] = slice(windows[v].start, b) if v in windows else slice(a, b)
    return windows
