"""The what-if's step model built on a thread beside the rules (engine/model_work.py) is the model built after them.

On real captures: the model read at once and built on the thread (forced on here: the shared exports are small
stores, which build it when asked) equals, array for array, the one ``step_model`` builds in one go, and its
critical paths the ones ``step_paths`` walks; a whole analysis gives the same report either way; a failure while
building is raised where the model is asked for, and no thread outlives the work.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import threading

import numpy as np
import pytest

from nsight_advisor import workflow
from nsight_advisor.analysis.steps import steps_of
from nsight_advisor.engine import model_work, whatif
from nsight_advisor.engine.model_work import ModelWork
from nsight_advisor.engine.path_share import step_paths
from nsight_advisor.engine.whatif import MAX_ANALYSIS_OPS, MAX_ANALYSIS_STEPS, step_model
from nsight_advisor.store.opening import fit_small_store

from conftest import TRACES

#: Two ranks in one capture, one process each, with steady iterations and matched collectives.
MFU_BEFORE = TRACES / "nsys" / "nsys_ai_mfu_2gpu_before.sqlite"


def _need(path):
    if not path.exists():
        pytest.skip(f"real traces not present at {TRACES}")
    return path


def _equal(a, b, where: str) -> None:
    """``a`` and ``b`` equal: arrays element for element, dataclasses field by field, containers item by item."""
    if dataclasses.is_dataclass(a):
        for f in dataclasses.fields(a):
            _equal(getattr(a, f.name), getattr(b, f.name), f"{where}.{f.name}")
    elif isinstance(a, np.ndarray):
        np.testing.assert_array_equal(a, b, err_msg=where)
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            _equal(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _equal(x, y, f"{where}[{i}]")
    elif hasattr(a, "columns"):  # an OpTable: compared column by column, NaN equal to NaN
        assert a == b, where
    else:
        assert a == b, where


@pytest.fixture
def forced(monkeypatch):
    """The thread used whatever the store (a small one builds the model when asked for it)."""
    monkeypatch.setattr(model_work, "_parallel_store", lambda con: True)


def _cases(dlrm_job):
    con, ids = workflow.load([_need(MFU_BEFORE)], use_cache=False)
    yield "nsys_ai_mfu_2gpu_before", con, ids
    con.close()
    yield "the DLRM job", *dlrm_job


def test_the_model_built_beside_the_rules_is_the_one_built_in_one_go(dlrm_job, forced):
    for name, con, ids in _cases(dlrm_job):
        found = steps_of(con, ids)
        assert found, f"{name}: no steps"
        threads = threading.active_count()
        work = ModelWork(con, ids, found, max_ops=MAX_ANALYSIS_OPS, max_steps=MAX_ANALYSIS_STEPS)
        got = work.result()
        assert threading.active_count() == threads
        want = step_model(con, ids, max_ops=MAX_ANALYSIS_OPS, max_steps=MAX_ANALYSIS_STEPS, found=found)
        for part in ("steps", "sources", "kept", "base", "units"):
            _equal(getattr(got, part), getattr(want, part), f"{name}: {part}")
        for f in dataclasses.fields(got.graph):
            _equal(getattr(got.graph, f.name), getattr(want.graph, f.name), f"{name}: graph.{f.name}")
        assert want.paths is None and got.paths is not None
        _equal(got.paths, step_paths(want.graph, want.steps, want.base, want.units), f"{name}: paths")


def test_an_analysis_reports_the_same_with_the_model_built_beside_the_rules(monkeypatch, tmp_path):
    monkeypatch.setenv("NSIGHT_ADVISOR_CACHE", str(tmp_path / "cache"))
    path = _need(MFU_BEFORE)
    apart = _untimed(workflow.analyze([path], use_cache=False).to_dict())
    monkeypatch.setattr(model_work, "_parallel_store", lambda con: True)
    beside = _untimed(workflow.analyze([path], use_cache=False).to_dict())
    assert beside["summary"]["savings"]["findings"] >= 1  # the replays ran on the model
    assert json.dumps(beside, sort_keys=True) == json.dumps(apart, sort_keys=True)


def _untimed(doc):
    """``doc`` without the rules' run times (``elapsed_s``), which differ from run to run."""
    if isinstance(doc, dict):
        return {k: _untimed(v) for k, v in doc.items() if k != "elapsed_s"}
    if isinstance(doc, list):
        return [_untimed(v) for v in doc]
    return doc


def test_a_failure_building_the_model_is_raised_where_it_is_asked_for(monkeypatch, forced):
    con, ids = workflow.load([_need(MFU_BEFORE)], use_cache=False)
    try:
        found = steps_of(con, ids)

        def broken(rows):
            raise RuntimeError("no model")

        monkeypatch.setattr(whatif, "model_from", broken)
        interval, threads = sys.getswitchinterval(), threading.active_count()
        work = ModelWork(con, ids, found, max_ops=MAX_ANALYSIS_OPS, max_steps=MAX_ANALYSIS_STEPS)
        with pytest.raises(RuntimeError, match="no model"):
            work.result()
        assert threading.active_count() == threads and sys.getswitchinterval() == interval
        # closed without being asked (the rules failed): the thread is waited for all the same
        with ModelWork(con, ids, found, max_ops=MAX_ANALYSIS_OPS, max_steps=MAX_ANALYSIS_STEPS):
            pass
        assert threading.active_count() == threads and sys.getswitchinterval() == interval
    finally:
        con.close()


def test_a_small_store_builds_the_model_when_asked(dlrm_job):
    # the DLRM job's store runs its queries on one DuckDB thread: its rules take both cores on two connections
    con, ids = dlrm_job
    fit_small_store(con)  # as the analysis does
    try:
        threads = threading.active_count()
        work = ModelWork(con, ids, steps_of(con, ids), max_ops=MAX_ANALYSIS_OPS, max_steps=MAX_ANALYSIS_STEPS)
        assert threading.active_count() == threads
        model = work.result()
        assert model is not None and model.paths is None  # finish() walks the paths, as before
    finally:
        con.execute("RESET threads")
        con.execute("RESET disabled_optimizers")
