"""Arrow arrays to and from numpy through their buffers, and Arrow scalars, without importing pandas.

pyarrow checks whether a Python value it is given is a pandas object, and the check imports pandas: ``pa.scalar``,
``pa.array`` (of a list or of a numpy array), ``Array.to_numpy`` and any compute function given a Python value
(``pc.equal(column, 59)``, ``pc.fill_null(mask, False)``) cost an Nsight Systems export's ingest 0.3 s of pandas
import, which nothing else in an analysis without steps needs (docs/performance.md, fourteenth pass). Arrays built
from buffers (``pa.Array.from_buffers``) and compute functions given only arrays do not check, so the NVTX stream
goes through these.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pyarrow as pa

# pyarrow.compute is imported where it is used: its import (40 to 55 ms) is a tenth of a PyTorch trace's whole ingest,
# which needs none of it


def _validity(valid: np.ndarray | None) -> pa.Buffer | None:
    """An Arrow validity bitmap (bit set: a value) of a boolean numpy array; None when every value is valid."""
    if valid is None or valid.all():
        return None
    return pa.py_buffer(np.packbits(valid, bitorder="little"))


def int_array(values: np.ndarray, type: pa.DataType, valid: np.ndarray | None = None) -> pa.Array:
    """``values`` as an Arrow integer array of ``type`` (numpy's matching dtype), NULL where ``valid`` is False."""
    data = np.ascontiguousarray(values, dtype=_numpy_int(type))
    return pa.Array.from_buffers(type, len(data), [_validity(valid), pa.py_buffer(data)])


def float_array(values: np.ndarray, valid: np.ndarray | None = None) -> pa.Array:
    """``values`` as an Arrow float64 array, NULL where ``valid`` is False."""
    data = np.ascontiguousarray(values, dtype=np.float64)
    return pa.Array.from_buffers(pa.float64(), len(data), [_validity(valid), pa.py_buffer(data)])


def int_list_array(lengths: np.ndarray, items: pa.Array, valid: np.ndarray | None = None) -> pa.Array:
    """Lists of ``items`` (an int64 array, the lists' items one after another), list i holding ``lengths[i]`` of
    them; NULL where ``valid`` is False (such a list's length is 0)."""
    offsets = np.zeros(len(lengths) + 1, np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return pa.Array.from_buffers(pa.list_(pa.int64()), len(lengths), [_validity(valid), pa.py_buffer(offsets)],
                                 children=[items])


def bool_array(values: np.ndarray) -> pa.Array:
    """A boolean numpy array as an Arrow boolean array (bits, no NULL)."""
    values = np.asarray(values, dtype=bool)
    return pa.Array.from_buffers(pa.bool_(), len(values), [None, pa.py_buffer(np.packbits(values, bitorder="little"))])


def string_array(values: Sequence[str | None]) -> pa.Array:
    """Python strings (None: NULL) as an Arrow string array."""
    encoded = [b"" if v is None else v.encode("utf-8") for v in values]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(b) for b in encoded], out=offsets[1:])
    if offsets[-1] >= 2**31:
        raise ValueError("strings of 2 GiB or more in one array")
    valid = np.array([v is not None for v in values], dtype=bool)
    return pa.Array.from_buffers(pa.string(), len(encoded), [_validity(valid), pa.py_buffer(offsets.astype(np.int32)),
                                                             pa.py_buffer(b"".join(encoded))])


def scalar(value: int, type: pa.DataType) -> pa.Scalar:
    """An integer as an Arrow scalar of ``type``: compute functions take it as a Python int would be taken."""
    return int_array(np.array([value]), type)[0]


