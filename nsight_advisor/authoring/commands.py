"""The ``rules`` commands as functions: list, show, new (scaffold), test (run cases.toml), lint.

Each returns text for the terminal (``test`` and ``lint`` also return whether everything passed).
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Iterable

from nsight_advisor.catalog import get_principle
from nsight_advisor.engine.rules import NAME_RE, Rule, find_rule, load_rules, rule_folders
from nsight_advisor.common.errors import InputError, RuleError
from nsight_advisor.common.resources import builtin_rules_dir


def _all_rules(rules_dirs: Iterable[Path]) -> list[Rule]:
    """Built-in rules, the config file's rules_dirs (./nsight-advisor.toml or pyproject.toml), then ``rules_dirs``."""
    from nsight_advisor.engine.config import find_config

    return load_rules([*find_config(None).rules_dirs, *(Path(d) for d in rules_dirs)])


def list_rules(rules_dirs: Iterable[Path] = ()) -> str:
    """One line per rule: id, name, category, status, title."""
    rules = _all_rules(rules_dirs)
    if not rules:
        return "no rules found"
    width = max(len(r.name) for r in rules)
    lines = [f"{r.id:<6} {r.name:<{width}}  {r.category:<10} {r.status:<8} {r.title}" for r in rules]
    return "\n".join(lines)


def show_rule(rule: str, rules_dirs: Iterable[Path] = ()) -> str:
    """A rule's docs, params (defaults, units, why), requirements and principles with URLs."""
    rules = _all_rules(rules_dirs)
    found = find_rule(rules, rule)
    if found is None:
        raise InputError(f"no rule {rule!r}; `nsight-advisor rules list` shows ids and names")
    r = found
    out = [f"{r.id} {r.name}: {r.title}", f"category {r.category} · severity {r.severity} · status {r.status}",
           f"folder {r.folder}", ""]
    for section, heading in (("what", "What it finds"), ("why", "Why it matters"), ("fix", "How to fix"),
                             ("limits", "Known limits")):
        out.append(heading)
        out.append(_wrap(r.docs[section]))
        out.append("")
    out.append("Parameters")
    if not r.params:
        out.append("  (none)")
    for name, p in r.params.items():
        unit = f" {p.unit}" if p.unit else ""
        out.append(f"  {name} = {p.default!r}{unit} ({p.type})")
        out.append(_wrap(p.why, indent=6))
    if r.judgement:
        out.append(f"\nFires when {r.judgement.column} {r.judgement.op} {r.judgement.param}")
    elif r.judge:
        out.append("\nFires when judge.py's judge(row, params) returns True")
    if r.requires:
        out.append("\nNeeds")
        for req in r.requires:
            out.append(f"  {req.describe()} (capture with: {req.capture_option})")
    reads = _analysis_views_read(r.query)
    if reads:
        out.append("\nAnalysis views it reads (docs/analysis-views.md)")
        for view in reads:
            out.append(_wrap(f"{view.name}: {view.doc}", indent=2))
    out.append(f"\nImpact comes out of: {r.finding.impact_part} time"
               + (f" (idle causes: {', '.join(r.finding.impact_causes)})" if r.finding.impact_causes else "")
               + " (docs/impact.md)")
    out.append("\nPrinciples")
    for pid in r.principles:
        p = get_principle(pid)
        out.append(f"  {pid}: {p.guide}, {p.link_text}\n    {p.url}" if p else f"  {pid}: (not in the catalog)")
    return "\n".join(out)


def _analysis_views_read(query: str) -> list:
    """The documented analysis views a rule's SQL names (a whole word)."""
    import re

    from nsight_advisor.schema.views import documented_views

    return [v for v in documented_views() if v.kind == "view" and re.search(rf"\b{v.name}\b", query)]


def _wrap(text: str, indent: int = 2) -> str:
    return textwrap.fill(" ".join(text.split()), width=100, initial_indent=" " * indent,
                         subsequent_indent=" " * indent)


# --- rules new -------------------------------------------------------------------------------------------

_RULE_TOML = '''\
id = "{rule_id}"
name = "{name}"
title = "API functions called very often"
category = "timeline"
severity = "info"
status = "preview"
principles = ["cuda-graphs.launch-overhead"]

[[requires]]
table = "api_calls"
capture_option = "nsys profile --trace=cuda"

[params.max_calls]
type = "int"
default = 1000
unit = "calls"
why = "Replace with the reason for your number, e.g. a measurement or a guide section."

[judgement]
column = "calls"                # the observed value (a column of query.sql's result)
op = ">"                        # fires when calls > max_calls
param = "max_calls"

[finding]
impact_column = "impact_ns"     # time recoverable per row, ns (here: all the time spent in the calls)
impact_part = "host"            # host time, no device (docs/impact.md: kernel, copy, memset, idle or host)
evidence_columns = ["api", "calls", "total_ms", "impact_ns"]
evidence_limit = 10
message = "{{rows}} API function(s) called more than {{threshold}} times; most costly: {{top.api}} with {{observed}} calls ({{impact}})"
fix = "Call {{top.api}} less often, e.g. batch the work it does."

[docs]
what = "Finds CUDA API functions called more than max_calls times in one capture."
why = "Every call costs host time; many calls can keep the CPU from feeding the GPU."
fix = "Batch the work of many calls into fewer calls."
limits = "The impact is all the time spent in the calls, an upper bound of what fewer calls would save."
'''

