"""The findings an engineer names for ``whatif --fix RULE`` (engine/whatif.py replays their fixes)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from nsight_advisor.engine.analyze import run_analysis

if TYPE_CHECKING:
    import duckdb

    from nsight_advisor.engine.model import Finding


def findings_of_rules(con: duckdb.DuckDBPyConnection, capture_ids: Sequence[int], keys: Sequence[str], *,
                      rules_dirs: Sequence = (), config_path=None) -> list[Finding]:
    """The findings of the rules named by ``keys`` (ids or names) in an analysis of ``capture_ids`` as ``analyze``
    runs it, every rule included, so that each finding's claim, and so its fix, is the report's; none when ``keys``
    is empty. ValueError: no such rule, or it found nothing."""
    if not keys:
        return []
    result = run_analysis(con, capture_ids, rules_dirs=rules_dirs, config_path=config_path)
    found, seen = [], set()
    for key in keys:
        outcome = next((o for o in result.outcomes if key.lower() == o.rule_id.lower() or key == o.rule_name), None)
        if outcome is None:
            raise ValueError(f"--fix {key}: no such rule in this analysis (nsight-advisor rules list names them)")
        if outcome.rule_id in seen:  # named twice (by id and by name): its fixes once
            continue
        seen.add(outcome.rule_id)
        mine = [f for f in result.findings if f.rule_id == outcome.rule_id]
        if not mine:
            raise ValueError(f"--fix {outcome.rule_name}: the rule found nothing in these captures "
                             f"({outcome.status}{': ' + outcome.reason if outcome.reason else ''})")
        found += mine
    return found
