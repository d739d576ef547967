"""Run one rule on one capture: check its requirements, run its query safely, judge rows, build findings.

Safety: the caller disables external access on the database (no files, no extensions, no ATTACH), the rule's
text must be exactly one SELECT, every query runs on its own cursor that a timer interrupts after the time
limit, and at most a bounded number of rows is ever fetched.
"""

from __future__ import annotations

import math
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import duckdb

from nsight_advisor.common import sql_params
from nsight_advisor.common.sql_params import quote_ident
from nsight_advisor.common.json_values import jsonable
from nsight_advisor.common.text import format_duration_ns
from nsight_advisor.catalog import get_principle
from nsight_advisor.engine import advice
from nsight_advisor.engine.message_format import RuleRunError, format_message, message_fields  # noqa: F401
from nsight_advisor.engine.model import SEVERITIES, Finding, PrincipleRef, severity_rank
from nsight_advisor.engine.rule_checks import RuleChecks
from nsight_advisor.engine.rules import Rule, query_params

#: Seconds one rule query may run before it is interrupted (config: rule_time_limit_s).
DEFAULT_TIME_LIMIT_S = 60.0
#: Candidate rows fetched at most for a judge.py rule.
MAX_CANDIDATE_ROWS = 100_000
#: Findings one rule makes on one capture at most (one per group_by value).
MAX_GROUPS = 50


@dataclass
class CaptureResult:
    """What one rule did on one capture."""

    status: str  # findings | clean | skipped | errored
    reason: str = ""
    capture_option: str = ""
    findings: list[Finding] = field(default_factory=list)
    firing_rows: int = 0


class QueryTimeout(RuleRunError):
    """A rule's query ran past its time limit."""


def disable_external_access(con: duckdb.DuckDBPyConnection) -> None:
    """Forbid file system access, extensions and ATTACH for the rest of this database's life."""
    con.execute("SET enable_external_access = false")


def run_rule_on_capture(con: duckdb.DuckDBPyConnection, rule: Rule, capture: dict, *,
                        time_limit_s: float = DEFAULT_TIME_LIMIT_S, checks: RuleChecks | None = None) -> CaptureResult:
    """Run ``rule`` for one capture (a row of ``captures`` as a dict); never raises for a rule's fault.

    ``checks``: the analysis's :class:`~nsight_advisor.engine.rule_checks.RuleChecks`, which asks the store what
    every rule checks first once for all captures (a new one for this capture alone when not given)."""
    capture_id = capture["capture_id"]
    checks = checks if checks is not None else RuleChecks(con, [capture_id])
    early = precheck(con, rule, capture_id, checks)
    if early is not None:
        return early
    try:
        groups = _firing_groups(con, rule, capture_id, time_limit_s, checks)
    except RuleRunError as exc:
        return CaptureResult("errored", reason=str(exc))
    return capture_result(rule, capture, groups)


def precheck(con, rule: Rule, capture_id: int, checks: RuleChecks) -> CaptureResult | None:
    """The result of ``rule`` on the capture when it cannot run there (skipped: a requirement missing, kernels
    without their GPU; errored: a requirement that cannot be checked); None when its query should run."""
    try:
        return _missing_requirement(con, rule, capture_id, checks) or _kernels_without_gpu(rule, capture_id, checks)
    except RuleRunError as exc:
        return CaptureResult("errored", reason=str(exc))


def capture_result(rule: Rule, capture: dict, groups: list[Group]) -> CaptureResult:
    """The result of ``rule`` on the capture from its firing groups: one finding each, or clean."""
    try:
        findings = [_make_finding(rule, capture, g) for g in groups]
    except RuleRunError as exc:
        return CaptureResult("errored", reason=str(exc))
    if not findings:
        return CaptureResult("clean")
    return CaptureResult("findings", findings=findings, firing_rows=sum(g.total_rows for g in groups))


# --- requirements ----------------------------------------------------------------------------------------

