"""The ingests' 64-bit bounds without 128-bit arithmetic (nsight_advisor/ingest/sql_bounds.py) give what the
128-bit expressions they replace give, on every value: the plain path where a range check proves the result fits,
the 128-bit one elsewhere."""

from __future__ import annotations

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nsight_advisor.ingest.sql_bounds import I64_MAX, difference_fits, product_or_null, sum_or_null

I64 = st.integers(-I64_MAX - 1, I64_MAX)
I32 = st.integers(-2**31, 2**31 - 1)
# values near each bound the fast paths test, and the extremes
EDGES = [0, 1, -1, 1290, 1291, -1290, -1291, 2097151, 2097152, -2097152, 2**31 - 1, -2**31, 2**62, -2**62,
         2**62 - 1, -2**62 - 1, I64_MAX, -I64_MAX - 1]


@pytest.fixture(scope="module")
def con():
    c = duckdb.connect()
    yield c
    c.close()


def _both(con, ours: str, reference: str, names: list[str], rows: list[tuple]) -> None:
    cols = ", ".join(f"{n} BIGINT" for n in names)
    con.execute(f"CREATE OR REPLACE TEMP TABLE t ({cols})")
    con.executemany(f"INSERT INTO t VALUES ({', '.join('?' * len(names))})", rows)
    got = con.execute(f"SELECT {ours}, {reference} FROM t").fetchall()
    assert [a for a, _ in got] == [b for _, b in got], list(zip(rows, got))


def _difference(con, rows):
    # as the ingest uses it: beside end >= start
    _both(con, f"e >= s AND {difference_fits('e', 's')}",
          "e >= s AND TRY_CAST(e::HUGEINT - s AS BIGINT) IS NOT NULL", ["e", "s"], rows)


def test_difference_fits_at_the_edges(con):
    _difference(con, [(e, s) for e in EDGES for s in EDGES])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(I64, I64), min_size=1, max_size=20))
def test_difference_fits_anywhere(con, rows):
    _difference(con, rows)


@pytest.mark.parametrize("sql_type", ["BIGINT", "INTEGER"])
def test_product_at_the_edges(con, sql_type):
    edges = [v for v in EDGES if -2**31 <= v < 2**31] + [None]
    rows = [(a, b, c) for a in edges for b in edges for c in edges]
    _both(con, product_or_null("a", "b", "c", sql_type), f"TRY_CAST(a::HUGEINT * b * c AS {sql_type})",
          ["a", "b", "c"], rows)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(I32, I32, I32), min_size=1, max_size=20), st.sampled_from(["BIGINT", "INTEGER"]))
def test_product_anywhere(con, rows, sql_type):
    _both(con, product_or_null("a", "b", "c", sql_type), f"TRY_CAST(a::HUGEINT * b * c AS {sql_type})",
          ["a", "b", "c"], rows)


def test_sum_at_the_edges(con):
    rows = [(a, b) for a in [*EDGES, None] for b in [*EDGES, None]]
    _both(con, sum_or_null("a", "b"), "TRY_CAST(a::HUGEINT + b AS BIGINT)", ["a", "b"], rows)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(I64, I64), min_size=1, max_size=20))
def test_sum_anywhere(con, rows):
    _both(con, sum_or_null("a", "b"), "TRY_CAST(a::HUGEINT + b AS BIGINT)", ["a", "b"], rows)
