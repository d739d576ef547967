"""A change to one rank's operations replays that rank alone (analysis/replay.py ``_scoped``), and gives
the very times the whole replay gives, whether the ranks were captured apart or in one capture (each its process).

On the 8 real DLRM ranks (one graph, their collectives matched across ranks), each change below is replayed on the
analysis's graph, whose unchanged replay is kept, and on a second build of the same graph replayed whole: the
times are equal to the bit. The changes are made to cover both ways the scoped replay ends: a small one whose rank
still is not the last to arrive at any collective it shares (the other ranks keep their times, only the rank's
ops are visited) and a large one that moves a last arrival (all ranks replayed again).
"""

from __future__ import annotations

import numpy as np
import pytest

from nsight_advisor.analysis.replay import replay, visiting_order
from nsight_advisor.analysis.step_graph import HOST, KERNEL, build_graph

from conftest import TRACES

#: One capture of two ranks, one process each (nsys_ai's MFU job before its fix: 2 GPUs, 4,010 kernels).
TWO_PROCESSES = TRACES / "nsys" / "nsys_ai_mfu_2gpu_before.sqlite"


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


def test_one_process_of_a_capture_replays_alone_and_as_the_whole_graph_does():
    """Two ranks in one capture: a change to one process's ops after the rank's last collective visits that
    process's ops alone; one with a collective ahead (its kernels 2x faster) visits the whole graph from the change
    on; the times are those of a replay of the whole graph either way."""
    if not TWO_PROCESSES.is_file():
        pytest.skip(f"{TWO_PROCESSES} is absent")
    from nsight_advisor import workflow

    con, ids = workflow.load([TWO_PROCESSES])
    try:
        kept = build_graph(con, ids)
        replay(kept)
        base = kept.__dict__["_replay"]["base"][0]
        pid, start = kept.ops["pid"], kept.ops["start_ns"]
        pids = sorted(set(pid[~np.isnan(pid)].tolist()))
        assert len(pids) == 2 and kept.members, (pids, len(kept.members))
        for p in pids:
            mine = pid == p
            kernels, host = mine & (kept.kinds == KERNEL), mine & (kept.kinds == HOST)
            after = start > start[mine & (kept.group >= 0)].max()  # after the rank's last collective
            for name, change, alone in (
                    ("kernels 2x faster after the last collective", {"own_scale": np.where(kernels & after, .5, 1.)},
                     True),
                    ("host work halved after the last collective", {"host_lag_scale": np.where(host & after, .5, 1.)},
                     True),
                    ("kernels 2x faster", {"own_scale": np.where(kernels, .5, 1.)}, False)):
                cost = {}
                got = replay(kept, **change, cost=cost)
                want = replay(build_graph(con, ids), **change)
                np.testing.assert_array_equal(got[0], want[0], err_msg=f"{name}, pid {p}: starts")
                np.testing.assert_array_equal(got[1], want[1], err_msg=f"{name}, pid {p}: ends")
                assert (got[0] != base).any(), f"{name}, pid {p} changed nothing"
                # the visiting order's entries from the first the change alters: the rank's own, or all of them
                # (a collective of the rank's lies ahead of the change: its last arrival may move)
                order = np.asarray(visiting_order(kept)[0])
                touched = np.flatnonzero(next(iter(change.values())) != 1)
                first = int(np.flatnonzero(np.isin(order, touched))[0])
                own, whole = int(mine[order[first:]].sum()), len(order) - first
                assert own < whole
                assert cost["ops"] == (own if alone else whole), (name, p, cost, own, whole)
                if alone:
                    assert (got[0][~mine] == base[~mine]).all(), (name, p)
    finally:
        con.close()
