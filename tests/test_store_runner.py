"""One query per rule over every capture (engine/store_runner): the same findings as one query per capture, on the
8 real DLRM ranks and on small stores where one capture's data breaks a query, a rule is judged in Python, or a
requirement skips some captures."""

from __future__ import annotations

import dataclasses
import json

import pytest

from conftest import TRACES
from nsight_advisor import workflow
from nsight_advisor.engine import runner, store_runner
from nsight_advisor.engine.analyze import read_captures
from nsight_advisor.engine.message_format import RuleRunError
from nsight_advisor.engine.rules import load_rule
from nsight_advisor.engine.store_runner import bind_capture, run_rule_on_captures
from nsight_advisor.store.database import insert_kernels
from test_engine import write_rule

DLRM = TRACES / "kineto" / "dlrm_8rank"


def _queries(monkeypatch) -> list[str]:
    """The rule queries the runner sends from now on."""
    sent: list[str] = []
    real = runner.run_limited

    def counting(con, sql, params, time_limit_s, max_rows):
        sent.append(sql)
        return real(con, sql, params, time_limit_s, max_rows)

    monkeypatch.setattr(runner, "run_limited", counting)
    return sent


def _public(result) -> str:
    doc = dataclasses.asdict(result) if dataclasses.is_dataclass(result) else result
    for outcome in doc["outcomes"]:
        outcome.pop("elapsed_s", None)
    return json.dumps({k: doc[k] for k in ("findings", "outcomes", "captures")}, sort_keys=True, default=str)


def test_dlrm_ranks_get_the_per_capture_findings_from_one_query_per_rule(tmp_path, monkeypatch):
    ranks = sorted(DLRM.glob("*.json.gz"))
    if len(ranks) != 8:
        pytest.skip(f"the DLRM ranks are not at {DLRM}")
    monkeypatch.setenv("NSIGHT_ADVISOR_CACHE", str(tmp_path / "cache"))
    sent = _queries(monkeypatch)
    one = workflow.analyze(ranks, use_cache=False)
    per_rule = len(sent)

    def refuse(*_a, **_k):  # the fallback: every capture on its own, as before store_runner
        raise RuleRunError("forced")

    monkeypatch.setattr(store_runner, "_groups_by_capture", refuse)
    sent.clear()
    each = workflow.analyze(ranks, use_cache=False)
    ran = [o for o in one.outcomes if o.status in ("findings", "clean")]
    assert len(ran) >= 15
    assert per_rule == len(ran)  # one query per rule that ran, whatever the number of ranks
    assert len(sent) >= 8 * len(ran)
    assert len(one.findings) == len(each.findings) == 96
    assert _public(one) == _public(each)


@pytest.fixture
def two_captures(memory_store):
    con = memory_store
    for cid, name in ((1, "a.sqlite"), (2, "b.sqlite")):
        con.execute("insert into captures (capture_id, source_name, format, tool, tool_version, start_ns, end_ns, "
                    "duration_ns) values (?, ?, 'nsys', 'nsys', 'x', 0, 10000000, 10000000)", [cid, name])
    rows = [("stencil", 3_000_000, 1, 0), ("reduce", 1_500_000, 1, 4_000_000), ("other", 4_000_000, 2, 0),
            ("12abc", 2_000_000, 2, 5_000_000)]
    insert_kernels(con, [dict(capture_id=c, device_id=0, name=n, short_name=n, start_ns=s, end_ns=s + d,
                              duration_ns=d) for n, d, c, s in rows])
    return con


def _rule(tmp_path, query: str, judge: str | None = None, requires: str = ""):
    folder = write_rule(tmp_path, "long-kernels", query=query, requires=requires, evidence='["kernel", "max_ms"]',
                        limit=5, message="{rows} kernel(s)")
    if judge:
        (folder / "judge.py").write_text(judge)
    return load_rule(folder)


