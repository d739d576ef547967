"""Where in the source: host-side findings name the program functions behind them, from the capture's backtraces
(OS runtime calls, CPU samples, CUDA API calls), in the JSON, Markdown, HTML and SARIF; a capture without
backtraces says which `nsys profile` option records them."""

from __future__ import annotations

import json
import re
import sqlite3

import jsonschema
import pytest

from nsight_advisor import workflow
from nsight_advisor.engine.source_frames import TOP_FRAMES, is_program_frame, module_name
from nsight_advisor.report import render
from nsight_advisor.report.json_report import json_schema
from nsight_advisor.report.source_view import finding_source, short_symbol
from nsight_advisor.store.database import connect
from nsight_advisor.ingest.nsys.export import ingest_nsys_sqlite

from conftest import TRACES
from test_report import validate_sarif

CLOVERLEAF = TRACES / "nsys" / "pipit_cloverleaf_a100.sqlite"
VECADD = TRACES / "nsys" / "csc746_vecadd.sqlite"


def _need(path):
    if not path.exists():
        pytest.skip(f"real traces not present at {path}")
    return path


@pytest.fixture(scope="module")
def cloverleaf():
    """The analysis of pipit_cloverleaf_a100 (sampled with DWARF backtraces, OS runtime calls traced)."""
    return workflow.analyze([_need(CLOVERLEAF)], use_cache=False)


def _finding(result, rule_id: str) -> dict:
    doc = json.loads(json.dumps(result.to_dict()))
    jsonschema.Draft202012Validator(json_schema()).validate(doc)
    return next(f for f in doc["findings"] if f["rule_id"] == rule_id)


def _kernel_of(symbol: str) -> str:
    """The CloverLeaf kernel a par_ranged2/par_reduce wrapper instantiation runs (named in its template argument)."""
    return re.findall(r"&\((\w+)\(", symbol)[0]


def test_ingest_reads_osrt_calls_samples_and_their_frames():
    con = connect(None)
    ingest_nsys_sqlite(con, 1, _need(CLOVERLEAF))
    calls = dict(con.execute("select source::varchar, count(*) from host_calls group by 1").fetchall())
    frames = dict(con.execute("select source::varchar, count(*) from callchain_frames group by 1").fetchall())
    # SQLite's own count(*) of OSRT_API / COMPOSITE_EVENTS and OSRT_CALLCHAINS / SAMPLING_CALLCHAINS
    assert calls == {"osrt": 1831, "sample": 1531}
    assert frames == {"osrt": 8930, "sample": 7527}
    assert con.execute("select count(*) from capture_missing where data = 'backtraces'").fetchone()[0] == 0
    top = con.execute("select symbol, module from callchain_frames where source = 'osrt' and callchain_id = 1 "
                      "and depth = 9").fetchone()
    assert top[0] == "cudaGetDeviceCount" and top[1].endswith("/bin/cuda-cloverleaf")


def test_sync_stall_names_the_program_functions_that_wait(cloverleaf):
    f = _finding(cloverleaf, "NA301")  # sync-stall on cudaDeviceSynchronize, main thread
    frames = f["source_frames"]
    assert 0 < len(frames) <= TOP_FRAMES
    assert [fr["count"] for fr in frames] == sorted((fr["count"] for fr in frames), reverse=True)
    assert {fr["module"] for fr in frames} == {"cuda-cloverleaf"}
    # Checked by hand in the export: the CPU samples taken inside cudaDeviceSynchronize unwind to CloverLeaf's
    # launch wrappers (clover::par_ranged2 / par_reduce), the kernel named in their template arguments; the
    # most frequent is PdV_kernel's (23 samples), then advec_mom_kernel's and calc_dt_kernel's (18 each).
    assert frames[0]["symbol"].startswith("void clover::par_ranged2<")
    assert [(_kernel_of(fr["symbol"]), fr["count"]) for fr in frames[:3]] == [
        ("PdV_kernel", 23), ("advec_mom_kernel", 18), ("calc_dt_kernel", 18)]
    assert {short_symbol(fr["symbol"]) for fr in frames} <= {"clover::par_ranged2()", "clover::par_reduce()"}


def test_the_top_count_agrees_with_a_direct_query_of_the_export(cloverleaf):
    """Independently of the store: samples on the main thread inside a cudaDeviceSynchronize call whose caller
    frame is PdV_kernel's wrapper instantiation named by the finding."""
    top = _finding(cloverleaf, "NA301")["source_frames"][0]["symbol"]
    con = sqlite3.connect(f"file:{CLOVERLEAF}?mode=ro", uri=True)
    try:
        n = con.execute("""
            select count(distinct e.id)
            from COMPOSITE_EVENTS e
            join SAMPLING_CALLCHAINS f on f.id = e.id
            join StringIds s on s.id = f.symbol and s.value = ?
            join CUPTI_ACTIVITY_KIND_RUNTIME r on r.globalTid = e.globalTid and e.start between r.start and r."end"
            join StringIds a on a.id = r.nameId and a.value like 'cudaDeviceSynchronize%'""", (top,)).fetchone()[0]
    finally:
        con.close()
    assert n == 23


def test_sync_memcpy_names_the_halo_exchange(cloverleaf):
    frames = _finding(cloverleaf, "NA302")["source_frames"]
    # by hand: the samples inside cudaMemcpy unwind to clover_exchange's buffer-copy lambda
    assert frames[0]["symbol"].startswith("clover_exchange(global_variables&, int const*, int)::{lambda")
    assert frames[0]["count"] == 9


