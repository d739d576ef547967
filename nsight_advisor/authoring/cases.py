"""A rule's examples are its tests: load ``cases.toml``, build a tiny in-memory store per case, run, compare.

```toml
[[case]]
name = "a 5 ms kernel fires"
expect = "findings"            # findings | clean | skipped | errored
expect_rows = 1                # optional: firing rows in all
expect_subjects = ["vecadd"]   # optional: values that must appear in the first evidence column
expect_impact_ns = 4000000     # optional: summed impact of the findings
expect_severity = "warning"    # optional: severity of the top finding
expect_message_contains = "5 ms"   # optional: text in the top finding's message
params = { max_kernel_ms = 1.0 }   # optional: parameter overrides
[case.tables]
kernels = [{ name = "vecadd", start_ns = 0, end_ns = 5000000, duration_ns = 5000000 }]
```

Rows default to ``capture_id = 1``; a ``captures`` row per capture id is added when the case gives none, with the
duration spanning the case's events.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nsight_advisor.engine.rules import Rule
from nsight_advisor.engine.toml_checked import TomlTable, coerce_value, read_toml
from nsight_advisor.engine.model import OUTCOME_STATUSES, SEVERITIES
from nsight_advisor.common.errors import RuleError
from nsight_advisor.schema.tables import get_table, stored_table_names, table_names
from nsight_advisor.common.text import first_line

_EVENT_TABLES = ("kernels", "api_calls", "memcpys", "memsets", "syncs", "nvtx_ranges")


@dataclass
class Case:
    """One hand-made input and the verdict it must produce."""

    name: str
    expect: str
    tables: dict[str, list[dict]]
    params: dict[str, Any] = field(default_factory=dict)
    expect_rows: int | None = None
    expect_subjects: list[Any] | None = None
    expect_impact_ns: int | None = None
    expect_severity: str | None = None
    expect_message_contains: str | None = None


@dataclass
class CaseResult:
    """The outcome of one case: passed or not, and a readable diff when not."""

    rule: Rule
    case: Case
    passed: bool
    status: str
    problems: list[str]
    details: list[str]


def load_cases(rule: Rule) -> list[Case]:
    """The cases of ``rule`` (RuleError naming cases.toml and the key when one is malformed)."""
    path = rule.cases_path
    data = read_toml(path)
    top = TomlTable(data, path)
    items = top.get("case", list, fix='add [[case]] tables with name, expect and [case.tables]')
    top.reject_unknown()
    cases = []
    for i, raw in enumerate(items):
        if not isinstance(raw, dict):
            raise RuleError(f"{path}: key 'case[{i}]': expected a table; write [[case]]")
        t = TomlTable(raw, path, f"case[{i}].")
        name = t.get("name", str, fix="give the case a name saying what it checks")
        expect = t.choice("expect", OUTCOME_STATUSES)
        tables = t.get("tables", dict, required=False, default={})
        params = t.get("params", dict, required=False, default={})
        case = Case(
            name=name, expect=expect, tables=_check_tables(tables, path, i),
            params=_check_params(rule, params, path, i),
            expect_rows=t.get("expect_rows", int, required=False),
            expect_subjects=t.get("expect_subjects", list, required=False),
            expect_impact_ns=t.get("expect_impact_ns", int, required=False),
            expect_severity=t.choice("expect_severity", SEVERITIES, required=False, default=None)
            if "expect_severity" in raw else None,
            expect_message_contains=t.get("expect_message_contains", str, required=False),
        )
        t.reject_unknown()
        cases.append(case)
    return cases


def _check_tables(tables: dict, path: Path, i: int) -> dict[str, list[dict]]:
    for table, rows in tables.items():
        where = f"{path}: key 'case[{i}].tables.{table}'"
        if table not in table_names():
            raise RuleError(f"{where}: not a normalized table; use one of {', '.join(table_names())}")
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            raise RuleError(f"{where}: expected a list of rows, e.g. {table} = [{{ capture_id = 1, ... }}]")
        columns = set(get_table(table).column_names)
        for row in rows:
            unknown = sorted(set(row) - columns)
            if unknown:
                raise RuleError(f"{where}: {table} has no column {unknown[0]!r}; "
                                f"its columns: {', '.join(get_table(table).column_names)}")
    return tables


def _check_params(rule: Rule, params: dict, path: Path, i: int) -> dict[str, Any]:
    out = {}
    for name, value in params.items():
        where = f"{path}: key 'case[{i}].params.{name}'"
        if name not in rule.params:
            raise RuleError(f"{where}: the rule declares no parameter {name!r} ({', '.join(rule.params) or 'none'})")
        out[name] = coerce_value(value, rule.params[name].type, where)
    return out


_SHARED_STORE = None


def empty_store():
    """This process's scratch in-memory store, emptied, with external access disabled.

    Creating the schema costs about a second; emptying 15 tables costs milliseconds, so cases and lint reuse one.
    """
    global _SHARED_STORE
    from nsight_advisor.engine.runner import disable_external_access
    from nsight_advisor.store.database import connect

    if _SHARED_STORE is None:
        _SHARED_STORE = connect(None)
        disable_external_access(_SHARED_STORE)
    for table in stored_table_names():
        _SHARED_STORE.execute(f"delete from {table}")
    return _SHARED_STORE


def build_case_store(case: Case, con=None):
    """The case's rows (and a captures row per capture id) in ``con``, else in a fresh in-memory store."""
    if con is None:
        from nsight_advisor.store.database import connect

        con = connect(None)
    from nsight_advisor.store.database import insert_api_calls, insert_kernels, insert_nvtx_ranges

    # views: their own writers
    views = {"kernels": insert_kernels, "nvtx_ranges": insert_nvtx_ranges, "api_calls": insert_api_calls}

    capture_ids: set[int] = set()
    for table, rows in case.tables.items():
        for row in rows:
            row = {"capture_id": 1, **row}
            if table != "captures":
                capture_ids.add(row["capture_id"])
            if table in views:
                views[table](con, [row])
                continue
            cols = list(row)
            con.execute(f"insert into {table} ({', '.join(cols)}) values ({', '.join('?' for _ in cols)})",
                        [row[c] for c in cols])
    have = {r[0] for r in con.execute("select capture_id from captures").fetchall()}
    for cid in sorted(capture_ids - have):
        spans = " union all ".join(f"select start_ns, end_ns from {t} where capture_id = {int(cid)}"
                                   for t in _EVENT_TABLES)
        start, end = con.execute(f"select min(start_ns), max(end_ns) from ({spans})").fetchone()
        con.execute("insert into captures (capture_id, source_name, format, tool, tool_version, start_ns, end_ns, "
                    "duration_ns) values (?, 'case', 'case', 'case', 'case', ?, ?, ?)",
                    [cid, start, end, (end - start) if start is not None and end is not None else None])
    return con