QUERY = """\
select k.short_name as kernel, max(k.duration_ns) / 1e6 as max_ms,
       cast(sum(greatest(k.duration_ns - $max_ms * 1e6, 0)) as bigint) as impact_ns
from kernels k
where k.capture_id = $capture_id and k.name <> '$capture_id' -- $capture_id in a comment stays
group by k.short_name
"""


def test_one_query_finds_each_captures_own_kernels(two_captures, tmp_path, monkeypatch):
    rule = _rule(tmp_path, QUERY)
    sent = _queries(monkeypatch)
    results = run_rule_on_captures(two_captures, rule, read_captures(two_captures, [1, 2]))
    assert len(sent) == 1
    kernels = {c["capture_id"]: sorted(e["kernel"] for f in r.findings for e in f.evidence) for c, r in results}
    assert kernels == {1: ["reduce", "stencil"], 2: ["12abc", "other"]}
    assert [f.impact_ns for f in results[0][1].findings] == [2_500_000]


def test_a_query_that_fails_on_one_capture_errors_that_capture_alone(two_captures, tmp_path, monkeypatch):
    # the cast fails on capture 2's kernel named "12abc" only: as one query it fails for both, so each capture
    # runs on its own and the error names the capture it belongs to
    rule = _rule(tmp_path, QUERY.replace("select k.short_name as kernel,",
                                         "select k.short_name as kernel, cast(k.name as integer) * 0 + 1 as one,"
                                         ).replace("group by k.short_name", "and k.name <> 'reduce' group by all"))
    bad = rule.query.replace("cast(k.name as integer)", "cast(case when k.name = '12abc' then k.name else '1' end "
                                                       "as integer)")
    rule = dataclasses.replace(rule, query=bad)
    sent = _queries(monkeypatch)
    (c1, r1), (c2, r2) = run_rule_on_captures(two_captures, rule, read_captures(two_captures, [1, 2]))
    assert len(sent) == 3  # the one query, then each capture
    assert r1.status == "findings" and r2.status == "errored" and "12abc" in r2.reason


def test_a_rule_judged_in_python_runs_per_capture(two_captures, tmp_path, monkeypatch):
    rule = _rule(tmp_path, QUERY, judge="def judge(row, params):\n    return row['max_ms'] > params['max_ms']\n")
    sent = _queries(monkeypatch)
    results = run_rule_on_captures(two_captures, rule, read_captures(two_captures, [1, 2]))
    assert len(sent) == 2
    assert [r.status for _, r in results] == ["findings", "findings"]


def test_a_skipped_capture_stays_out_of_the_query(two_captures, tmp_path, monkeypatch):
    two_captures.execute("insert into memcpys (capture_id, device_id, start_ns, end_ns, duration_ns, bytes) "
                         "values (1, 0, 0, 10, 10, 8)")
    rule = _rule(tmp_path, QUERY, requires='[[requires]]\ntable = "memcpys"\ncapture_option = "trace copies"\n')
    results = run_rule_on_captures(two_captures, rule, read_captures(two_captures, [1, 2]))
    assert [r.status for _, r in results] == ["findings", "skipped"]


def test_the_time_limit_covers_every_capture_of_the_one_query(two_captures, tmp_path, monkeypatch):
    limits = []
    real = runner.run_limited
    monkeypatch.setattr(runner, "run_limited", lambda con, sql, params, limit, rows: (
        limits.append(limit), real(con, sql, params, limit, rows))[1])
    run_rule_on_captures(two_captures, _rule(tmp_path, QUERY), read_captures(two_captures, [1, 2]), time_limit_s=7)
    assert limits == [14]


def test_capture_id_is_replaced_outside_strings_comments_and_quoted_names():
    sql = "select \"$capture_id\", '$capture_id' from t where a = $capture_id /* $capture_id */ -- $capture_id\n"
    assert bind_capture(sql, "c.id") == ("select \"$capture_id\", '$capture_id' from t where a = c.id "
                                         "/* $capture_id */ -- $capture_id\n")
    assert bind_capture("where x = $capture_ids", "c") == "where x = $capture_ids"
