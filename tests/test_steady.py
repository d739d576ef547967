"""The steady-state analysis window (nsight_advisor/analysis/steady.py, docs/impact.md).

pipit_cloverleaf_a100: 10 CloverLeaf time steps from the kernel sequence (tests/test_iterations.py). By default the
window starts at the first step, so the initialization before it (the first cudaMemcpy uploads and the
synchronizations of setting up the fields) is no longer judged as idle time; `--window all` gives the whole span
from the first to the last GPU operation, and an explicit window still wins.
"""

from __future__ import annotations

import pytest

from nsight_advisor import workflow
from nsight_advisor.analysis import accounting
from nsight_advisor.analysis.iterations import Iterations
from nsight_advisor.analysis.steady import apply_steady_window
from nsight_advisor.store.database import connect
from conftest import TRACES

CLOVERLEAF = TRACES / "nsys" / "pipit_cloverleaf_a100.sqlite"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    if not CLOVERLEAF.exists():
        pytest.skip(f"real traces not present at {TRACES}")
    path = tmp_path_factory.mktemp("steady") / "store.duckdb"
    ids = workflow.ingest_to_store([CLOVERLEAF], path)
    return path, ids[0]


def _window(con, cid):
    return con.execute("select start_ns, end_ns, source from analysis_window where capture_id = ?", [cid]).fetchone()


def _first_and_last_op(con, cid):
    return con.execute("select min(start_ns), max(end_ns) from gpu_ops where capture_id = ?", [cid]).fetchone()


def test_default_window_starts_at_the_first_step(store):
    path, cid = store
    con = connect(path)
    try:
        found = accounting.prepare(con, [cid])[cid]
        start, end, source = _window(con, cid)
        first_op, last_op = _first_and_last_op(con, cid)
        # the first step starts at the first launch of its marker kernel, after the setup's operations
        first_step = con.execute("select min(start_ns) from kernel_rows where capture_id = ? and start_ns >= ?",
                                 [cid, found.spans[0][0]]).fetchone()[0]
        assert (start, end) == (first_step, last_op)
        assert first_op < start
        assert source.startswith("steady state: from the first iteration (kernel sequence: 10 iterations)")
        assert "--window all" in source
        # every view the rules read follows the window
        assert con.execute("select min(start_ns) from gpu_idle_gaps where capture_id = ?", [cid]).fetchone()[0] >= start
    finally:
        con.close()


def test_window_all_and_an_explicit_window_win(store):
    path, cid = store
    con = connect(path)
    try:
        accounting.prepare(con, [cid], accounting.parse_window("all"))
        first_op, last_op = _first_and_last_op(con, cid)
        assert _window(con, cid) == (first_op, last_op, "first to last GPU operation (--window all)")
        accounting.prepare(con, [cid], accounting.parse_window("0.6:"))
        start, end, source = _window(con, cid)
        capture_start = con.execute("select start_ns from captures where capture_id = ?", [cid]).fetchone()[0]
        assert start == capture_start + 600_000_000 and source.endswith("(--window)")
    finally:
        con.close()


def test_warmup_iterations_are_left_out(store):
    # no shared capture has slow first steps; the same ten steps, with the first two said to be warm-up
    path, cid = store
    con = connect(path)
    try:
        found = accounting.prepare(con, [cid], accounting.parse_window("all"))[cid]
        apply_steady_window(con, {cid: Iterations(found.spans, found.source, 2)})
        start, _, source = _window(con, cid)
        assert start == found.spans[2][0]
        assert source.startswith("steady state: from iteration 3 (2 warm-up iterations left out; kernel sequence")
    finally:
        con.close()


def test_report_states_the_window_and_why(store, monkeypatch, tmp_path):
    monkeypatch.setenv("NSIGHT_ADVISOR_CACHE", str(tmp_path / "cache"))
    default = workflow.analyze([CLOVERLEAF], use_cache=False).to_dict()
    whole = workflow.analyze([CLOVERLEAF], use_cache=False, window="all").to_dict()
    (steady,), (everything,) = default["captures"][0]["accounting"], whole["captures"][0]["accounting"]
    assert steady["window_source"].startswith("steady state")
    assert steady["window_start_ns"] > everything["window_start_ns"]
    assert steady["window_end_ns"] == everything["window_end_ns"]
    # the setup's synchronizations no longer count as idle time a fix could recover
    assert steady["idle_by_cause"]["sync"] < everything["idle_by_cause"]["sync"]
