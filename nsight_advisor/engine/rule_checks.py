"""What every rule asks of a store before its query runs, asked once per analysis instead of once per rule and capture.

Before a rule's query runs on a capture the runner checks its requirements (a table with rows for the capture, an
Nsight Compute metric, a GPU metric), whether its kernels name their GPU, and that the query is one SELECT. Asked
per rule and capture, those checks were most of the queries of a many-rank analysis (24 rules x 8 ranks: about
800 small queries beside the 192 rule queries); here each is one query over all captures, kept for the analysis.
The answers are the same as the per-capture queries': the store does not change while an analysis runs.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Sequence

import duckdb

from nsight_advisor.common import sql_params


class RuleChecks:
    """Answers, kept for one analysis of ``capture_ids`` on ``con``, to the questions the runner asks per rule.

    An answer that raised (a required table that does not exist) is kept as its error and raised again each time.
    """

    def __init__(self, con: duckdb.DuckDBPyConnection, capture_ids: Sequence[int]) -> None:
        self.con = con
        self.ids = [int(c) for c in capture_ids]
        self._present: dict[tuple[str, str], set[int] | duckdb.Error] = {}
        self._views: dict[str, str] | None = None
        self._kernels: dict[int, tuple[int, int]] | None = None
        self._selects: dict[str, str | Exception] = {}
        self._reads: dict[tuple[str, str], bool] = {}
        self._reach: dict[str, set[str]] = {}
        self._missing: dict[tuple[int, str], str] | None = None

    def present(self, kind: str, value: str, capture_id: int) -> bool:
        """True when the capture has rows for a requirement (``kind``: table, metric or gpu_metric).

        Raises the store's duckdb.Error when the requirement cannot be checked (no such table)."""
        key = (kind, value)
        if key not in self._present:
            self._present[key] = self._ask(kind, value)
        found = self._present[key]
        if isinstance(found, duckdb.Error):
            raise found
        if capture_id not in self.ids:  # a capture outside this analysis: asked on its own, not kept
            return capture_id in self._ask(kind, value, [capture_id])
        return capture_id in found

    def _ask(self, kind: str, value: str, ids: list[int] | None = None) -> set[int] | duckdb.Error:
        ids = self.ids if ids is None else ids
        if kind == "table":
            sql, args = (f"select distinct capture_id from {_rows_of(value)} "
                         "where capture_id in (select unnest(?::integer[]))", [ids])
        elif kind == "metric":
            sql, args = ("select distinct capture_id from ncu_metrics where metric = ? "
                         "and capture_id in (select unnest(?::integer[]))", [value, ids])
        else:
            sql, args = ("select distinct capture_id from gpu_metrics where metric = ? "
                         "and capture_id in (select unnest(?::integer[]))", [value, ids])
        try:
            return {int(r[0]) for r in sql_params.execute(self.con, sql, args).fetchall()}
        except duckdb.Error as exc:
            return exc

    def views(self) -> dict[str, str]:
        """The store's views (and this connection's temp views) by name, with their SQL."""
        if self._views is None:
            self._views = dict(self.con.execute(
                "SELECT view_name, sql FROM duckdb_views() WHERE NOT internal").fetchall())
        return self._views

    def reads_table(self, sql: str, table: str) -> bool:
        """True when ``sql`` names ``table``, itself or in the definition of a view it reads (transitively)."""
        key = (sql, table)
        if key not in self._reads:
            self._reads[key] = reads_table(sql, table, self.views(), self._reach)
        return self._reads[key]

    def kernel_devices(self, capture_id: int) -> tuple[int, int]:
        """(kernels, kernels naming their GPU) of a capture."""
        if self._kernels is None:
            rows = sql_params.execute(
                self.con, "SELECT capture_id, count(*), count(device_id) FROM kernel_rows "
                "WHERE capture_id in (select unnest(?::integer[])) GROUP BY capture_id", [self.ids]).fetchall()
            self._kernels = {int(c): (int(n), int(d)) for c, n, d in rows}
        if capture_id not in self.ids:
            row = sql_params.execute(self.con, "SELECT count(*), count(device_id) FROM kernel_rows WHERE capture_id = ?",
                                     [capture_id]).fetchone()
            return int(row[0]), int(row[1])
        return self._kernels.get(capture_id, (0, 0))

    def missing_note(self, capture_id: int, data: str) -> str:
        """Why the capture lacks ``data``, as its reader recorded it (``capture_missing``); "" when it did not say.
        The table is read once, for all captures (a skipped rule asks once per capture)."""
        if capture_id not in self.ids:  # a capture outside this analysis: asked on its own, not kept
            return self._ask_missing([capture_id]).get((capture_id, data), "")
        if self._missing is None:
            self._missing = self._ask_missing(self.ids)
        return self._missing.get((capture_id, data), "")

    def _ask_missing(self, ids: list[int]) -> dict[tuple[int, str], str]:
        try:
            rows = sql_params.execute(self.con, """
                select capture_id, data, reason from capture_missing
                where capture_id in (select unnest(?::integer[])) and reason is not null and reason <> ''
                order by all""", [ids]).fetchall()
        except duckdb.Error:
            return {}
        out: dict[tuple[int, str], str] = {}
        for cid, what, reason in rows:
            out.setdefault((int(cid), what), reason)
        return out

    def single_select(self, sql: str, check) -> str:
        """``check(con, sql)`` once per query text: its result, or its error raised again."""
        if sql not in self._selects:
            try:
                self._selects[sql] = check(self.con, sql)
            except Exception as exc:  # the runner's RuleRunError: kept and raised for every capture
                self._selects[sql] = exc
        kept = self._selects[sql]
        if isinstance(kept, Exception):
            raise kept
        return kept


def reads_table(sql: str, table: str, views: dict[str, str], reach: dict[str, set[str]] | None = None) -> bool:
    """True when ``sql`` names ``table``, itself or in the definition of a view it reads (transitively).

    ``reach``: what each view reaches, kept between calls over the same ``views``."""
    words = _words(sql)
    if table in words:
        return True
    reach = {} if reach is None else reach
    return any(table in _reach(view, views, reach) for view in words & views.keys())


@lru_cache(maxsize=1024)
def _words(sql: str) -> frozenset[str]:
    return frozenset(re.findall(r"[a-z_][a-z0-9_]*", sql.lower()))


def _reach(view: str, views: dict[str, str], cache: dict[str, set[str]]) -> set[str]:
    """Every name the definition of ``view`` reads, through the views it reads (transitively)."""
    if view not in cache:
        seen, pending, names = {view}, [view], set()
        while pending:
            words = _words(views[pending.pop()])
            names |= words
            for other in (words & views.keys()) - seen:
                seen.add(other)
                pending.append(other)
        cache[view] = names
    return cache[view]


def shared_reads(rules, checks: RuleChecks, n_captures: int) -> list[str]:
    """The shared analysis views (nsight_advisor.analysis.shared_views) that more than one rule run will read:
    worth materializing once. Read from the views' definitions as they are before any is materialized."""
    from nsight_advisor.analysis.shared_views import SHARED_VIEWS

    return [view for view in SHARED_VIEWS
            if n_captures * sum(checks.reads_table(rule.query, view) for rule in rules) >= 2]


def _rows_of(table: str) -> str:
    """Where ``table``'s rows lie: a stored table read through a view of its rows and their names (``kernels``)
    is asked through the rows alone, whose count and captures are the view's (1M kernels: the view's three name
    joins cost 30 ms a question)."""
    from nsight_advisor.schema.tables import get_table

    try:
        return get_table(table).rows_in or table
    except KeyError:  # an analysis view
        return table
