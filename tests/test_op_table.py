"""The step graph's operation columns (analysis/op_table.py): read from DuckDB without pandas, missing values as a
DataFrame of the same query held them, groupings numbered as pandas numbers them; and a cold ``analyze`` of
captures with steps to replay (the graph's only user of pandas before) that never imports pandas.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from nsight_advisor.analysis.op_names import distinct_names, names_matching
from nsight_advisor.analysis.op_table import MISSING_LAST, OpTable, group_codes, runs_of
from pandas_watch import pandas_after

REPO = Path(__file__).resolve().parent.parent
TRACES = REPO.parent / "shared" / "traces"


def test_a_result_reads_as_its_dataframe_holds_it(memory_store):
    query = """
        select * from (values (1, 0::tinyint, 7::bigint, null::bigint, 'a', 10::bigint, 'x'),
                              (2, 1, null, 5, null, 20, 'y'),
                              (3, 1, 9, 6, 'c', 30, 'z')) t(capture_id, kind, pid, tid, name, start_ns, pos)"""
    ops = OpTable.from_result(memory_store.execute(query), drop=("pos",))
    frame = memory_store.execute(query).df().drop(columns="pos")
    assert ops.columns == list(frame.columns)
    for column in ops.columns:
        if column in ("pid", "tid"):  # nullable ids: float64 with NaN
            assert ops[column].dtype == np.float64
            np.testing.assert_array_equal(ops[column], frame[column].astype("float64").to_numpy())
        elif column == "name":
            assert ops[column].tolist() == ["a", None, "c"]
        else:
            np.testing.assert_array_equal(ops[column], frame[column].to_numpy())
    assert ops.ints("pid").tolist() == [7, -1, 9] and ops.present("name").tolist() == [True, False, True]
    assert ops.row(1) == {"capture_id": 2, "kind": 1, "pid": None, "tid": 5, "name": None, "start_ns": 20}
    assert ops == OpTable.from_result(memory_store.execute(query), drop=("pos",))
    assert not ops == OpTable({**{c: ops[c] for c in ops.columns}, "start_ns": np.array([10, 20, 31])})
    pd.testing.assert_frame_equal(ops.frame(), frame.astype({"pid": "float64", "tid": "float64"}),
                                  check_dtype=False)
    with pytest.raises(ValueError, match="3 rows"):
        ops["start_ns"] = np.zeros(2)


def test_group_codes_number_groups_as_pandas_does():
    rng = np.random.default_rng(3)
    a, b, c = rng.integers(0, 4, 500), rng.integers(-2, 3, 500), rng.choice([MISSING_LAST, 7, -(2 ** 40)], 500)
    frame = pd.DataFrame({"a": a, "b": b, "c": c})
    for keys in (["a", "b"], ["a", "b", "c"], ["c"]):
        columns = [frame[k].to_numpy() for k in keys]
        np.testing.assert_array_equal(group_codes(*columns), frame.groupby(keys, sort=True).ngroup().to_numpy())
        np.testing.assert_array_equal(group_codes(*columns, appearance=True),
                                      frame.groupby(keys, sort=False).ngroup().to_numpy())
    assert group_codes(np.zeros(0)).tolist() == []
    ordered = np.sort(a)
    assert runs_of(ordered).tolist() == [True] + (ordered[1:] != ordered[:-1]).tolist()


def test_a_missing_key_sorts_after_every_real_one_as_pandas_places_nan():
    tid = np.array([3.0, np.nan, 1.0, 2.0])
    filled = OpTable({"tid": tid}).ints("tid", MISSING_LAST)
    frame = pd.DataFrame({"tid": tid})
    assert np.argsort(filled, kind="stable").tolist() == frame.sort_values("tid").index.tolist()


def test_distinct_names_code_as_pandas_factorizes_with_missing_last():
    names = np.array(["b", None, "a", "b", "", None, "a"], dtype=object)
    codes, distinct = distinct_names(names)
    assert distinct == ["b", "a", "", ""]  # a real empty name, then the missing one, last
    assert [distinct[c] for c in codes] == ["b", "", "a", "b", "", "", "a"]
    pd_codes, pd_uniques = pd.factorize(pd.Series(names), use_na_sentinel=True)
    assert [distinct[c] for c in codes] == ["" if k < 0 else pd_uniques[k] for k in pd_codes]
    assert names_matching(names, "^a$", regex=True).tolist() == [False, False, True, False, False, False, True]


@pytest.mark.parametrize("which", ["kineto", "nsys"])
def test_a_cold_analyze_with_steps_to_replay_never_imports_pandas(tmp_path, which):
    """The DLRM job (8 PyTorch traces: ingest, collectives across ranks, the step graph and its replays) and an
    Nsight Systems export with iterations: pandas stays unimported from the first line to the report."""
    if which == "kineto":
        inputs = sorted((TRACES / "kineto" / "dlrm_8rank").glob("*.pt.trace.json.gz"))
        if len(inputs) < 8:
            pytest.skip(f"the DLRM ranks are absent from {TRACES / 'kineto' / 'dlrm_8rank'}")
    else:
        inputs = [TRACES / "nsys" / "nsys_ai_h100_2gpu_1s.sqlite"]
        if not inputs[0].exists():
            pytest.skip(f"{inputs[0]} is absent")
    report = tmp_path / "report.json"
    assert pandas_after(["analyze", *map(str, inputs), "--no-cache", "--format", "json", "-o", str(report),
                         "--quiet"], tmp_path) == "False"
    import json

    assert json.loads(report.read_text())["summary"]["savings"]["findings"] > 0  # the steps were replayed
