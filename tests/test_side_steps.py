"""The copies, sets and synchronizations read on a second connection beside the kernels (ingest/nsys/side_steps.py):
the same store as reading them one after the other, their errors named as before, and no thread left behind."""

from __future__ import annotations

import shutil
import sqlite3
import threading
from pathlib import Path

import pytest

from conftest import REPO, nsys_exports, trace_param
from nsight_advisor.common.errors import InputError
from nsight_advisor.ingest.nsys import export as nsys_export
from nsight_advisor.ingest.nsys import side_steps
from nsight_advisor.ingest.nsys.export import ingest_nsys_sqlite
from nsight_advisor.store.database import connect

SAMPLE = REPO / "sample_traces" / "demo_training_step.sqlite"

def _side_threads() -> list:
    return [t for t in threading.enumerate() if t.name == "nsight-advisor-side-steps"]


def _store_rows(path: Path, *, side: bool, monkeypatch, defer=()) -> dict:
    monkeypatch.setattr(side_steps, "SIDE_MIN_KERNELS", 0 if side else 1 << 62)
    con = connect(None)
    try:
        ingest_nsys_sqlite(con, 1, path, defer=defer)
        tables = [r[0] for r in con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main' "
            "AND table_type = 'BASE TABLE' AND table_name <> 'captures'").fetchall()]
        rows = {t: con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall() for t in tables}  # every table, whole
        rows["captures"] = con.execute("SELECT * EXCLUDE (ingested_at) FROM captures").fetchall()
        return rows
    finally:
        con.close()


@pytest.mark.parametrize("export", trace_param(nsys_exports()))
def test_the_store_is_the_same_with_the_steps_beside_the_kernels(export: Path, monkeypatch) -> None:
    beside = _store_rows(export, side=True, monkeypatch=monkeypatch, defer=("nvtx_ranges",))
    assert not _side_threads()
    assert beside == _store_rows(export, side=False, monkeypatch=monkeypatch, defer=("nvtx_ranges",))


def test_the_steps_beside_the_kernels_run_on_their_own_connection_at_once(monkeypatch) -> None:
    """The copies' step starts before the kernels' step ends, on a connection other than the kernels'."""
    seen: dict[str, tuple] = {}
    started = threading.Event()
    real_kernels, real_memcpys = nsys_export.STEPS["kernels"], nsys_export.STEPS["memcpys"]

    def kernels(reader) -> None:
        assert started.wait(10), "the copies' step did not start while the kernels were read"
        seen["kernels"] = (id(reader.con), threading.get_ident())
        real_kernels(reader)

    def memcpys(reader) -> None:
        started.set()
        seen["memcpys"] = (id(reader.con), threading.get_ident())
        real_memcpys(reader)

    monkeypatch.setitem(nsys_export.STEPS, "kernels", kernels)
    monkeypatch.setitem(nsys_export.STEPS, "memcpys", memcpys)
    monkeypatch.setattr(side_steps, "SIDE_MIN_KERNELS", 0)
    con = connect(None)
    try:
        ingest_nsys_sqlite(con, 1, SAMPLE)
        assert con.execute("SELECT count(*) FROM memcpys").fetchone()[0] > 0
    finally:
        con.close()
    assert seen["kernels"][0] != seen["memcpys"][0] and seen["kernels"][1] != seen["memcpys"][1]
    assert not _side_threads()


def test_a_damaged_copy_is_named_with_its_table_when_read_beside_the_kernels(tmp_path: Path, monkeypatch) -> None:
    bad = tmp_path / "damaged.sqlite"
    shutil.copyfile(SAMPLE, bad)
    con = sqlite3.connect(bad)
    con.execute("UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET bytes = 1.5e300 WHERE rowid = 1")
    con.commit()
    con.close()
    monkeypatch.setattr(side_steps, "SIDE_MIN_KERNELS", 0)
    store = connect(None)
    try:
        with pytest.raises(InputError) as err:
            ingest_nsys_sqlite(store, 1, bad)
    finally:
        store.close()
    text = str(err.value)
    assert text.startswith(f"{bad}: cannot be read") and "reading CUPTI_ACTIVITY_KIND_MEMCPY" in text, text
    assert not _side_threads()


@pytest.mark.parametrize("failing", ["kernels", "syncs"])
def test_a_failed_step_is_raised_and_the_side_connection_ends(failing: str, monkeypatch) -> None:
    """A failure in the kernels' step ends the steps beside it; one in a step beside them is raised after the
    kernels' step. Either way the error is the failing step's and no thread outlives the ingest."""
    def broken(reader) -> None:
        raise RuntimeError(f"{failing} step failed")

    monkeypatch.setitem(nsys_export.STEPS, failing, broken)
    monkeypatch.setattr(side_steps, "SIDE_MIN_KERNELS", 0)
    con = connect(None)
    try:
        with pytest.raises(RuntimeError, match=f"{failing} step failed"):
            ingest_nsys_sqlite(con, 1, SAMPLE)
    finally:
        con.close()
    assert not _side_threads()


def test_few_kernels_read_everything_on_one_connection(monkeypatch) -> None:
    """Below SIDE_MIN_KERNELS (the sample's 25 kernels) the steps run in order on the ingest's connection."""
    connections = set()
    for step in nsys_export.SIDE_STEPS + ("kernels",):
        real = nsys_export.STEPS[step]

        def recording(reader, real=real) -> None:
            connections.add(id(reader.con))
            real(reader)

        monkeypatch.setitem(nsys_export.STEPS, step, recording)
    con = connect(None)
    try:
        ingest_nsys_sqlite(con, 1, SAMPLE)
    finally:
        con.close()
    assert len(connections) == 1
