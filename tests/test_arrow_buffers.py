"""Arrow arrays through their buffers (ingest/arrow_buffers.py): the same arrays and values pyarrow's own
constructors give, without the import of pandas they make; and an nsys export's NVTX ranges ingested without it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from nsight_advisor.ingest.arrow_buffers import (MAX_RUNS, bool_array, bools, false_for_null, float_array,
                                                 int_array, int_list_array, ints, longest_at_most, rows_where, scalar,
                                                 string_array)
from pandas_watch import pandas_after, pandas_after_ingest

REPO = Path(__file__).resolve().parent.parent
TRACES = REPO.parent / "shared" / "traces"


@pytest.mark.parametrize("type_", [pa.int64(), pa.int32(), pa.uint32(), pa.int8()])
def test_integer_arrays_equal_pyarrows(type_):
    values = np.array([0, 5, 7, 1, 120, 3])
    valid = np.array([True, False, True, True, False, True])
    assert int_array(values, type_, valid).equals(pa.array(values, type=type_, mask=~valid))
    assert int_array(values, type_).equals(pa.array(values, type=type_))
    assert int_array(values, type_, np.ones(6, bool)).null_count == 0


def test_bool_and_string_arrays_equal_pyarrows():
    flags = np.array([True, False, False, True, True, False, True, True, True])  # more than a byte of bits
    assert bool_array(flags).equals(pa.array(flags))
    words = ["a", None, "", "drei <&>", "ünïcode", None]
    assert string_array(words).equals(pa.array(words, type=pa.string()))
    assert string_array([]).equals(pa.array([], type=pa.string()))


def test_float_and_list_arrays_equal_pyarrows():
    values = np.array([0.5, 2.0, -1.25, 0.0])
    valid = np.array([True, False, True, True])
    assert float_array(values, valid).equals(pa.array(values, type=pa.float64(), mask=~valid))
    lists = [[1, 2], None, [], [3]]
    items = int_array(np.array([1, 2, 3]), pa.int64())
    got = int_list_array(np.array([2, 0, 0, 1]), items, np.array([True, False, True, True]))
    assert got.equals(pa.array(lists, type=pa.list_(pa.int64())))


def test_scalars_and_null_masks_compare_as_python_values_do():
    column = pa.array([59, 75, None, 59], type=pa.int32())
    assert pc.equal(column, scalar(59, pa.int32())).equals(pc.equal(column, 59))
    mask = pc.equal(column, 59)
    assert false_for_null(mask).equals(pc.fill_null(mask, False))
    chunked = pa.chunked_array([mask, mask.slice(1)])
    assert false_for_null(chunked).equals(pc.fill_null(chunked, False))


def test_rows_where_keeps_the_rows_a_filter_keeps():
    rng = np.random.default_rng(7)
    for n in (0, 1, 9, 300):
        table = pa.table({"a": np.arange(n), "b": [f"r{i}" for i in range(n)]})
        table = pa.concat_tables([table.slice(0, n // 3), table.slice(n // 3)])  # two chunks a column
        for share in (0.0, 0.02, 0.5, 1.0):  # no run, a few runs, more than MAX_RUNS, one run
            keep = rng.random(n) < share
            for copy in (False, True):
                got = rows_where(table, keep, copy=copy)
                assert got.equals(table.filter(pa.array(keep))), (n, share, copy)
                if copy and got.num_rows and len(np.flatnonzero(np.diff(keep.astype(int)))) < MAX_RUNS:
                    # rows of its own: none of the table's buffers held
                    assert all(c.num_chunks == 1 and c.chunk(0).offset == 0 for c in got.columns)


def test_longest_at_most_counts_characters_not_bytes():
    words = pa.array(["abc", None, "ééé", ""], type=pa.string())  # "ééé": 3 characters in 6 bytes
    assert longest_at_most(words, 3)
    assert not longest_at_most(words, 2)
    assert longest_at_most(pa.chunked_array([words.slice(2), words.slice(0, 1)]), 3)
    assert not longest_at_most(pa.chunked_array([words.slice(1, 1), pa.array(["abcd"])]), 3)
    assert longest_at_most(pa.array([], type=pa.string()), 0)
    assert longest_at_most(pa.array(["é" * 4], type=pa.large_string()), 4)


def test_bools_read_null_as_false_from_the_bits():
    values = [True, None, False, True, None, True, True, False, True, None, True]  # more than a byte of bits
    column = pa.chunked_array([pa.array(values), pa.array(values).slice(3)])
    assert bools(column).tolist() == pc.fill_null(column, False).to_pylist()
    assert bools(pa.chunked_array([pa.array([True, False])])).tolist() == [True, False]  # no validity buffer


def test_ints_read_chunks_and_slices_as_to_numpy_does():
    column = pa.chunked_array([pa.array([1, 2, 3, 4], type=pa.int32()).slice(1), pa.array([9, 8], type=pa.int32())])
    assert ints(column).tolist() == column.to_numpy().tolist() == [2, 3, 4, 9, 8]
    assert ints(column).dtype == np.int64
    assert ints(pa.chunked_array([], type=pa.int64())).tolist() == []
    with pytest.raises(TypeError):
        ints(pa.array([1.5]))


def test_nvtx_ranges_are_ingested_without_pandas(tmp_path):
    # the bundled sample's 24 push/pop ranges: the stream's masks, depths and batches stay out of pandas (0.3 s)
    assert pandas_after_ingest(REPO / "sample_traces" / "demo_training_step.sqlite", tmp_path) == "False"


def test_nvtx_text_ids_and_domains_are_ingested_without_pandas(tmp_path):
    # memfusion's ranges name their text by StringIds id (59 of 60 rows) and create a domain: the lookup's arrays too
    export = TRACES / "nsys" / "memfusion.sqlite"
    if not export.exists():
        pytest.skip(f"real traces not present at {TRACES} (CI has ../shared/traces beside the checkout)")
    assert pandas_after_ingest(export, tmp_path) == "False"


def test_a_pytorch_job_is_analyzed_without_pyarrow_compute(tmp_path, dlrm_ranks):
    # its import is 40 to 55 ms, a tenth of the 8 DLRM ranks' ingest (docs/performance.md, seventeenth pass)
    args = ["analyze", *map(str, dlrm_ranks), "--format", "json", "-o", str(tmp_path / "r.json"), "--no-cache"]
    assert pandas_after(args, tmp_path, module="pyarrow.compute") == "False"
