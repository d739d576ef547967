"""The rules of a small store's analysis on two connections (engine/two_connections.py, with the twin of
analysis/twin_connection.py) give the analysis of one connection."""

from __future__ import annotations

import threading
import time

import pytest

from nsight_advisor import workflow
from nsight_advisor.analysis import accounting
from nsight_advisor.analysis.twin_connection import read_temp, release, write_temp
from nsight_advisor.common.connections import second_connection
from nsight_advisor.engine import two_connections
from nsight_advisor.store.database import connect
from nsight_advisor.store.opening import StoreHandle, fit_small_store


@pytest.fixture
def ranks(dlrm_ranks):
    return dlrm_ranks


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("NSIGHT_ADVISOR_CACHE", str(tmp_path / "cache"))


def _plain(result) -> dict:
    """The result without the times it took."""
    out = result.to_dict()
    for outcome in out["outcomes"]:
        outcome.pop("elapsed_s", None)
    return out


def test_the_dlrm_job_on_two_connections_is_the_job_on_one(ranks, monkeypatch):
    import nsight_advisor.analysis.twin_connection as twin_module

    threads, fill = [], twin_module.write_temp
    monkeypatch.setattr(twin_module, "write_temp",
                        lambda *a: (threads.append(threading.current_thread().name), fill(*a))[1])
    two = _plain(workflow.analyze(ranks, use_cache=False))
    # the twin filled on the second thread, then host_activity, made there, copied to this thread's connection
    assert threads == ["nsight-advisor-rules", threading.current_thread().name]
    monkeypatch.setattr(two_connections, "MIN_JOBS", 10 ** 6)
    one = _plain(workflow.analyze(ranks, use_cache=False))
    assert len(threads) == 2  # no twin this time
    assert two == one
    assert len(two["findings"]) > 50 and two["summary"]["captures"]


def test_the_twin_holds_the_analysis_temp_tables_and_views(ranks):
    con, ids = StoreHandle(ranks).open()
    try:
        fit_small_store(con)
        accounting.prepare(con, ids)
        accounting.materialize_read(con, ["host_activity"])
        twin = second_connection(con)
        write_temp(twin, read_temp(con))
        try:
            temp = con.execute("select table_name from duckdb_tables() where temporary and not internal").fetchall()
            views = con.execute("select view_name from duckdb_views() where temporary and not internal").fetchall()
            names = [r[0] for r in temp + views]
            assert {"host_activity", "gpu_idle_gaps", "kernels", "cuda_api_calls"} <= set(names)
            for name in names:
                sql = f'select * from temp.main."{name}" order by all'
                mine, its = con.execute(sql), twin.execute(sql)
                assert [d[:2] for d in mine.description] == [d[:2] for d in its.description], name
                assert mine.fetchall() == its.fetchall(), name
            # a store view that reads a materialized one reads the copy on the twin, as on the first connection
            sql = "select count(*), sum(duration_ns) from gpu_time_partition"
            assert con.execute(sql).fetchall() == twin.execute(sql).fetchall()
        finally:
            twin.close()
    finally:
        con.close()


def test_the_twin_copies_within_duckdb_and_leaves_nothing_attached(ranks):
    con, ids = StoreHandle(ranks).open()  # read-only, as an analysis opens it
    try:
        fit_small_store(con)
        accounting.prepare(con, ids)
        twin = second_connection(con)
        try:
            state = read_temp(con)
            assert all(isinstance(copy, str) for _, _, copy in state.tables)  # names of copies, not rows
            write_temp(twin, state)
            left = "select count(*) from duckdb_tables() where database_name = '_na_twin'"
            assert con.execute(left).fetchone()[0] == 0  # each copy dropped once written
        finally:
            twin.close()
        release(con)
        assert "_na_twin" not in {r[0] for r in con.execute("select database_name from duckdb_databases()").fetchall()}
    finally:
        con.close()


def test_an_nsys_export_on_two_connections_imports_neither_arrow_nor_numpy(tmp_path):
    """The copy used to go through Arrow: on an Nsight Systems export, whose run needs neither Arrow nor numpy
    otherwise, their import cost more than the second connection saved."""
    import os
    import subprocess
    import sys

    from conftest import REPO, TRACES

    export = TRACES / "nsys" / "csc746_vecadd.sqlite"
    if not export.exists():
        pytest.skip(f"{export} is absent")
    probe = ("import sys\n"
             "from pathlib import Path\n"
             "from nsight_advisor import workflow\n"
             "from nsight_advisor.engine import two_connections\n"
             "used = []\n"
             "real = two_connections._on_two\n"
             "two_connections._on_two = lambda *a, **k: (used.append(1), real(*a, **k))[1]\n"
             "result = workflow.analyze([Path(sys.argv[1])], use_cache=False)\n"
             "print(len(used), len(result.findings), 'pyarrow' in sys.modules, 'numpy' in sys.modules)\n")
    env = {**os.environ, "NSIGHT_ADVISOR_CACHE": str(tmp_path / "c"), "PYTHONPATH": str(REPO)}  # this checkout
    out = subprocess.run([sys.executable, "-c", probe, str(export)], capture_output=True, text=True, check=True,
                         env=env)
    used, findings, arrow, numpy = out.stdout.split()
    assert (used, arrow, numpy) == ("1", "False", "False") and int(findings) > 0


def _store_with_threads(tmp_path, threads: int):
    con = connect(tmp_path / f"t{threads}.duckdb")
    con.execute(f"set threads = {threads}")
    con.execute("create temp table t as select range as x from range(10)")
    return con


