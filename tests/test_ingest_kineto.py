"""PyTorch profiler (Kineto) traces: the ingest against an answer key computed here, independently, with plain
``json`` and ``gzip`` over every trace in ../shared/traces/kineto; timestamps against the file's own digits; the
small tables; detection; and bad input (one line, exit 2, nothing written)."""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from conftest import REPO, TRACES, trace_param
from nsight_advisor.common.errors import InputError
from nsight_advisor.ingest import ingest_capture
from nsight_advisor.ingest.detect import detect_format
from nsight_advisor.store.database import connect

KINETO = TRACES / "kineto"
SLOW = {"hta_ddp_v100_rank1"}  # 216k events: a few seconds to ingest and as many to read with json


def _traces() -> list:
    if not KINETO.exists():
        return trace_param([])
    paths = sorted(KINETO.rglob("*.json.gz"))
    return [pytest.param(p, id=p.name.split(".")[0], marks=[pytest.mark.slow] if p.name.split(".")[0] in SLOW else [])
            for p in paths]


def _ns(text: str) -> int:
    """Microseconds written as ``text`` -> ns, by string arithmetic on the digits (no float anywhere)."""
    assert text.lstrip("-").replace(".", "", 1).isdigit(), f"the key handles plain decimals only: {text!r}"
    whole, _, frac = text.partition(".")
    assert len(frac) <= 3, f"the key is exact for whole nanoseconds only: {text!r}"
    sign = -1 if whole.startswith("-") else 1
    return sign * (abs(int(whole)) * 1000 + int((frac + "000")[:3]))


def _answer_key(path: Path) -> dict:
    """Kernel count and time per name, API calls per name, and every kernel's (correlation, start, end) in ns."""
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        trace = json.load(fh, parse_float=str, parse_int=str)  # numbers as the text the file holds
    kernels: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    apis: dict[str, int] = defaultdict(int)
    spans = set()
    for e in trace["traceEvents"]:
        if e.get("ph") != "X":
            continue
        if e.get("cat") == "kernel":
            start, dur = _ns(e["ts"]), _ns(e["dur"])
            kernels[e["name"]][0] += 1
            kernels[e["name"]][1] += dur
            spans.add((int(e["args"]["correlation"]), start, start + dur))
        elif e.get("cat") in ("cuda_runtime", "cuda_driver"):
            apis[e["name"]] += 1
    return {"kernels": {k: tuple(v) for k, v in kernels.items()}, "apis": dict(apis), "spans": spans}


@pytest.fixture
def store():
    con = connect(None)
    yield con
    con.close()


@pytest.mark.parametrize("trace", _traces())
def test_ingest_equals_the_answer_key(trace: Path, store) -> None:
    key = _answer_key(trace)
    assert key["kernels"] and key["apis"], "every trace here has kernels and API calls"
    ingest_capture(store, 1, trace)
    got_kernels = {n: (c, int(t)) for n, c, t in store.execute(
        "SELECT name, count(*), sum(duration_ns) FROM kernels GROUP BY name").fetchall()}
    assert got_kernels == key["kernels"]
    assert dict(store.execute("SELECT name, count(*) FROM api_calls GROUP BY name").fetchall()) == key["apis"]
    # Every kernel's start and end, in ns, exactly as the file's digits say.
    spans = set(store.execute("SELECT correlation_id, start_ns, end_ns FROM kernels").fetchall())
    assert spans == key["spans"]


