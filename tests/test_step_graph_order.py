"""The step graph (analysis/step_graph.py) is the same graph every time it is built from the same store.

Its operations are indexed in the order the store returns them, and ties between operations go by index (the
critical path starts from the first by index of those ending latest). DuckDB returns the rows of a union or a
view in no fixed order, so the graph reads them in a fixed one: on the 8 real DLRM ranks (threads, streams and
collectives matched across ranks), building the graph five times gives five equal graphs.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from nsight_advisor.analysis.step_graph import build_graph


def test_the_graph_is_built_the_same_every_time(dlrm_job):
    con, ids = dlrm_job
    first = build_graph(con, ids)
    again = [build_graph(con, ids) for _ in range(4)]
    assert len(first) > 5000 and first.members
    for other in again:
        for f in dataclasses.fields(first):
            a, b = getattr(first, f.name), getattr(other, f.name)
            if isinstance(a, np.ndarray):
                np.testing.assert_array_equal(a, b, err_msg=f.name)
            else:
                assert a == b, f.name
