"""Paced programs (nsight_advisor/analysis/pacing.py): a capture built from a real one by spacing its iterations at a
fixed period is reported paced, and its host-idle finding claims nothing; the capture as recorded is not paced.

pipit_cloverleaf_a100 (no NVTX) has 10 CloverLeaf time steps found from its kernel sequence (tests/test_iterations.py),
each about 32 ms with the GPU busy about 90% of the window. The paced copy moves every row of step i (rows whose
start lies between the step's first marker kernel and the next one's) so that step i starts at i * PERIOD after the
first: a frame loop at PERIOD with the same work in each frame.
"""

from __future__ import annotations

import json
import shutil
import sqlite3

import jsonschema
import pytest

from nsight_advisor import workflow
from nsight_advisor.analysis import accounting
from nsight_advisor.report.json_report import json_schema
from nsight_advisor.store.database import connect
from conftest import TRACES

CLOVERLEAF = TRACES / "nsys" / "pipit_cloverleaf_a100.sqlite"
#: Four times the longest step: the GPU works about a quarter of each frame.
PERIOD_NS = 130_000_000


def _analyze(path, monkeypatch, tmp_path) -> dict:
    monkeypatch.setenv("NSIGHT_ADVISOR_CACHE", str(tmp_path / "cache"))
    doc = json.loads(json.dumps(workflow.analyze([path], use_cache=False).to_dict()))
    jsonschema.Draft202012Validator(json_schema()).validate(doc)
    return doc


def _steps(path, tmp_path) -> list[tuple[int, int]]:
    store = tmp_path / "steps.duckdb"
    ids = workflow.ingest_to_store([path], store)
    con = connect(store)
    try:
        found = accounting.prepare(con, ids)[ids[0]]
    finally:
        con.close()
    return list(found.spans)


def _paced_copy(tmp_path) -> tuple:
    steps = _steps(CLOVERLEAF, tmp_path)
    assert len(steps) == 10
    assert PERIOD_NS > 3 * max(end - start for start, end in steps)
    paced = tmp_path / "cloverleaf_paced.sqlite"
    shutil.copyfile(CLOVERLEAF, paced)
    paced.chmod(0o644)
    first = steps[0][0]
    con = sqlite3.connect(paced)
    with con:
        tables = [t for (t,) in con.execute("select name from sqlite_master where type = 'table'")]
        for table in tables:
            cols = {r[1] for r in con.execute(f"pragma table_info('{table}')")}
            time_col = "start" if "start" in cols else "timestamp" if "timestamp" in cols else None
            if time_col is None:
                continue
            moved = [c for c in ("start", "end", "timestamp") if c in cols]
            for i, (start, _) in enumerate(steps):
                upto = steps[i + 1][0] if i + 1 < len(steps) else None
                shift = first + i * PERIOD_NS - start
                where = f'"{time_col}" >= ?' + (f' and "{time_col}" < ?' if upto is not None else "")
                args = [start] + ([upto] if upto is not None else [])
                # later steps first would collide with the rows still to move: mark the moved rows by a huge offset
                sets = ", ".join(f'"{c}" = "{c}" + ? + 4611686018427387904' for c in moved)
                con.execute(f'update "{table}" set {sets} where {where} and "{time_col}" < 4611686018427387904',
                            [shift] * len(moved) + args)
            sets = ", ".join(f'"{c}" = "{c}" - 4611686018427387904' for c in moved)
            con.execute(f'update "{table}" set {sets} where "{time_col}" >= 4611686018427387904')
    con.close()
    return paced, steps


@pytest.fixture()
def traces():
    if not CLOVERLEAF.exists():
        pytest.skip(f"real traces not present at {TRACES}")


def test_cloverleaf_as_recorded_is_not_paced(traces, monkeypatch, tmp_path):
    doc = _analyze(CLOVERLEAF, monkeypatch, tmp_path)
    assert doc["captures"][0]["iterations"]["count"] == 10
    assert doc["captures"][0]["pacing"] is None
    assert not any("paced at" in f["message"] for f in doc["findings"])


def test_cloverleaf_spaced_at_a_fixed_period_is_paced(traces, monkeypatch, tmp_path):
    paced, steps = _paced_copy(tmp_path)
    doc = _analyze(paced, monkeypatch, tmp_path)
    cap = doc["captures"][0]
    assert cap["iterations"]["count"] == 10
    pacing = cap["pacing"]
    assert pacing is not None
    assert pacing["period_ns"] == pytest.approx(PERIOD_NS, rel=1e-6)
    assert pacing["onset_cv"] < 0.01
    # the GPU works about one step (~32 ms, ~90% busy) per 130 ms frame
    busy_per_step = sum(end - start for start, end in steps) / len(steps)
    assert 0.5 * busy_per_step / PERIOD_NS < pacing["busy_pct"] / 100 < busy_per_step / PERIOD_NS
    assert pacing["headroom_ns"] == pytest.approx(PERIOD_NS * (1 - pacing["busy_pct"] / 100), rel=1e-3)
    # the gaps between frames: the wait after each step's closing cudaDeviceSynchronize (sync-stall); the host-bound
    # idle left (4.4 ms of io in 12 gaps, 0.3% of the window) is under gpu-idle-gap's 1% floor, and where it fires
    # it is paced too
    idle = [f for f in doc["findings"] if f["rule_name"] in ("gpu-idle-gap", "sync-stall")]
    assert "sync-stall" in {f["rule_name"] for f in idle}
    for f in idle:
        assert f["impact_ns"] == 0 and f["severity"] == "info"
        assert f"paced at {PERIOD_NS / 1e6:.1f} ms per frame; the GPU is busy" in f["message"]
        assert "overlap" not in f["message"]