def test_fractional_microseconds_become_exact_nanoseconds(store) -> None:
    """hta_nccl_data writes ts with three decimals at ~4.5e12 us: 19 significant digits, past a double's 15-17."""
    trace = KINETO / "hta_nccl_data.json.gz"
    if not trace.exists():
        pytest.skip(f"real traces absent at {TRACES}")
    raw = gzip.open(trace, "rt").read()
    ingest_capture(store, 1, trace)
    # The first kernel of the file, found by its raw text, and its digits.
    at = raw.index('"cat": "kernel"')
    ts_text = raw[raw.index('"ts": ', at) + 6:].split(",", 1)[0]
    dur_text = raw[raw.index('"dur": ', at) + 7:].split(",", 1)[0]
    assert "." in ts_text and len(ts_text.replace(".", "")) >= 16
    row = store.execute("SELECT start_ns, duration_ns FROM kernels WHERE start_ns = ?",
                        [int(ts_text.replace(".", ""))]).fetchall()
    assert row == [(int(ts_text.replace(".", "")), int(dur_text.replace(".", "")))]
    assert float(ts_text) * 1000 != int(ts_text.replace(".", "")), "a float would have rounded this one"


def _ingested(name: str):
    trace = KINETO / name
    if not trace.exists():
        pytest.skip(f"real traces absent at {TRACES}")
    con = connect(None)
    ingest_capture(con, 1, trace)
    return con


def test_gpus_distributed_info_and_collectives() -> None:
    con = _ingested("hta_nccl_data.json.gz")
    assert con.execute("SELECT count(*), min(name), min(sm_count), min(compute_capability), min(total_memory_bytes) "
                       "FROM gpus").fetchone() == (8, "NVIDIA A100-PG509-200", 108, "8.0", 42297524224)
    assert con.execute("SELECT rank, world_size, backend, nccl_version FROM capture_distributed").fetchone() == (
        0, 2, "nccl", "2.17.1")
    # record_param_comms: 15 allreduce + 6 broadcast + 6 wait (the file's own args); Float is 4 bytes per element.
    rows = con.execute("""
        SELECT collective, count(*), bool_and(in_msg_bytes = in_msg_nelems * CASE dtype WHEN 'Float' THEN 4
                                                                        WHEN 'Long' THEN 8 ELSE 1 END)
        FROM collectives WHERE source = 'record_param_comms' GROUP BY 1 ORDER BY 1""").fetchall()
    assert rows == [("allreduce", 15, True), ("broadcast", 6, True), ("wait", 6, True)]
    assert con.execute("SELECT DISTINCT group_ranks FROM collectives WHERE collective = 'allreduce'").fetchall() == [
        ([0, 1],)]
    # Each host-side allreduce is linked to the NCCL kernel it launched, which carries the same message size.
    linked = con.execute("""
        SELECT count(*), count(k.name), bool_and(k.name LIKE 'ncclKernel_AllReduce%'), bool_and(g.in_msg_bytes = c.in_msg_bytes)
        FROM collectives c
        LEFT JOIN kernels k ON k.correlation_id = c.correlation_id
        LEFT JOIN collectives g ON g.source = 'kernel' AND g.correlation_id = c.correlation_id
        WHERE c.source = 'record_param_comms' AND c.collective = 'allreduce'""").fetchone()
    assert linked == (15, 15, True, True)
    con.close()


def test_annotations_domains_and_depth() -> None:
    con = _ingested("hta_nccl_data.json.gz")
    steps = con.execute("SELECT text, depth FROM nvtx_ranges WHERE domain = 'ProfilerStep' ORDER BY start_ns").fetchall()
    assert steps == [("ProfilerStep#4", 0), ("ProfilerStep#5", 0), ("ProfilerStep#6", 0)]
    # '## forward ##' is recorded inside a step on the same thread: one level down.
    assert con.execute("SELECT min(depth) FROM nvtx_ranges WHERE text = '## forward ##'").fetchone()[0] >= 1
    assert con.execute("SELECT count(*) FROM nvtx_ranges WHERE domain = 'gpu_user_annotation'").fetchone()[0] == 30
    con.close()