def false_for_null(mask: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """A boolean mask with NULL read as False (``pc.fill_null(mask, False)``, without the Python value)."""
    import pyarrow.compute as pc

    return pc.and_kleene(mask, pc.is_valid(mask))


#: At most this many runs of rows are cut out as slices by :func:`rows_where`; more go through Arrow's filter.
MAX_RUNS = 64


def rows_where(table: pa.Table, keep: np.ndarray, copy: bool = False) -> pa.Table:
    """The rows of ``table`` where the numpy booleans ``keep`` hold, in order: its runs of kept rows as slices,
    without pyarrow.compute (``Table.filter`` imports it) where they are few (:data:`MAX_RUNS`). ``copy``: the
    rows in buffers of their own, as a filter leaves them (a slice holds all of its table's buffers alive)."""
    edges = np.flatnonzero(np.diff(np.concatenate(([False], keep, [False])).astype(np.int8)))
    runs = list(zip(edges[0::2].tolist(), edges[1::2].tolist()))
    if len(runs) > MAX_RUNS:
        return table.filter(bool_array(keep))
    if len(runs) == 1 and not copy:
        return table.slice(runs[0][0], runs[0][1] - runs[0][0])
    out = pa.concat_tables([table.slice(a, b - a) for a, b in runs] or [table.slice(0, 0)])
    if copy:
        out = pa.Table.from_arrays([pa.concat_arrays(column.chunks) if column.num_chunks else column
                                    for column in out.columns], schema=out.schema)
    return out


def longest_at_most(column: pa.Array | pa.ChunkedArray, limit: int) -> bool:
    """Whether no string of ``column`` has more than ``limit`` characters. A string's UTF-8 bytes bound its
    characters: they are read from the offsets, and the characters counted only where some string has more bytes."""
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    for chunk in chunks:
        if not len(chunk):
            continue
        width = {pa.string(): np.int32, pa.large_string(): np.int64}.get(chunk.type)
        if width is not None:
            offsets = np.frombuffer(chunk.buffers()[1], dtype=width)[chunk.offset:chunk.offset + len(chunk) + 1]
            if int(np.diff(offsets).max()) <= limit:
                continue
        import pyarrow.compute as pc

        if (pc.max(pc.utf8_length(chunk)).as_py() or 0) > limit:
            return False
    return True


def ints(column: pa.Array | pa.ChunkedArray, dtype=np.int64) -> np.ndarray:
    """An integer column's values as numpy ``dtype``; a NULL's slot holds whatever its buffer holds (callers read
    only rows they know to be set)."""
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    parts = [np.frombuffer(chunk.buffers()[1], dtype=_numpy_int(chunk.type))[chunk.offset:chunk.offset + len(chunk)]
             for chunk in chunks if len(chunk)]
    return np.concatenate(parts).astype(dtype, copy=False) if parts else np.zeros(0, dtype=dtype)


def bools(column: pa.ChunkedArray) -> np.ndarray:
    """A BOOLEAN column as numpy, NULL as False: its value and validity bits unpacked directly, not through
    ``to_numpy`` (20 ms per 250k rows, a fifth of the NVTX depth walk) or pyarrow.compute (whose import is a tenth
    of a PyTorch trace's ingest)."""
    parts = [_bits(chunk, 1) & _bits(chunk, 0) for chunk in column.chunks if len(chunk)]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=bool)


def _bits(chunk: pa.Array, buffer: int) -> np.ndarray:
    """Buffer ``buffer`` of a BOOLEAN chunk (0: which rows are set, 1: the values) as numpy booleans; all True
    where the chunk has no validity buffer (no NULL)."""
    bits = chunk.buffers()[buffer]
    if bits is None:
        return np.ones(len(chunk), dtype=bool)
    return np.unpackbits(np.frombuffer(bits, np.uint8), bitorder="little")[
        chunk.offset:chunk.offset + len(chunk)].view(bool)


def _numpy_int(type: pa.DataType) -> np.dtype:
    if not pa.types.is_integer(type):
        raise TypeError(f"not an integer type: {type}")
    return np.dtype(f"{'i' if pa.types.is_signed_integer(type) else 'u'}{type.bit_width // 8}")


__all__ = ["int_array", "float_array", "int_list_array", "bool_array", "string_array", "scalar", "false_for_null",
           "longest_at_most", "rows_where", "ints", "bools"]
