"""Many captures in one analysis: parallel ingest into one store, rules per capture, the combined view."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, TRACES
from nsight_advisor.store import parallel_ingest, cache as store_cache
from nsight_advisor import workflow
from nsight_advisor.engine.combined_view import combined_view, merged_findings
from nsight_advisor.engine.model import AnalysisResult, Finding
from nsight_advisor.common.errors import InputError
from nsight_advisor.store.database import connect

RANKS = [TRACES / "nsys" / n for n in
         ("nsys_ai_h100_2gpu_1s.sqlite", "pipit_cloverleaf_a100.sqlite", "nsu_v100_openacc.sqlite")]
TABLES_COMPARED = ("captures", "gpus", "kernels", "api_calls", "memcpys", "memsets", "syncs", "nvtx_ranges",
                   "capture_missing", "ingest_notes")


@pytest.fixture
def ranks() -> list[Path]:
    if not all(p.exists() for p in RANKS):
        pytest.skip(f"real traces not present at {TRACES}")
    return RANKS


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("NSIGHT_ADVISOR_CACHE", str(folder))
    return folder


def _kernel_rows(path: Path) -> int:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return con.execute("select count(*) from CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    finally:
        con.close()


def _contents(store: Path) -> dict[str, list]:
    con = connect(store, read_only=True)
    try:
        return {t: con.execute(f"select * exclude (ingested_at) from {t} order by all" if t == "captures"
                               else f"select * from {t} order by all").fetchall()
                for t in TABLES_COMPARED}
    finally:
        con.close()


def test_many_captures_get_their_own_capture_ids(ranks):
    con, ids = workflow.load(ranks)
    try:
        assert ids == [1, 2, 3]
        names = dict(con.execute("select capture_id, source_name from captures").fetchall())
        assert names == {i + 1: p.name for i, p in enumerate(ranks)}
        counts = dict(con.execute("select capture_id, count(*) from kernels group by 1").fetchall())
        assert counts == {i + 1: _kernel_rows(p) for i, p in enumerate(ranks)}
    finally:
        con.close()


def test_parallel_ingest_equals_sequential_ingest(ranks, tmp_path, monkeypatch):
    monkeypatch.setenv("NSIGHT_ADVISOR_SMALL_CAPTURE_BYTES", "0")  # these captures are small: workers all the same
    items = list(zip([1, 2, 3], [p.resolve() for p in ranks]))
    stores = {}
    for workers in (1, 3):
        target = tmp_path / f"w{workers}.duckdb"
        store_cache.build_store(target, lambda con: parallel_ingest.ingest_many(
            con, items, work_dir=tmp_path, max_workers=workers))
        stores[workers] = _contents(target)
    assert stores[1] == stores[3]
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "cache") == ["w1.duckdb", "w3.duckdb"]  # workers' gone


def test_small_captures_are_ingested_without_a_worker(ranks, tmp_path, monkeypatch):
    assert all(parallel_ingest.is_small(p) for p in ranks)  # exports of 0.7 to 2.9 MB, under 8 MB

    def no_worker(*args, **kwargs):
        raise AssertionError("a worker process was started for a small capture")

    monkeypatch.setattr(parallel_ingest, "_WorkerPool", no_worker)
    target = tmp_path / "small.duckdb"
    items = list(zip([1, 2, 3], [p.resolve() for p in ranks]))
    store_cache.build_store(target, lambda con: parallel_ingest.ingest_many(con, items, work_dir=tmp_path,
                                                                            max_workers=3))
    con = connect(target, read_only=True)
    try:
        assert [r[0] for r in con.execute("select capture_id from captures order by 1").fetchall()] == [1, 2, 3]
    finally:
        con.close()


def test_a_bad_capture_among_many_names_the_file_and_leaves_nothing(ranks, tmp_path, cache):
    bad = tmp_path / "rank9.sqlite"
    bad.write_bytes(b"this is no sqlite file at all" * 10)
    with pytest.raises(InputError, match="rank9.sqlite"):
        workflow.load([ranks[0], bad, ranks[1]])
    assert not cache.exists() or [p for p in cache.iterdir()
                                  if not p.name.startswith("secret-") and p.name != "support"] == []  # kept by design


def test_ingest_command_adds_many_captures_to_a_store(ranks, tmp_path):
    target = tmp_path / "run.duckdb"
    assert workflow.ingest_to_store(ranks[:2], target) == [1, 2]
    assert workflow.ingest_to_store(ranks[2:], target) == [3]
    con, ids = workflow.load([target])
    try:
        assert ids == [1, 2, 3]
        assert con.execute("select count(distinct capture_id) from kernels").fetchone()[0] == 3
    finally:
        con.close()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "cache") == ["run.duckdb"]


def test_analyze_many_reports_per_capture_and_combined(ranks):
    result = workflow.analyze(ranks)
    assert [c["capture_id"] for c in result.captures] == [1, 2, 3]
    assert {f.capture_id for f in result.findings} <= {1, 2, 3}
    combined = result.summary["combined"]
    assert combined["capture_count"] == 3
    walls = {c["capture_id"]: c["duration_ns"] for c in result.captures}
    assert combined["slowest"]["capture_id"] == max(walls, key=walls.get)
    # OpenACC on V100 runs 21 s of single-thread kernels: by far the longest of the three
    assert combined["slowest"]["source_name"] == "nsu_v100_openacc.sqlite"
    assert combined["slowest"]["behind_fastest_ns"] == max(walls.values()) - min(walls.values())
    merged = combined["findings"]
    assert sum(len(m["capture_ids"]) for m in merged) == len({(f.rule_id, f.capture_id) for f in result.findings})
    assert sum(m["impact_ns_total"] for m in merged) == sum(f.impact_ns for f in result.findings)
    for m in merged:
        same = [f for f in result.findings if f.rule_id == m["rule_id"]]
        assert m["capture_ids"] == sorted({f.capture_id for f in same})
        assert m["in_all_captures"] == (len(m["capture_ids"]) == 3)
    json.dumps(result.to_dict())  # the combined view is plain JSON


def test_single_capture_has_no_combined_view(ranks):
    result = workflow.analyze(ranks[:1])
    assert "combined" not in result.summary


def _finding(rule_id, capture_id, impact_ns, severity="warning", subject=None):
    f = Finding(rule_id=rule_id, rule_name=rule_id.lower(), severity=severity, title=f"title {rule_id}",
                message="m", capture_id=capture_id, impact_ns=impact_ns, impact_pct=impact_ns / 100)
    if subject is not None:
        f.subject = subject  # the rule's group_by value, when the engine records one
    return f


def test_merging_keys_on_rule_and_subject():
    findings = [_finding("NA1", 1, 10), _finding("NA1", 2, 30, "error"), _finding("NA2", 1, 5, subject="k1"),
                _finding("NA2", 2, 7, subject="k2"), _finding("NA2", 2, 1, subject="k1")]
    result = AnalysisResult(tool={}, captures=[{"capture_id": 1, "duration_ns": 100},
                                               {"capture_id": 2, "duration_ns": 300}],
                            findings=findings, outcomes=[])
    rows = {(m["rule_id"], m["subject"]): m for m in merged_findings(result)}
    assert rows[("NA1", "")]["capture_ids"] == [1, 2]
    assert rows[("NA1", "")]["severity"] == "error"
    assert rows[("NA1", "")]["impact_ns_total"] == 40 and rows[("NA1", "")]["worst_capture_id"] == 2
    assert rows[("NA2", "k1")]["capture_ids"] == [1, 2] and rows[("NA2", "k1")]["impact_ns_total"] == 6
    assert rows[("NA2", "k2")]["capture_ids"] == [2] and not rows[("NA2", "k2")]["in_all_captures"]
    view = combined_view(result)
    assert view["slowest"]["capture_id"] == 2 and view["slowest"]["behind_fastest_pct"] == 200.0


def test_cli_analyze_many_as_json(ranks):
    proc = subprocess.run([sys.executable, "-m", "nsight_advisor", "analyze", *map(str, ranks), "--format", "json"],
                          cwd=REPO, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""  # not a terminal: no progress output
    doc = json.loads(proc.stdout)
    assert [c["source_name"] for c in doc["captures"]] == [p.name for p in ranks]
    assert doc["summary"]["combined"]["slowest"]["source_name"] == "nsu_v100_openacc.sqlite"


def _run_with_terminal_stderr(args: list[str]) -> tuple[int, str]:
    """Run the CLI with stderr on a pseudo-terminal (as in an interactive shell); returns (exit code, stderr)."""
    import pty

    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen([sys.executable, "-m", "nsight_advisor", *args], cwd=REPO, stdout=subprocess.DEVNULL,
                                stderr=slave, env={**os.environ, "PYTHONPATH": str(REPO)})
        os.close(slave)
        chunks = []
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # the child closed its end
                break
            if not data:
                break
            chunks.append(data)
        proc.wait(timeout=600)
    finally:
        os.close(master)
    return proc.returncode, b"".join(chunks).decode("utf-8", "replace")


@pytest.fixture(scope="module")
def replayed(tmp_path_factory) -> list[Path]:
    """Two 100k-kernel replays of a real export (ingest takes well over a second: progress must show)."""
    if not RANKS[0].exists():
        pytest.skip(f"real traces not present at {TRACES}")
    sys.path.insert(0, str(REPO / "benchmarks"))
    from bench_ingest import build_export

    out = tmp_path_factory.mktemp("replay")
    export = build_export(RANKS[0], 100_000, out)
    twin = out / "rank1.sqlite"
    twin.write_bytes(export.read_bytes())
    return [export, twin]


@pytest.mark.slow
def test_progress_on_a_terminal_and_silence_with_quiet(replayed, tmp_path):
    args = ["analyze", *map(str, replayed), "--format", "json", "-o", str(tmp_path / "r.json"), "--no-cache"]
    rc, err = _run_with_terminal_stderr(args)
    assert rc == 0, err
    assert "ingest" in err  # the per-capture / per-table progress line
    rc, err = _run_with_terminal_stderr(args + ["--quiet"])
    assert rc == 0 and err == ""


def test_reports_show_the_combined_view(ranks):
    from nsight_advisor.report import render

    result = workflow.analyze(ranks)
    md = render(result, "md")
    assert "### Across 3 captures" in md
    assert "Slowest: **nsu\\_v100\\_openacc.sqlite**" in md
    html = render(result, "html")
    assert 'id="across-captures"' in html and "nsu_v100_openacc.sqlite" in html
    single = workflow.analyze(ranks[:1])
    assert "Across" not in render(single, "md") and 'id="across-captures"' not in render(single, "html")


DLRM = TRACES / "kineto" / "dlrm_8rank"
KINETO_TABLES = ("captures", "kernels", "api_calls", "cpu_ops", "memcpys", "memsets", "syncs", "nvtx_ranges",
                 "collectives", "capture_distributed", "kernel_occupancy", "gpus", "capture_missing", "ingest_notes")


def _settings(con) -> dict:
    # memory_limit comes back as rounded text ('18.8 GiB'), which a reader's restore sets as such: left out
    return {n: con.execute(f"select current_setting('{n}')").fetchone()[0] for n in ("preserve_insertion_order",)}


def _batches(monkeypatch) -> list[list[int]]:
    """The capture ids of each call of the Kineto reader (ingest_kineto_many), as the calls are made."""
    from nsight_advisor.ingest.kineto import trace

    calls, real = [], trace.ingest_kineto_many
    monkeypatch.setattr(trace, "ingest_kineto_many",
                        lambda con, items, **kw: (calls.append([c for c, _ in items]), real(con, items, **kw))[1])
    return calls


def test_small_pytorch_traces_ingested_together_equal_one_at_a_time(tmp_path, monkeypatch):
    from nsight_advisor.ingest import ingest_captures

    ranks = sorted(DLRM.glob("*.json.gz"))
    if len(ranks) != 8:
        pytest.skip(f"the DLRM ranks are not at {DLRM}")
    items = [(i + 1, p) for i, p in enumerate(ranks)]
    contents, together = {}, _batches(monkeypatch)
    for how in ("one at a time", "together"):
        target = tmp_path / f"{how.replace(' ', '-')}.duckdb"

        def build(con, how=how):
            before = _settings(con)
            if how == "together":
                parallel_ingest.ingest_many(con, items, work_dir=tmp_path)
            else:
                ingest_captures(con, items)
            assert _settings(con) == before  # the reader's own settings do not outlive the ingest

        store_cache.build_store(target, build)
        con = connect(target, read_only=True)
        try:
            contents[how] = {t: con.execute(f"select * exclude (ingested_at) from {t} order by all" if t ==
                                            "captures" else f"select * from {t} order by all").fetchall()
                             for t in KINETO_TABLES}
        finally:
            con.close()
    # one at a time: a call per trace; together: one call for the eight
    assert together == [[i] for i in range(1, 9)] + [list(range(1, 9))]
    assert contents["one at a time"] == contents["together"]
    assert len(contents["together"]["kernels"]) > 8 * 200 and len(contents["together"]["captures"]) == 8
    assert {r[1] for r in contents["together"]["capture_missing"]} >= {"syncs", "gpu_metrics"}


def test_a_bad_trace_among_ones_ingested_together_is_the_first_bad_one_in_order(tmp_path):
    ranks = sorted(DLRM.glob("*.json.gz"))
    if len(ranks) != 8:
        pytest.skip(f"the DLRM ranks are not at {DLRM}")
    first_bad, second_bad = tmp_path / "rank2.json", tmp_path / "rank3.json"
    for bad in (first_bad, second_bad):
        bad.write_text('{"schemaVersion": 1, "traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": "x"')
    items = [(1, ranks[0]), (2, first_bad), (3, second_bad), (4, ranks[1])]
    con = connect(None)
    before = _settings(con)
    try:
        with pytest.raises(InputError, match="rank2.json"):
            parallel_ingest.ingest_many(con, items, work_dir=tmp_path, max_workers=2)
        assert _settings(con) == before
    finally:
        con.close()


def test_pytorch_traces_with_a_name_that_is_not_utf8_are_ingested_one_at_a_time(tmp_path, monkeypatch):
    import os
    import shutil

    ranks = sorted(DLRM.glob("*.json.gz"))
    if len(ranks) != 8:
        pytest.skip(f"the DLRM ranks are not at {DLRM}")
    odd = tmp_path / os.fsdecode(b"rank-\xff.pt.trace.json.gz")  # read through a link (ingest.failures)
    shutil.copy(ranks[1], odd)
    calls = _batches(monkeypatch)
    con = connect(None)
    try:
        parallel_ingest.ingest_many(con, [(1, ranks[0]), (2, odd)], work_dir=tmp_path)
        names = [r[0] for r in con.execute("select source_name from captures order by capture_id").fetchall()]
    finally:
        con.close()
    assert [len(c) for c in calls] == [1, 1]
    assert names[0] == ranks[0].name and len(names) == 2


def _odd_traces(folder: Path) -> list[Path]:
    """Traces whose rows take the ingest's rarer paths: a range-profiler trace (profiled kernels and a note), a
    kernel with a negative duration (dropped, with a note) beside one in a deferred table's span, and one with no
    CUDA activity at all (the missing tables)."""
    ranged = [{"ph": "X", "cat": "cuda_profiler_range", "name": f"kernel_{i % 3}", "pid": 0, "tid": 0,
               "ts": 1000 + 10 * i, "dur": 10, "args": {"device": 0, "gpu__time_duration.sum": 5000.0 + i,
                                                         "sm__throughput.avg.pct_of_peak_sustained_elapsed": 40.0}}
              for i in range(5)]
    kernel = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1.5, "dur": 2,
              "args": {"device": 0, "stream": 7, "correlation": 1, "grid": [1, 1, 1], "block": [32, 1, 1],
                       "est. achieved occupancy %": 12.5}}
    dropped = [kernel, {**kernel, "ts": 9, "dur": -1}, {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1,
                                                       "tid": 1, "ts": 0.25, "dur": 40}]
    host_only = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 5, "dur": 3}]
    paths = []
    for name, events in (("ranged", ranged), ("dropped", dropped), ("host_only", host_only)):
        path = folder / f"{name}.pt.trace.json"
        path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
        paths.append(path)
    return paths


@pytest.mark.parametrize("defer", [(), ("cpu_ops",)])
def test_traces_of_every_shape_ingested_together_equal_one_at_a_time(defer, tmp_path):
    from nsight_advisor.ingest.kineto.trace import ingest_kineto, ingest_kineto_many

    shared = [TRACES / "kineto" / n for n in ("alexnet_trace.json.gz", "hta_nccl_data.json.gz")]
    ranks = sorted(DLRM.glob("*.json.gz"))[:2]
    if not all(p.exists() for p in shared) or len(ranks) != 2:
        pytest.skip(f"the shared PyTorch traces are not at {TRACES / 'kineto'}")
    items = list(enumerate([*shared, *ranks, *_odd_traces(tmp_path)], start=1))
    tables = (*KINETO_TABLES, "kernel_names", "nvtx_domains", "ncu_kernels", "ncu_metrics", "capture_deferred")
    contents = {}
    for how in ("one at a time", "together"):
        con = connect(None)
        try:
            if how == "together":
                ingest_kineto_many(con, items, defer=defer)
            else:
                for cid, path in items:
                    ingest_kineto(con, cid, path, defer=defer)
            contents[how] = {t: con.execute(f"select * exclude (ingested_at) from {t} order by all" if t ==
                                            "captures" else f"select * from {t} order by all").fetchall()
                             for t in tables}
            # what each capture's ingest wrote to the two tables of notes, in the order it wrote them
            contents[how]["order"] = [con.execute(f"select capture_id, data from {t}").fetchall()
                                      for t in ("capture_missing", "ingest_notes")]
        finally:
            con.close()
    assert contents["one at a time"] == contents["together"]
    got = contents["together"]
    assert len(got["ncu_kernels"]) == 5 and len(got["collectives"]) > 0 and len(got["kernel_occupancy"]) > 0
    assert {(r[0], r[1]) for r in got["ingest_notes"]} >= {(5, "ncu_kernels"), (6, "kernels")}
    assert {r[1] for r in got["capture_missing"] if r[0] == 7} >= {"api_calls", "kernels", "gpus"}
    assert (len(got["capture_deferred"]) == len(items)) == bool(defer) and (not got["cpu_ops"]) == bool(defer)
