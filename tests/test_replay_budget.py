"""The what-if's replay budget (engine/fix_replays.py MAX_ANALYSIS_REPLAY_OPS): each rule's fix on all ranks is replayed
before the findings one by one, so a job too large for every finding's replay still has each rule's all-ranks
saving; what the budget leaves out is counted, and what it lets in is the saving an unbounded analysis gives.

On the 8 real DLRM ranks: the analysis's findings, their savings taken off and attached again with a budget that
holds the all-ranks replays and a few findings' replays."""

from __future__ import annotations

from nsight_advisor.engine import fix_replays, whatif
from nsight_advisor.engine.combined_view import finding_subject


def _cleared(findings):
    kept = {id(f): (f.saving_ns, f.critical_path_pct, f.saving_all_ranks_ns) for f in findings}
    for f in findings:
        f.saving_ns = f.critical_path_pct = f.saving_all_ranks_ns = None
    return kept


def test_a_short_budget_keeps_every_all_ranks_saving_and_counts_the_findings_it_leaves(dlrm_analysed, monkeypatch):
    con, ids, findings, model = dlrm_analysed
    unbounded = {id(f): (f.saving_ns, f.critical_path_pct, f.saving_all_ranks_ns) for f in findings}
    n = len(model.graph)
    group_count = len({(f.rule_id, finding_subject(f)) for f in findings if f.saving_all_ranks_ns is not None})
    assert group_count >= 2, "the DLRM job has rules firing on several ranks"
    # the all-ranks replays (a whole graph each) and room for about three findings' replays
    per_finding = n // len(ids) + int(n * fix_replays.REPLAY_PASS_SHARE)
    monkeypatch.setattr(fix_replays, "MAX_ANALYSIS_REPLAY_OPS", group_count * n + 3 * per_finding)
    _cleared(findings)
    summary = whatif.attach_savings(con, ids, findings, model=model)

    for f in findings:
        saving, pct, all_ranks = unbounded[id(f)]
        assert f.saving_all_ranks_ns == all_ranks  # every group's, as without a bound
        assert f.critical_path_pct == pct  # a fix's share of the path needs no replay
        assert f.saving_ns in (None, saving)  # replayed: the same saving; else none
    replayed = sum(f.saving_ns is not None for f in findings)
    left = sum(f.saving_ns is None and unbounded[id(f)][0] is not None for f in findings)
    assert 1 <= replayed <= 3 < replayed + left
    assert summary["findings"] == replayed and summary["findings_not_replayed"] == left

    # without a bound again: every finding with a fix has its saving
    monkeypatch.setattr(fix_replays, "MAX_ANALYSIS_REPLAY_OPS", 10 ** 12)
    _cleared(findings)
    whatif.attach_savings(con, ids, findings, model=model)
    assert {id(f): (f.saving_ns, f.critical_path_pct, f.saving_all_ranks_ns) for f in findings} == unbounded