def _missing_requirement(con, rule: Rule, capture_id: int, checks: RuleChecks) -> CaptureResult | None:
    for req in rule.requires:
        try:
            present = checks.present(req.kind, req.value, capture_id)
        except duckdb.Error as exc:
            raise RuleRunError(f"checking requirement {req.describe()} failed: {_first_lines(exc)}") from None
        if not present:
            reason = f"the capture has no {req.describe()}"
            note = checks.missing_note(capture_id, req.value)
            if note:
                reason += f" ({note})"
            return CaptureResult("skipped", reason=reason, capture_option=req.capture_option)
    return None


def _kernels_without_gpu(rule: Rule, capture_id: int, checks: RuleChecks) -> CaptureResult | None:
    """Skipped, with the reason, when the rule reads GPU facts (``gpus``, itself or through a view) and the
    capture's kernels name no GPU (an export without deviceId): joined to nothing, its rows would all vanish
    and the rule would look clean."""
    try:
        if not checks.reads_table(rule.query, "gpus"):
            return None
        total, with_gpu = checks.kernel_devices(capture_id)
    except duckdb.Error:
        return None
    if not total or with_gpu:
        return None
    return CaptureResult("skipped", reason=f"none of the capture's {total} kernels records the GPU it ran on (the "
                         "export has no deviceId), so the GPU facts this rule needs cannot be matched",
                         capture_option="a current nsys export (nsys export --type sqlite) records it")


# --- the query -------------------------------------------------------------------------------------------

@dataclass
class Group:
    """The firing rows of one finding: the evidence kept, and totals over every firing row."""

    value: Any
    total_rows: int
    total_impact: float
    rows: list[dict]  # evidence order, at most evidence_limit
    columns: list[str]


def check_single_select(con, sql: str) -> str:
    """``sql`` without a trailing ';' when it is exactly one SELECT; RuleRunError otherwise."""
    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as exc:
        raise RuleRunError(f"query.sql does not parse: {_first_lines(exc)}") from None
    if len(statements) != 1:
        raise RuleRunError(f"query.sql must hold exactly one SELECT statement, found {len(statements)}")
    if statements[0].type != duckdb.StatementType.SELECT:
        raise RuleRunError(f"query.sql must be a SELECT, found a {statements[0].type.name} statement")
    return sql.strip().rstrip(";").strip()


def bind_params(rule: Rule, sql: str, capture_id: int, extra: dict | None = None) -> dict[str, Any]:
    """The named parameters ``sql`` uses, with their values; RuleRunError for an undeclared one."""
    values = {**rule.values(), **(extra or {}), "capture_id": capture_id}
    bound = {}
    for name in query_params(sql):
        if name not in values:
            raise RuleRunError(f"query.sql uses ${name}, which is not declared under [params] in rule.toml")
        bound[name] = values[name]
    return bound


def run_limited(con, sql: str, params: dict, time_limit_s: float, max_rows: int) -> tuple[list[str], list[tuple]]:
    """Run ``sql`` on ``con``, interrupted after ``time_limit_s``; at most ``max_rows`` rows fetched.

    The connection itself, not a cursor: a cursor is a new connection, which would not see the analysis's temp
    tables (the window and the materialized analysis views, nsight_advisor.analysis.accounting)."""
    cur = con
    timer = threading.Timer(time_limit_s, cur.interrupt)
    timer.daemon = True
    started = time.monotonic()
    timer.start()
    try:
        sql_params.execute(cur, sql, params)
        columns = [d[0] for d in cur.description]
        rows = cur.fetchmany(max_rows)
    except duckdb.InterruptException:
        if time.monotonic() - started < time_limit_s:  # not our timer: the user's Ctrl-C stops the whole run
            raise KeyboardInterrupt from None
        raise QueryTimeout(f"query stopped after the time limit of {time_limit_s:g} s") from None
    except duckdb.Error as exc:
        if time.monotonic() - started >= time_limit_s and "interrupt" in str(exc).lower():
            raise QueryTimeout(f"query stopped after the time limit of {time_limit_s:g} s") from None
        raise RuleRunError(f"query failed: {_first_lines(exc)}") from None
    except BaseException:  # SIGTERM or Ctrl-C while the query runs: stop it, or closing the cursor waits for it
        cur.interrupt()
        raise
    finally:
        timer.cancel()
        timer.join()
    return columns, rows


