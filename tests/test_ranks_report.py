"""Many ranks: the rank x time chart and the per-rank table (summary["ranks"], report/rank_chart.py) on ranks
replayed from a real capture (tests/synthetic_ranks.py), with per-node clock offsets and one slow rank."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import TRACES
from nsight_advisor.engine.combined_view import combined_view
from nsight_advisor.engine.analyze import run_analysis
from nsight_advisor.report import rank_chart
from nsight_advisor.report.html import _environment, render_html
from nsight_advisor.report.markdown import _ranks
from nsight_advisor.store.database import connect
from synthetic_ranks import build_store, jitter

TEMPLATE = TRACES / "kineto" / "dlrm_8rank" / "worker0_step_12.1694128201545.pt.trace.json.gz"
RULES = ("collective-straggler", "exposed-communication", "rank-imbalance")
MAX_HTML_BYTES = 5 * 1024 * 1024


def _analyzed(tmp_path: Path, ranks: int, slow_rank: int):
    if not TEMPLATE.exists():
        pytest.skip(f"real traces not present at {TRACES}")
    store = tmp_path / "ranks.duckdb"
    ids = build_store(TEMPLATE, store, ranks, slow_rank=slow_rank)
    con = connect(store)
    try:
        result = run_analysis(con, sorted(ids.values()), select=RULES)
    finally:
        con.close()
    combined = combined_view(result)
    if combined is not None:
        result.summary["combined"] = combined
    return ids, result


@pytest.mark.slow
def test_64_ranks_name_the_slow_rank_and_undo_the_node_clocks(tmp_path):
    ids, result = _analyzed(tmp_path, 64, slow_rank=37)
    job = result.summary["ranks"][0]
    assert (job["rank_count"], job["matched_collectives"]) == (64, 8)
    by_rank = {r["rank"]: r for r in job["ranks"]}
    # every node's clock is 2.5 s ahead of the previous one's; the ends of the collectives give it back exactly
    # (a replayed collective ends at the same instant on every rank)
    assert all(by_rank[r]["clock_offset_ns"] == -(r // 8) * 2_500_000_000 for r in range(64))
    assert job["clock"] == {"corrected_captures": 56, "max_correction_ns": 17_500_000_000,
                            "max_measured_offset_ns": 17_500_000_000}
    # rank 37 arrives 3 ms (plus its jitter) after the earliest rank at every collective
    assert by_rank[37]["times_last"] == 8 and sum(r["times_last"] for r in job["ranks"]) == 8
    for c in job["collectives"]:
        assert c["last_rank"] == 37 and 3_000_000 <= c["skew_ns"] < 3_050_000
    straggler = [f for f in result.findings if f.rule_name == "collective-straggler"]
    assert len(straggler) == 63 and all(e["last_rank"] == 37 for f in straggler for e in f.evidence)
    # at 64 ranks the chart shows the arrival bands and the outliers, among them the slow rank
    chart = job["chart"]
    assert not chart["all_ranks"] and [b["label"] for b in chart["bands"]] == [
        "earliest arrival", "median arrival", "latest arrival"]
    assert "rank 37 (last 8x)" in [r["label"] for r in chart["rows"]]
    page = render_html(result)
    assert len(page.encode()) < MAX_HTML_BYTES
    assert "56 capture(s) corrected, by up to 17.5 s" in page and "rank 37 (last 8x)" in page
    # up to 64 ranks the table lists every rank
    # the ranks table lists all 64 (the job report's grouped findings may fold their per-rank rows: another table)
    assert len(rank_chart.rank_view(job)["table"]) == 64 and "more ranks not listed. Over all" not in page


@pytest.mark.slow
def test_256_ranks_stay_readable_and_under_5_mb(tmp_path):
    _ids, result = _analyzed(tmp_path, 256, slow_rank=200)
    job = result.summary["ranks"][0]
    assert job["rank_count"] == 256 and job["ranks"][200]["times_last"] == 8
    page = render_html(result)
    assert len(page.encode()) < MAX_HTML_BYTES
    view = rank_chart.rank_view(job)
    assert len(view["rows"]) <= 3 + 8 and view["table_left_out"] > 0
    assert "rank 200 (last 8x)" in page and f"{view['table_left_out']} more ranks not listed" in page


def test_the_ranks_panel_escapes_what_it_shows():
    job = {"job": "<script>alert(1)</script>", "span_ns": 2_000_000, "matched_collectives": 1,
           "clock": {"corrected_captures": 0, "max_correction_ns": 0, "max_measured_offset_ns": 1000},
           "ranks": [{"rank": r, "capture_id": r + 1, "device_id": 0, "kernel_ns": 1, "comm_ns": 2, "wait_ns": 3,
                      "times_last": r, "collectives": 1, "clock_offset_ns": 0} for r in range(2)],
           "chart": {"all_ranks": True, "bands": [],
                     "rows": [{"label": "<b>rank</b>", "rank": 0, "bars": [[0, 1_000_000, "<img src=x>"]]}]}}
    view = rank_chart.rank_view(job)
    page = _environment().get_template("ranks.html.j2").render(ranks=[view])
    assert "<script>" not in page and "<img" not in page and "<b>" not in page
    assert "&lt;script&gt;" in page and "&lt;img src=x&gt;" in page
    assert rank_chart.rank_view({"ranks": []}) is None
    lines = "\n".join(_ranks(job))
    assert "&lt;script&gt;" in lines and "<script>" not in lines
    assert "Arrives last most often: rank 1 (1 of 1 collectives)" in lines and _ranks({"ranks": []}) == []


def test_jitter_stays_under_its_bound():
    assert all(0 <= jitter(r, k, 50_000) < 50_000 for r in range(64) for k in range(8))
