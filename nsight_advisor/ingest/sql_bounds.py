"""SQL that keeps a capture's arithmetic within 64 bits, without 128-bit arithmetic where it is not needed.

A capture is untrusted: a duration, a block count or a shared-memory total computed from its values may not fit
the store's column, and then the row is left out (a duration) or the value stored as NULL, never wrapped. DuckDB
checks that exactly through HUGEINT (``TRY_CAST(a::HUGEINT * b AS BIGINT)``), which costs several times the
plain arithmetic on every row: on the 1M-kernel export, the kernels' three products took 0.07 s of one core where
plain arithmetic takes 0.01, the duration check 0.02 s per 1.7M calls where it takes 0.003, and the deferred NVTX
table's span 0.1 of its 0.8 CPU-seconds (docs/performance.md, "Twenty-fourth pass"). Real values are far inside
the bounds, so each expression here takes the plain path where a range check proves the result fits and keeps the
128-bit one for the rest (a CASE evaluates each branch on its own rows only): the same values, row for row.

Every argument is a SQL expression; each is repeated in the result, so pass columns or cheap expressions.
"""

from __future__ import annotations

#: The largest BIGINT.
I64_MAX = 9223372036854775807


def difference_fits(end: str, start: str) -> str:
    """SQL, true where ``end - start`` fits a BIGINT, for rows with ``end >= start`` (check that beside it).

    Only a negative start can take the difference past 2^63 - 1: with ``start >= 0`` it is at most ``end``; with
    ``start < 0`` it fits exactly when ``end <= I64_MAX + start``, and that sum (``least`` keeps it from
    overflowing on the rows where start is not negative) always fits."""
    return f"({start} >= 0 OR {end} <= {I64_MAX} + least({start}, 0))"


def valid_span(start: str, end: str) -> str:
    """SQL, true where a row has a start, an end not before it and a duration within 64 bits: what every reader
    keeps of a timed table."""
    return f"{start} IS NOT NULL AND {end} IS NOT NULL AND {end} >= {start} AND {difference_fits(end, start)}"


def product_or_null(a: str, b: str, c: str, sql_type: str = "BIGINT") -> str:
    """SQL: ``a * b * c`` as ``sql_type`` (BIGINT or INTEGER), NULL where it does not fit (or a factor is NULL).

    The factors are 32-bit values (INT32_OR_NULL). Below these bounds the product cannot overflow: 2^21 cubed is
    2^63, and 1290 cubed is under 2^31 - 1; above them the 128-bit path decides."""
    bound = {"BIGINT": 2097151, "INTEGER": 1290}[sql_type]
    small = " AND ".join(f"{x} BETWEEN -{bound} AND {bound}" for x in (a, b, c))
    return (f"CASE WHEN {small} THEN ({a}::BIGINT * {b} * {c})::{sql_type} "
            f"ELSE TRY_CAST({a}::HUGEINT * {b} * {c} AS {sql_type}) END")


def sum_or_null(a: str, b: str) -> str:
    """SQL: ``a + b`` as a BIGINT, NULL where it does not fit (or either is NULL). Two values within 2^62 of zero
    cannot overflow; the rest take the 128-bit path."""
    small = " AND ".join(f"{x} BETWEEN -4611686018427387904 AND 4611686018427387903" for x in (a, b))
    return f"CASE WHEN {small} THEN {a} + {b} ELSE TRY_CAST({a}::HUGEINT + {b} AS BIGINT) END"


__all__ = ["I64_MAX", "difference_fits", "valid_span", "product_or_null", "sum_or_null"]
