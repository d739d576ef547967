"""Parameters written as literals (nsight_advisor/common/sql_params.py) give what DuckDB's own binding gives."""

from __future__ import annotations

import datetime as dt
import math
import os
import subprocess
import sys

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import REPO
from nsight_advisor.common import sql_params

_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-(2 ** 63), 2 ** 63 - 1),
    st.floats(allow_nan=True, allow_infinity=True), st.text(),
    st.datetimes(min_value=dt.datetime(1970, 1, 1), max_value=dt.datetime(2100, 1, 1)),
    st.lists(st.integers(-(2 ** 31), 2 ** 31 - 1), max_size=5), st.lists(st.text(), min_size=1, max_size=3),
    st.sampled_from([-(2 ** 31), -(2 ** 63), 2 ** 31, -(2 ** 31) - 1]),
)


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b and type(a) is type(b)


@settings(max_examples=200, deadline=None)
@given(value=_VALUES)
def test_a_literal_has_the_type_and_value_of_the_bound_parameter(value) -> None:
    con = duckdb.connect()
    native = con.execute("SELECT typeof($v), $v", {"v": value}).fetchone()
    ours = sql_params.execute(con, "SELECT typeof($v), $v", {"v": value}).fetchone()
    assert ours[0] == native[0]
    assert _same(ours[1], native[1])
    positional = sql_params.execute(con, "SELECT typeof(?), ?", [value, value]).fetchone()
    assert positional[0] == native[0] and _same(positional[1], native[1])


def test_quotes_nul_and_sql_in_strings_stay_data() -> None:
    con = duckdb.connect()
    con.execute("CREATE TABLE t (s VARCHAR)")
    nasty = "it's'); DROP TABLE t; --\0after NUL"
    sql_params.execute(con, "INSERT INTO t VALUES (?)", [nasty])
    assert con.execute("SELECT s FROM t").fetchall() == [(nasty,)]


def test_inserts_updates_and_reserved_names() -> None:
    con = duckdb.connect()
    con.execute("CREATE TABLE t (v INTEGER, s VARCHAR)")
    sql_params.execute(con, "INSERT INTO t VALUES ($end, $order)", {"end": 1, "order": "x"})
    sql_params.execute(con, "UPDATE t SET s = ? WHERE v = ?", ["y", 1])
    assert con.execute("SELECT * FROM t").fetchall() == [(1, "y")]


def test_values_it_does_not_write_and_statements_it_cannot_prepare_are_bound_as_usual() -> None:
    con = duckdb.connect()
    assert sql_params.execute(con, "SELECT ?", [2 ** 70]).fetchone()[0] == 2 ** 70  # beyond BIGINT
    assert sql_params.execute(con, "SELECT ?::DATE", [dt.date(2026, 11, 30)]).fetchone()[0] == dt.date(2026, 11, 30)
    sql_params.execute(con, "CREATE TABLE c AS SELECT ? AS v", [3])  # CREATE ... AS cannot be prepared
    assert con.execute("SELECT v FROM c").fetchall() == [(3,)]


def test_errors_are_duckdbs_own() -> None:
    con = duckdb.connect()
    with pytest.raises(duckdb.InvalidInputException, match="excess parameters: b"):
        sql_params.execute(con, "SELECT $a", {"a": 1, "b": 2})
    with pytest.raises(duckdb.BinderException):
        sql_params.execute(con, "SELECT no_such_column + $a", {"a": 1})


def _export_without_nvtx(tmp_path):
    """The bundled sample export with its NVTX table dropped: these tests watch the parameters' path alone (the NVTX
    stream's own, pyarrow's, is tests/test_arrow_buffers.py's)."""
    import shutil
    import sqlite3

    export = tmp_path / "no_nvtx.sqlite"
    shutil.copy(REPO / "sample_traces" / "demo_training_step.sqlite", export)
    db = sqlite3.connect(export)
    db.execute("DROP TABLE NVTX_EVENTS")
    db.commit()
    db.close()
    return export


