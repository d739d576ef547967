"""What the analysis made on one connection, copied to a second: its temp tables and temp views.

The analysis materializes its views as temp tables (nsight_advisor.analysis.accounting), and a temp table belongs
to the connection that made it: a plain second connection (``con.cursor()``) sees the store, not the analysis.
:func:`read_temp` copies each temp table into an in-memory database attached to the instance (:data:`TRANSFER`:
attached databases are the instance's, seen by every connection) and reads each temp view's SQL; :func:`write_temp`
makes them on the second connection (each table with its column types declared as they are, filled from its copy,
which it then drops), so the same query gives the same rows on either; :func:`release` detaches the transfer
database. DuckDB copies the rows itself: the copy went through Arrow before, and on an Nsight Systems export,
whose run imports neither Arrow nor numpy otherwise, their import (0.1 to 0.15 s) cost more than the second
connection saved. A copy is only worth making of a small store's analysis, whose tables are a few thousand rows
(nsight_advisor.engine.two_connections makes it).

The settings an analysis changes are the instance's (threads, optimizers, memory, external access), shared by both
connections, except ``enable_progress_bar``, which is the connection's and is copied.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

from nsight_advisor.common.sql_params import literal, quote_ident

if TYPE_CHECKING:
    import duckdb

#: Settings kept per connection that the analysis sets.
LOCAL_SETTINGS = ("enable_progress_bar",)
#: The in-memory database the copies go through (read-write, as an instance opened read-only requires it said).
TRANSFER = "_na_twin"


@dataclass
class TempState:
    """What :func:`write_temp` makes on a connection, read from another by :func:`read_temp`: local settings, each
    temp table's name, columns and the name of its copy in :data:`TRANSFER`, and temp views' SQL."""

    settings: list[tuple[str, Any]]
    tables: list[tuple[str, list[tuple[str, str]], str]]
    views: list[str]


def read_temp(con: duckdb.DuckDBPyConnection, tables: Sequence[str] | None = None) -> TempState:
    """``con``'s temp tables and views and its local settings (a few ms a table for a small store's); with
    ``tables``, only those tables (no view, no setting)."""
    whole = tables is None
    settings = [(name, con.execute(f"select current_setting('{name}')").fetchone()[0])
                for name in LOCAL_SETTINGS] if whole else []
    copied = []
    con.execute(f"attach if not exists ':memory:' as {TRANSFER} (read_only false)")
    tag = uuid.uuid4().hex[:8]  # the two connections may copy at once (the lead's tables come back from the twin)
    for table in (_temp_tables(con) if whole else tables):
        name = quote_ident(table)
        # the table's own columns (duckdb_columns() would bind every view of the store to list theirs: 0.3 s)
        columns = [(r[0], r[1]) for r in con.execute(f"describe temp.main.{name}").fetchall()]
        copy = f"{table}_{tag}"
        con.execute(f"create table {TRANSFER}.main.{quote_ident(copy)} as select * from temp.main.{name}")
        copied.append((table, columns, copy))
    return TempState(settings, copied, _temp_views(con) if whole else [])


def write_temp(con: duckdb.DuckDBPyConnection, state: TempState) -> None:
    """Make ``state``'s temp tables and views on ``con`` (which may be done on another thread than the one that
    read ``state``: it uses ``con`` alone)."""
    for name, value in state.settings:
        con.execute(f"set {name} = {literal(value)}")
    for table, columns, copy in state.tables:
        name, copied = quote_ident(table), f"{TRANSFER}.main.{quote_ident(copy)}"
        con.execute(f"create or replace temp table {name} (" + ", ".join(f"{quote_ident(c)} {t}" for c, t in columns)
                    + ")")
        con.execute(f"insert into {name} select * from {copied}")
        con.execute(f"drop table {copied}")
    for sql in state.views:
        con.execute(sql)


def release(con: duckdb.DuckDBPyConnection) -> None:
    """Detach :data:`TRANSFER` (and any copy not written) from ``con``'s instance, once no connection copies."""
    con.execute(f"detach database if exists {TRANSFER}")


def _temp_tables(con) -> list[str]:
    return [r[0] for r in con.execute("select table_name from duckdb_tables() "
                                      "where temporary and not internal order by table_oid").fetchall()]


def _temp_views(con) -> list[str]:
    """The temp views' own SQL, in the order they were made (a view may read one made before it)."""
    return [r[0] for r in con.execute("select sql from duckdb_views() "
                                      "where temporary and not internal order by view_oid").fetchall()]
