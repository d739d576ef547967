"""Run one rule on every capture of an analysis with one query, not one query per capture.

A rule's ``query.sql`` is written for one capture: it names the capture as ``$capture_id``. Run once per capture,
a many-rank analysis paid each rule's query once per rank (24 rules x 64 ranks: 1,536 queries of 10-20 ms each,
most of the time a 64-rank job took). Here the rule's query becomes the body of a LATERAL join over the
captures' ids, with ``$capture_id`` replaced by the joined id, and the judging query (runner.judge_sql) splits its
windows by capture. DuckDB decorrelates the join into one plan over all captures, so the work is one scan per
table instead of one per capture; the rows are exactly the per-capture query's rows, with the capture's id beside
them. Rules need no change, and a rule written by a user gets the same treatment.

Where the one query cannot give per-capture answers, each capture runs on its own as before
(runner.run_rule_on_capture):

- a rule judged by ``judge.py`` (its candidates are fetched and judged in Python, per capture);
- a single capture (nothing to share);
- a query that fails as one: a construct DuckDB cannot decorrelate, or a runtime error (a cast that fails on one
  capture's data) that per capture names the capture it happens on. A query that runs past its time limit is not
  run again: the limit of the one query is the per-query limit times the number of captures it covers.
"""

from __future__ import annotations

import uuid
from typing import Any, Sequence

from nsight_advisor.engine.message_format import RuleRunError
from nsight_advisor.engine.rule_checks import RuleChecks
from nsight_advisor.engine.rules import Rule, replace_param
from nsight_advisor.engine import runner
from nsight_advisor.engine.runner import CaptureResult, QueryTimeout


def run_rule_on_captures(con, rule: Rule, captures: Sequence[dict], *, time_limit_s: float = runner.DEFAULT_TIME_LIMIT_S,
                         checks: RuleChecks | None = None) -> list[tuple[dict, CaptureResult]]:
    """``rule``'s result on each of ``captures`` (rows of ``captures`` as dicts), in their order; never raises
    for a rule's fault. The same results as :func:`runner.run_rule_on_capture` on each capture."""
    checks = checks if checks is not None else RuleChecks(con, [c["capture_id"] for c in captures])
    results: dict[int, CaptureResult] = {}
    runnable = []
    for capture in captures:
        early = runner.precheck(con, rule, capture["capture_id"], checks)
        if early is not None:
            results[capture["capture_id"]] = early
        else:
            runnable.append(capture)
    grouped = None
    if len(runnable) > 1 and rule.judge is None:
        try:
            grouped = _groups_by_capture(con, rule, [c["capture_id"] for c in runnable],
                                         time_limit_s * len(runnable), checks)
        except QueryTimeout as exc:
            for capture in runnable:
                results[capture["capture_id"]] = CaptureResult("errored", reason=str(exc))
            runnable = []
        except RuleRunError:
            grouped = None  # each capture on its own, which names the capture an error belongs to
    for capture in runnable:
        cid = capture["capture_id"]
        if grouped is None:
            results[cid] = runner.run_rule_on_capture(con, rule, capture, time_limit_s=time_limit_s, checks=checks)
        else:
            results[cid] = runner.capture_result(rule, capture, grouped.get(cid, []))
    return [(c, results[c["capture_id"]]) for c in captures]


def _groups_by_capture(con, rule: Rule, ids: list[int], time_limit_s: float,
                       checks: RuleChecks) -> dict[int, list[Any]]:
    base = checks.single_select(rule.query, runner.check_single_select)
    tag = uuid.uuid4().hex[:8]
    by = f"na_capture_{tag}"
    params = runner.bind_params(rule, base, 0)
    params.pop("capture_id", None)
    ids_param = f"na_ids_{tag}"
    params[ids_param] = [int(i) for i in ids]
    lateral = (f"select na_c_{tag}.capture_id as {by}, na_r_{tag}.* "
               f"from (select unnest(${ids_param}::integer[]) as capture_id) na_c_{tag}, "
               f"lateral ({bind_capture(base, f'na_c_{tag}.capture_id')}\n) na_r_{tag}")
    sql, threshold = runner.judge_sql(rule, lateral, tag, by=by)
    params.update(threshold)
    limit = len(ids) * runner.MAX_GROUPS * rule.finding.evidence_limit + 1
    columns, rows = runner.run_limited(con, sql, params, time_limit_s, limit)
    out: dict[int, list[Any]] = {}
    for (cid, _), group in runner.read_groups(rule, columns, rows, tag, by=by).items():
        out.setdefault(int(cid), []).append(group)
    return out


def bind_capture(sql: str, column: str) -> str:
    """``sql`` with each ``$capture_id`` outside comments, strings and quoted names replaced by ``column``."""
    return replace_param(sql, "capture_id", column)


__all__ = ["run_rule_on_captures", "bind_capture"]