def test_gpu_rows_get_their_host_process_and_copy_labels() -> None:
    con = _ingested("alexnet_trace.json.gz")
    # Kineto writes the device as a GPU event's pid; the store has the launching process (2869224 in this file).
    assert con.execute("SELECT DISTINCT pid FROM kernels").fetchall() == [(2869224,)]
    assert con.execute("SELECT count(*) FROM kernels WHERE tid IS NULL").fetchone()[0] == 0
    assert con.execute("SELECT DISTINCT direction, src_kind, dst_kind, pid FROM memcpys").fetchall() == [
        ("Host-to-Device", "pageable", "device", 2869224)]
    assert con.execute("SELECT DISTINCT mem_kind FROM memsets").fetchall() == [("device",)]
    assert con.execute("SELECT count(*) FROM syncs WHERE sync_type = 'unknown'").fetchone()[0] == 0
    short = con.execute("SELECT short_name FROM kernels WHERE name LIKE 'void at::native::vectorized_elementwise%' "
                        "LIMIT 1").fetchone()[0]
    assert short == "vectorized_elementwise_kernel"
    assert con.execute("SELECT tool, format FROM captures").fetchone() == ("kineto", "kineto-json")
    assert ("gpu_metrics",) in con.execute("SELECT data FROM capture_missing").fetchall()
    con.close()


def test_detected_by_content_gzipped_or_not(tmp_path: Path) -> None:
    trace = KINETO / "alexnet_trace.json.gz"
    if not trace.exists():
        pytest.skip(f"real traces absent at {TRACES}")
    plain = tmp_path / "trace.txt"  # the name says nothing
    plain.write_bytes(gzip.open(trace).read())
    assert detect_format(trace) == "kineto-json"
    assert detect_format(plain) == "kineto-json"
    con = connect(None)
    ingest_capture(con, 1, plain)
    assert con.execute("SELECT count(*) FROM kernels").fetchone()[0] == 79
    con.close()


# -- bad input ------------------------------------------------------------------------------------------------------

def _trace(events: list, **header) -> bytes:
    return json.dumps({"schemaVersion": 1, **header, "traceEvents": events}).encode()


_KERNEL = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1.5, "dur": 2,
           "args": {"device": 0, "stream": 7, "correlation": 1, "grid": [1, 1, 1], "block": [32, 1, 1]}}