def _firing_groups(con, rule: Rule, capture_id: int, time_limit_s: float, checks: RuleChecks) -> list[Group]:
    base = checks.single_select(rule.query, check_single_select)
    if rule.judge is not None:
        return _judge_in_python(con, rule, base, capture_id, time_limit_s)
    return _judge_in_sql(con, rule, base, capture_id, time_limit_s)


def _judge_in_sql(con, rule: Rule, base: str, capture_id: int, time_limit_s: float) -> list[Group]:
    tag = uuid.uuid4().hex[:8]
    sql, params = judge_sql(rule, base, tag)
    params.update(bind_params(rule, base, capture_id))
    columns, rows = run_limited(con, sql, params, time_limit_s, MAX_GROUPS * rule.finding.evidence_limit + 1)
    return list(read_groups(rule, columns, rows, tag).values())


def judge_sql(rule: Rule, base: str, tag: str, by: str | None = None) -> tuple[str, dict[str, Any]]:
    """The query that judges ``base``'s rows in SQL, and its threshold parameter.

    One pass: filter the firing rows, then per group count them, sum their impact and keep the top evidence_limit
    rows by order_by; at most MAX_GROUPS groups. Only (groups x evidence_limit) rows ever leave DuckDB. ``by``: a
    column of ``base`` that splits everything first (the capture, when one query judges every capture)."""
    spec, j = rule.finding, rule.judgement
    threshold_param = f"na_threshold_{tag}"
    col = quote_ident(j.column)
    keys = [quote_ident(k) for k in (by, spec.group_by) if k]
    part = f"partition by {', '.join(keys)}" if keys else ""
    per = f"partition by {quote_ident(by)}" if by else ""
    group_expr = quote_ident(spec.group_by) if spec.group_by else "null"
    # Rows tied on order_by are ranked by the columns the evidence shows, so a run shows the same rows every time.
    # Packed into one row value: a bare COLUMNS() in a window's ORDER BY would repeat the whole window, once per
    # column, each ordered by one column alone.
    shown = ", ".join("'" + c.replace("'", "''") + "'" for c in (spec.order_by, *spec.evidence_columns))
    sql = f"""
        with na_rule_{tag} as ({base}
        ),
        na_fire_{tag} as (
            select * from na_rule_{tag} where {col} {j.op} ${threshold_param}
        ),
        na_ranked_{tag} as (
            select *,
                   {group_expr} as na_group_{tag},
                   count(*) over ({part}) as na_rows_{tag},
                   coalesce(sum({quote_ident(spec.impact_column)}) over ({part}), 0) as na_impact_{tag},
                   row_number() over ({part} order by {quote_ident(spec.order_by)} desc nulls last,
                                      row(*columns(c -> c in [{shown}]))) as na_rank_{tag}
            from na_fire_{tag}
        ),
        na_grouprank_{tag} as (
            select *, dense_rank() over ({per} order by na_impact_{tag} desc, na_group_{tag}) as na_grank_{tag}
            from na_ranked_{tag} where na_rank_{tag} <= {int(spec.evidence_limit)}
        )
        select * from na_grouprank_{tag} where na_grank_{tag} <= {MAX_GROUPS}
        order by {quote_ident(by) + ", " if by else ""}na_grank_{tag}, na_rank_{tag}
    """
    return sql, {threshold_param: rule.values()[j.param]}


def read_groups(rule: Rule, columns: list[str], rows: list[tuple], tag: str,
                by: str | None = None) -> dict[tuple, Group]:
    """The groups of :func:`judge_sql`'s rows, in its order, keyed by (``by``'s value, group rank); the columns
    the engine added (``by`` included) are not the evidence's."""
    spec = rule.finding
    internal = {f"na_{k}_{tag}" for k in ("group", "rows", "impact", "rank", "grank")} | ({by} if by else set())
    user_cols = [c for c in columns if c not in internal]
    idx = {c: i for i, c in enumerate(columns)}
    groups: dict[tuple, Group] = {}
    for r in rows:
        key = (r[idx[by]] if by else None, r[idx[f"na_grank_{tag}"]])
        if key not in groups:
            groups[key] = Group(value=r[idx[f"na_group_{tag}"]], total_rows=int(r[idx[f"na_rows_{tag}"]]),
                                total_impact=_to_float(r[idx[f"na_impact_{tag}"]]), rows=[], columns=user_cols)
        groups[key].rows.append({c: r[idx[c]] for c in user_cols})
    for group in groups.values():  # the same order again in Python, which DuckDB's window did not always keep
        group.rows.sort(key=lambda row: _ties_key(row, spec.evidence_columns))
        group.rows.sort(key=lambda row: _sort_key(row.get(spec.order_by)), reverse=True)
    return groups


