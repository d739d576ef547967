"""A change to one rank's operations replays that rank alone (analysis/replay.py ``_scoped``), and gives
the very times the whole replay gives.

On the 8 real DLRM ranks (one graph, their collectives matched across ranks), each change below is replayed on the
analysis's graph, whose unchanged replay is kept, and on a second build of the same graph replayed whole: the
times are equal to the bit. The changes are made to cover both ways the scoped replay ends: a small one whose rank
still is not the last to arrive at any collective it shares (the other ranks keep their times, only the rank's
ops are visited) and a large one that moves a last arrival (all ranks replayed again).
"""

from __future__ import annotations

import numpy as np
import pytest

from nsight_advisor.analysis.replay import replay
from nsight_advisor.analysis.step_graph import HOST, KERNEL, build_graph


@pytest.fixture(scope="module")
def graphs(dlrm_job):
    con, ids = dlrm_job
    kept = build_graph(con, ids)
    replay(kept)  # the unchanged replay, kept on the graph: what-ifs start from it
    return kept, lambda: build_graph(con, ids)


def _changes(g):
    """(name, change, capture) for each rank: its kernels 1% faster, 2x faster, its host work halved."""
    capture = g.ops["capture_id"]
    for cid in sorted(set(capture.tolist())):
        kernels = (g.kinds == KERNEL) & (capture == cid)
        host = (g.kinds == HOST) & (capture == cid)
        yield "kernels 1% faster", {"own_scale": np.where(kernels, 0.99, 1.0)}, cid
        yield "kernels 2x faster", {"own_scale": np.where(kernels, 0.5, 1.0)}, cid
        yield "host work halved", {"host_lag_scale": np.where(host, 0.5, 1.0)}, cid


def test_one_ranks_change_replays_as_the_whole_graph_does(graphs):
    kept, fresh = graphs
    n, ranks = len(kept), len(set(kept.ops["capture_id"].tolist()))
    scoped = whole = 0
    for name, change, cid in _changes(kept):
        cost = {}
        got = replay(kept, **change, cost=cost)
        want = replay(fresh(), **change)  # a graph without a kept replay: every op visited, in order
        np.testing.assert_array_equal(got[0], want[0], err_msg=f"{name}, capture {cid}: starts")
        np.testing.assert_array_equal(got[1], want[1], err_msg=f"{name}, capture {cid}: ends")
        assert (got[0] != kept.__dict__["_replay"]["base"][0]).any(), f"{name}, capture {cid} changed nothing"
        if cost["ops"] <= 2 * n / ranks:  # the rank's own ops alone (its op count, and its special ends)
            scoped += 1
        else:
            whole += 1
    # both endings happen: most changes stay on their rank, and some move a collective's last arrival
    assert scoped >= 8 and whole >= 1, (scoped, whole)


def test_a_change_across_ranks_replays_them_all(graphs):
    kept, fresh = graphs
    both = np.isin(kept.ops["capture_id"], [1, 2]) & (kept.kinds == KERNEL)
    cost = {}
    got = replay(kept, own_scale=np.where(both, 0.9, 1.0), cost=cost)
    want = replay(fresh(), own_scale=np.where(both, 0.9, 1.0))
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
    assert cost["ops"] > len(kept) / 8
