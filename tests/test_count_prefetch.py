"""The export's event tables counted on a thread ahead of the catalog (ingest/nsys/count_prefetch.py): the catalog
read with them is the catalog read without, on every shared export; counts of a file changed since, or that could
not be read, are not used (the catalog counts in place and meets the same error); an analysis starts them with the
sqlite scanner's instance and leaves no thread behind."""

from __future__ import annotations

import os
import shutil
import sqlite3
import threading

import pytest

from conftest import REPO, nsys_exports, trace_param
from nsight_advisor import workflow
from nsight_advisor.common.errors import InputError
from nsight_advisor.ingest.nsys import count_prefetch
from nsight_advisor.ingest.nsys.catalog import COUNTED_FIRST, KERNEL, count_ahead, read_catalog
from nsight_advisor.store.ingest_instance import prepare_for

SAMPLE = REPO / "sample_traces" / "demo_training_step.sqlite"


def _start(path):
    count_ahead(path)


def _threads() -> set[str]:
    return {t.name for t in threading.enumerate()}


@pytest.mark.parametrize("export", trace_param(nsys_exports()))
def test_the_catalog_read_with_counts_ahead_is_the_catalog_read_without(export):
    without = read_catalog(export)
    _start(export)
    ahead = count_prefetch.take(export)
    assert ahead == {t: without.counts[t] for t in COUNTED_FIRST if t in without.tables}
    _start(export)
    assert read_catalog(export) == without
    assert count_prefetch.take(export) is None  # taken once, by the catalog


def test_counts_of_a_file_changed_since_are_not_used(tmp_path, monkeypatch):
    copy = tmp_path / "export.sqlite"
    shutil.copyfile(SAMPLE, copy)
    _start(copy)
    con = sqlite3.connect(copy)
    con.execute(f'delete from "{KERNEL}" where rowid in (select rowid from "{KERNEL}" limit 1)')
    con.commit()
    con.close()
    st = os.stat(copy)
    os.utime(copy, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # a later modification time, whatever the clock
    counted = []
    take = count_prefetch.take
    monkeypatch.setattr(count_prefetch, "take", lambda path: counted.append(take(path)) or counted[-1])
    catalog = read_catalog(copy)
    assert counted == [None]  # asked, counted before the change, not used
    assert catalog.counts[KERNEL] == read_catalog(SAMPLE).counts[KERNEL] - 1


def test_a_file_that_cannot_be_counted_gives_the_catalogs_own_error(tmp_path):
    bad = tmp_path / "not_an_export.sqlite"
    bad.write_bytes(b"SQLite format 3\x00" + b"\xff" * 4000)
    _start(bad)
    with pytest.raises(InputError, match="not_an_export.sqlite"):
        read_catalog(bad)
    count_prefetch.discard(bad)
    assert "nsight-advisor-counts" not in _threads()


def test_an_analysis_counts_ahead_and_leaves_no_thread(tmp_path, monkeypatch):
    monkeypatch.setenv("NSIGHT_ADVISOR_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    taken = []
    take = count_prefetch.take
    monkeypatch.setattr(count_prefetch, "take", lambda path: taken.append(take(path)) or taken[-1])
    workflow.analyze([SAMPLE], use_cache=False)
    assert taken and taken[0] == {t: n for t, n in read_catalog(SAMPLE).counts.items() if t in COUNTED_FIRST}
    assert "nsight-advisor-counts" not in _threads()
    # a store found current reads no export: the counts asked for are dropped once counted
    workflow.analyze([SAMPLE], use_cache=True, select=("NA101",))
    assert "nsight-advisor-counts" not in _threads() and not count_prefetch._PENDING


def test_a_wal_mode_export_is_not_counted_ahead(tmp_path):
    wal = tmp_path / "wal.sqlite"
    shutil.copyfile(SAMPLE, wal)
    con = sqlite3.connect(wal)
    con.execute("pragma journal_mode = wal")
    con.close()
    assert wal.read_bytes()[18:20] == b"\x02\x02"
    instance = prepare_for([wal])
    try:
        assert instance is not None and not count_prefetch._PENDING  # read from a copy: its counts are the copy's
    finally:
        instance.close()
    instance = prepare_for([SAMPLE])
    assert os.path.realpath(SAMPLE) in count_prefetch._PENDING
    instance.close()
    assert not count_prefetch._PENDING
