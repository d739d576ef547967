"""The public Python API (nsight_advisor.open -> Analysis): docs/api.md runs as written, the API agrees with the
CLI on a real capture, findings render escaped in Jupyter, and a store can be read while another process holds it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

import nsight_advisor
from conftest import REPO, TRACES
from nsight_advisor.api import findings_html
from nsight_advisor.common.errors import InputError

SAMPLE = REPO / "sample_traces" / "demo_training_step.sqlite"
MFU_BEFORE = TRACES / "nsys" / "nsys_ai_mfu_2gpu_before.sqlite"
MFU_AFTER = TRACES / "nsys" / "nsys_ai_mfu_2gpu_after.sqlite"


@pytest.fixture()
def cache(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("NSIGHT_ADVISOR_CACHE", str(folder))
    return folder


def _cli(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nsight_advisor", *args], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=300)


def python_blocks(markdown: str) -> list[str]:
    """The ```python blocks of a Markdown page, in order."""
    return re.findall(r"^```python\n(.*?)^```", markdown, flags=re.S | re.M)


def test_docs_api_examples_run(tmp_path, cache, monkeypatch, capsys):
    """Every example of docs/api.md runs as written, in order, in one namespace (their asserts included), from a
    folder laid out like the repository's root."""
    blocks = python_blocks((REPO / "docs" / "api.md").read_text(encoding="utf-8"))
    assert len(blocks) >= 8
    (tmp_path / "sample_traces").symlink_to(REPO / "sample_traces")
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    for n, block in enumerate(blocks, 1):
        try:
            exec(compile(block, f"docs/api.md example {n}", "exec"), namespace)
        except Exception as exc:  # noqa: BLE001 - name the example that failed
            pytest.fail(f"docs/api.md example {n} failed: {type(exc).__name__}: {exc}\n{block}")
    printed = capsys.readouterr().out
    assert "ampere_sgemm_128x64_nn" in printed and "no change" in printed


def test_api_findings_are_the_cli_json(tmp_path, cache):
    """On a real capture the API's findings and accounting are the ones `analyze --format json` writes."""
    if not MFU_BEFORE.exists():
        pytest.skip(f"real traces not present at {TRACES}")
    proc = _cli("analyze", str(MFU_BEFORE), "--format", "json", "-q", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    run = nsight_advisor.open(MFU_BEFORE)
    findings = run.findings()
    assert list(findings["rule_id"]) == [f["rule_id"] for f in data["findings"]]
    assert list(findings["impact_ns"]) == [f["impact_ns"] for f in data["findings"]]
    accounting = run.accounting()
    assert len(accounting) == sum(len(c["accounting"]) for c in data["captures"]) == 2  # two GPUs
    assert list(accounting["idle_ns"]) == [a["idle_ns"] for c in data["captures"] for a in c["accounting"]]
    kernels = run.kernels()
    assert len(kernels) == run.query("select count(*) as n from kernels")["n"].iloc[0] > 0
    arrow = run.findings_arrow()
    assert arrow.num_rows == len(findings) and arrow.column("rule_id").to_pylist() == list(findings["rule_id"])


def test_compare_two_real_runs(cache):
    """compare(other) on the before/after pair gives the dict `compare --format json` prints, with the transformer
    blocks found as iterations on both sides."""
    if not MFU_AFTER.exists():
        pytest.skip(f"real traces not present at {TRACES}")
    before, after = nsight_advisor.open(MFU_BEFORE), nsight_advisor.open(MFU_AFTER)
    comparison = before.compare(after)
    assert comparison["base"]["name"] == MFU_BEFORE.name and comparison["head"]["name"] == MFU_AFTER.name
    assert comparison["verdict"]["status"] in ("faster", "slower", "no change")
    assert list(before.iterations()["count"]) == [17] and list(after.iterations()["count"]) == [15]


def test_findings_html_escapes_capture_strings():
    """A kernel name or title carrying markup shows as text in the notebook table, never as markup."""
    import pandas as pd

    evil = '<script>alert("k")</script><img src=x onerror=alert(1)>'
    frame = pd.DataFrame([{"severity": "error", "rule_id": "NA101", "rule_name": "small-grid", "title": evil,
                           "impact_ns": 1500, "impact_pct": 12.5, "capture_id": 1, "device_id": 0}])
    html = findings_html(frame)
    assert "<script>" not in html and "<img" not in html
    assert "&lt;script&gt;alert(&quot;k&quot;)&lt;/script&gt;" in html
    assert "<td>1.5 µs</td>" in html and "<td>12.5%</td>" in html


def test_analyze_to_a_file_prints_one_line(tmp_path, cache):
    """`analyze -o FILE` prints one line: the findings by severity, the top one, and where the report went."""
    out = tmp_path / "advice.md"
    proc = _cli("analyze", str(SAMPLE), "-o", str(out), "-q", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 1, proc.stdout
    assert re.fullmatch(r"6 findings \(3 error, 1 warning, 2 info\); top: error NA601 low-tensor-core-use: .+; "
                        r"report: .+advice\.md", lines[0]), lines[0]
    assert out.is_file()
    # to stdout (no -o, -o -, or a path that is stdout), the report alone
    for args in ([], ["-o", "-"], ["-o", "/dev/stdout"]):
        proc = _cli("analyze", str(SAMPLE), "--format", "json", "-q", *args, cwd=tmp_path)
        assert json.loads(proc.stdout)["findings"][0]["rule_id"] == "NA601", args


def test_store_is_read_while_another_process_holds_it(tmp_path, cache):
    """A store that another process has open (read-only, as `analyze` and `query` open it) is read by the API."""
    store = tmp_path / "run.duckdb"
    assert _cli("ingest", str(SAMPLE), "--store", str(store), "-q", cwd=tmp_path).returncode == 0
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from nsight_advisor.store.database import connect; "
         "con = connect(sys.argv[1], read_only=True); con.execute('select count(*) from kernels').fetchall(); "
         "print('holding', flush=True); time.sleep(60)", str(store)],
        cwd=tmp_path, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "holding"
        run = nsight_advisor.open(store)
        started = time.monotonic()
        assert run.query("select count(*) as n from kernels")["n"].iloc[0] == 378
        assert run.findings()["rule_id"].iloc[0] == "NA601"
        assert time.monotonic() - started < 60
    finally:
        holder.kill()
        holder.wait()


def test_bad_input_raises_input_error(tmp_path, cache):
    """A missing capture fails at open; SQL that reaches for files or fails is one InputError line."""
    with pytest.raises(InputError, match="no such file"):
        nsight_advisor.open(tmp_path / "missing.sqlite")
    run = nsight_advisor.open(SAMPLE)
    with pytest.raises(InputError, match="query failed"):
        run.query(f"copy kernels to '{tmp_path / 'leak.csv'}'")
    assert not (tmp_path / "leak.csv").exists()
    with pytest.raises(InputError, match="query failed"):
        run.query("select no_such_column from kernels")
    with pytest.raises(InputError, match="unknown format"):
        run.report("pdf")