def _ties_key(row: dict, columns) -> tuple:
    """The shown columns as a sort key that any mix of values (None, numbers, text, structs) can be ordered by."""
    key = []
    for v in (row.get(c) for c in columns):
        if v is None:
            key.append((2, "", 0))
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            key.append((0, "", v))
        else:
            key.append((1, type(v).__name__, v if isinstance(v, str) else repr(v)))
    return tuple(key)


def _judge_in_python(con, rule: Rule, base: str, capture_id: int, time_limit_s: float) -> list[Group]:
    spec = rule.finding
    params = bind_params(rule, base, capture_id)
    columns, rows = run_limited(con, f"select * from ({base}) limit {MAX_CANDIDATE_ROWS}", params,
                                time_limit_s, MAX_CANDIDATE_ROWS)
    values = rule.values()
    firing = []
    for r in rows:
        row = dict(zip(columns, r))
        try:
            fires = rule.judge(dict(row), dict(values))
        except Exception as exc:  # a user's judge.py: its failure is this rule's error, not ours
            raise RuleRunError(f"judge.py raised {type(exc).__name__}: {exc}") from None
        if fires:
            firing.append(row)
    for name in (spec.impact_column, spec.order_by, spec.group_by):
        if name and firing and name not in columns:
            raise RuleRunError(f"column {name!r} named in [finding] is not in the query's result")
    grouped: dict[Any, list[dict]] = {}
    for row in firing:
        grouped.setdefault(row.get(spec.group_by) if spec.group_by else None, []).append(row)
    groups = []
    for value, members in grouped.items():
        members.sort(key=lambda row: _sort_key(row.get(spec.order_by)), reverse=True)
        impact = sum(_to_float(row.get(spec.impact_column)) for row in members)
        groups.append(Group(value, len(members), impact, members[: spec.evidence_limit], columns))
    groups.sort(key=lambda g: -g.total_impact)
    return groups[:MAX_GROUPS]


def _sort_key(value: Any) -> tuple:
    if value is None:
        return (0, 0)
    try:
        return (1, float(value))
    except (TypeError, ValueError):
        return (1, 0)


# --- findings --------------------------------------------------------------------------------------------

def _make_finding(rule: Rule, capture: dict, group: Group) -> Finding:
    """A finding with the rule's own impact estimate (``claimed_ns``). Its impact share, severity and message are
    final only after :func:`nsight_advisor.engine.impact.reconcile` has settled what each finding claims; the
    message is formatted here too, so that a bad template errors the rule at once."""
    spec = rule.finding
    values = rule.values()
    impact_ns = max(int(round(group.total_impact)), 0) if math.isfinite(group.total_impact) else 0
    top = group.rows[0] if group.rows else {}
    observed = top.get(rule.judgement.column) if rule.judgement else None
    threshold = values.get(rule.judgement.param) if rule.judgement else None
    missing = [c for c in (*spec.evidence_columns, spec.severity_column) if c and c not in group.columns]
    if missing:
        raise RuleRunError(f"evidence column(s) {', '.join(missing)} are not in the query's result "
                           f"({', '.join(group.columns)})")
    device_id = _device_of(spec, group)
    finding = Finding(
        rule_id=rule.id, rule_name=rule.name, severity=rule.severity, title=rule.title, message="",
        capture_id=capture["capture_id"], impact_ns=impact_ns, impact_pct=0.0,
        evidence=[{c: jsonable(row.get(c)) for c in spec.evidence_columns} for row in group.rows],
        evidence_columns=list(spec.evidence_columns), evidence_total_rows=group.total_rows,
        principles=resolve_principles(advice.principles_for(rule, capture)), category=rule.category,
        observed=jsonable(observed), threshold=jsonable(threshold), device_id=device_id,
        claimed_ns=impact_ns,
    )
    finding.internal = {
        "rule": rule, "capture": capture, "rows": group.total_rows, "top": top, "group": group.value,
        "part": spec.impact_part, "causes": spec.impact_causes,
        "copies": spec.impact_copies, "comm": spec.impact_comm, "host": spec.impact_host,
        # (subject, claimed ns) per evidence row: what kernel-part findings combine on
        "claims": [(row.get(spec.subject_column), _to_float(row.get(spec.impact_column))) for row in group.rows],
        "severity": top.get(spec.severity_column) if spec.severity_column else None,
    }
    duration = capture.get("duration_ns") or 0
    finalize(finding, impact_ns, round(100.0 * impact_ns / duration, 3) if duration > 0 else 0.0)
    return finding