def _bad_inputs() -> dict[str, tuple[str, bytes]]:
    good = gzip.compress(_trace([_KERNEL] * 2000))
    return {
        "truncated-gzip": ("t.json.gz", good[: len(good) // 2]),
        "truncated-json": ("t.json", _trace([_KERNEL] * 50)[:-300]),
        "not-a-trace-json": ("t.json", json.dumps({"hello": [1, 2, 3]}).encode()),
        "not-a-trace-gzip": ("t.json.gz", gzip.compress(json.dumps({"hello": 1}).encode())),
        "no-trace-events": ("t.json", json.dumps({"schemaVersion": 1, "deviceProperties": []}).encode()),
        "trace-events-not-a-list": ("t.json", json.dumps({"schemaVersion": 1, "traceEvents": {"ph": "X"}}).encode()),
        "event-without-ts": ("t.json", _trace([{k: v for k, v in _KERNEL.items() if k != "ts"}])),
        "event-not-an-object": ("t.json", _trace([_KERNEL, 5])),
        "text-timestamp": ("t.json", _trace([{**_KERNEL, "ts": "soon"}])),
        "numeric-name": ("t.json", _trace([{**_KERNEL, "name": 1.5}])),
        "ten-mb-name": ("t.json.gz", gzip.compress(_trace([{**_KERNEL, "name": "k" * (10 << 20)}]))),
    }


@pytest.mark.parametrize("kind", sorted(_bad_inputs()))
def test_bad_kineto_input_exits_2_with_one_line_and_writes_nothing(kind: str, tmp_path: Path) -> None:
    name, data = _bad_inputs()[kind]
    capture = tmp_path / name
    capture.write_bytes(data)
    store = tmp_path / "out.duckdb"
    proc = subprocess.run([sys.executable, "-m", "nsight_advisor", "ingest", str(capture), "--store", str(store)],
                          capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and str(capture) in lines[0] and "Traceback" not in proc.stderr, proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [name], "nothing written beside the input"
    assert capture.read_bytes() == data


@pytest.mark.parametrize("name, said", [(1.5, "the number 1.5"), (7, "the number 7"), (None, "null"),
                                        (True, "true"), ([1], "a list"), ({"a": 1}, "an object")])
def test_a_name_that_is_not_text_is_said_in_json_terms(store, tmp_path: Path, name, said: str) -> None:
    # the parser reads fractions as Decimal: the error names the JSON value, never the Python type behind it
    capture = tmp_path / "t.json"
    capture.write_bytes(_trace([{**_KERNEL, "name": name}]))
    pattern = rf"traceEvents\[0\] \(cat kernel\): name is {re.escape(said)}, not text"
    with pytest.raises(InputError, match=pattern) as err:
        ingest_capture(store, 1, capture)
    assert "Decimal" not in str(err.value) and "NoneType" not in str(err.value)


@pytest.mark.parametrize("args, said", [("wide", "args is the text 'wide', not an object"),
                                        (True, "args is true, not an object"),
                                        ([1, 2], "args is a list, not an object")])
def test_args_that_are_not_an_object_are_named(store, tmp_path: Path, args, said: str) -> None:
    capture = tmp_path / "t.json"
    capture.write_bytes(_trace([{**_KERNEL, "args": args}]))
    with pytest.raises(InputError, match=rf"traceEvents\[0\] \(cat kernel\): {re.escape(said)}$") as err:
        ingest_capture(store, 1, capture)
    assert "attribute" not in str(err.value)  # no Python error text


def test_a_number_field_holding_text_is_said_in_json_terms(store, tmp_path: Path) -> None:
    capture = tmp_path / "t.json"
    copy = {**_KERNEL, "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)",
            "args": {**_KERNEL["args"], "bytes": "many"}}
    capture.write_bytes(_trace([copy]))
    with pytest.raises(InputError, match=r"traceEvents\[0\] \(cat gpu_memcpy\): a number field is the text 'many'$"):
        ingest_capture(store, 1, capture)


def test_bad_event_is_an_input_error_in_the_library(store, tmp_path: Path) -> None:
    capture = tmp_path / "t.json"
    capture.write_bytes(_trace([{**_KERNEL, "args": {"grid": "wide"}}]))
    with pytest.raises(InputError, match=r"traceEvents\[0\] \(cat kernel\): grid/block"):
        ingest_capture(store, 1, capture)


# -- the commands ---------------------------------------------------------------------------------------------------

def _cli(*args: str, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**__import__("os").environ, "NSIGHT_ADVISOR_CACHE": str(tmp_path / "cache")}
    return subprocess.run([sys.executable, "-m", "nsight_advisor", *args], capture_output=True, text=True, cwd=REPO,
                          env=env, timeout=600)


def test_info_and_query_on_a_trace(tmp_path: Path) -> None:
    trace = KINETO / "hta_nccl_data.json.gz"
    if not trace.exists():
        pytest.skip(f"real traces absent at {TRACES}")
    info = _cli("info", str(trace), tmp_path=tmp_path)
    assert info.returncode == 0, info.stderr
    assert "kineto" in info.stdout and "rank 0 of 2, backend nccl" in info.stdout and "allreduce" in info.stdout
    query = _cli("query", str(trace), "select count(*) as n from kernels", "--format", "json", tmp_path=tmp_path)
    assert query.returncode == 0, query.stderr
    assert json.loads(query.stdout) == [{"n": 2700}]


@pytest.mark.slow
def test_analyze_all_eight_dlrm_ranks_at_once(tmp_path: Path) -> None:
    ranks = sorted((KINETO / "dlrm_8rank").glob("*.json.gz"))
    if len(ranks) != 8:
        pytest.skip(f"real traces absent at {TRACES}")
    proc = _cli("analyze", *map(str, ranks), "--format", "json", "-q", tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert [c["source_name"] for c in result["captures"]] == [r.name for r in ranks]
    assert result["summary"]["combined"]["capture_count"] == 8
    assert {o["status"] for o in result["outcomes"]} <= {"findings", "clean", "skipped"}
    assert {f["capture_id"] for f in result["findings"]} == set(range(1, 9))


def test_a_rule_needing_what_kineto_lacks_is_skipped_with_the_reason(tmp_path: Path) -> None:
    """The traces here have no cuda_sync events: a rule that requires syncs is skipped, saying so."""
    from nsight_advisor.authoring.commands import new_rule
    from nsight_advisor.workflow import analyze

    trace = KINETO / "hta_nccl_data.json.gz"
    if not trace.exists():
        pytest.skip(f"real traces absent at {TRACES}")
    rules = tmp_path / "rules"
    new_rule("needs-syncs", rules)
    toml = rules / "needs-syncs" / "rule.toml"
    toml.write_text(toml.read_text().replace('table = "api_calls"', 'table = "syncs"', 1))
    result = analyze([trace], rules_dirs=[rules], select=["needs-syncs"], use_cache=False,
                     store_path=tmp_path / "s.duckdb")
    outcome = next(o for o in result.outcomes if o.rule_name == "needs-syncs")
    assert outcome.status == "skipped"
    assert "no cuda_sync events" in outcome.reason


@pytest.mark.parametrize("event", [
    {**_KERNEL, "args": [1, 2]},
    {**_KERNEL, "args": {**_KERNEL["args"], "grid": 7}},
    {**_KERNEL, "args": {**_KERNEL["args"], "device": "gpu0"}},
    {**_KERNEL, "dur": [1]},
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1, "dur": 1, "pid": "x" * 50, "tid": 1},
    {"ph": "X", "cat": "cuda_runtime", "name": None, "ts": 1, "dur": 1},
], ids=["args-a-list", "grid-a-number", "device-text", "dur-a-list", "pid-text", "name-null"])
def test_events_of_the_wrong_shape_are_input_errors(event: dict, store, tmp_path: Path) -> None:
    capture = tmp_path / "t.json"
    capture.write_bytes(_trace([event]))
    with pytest.raises(InputError, match=str(capture)):
        ingest_capture(store, 1, capture)


def test_analyze_loads_cpu_ops_for_the_host_side_and_query_reads_them(tmp_path: Path) -> None:
    """gpu-idle-gap names the operators the host ran (host_activity reads cpu_ops), so analyze's cached store holds
    them (nothing deferred, rules_reading follows the view to its table) and a query reads them all."""
    trace = KINETO / "hta_nccl_data.json.gz"
    if not trace.exists():
        pytest.skip(f"real traces absent at {TRACES}")
    analyzed = _cli("analyze", str(trace), "--format", "json", "-q", tmp_path=tmp_path)
    assert analyzed.returncode == 0, analyzed.stderr
    capture = json.loads(analyzed.stdout)["captures"][0]
    info = _cli("info", str(trace), "--format", "json", tmp_path=tmp_path)
    described = json.loads(info.stdout)["captures"][0]
    assert described["deferred"] == []
    assert (described["start_ns"], described["end_ns"]) == (capture["start_ns"], capture["end_ns"])
    query = _cli("query", str(trace), "select count(*) as n, min(start_ns) as s from cpu_ops", "--format", "json",
                 tmp_path=tmp_path)
    assert query.returncode == 0, query.stderr
    assert json.loads(query.stdout)[0]["n"] == 14346
    full = _cli("info", str(trace), "--format", "json", tmp_path=tmp_path)
    assert json.loads(full.stdout)["captures"][0]["start_ns"] == capture["start_ns"]


def test_readme_and_help_name_pytorch_profiler_traces(tmp_path: Path) -> None:
    first_paragraph = (REPO / "README.md").read_text(encoding="utf-8").split("\n\n")[1]
    assert "PyTorch profiler" in first_paragraph and ".json.gz" in first_paragraph
    for args in (("--help",), ("analyze", "--help")):
        shown = _cli(*args, tmp_path=tmp_path)
        assert shown.returncode == 0 and "PyTorch profiler (Kineto) traces" in " ".join(shown.stdout.split())
