"""A PyTorch trace's event rows as Arrow (ingest/kineto/arrow_rows.py): the table pyarrow's own conversion of the
same rows gives, the same values refused, and no import of pandas.
"""

from __future__ import annotations

import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest

from nsight_advisor.ingest.kineto.arrow_rows import ColumnTypeError, rows_table

REPO = Path(__file__).resolve().parent.parent
FRACTION = pa.decimal128(38, 18)
TYPES = {"name": pa.string(), "occupancy": FRACTION, "ranks": pa.list_(pa.int64())}
COLUMNS = ("id", "name", "occupancy", "ranks")


def _pyarrows(rows: list[tuple]) -> pa.Table:
    """What the ingest built before: one struct array of the tuples, fractions as decimals cast to doubles."""
    struct = pa.struct([(c, TYPES.get(c, pa.int64())) for c in COLUMNS])
    table = pa.Table.from_struct_array(pa.array(rows, type=struct))
    return table.cast(pa.schema([(c, pa.float64() if TYPES.get(c) == FRACTION else TYPES.get(c, pa.int64()))
                                 for c in COLUMNS]))


def test_rows_give_the_table_pyarrow_gives():
    rows = [(1, "gemm<float, 128>", Decimal("0.125"), [0, 1, 2]),
            (None, None, None, None),
            (-(2 ** 63), "ünïcode &<>", 3, []),
            (2 ** 63 - 1, "", Decimal("33.3333333333333333"), (4, 5)),
            (Decimal("7"), "x", Decimal("1e-3"), [None, 6]),
            (Decimal("-5.5"), "y", Decimal("-2.75"), [1])]  # a fraction in a whole-number field: cut, as pyarrow cuts it
    assert rows_table(rows, COLUMNS, TYPES, FRACTION).equals(_pyarrows(rows))
    assert rows_table([], COLUMNS, TYPES, FRACTION).equals(_pyarrows([]))
    assert rows_table([(5, "a", 1, [1])] * 3, COLUMNS, TYPES, FRACTION).equals(_pyarrows([(5, "a", 1, [1])] * 3))


@pytest.mark.parametrize("column, value", [("id", True), ("id", "12"), ("id", 2 ** 63),
                                           ("name", 12), ("name", "lone \ud800 surrogate"), ("occupancy", "0.5"),
                                           ("occupancy", True),
                                           ("ranks", [True]), ("ranks", 3), ("ranks", ["0"])])
def test_a_value_pyarrow_refuses_is_refused_naming_its_column(column, value):
    row = dict(zip(COLUMNS, (1, "a", Decimal("0.5"), [0])))
    row[column] = value
    rows = [(2, "b", 1, [1]), tuple(row[c] for c in COLUMNS)]
    with pytest.raises((pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError, ValueError)):
        _pyarrows(rows)
    with pytest.raises(ColumnTypeError) as caught:
        rows_table(rows, COLUMNS, TYPES, FRACTION)
    assert caught.value.column == column


def test_building_a_table_does_not_import_pandas():
    script = ("import sys\n"
              "from decimal import Decimal\n"
              "import pyarrow as pa\n"
              "from nsight_advisor.ingest.kineto.arrow_rows import rows_table\n"
              "t = rows_table([(1, 'a', Decimal('0.5'), [1, 2]), (None, None, None, None)], ('id', 'name', 'f', 'r'),\n"
              "               {'name': pa.string(), 'f': pa.decimal128(38, 18), 'r': pa.list_(pa.int64())},\n"
              "               pa.decimal128(38, 18))\n"
              "print(t.num_rows, 'pandas' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["2", "False"]