def test_a_cold_analyze_of_an_nsys_export_never_imports_pandas(tmp_path) -> None:
    """What the module is for: pandas (0.5 s) stays unimported on the nsys path, ingest and rules included.

    NVTX ranges, when an analysis loads them (tables under DEFER_MIN_ROWS always load: they name the causes of
    idle gaps), stream through Arrow, built from buffers so that pyarrow does not import pandas (checked in
    tests/test_arrow_buffers.py); the export here has none. The replay of the capture's steps, which this capture
    has, holds its operations as numpy columns (analysis/op_table.py): no step imports pandas."""
    export = _export_without_nvtx(tmp_path)
    script = (
        "import builtins, sys, traceback\n"
        "first = []\n"
        "real = builtins.__import__\n"
        "def watch(name, *args, **kwargs):\n"
        "    if name.split('.')[0] == 'pandas' and 'pandas' not in sys.modules and not first:\n"
        "        first.append(''.join(traceback.format_stack()))\n"
        "    return real(name, *args, **kwargs)\n"
        "builtins.__import__ = watch\n"
        "from nsight_advisor.cli import main\n"
        "try:\n"
        "    main(['analyze', sys.argv[1], '--no-cache', '-o', sys.argv[2], '--quiet'], standalone_mode=False)\n"
        "finally:\n"
        "    print(repr(first[0] if first else ''))\n"
    )
    out = subprocess.run([sys.executable, "-c", script, str(export), str(tmp_path / "report.html")], capture_output=True, text=True, cwd=tmp_path,
                         env={**os.environ, "PYTHONPATH": str(REPO), "NSIGHT_ADVISOR_CACHE": str(tmp_path / "cache")},
                         timeout=300)
    assert out.returncode == 0, out.stderr
    import ast

    stack = ast.literal_eval(out.stdout.strip().splitlines()[-1])  # where pandas was first imported ('' if never)
    assert not stack, stack
    assert (tmp_path / "report.html").stat().st_size > 10_000


def test_ingest_of_an_nsys_export_into_a_store_never_imports_pandas(tmp_path) -> None:
    """``ingest --store`` checks the store for the capture first: a Python-bound parameter there imported pandas
    (0.25 s, most of a small export's ingest), as DuckDB does on its first one. Checked in ``sys.modules`` at the
    end, which also sees an import made from DuckDB's C++ side."""
    from pandas_watch import pandas_after_ingest

    export = _export_without_nvtx(tmp_path)
    assert pandas_after_ingest(export, tmp_path) == "False"
    assert (tmp_path / "store.duckdb").stat().st_size > 0


def test_placeholders_are_written_only_where_they_are_placeholders() -> None:
    """The literals go into the statement's text: never into a comment, a string, a quoted name or a $$ string,
    and a negative number after a minus sign stays a number (``x --5`` would start a comment)."""
    con = duckdb.connect()
    row = sql_params.execute(con, 'SELECT 10 -? AS a, \'?\' AS b, "?" AS c, $$ ? $$ AS d -- ?\n'
                                  'FROM (SELECT 1 AS "?") /* ? */', [-5]).fetchone()
    assert row == (15, "?", 1, " ? ")
    named = sql_params.execute(con, "SELECT 10 -$v, '$v', $$ $v $$ -- $v\n", {"v": -7}).fetchone()
    assert named == (17, "$v", " $v ")


def test_placeholders_that_do_not_match_the_parameters_get_duckdbs_own_error() -> None:
    con = duckdb.connect()
    with pytest.raises(duckdb.Error):
        sql_params.execute(con, "SELECT ?, ?", [1])  # one value too few
    with pytest.raises(duckdb.Error):
        sql_params.execute(con, "SELECT ?", [1, 2])  # one too many
    with pytest.raises(duckdb.Error):
        sql_params.execute(con, "SELECT $a", {"b": 1})  # a name not given