_QUERY_SQL = '''\
-- One row per API function of this capture: how often it was called and how long it took in all.
select a.base_name as api,
       count(*) as calls,
       sum(a.duration_ns) / 1e6 as total_ms,
       sum(a.duration_ns) as impact_ns
from api_calls a
where a.capture_id = $capture_id
group by a.base_name
'''

_CASES_TOML = '''\
[[case]]
name = "3 calls above a limit of 2 fire"
expect = "findings"
expect_rows = 1
expect_subjects = ["cudaMemcpy"]
params = { max_calls = 2 }
# cudaMemcpy: 3 calls > 2 -> fires; impact 1000 + 2000 + 3000 = 6000 ns
expect_impact_ns = 6000
[case.tables]
api_calls = [
  { base_name = "cudaMemcpy", name = "cudaMemcpy_v3020", start_ns = 0, end_ns = 1000, duration_ns = 1000 },
  { base_name = "cudaMemcpy", name = "cudaMemcpy_v3020", start_ns = 2000, end_ns = 4000, duration_ns = 2000 },
  { base_name = "cudaMemcpy", name = "cudaMemcpy_v3020", start_ns = 5000, end_ns = 8000, duration_ns = 3000 },
]

[[case]]
name = "one call stays clean"
expect = "clean"
[case.tables]
api_calls = [{ base_name = "cudaMemcpy", name = "cudaMemcpy_v3020", start_ns = 0, end_ns = 1000, duration_ns = 1000 }]

[[case]]
name = "a capture without API calls is skipped"
expect = "skipped"
'''


def new_rule(name: str, directory: Path = Path(".")) -> str:
    """Create ``directory/name`` with a rule.toml, query.sql and cases.toml that pass lint and test."""
    if not NAME_RE.match(name):
        raise InputError(f"{name!r} is not a rule name; use lowercase words joined by '-', e.g. slow-memcpy")
    directory = Path(directory)
    folder = directory / name
    if folder.exists():
        raise InputError(f"{folder}: already exists; pick another name or folder")
    used = {r.id for r in load_rules([], include_builtin=True)}
    if directory.is_dir():
        try:
            used |= {r.id for r in load_rules([directory], include_builtin=False)}
        except RuleError:
            pass  # a broken sibling must not stop a scaffold; lint will report it
    rule_id = next(f"NA{n}" for n in range(901, 100000) if f"NA{n}" not in used)
    folder.mkdir(parents=True)
    (folder / "rule.toml").write_text(_RULE_TOML.format(rule_id=rule_id, name=name), encoding="utf-8")
    (folder / "query.sql").write_text(_QUERY_SQL, encoding="utf-8")
    (folder / "cases.toml").write_text(_CASES_TOML, encoding="utf-8")
    return (f"created {folder} ({rule_id} {name}): rule.toml, query.sql, cases.toml\n"
            f"next: edit them, then `nsight-advisor rules lint {directory}` and `nsight-advisor rules test {directory}`")


# --- rules test / lint -----------------------------------------------------------------------------------

def _folders(directory: Path | None) -> tuple[Path, list[Path]]:
    root = builtin_rules_dir() if directory is None else Path(directory)
    if directory is None and not root.is_dir():
        return root, []
    return root, rule_folders(root)


def test_rules(directory: Path | None = None) -> tuple[str, bool]:
    """Run every case of every rule in ``directory`` (built-in rules when None); text and whether all passed."""
    from nsight_advisor.authoring.cases import load_cases, run_case
    from nsight_advisor.engine.rules import load_rule

    root, folders = _folders(directory)
    if not folders:
        return f"no rule folders in {root}", directory is None
    lines, passed, failed = [], 0, 0
    for folder in folders:
        try:
            rule = load_rule(folder)
            cases = load_cases(rule)
        except RuleError as exc:
            failed += 1
            lines.append(f"ERROR {folder.name}: {exc}")
            continue
        if not cases:
            failed += 1
            lines.append(f"FAIL  {rule.id} {rule.name}: cases.toml has no [[case]]")
        for case in cases:
            res = run_case(rule, case)
            if res.passed:
                passed += 1
                lines.append(f"ok    {rule.id} {rule.name}: {case.name}")
                continue
            failed += 1
            lines.append(f"FAIL  {rule.id} {rule.name}: {case.name}")
            lines += [f"        {p}" for p in res.problems]
            lines += [f"        {d}" for d in res.details]
    lines.append(f"\n{passed} passed, {failed} failed ({len(folders)} rule(s) in {root})")
    return "\n".join(lines), failed == 0


def lint_rules(directory: Path | None = None) -> tuple[str, bool]:
    """Lint every rule in ``directory`` (built-in rules when None); text and whether it is clean."""
    from nsight_advisor.authoring.lint import lint_folders
    from nsight_advisor.engine.rules import load_rule

    root, folders = _folders(directory)
    if not folders:
        return f"no rule folders in {root}", directory is None
    others: list[Rule] = []
    if directory is not None and builtin_rules_dir().is_dir():
        mine = {f.resolve() for f in folders}
        for f in rule_folders(builtin_rules_dir()):
            if f.resolve() not in mine:
                try:
                    others.append(load_rule(f, builtin=True))
                except RuleError:
                    pass  # a broken built-in rule is reported by linting the built-in rules
    rules, problems = lint_folders(folders, others=others)
    lines = [str(p) for p in problems]
    if problems:
        lines.append(f"\n{len(problems)} problem(s) in {len(folders)} rule(s) in {root}")
    else:
        lines.append(f"{len(folders)} rule(s) in {root}: no problems")
    return "\n".join(lines), not problems
test_rules.__test__ = False  # not a pytest test, despite its name