def run_case(rule: Rule, case: Case, *, time_limit_s: float = 30.0) -> CaseResult:
    """Run ``rule`` on the case's store and compare with the expectations."""
    from nsight_advisor.engine.analyze import combine_outcomes, read_captures, settle_impacts
    from nsight_advisor.engine.store_runner import run_rule_on_captures

    try:
        con = build_case_store(case, empty_store())
    except Exception as exc:  # a case's rows that DuckDB refuses (wrong types): the case's fault
        first = first_line(exc)
        return CaseResult(rule, case, False, "invalid", [f"the case's tables could not be loaded: {first}"], [])
    try:
        ids = [r[0] for r in con.execute("select capture_id from captures order by 1").fetchall()]
        captures = read_captures(con, ids)
        run = rule.with_params(case.params) if case.params else rule
        results = run_rule_on_captures(con, run, captures, time_limit_s=time_limit_s)
        # impacts as an analysis settles them (one rule alone: within each device's partition)
        findings, _ = settle_impacts(con, captures, [f for _, r in results for f in r.findings])
    finally:
        empty_store()  # leave no case rows behind
    outcome = combine_outcomes(run, results, len(captures))
    findings.sort(key=lambda f: -f.impact_ns)
    rows = sum(r.firing_rows for _, r in results)
    subjects = [next(iter(e.values()), None) for f in findings for e in f.evidence]
    impact = sum(f.impact_ns for f in findings)

    problems = []
    if outcome.status != case.expect:
        problems.append(f"expected {case.expect}, got {outcome.status}"
                        + (f" ({outcome.reason})" if outcome.reason else ""))
    if case.expect_rows is not None and rows != case.expect_rows:
        problems.append(f"expected {case.expect_rows} firing row(s), got {rows}")
    if case.expect_subjects is not None:
        missing = [s for s in case.expect_subjects if s not in subjects]
        if missing:
            problems.append(f"expected subjects {missing} in the first evidence column, got {subjects[:10]}")
    if case.expect_impact_ns is not None and impact != case.expect_impact_ns:
        problems.append(f"expected impact_ns {case.expect_impact_ns}, got {impact}")
    if case.expect_severity is not None and (not findings or findings[0].severity != case.expect_severity):
        problems.append(f"expected severity {case.expect_severity}, got "
                        f"{findings[0].severity if findings else 'no finding'}")
    if case.expect_message_contains is not None and (
            not findings or case.expect_message_contains not in findings[0].message):
        problems.append(f"expected the message to contain {case.expect_message_contains!r}, got "
                        f"{findings[0].message if findings else 'no finding'!r}")
    details = []
    for f in findings[:3]:
        details.append(f"finding [{f.severity}] {f.message} (impact {f.impact_ns} ns, {f.impact_pct}%)")
        for e in f.evidence[:5]:
            details.append("  evidence " + ", ".join(f"{k}={v!r}" for k, v in e.items()))
    return CaseResult(rule, case, not problems, outcome.status, problems, details)
