"""common/runs.py value_windows: each value's slice from its first position to its last."""

import numpy as np

from nsight_advisor.common.runs import value_windows


def test_values_lying_together_get_their_own_positions():
    values = np.array([3, 3, 3, 1, 1, 7])
    windows = value_windows(values)
    assert windows == {3: slice(0, 3), 1: slice(3, 5), 7: slice(5, 6)}
    for v, w in windows.items():
        assert (values[w] == v).all()


def test_a_value_split_in_two_gets_a_slice_holding_both_and_what_lies_between():
    values = np.array([1, 1, 2, 1, 3])
    windows = value_windows(values)
    assert windows[1] == slice(0, 4)
    assert set(np.flatnonzero(values == 1).tolist()) <= set(range(len(values))[windows[1]])
    assert windows[2] == slice(2, 3) and windows[3] == slice(4, 5)


def test_no_values_no_windows():
    assert value_windows(np.zeros(0, np.int64)) == {}
