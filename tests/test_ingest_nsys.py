"""Ingest of every real nsys export in ../shared/traces/nsys and of the bundled sample."""

from __future__ import annotations

import hashlib
from collections import defaultdict
from pathlib import Path

import pytest

from conftest import REPO, TRACES, export_rows, nsys_exports, trace_param
from nsight_advisor.ingest.nsys.export import ingest_nsys_sqlite, read_catalog
from nsight_advisor.store.database import connect

SAMPLE = REPO / "sample_traces" / "demo_training_step.sqlite"
COUNTED = ("gpus", "kernels", "api_calls", "memcpys", "memsets", "syncs", "nvtx_ranges", "gpu_metrics")

# Rows per normalized table and the data recorded as missing, per export (counts cross-checked with the
# row counts in ../shared/traces/README.md; memfusion's 60 NVTX rows include 1 domain-creation event).
EXPECTED = {
    "cardiac_sim": ((1, 0, 0, 0, 0, 0, 0, 0), {"api_calls", "kernels", "memcpys", "memsets", "syncs", "nvtx_ranges", "gpu_metrics", "backtraces"}),
    "csc746_vecadd": ((1, 1, 7, 18432, 0, 1, 0, 0), {"memsets", "nvtx_ranges", "gpu_metrics", "backtraces"}),
    "cuda_perf_sandbox": ((1, 1, 15, 3, 0, 1, 0, 0), {"memsets", "nvtx_ranges", "gpu_metrics"}),
    "cutlass_benchmark": ((4, 6, 21, 4, 0, 1, 0, 0), {"memsets", "nvtx_ranges", "gpu_metrics"}),
    "fuser_h200_matmul": ((1, 19, 968, 1, 1, 1, 652, 0), {"gpu_metrics", "backtraces"}),
    "jorgedavyd_cuda": ((1, 1, 11, 3, 0, 0, 0, 0), {"memsets", "syncs", "nvtx_ranges", "gpu_metrics"}),
    "memfusion": ((4, 36, 5668, 4, 0, 2, 59, 0), {"memsets", "gpu_metrics", "backtraces"}),
    "nsu_v100_openacc": ((4, 1000, 2031, 4, 3, 1005, 0, 0), {"nvtx_ranges", "gpu_metrics", "backtraces"}),
    "nsys_ai_h100_2gpu_1s": ((2, 3442, 5796, 904, 22, 244, 16782, 0), {"gpus", "gpu_metrics", "backtraces"}),
    # counts from SQLite's own count(*) of each export table (NVTX: event types 34, 59 and 60); no TARGET_INFO_GPU,
    # two devices recovered from the kernels' deviceId
    "nsys_ai_mfu_2gpu_after": ((2, 3587, 6682, 904, 242, 334, 17113, 0), {"gpus", "gpu_metrics", "backtraces"}),
    "nsys_ai_mfu_2gpu_before": ((2, 4010, 7466, 1020, 269, 366, 19118, 0), {"gpus", "gpu_metrics", "backtraces"}),
    "nsys_ai_mock": ((1, 2, 9, 1, 0, 1, 0, 0), {"memsets", "nvtx_ranges", "gpu_metrics", "backtraces"}),
    "pipit_cloverleaf_a100": ((4, 1312, 3048, 279, 0, 1312, 0, 0), {"memsets", "nvtx_ranges", "gpu_metrics"}),
    "recon_stream": ((4, 5, 24, 1, 1, 0, 0, 0), {"syncs", "nvtx_ranges", "gpu_metrics", "backtraces"}),
    "sgemm_practice": ((1, 0, 2307, 0, 0, 81, 0, 0), {"kernels", "memcpys", "memsets", "nvtx_ranges", "gpu_metrics", "backtraces"}),
    "tutorial_vqe": ((8, 0, 11, 0, 0, 0, 0, 0), {"kernels", "memcpys", "memsets", "syncs", "nvtx_ranges", "gpu_metrics", "backtraces"}),
    "uvmtorch": ((1, 0, 2, 0, 0, 0, 0, 0), {"kernels", "memcpys", "memsets", "syncs", "nvtx_ranges", "gpu_metrics"}),
}


