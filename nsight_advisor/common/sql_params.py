"""Run a statement with its parameters written as SQL literals (PREPARE, then EXECUTE), not bound from Python.

Why: the first time a statement gets Python parameters, DuckDB's Python package imports pandas to check their
types. That is 0.5 s of every cold ``analyze`` of an Nsight Systems export, which needs pandas for nothing else
(found with an import trap, measured with ``python -X importtime``). A full ``ingest`` loads pandas anyway: DuckDB
scans the NVTX stream's Arrow batches through ``pyarrow.dataset``, which imports it. A literal gets the type DuckDB
gives the same Python value: int -> INTEGER or BIGINT by size, float -> DOUBLE, str -> VARCHAR, bool -> BOOLEAN,
None -> NULL, a list -> a LIST (tests/test_sql_params.py compares the two). Values of any other type, and
statements DuckDB cannot PREPARE, go through the ordinary binding.
"""

from __future__ import annotations

import datetime as dt
import math
from typing import TYPE_CHECKING, Any, Mapping, Sequence

if TYPE_CHECKING:  # imported where a statement runs: the warm `analyze` path loads this module without duckdb
    import duckdb

#: The one prepared-statement name used per connection: each PREPARE replaces the one before, and no
#: DEALLOCATE follows the EXECUTE (a new statement would close the EXECUTE's result).
_STATEMENT = "_nsight_advisor_bound"

_INT64 = (-(2 ** 63), 2 ** 63 - 1)
_TYPE_OF_MINIMUM = {-(2 ** 31): "INTEGER", -(2 ** 63): "BIGINT"}


class _NotLiteral(Exception):
    """A value this module does not write as a literal."""


def literal(value: Any) -> str:
    """``value`` as a SQL literal of the type DuckDB's Python binding would give it."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        if not _INT64[0] <= value <= _INT64[1]:
            raise _NotLiteral(value)
        if value in _TYPE_OF_MINIMUM:  # SQL reads -N as -(N), and N is one type too wide
            return f"CAST('{value}' AS {_TYPE_OF_MINIMUM[value]})"
        return str(value)
    if isinstance(value, float):
        text = "nan" if math.isnan(value) else repr(value)
        return f"CAST('{text}' AS DOUBLE)"
    if isinstance(value, str):
        # NUL cannot appear inside a SQL string literal: spliced in with chr(0)
        parts = ["'" + part.replace("'", "''") + "'" for part in value.split("\0")]
        return " || chr(0) || ".join(parts)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(literal(v) for v in value) + "]"
    if isinstance(value, dt.datetime) and value.tzinfo is None:
        return f"TIMESTAMP '{value.isoformat(sep=' ')}'"
    raise _NotLiteral(value)


def execute(con: duckdb.DuckDBPyConnection, sql: str,
            params: Sequence[Any] | Mapping[str, Any] | None = None) -> duckdb.DuckDBPyConnection:
    """``con.execute(sql, params)``, with ``params`` (``?`` in order, or ``$name`` by name) as literals."""
    import duckdb

    if not params:
        return con.execute(sql)
    try:
        if isinstance(params, Mapping):
            args = ", ".join(f'"{name}" := {literal(value)}' for name, value in params.items())
        else:
            args = ", ".join(literal(value) for value in params)
    except _NotLiteral:
        return con.execute(sql, params)
    try:
        con.execute(f"PREPARE {_STATEMENT} AS {sql}")
    except duckdb.ParserException:  # not a statement DuckDB prepares (CREATE ... AS): bind it as usual
        return con.execute(sql, params)
    return con.execute(f"EXECUTE {_STATEMENT}({args})")
