"""`--executor ray` on a local Ray cluster (2 CPUs): the same report as the local pool, a killed worker included.

Each test runs the command line twice, with ``--executor local`` and ``--executor ray --ray-address`` this module's
cluster, each with its own cache folder and ``--no-cache`` so that both really ingest; the JSON reports must be
equal but for the rules' run times.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, TRACES
from synthetic_rank_files import write_ranks

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'nsight-advisor[ray]')")

pytestmark = pytest.mark.slow

DLRM = TRACES / "kineto" / "dlrm_8rank"


@pytest.fixture(scope="module")
def ray_address():
    """The address of a local Ray cluster of 2 CPUs started for this module (``local``: never one found running)."""
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()


@pytest.fixture(scope="module")
def dlrm() -> list[Path]:
    files = sorted(DLRM.glob("*.pt.trace.json.gz"))
    if len(files) != 8:
        pytest.skip(f"real traces not present at {DLRM}")
    return files


def _analyze(captures: list[Path], out: Path, *executor: str, env: dict | None = None) -> dict:
    """The JSON report of ``analyze`` with ``executor`` options, without the rules' run times."""
    env = {**os.environ, "NSIGHT_ADVISOR_CACHE": str(out.with_suffix(".cache")), **(env or {})}
    proc = subprocess.run([sys.executable, "-m", "nsight_advisor", "analyze", *map(str, captures), "--no-cache",
                           "-q", "--format", "json", "-o", str(out), *executor],
                          capture_output=True, text=True, cwd=REPO, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(out.read_text())
    for outcome in report["outcomes"]:
        outcome.pop("elapsed_s", None)
    return report


def test_ray_gives_the_local_report_on_the_8_dlrm_ranks(dlrm, ray_address, tmp_path):
    local = _analyze(dlrm, tmp_path / "local.json", "--executor", "local")
    on_ray = _analyze(dlrm, tmp_path / "ray.json", "--executor", "ray", "--ray-address", ray_address)
    assert len(local["captures"]) == 8
    straggler = [f for f in local["findings"] if f["rule_name"] == "collective-straggler"]
    assert straggler and straggler[0]["evidence"][0]["last_rank"] == 7
    assert on_ray == local


def test_ray_gives_the_local_report_on_64_synthetic_ranks(dlrm, ray_address, tmp_path):
    ranks = write_ranks(dlrm[0], tmp_path / "ranks", 64, slow_rank=37)
    local = _analyze(ranks, tmp_path / "local.json")
    on_ray = _analyze(ranks, tmp_path / "ray.json", "--executor", "ray", "--ray-address", ray_address)
    assert len(local["captures"]) == 64
    straggler = [f for f in local["findings"] if f["rule_name"] == "collective-straggler"]
    assert {row["last_rank"] for f in straggler for row in f["evidence"]} == {37}  # the slow rank, every time
    assert on_ray == local


def test_a_worker_killed_during_the_run_is_retried_to_the_same_report(dlrm, ray_address, tmp_path):
    marker = tmp_path / "killed-once"
    local = _analyze(dlrm, tmp_path / "local.json")
    on_ray = _analyze(dlrm, tmp_path / "ray.json", "--executor", "ray", "--ray-address", ray_address,
                      env={"NSIGHT_ADVISOR_TEST_KILL_ONCE": str(marker)})
    assert marker.exists()  # a task did kill its worker (SIGKILL) on its first attempt
    assert on_ray == local


def test_a_bad_capture_on_ray_is_one_line_and_exit_2(dlrm, ray_address, tmp_path):
    bad = tmp_path / "rank8.pt.trace.json"
    bad.write_text('{"traceEvents": [')
    out = tmp_path / "out.json"
    proc = subprocess.run([sys.executable, "-m", "nsight_advisor", "analyze", *map(str, dlrm[:3]), str(bad),
                           "--no-cache", "-q", "-o", str(out), "--executor", "ray", "--ray-address", ray_address],
                          capture_output=True, text=True, cwd=REPO, timeout=600,
                          env={**os.environ, "NSIGHT_ADVISOR_CACHE": str(tmp_path / "cache")})
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith(f"nsight-advisor: {bad}: ")
    assert not out.exists()
