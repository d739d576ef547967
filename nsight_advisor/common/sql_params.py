"""Run a statement with its parameters written into it as SQL literals, not bound from Python.

Why: the first time a statement gets Python parameters, DuckDB's Python package imports pandas to check their
types. That is 0.5 s of every cold ``analyze`` of an Nsight Systems export, which needs pandas for nothing else
(found with an import trap, measured with ``python -X importtime``). An export with NVTX ranges loads pandas
anyway: pyarrow imports it the first time it builds an array (the ranges' depth walk). A literal gets the type DuckDB
gives the same Python value: int -> INTEGER or BIGINT by size, float -> DOUBLE, str -> VARCHAR, bool -> BOOLEAN,
None -> NULL, a list -> a LIST (tests/test_sql_params.py compares the two). Values of any other type, and
placeholders that do not match the parameters given (DuckDB then says what is wrong), go through the ordinary
binding.

The literals are written into the statement's text (``?`` in order, ``$name`` by name; never inside a comment, a
string or a quoted name), not passed to a PREPARE and EXECUTE of it: that bound the statement twice, a quarter of
the rules' time on a small capture (docs/performance.md).
"""

from __future__ import annotations

import datetime as dt
import math
import re
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

if TYPE_CHECKING:  # imported where a statement runs: the warm `analyze` path loads this module without duckdb
    import duckdb

#: What a placeholder is never looked for in: comments, string literals ('...', $$...$$) and quoted names.
SQL_SKIP = re.compile(r"--[^\n]*|/\*.*?\*/|'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|\$\$.*?\$\$", re.S)
_PLACEHOLDER = re.compile(r"\?|\$([A-Za-z_][A-Za-z0-9_]*)")

_INT64 = (-(2 ** 63), 2 ** 63 - 1)
_TYPE_OF_MINIMUM = {-(2 ** 31): "INTEGER", -(2 ** 63): "BIGINT"}


class _NotLiteral(Exception):
    """A value this module does not write as a literal."""


def quote_ident(name: str) -> str:
    """``name`` as a quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


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


def values(rows: Iterable[Sequence[Any]]) -> str:
    """``VALUES (...), (...)`` of ``rows``, each value a :func:`literal`: many rows in one INSERT."""
    return "VALUES " + ", ".join("(" + ", ".join(literal(v) for v in row) + ")" for row in rows)


def execute(con: duckdb.DuckDBPyConnection, sql: str,
            params: Sequence[Any] | Mapping[str, Any] | None = None) -> duckdb.DuckDBPyConnection:
    """``con.execute(sql, params)``, with ``params`` (``?`` in order, or ``$name`` by name) as literals."""
    if not params:
        return con.execute(sql)
    try:
        text = inline(sql, params)
    except _NotLiteral:
        return con.execute(sql, params)
    return con.execute(text)


def inline(sql: str, params: Sequence[Any] | Mapping[str, Any]) -> str:
    """``sql`` with each placeholder outside comments, strings and quoted names replaced by its value's
    :func:`literal`; _NotLiteral when a value has none, or the placeholders and ``params`` do not match (a ``?``
    too many or too few, a ``$name`` not given, a name given but not used)."""
    named = isinstance(params, Mapping)
    values = list(params) if not named else None
    used: set[str] = set()
    position = 0

    def one(match: re.Match) -> str:
        nonlocal position
        if match.group(0) == "?":
            if named or position >= len(values):
                raise _NotLiteral(match.group(0))
            position += 1
            return _operand(values[position - 1])
        name = match.group(1)
        if not named or name not in params:
            raise _NotLiteral(name)
        used.add(name)
        return _operand(params[name])

    text = sub_outside_literals(_PLACEHOLDER, one, sql)
    if (named and used != set(params)) or (not named and position != len(values)):
        raise _NotLiteral(params)
    return text


def sub_outside_literals(pattern: re.Pattern, repl, sql: str) -> str:
    """``pattern.sub(repl, ...)`` over the parts of ``sql`` outside :data:`SQL_SKIP` (comments, strings, quoted
    names), in order; those parts are kept as they are."""
    out, pos = [], 0
    for m in SQL_SKIP.finditer(sql):
        out.append(pattern.sub(repl, sql[pos:m.start()]))
        out.append(m.group(0))
        pos = m.end()
    out.append(pattern.sub(repl, sql[pos:]))
    return "".join(out)


def _operand(value: Any) -> str:
    """:func:`literal`, in parentheses where it is more than one token (a negative number after a '-' would
    start a comment; a string with a NUL is a concatenation that a cast after it must take whole)."""
    text = literal(value)
    return f"({text})" if text.startswith("-") or " || " in text else text