@pytest.fixture
def store():
    con = connect(None)
    yield con
    con.close()


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_every_export_has_expected_counts() -> None:
    if not TRACES.exists():
        pytest.skip(f"real traces absent at {TRACES}")
    assert sorted(p.stem for p in nsys_exports()) == sorted(EXPECTED)


@pytest.mark.parametrize("export", trace_param(nsys_exports()))
def test_ingest_rows_and_missing(export: Path, store) -> None:
    before = _sha256(export)
    ingest_nsys_sqlite(store, 1, export)
    assert _sha256(export) == before, "ingest must never modify its input"
    rows, missing = EXPECTED[export.stem]
    got = tuple(store.execute(f"SELECT count(*) FROM {t} WHERE capture_id = 1").fetchone()[0] for t in COUNTED)
    assert dict(zip(COUNTED, got)) == dict(zip(COUNTED, rows))
    recorded = store.execute("SELECT data, capture_option FROM capture_missing WHERE capture_id = 1").fetchall()
    assert {d for d, _ in recorded} == missing
    options = dict(recorded)
    for data in missing & {"kernels", "api_calls"}:
        assert options[data] == "nsys profile --trace=cuda"
    if "nvtx_ranges" in missing:
        assert options["nvtx_ranges"] == "nsys profile --trace=nvtx"
    assert options["gpu_metrics"] == "nsys profile --gpu-metrics-devices=all"
    if "backtraces" in missing:
        assert "--backtrace=dwarf" in options["backtraces"] and "--cudabacktrace=all" in options["backtraces"]
    cap = store.execute("SELECT tool, format, tool_version, start_ns, end_ns, duration_ns FROM captures").fetchone()
    assert cap[:2] == ("nsys", "nsys-sqlite")
    if cap[3] is not None:
        assert cap[5] == cap[4] - cap[3] > 0
    # every timed row is well-formed
    for table in ("kernels", "api_calls", "memcpys", "memsets", "syncs", "nvtx_ranges"):
        bad = store.execute(f"SELECT count(*) FROM {table} WHERE start_ns IS NULL OR end_ns < start_ns "
                            f"OR duration_ns <> end_ns - start_ns").fetchone()[0]
        assert bad == 0, table


def test_versions_from_both_metadata_tables(store) -> None:
    versions = {}
    for export in nsys_exports():
        versions[export.stem] = read_catalog(export).tool_version
    if not versions:
        pytest.skip(f"real traces absent at {TRACES}")
    assert versions["cardiac_sim"] == "unknown"  # nsys 2021: neither table
    assert versions["csc746_vecadd"] == "2022.2.1.31"  # EXPORT_META_DATA
    assert versions["nsys_ai_h100_2gpu_1s"] == "2026.2.1.210"  # META_DATA_EXPORT


def _one(export_stem: str, store):
    path = TRACES / "nsys" / f"{export_stem}.sqlite"
    if not path.exists():
        pytest.skip(f"real traces absent at {TRACES}")
    ingest_nsys_sqlite(store, 1, path)
    return store


def test_gpus_and_peaks(store) -> None:
    con = _one("cutlass_benchmark", store)
    rows = con.execute("SELECT device_id, name, sm_count, compute_capability, peak_fp32_flops_per_s FROM gpus "
                       "ORDER BY device_id").fetchall()
    names = {r[1] for r in rows}
    assert len(rows) == 4 and any("A40" in n for n in names) and any("A100" in n for n in names)
    assert all(r[4] is not None for r in rows)


def test_gpus_without_gpu_table_come_from_kernels(store) -> None:
    con = _one("nsys_ai_h100_2gpu_1s", store)
    assert con.execute("SELECT device_id, name, sm_count FROM gpus ORDER BY 1").fetchall() == [(0, None, None),
                                                                                              (1, None, None)]


