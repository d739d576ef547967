"""The DuckDB instance prepared on a second thread for an nsys ingest (nsight_advisor.store.ingest_instance): the
store it builds is the store a connection of its own builds, and an analysis of an export uses it."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from conftest import REPO, TRACES
from nsight_advisor import workflow
from nsight_advisor.common.connections import ATTACHED_STORE, second_connection
from nsight_advisor.ingest import ingest_capture
from nsight_advisor.schema.tables import TABLES
from nsight_advisor.store import database, ingest_instance
from nsight_advisor.store.ingest_instance import PreparedInstance, prepare_for

SAMPLE = REPO / "sample_traces" / "demo_training_step.sqlite"
KINETO = TRACES / "kineto" / "alexnet_trace.json.gz"


def _rows(path: Path) -> dict[str, list]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        # every table but captures (its row records when the ingest ran)
        return {t.name: sorted(map(repr, con.execute(f"select * from {t.name}").fetchall()))
                for t in TABLES if t.name != "captures"}
    finally:
        con.close()


def test_a_store_built_on_the_prepared_instance_is_the_store_a_connection_builds(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # an in-memory instance would spill into the working folder by default
    stores = {}
    for how in ("connection", "prepared"):
        stores[how] = tmp_path / f"{how}.duckdb"
        instance = PreparedInstance() if how == "prepared" else None
        with database.atomic_store(stores[how], fresh=True, instance=instance) as con:
            if instance is not None:
                assert con.execute("select current_database()").fetchone()[0] == ATTACHED_STORE
            # DuckDB spills beside the store being built, as it does for a file it opened itself
            file = con.execute("select file from pragma_database_list where name = current_database()").fetchone()[0]
            assert con.execute("select current_setting('temp_directory')").fetchone()[0] == file + ".tmp"
            ingest_capture(con, 1, SAMPLE)  # its NVTX ranges are written by a second connection
        if instance is not None:
            assert instance.take() is None  # handed out once
            instance.close()
    assert _rows(stores["prepared"]) == _rows(stores["connection"])
    assert _rows(stores["prepared"])["nvtx_ranges"] and _rows(stores["prepared"])["kernel_rows"]
    assert not (tmp_path / ".tmp").exists()


def test_a_second_connection_writes_the_attached_store(tmp_path):
    instance = PreparedInstance()
    con = database.attach_store(instance.take(), tmp_path / "s.duckdb")
    cur = second_connection(con)
    cur.execute("create table written_by_the_cursor as select 1 as x")
    assert con.execute("select x from written_by_the_cursor").fetchall() == [(1,)]
    assert cur.execute("select current_database()").fetchone()[0] == ATTACHED_STORE
    plain = duckdb.connect(str(tmp_path / "plain.duckdb"))  # a store opened directly: the cursor's default already
    assert second_connection(plain).execute("select current_database()").fetchone()[0] == "plain"
    cur.close(), con.close(), plain.close()


def test_only_an_nsys_export_or_report_gets_an_instance(tmp_path):
    instance = prepare_for([SAMPLE])
    assert isinstance(instance, PreparedInstance)
    instance.close()
    assert instance.take() is None  # closed without being taken: never handed out afterwards
    text = tmp_path / "trace.json"
    text.write_text('{"traceEvents": []}')
    assert prepare_for([text]) is None and prepare_for([]) is None and prepare_for(None) is None
    assert prepare_for([tmp_path / "absent.sqlite"]) is None  # the ingest reports it


def test_a_failed_preparation_leaves_the_ingest_to_connect_as_usual(monkeypatch):
    def fail(con):
        raise RuntimeError("no scanner here")

    monkeypatch.setattr(ingest_instance, "load_sqlite_scanner", fail)
    instance = PreparedInstance()
    assert instance.take() is None


def test_analyze_builds_an_exports_store_on_the_prepared_instance(tmp_path, monkeypatch):
    monkeypatch.setenv("NSIGHT_ADVISOR_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    attached, made = [], []
    attach = database.attach_store
    prepare = ingest_instance.prepare_for

    def spy_attach(con, path, **kw):
        attached.append(path)
        return attach(con, path, **kw)

    def spy_prepare(paths):
        made.append(prepare(paths))
        return made[-1]

    monkeypatch.setattr(database, "attach_store", spy_attach)
    monkeypatch.setattr(ingest_instance, "prepare_for", spy_prepare)
    result = workflow.analyze([SAMPLE], use_cache=False)
    assert len(attached) == 1 and result.findings
    assert made[0] is not None and made[0].take() is None  # taken by the ingest, and closed
    # the result cache's copy comes back without a database opened: no instance is started for it
    workflow.analyze([SAMPLE])
    assert len(made) == 1 and len(attached) == 1
    if KINETO.exists():  # a PyTorch trace: no sqlite scanner to load
        workflow.analyze([KINETO], use_cache=False)
        assert made[-1] is None and len(attached) == 1
    else:
        pytest.skip(f"real traces not present at {TRACES}")
