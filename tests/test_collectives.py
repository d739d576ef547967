"""Collectives per rank, matched across ranks (schema/views/34_collectives.sql), and exposed communication in the
time partition (comm_ns), on the real multi-rank captures."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from conftest import TRACES
from nsight_advisor import workflow
from nsight_advisor.report.html import render_html
from nsight_advisor.report.markdown import render_markdown
from nsight_advisor.store.database import connect
from nsight_advisor.common.text import format_duration_ns

DLRM = sorted((TRACES / "kineto" / "dlrm_8rank").glob("*.pt.trace.json.gz"))
MFU_BEFORE = TRACES / "nsys" / "nsys_ai_mfu_2gpu_before.sqlite"
MFU_AFTER = TRACES / "nsys" / "nsys_ai_mfu_2gpu_after.sqlite"
H100 = TRACES / "nsys" / "nsys_ai_h100_2gpu_1s.sqlite"


def _need(*paths: Path) -> None:
    if not paths or not all(p.exists() for p in paths):
        pytest.skip(f"real traces not present at {TRACES}")


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("NSIGHT_ADVISOR_CACHE", str(tmp_path / "cache"))


def _store(paths, tmp_path: Path, name: str = "s.duckdb"):
    store = tmp_path / name
    workflow.ingest_to_store(paths, store)
    return connect(store, read_only=True)


def dlrm_first_nccl_kernels(collective: str) -> dict[int, tuple[int, int]]:
    """Rank -> (start ns, end ns) of its first NCCL kernel of ``collective``, read straight from the JSON."""
    out = {}
    for path in DLRM:
        doc = json.loads(gzip.decompress(path.read_bytes()))
        kernels = sorted((e for e in doc["traceEvents"] if e.get("cat") == "kernel"
                          and e["name"].startswith(f"ncclKernel_{collective}_")), key=lambda e: e["ts"])
        first = kernels[0]
        out[doc["distributedInfo"]["rank"]] = (round(first["ts"] * 1000), round((first["ts"] + first["dur"]) * 1000))
    return out


def test_dlrm_first_sendrecv_matches_a_direct_computation_over_the_json(tmp_path):
    _need(*DLRM)
    direct = dlrm_first_nccl_kernels("SendRecv")
    starts = {rank: s for rank, (s, _e) in direct.items()}
    last = max(starts, key=starts.get)
    first = min(starts, key=starts.get)
    con = _store(DLRM, tmp_path)
    rows = con.execute("""
        select rank, start_ns, skew_ns, wait_ns, last_rank, longest_wait_rank, ranks, end_spread_ns
        from collective_ranks where collective = 'SendRecv' and "index" = 1 order by rank""").fetchall()
    assert [r[0] for r in rows] == list(range(8))
    assert {r[0]: r[1] for r in rows} == starts
    skew = max(starts.values()) - min(starts.values())
    assert (last, first) == (7, 1)
    assert 7.5e6 < skew < 7.7e6  # "start up to 7.6 ms apart"
    for rank, _start, skew_ns, wait_ns, last_rank, longest, ranks, end_spread in rows:
        assert (skew_ns, last_rank, longest, ranks) == (skew, last, first, 8)
        assert wait_ns == starts[last] - starts[rank]
        assert end_spread <= 2000  # every rank ends within a couple of microseconds
    # one clock already (one host): the measured offsets are microseconds, below the 10 us the view corrects
    offsets = con.execute("select max(abs(measured_offset_ns)), max(abs(offset_ns)) from collective_clock_offsets").fetchone()
    assert offsets[0] < 10_000 and offsets[1] == 0
    # 5 SendRecv + 3 AllReduce on every rank, all matched
    counts = con.execute("select collective, count(*) from collective_ranks group by all order by all").fetchall()
    assert counts == [("AllReduce", 24), ("SendRecv", 40)]


def test_a_rank_on_another_clock_is_aligned_by_the_collective_ends(tmp_path):
    _need(*DLRM)
    shift_us = 3_000_000  # rank 3's host clock 3 s ahead
    paths = []
    for path in DLRM:
        doc = json.loads(gzip.decompress(path.read_bytes()))
        if doc["distributedInfo"]["rank"] == 3:
            for e in doc["traceEvents"]:
                if "ts" in e:
                    e["ts"] = e["ts"] + shift_us
        out = tmp_path / path.name.replace(".gz", "")
        out.write_text(json.dumps(doc))
        paths.append(out)
    con = _store(paths, tmp_path)
    offset, measured = con.execute("""
        select offset_ns, measured_offset_ns from collective_clock_offsets o join comm_ranks r using (capture_id)
        where r.rank = 3""").fetchone()
    assert offset == measured and abs(offset + shift_us * 1000) < 10_000
    direct = dlrm_first_nccl_kernels("SendRecv")
    skew = max(s for s, _ in direct.values()) - min(s for s, _ in direct.values())
    got = con.execute("""select any_value(skew_ns), any_value(last_rank), any_value(longest_wait_rank)
                         from collective_ranks where collective = 'SendRecv' and "index" = 1""").fetchone()
    assert abs(got[0] - skew) < 10_000 and got[1:] == (7, 1)


def test_two_ranks_in_one_capture_match_their_sendrecv(tmp_path):
    _need(MFU_BEFORE, MFU_AFTER)
    con = _store([MFU_BEFORE, MFU_AFTER], tmp_path)
    ranks = con.execute("select capture_id, device_id, job, rank, rank_source from comm_ranks order by all").fetchall()
    assert ranks == [(1, 0, "capture 1", 0, "device order"), (1, 1, "capture 1", 1, "device order"),
                     (2, 0, "capture 2", 0, "device order"), (2, 1, "capture 2", 1, "device order")]
    per_rank = con.execute("""
        select capture_id, rank, count(*), sum(end_ns - start_ns), sum(wait_ns) from collective_ranks
        where collective = 'SendRecv' group by all order by all""").fetchall()
    assert [r[:3] for r in per_rank] == [(1, 0, 33), (1, 1, 33), (2, 0, 31), (2, 1, 31)]
    nccl_ms = [round(r[3] / 1e6, 2) for r in per_rank]
    assert nccl_ms == [17.17, 8.23, 9.99, 23.75]
    # the skew flips: before, rank 0 waits for rank 1; after, rank 1 waits for rank 0
    waits = {(c, r): w for c, r, _n, _t, w in per_rank}
    assert waits[(1, 0)] > 4 * waits[(1, 1)] and waits[(2, 1)] > 4 * waits[(2, 0)]


def test_exposed_communication_is_split_out_of_kernel_time(tmp_path):
    _need(MFU_BEFORE, MFU_AFTER, H100)
    con = _store([MFU_BEFORE, MFU_AFTER, H100], tmp_path)
    comm = dict(((c, d), ns) for c, d, ns in con.execute("""
        select capture_id, device_id, duration_ns from gpu_time_partition where part = 'comm'""").fetchall())
    nccl = dict(((c, d), ns) for c, d, ns in con.execute("""
        select capture_id, device_id, sum(duration_ns) from gpu_ops where comm group by all""").fetchall())
    # the SendRecv kernels of this job never overlap a compute kernel on their GPU: all of their time is exposed
    assert comm == nccl
    assert [round(comm[k] / 1e6, 2) for k in sorted(comm)] == [17.17, 8.23, 9.99, 23.75]
    assert not con.execute("select count(*) from collective_ops where capture_id = 3").fetchone()[0]
    # the partition still adds up to the window on every device
    bad = con.execute("""
        select p.capture_id, p.device_id from gpu_time_partition p join analysis_window w using (capture_id)
        group by p.capture_id, p.device_id, w.duration_ns having sum(p.duration_ns) <> w.duration_ns""").fetchall()
    assert bad == []



RULES = ("collective-straggler", "exposed-communication", "rank-imbalance")


def _analysis(paths, *, html: bool = False, window: str | None = None):
    result = workflow.analyze(list(paths), use_cache=False, select=RULES, window=window)
    doc = json.loads(json.dumps(result.to_dict()))
    return (doc, render_html(result), render_markdown(result)) if html else doc


def test_dlrm_straggler_names_rank_7_last_and_rank_1_the_longest_waiter():
    _need(*DLRM)
    direct = dlrm_first_nccl_kernels("SendRecv")
    starts = {rank: s for rank, (s, _e) in direct.items()}
    skew = max(starts.values()) - min(starts.values())
    doc, page, markdown = _analysis(DLRM, html=True)
    straggler = [f for f in doc["findings"] if f["rule_name"] == "collective-straggler"]
    rows = [e for f in straggler for e in f["evidence"] if e["collective"] == "SendRecv" and e["index"] == 1]
    assert rows, "no evidence row for the first SendRecv"
    for e in rows:
        assert (e["last_rank"], e["longest_wait_rank"]) == (max(starts, key=starts.get), min(starts, key=starts.get))
        assert (e["last_rank"], e["longest_wait_rank"]) == (7, 1)
        assert e["skew_ns"] == e["wait_ns"] == skew and round(skew / 1e6, 1) == 7.6
    # the longest waiter's finding leads with that wait; rank 7 arrives last most often
    rank1 = next(f for f in straggler if "Rank 1 (GPU 1)" in f["message"])
    top = rank1["evidence"][0]
    assert (top["collective"], top["index"], top["rank_wait_ns"]) == ("SendRecv", 1, starts[7] - starts[1])
    assert "Rank 7 arrives last at 5 of the job's 8 matched collectives" in rank1["message"]
    # rank 7 never waits at the first SendRecv: no row for it there
    rank7 = [f for f in straggler if "Rank 7 (GPU 7)" in f["message"]]
    assert all(not (e["collective"] == "SendRecv" and e["index"] == 1) for f in rank7 for e in f["evidence"])
    # the report's ranks panel: every rank in the chart and the table, one clock (no correction)
    job = doc["summary"]["ranks"][0]
    assert (job["job"], job["rank_count"], job["matched_collectives"]) == ("world of 8", 8, 8)
    assert [r["rank"] for r in job["chart"]["rows"]] == list(range(8)) and job["chart"]["all_ranks"]
    assert [r["times_last"] for r in job["ranks"]][7] == 5
    assert '<div class="panel" id="ranks-1">' in page and page.count("<title>rank 7: SendRecv") == 5
    assert "no correction applied" in page
    assert "- Arrives last most often: rank 7 (5 of 8 collectives)" in markdown
    assert "- Waits longest for late ranks: rank 1, " in markdown


def test_mfu_pair_exposed_communication_per_rank_never_counts_a_wait_twice():
    _need(MFU_BEFORE, MFU_AFTER)
    # NCCL time per rank over the whole capture (the steady-state window of the after run starts a little later)
    expected_comm_ms = {"before": (17.17, 8.23), "after": (9.99, 23.75)}
    docs = {"before": _analysis([MFU_BEFORE], window="all"), "after": _analysis([MFU_AFTER], window="all")}
    for side, doc in docs.items():
        comm = {a["device_id"]: a["comm_ns"] for a in doc["captures"][0]["accounting"]}
        assert tuple(round(comm[d] / 1e6, 2) for d in (0, 1)) == expected_comm_ms[side]
        claimed = {d: 0 for d in comm}
        for f in doc["findings"]:
            if f["rule_name"] in ("collective-straggler", "exposed-communication"):
                claimed[f["device_id"]] += f["impact_ns"]
        for d in comm:
            assert 0 < claimed[d] <= comm[d], (side, d)
        exposed = {f["device_id"]: f for f in doc["findings"] if f["rule_name"] == "exposed-communication"}
        assert set(exposed) == {0, 1}
        for d, f in exposed.items():
            assert f"communicates {format_duration_ns(comm[d])} with no compute running" in f["message"]
    # the skew flips: before, rank 0 waits longest; after, rank 1
    waits = {side: {f["device_id"]: f["impact_ns"] for f in doc["findings"] if f["rule_name"] == "collective-straggler"}
             for side, doc in docs.items()}
    assert waits["before"][0] > 4 * waits["before"][1] and waits["after"][1] > 4 * waits["after"][0]


def test_two_gpus_without_communication_stay_silent():
    _need(H100)
    doc = _analysis([H100])
    assert [o["status"] for o in doc["outcomes"]] == ["clean"] * 3
    assert all(a["comm_ns"] == 0 for a in doc["captures"][0]["accounting"])


def test_ddp_rank_without_its_partner_exposes_every_allreduce():
    kineto = TRACES / "kineto" / "hta_ddp_v100_rank1.json.gz"
    _need(kineto)
    doc = _analysis([kineto])
    (acc,) = doc["captures"][0]["accounting"]
    # 2,020 AllReduce kernels (357.343 ms); none of them runs beside a compute kernel in this trace, so all of
    # their time is exposed; rank 0 of the job is not in the set, so nothing is matched and no rank is a straggler
    assert acc["comm_ns"] == 357_343_000
    status = {o["rule_id"]: o["status"] for o in doc["outcomes"]}
    assert status == {"NA701": "clean", "NA702": "findings", "NA703": "clean"}
    (f,) = [f for f in doc["findings"] if f["rule_name"] == "exposed-communication"]
    assert f["impact_ns"] == acc["comm_ns"] and f["evidence"][0]["kernels"] == 2020
    assert f["evidence"][0]["collective"] == "AllReduce"
