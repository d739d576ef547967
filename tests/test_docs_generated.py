"""Docs made from the code stay current: the CLI reference, one page per rule, the analysis views and README's
usage block are what ``python -m tools.gen_docs`` writes (the sqlite-utils `cog` habit). When this fails, run
that command and commit the result."""

from __future__ import annotations

import click

from conftest import REPO
from tools import gen_docs


def test_generated_docs_are_current():
    """Every generated page matches what the generator makes now, and no rule page outlives its rule."""
    stale = gen_docs.stale()
    assert not stale, f"stale generated docs: {', '.join(stale)}; run `python -m tools.gen_docs` and commit"


def test_cli_reference_names_every_command_and_option():
    """docs/cli.md has a section for every command and a row for every option click knows."""
    from nsight_advisor.cli import main

    page = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    commands = gen_docs._commands(main, "")
    assert {"analyze", "compare", "ingest", "info", "query", "rules", "rules list", "rules test"} <= {
        name.strip() for name, _ in commands}
    for name, command in commands:
        assert f"## `nsight-advisor{name}`" in page
        for param in command.params:
            if isinstance(param, click.Option) and param.name != "help":
                assert f"`{param.opts[-1]}`" in page, f"{name}: {param.opts} missing from docs/cli.md"


def test_rule_pages_have_every_section():
    """Each built-in rule's page has what, why, fix, its parameters with units, its principles and an example."""
    from nsight_advisor.engine.rules import load_rules

    rules = load_rules(include_builtin=True)
    assert len(rules) >= 20
    for rule in rules:
        page = (REPO / "docs" / "rules" / f"{rule.name}.md").read_text(encoding="utf-8")
        for section in ("## What it finds", "## Why it matters", "## How to fix it", "## Principles it cites",
                        "## Example"):
            assert section in page, f"{rule.name}: {section} missing"
        for param in rule.params.values():
            assert f"| `{param.name}` | {param.type} | `{param.default}` |" in page


def test_readme_usage_block_is_the_generated_one():
    """README's usage block lists every command, options included (the block that drifted before)."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    block = readme[readme.index(gen_docs.USAGE_START):readme.index(gen_docs.USAGE_END)]
    for needle in ("nsight-advisor analyze CAPTURES...", "[--select RULE]...", "[--ignore RULE]...",
                   "nsight-advisor info CAPTURE [--format text|json]", "nsight-advisor compare [BASE HEAD]"):
        assert needle in block
