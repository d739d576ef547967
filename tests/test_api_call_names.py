"""``api_calls`` is a view (schema/tables.py): rows in api_call_rows, each capture's call names, with their base
names, once in api_names.

What users' SQL, rules and reports read stays: the view has the documented columns, in order, and every call its
name and base name; rows written through ``insert_api_calls`` read back as given; an ingest stores each name once;
the analysis's copy of ``cuda_api_calls`` (accounting.prepare) is the stored view's rows; a store from before the
view is refused in one line.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from conftest import TRACES, export_rows, kineto_traces, nsys_exports, trace_param
from nsight_advisor.common.errors import InputError
from nsight_advisor.ingest import ingest_capture
from nsight_advisor.ingest.nsys.export import read_catalog
from nsight_advisor.schema.tables import get_table
from nsight_advisor.store.database import connect, insert_api_calls


def test_the_view_has_the_documented_columns_in_order(memory_store) -> None:
    got = [r[0] for r in memory_store.execute(
        "SELECT column_name FROM duckdb_columns() WHERE table_name = 'api_calls' ORDER BY column_index").fetchall()]
    assert got == get_table("api_calls").column_names
    assert not get_table("api_calls").stored
    assert get_table("api_call_rows").stored and "base_name" not in get_table("api_call_rows").column_names


def test_rows_written_through_insert_api_calls_read_back_with_names_stored_once(memory_store) -> None:
    pairs = [("cudaMemcpy_v3020", "cudaMemcpy"), ("cudaMemcpy", "cudaMemcpy"), (None, "cudaLaunchKernel"),
             ("cuLaunchKernel", None), (None, None), ("cudaMemcpy_v3020", "cudaMemcpy")]
    rows = [dict(capture_id=1, pid=7, tid=8, correlation_id=i, name=n, base_name=b, kind="runtime",
                 start_ns=i, end_ns=i + 3, duration_ns=3, return_value=0) for i, (n, b) in enumerate(pairs)]
    rows.append(dict(capture_id=2, start_ns=0, end_ns=1, duration_ns=1, name="cudaMemcpy_v3020",
                     base_name="cudaMemcpy"))
    insert_api_calls(memory_store, rows)
    got = memory_store.execute("SELECT capture_id, correlation_id, name, base_name, kind, start_ns, return_value "
                               "FROM api_calls ORDER BY capture_id, start_ns").fetchall()
    assert got == [(r["capture_id"], r.get("correlation_id"), r["name"], r["base_name"], r.get("kind"),
                    r["start_ns"], r.get("return_value")) for r in rows]
    names = memory_store.execute("SELECT capture_id, name, base_name FROM api_names ORDER BY ALL").fetchall()
    assert names == [(1, "cuLaunchKernel", None), (1, "cudaMemcpy", "cudaMemcpy"),
                     (1, "cudaMemcpy_v3020", "cudaMemcpy"), (1, None, "cudaLaunchKernel"),
                     (2, "cudaMemcpy_v3020", "cudaMemcpy")]
    assert memory_store.execute("SELECT count(*) FROM api_call_rows WHERE name_id IS NULL").fetchone()[0] == 1
    with pytest.raises(ValueError, match="no column 'nme'"):
        insert_api_calls(memory_store, [dict(nme="typo")])


@pytest.mark.parametrize("export", trace_param(nsys_exports()))
def test_every_call_of_a_real_export_keeps_its_name(export: Path, tmp_path: Path) -> None:
    """The view gives each call the name its string id resolves to in the export (SQLite's own join), and its
    base name without the version suffix; api_names holds each name once."""
    if "CUPTI_ACTIVITY_KIND_RUNTIME" not in read_catalog(export).tables:
        pytest.skip(f"{export.name} has no CUDA API table")
    theirs = export_rows(export, """
        SELECT s.value, count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME r LEFT JOIN StringIds s ON s.id = r.nameId
        WHERE r.start IS NOT NULL AND r."end" IS NOT NULL AND r."end" >= r.start GROUP BY 1""")
    con = connect(tmp_path / "s.duckdb")
    try:
        ingest_capture(con, 1, export)
        ours = con.execute("SELECT name, count(*) FROM api_calls GROUP BY 1").fetchall()
        assert sorted(ours, key=repr) == sorted(theirs, key=repr)
        assert con.execute("SELECT count(*) FROM api_calls WHERE base_name IS DISTINCT FROM "
                           "regexp_replace(name, '_v[0-9]+$', '')").fetchone()[0] == 0
        stored, distinct = con.execute("SELECT count(*), count(DISTINCT name) FROM api_names").fetchone()
        assert stored == distinct == len([n for n, _ in theirs if n is not None])
    finally:
        con.close()


@pytest.mark.parametrize("trace", trace_param(nsys_exports() + kineto_traces()))
def test_the_analysis_reads_the_calls_the_stored_view_gives(trace: Path, tmp_path: Path) -> None:
    """accounting.prepare replaces cuda_api_calls by a join of the rows with their classified names where no call
    is nested in another; it gives the stored view's rows, class included."""
    from nsight_advisor.analysis import accounting

    con = connect(tmp_path / "s.duckdb")
    try:
        ingest_capture(con, 1, trace)
        if not con.execute("SELECT count(*) FROM api_call_rows").fetchone()[0]:
            pytest.skip(f"{trace.name} has no CUDA API calls")
        stored = con.execute(f"SELECT * FROM {accounting.stored(con, 'cuda_api_calls')} ORDER BY ALL").fetchall()
        accounting.prepare(con, [1])
        assert con.execute("SELECT count(*) FROM duckdb_views() WHERE temporary AND view_name = 'cuda_api_calls'"
                           ).fetchone()[0] + con.execute(
            "SELECT count(*) FROM duckdb_tables() WHERE temporary AND table_name = 'cuda_api_calls'").fetchone()[0] == 1
        assert con.execute("SELECT * FROM cuda_api_calls ORDER BY ALL").fetchall() == stored
        assert con.execute("SELECT count(*) FROM cuda_api_calls WHERE api_class IS NULL").fetchone()[0] == 0
    finally:
        con.close()


def test_a_kineto_trace_stores_each_call_name_once(tmp_path: Path) -> None:
    """Kineto batches add their new names to api_names as they come: each once, numbered from 1 per capture."""
    traces = kineto_traces()
    if not traces:
        pytest.skip(f"real traces absent at {TRACES}")
    con = connect(tmp_path / "s.duckdb")
    try:
        ingest_capture(con, 1, traces[0])
        stored, distinct, top = con.execute("SELECT count(*), count(DISTINCT name), max(name_id) FROM api_names"
                                            ).fetchone()
        assert stored == distinct == top > 0
        assert con.execute("SELECT count(*) FROM api_call_rows WHERE name_id IS NULL").fetchone()[0] == 0
    finally:
        con.close()


def test_a_store_from_before_the_view_is_refused_in_one_line(tmp_path: Path) -> None:
    old = tmp_path / "old.duckdb"
    raw = duckdb.connect(str(old))
    raw.execute("CREATE TABLE api_calls (capture_id INTEGER, name VARCHAR)")
    raw.close()
    with pytest.raises(InputError, match="older nsight-advisor \\(its api_calls is a table.*new store"):
        connect(old)
