"""The operations of a step graph (analysis/step_graph.py) as columns: one numpy array per column, one entry per op.

The graph used to hold them in a pandas DataFrame. pandas takes 0.35 to 0.4 s to import on the machines we measure
on, more than the whole step model of a small capture (the 8 DLRM ranks' graph: 0.1 s), and no other step of a
cold ``analyze`` needs it. The graph's passes were already numpy over whole columns; what pandas did besides
(sorting on several keys, numbering groups, joining launches to their calls) is :func:`group_codes` and
``np.lexsort`` here. :meth:`OpTable.frame` gives the pandas view to whoever wants one (tests, notebooks).

Missing values are NaN in the integer columns that can miss one (:data:`NULLABLE`, float64: every id the store
holds is below 2**53) and None in ``name``, as a DataFrame of the same query held them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import duckdb
    import pandas as pd

#: Columns read as float64 with NaN for a missing value (a GPU operation has no thread; a host call no device or
#: stream).
NULLABLE = frozenset({"pid", "tid", "device_id", "stream_id", "correlation_id"})
#: A missing key in a sort or a grouping: after every real one, as pandas places NaN.
MISSING_LAST = 2 ** 62


class OpTable:
    """Columns of equal length, by name; ``table[name]`` is the numpy array itself (writes go to the table)."""

    def __init__(self, columns: dict[str, np.ndarray]) -> None:
        self._columns = dict(columns)
        lengths = {len(v) for v in self._columns.values()}
        if len(lengths) > 1:
            raise ValueError(f"columns of different lengths: {sorted(lengths)}")

    @classmethod
    def from_result(cls, result: duckdb.DuckDBPyConnection, drop: tuple[str, ...] = ()) -> OpTable:
        """The rows of a DuckDB result (``fetchnumpy``, which needs no pandas), less the columns ``drop``."""
        columns = {}
        for name, values in result.fetchnumpy().items():
            if name in drop:
                continue
            mask = np.ma.getmaskarray(values) if np.ma.isMaskedArray(values) else None
            if name in NULLABLE:
                data = np.asarray(np.ma.getdata(values), np.float64)
                columns[name] = np.where(mask, np.nan, data) if mask is not None else data
            elif values.dtype == object:
                data = np.asarray(np.ma.getdata(values), object)
                if mask is not None:
                    data = data.copy()
                    data[mask] = None
                columns[name] = data
            else:
                columns[name] = np.asarray(np.ma.getdata(values))
        return cls(columns)

    def __len__(self) -> int:
        return len(next(iter(self._columns.values()))) if self._columns else 0

    def __getitem__(self, name: str) -> np.ndarray:
        return self._columns[name]

    def __setitem__(self, name: str, values: np.ndarray) -> None:
        values = np.asarray(values)
        if self._columns and len(values) != len(self):
            raise ValueError(f"column {name!r}: {len(values)} values for {len(self)} rows")
        self._columns[name] = values

    def __contains__(self, name: object) -> bool:
        return name in self._columns

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, OpTable):
            return NotImplemented
        return list(self._columns) == list(other._columns) and all(
            a.dtype == b.dtype and _same(a, b) for a, b in zip(self._columns.values(), other._columns.values()))

    __hash__ = None  # mutable, compared by value

    @property
    def columns(self) -> list[str]:
        """The column names, in order."""
        return list(self._columns)

    def ints(self, name: str, missing: int = -1) -> np.ndarray:
        """Column ``name`` as int64, ``missing`` where it has no value."""
        values = self._columns[name]
        if values.dtype.kind == "f":
            return np.where(np.isnan(values), missing, values).astype(np.int64)
        return values.astype(np.int64, copy=False)

    def present(self, name: str) -> np.ndarray:
        """Whether each row has a value in column ``name``."""
        values = self._columns[name]
        if values.dtype.kind == "f":
            return ~np.isnan(values)
        if values.dtype == object:
            return np.fromiter((v is not None for v in values.tolist()), bool, len(values))
        return np.ones(len(values), bool)

    def row(self, i: int) -> dict[str, Any]:
        """Row ``i`` as plain Python values (None where missing; the integer columns as int)."""
        out = {}
        for name, values in self._columns.items():
            v = values[i].item() if isinstance(values[i], np.generic) else values[i]
            if isinstance(v, float) and name in NULLABLE:
                v = None if v != v else int(v)
            out[name] = v
        return out

    def frame(self) -> pd.DataFrame:
        """The table as a pandas DataFrame (a copy; imports pandas), indexed by op."""
        import pandas as pd

        return pd.DataFrame({name: values.copy() for name, values in self._columns.items()})


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    if a.shape != b.shape:
        return False
    if a.dtype.kind == "f":
        return bool(np.array_equal(a, b, equal_nan=True))
    return bool(np.array_equal(a, b)) if a.dtype != object else a.tolist() == b.tolist()


def group_codes(*keys: np.ndarray, appearance: bool = False) -> np.ndarray:
    """A code per row for the tuple of its ``keys`` (integer arrays of one length): equal tuples, equal codes;
    numbered in the tuples' sorted order, or with ``appearance`` in the order each tuple first appears (pandas'
    ``groupby(sort=False).ngroup()``)."""
    n = len(keys[0]) if keys else 0
    if n == 0:
        return np.zeros(0, np.int64)
    columns = [np.asarray(k, np.int64) for k in keys]
    order = np.lexsort(columns[::-1])  # stable: within a group, rows keep their order (np.unique(axis=0): 10x slower)
    fresh = runs_of(*(column[order] for column in columns))
    sorted_codes = np.cumsum(fresh) - 1
    if appearance:  # a group's first row in sorted order is its first row: number the groups by it
        first = order[fresh]
        rank = np.empty(len(first), np.int64)
        rank[np.argsort(first, kind="stable")] = np.arange(len(first))
        sorted_codes = rank[sorted_codes]
    codes = np.empty(n, np.int64)
    codes[order] = sorted_codes
    return codes


def runs_of(*keys: np.ndarray) -> np.ndarray:
    """Whether each row starts a new run of equal key tuples, ``keys`` (columns of one length) sorted so that
    equal tuples are adjacent."""
    n = len(keys[0]) if keys else 0
    fresh = np.zeros(n, bool)
    if n:
        fresh[0] = True
        for column in keys:
            fresh[1:] |= column[1:] != column[:-1]
    return fresh


__all__ = ["OpTable", "NULLABLE", "MISSING_LAST", "group_codes", "runs_of"]