@pytest.mark.parametrize("stem", ["nsys_ai_h100_2gpu_1s", "nsys_ai_mfu_2gpu_after", "nsys_ai_mfu_2gpu_before"])
def test_gpus_of_a_trimmed_export_are_the_devices_its_events_name(stem: str, store) -> None:
    # read from the stored events after they are ingested (export.STEPS), against SQLite's own reading of the export
    path = TRACES / "nsys" / f"{stem}.sqlite"
    if not path.exists():
        pytest.skip(f"real traces absent at {TRACES}")
    expected = export_rows(path, """
        SELECT DISTINCT deviceId FROM (SELECT deviceId FROM CUPTI_ACTIVITY_KIND_KERNEL
                                       UNION ALL SELECT deviceId FROM CUPTI_ACTIVITY_KIND_MEMCPY
                                       UNION ALL SELECT deviceId FROM CUPTI_ACTIVITY_KIND_MEMSET)
        WHERE deviceId IS NOT NULL ORDER BY 1""")
    ingest_nsys_sqlite(store, 1, path)
    assert store.execute("SELECT device_id FROM gpus ORDER BY 1").fetchall() == expected
    assert store.execute("SELECT data FROM capture_missing WHERE data = 'gpus'").fetchall() == [("gpus",)]


def test_gpus_without_gpu_table_include_devices_of_copies_and_sets_alone(tmp_path: Path, store) -> None:
    trimmed = _tampered_sample(tmp_path / "trimmed.sqlite", "DROP TABLE TARGET_INFO_GPU",
                               "UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET deviceId = 3",
                               "UPDATE CUPTI_ACTIVITY_KIND_MEMSET SET deviceId = 5")
    ingest_nsys_sqlite(store, 1, trimmed)
    assert store.execute("SELECT device_id, name FROM gpus ORDER BY 1").fetchall() == [(0, None), (3, None),
                                                                                       (5, None)]


def test_unified_memory_labels(store) -> None:
    con = _one("csc746_vecadd", store)  # nsys 2022.2: no ENUM tables, built-in labels
    got = dict(con.execute("SELECT direction, count(*) FROM memcpys GROUP BY 1").fetchall())
    assert got == {"Unified Host-to-Device": 12288, "Unified Device-to-Host": 6144}
    causes = {r[0] for r in con.execute("SELECT DISTINCT migration_cause FROM memcpys").fetchall()}
    assert causes == {"coherence", "prefetch"}


def test_sync_types_and_api_kinds(store) -> None:
    con = _one("nsys_ai_h100_2gpu_1s", store)
    assert dict(con.execute("SELECT sync_type, count(*) FROM syncs GROUP BY 1").fetchall()) == {
        "stream_wait_event": 236, "stream_synchronize": 8}
    kinds = dict(con.execute("SELECT kind, count(*) FROM api_calls GROUP BY 1").fetchall())
    assert set(kinds) <= {"runtime", "driver"} and kinds.get("runtime")
    assert con.execute("SELECT count(*) FROM api_calls WHERE name = 'cudaLaunchKernelExC_v11060' "
                       "AND base_name = 'cudaLaunchKernelExC'").fetchone()[0] == 558


def test_kernel_tid_comes_from_launching_call(store) -> None:
    con = _one("fuser_h200_matmul", store)
    orphans = con.execute("""
        SELECT count(*) FROM kernels k WHERE k.tid IS NULL OR NOT EXISTS (
            SELECT 1 FROM api_calls a WHERE a.correlation_id = k.correlation_id AND a.pid = k.pid AND a.tid = k.tid)
        """).fetchone()[0]
    assert orphans == 0
    assert con.execute("SELECT count(DISTINCT pid) FROM kernels").fetchone()[0] == 1


@pytest.mark.parametrize("export", trace_param(nsys_exports()))
def test_every_kernel_with_a_correlated_call_gets_its_tid(export: Path, store) -> None:
    # The tid lookup reads only calls whose name says Launch (cudaLaunchKernel*, cuLaunchKernel*, cudaGraphLaunch,
    # ...), which halves the lookup at 10M kernels; no kernel of a real export may lose its tid to that.
    ingest_nsys_sqlite(store, 1, export)
    correlated, with_tid = store.execute("""
        SELECT count(*) FILTER (WHERE EXISTS (SELECT 1 FROM api_calls a
                                              WHERE a.pid = k.pid AND a.correlation_id = k.correlation_id)),
               count(k.tid)
        FROM kernels k""").fetchone()
    assert with_tid == correlated


def _reference_depths(rows):
    """Nesting depth by a plain stack walk per thread (the definition the SQL must match)."""
    out = {}
    by_thread = defaultdict(list)
    for key, tid, start, end in rows:
        by_thread[tid].append((start, -end, key, end))
    for items in by_thread.values():
        stack: list[int] = []
        for start, _neg_end, key, end in sorted(items):
            while stack and stack[-1] <= start:
                stack.pop()
            out[key] = len(stack)
            stack.append(end)
    return out


