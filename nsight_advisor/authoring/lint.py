"""``rules lint``: check rule folders without a capture.

Checks, each reported as ``FILE: key: problem; fix``: the folder loads (keys, types); ids and names are unique
(also against the built-in rules); every ``$param`` in query.sql is declared and every declared param is used;
query.sql is one SELECT that runs against an empty store of the normalized schema; the judgement, impact,
order, group and evidence columns are in its result; message placeholders exist; docs sections are not empty;
principles exist in the guide catalog; no part of the fix is shown on a stack or GPU its wording does not fit (a
PyTorch call in the general text, BF16 in a clause that does not need bf16); cases.toml loads and has at least
one firing and one clean case.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from nsight_advisor.catalog import get_principle
from nsight_advisor.engine.advice import text_tags
from nsight_advisor.engine.rules import DOC_SECTIONS, Rule, load_rule, query_params, rule_folders
from nsight_advisor.common.errors import RuleError
from nsight_advisor.common.regular_file import read_regular_text

_MESSAGE_NAMES = {"rows", "impact", "impact_ns", "impact_pct", "threshold", "observed", "group", "device_id", "top"}


@dataclass
class Problem:
    """One lint finding about a rule folder."""

    path: Path
    key: str
    text: str

    def __str__(self) -> str:
        if not self.key and self.text.startswith(str(self.path)):
            return self.text  # a load error that already names the file (and line)
        return f"{self.path}: {self.key + ': ' if self.key else ''}{self.text}"


def lint_folders(folders: list[Path], *, others: list[Rule] = ()) -> tuple[list[Rule], list[Problem]]:
    """Lint each rule folder; ``others`` are rules (built-in) whose ids and names must not be reused."""
    problems: list[Problem] = []
    rules: list[Rule] = []
    for folder in folders:
        try:
            rules.append(load_rule(folder))
        except RuleError as exc:
            problems.append(Problem(folder / "rule.toml", "", str(exc)))
    problems += _unique(rules, list(others))
    for rule in rules:
        problems += lint_rule(rule)
    return rules, problems


def _unique(rules: list[Rule], others: list[Rule]) -> list[Problem]:
    problems = []
    seen_id: dict[str, Rule] = {}
    seen_name: dict[str, Rule] = {}
    for rule in others:
        seen_id[rule.id] = rule
        seen_name[rule.name] = rule
    for rule in rules:
        for key, seen, what in ((rule.id, seen_id, "id"), (rule.name, seen_name, "name")):
            other = seen.get(key)
            if other is not None and other.folder.resolve() != rule.folder.resolve():
                problems.append(Problem(rule.rule_toml, what, f"{key!r} is already used by {other.rule_toml}; "
                                        f"give this rule a unique {what}"))
            else:
                seen[key] = rule
    return problems


def lint_rule(rule: Rule) -> list[Problem]:
    """Every problem of one loaded rule."""
    problems: list[Problem] = []
    toml = rule.rule_toml

    def add(path: Path, key: str, text: str) -> None:
        problems.append(Problem(path, key, text))

    for field_name, value in (("title", rule.title), ("finding.message", rule.finding.message),
                              ("finding.fix", rule.finding.fix)):
        if not value.strip():
            add(toml, field_name, "empty; write it")
    for key, text, stacks, needs in _fix_parts(rule):
        if not text.strip():
            add(toml, key, "empty; write it")
        said_stacks, said_caps = text_tags(text)
        for stack in sorted(said_stacks - set(stacks)):
            add(toml, key, f"its wording is specific to {stack} but it is shown on "
                f"{'every stack' if not stacks else ', '.join(stacks)}; move it to [finding.fix.variants] {stack} "
                f"or a clause with stacks = [\"{stack}\"]")
        for cap in sorted(said_caps - set(needs)):
            add(toml, key, f"it recommends {cap}, which not every GPU has; move it to a [[finding.fix.clauses]] "
                f"with needs = [\"{cap}\"]")
    for section in DOC_SECTIONS:
        if not rule.docs.get(section, "").strip():
            add(toml, f"docs.{section}", "empty; every docs section (what, why, fix, limits) needs text")
    for name, param in rule.params.items():
        if not param.why.strip():
            add(toml, f"params.{name}.why", "empty; say why that number, with its source")
    for i, req in enumerate(rule.requires):
        if not req.capture_option.strip():
            add(toml, f"requires[{i}].capture_option", "empty; name the profiler option that records "
                f"{req.describe()} (e.g. nsys profile --trace=cuda)")
    for pid in rule.principles:
        if get_principle(pid) is None:
            add(toml, "principles", f"{pid!r} is not in the guide catalog; use an id from "
                "nsight_advisor/catalog/principles.toml (docs/rule-format.md lists them)")

    # Parameters: declared <-> used.
    used_in_query = query_params(rule.query)
    for name in used_in_query:
        if name != "capture_id" and name not in rule.params:
            add(rule.query_path, f"${name}", f"not declared; add [params.{name}] to rule.toml or remove it")
    text_fields = _fields(rule.finding.message) + [f for part in _fix_parts(rule) for f in _fields(part[1])]
    judge_text = read_regular_text(rule.folder / "judge.py", RuleError) if rule.judge else ""
    for name in rule.params:
        used = (name in used_in_query or (rule.judgement and rule.judgement.param == name)
                or name in text_fields or (judge_text and name in judge_text))
        if not used:
            add(toml, f"params.{name}", "declared but never used (not in query.sql, the judgement, the message "
                "or judge.py); use it or remove it")

    columns = _result_columns(rule, problems)
    if columns is not None:
        spec = rule.finding
        wanted = [("finding.impact_column", spec.impact_column), ("finding.order_by", spec.order_by)]
        if spec.group_by:
            wanted.append(("finding.group_by", spec.group_by))
        if rule.judgement:
            wanted.append(("judgement.column", rule.judgement.column))
        wanted += [("finding.evidence_columns", c) for c in spec.evidence_columns]
        for key, col in wanted:
            if col not in columns:
                add(toml, key, f"column {col!r} is not in the query's result ({', '.join(columns)}); "
                    "return it from query.sql or fix the name")
        for key, template in (("finding.message", spec.message),
                              *((part[0], part[1]) for part in _fix_parts(rule))):
            for field_name in _fields(template):
                base, _, attr = field_name.partition(".")
                base = base.split("[")[0]
                if base == "top":
                    if not attr or attr.split("[")[0] not in columns:
                        add(toml, key, f"placeholder {{{field_name}}}: the query has no column {attr!r}; "
                            f"use {{top.COLUMN}} with one of {', '.join(columns)}")
                elif base not in _MESSAGE_NAMES and base not in rule.params:
                    add(toml, key, f"placeholder {{{field_name}}} is unknown; use rows, impact, impact_pct, device_id, "
                        "threshold, observed, group, top.COLUMN or a param name")
        if not rule.judgement and not rule.judge:
            add(toml, "judgement", "missing; add [judgement] or judge.py")

    problems += _lint_cases(rule)
    return problems


def _fix_parts(rule: Rule) -> list[tuple[str, str, tuple[str, ...], tuple[str, ...]]]:
    """(key, text, stacks it is shown on (() = every stack), capabilities it needs) of every part of the fix."""
    spec = rule.finding
    parts = [("finding.fix" if not (spec.fix_variants or spec.fix_clauses) else "finding.fix.text", spec.fix, (), ())]
    parts += [(f"finding.fix.variants.{stack}", text, (stack,), ()) for stack, text in spec.fix_variants]
    for i, clause in enumerate(spec.fix_clauses):
        parts.append((f"finding.fix.clauses[{i}]", clause.text, clause.stacks, clause.needs))
    return parts


def _fields(template: str) -> list[str]:
    from nsight_advisor.engine.runner import message_fields

    try:
        return message_fields(template)
    except ValueError:
        return []


def _result_columns(rule: Rule, problems: list[Problem]) -> list[str] | None:
    """Column names of the query run on an empty store (None, with a problem added, when it does not run)."""
    from nsight_advisor.authoring.cases import empty_store
    from nsight_advisor.engine.runner import RuleRunError, bind_params, check_single_select

    con = empty_store()
    try:
        sql = check_single_select(con, rule.query)
        params = bind_params(rule, sql, 1)
    except RuleRunError as exc:
        if "not declared" not in str(exc):
            problems.append(Problem(rule.query_path, "", str(exc)))
        return None
    try:
        cur = con.execute(f"select * from ({sql}) limit 0", params)
        return [d[0] for d in cur.description]
    except Exception as exc:  # DuckDB binder/parser/permission errors: the rule's fault
        from nsight_advisor.engine.runner import _first_lines

        problems.append(Problem(rule.query_path, "", f"does not run against the normalized schema: "
                                f"{_first_lines(exc)}"))
        return None


def _lint_cases(rule: Rule) -> list[Problem]:
    from nsight_advisor.authoring.cases import load_cases

    path = rule.cases_path
    if not path.exists():
        return [Problem(path, "", "missing; add at least one case that fires and one that stays clean")]
    try:
        cases = load_cases(rule)
    except RuleError as exc:
        return [Problem(path, "", str(exc))]
    problems = []
    expects = {c.expect for c in cases}
    if "findings" not in expects:
        problems.append(Problem(path, "case", 'no case fires; add one with expect = "findings"'))
    if "clean" not in expects:
        problems.append(Problem(path, "case", 'no clean case; add one with expect = "clean"'))
    return problems
