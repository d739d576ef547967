"""The CLI on real exports and on the bundled sample: ingest, info, query in every format."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, TRACES

SAMPLE = REPO / "sample_traces" / "demo_training_step.sqlite"
H100 = TRACES / "nsys" / "nsys_ai_h100_2gpu_1s.sqlite"


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "NSIGHT_ADVISOR_CACHE": str(cwd / "cache")}
    return subprocess.run([sys.executable, "-m", "nsight_advisor", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.fixture
def h100() -> Path:
    if not H100.exists():
        pytest.skip(f"real traces absent at {TRACES}")
    return H100


def test_info_on_sample(tmp_path: Path) -> None:
    proc = _cli("info", str(SAMPLE), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "nsys 2024.6.2.225" in out
    assert "NVIDIA A100-SXM4-40GB: 108 SMs, CC 8.0" in out
    assert "ampere_sgemm_128x64_nn" in out
    assert "gpu_metrics" in out and "--gpu-metrics-devices=all" in out


def test_info_json_on_real_export(tmp_path: Path, h100: Path) -> None:
    proc = _cli("info", str(h100), "--format", "json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    desc = json.loads(proc.stdout)
    cap = desc["captures"][0]
    assert cap["tool"] == "nsys" and cap["tool_version"] == "2026.2.1.210"
    assert cap["rows"]["kernels"] == 3442 and cap["rows"]["nvtx_ranges"] == 16782
    assert [g["device_id"] for g in cap["gpus"]] == [0, 1]
    assert {m["data"] for m in cap["missing"]} == {"gpus", "gpu_metrics", "backtraces"}
    assert cap["duration_ns"] > 0


def test_ingest_then_query_formats(tmp_path: Path, h100: Path) -> None:
    store = tmp_path / "run.duckdb"
    proc = _cli("ingest", str(h100), str(SAMPLE), "--store", str(store), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "capture_id 1, 2" in proc.stdout
    sql = "select capture_id, count(*) as n from kernels group by 1 order by 1"
    as_json = json.loads(_cli("query", str(store), sql, "--format", "json", cwd=tmp_path).stdout)
    assert as_json[0] == {"capture_id": 1, "n": 3442} and as_json[1]["capture_id"] == 2
    as_csv = list(csv.reader(io.StringIO(_cli("query", str(store), sql, "--format", "csv", cwd=tmp_path).stdout)))
    assert as_csv[0] == ["capture_id", "n"] and as_csv[1] == ["1", "3442"]
    table = _cli("query", str(store), sql, cwd=tmp_path).stdout.splitlines()
    assert table[0].split() == ["capture_id", "n"] and set(table[1]) <= {"-", " "} and table[2].split() == ["1", "3442"]


def test_query_on_a_capture_directly(tmp_path: Path) -> None:
    proc = _cli("query", str(SAMPLE), "select count(*) as n from syncs", "--format", "json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)[0]["n"] > 0


def test_bad_sql_is_exit_2(tmp_path: Path) -> None:
    proc = _cli("query", str(SAMPLE), "select nope from nowhere", cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
