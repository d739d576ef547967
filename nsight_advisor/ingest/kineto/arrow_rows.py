"""A batch of a trace's event rows (tuples) as an Arrow table, built from buffers, without importing pandas.

pyarrow's own conversion of Python values (``pa.array`` of a list, of tuples or of a numpy array) first checks
whether it was given a pandas object, and the check imports pandas: 0.35 to 0.4 s, a tenth of a cold ``analyze``
of the 8 DLRM ranks, which nothing else in it needs since the step graph holds numpy columns
(analysis/op_table.py). Here each column is converted by numpy (whole numbers, fractions) or written into Arrow's
buffers (text, lists), through nsight_advisor/ingest/arrow_buffers.py. The values are checked as pyarrow checked
them: a whole number is an ``int`` within 64 bits, never a ``bool`` (a ``Decimal`` is cut to its whole part, as
pyarrow cuts it); a text is a ``str``; a fraction an ``int`` or a ``Decimal``, stored as the nearest double; a list
holds whole numbers.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Sequence

import numpy as np
import pyarrow as pa

from nsight_advisor.ingest.arrow_buffers import float_array, int_array, int_list_array, string_array


class ColumnTypeError(ValueError):
    """A value of column ``column`` does not fit the column's type."""

    def __init__(self, column: str) -> None:
        super().__init__(column)
        self.column = column


def rows_table(rows: Sequence[tuple], columns: Sequence[str], types: dict[str, pa.DataType],
               fraction: pa.DataType) -> pa.Table:
    """``rows`` (tuples in ``columns`` order) as a table; each column of the type ``types`` gives it (else int64),
    a column typed ``fraction`` as float64. Raises :class:`ColumnTypeError` naming the first column that holds a
    value of another type."""
    values = list(zip(*rows)) if rows else [()] * len(columns)
    arrays = []
    for name, column in zip(columns, values):
        kind = types.get(name, pa.int64())
        try:
            if kind == fraction:
                arrays.append(_fractions(column))
            elif kind == pa.string():
                arrays.append(_texts(column))
            elif pa.types.is_list(kind):
                arrays.append(_int_lists(column))
            else:
                arrays.append(_ints(column))
        except (TypeError, ValueError, OverflowError, ArithmeticError):
            raise ColumnTypeError(name) from None
    return pa.Table.from_arrays(arrays, names=list(columns))


def _int_values(column: Sequence) -> tuple[np.ndarray, np.ndarray | None]:
    """Whole numbers (None: missing) as int64 and their validity (None when none is missing)."""
    kinds = set(map(type, column))
    if kinds <= {int}:
        return np.array(column, dtype=np.int64), None
    if not kinds <= {int, type(None), Decimal}:
        raise TypeError("not a whole number")
    if Decimal in kinds:  # 5.0 or 5.5 in a whole-number field: 5, as pyarrow reads it
        column = [int(v) if type(v) is Decimal else v for v in column]
    valid = np.fromiter((v is not None for v in column), bool, len(column))
    return np.array([0 if v is None else v for v in column], dtype=np.int64), valid


def _ints(column: Sequence) -> pa.Array:
    data, valid = _int_values(column)
    return int_array(data, pa.int64(), valid)


def _fractions(column: Sequence) -> pa.Array:
    kinds = set(map(type, column))
    if not kinds <= {int, type(None), Decimal}:
        raise TypeError("not a number")
    valid = np.fromiter((v is not None for v in column), bool, len(column)) if type(None) in kinds else None
    return float_array(np.array([0.0 if v is None else float(v) for v in column], dtype=np.float64), valid)


def _texts(column: Sequence) -> pa.Array:
    if not set(map(type, column)) <= {str, type(None)}:
        raise TypeError("not a text")
    return string_array(column)


def _int_lists(column: Sequence) -> pa.Array:
    """Lists (or tuples) of whole numbers, None: missing."""
    if not set(map(type, column)) <= {list, tuple, type(None)}:
        raise TypeError("not a list")
    lengths = np.fromiter((0 if v is None else len(v) for v in column), np.int64, len(column))
    data, item_valid = _int_values([x for v in column if v is not None for x in v])
    valid = np.fromiter((v is not None for v in column), bool, len(column))
    return int_list_array(lengths, int_array(data, pa.int64(), item_valid), valid)


__all__ = ["rows_table", "ColumnTypeError"]
