"""Shared fixtures: the real traces in ../shared/traces (skip with a reason where absent) and tiny stores."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
TRACES = REPO.parent / "shared" / "traces"


def _need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"real traces not present at {path} (CI has ../shared/traces beside the checkout)")
    return path


@pytest.fixture(scope="session")
def traces_dir() -> Path:
    """../shared/traces, or skip."""
    return _need(TRACES)


def nsys_exports() -> list[Path]:
    """Every real nsys SQLite export (empty list when the traces are absent)."""
    return sorted((TRACES / "nsys").glob("*.sqlite")) if TRACES.exists() else []


def kineto_traces() -> list[Path]:
    """Every real single-file PyTorch profiler trace (the DLRM job's ranks, in their folder, are apart; empty list when
    the traces are absent)."""
    return sorted((TRACES / "kineto").glob("*.json.gz")) if TRACES.exists() else []


def export_rows(export: Path, sql: str) -> list[tuple]:
    """``sql`` run by SQLite itself on a real export, read-only, invalid UTF-8 in text replaced: the reference the
    store's rows are checked against."""
    import sqlite3

    src = sqlite3.connect(f"file:{export}?mode=ro", uri=True)
    src.text_factory = lambda b: b.decode("utf-8", "replace")
    try:
        return src.execute(sql).fetchall()
    finally:
        src.close()


def ncu_reports() -> list[Path]:
    """Every real .ncu-rep (empty list when the traces are absent)."""
    return sorted((TRACES / "ncu").glob("*.ncu-rep")) if TRACES.exists() else []


def ncu_csvs() -> list[Path]:
    """Every real ncu CSV (empty list when the traces are absent)."""
    return sorted((TRACES / "ncu-csv").glob("*.csv")) if TRACES.exists() else []


def trace_param(paths: list[Path]):
    """Parametrize over real traces; one skipped param with a reason when there are none."""
    if not paths:
        return [pytest.param(None, marks=pytest.mark.skip(reason=f"real traces absent at {TRACES}"))]
    return [pytest.param(p, id=p.stem) for p in paths]


@pytest.fixture
def memory_store():
    """An empty in-memory store with the normalized schema."""
    from nsight_advisor.store.database import connect

    con = connect(None)
    yield con
    con.close()


@pytest.fixture(scope="session")
def dlrm_ranks() -> list[Path]:
    """The 8 real DLRM ranks' trace files, in rank order, or skip."""
    ranks = sorted((TRACES / "kineto" / "dlrm_8rank").glob("*.pt.trace.json.gz"))
    if len(ranks) != 8:
        pytest.skip(f"the DLRM ranks are absent from {TRACES / 'kineto' / 'dlrm_8rank'}")
    return ranks


@pytest.fixture(scope="module")
def dlrm_job(dlrm_ranks):
    """The 8 real DLRM ranks ingested as one job into a store: ``(connection, capture ids)``, or skip."""
    from nsight_advisor import workflow

    con, ids = workflow.load(dlrm_ranks)
    yield con, ids
    con.close()


@pytest.fixture(scope="module")
def dlrm_analysed(dlrm_job):
    """The DLRM job analysed, with its step model as the analysis builds it: ``(connection, capture ids, findings,
    model)``, or skip."""
    from nsight_advisor.engine import whatif
    from nsight_advisor.engine.analyze import run_analysis

    con, ids = dlrm_job
    result = run_analysis(con, ids)
    model = whatif.step_model(con, ids, max_ops=whatif.MAX_ANALYSIS_OPS, max_steps=whatif.MAX_ANALYSIS_STEPS)
    return con, ids, result.findings, model
