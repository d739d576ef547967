"""`--executor ray` with no address: the run joins the Ray cluster running on this machine, or starts a local one
for itself, says which on stderr, and gives the local pool's report."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import REPO, TRACES

pytest.importorskip("ray", reason="Ray is not installed (pip install 'nsight-advisor[ray]')")

pytestmark = pytest.mark.slow

DLRM = TRACES / "kineto" / "dlrm_8rank"


def test_no_address_joins_or_starts_a_cluster_and_says_so(tmp_path):
    ranks = sorted(DLRM.glob("*.pt.trace.json.gz"))[:2]
    if len(ranks) != 2:
        pytest.skip(f"real traces not present at {DLRM}")
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    reports = {}
    for executor in ("local", "ray"):
        out = tmp_path / f"{executor}.json"
        proc = subprocess.run([sys.executable, "-m", "nsight_advisor", "analyze", *map(str, ranks), "--no-cache",
                               "-q", "--format", "json", "-o", str(out), "--executor", executor],
                              capture_output=True, text=True, cwd=REPO, timeout=600,
                              env={**env, "NSIGHT_ADVISOR_CACHE": str(tmp_path / f"{executor}-cache")})
        assert proc.returncode == 0, proc.stderr[-3000:]
        if executor == "ray":
            line = proc.stderr.strip().splitlines()[0]
            assert line.startswith(("nsight-advisor: no Ray cluster running; started a local one with ",
                                    "nsight-advisor: joined the running Ray cluster at ")), proc.stderr
        else:
            assert proc.stderr.strip() == ""
        report = json.loads(out.read_text())
        for outcome in report["outcomes"]:
            outcome.pop("elapsed_s", None)
        reports[executor] = report
    assert reports["ray"] == reports["local"]