@pytest.mark.parametrize("stem", ["fuser_h200_matmul", "nsys_ai_h100_2gpu_1s", "memfusion"])
def test_nvtx_depth_matches_stack_walk(stem: str, store) -> None:
    con = _one(stem, store)
    rows = con.execute("SELECT row_number() OVER () AS k, pid * 16777216 + tid, start_ns, end_ns, depth, domain "
                       "FROM nvtx_ranges WHERE event_type = 'push_pop'").fetchall()
    assert rows
    ref = _reference_depths([(k, t, s, e) for k, t, s, e, _d, _dom in rows])
    assert {k: d for k, _t, _s, _e, d, _dom in rows} == ref
    assert all(dom for *_, dom in rows)


def test_invalid_utf8_environment_is_never_read(store) -> None:
    con = _one("cardiac_sim", store)  # TARGET_INFO_SYSTEM_ENV holds invalid UTF-8
    assert con.execute("SELECT tool_version FROM captures").fetchone()[0] == "unknown"
    assert con.execute("SELECT name FROM gpus").fetchone()[0].startswith("NVIDIA GeForce RTX 3060")


def test_sample_trace_ingests_and_fires_the_demo_patterns(store) -> None:
    ingest_nsys_sqlite(store, 1, SAMPLE)
    con = store
    assert con.execute("SELECT count(*) FROM kernels WHERE name LIKE 'ampere_sgemm%'").fetchone()[0] > 0
    assert con.execute("SELECT count(*) FROM kernels WHERE blocks < 108").fetchone()[0] > 0
    assert {r[0] for r in con.execute("SELECT DISTINCT sync_type FROM syncs").fetchall()} == {
        "stream_synchronize", "context_synchronize"}
    assert con.execute("SELECT count(*) FROM memcpys WHERE src_kind = 'pageable' OR dst_kind = 'pageable'"
                       ).fetchone()[0] > 0
    assert con.execute("SELECT max(depth) FROM nvtx_ranges").fetchone()[0] == 1
    assert con.execute("SELECT count(*) FROM kernels WHERE tid IS NULL").fetchone()[0] == 0
    assert SAMPLE.stat().st_size < 1_000_000


