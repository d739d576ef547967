"""`rules new | test | lint | list | show`: the scaffold passes, every lint defect class is caught, failures diff."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from nsight_advisor.authoring import commands as authoring
from nsight_advisor.common.errors import InputError
from tests.conftest import REPO


@pytest.fixture
def scaffold(tmp_path) -> Path:
    """A fresh `rules new` folder: tmp/rules/slow-api."""
    authoring.new_rule("slow-api", tmp_path / "rules")
    return tmp_path / "rules" / "slow-api"


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1))


def lint(folder: Path) -> tuple[str, bool]:
    return authoring.lint_rules(folder.parent)


def test_scaffold_passes_lint_and_test(scaffold):
    text, ok = lint(scaffold)
    assert ok, text
    text, ok = authoring.test_rules(scaffold.parent)
    assert ok, text
    assert "3 passed, 0 failed" in text


def test_scaffold_refuses_bad_names_and_existing_folders(scaffold):
    with pytest.raises(InputError, match="lowercase"):
        authoring.new_rule("Slow_API", scaffold.parent)
    with pytest.raises(InputError, match="already exists"):
        authoring.new_rule("slow-api", scaffold.parent)


def test_second_scaffold_gets_a_new_id(scaffold):
    authoring.new_rule("other-api", scaffold.parent)
    text, ok = authoring.lint_rules(scaffold.parent)
    assert ok, text


# --- one test per lint defect class ----------------------------------------------------------------------

def assert_lint_says(folder: Path, *words: str) -> str:
    text, ok = lint(folder)
    assert not ok, text
    for word in words:
        assert word in text, f"{word!r} not in lint output:\n{text}"
    return text


def test_lint_catches_duplicate_ids(scaffold):
    authoring.new_rule("other-api", scaffold.parent)
    edit(scaffold.parent / "other-api" / "rule.toml", 'id = "NA902"', 'id = "NA901"')
    assert_lint_says(scaffold, "'NA901' is already used", "unique id")


def test_lint_catches_an_id_taken_by_a_builtin_rule(scaffold):
    from nsight_advisor.engine.rules import load_rules

    builtin = load_rules([], include_builtin=True)
    if not builtin:
        pytest.skip("no built-in rules yet")
    edit(scaffold / "rule.toml", 'id = "NA901"', f'id = "{builtin[0].id}"')
    assert_lint_says(scaffold, f"'{builtin[0].id}' is already used")


def test_lint_catches_an_undeclared_param(scaffold):
    edit(scaffold / "query.sql", "where a.capture_id = $capture_id", "where a.capture_id = $capture_id and a.duration_ns > $min_ns")
    assert_lint_says(scaffold, "query.sql: $min_ns: not declared", "[params.min_ns]")


def test_lint_catches_an_unused_param(scaffold):
    edit(scaffold / "rule.toml", "[judgement]", '[params.unused_ns]\ntype = "int"\ndefault = 5\nunit = "ns"\nwhy = "x"\n\n[judgement]')
    assert_lint_says(scaffold, "params.unused_ns: declared but never used")


def test_lint_catches_sql_that_does_not_run_against_the_schema(scaffold):
    edit(scaffold / "query.sql", "a.base_name as api", "a.function_name as api")
    assert_lint_says(scaffold, "query.sql", "does not run against the normalized schema", "function_name")


def test_lint_catches_sql_that_reads_a_table_outside_the_schema(scaffold):
    edit(scaffold / "query.sql", "from api_calls a", "from CUPTI_ACTIVITY_KIND_RUNTIME a")
    assert_lint_says(scaffold, "does not run against the normalized schema", "CUPTI_ACTIVITY_KIND_RUNTIME")


def test_lint_catches_more_than_one_statement(scaffold):
    (scaffold / "query.sql").write_text((scaffold / "query.sql").read_text() + ";\ncopy api_calls to 'x.csv'\n")
    assert_lint_says(scaffold, "exactly one SELECT")


def test_lint_catches_a_missing_evidence_column(scaffold):
    edit(scaffold / "rule.toml", '"total_ms", "impact_ns"]', '"total_ms", "mean_ms", "impact_ns"]')
    assert_lint_says(scaffold, "finding.evidence_columns: column 'mean_ms' is not in the query's result")


def test_lint_catches_a_missing_judgement_column(scaffold):
    edit(scaffold / "rule.toml", 'column = "calls"', 'column = "call_count"')
    assert_lint_says(scaffold, "judgement.column: column 'call_count'")


def test_lint_catches_a_missing_impact_column(scaffold):
    edit(scaffold / "rule.toml", 'impact_column = "impact_ns"', 'impact_column = "saved_ns"')
    assert_lint_says(scaffold, "finding.impact_column: column 'saved_ns'")


def test_lint_catches_an_unknown_message_placeholder(scaffold):
    edit(scaffold / "rule.toml", "{top.api} with", "{top.function} with {worst}")
    assert_lint_says(scaffold, "placeholder {top.function}", "placeholder {worst} is unknown")


def test_lint_catches_an_empty_docs_section(scaffold):
    edit(scaffold / "rule.toml", 'limits = "The impact', 'limits = "  "\nold_limits = "The impact')
    text, ok = lint(scaffold)  # an unknown key is a load error, reported by lint too
    assert not ok and "old_limits" in text
    edit(scaffold / "rule.toml", '\nold_limits = "The impact', '\n# "The impact')
    assert_lint_says(scaffold, "docs.limits: empty")


def test_lint_catches_a_missing_firing_case(scaffold):
    text = (scaffold / "cases.toml").read_text()
    (scaffold / "cases.toml").write_text(text[text.index('[[case]]\nname = "one call'):])
    assert_lint_says(scaffold, "cases.toml: case: no case fires")


def test_lint_catches_a_missing_clean_case(scaffold):
    text = (scaffold / "cases.toml").read_text()
    (scaffold / "cases.toml").write_text(text[: text.index('[[case]]\nname = "one call')])
    assert_lint_says(scaffold, "cases.toml: case: no clean case")


def test_lint_catches_an_unknown_principle(scaffold):
    edit(scaffold / "rule.toml", '"cuda-graphs.launch-overhead"', '"cuda-graphs.launch-overheads"')
    assert_lint_says(scaffold, "'cuda-graphs.launch-overheads' is not in the guide catalog")


def test_lint_catches_an_empty_capture_option(scaffold):
    edit(scaffold / "rule.toml", 'capture_option = "nsys profile --trace=cuda"', 'capture_option = ""')
    assert_lint_says(scaffold, "requires[0].capture_option: empty")


def test_lint_catches_load_errors_without_crashing(scaffold):
    edit(scaffold / "rule.toml", 'category = "timeline"', 'category = "timelines"')
    assert_lint_says(scaffold, "rule.toml", "category", "'timelines'")


def test_lint_catches_bad_case_tables(scaffold):
    edit(scaffold / "cases.toml", "base_name = \"cudaMemcpy\", name", "base_nam = \"cudaMemcpy\", name")
    assert_lint_says(scaffold, "api_calls has no column 'base_nam'")


# --- rules test ------------------------------------------------------------------------------------------

def test_failing_case_prints_a_readable_diff(scaffold):
    edit(scaffold / "cases.toml", "expect_rows = 1", "expect_rows = 2")
    edit(scaffold / "cases.toml", 'expect = "clean"', 'expect = "findings"')
    text, ok = authoring.test_rules(scaffold.parent)
    assert not ok
    assert "FAIL  NA901 slow-api: 3 calls above a limit of 2 fire" in text
    assert "expected 2 firing row(s), got 1" in text
    assert "FAIL  NA901 slow-api: one call stays clean" in text
    assert "expected findings, got clean" in text
    assert "evidence api='cudaMemcpy'" in text
    assert "1 passed, 2 failed" in text


# --- list / show / CLI -----------------------------------------------------------------------------------

def test_list_and_show(scaffold):
    listing = authoring.list_rules([scaffold.parent])
    line = next(x for x in listing.splitlines() if "slow-api" in x)
    assert line.split()[:4] == ["NA901", "slow-api", "timeline", "preview"]
    shown = authoring.show_rule("NA901", [scaffold.parent])
    for part in ("What it finds", "Why it matters", "How to fix", "Known limits", "max_calls = 1000 calls (int)",
                 "https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#cuda-graphs"):
        assert part in shown
    with pytest.raises(InputError, match="no rule 'NA999'"):
        authoring.show_rule("NA999", [scaffold.parent])


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    return subprocess.run([sys.executable, "-m", "nsight_advisor", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def test_cli_exit_codes(tmp_path):
    proc = cli("rules", "new", "slow-api", "--dir", "mine", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert cli("rules", "lint", "mine", cwd=tmp_path).returncode == 0
    assert cli("rules", "test", "mine", cwd=tmp_path).returncode == 0
    edit(tmp_path / "mine" / "slow-api" / "cases.toml", "expect_rows = 1", "expect_rows = 5")
    proc = cli("rules", "test", "mine", cwd=tmp_path)
    assert proc.returncode == 1 and "expected 5 firing row(s), got 1" in proc.stdout
    edit(tmp_path / "mine" / "slow-api" / "rule.toml", 'severity = "info"', 'severity = 3')
    proc = cli("rules", "list", "--rules-dir", "mine", cwd=tmp_path)
    assert proc.returncode == 2
    assert "slow-api/rule.toml:5: key 'severity': expected a string" in proc.stderr
    assert "Traceback" not in proc.stderr