def test_jobs_come_back_in_their_order_with_each_done_once(tmp_path):
    con = _store_with_threads(tmp_path, 1)
    try:
        seen, where = [], set()

        def job(i):
            def run(connection):
                where.add(id(connection))
                time.sleep(0.02)  # long enough for the second thread to take some
                return i, connection.execute(f"select sum(x) + {i} from t").fetchone()[0]
            return run

        out = two_connections.run_jobs(con, [job(i) for i in range(12)], seen.append)
        assert out == [(i, 45 + i) for i in range(12)]
        assert sorted(seen) == list(range(12))
        assert len(where) == 2  # the twin took some: it sees the temp table too
    finally:
        con.close()


def test_jobs_are_taken_lead_last_and_longest_first():
    assert two_connections.queue_order(6, frozenset(), frozenset()) == [0, 1, 2, 3, 4, 5]
    assert two_connections.queue_order(6, frozenset({1, 5}), frozenset()) == [0, 2, 3, 4, 1, 5]
    # the summary (the last job, the longest) first among those that need the lead; a long rule first of the rest
    assert two_connections.queue_order(6, frozenset({1, 5}), frozenset({5, 3})) == [3, 0, 2, 4, 5, 1]


def test_a_store_on_more_threads_keeps_one_connection(tmp_path):
    con = _store_with_threads(tmp_path, 2)
    try:
        where = []
        out = two_connections.run_jobs(con, [lambda c, i=i: where.append(c) or i for i in range(6)], lambda i: None)
        assert out == list(range(6)) and all(c is con for c in where)
    finally:
        con.close()


def test_temp_tables_too_large_to_copy_keep_one_connection(tmp_path, monkeypatch):
    con = _store_with_threads(tmp_path, 1)  # its temp table: 10 rows
    try:
        monkeypatch.setattr(two_connections, "MAX_TWIN_ROWS", 9)
        where = []
        two_connections.run_jobs(con, [lambda c: where.append(c) for _ in range(6)], lambda i: None)
        assert all(c is con for c in where)
        monkeypatch.setattr(two_connections, "MAX_TWIN_ROWS", 10)
        where.clear()
        two_connections.run_jobs(con, [lambda c: (time.sleep(0.05), where.append(c)) for _ in range(6)],
                                 lambda i: None)
        assert any(c is not con for c in where)  # each job long enough for the second thread to take one
    finally:
        con.close()


def test_a_job_that_raises_stops_both_and_is_raised(tmp_path):
    con = _store_with_threads(tmp_path, 1)
    try:
        def job(i):
            def run(connection):
                if i == 3:
                    raise ValueError("job 3 broke")
                return connection.execute("select count(*) from t").fetchone()[0]
            return run

        with pytest.raises(ValueError, match="job 3 broke"):
            two_connections.run_jobs(con, [job(i) for i in range(20)], lambda i: None)
        assert [t.name for t in threading.enumerate() if t.name == "nsight-advisor-rules"] == []
        assert con.execute("select count(*) from t").fetchone()[0] == 10  # the first connection is left usable
    finally:
        con.close()


def _lead_jobs(made_on: list, fail: bool = False):
    def make(connection):
        made_on.append(threading.current_thread().name)
        if fail:
            raise ValueError("the lead broke")
        connection.execute("create or replace temp table lead as select 7 as v")
        return ["lead"]

    def job(i):
        table = "lead" if i in (7, 8) else "t"
        return lambda connection: connection.execute(f"select count(*) from {table}").fetchone()[0]

    return [job(i) for i in range(10)], two_connections.Lead(make=make, needs=frozenset({7, 8}))


def test_a_lead_is_made_on_the_twin_and_copied_before_the_jobs_that_need_it(tmp_path):
    con = _store_with_threads(tmp_path, 1)
    try:
        made_on = []
        jobs, lead = _lead_jobs(made_on)
        assert two_connections.run_jobs(con, jobs, lambda i: None, lead=lead) == [10] * 7 + [1, 1] + [10]
        assert made_on == ["nsight-advisor-rules"]  # made by the second thread, on the twin
        assert con.execute("select v from lead").fetchall() == [(7,)]  # and copied here
    finally:
        con.close()
    con = _store_with_threads(tmp_path, 2)
    try:
        made_on = []
        jobs, lead = _lead_jobs(made_on)
        assert two_connections.run_jobs(con, jobs, lambda i: None, lead=lead) == [10] * 7 + [1, 1] + [10]
        assert made_on == [threading.current_thread().name]  # one connection: made here, first
    finally:
        con.close()


def test_a_lead_that_fails_is_the_error_raised(tmp_path):
    con = _store_with_threads(tmp_path, 1)
    try:
        jobs, lead = _lead_jobs([], fail=True)
        with pytest.raises(ValueError, match="the lead broke"):
            two_connections.run_jobs(con, jobs, lambda i: None, lead=lead)
    finally:
        con.close()


@pytest.mark.parametrize("where", ["reading", "filling"])
def test_without_memory_for_a_twin_the_jobs_run_on_one_connection(tmp_path, monkeypatch, where):
    import duckdb

    import nsight_advisor.analysis.twin_connection as twin_module

    def short(*_args):
        raise duckdb.OutOfMemoryException("Out of Memory Error: ArrowBuffer: failed to allocate 8388608 bytes")

    monkeypatch.setattr(twin_module, "read_temp" if where == "reading" else "write_temp", short)
    con = _store_with_threads(tmp_path, 1)
    try:
        where_run = []
        jobs, lead = _lead_jobs([])
        jobs = [lambda c, job=job: (where_run.append(c), time.sleep(0.01), job(c))[2] for job in jobs]
        assert two_connections.run_jobs(con, jobs, lambda i: None, lead=lead) == [10] * 7 + [1, 1] + [10]
        assert all(c is con for c in where_run)
        assert con.execute("select v from lead").fetchall() == [(7,)]  # the lead made here
    finally:
        con.close()
