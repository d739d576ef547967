"""``kernels`` and ``nvtx_ranges`` are views (schema/tables.py): rows in kernel_rows and nvtx_rows, each
capture's kernel names once in kernel_names, its NVTX domain names in nvtx_domains.

What users' SQL, rules and reports rely on stays: the views have the documented columns, in order, and the
names of every row; an ingest stores each kernel name once; rows written through ``insert_kernels`` and
``insert_nvtx_ranges`` read back as given; a store from before the views is refused with one clear line
instead of being half-updated.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from conftest import REPO, export_rows, kineto_traces, nsys_exports, trace_param
from nsight_advisor.common.errors import InputError
from nsight_advisor.ingest import ingest_capture
from nsight_advisor.ingest.nsys.export import read_catalog
from nsight_advisor.schema.tables import get_table
from nsight_advisor.store.database import connect, insert_kernels, insert_nvtx_ranges

SAMPLE = REPO / "sample_traces" / "demo_training_step.sqlite"


@pytest.mark.parametrize("view", ["kernels", "nvtx_ranges"])
def test_the_views_have_the_documented_columns_in_order(memory_store, view) -> None:
    got = [r[0] for r in memory_store.execute(
        "SELECT column_name FROM duckdb_columns() WHERE table_name = ? ORDER BY column_index", [view]).fetchall()]
    assert got == get_table(view).column_names
    assert not get_table(view).stored


def test_the_kernels_view_carries_its_column_docs(memory_store) -> None:
    comments = dict(memory_store.execute(
        "SELECT column_name, comment FROM duckdb_columns() WHERE table_name = 'kernels'").fetchall())
    assert comments["name"] == "Demangled name exactly as `nsys stats` prints it by default."


def test_rows_written_through_insert_kernels_read_back_with_names_stored_once(memory_store) -> None:
    rows = [dict(capture_id=1, device_id=0, start_ns=i, end_ns=i + 5, duration_ns=5, grid_x=i,
                 name=f"void k<{i % 2}>(float*) & <b>", short_name="k", mangled_name=None) for i in range(6)]
    rows.append(dict(capture_id=2, device_id=1, start_ns=0, end_ns=1, duration_ns=1, name="k", short_name="k"))
    insert_kernels(memory_store, rows)
    got = memory_store.execute("SELECT capture_id, device_id, start_ns, end_ns, duration_ns, grid_x, name, short_name, "
                               "mangled_name FROM kernels ORDER BY capture_id, start_ns").fetchall()
    assert got == [(r["capture_id"], r["device_id"], r["start_ns"], r["end_ns"], r["duration_ns"], r.get("grid_x"),
                    r["name"], r["short_name"], r.get("mangled_name")) for r in rows]
    names = memory_store.execute("SELECT capture_id, name FROM kernel_names ORDER BY ALL").fetchall()
    assert names == [(1, "k"), (1, "void k<0>(float*) & <b>"), (1, "void k<1>(float*) & <b>"), (2, "k")]
    with pytest.raises(ValueError, match="no column 'nme'"):
        insert_kernels(memory_store, [dict(nme="typo")])


def test_a_row_without_a_demangled_name_shows_its_short_name(memory_store) -> None:
    """As the ingest did before the view: the name is the demangled one, else the short one."""
    insert_kernels(memory_store, [dict(capture_id=1, start_ns=0, end_ns=1, duration_ns=1, short_name="gemm")])
    assert memory_store.execute("SELECT name, short_name FROM kernels").fetchone() == ("gemm", "gemm")


def test_an_ingest_stores_each_kernel_name_once(tmp_path: Path) -> None:
    con = connect(tmp_path / "s.duckdb")
    try:
        ingest_capture(con, 1, SAMPLE)
        launches, distinct = con.execute("SELECT count(*), count(DISTINCT name) FROM kernels").fetchone()
        stored = con.execute("SELECT count(*), count(DISTINCT name) FROM kernel_names").fetchone()
        assert launches == 378 and distinct < launches
        assert stored[0] == stored[1] and stored[0] >= distinct  # short and mangled names are among them
        assert con.execute("SELECT count(*) FROM kernels WHERE name IS NULL").fetchone()[0] == 0
    finally:
        con.close()


@pytest.mark.parametrize("export", trace_param(nsys_exports()))
def test_every_launch_of_a_real_export_keeps_its_names(export: Path, tmp_path: Path) -> None:
    """The view gives each launch the names its string ids resolve to in the export (SQLite's own join)."""
    if "CUPTI_ACTIVITY_KIND_KERNEL" not in read_catalog(export).tables:
        pytest.skip(f"{export.name} has no kernel table")
    theirs = export_rows(export, """
        SELECT count(*), count(coalesce(d.value, s.value)), count(s.value), count(DISTINCT coalesce(d.value, s.value))
        FROM CUPTI_ACTIVITY_KIND_KERNEL k
        LEFT JOIN StringIds s ON s.id = k.shortName
        LEFT JOIN StringIds d ON d.id = k.demangledName
        WHERE k.start IS NOT NULL AND k."end" IS NOT NULL AND k."end" >= k.start""")[0]
    con = connect(tmp_path / "s.duckdb")
    try:
        ingest_capture(con, 1, export)
        ours = con.execute("SELECT count(*), count(name), count(short_name), count(DISTINCT name) FROM kernels"
                           ).fetchone()
    finally:
        con.close()
    assert ours == theirs


@pytest.mark.parametrize("trace", trace_param(nsys_exports() + kineto_traces()))
def test_kernel_totals_are_the_kernels_summed_per_name(trace: Path, tmp_path: Path) -> None:
    """kernel_totals (grouped by name ids, names joined after) holds what grouping every launch of the kernels view
    by its names gives, row for row, also materialized as the analysis makes it; and what the summary, the impacts
    and the what-if sum from it are the launches' own sums."""
    from nsight_advisor.analysis import accounting
    from nsight_advisor.engine.impact import kernel_times

    con = connect(tmp_path / "s.duckdb")
    try:
        ingest_capture(con, 1, trace)
        launches = con.execute("""
            select capture_id, device_id, name, short_name, count(*), sum(duration_ns)
            from kernels group by all order by all""").fetchall()
        if not launches:
            pytest.skip(f"{trace.name} has no kernels")
        totals = "select capture_id, device_id, name, short_name, sum(launches), sum(total_ns) " \
                 "from kernel_totals group by all order by all"
        assert con.execute(totals).fetchall() == launches
        accounting.prepare(con, [1])
        assert con.execute("select count(*) from temp.main.kernel_totals").fetchone()[0] > 0
        assert con.execute(totals).fetchall() == launches
        times = kernel_times(con, [1])[1]
        assert times[None] == pytest.approx({d: float(sum(r[5] for r in launches if r[1] == d))
                                             for d in {r[1] for r in launches}}, rel=0, abs=0)
    finally:
        con.close()


#: A launch configuration: what kernel_configs groups by (less the mangled name), and the GPU's facts and the
#: occupancy figures that kernel_config_occupancy adds, each one value per configuration.
_CONFIG = ("capture_id, device_id, name, short_name, grid_x, grid_y, grid_z, block_x, block_y, block_z, blocks, "
           "threads_per_block, registers_per_thread, shared_mem_bytes")
_OCCUPANCY = ("gpu_name, sm_count, cc_major, warp_size, max_warps_per_sm, max_blocks_per_sm, max_registers_per_sm, "
              "max_shared_mem_per_sm_bytes, warps_per_block, limit_warps, limit_registers, limit_shared_mem, "
              "resident_blocks_per_sm, blocks_per_sm, waves, last_wave_fraction, theoretical_occupancy_pct")


@pytest.mark.parametrize("trace", trace_param(nsys_exports() + kineto_traces()))
def test_kernel_configs_are_the_launches_per_configuration(trace: Path, tmp_path: Path) -> None:
    """kernel_configs (grouped by name ids and configuration, the names joined after) holds, per configuration, its
    launches' count, summed, shortest and longest duration, as grouping the kernels view gives them;
    kernel_config_occupancy adds kernel_launches' own GPU facts and occupancy figures, computed once per row. From the
    store's views and as the analysis materializes them for its rules."""
    from nsight_advisor.analysis import accounting
    from nsight_advisor.analysis.shared_views import materialize_shared

    con = connect(tmp_path / "s.duckdb")
    try:
        ingest_capture(con, 1, trace)
        sums = "count(*), sum(duration_ns), min(duration_ns), max(duration_ns)"
        launches = con.execute(f"select {_CONFIG}, mangled_name, {sums} from kernels group by all order by all"
                               ).fetchall()
        if not launches:
            pytest.skip(f"{trace.name} has no kernels")
        occupied = con.execute(f"select {_CONFIG}, {_OCCUPANCY}, {sums} from kernel_launches group by all order by all"
                               ).fetchall()
        configs = f"select {_CONFIG}, mangled_name, launches, total_ns, min_ns, max_ns from kernel_configs order by all"
        occupancy = f"""select {_CONFIG}, {_OCCUPANCY}, sum(launches), sum(total_ns), min(min_ns), max(max_ns)
                        from kernel_config_occupancy group by all order by all"""
        assert con.execute(configs).fetchall() == launches
        assert con.execute(occupancy).fetchall() == occupied
        accounting.prepare(con, [1])
        made = materialize_shared(con, ["kernel_configs", "kernel_config_occupancy"])
        assert made == ["kernel_configs", "kernel_config_occupancy"]
        assert con.execute("select count(*) from temp.main.kernel_config_occupancy").fetchone()[0] == len(launches)
        assert con.execute(configs).fetchall() == launches
        assert con.execute(occupancy).fetchall() == occupied
    finally:
        con.close()


#: The kernels view and kernel_classes as they were written before kernel_name_sets (three joins with
#: kernel_names; the launches grouped by their name texts and joined back on them): what they give must not change.
_KERNELS_BY_THREE_JOINS = """
    select r.*, coalesce(n.name, s.name) as name, s.name as short_name, m.name as mangled_name, t.launch_type
    from kernel_rows r
    left join kernel_names n on n.capture_id = r.capture_id and n.name_id = r.name_id
    left join kernel_names s on s.capture_id = r.capture_id and s.name_id = r.short_name_id
    left join kernel_names m on m.capture_id = r.capture_id and m.name_id = r.mangled_name_id
    left join kernel_launch_types t on t.capture_id = r.capture_id and t.launch_type_id = r.launch_type_id"""
_CLASSES_BY_NAME_TEXT = f"""
    with k as ({_KERNELS_BY_THREE_JOINS}),
    names as (select name, short_name, na_kernel_category(any_value(name), any_value(short_name)) as category,
                     na_math_path(any_value(name)) as math_path, na_precision(any_value(name)) as precision
              from k group by name, short_name)
    select k.*, n.category, n.math_path, n.precision
    from k left join names n on n.name is not distinct from k.name and n.short_name is not distinct from k.short_name"""


@pytest.mark.parametrize("trace", trace_param(nsys_exports() + kineto_traces()))
def test_kernels_and_their_classes_through_the_name_sets_are_the_three_joins(trace: Path, tmp_path: Path) -> None:
    """kernels and kernel_classes join each launch with its capture's combination of names (kernel_name_sets) on
    the name ids; row for row they are what the three name joins and the classes by name text gave, from the
    store's views and from the analysis's materialized name sets; kernel_classes has the kernels view's columns,
    in order, then the three classes."""
    from nsight_advisor.analysis import accounting

    con = connect(tmp_path / "s.duckdb")
    try:
        ingest_capture(con, 1, trace)
        if not con.execute("select count(*) from kernel_rows").fetchone()[0]:
            pytest.skip(f"{trace.name} has no kernels")
        kernel_cols = ", ".join(get_table("kernels").column_names)
        classes_cols = f"{kernel_cols}, category, math_path, precision"
        before_k = con.execute(f"select {kernel_cols} from ({_KERNELS_BY_THREE_JOINS}) order by all").fetchall()
        before_c = con.execute(f"select {classes_cols} from ({_CLASSES_BY_NAME_TEXT}) order by all").fetchall()
        columns = [r[0] for r in con.execute("SELECT column_name FROM duckdb_columns() WHERE table_name = "
                                             "'kernel_classes' ORDER BY column_index").fetchall()]
        assert columns == [*get_table("kernels").column_names, "category", "math_path", "precision"]
        for stage in ("store", "analysis"):
            if stage == "analysis":
                accounting.prepare(con, [1])
                assert con.execute("select count(*) from temp.main.kernel_name_sets").fetchone()[0] > 0
            assert con.execute(f"select {kernel_cols} from kernels order by all").fetchall() == before_k, stage
            assert con.execute(f"select {classes_cols} from kernel_classes order by all").fetchall() == before_c, stage
    finally:
        con.close()


@pytest.mark.parametrize("export", trace_param(nsys_exports()))
def test_each_kernels_launch_type_is_its_exports_label(export: Path, tmp_path: Path) -> None:
    """kernel_rows keeps each launch's launch type as the export's code, its label once in kernel_launch_types:
    the kernels view gives every launch the label the export's enum table gives its code (the symbol without its
    prefix, lowercase), NULL where the export records none."""
    from nsight_advisor.ingest.nsys import enums as E

    con = connect(tmp_path / "s.duckdb")
    try:
        ingest_capture(con, 1, export)
        got = con.execute("select start_ns, correlation_id, launch_type from kernels order by all").fetchall()
    finally:
        con.close()
    if not got:
        pytest.skip(f"{export.name} has no kernels")
    tables = {r[0] for r in export_rows(export, "select name from sqlite_master where type = 'table'")}
    columns = {r[1] for r in export_rows(export, "pragma table_info(CUPTI_ACTIVITY_KIND_KERNEL)")}
    enum = next((t for t in ("ENUM_CUDA_KERNEL_LAUNCH_TYPE", "ENUM_CUDA_KRENEL_LAUNCH_TYPE") if t in tables), None)
    labels = ({i: E.word_label("ENUM_CUDA_KERNEL_LAUNCH_TYPE", sym, lab)
               for i, sym, lab in export_rows(export, f"select id, name, label from {enum}")} if enum else
              {i: E.word_label("ENUM_CUDA_KERNEL_LAUNCH_TYPE", sym, lab)
               for i, sym, lab in E.BUILTIN_ENUMS["ENUM_CUDA_KERNEL_LAUNCH_TYPE"]})
    code = "launchType" if "launchType" in columns else "NULL"
    expected = {(start, corr): labels.get(launch) for start, corr, launch in export_rows(
        export, f"select start, correlationId, {code} from CUPTI_ACTIVITY_KIND_KERNEL")}
    assert [(s, c, expected[(s, c)]) for s, c, _ in got] == got
    assert {t for *_, t in got} & set(labels.values())  # the labels are there, not only NULLs


def test_a_launch_type_written_through_the_helper_reads_back_from_the_kernels_view(memory_store) -> None:
    rows = [dict(capture_id=1, device_id=0, correlation_id=i, start_ns=i, end_ns=i + 5, duration_ns=5, name="k",
                 launch_type=launch) for i, launch in enumerate(["regular", None, "cooperative_single_device",
                                                                 "regular"])]
    insert_kernels(memory_store, rows)
    got = memory_store.execute("select launch_type from kernels order by start_ns").fetchall()
    assert got == [(r["launch_type"],) for r in rows]
    assert memory_store.execute("select count(*) from kernel_launch_types").fetchone()[0] == 2


def test_nvtx_rows_written_through_the_helper_read_back_with_their_domains(memory_store) -> None:
    rows = [dict(capture_id=1, tid=1, domain=domain, text=f"step {i} <&>", event_type="push_pop", start_ns=i,
                 end_ns=i + 10, duration_ns=10, depth=0)
            for i, domain in enumerate(["Default", "TensorRT", None, "TensorRT", "NCCL"])]
    insert_nvtx_ranges(memory_store, rows)
    got = memory_store.execute("SELECT domain, text, event_type, start_ns FROM nvtx_ranges ORDER BY start_ns").fetchall()
    assert got == [(r["domain"] or "Default", r["text"], "push_pop", r["start_ns"]) for r in rows]
    assert memory_store.execute("SELECT name FROM nvtx_domains ORDER BY domain_id").fetchall() == [("TensorRT",), ("NCCL",)]
    with pytest.raises(ValueError, match="no column 'domain_name'"):
        insert_nvtx_ranges(memory_store, [dict(domain_name="x")])


def test_a_domain_without_its_creation_row_is_named_by_its_id(memory_store) -> None:
    memory_store.execute("INSERT INTO nvtx_rows (capture_id, domain_id, start_ns, end_ns) VALUES (1, 7, 0, 1)")
    assert memory_store.execute("SELECT domain FROM nvtx_ranges").fetchone() == ("domain 7",)


@pytest.mark.parametrize("table", ["kernels", "nvtx_ranges"])
def test_a_store_from_before_the_views_is_refused_in_one_line(tmp_path: Path, table) -> None:
    old = tmp_path / "old.duckdb"
    raw = duckdb.connect(str(old))
    raw.execute(f"CREATE TABLE {table} (capture_id INTEGER, name VARCHAR)")
    raw.close()
    with pytest.raises(InputError, match=f"older nsight-advisor \\(its {table} is a table.*new store"):
        connect(old)


def test_a_store_of_another_version_given_as_the_input_is_refused_in_one_line(tmp_path: Path) -> None:
    """A store from before kernel_name_sets (built by the last version, so its kernels view reads kernel_names
    three times) would have this version's analysis read a view it lacks: refused, naming what to do, before
    any rule runs. The same store with this version's views is analyzed."""
    from nsight_advisor.store.opening import StoreHandle

    store = tmp_path / "store.duckdb"
    con = connect(store)
    ingest_capture(con, 1, SAMPLE)
    con.close()
    con, ids = StoreHandle([store]).open()
    con.close()
    assert ids == [1]
    raw = duckdb.connect(str(store))
    raw.execute("DROP VIEW kernel_name_sets")
    raw.close()
    with pytest.raises(InputError, match="written by another version of nsight-advisor .*nsight-advisor ingest"):
        StoreHandle([store]).open()


def test_the_ncu_views_made_empty_without_nsight_compute_data_are_what_computing_them_gives(tmp_path) -> None:
    # materialize_shared skips computing the ncu_* views where ncu_kernels and ncu_metrics are empty: on an Nsight
    # Systems export with kernels, each computed in full is empty too, and the empty tables keep the views' columns
    from nsight_advisor.analysis import accounting
    from nsight_advisor.analysis.shared_views import NCU_SOURCES, SHARED_VIEWS, materialize_shared

    con = connect(tmp_path / "s.duckdb")
    ingest_capture(con, 1, SAMPLE)
    assert con.execute("select count(*) from kernels").fetchone()[0] > 0
    assert [con.execute(f"select count(*) from {t}").fetchone()[0] for t in NCU_SOURCES] == [0] * len(NCU_SOURCES)
    accounting.prepare(con, [1])
    views = [v for v in SHARED_VIEWS if v.startswith("ncu_")]
    columns = ("select column_name, data_type from duckdb_columns() where table_name = ? and database_name {} 'temp' "
               "order by column_index")
    before = {v: con.execute(columns.format("<>"), [v]).fetchall() for v in views}
    assert all(before.values())
    assert all(con.execute(f"select count(*) from {v}").fetchone()[0] == 0 for v in views)
    assert materialize_shared(con, views) == views
    for v in views:
        assert con.execute(columns.format("="), [v]).fetchall() == before[v]
        assert con.execute(f"select count(*) from {v}").fetchone()[0] == 0


def test_a_small_store_reads_its_kernels_from_one_copy_and_analyzes_the_same(tmp_path, monkeypatch) -> None:
    # prepare copies the kernels view into a temp table in a store of few kernels (each rule then plans a table,
    # not three name joins); the copy holds the view's rows and columns, and the analysis is the same either way
    from nsight_advisor.analysis import accounting
    from nsight_advisor.engine.analyze import run_analysis

    con = connect(tmp_path / "s.duckdb")
    ingest_capture(con, 1, SAMPLE)
    view = con.execute("select * from kernels order by all").fetchall()
    columns = [d[0] for d in con.execute("select * from kernels limit 0").description]
    copied = "select count(*) from duckdb_tables() where temporary and table_name = 'kernels'"
    accounting.prepare(con, [1])
    assert con.execute(copied).fetchone()[0] == 1
    assert con.execute("select * from kernels order by all").fetchall() == view
    assert [d[0] for d in con.execute("select * from kernels limit 0").description] == columns
    con.close()

    results = []
    for limit in (accounting.SMALL_KERNEL_ROWS, 0):  # the sample's 378 kernels copied, then left as the view
        monkeypatch.setattr(accounting, "SMALL_KERNEL_ROWS", limit)
        con = connect(tmp_path / "s.duckdb", read_only=True)
        results.append(run_analysis(con, [1]).to_dict())
        assert con.execute(copied).fetchone()[0] == (1 if limit else 0)
        con.close()
    for result in results:  # the rules' elapsed times are all that may differ
        for outcome in result["outcomes"]:
            outcome.pop("elapsed_s", None)
    assert results[0] == results[1] and results[0]["findings"]


def test_a_small_store_is_analyzed_on_one_thread_without_the_large_data_optimizer_passes(tmp_path) -> None:
    # the pinned DuckDB knows every pass named (a name it did not know would make the whole setting fail)
    from nsight_advisor.store.opening import SMALL_STORE_SKIPPED_OPTIMIZERS, fit_small_store

    con = connect(tmp_path / "s.duckdb")
    ingest_capture(con, 1, SAMPLE)
    known = {r[0] for r in con.execute("select name from duckdb_optimizers()").fetchall()}
    assert set(SMALL_STORE_SKIPPED_OPTIMIZERS) <= known and "join_order" not in SMALL_STORE_SKIPPED_OPTIMIZERS
    fit_small_store(con)
    assert con.execute("select current_setting('threads')").fetchone()[0] == 1
    skipped = con.execute("select current_setting('disabled_optimizers')").fetchone()[0]
    assert set(skipped.split(",")) == set(SMALL_STORE_SKIPPED_OPTIMIZERS)
