"""Nsight Compute pairs: per-kernel metric deltas. The SGEMM ladder (esmm_a10g_sgemm.ncu-rep: seven kernels, each
a step of the same optimization tutorial, then cuBLAS twice) compared rung to rung, with every number checked
against the raw metrics the report holds; and the CSV version pairs (same run, two exporters) moving nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import TRACES
from test_compare import _cli, _need

LADDER = TRACES / "ncu" / "esmm_a10g_sgemm.ncu-rep"


@pytest.fixture(scope="module")
def ladder(tmp_path_factory):
    _need(LADDER)
    import os

    from nsight_advisor import workflow
    from nsight_advisor.compare.ncu import ncu_kernel_metrics

    cache = tmp_path_factory.mktemp("cache")
    old = os.environ.get("NSIGHT_ADVISOR_CACHE")
    os.environ["NSIGHT_ADVISOR_CACHE"] = str(cache)
    try:
        con, ids = workflow.load([LADDER], for_rules=True)
        try:
            metrics = ncu_kernel_metrics(con, ids)
            raw = con.execute(
                "SELECT k.kernel_id, k.name, k.duration_ns, m.value FROM ncu_kernels k LEFT JOIN ncu_metrics m ON "
                "m.capture_id = k.capture_id AND m.kernel_id = k.kernel_id AND "
                "m.metric = 'sm__throughput.avg.pct_of_peak_sustained_elapsed' ORDER BY k.kernel_id").fetchall()
        finally:
            con.close()
    finally:
        if old is None:
            os.environ.pop("NSIGHT_ADVISOR_CACHE")
        else:
            os.environ["NSIGHT_ADVISOR_CACHE"] = old
    return metrics, raw


def test_ladder_rung_to_rung(ladder) -> None:
    from nsight_advisor.compare.ncu import metric_deltas

    metrics, raw = ladder
    # one key per rung; cuBLAS's kernel profiled twice under one key, its metrics the mean of both profiles
    rungs = [k for k in metrics if metrics[k]["profiles"] == 1]
    assert len(rungs) == 7 and len(metrics) == 8
    cublas = next(k for k in metrics if metrics[k]["profiles"] == 2)
    assert metrics[cublas]["duration_ns"] == pytest.approx((raw[7][2] + raw[8][2]) / 2)
    by_name = {name: (duration, sm) for _, name, duration, sm in raw}
    order = [next(k for k in rungs if k.startswith(name)) for _, name, _, _ in raw[:7]]
    for before, after in zip(order, order[1:]):
        d = metric_deltas(metrics[before], metrics[after])
        (b_ns, b_sm), (a_ns, a_sm) = by_name[before.rsplit(" <<<", 1)[0]], by_name[after.rsplit(" <<<", 1)[0]]
        duration = d["metrics"][0]
        assert duration["change_pct"] == pytest.approx(100.0 * (a_ns / b_ns - 1.0))
        assert duration["change_pct"] < 0  # every rung of the ladder is faster than the one before
        sm = next(m for m in d["metrics"] if m["metric"] == "sm_throughput_pct")
        assert sm["change"] == pytest.approx(a_sm - b_sm)
        moved_sm = [e for e in d["explains"] if e.startswith("SM throughput")]
        assert bool(moved_sm) == (abs(a_sm - b_sm) >= 5.0)
        if moved_sm:
            assert f"{b_sm:.1f}% → {a_sm:.1f}%" in moved_sm[0]
    # the first step (coalesced global loads) moves the SM throughput from about a tenth to most of its peak
    first = metric_deltas(metrics[order[0]], metrics[order[1]])
    assert first["explains"][0].startswith("SM throughput")
    # cuBLAS against itself: nothing moves
    assert metric_deltas(metrics[cublas], metrics[cublas])["explains"] == []


@pytest.mark.parametrize("stem", ["sgemm_rtx2080ti.details", "monte_carlo_pi.raw"])
def test_csv_version_pair_moves_no_metric(stem: str, tmp_path: Path) -> None:
    base = TRACES / "ncu-csv" / f"{stem}.ncu2022.3.csv"
    head = TRACES / "ncu-csv" / f"{stem}.ncu2024.1.csv"
    _need(base, head)
    out = tmp_path / "c.json"
    assert _cli("compare", str(base), str(head), "-o", str(out), cwd=tmp_path).returncode == 0
    data = json.loads(out.read_text())
    assert data["ncu_kernels"] and len(data["ncu_kernels"]) == len(data["kernels"])
    for k in data["ncu_kernels"]:
        assert k["duration_change_pct"] == 0 and k["explains"] == []
        assert sum(m["base"] is not None for m in k["metrics"]) >= 5
    md = _cli("compare", str(base), str(head), cwd=tmp_path).stdout
    assert "### Nsight Compute metrics" in md and "no metric moved beyond the thresholds" in md
