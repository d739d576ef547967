"""Every built-in rule's cases.toml, one test per rule and case, plus `rules lint` per built-in rule.

The same runner as `nsight-advisor rules test`; a failure shows the readable diff it prints.
"""

from __future__ import annotations

import pytest

from nsight_advisor.engine.rules import load_rule, rule_folders
from nsight_advisor.common.errors import RuleError
from nsight_advisor.common.resources import builtin_rules_dir


def _folders():
    root = builtin_rules_dir()
    return rule_folders(root) if root.is_dir() else []


def _case_params():
    from nsight_advisor.authoring.cases import load_cases

    params = []
    for folder in _folders():
        try:
            rule = load_rule(folder, builtin=True)
            cases = load_cases(rule)
        except RuleError as exc:
            params.append(pytest.param(folder, None, str(exc), id=f"{folder.name}-cannot-load"))
            continue
        if not cases:
            params.append(pytest.param(folder, None, "cases.toml has no [[case]]", id=f"{folder.name}-no-cases"))
        for i, case in enumerate(cases):
            params.append(pytest.param(folder, i, None, id=f"{rule.name}:{case.name}"))
    return params or [pytest.param(None, None, None, marks=pytest.mark.skip(reason="no built-in rules yet"))]


@pytest.mark.parametrize("folder, index, load_error", _case_params())
def test_builtin_rule_case(folder, index, load_error):
    from nsight_advisor.authoring.cases import load_cases, run_case

    assert load_error is None, load_error
    rule = load_rule(folder, builtin=True)
    case = load_cases(rule)[index]
    result = run_case(rule, case)
    assert result.passed, "\n".join([f"{rule.id} {rule.name}: {case.name}", *result.problems, *result.details])


@pytest.mark.parametrize("folder", _folders() or [None], ids=lambda f: f.name if f else "none")
def test_builtin_rule_lints_clean(folder):
    if folder is None:
        pytest.skip("no built-in rules yet")
    from nsight_advisor.authoring.lint import lint_folders

    others = []
    for other in _folders():
        if other != folder:
            try:
                others.append(load_rule(other, builtin=True))
            except RuleError:
                pass  # reported by that rule's own test
    _, problems = lint_folders([folder], others=others)
    assert not problems, "\n".join(map(str, problems))