def test_reports_show_the_source_and_sarif_carries_logical_locations(cloverleaf):
    md = render(cloverleaf, "md")
    assert "**Source:** clover::par\\_ranged2() (cuda-cloverleaf, 75 backtraces)" in md
    html = render(cloverleaf, "html")
    assert "<b>Source:</b>" in html and "clover::Buffer1D&lt;double&gt;" in html  # escaped full name in a title
    sarif = validate_sarif(render(cloverleaf, "sarif"))
    results = {r["ruleId"]: r for r in sarif["runs"][0]["results"]}
    stall = results["NA301"]
    logical = stall["locations"][0]["logicalLocations"]
    expected = _finding(cloverleaf, "NA301")["source_frames"]
    assert [loc["fullyQualifiedName"] for loc in logical] == [fr["symbol"] for fr in expected]
    assert {loc["kind"] for loc in logical} == {"function"}
    assert "physicalLocation" in stall["locations"][0]  # the capture file; there is no source file or line
    assert "logicalLocations" not in results["NA101"]["locations"][0]  # a kernel finding names no API call


def test_a_capture_without_backtraces_says_how_to_record_them():
    result = workflow.analyze([_need(VECADD)], use_cache=False)
    doc = json.loads(json.dumps(result.to_dict()))
    assert all(f["source_frames"] == [] for f in doc["findings"])
    missing = {m["data"]: m["capture_option"] for m in doc["summary"]["captures"][0]["missing"]}
    assert "--backtrace=dwarf" in missing["backtraces"] and "--cudabacktrace=all" in missing["backtraces"]
    assert "--python-backtrace=cuda" in missing["backtraces"]
    html = render(result, "html")
    assert html.count("--cudabacktrace=all") == 1  # once per capture, not per finding
    md = render(result, "md")
    assert md.count("--cudabacktrace=all") == 1 and "No backtraces recorded" in md
    assert "No backtraces recorded" not in render(workflow.analyze([_need(CLOVERLEAF)], use_cache=False), "md")


def test_cuda_callchains_are_read_like_osrt_ones(tmp_path):
    """An export recorded with --cudabacktrace (no shared export has one): a CUDA API call's own backtrace."""
    from test_ingest_nsys import _tampered_sample

    path = _tampered_sample(
        tmp_path / "cudabt.sqlite",
        "CREATE TABLE CUDA_CALLCHAINS (id INTEGER NOT NULL, symbol INTEGER NOT NULL, module INTEGER NOT NULL, "
        "unresolved INTEGER, stackDepth INTEGER NOT NULL)",
        "INSERT INTO StringIds VALUES (900001, 'train_step(Model&)'), (900002, '/opt/app/bin/trainer'), "
        "(900003, 'cudaStreamSynchronize'), (900004, '/usr/lib/libcudart.so.12')",
        "INSERT INTO CUDA_CALLCHAINS VALUES (1, 900003, 900004, 0, 0), (1, 900001, 900002, 0, 1)",
        "UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET callchainId = 1 WHERE rowid = (SELECT min(rowid) FROM "
        "CUPTI_ACTIVITY_KIND_RUNTIME)",
    )
    con = connect(None)
    ingest_nsys_sqlite(con, 1, path)
    assert con.execute("select source::varchar, count(*) from host_calls group by 1").fetchall() == [("cuda", 1)]
    rows = con.execute("select depth, symbol, module from callchain_frames order by depth").fetchall()
    assert rows == [(0, "cudaStreamSynchronize", "/usr/lib/libcudart.so.12"),
                    (1, "train_step(Model&)", "/opt/app/bin/trainer")]
    assert [r for r in rows if is_program_frame(r[1], r[2], False)] == [rows[1]]


@pytest.mark.parametrize("symbol, module, program", [
    ("main", "/bin/app", True),
    ("cudaDeviceSynchronize", "/bin/app", False),  # the statically linked runtime
    ("__cudart1050", "/bin/app", False),
    ("cuStreamSynchronize", "/usr/lib64/libcuda.so.1", False),
    ("custom_solver", "/bin/app", True),  # cu + lowercase: a program's own name
    ("__pthread_once_slow", "/lib64/libpthread-2.31.so", False),
    ("_IO_fopen@@GLIBC_2", "/lib64/libc-2.31.so", False),
    ("0x7f72b45f088f", "/bin/app", False),
    ("[Broken backtraces]", "[Broken backtraces]", False),
    ("InitializeInjectionCUDA", "/opt/nsys/libToolsInjectionCuda64.so", False),
])
def test_program_frames(symbol, module, program):
    assert is_program_frame(symbol, module, False) is program


def test_display_names():
    assert short_symbol("void ns::f<int, std::pair<a, b> >(float*, int) const") == "ns::f()"
    assert module_name("/global/u1/x/bin/cuda-cloverleaf") == "cuda-cloverleaf"
    shown = finding_source({"source_frames": [
        {"symbol": "void f<1>(int)", "module": "app", "count": 2},
        {"symbol": "g()", "module": "app", "count": 3},
        {"symbol": "void f<2>(int)", "module": "app", "count": 2}]})
    assert [(s["symbol"], s["count"]) for s in shown] == [("f()", "4 backtraces"), ("g()", "3 backtraces")]