def _device_of(spec, group: Group) -> int | None:
    """The device a group's rows concern: the group's value when grouped by device, else the rows' one device_id."""
    if spec.group_by == "device_id":
        return None if group.value is None else int(group.value)
    if "device_id" in group.columns:
        devices = {row.get("device_id") for row in group.rows}
        if len(devices) == 1 and None not in devices:
            return int(devices.pop())
    return None


def finalize(finding: Finding, impact_ns: int, impact_pct: float) -> None:
    """Set a finding's impact and derive its severity, message and fix from them.

    Severity follows ``severity_by_impact_pct`` (or the rule's severity column); a finding that costs nothing is
    never more than info.
    """
    rule: Rule = finding.internal["rule"]
    spec = rule.finding
    finding.impact_ns, finding.impact_pct = impact_ns, impact_pct
    chosen = finding.internal.get("severity")
    severity = chosen if chosen in SEVERITIES else severity_for(rule, impact_pct)
    finding.severity = severity if impact_ns > 0 else "info"
    context = message_context(rule, finding.internal["rows"], impact_ns, impact_pct, finding.internal["top"].get(
        rule.judgement.column) if rule.judgement else None, finding.threshold, finding.internal["top"],
        finding.internal["group"])
    context["device_id"] = finding.device_id
    finding.message = format_message(spec.message, context)
    # the fix for the capture's stack and GPU (nsight_advisor.engine.advice): never what they cannot use
    finding.fix = advice.fix_text(rule, finding.internal["capture"], context)


def severity_for(rule: Rule, impact_pct: float) -> str:
    """The highest level of severity_by_impact_pct whose threshold ``impact_pct`` reaches, else the default."""
    reached = [level for level, pct in rule.finding.severity_by_impact_pct if impact_pct >= pct]
    return max(reached, key=severity_rank) if reached else rule.severity


def resolve_principles(ids) -> list[PrincipleRef]:
    """Catalog entries for ``ids``; an unknown id keeps its id as title and an empty URL (lint reports it)."""
    out = []
    for pid in ids:
        p = get_principle(pid)
        out.append(PrincipleRef(id=p.id if p else pid, title=p.link_text if p else pid, url=p.url if p else ""))
    return out



class _Row:
    """``{top.column}`` in messages: attribute access to the top evidence row."""

    def __init__(self, row: dict):
        self._row = row

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        if name not in self._row:
            raise AttributeError(f"the query has no column {name!r}")
        return self._row[name]


def message_context(rule: Rule, rows: int, impact_ns: int, impact_pct: float, observed: Any, threshold: Any,
                    top: dict, group: Any) -> dict[str, Any]:
    """The names a message or fix may use: rows, impact, impact_ns, impact_pct, threshold, observed, top, group,
    and every param."""
    return {**rule.values(), "rows": rows, "impact": format_duration_ns(impact_ns), "impact_ns": impact_ns,
            "impact_pct": impact_pct, "threshold": threshold, "observed": observed, "top": _Row(top),
            "group": group}


def _to_float(value: Any) -> float:
    if value is None:
        return 0.0
    try:
        f = float(value)
    except (TypeError, ValueError):
        return 0.0
    return f if math.isfinite(f) else 0.0


def _first_lines(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    text = lines[0]
    for line in lines[1:3]:
        if line.startswith(("Candidate", "Did you mean", "LINE")):
            text += " " + line
    return text[:400]
