"""Real captures analyzed once per test session, shared by the rule-library and agreement tests.

Each capture in ``../shared/traces`` is ingested into its own store in a temporary folder (never the user's cache)
and analyzed with every built-in rule; results are cached for the session.
"""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from pathlib import Path

from conftest import TRACES

_TMP = Path(tempfile.mkdtemp(prefix="na-rules-real-"))
atexit.register(shutil.rmtree, _TMP, True)


@functools.lru_cache(maxsize=None)
def analyzed(relpath: str):
    """(result, con) for ``../shared/traces/<relpath>``: the AnalysisResult of all built-in rules and the store."""
    from nsight_advisor import workflow
    from nsight_advisor.engine.analyze import run_analysis

    path = TRACES / relpath
    store = _TMP / (path.name.replace(".", "_") + ".duckdb")
    con, ids = workflow.load([path], store_path=store, use_cache=False)
    result = run_analysis(con, ids)
    return result, con


def findings(relpath: str, rule_name: str) -> list:
    """The findings ``rule_name`` produced on that capture."""
    result, _ = analyzed(relpath)
    return [f for f in result.findings if f.rule_name == rule_name]


def outcome(relpath: str, rule_name: str):
    """The outcome of ``rule_name`` on that capture."""
    result, _ = analyzed(relpath)
    return next(o for o in result.outcomes if o.rule_name == rule_name)


def evidence(relpath: str, rule_name: str) -> list[dict]:
    """Every evidence row of ``rule_name``'s findings on that capture."""
    return [row for f in findings(relpath, rule_name) for row in f.evidence]
