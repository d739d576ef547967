"""The steps' durations under a replay (analysis/critical_path.py ``map_steps``), which every what-if measures its
saving with, equal a step-by-step mapping written as the rule reads: a step starts with the first op of its
capture starting at or after it, ends with the next step's start where that follows at once, else with the latest
replayed end of the ops that had ended by it (the last op's own end for steps the host marked), and keeps its
recorded bound where no op moves it. Real captures, their step models as the analysis builds them, the recorded
times and a replay with half of the kernels twice as fast; each GPU's ops and each capture's, host steps or not.
"""

from __future__ import annotations

import numpy as np
import pytest

from conftest import TRACES

CAPTURES = ["nsys/pipit_cloverleaf_a100.sqlite", "nsys/nsys_ai_mfu_2gpu_before.sqlite",
            "nsys/nsys_ai_h100_2gpu_1s.sqlite"]


def _reference(g, capture_id, spans, times, on_host, among):
    """Each step's duration, one bound at a time."""
    from nsight_advisor.analysis.step_graph import HOST

    ns, ne = times
    mine = g.ops["capture_id"] == capture_id
    if among is not None:
        mine &= among
    if on_host and (mine & (g.kinds == HOST)).any():
        mine &= g.kinds == HOST
    ops = np.flatnonzero(mine)
    if not len(ops):
        return [float(e - s) for s, e in spans]
    start, end = g.ops["start_ns"], g.ops["end_ns"]

    def moved_end(b):
        ended = ops[end[ops] <= b]
        if not len(ended):
            return float(b)
        last = ended[np.lexsort((ended, end[ended]))[-1]]  # the last by recorded end (the latest index of a tie)
        new = ne[last] if on_host else max(ne[ended])
        return b + (new - end[last])

    def moved_start(b):
        later = ops[start[ops] >= b]
        if not len(later):
            return moved_end(b)
        first = later[np.lexsort((later, start[later]))[0]]  # the first by recorded start (the earliest index)
        return b + (ns[first] - start[first])

    out = []
    for n, (s, e) in enumerate(spans):
        follows = n + 1 < len(spans) and spans[n + 1][0] == e
        out.append(float((moved_start(e) if follows else moved_end(e)) - moved_start(s)))
    return out


@pytest.mark.parametrize("name", CAPTURES)
def test_map_steps_equals_the_step_by_step_mapping(name):
    path = TRACES / name
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    from nsight_advisor import workflow
    from nsight_advisor.analysis.critical_path import map_steps
    from nsight_advisor.analysis.replay import replay
    from nsight_advisor.analysis.step_graph import KERNEL
    from nsight_advisor.engine.whatif import MAX_ANALYSIS_OPS, MAX_ANALYSIS_STEPS, step_model

    con, ids = workflow.load([path])
    try:
        model = step_model(con, ids, max_ops=MAX_ANALYSIS_OPS, max_steps=MAX_ANALYSIS_STEPS)
    finally:
        con.close()
    g = model.graph
    kernels = np.flatnonzero(g.kinds == KERNEL)
    scale = np.ones(len(g))
    scale[kernels[::2]] = 0.5
    faster = replay(g, own_scale=scale)
    checked = 0
    for cid, spans in model.steps.items():
        assert len(spans) >= 2  # a step that follows another, and the last that does not
        for among in [None, *model.units.get(cid, {}).values()]:
            for on_host in (False, True):
                for times in (model.base, faster):
                    got = map_steps(g, cid, spans, times, on_host, among)
                    assert got == _reference(g, cid, spans, times, on_host, among), (cid, on_host)
                    checked += 1
    assert checked >= 4
    assert map_steps(g, ids[0], [], model.base) == []