def test_sample_generator_is_deterministic(tmp_path: Path) -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("generate_demo", REPO / "sample_traces" / "generate_demo.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = mod.write(tmp_path / "demo.sqlite")
    import sqlite3

    def dump(path: Path) -> list[str]:  # content, not bytes: the file header records the SQLite library version
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return list(con.iterdump())
        finally:
            con.close()

    assert dump(out) == dump(SAMPLE), "regenerate with: python sample_traces/generate_demo.py"


def _tampered_sample(path: Path, *statements: str) -> Path:
    """A copy of the bundled sample at ``path`` with ``statements`` applied to it."""
    import shutil
    import sqlite3

    shutil.copyfile(SAMPLE, path)
    con = sqlite3.connect(path)
    try:
        for statement in statements:
            con.execute(statement)
        con.commit()
    finally:
        con.close()
    return path


def test_invalid_utf8_in_strings_and_nvtx_text(tmp_path: Path, store) -> None:
    bad = _tampered_sample(
        tmp_path / "bad_utf8.sqlite",
        "UPDATE StringIds SET value = CAST(X'6B65726E656CFF5F78' AS TEXT) WHERE value = 'scale_bias_kernel'",
        "UPDATE NVTX_EVENTS SET text = CAST(X'666F7277FE617264' AS TEXT) WHERE text = 'forward'")
    ingest_nsys_sqlite(store, 1, bad)
    assert store.execute("SELECT count(*) FROM kernels WHERE short_name = 'kernel\ufffd_x'").fetchone()[0] > 0
    assert store.execute("SELECT count(*) FROM nvtx_ranges WHERE text = 'forw\ufffdard'").fetchone()[0] == 6
    assert store.execute("SELECT count(*) FROM kernels").fetchone()[0] > 100


def test_the_nvtx_stream_batches_as_the_depth_walk_does() -> None:
    from nsight_advisor.ingest import nvtx_depth
    from nsight_advisor.ingest.nsys import nvtx as nsys_nvtx

    assert nsys_nvtx.BATCH_ROWS == nvtx_depth.BATCH_ROWS


@pytest.mark.parametrize("batch_rows", [2, 250_000])
def test_nvtx_rows_out_of_start_order_are_sorted_first(tmp_path: Path, batch_rows: int, monkeypatch) -> None:
    """An export whose NVTX rows do not come in start order per thread gets the same ranges and depths."""
    from nsight_advisor.ingest.nsys import nvtx as nsys_nvtx

    shuffled = _tampered_sample(
        tmp_path / "nvtx_backwards.sqlite",
        "CREATE TABLE backwards AS SELECT * FROM NVTX_EVENTS ORDER BY start DESC",
        "DELETE FROM NVTX_EVENTS", "INSERT INTO NVTX_EVENTS SELECT * FROM backwards", "DROP TABLE backwards")
    monkeypatch.setattr(nsys_nvtx, "BATCH_ROWS", batch_rows)
    sorted_passes = []
    insert = nsys_nvtx.insert_nvtx

    def spy(reader, nvtx, *, ordered):
        sorted_passes.append(ordered)
        return insert(reader, nvtx, ordered=ordered)

    monkeypatch.setattr(nsys_nvtx, "insert_nvtx", spy)
    stores = {}
    for name, export in (("as written", SAMPLE), ("backwards", shuffled)):
        stores[name] = connect(tmp_path / f"{name}.duckdb")  # on disk: the memory-bounded path
        ingest_nsys_sqlite(stores[name], 1, export)
    cols = "pid, tid, domain, text, event_type, start_ns, end_ns, depth, category"
    rows = {name: sorted(con.execute(f"SELECT {cols} FROM nvtx_ranges").fetchall(), key=repr)
            for name, con in stores.items()}
    assert rows["backwards"] == rows["as written"] and max(r[7] for r in rows["as written"]) == 1
    # one batch is sorted as it is walked; across small batches the walk finds the order broken and sorts
    assert sorted_passes == ([False, False, True] if batch_rows == 2 else [False, False])
    for con in stores.values():
        con.close()


def test_progress_bar_only_on_a_terminal_after_the_delay() -> None:
    import io

    from nsight_advisor.common.progress import Progress

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    plain = io.StringIO()
    with Progress("ingest x", 3, stream=plain, delay_s=0) as bar:
        bar.step("kernels")
    assert plain.getvalue() == ""
    quick = Tty()
    with Progress("ingest x", 3, stream=quick, delay_s=60) as bar:
        bar.step("kernels")
    assert quick.getvalue() == ""
    slow = Tty()
    with Progress("ingest x", 3, stream=slow, delay_s=0) as bar:
        bar.step("kernels")
        assert "1/3 kernels" in slow.getvalue()
    assert slow.getvalue().endswith("\r")  # the bar is erased at the end


def test_rows_with_end_before_start_are_dropped_and_noted(tmp_path: Path, store) -> None:
    import sqlite3

    bad = _tampered_sample(tmp_path / "bad_times.sqlite",
                           'UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET "end" = start - 5 WHERE rowid IN (1, 2)',
                           'UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET "end" = start - 1 WHERE rowid = 3')
    con = sqlite3.connect(f"file:{bad}?mode=ro", uri=True)
    total_kernels = con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    con.close()
    ingest_nsys_sqlite(store, 1, bad)
    assert store.execute("SELECT count(*) FROM kernels").fetchone()[0] == total_kernels - 2
    notes = dict(store.execute("SELECT data, rows FROM ingest_notes").fetchall())
    assert notes == {"kernels": 2, "api_calls": 1}


@pytest.mark.parametrize("statement, table", [
    ("UPDATE TARGET_INFO_GPU SET maxBlocksPerSm = -9223372036854775808", "TARGET_INFO_GPU"),
    ("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET blockX = X'00FF' WHERE rowid = 3", "CUPTI_ACTIVITY_KIND_KERNEL"),
    ("UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET correlationId = 'soon' WHERE rowid = 2", "CUPTI_ACTIVITY_KIND_RUNTIME"),
    ("UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET bytes = 1.5e300 WHERE rowid = 1", "CUPTI_ACTIVITY_KIND_MEMCPY"),
])
def test_a_damaged_value_names_the_table_that_holds_it(tmp_path: Path, store, statement: str, table: str) -> None:
    # DuckDB's error names the column (or only the value): the table is the ingest's to say
    from nsight_advisor.common.errors import InputError

    bad = _tampered_sample(tmp_path / "damaged.sqlite", statement)
    with pytest.raises(InputError) as err:
        ingest_nsys_sqlite(store, 1, bad)
    text = str(err.value)
    assert text.startswith(f"{bad}: cannot be read") and f"reading {table}" in text and "\n" not in text, text


def test_sqlite_scanner_loads_signed_from_the_pinned_package(store) -> None:
    from nsight_advisor.ingest.nsys.export import load_sqlite_scanner

    load_sqlite_scanner(store)
    assert store.execute("SELECT current_setting('allow_unsigned_extensions')").fetchone()[0] is False
    assert store.execute("SELECT current_setting('autoinstall_known_extensions')").fetchone()[0] is False
    loaded, installed = store.execute(
        "SELECT loaded, installed FROM duckdb_extensions() WHERE extension_name = 'sqlite_scanner'").fetchone()
    assert loaded is True and installed is False  # loaded from the package's file; nothing installed or fetched


def _span_threads() -> list:
    import threading

    return [t for t in threading.enumerate() if t.name == "nsight-advisor-span"]


def test_deferred_spans_are_asked_ahead_on_their_own_connection(tmp_path: Path, monkeypatch) -> None:
    """The deferred tables' spans are asked when the ingest starts, on a second connection, and taken when their
    step comes: not asked again, and the store holds what asking them in their step gives."""
    from nsight_advisor.ingest.nsys import reader as nsys_reader

    monkeypatch.setattr(nsys_reader, "DEFER_MIN_ROWS", 4)
    export = _tampered_sample(
        tmp_path / "late.sqlite",
        "INSERT INTO NVTX_EVENTS (start, \"end\", eventType, text, globalTid) "
        "SELECT 1005000000, 1030000000, 60, 'late', globalTid FROM NVTX_EVENTS LIMIT 1")
    asked: list[str] = []
    real_sql = nsys_reader.ExportReader.sql

    def recording(self, sql, params=None):
        asked.append(sql)
        return real_sql(self, sql, params)

    queries = {t: f"SELECT * FROM {t} ORDER BY ALL" for t in ("capture_deferred", "nvtx_ranges", "kernels")}
    queries["span"] = "SELECT start_ns, end_ns, duration_ns FROM captures"

    def ingest() -> dict:
        con = connect(None)
        try:
            ingest_nsys_sqlite(con, 1, export, defer=("nvtx_ranges", "gpu_metrics"))
            return {name: con.execute(sql).fetchall() for name, sql in queries.items()}
        finally:
            con.close()

    monkeypatch.setattr(nsys_reader.ExportReader, "sql", recording)
    ahead = ingest()
    assert not [sql for sql in asked if "FILTER (WHERE" in sql]  # the span came from the second connection
    assert ahead["capture_deferred"] == [(1, "nvtx_ranges", 25)]  # 24 in the sample, and the late one
    assert ahead["span"] == [(1_000_000_000, 1_030_000_000, 30_000_000)]  # to the late range's end
    assert not _span_threads()
    monkeypatch.setattr(nsys_reader.ExportReader, "prefetch", lambda self, *args: None)
    asked.clear()
    inline = ingest()
    assert [sql for sql in asked if "FILTER (WHERE" in sql]
    assert inline == ahead


def test_a_failed_ingest_ends_the_span_it_asked_ahead(tmp_path: Path, monkeypatch) -> None:
    from nsight_advisor.ingest.nsys import export as nsys_export
    from nsight_advisor.ingest.nsys import reader as nsys_reader

    monkeypatch.setattr(nsys_reader, "DEFER_MIN_ROWS", 4)
    started = []
    real = nsys_reader.ExportReader.prefetch

    def prefetch(self, *args):
        real(self, *args)
        started[:] = list(self.prefetched)

    def broken(reader) -> None:
        raise RuntimeError("kernels step failed")

    monkeypatch.setattr(nsys_reader.ExportReader, "prefetch", prefetch)
    monkeypatch.setitem(nsys_export.STEPS, "kernels", broken)
    con = connect(None)
    try:
        with pytest.raises(RuntimeError, match="kernels step failed"):
            ingest_nsys_sqlite(con, 1, SAMPLE, defer=("nvtx_ranges",))
    finally:
        con.close()
    assert started == ["nvtx_ranges"] and not _span_threads()


def test_a_span_asked_ahead_raises_its_error_when_taken() -> None:
    import duckdb

    from nsight_advisor.ingest.nsys.reader import SpanQuery

    con = duckdb.connect()
    try:
        assert SpanQuery(con, "SELECT 3, 1, 2").result() == (3, 1, 2)
        with pytest.raises(duckdb.Error, match="no such span"):
            SpanQuery(con, "SELECT error('no such span')").result()
    finally:
        con.close()
    assert not _span_threads()


@pytest.mark.parametrize("min_rows", [4, 5])
def test_deferred_tables_keep_their_export_rows_and_span(tmp_path: Path, min_rows: int, monkeypatch) -> None:
    """A deferred table is counted and spanned in one scan of the export: its rows (all of them) and the span
    of the rows a full ingest would keep, so the capture's start and end do not depend on what was deferred.
    A table under the threshold loads as before, counted without reading past the threshold."""
    from nsight_advisor.ingest.nsys import reader as nsys_reader

    export = _tampered_sample(
        tmp_path / "metrics.sqlite",
        "CREATE TABLE TARGET_INFO_GPU_METRICS (typeId INTEGER, sourceId INTEGER, typeName TEXT, metricId INTEGER, "
        "metricName TEXT)",
        "CREATE TABLE GPU_METRICS (rawTimestamp INTEGER, timestamp INTEGER, typeId INTEGER, metricId INTEGER, "
        "value INTEGER)",
        "INSERT INTO TARGET_INFO_GPU_METRICS VALUES (1, 0, 'GPU 0', 1, 'SMs Active'), (1, 0, 'GPU 0', 2, 'SM Issue')",
        # the last sample ends the capture; the first names no metric of the info table, so no ingest keeps it
        "INSERT INTO GPU_METRICS VALUES (0, 1010000000, 1, 1, 40), (0, 1010000000, 1, 2, 10), "
        "(0, 1040000000, 1, 1, 0), (0, 950000000, 1, 9, 5)",
        # a range past the last CUDA call, and one ending before it starts (dropped by a full ingest)
        "INSERT INTO NVTX_EVENTS (start, \"end\", eventType, text, globalTid) "
        "SELECT 1005000000, 1030000000, 60, 'late', globalTid FROM NVTX_EVENTS LIMIT 1",
        "INSERT INTO NVTX_EVENTS (start, \"end\", eventType, text, globalTid) "
        "SELECT 900000000, 800000000, 60, 'backwards', globalTid FROM NVTX_EVENTS LIMIT 1")
    full = connect(None)
    ingest_nsys_sqlite(full, 1, export)
    monkeypatch.setattr(nsys_reader, "DEFER_MIN_ROWS", min_rows)
    deferred = connect(None)
    ingest_nsys_sqlite(deferred, 1, export, defer=("nvtx_ranges", "gpu_metrics"))

    span = "SELECT start_ns, end_ns, duration_ns FROM captures"
    assert full.execute(span).fetchone() == (1_000_000_000, 1_040_000_000, 40_000_000)
    assert deferred.execute(span).fetchone() == full.execute(span).fetchone()
    expected = [("nvtx_ranges", 26)] + ([("gpu_metrics", 4)] if min_rows <= 4 else [])
    assert sorted(deferred.execute("SELECT data, export_rows FROM capture_deferred").fetchall()) == sorted(expected)
    assert deferred.execute("SELECT count(*) FROM nvtx_ranges").fetchone()[0] == 0
    loaded = deferred.execute("SELECT count(*) FROM gpu_metrics").fetchone()[0]
    assert loaded == (0 if min_rows <= 4 else 3) and full.execute("SELECT count(*) FROM gpu_metrics").fetchone()[0] == 3
    full.close()
    deferred.close()
