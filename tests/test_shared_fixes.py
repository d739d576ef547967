"""Findings whose fixes change the same operations (engine/shared_fixes.py): grouped within a capture, replayed
together, and named on each other in the JSON, HTML and Markdown.

Known by construction: changes that share an operation, directly or through a third, form one group; the same
operations in two captures do not; a finding whose fix saves nothing stays out. On a real capture
(``nsu_v100_openacc``, whose two serial OpenACC kernels run one block of one thread), small-grid and block-size
each save most of the 20.9 s window alone, and together what ``whatif --fix`` with both says (within the
analysis's scaling of its middle steps), never more than the window.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from nsight_advisor import api
from nsight_advisor.engine.fingerprint import fingerprint
from nsight_advisor.engine.model import Finding, result_from_dict
from nsight_advisor.engine.shared_fixes import attach_shared_fixes, fix_groups
from nsight_advisor.report import render

REPO = Path(__file__).resolve().parent.parent
TRACES = REPO.parent / "shared" / "traces"


def _finding(rule: str, capture: int, saving: int | None, subject: str = "k") -> Finding:
    return Finding(rule_id=rule, rule_name=f"rule-{rule}", severity="warning", title=rule, message=rule,
                   capture_id=capture, impact_ns=1, impact_pct=0.0, evidence=[{"name": subject}],
                   evidence_columns=["name"], device_id=0, saving_ns=saving)


def _scaled(*ops: int) -> dict[str, tuple]:
    """A sparse kernel change (fix_replays.sparse's form): the ops it scales, at half their time."""
    return {"own_scale": (np.array(ops), np.full(len(ops), 0.5))}


def test_groups_are_the_connected_findings_of_one_capture():
    a, b, c = _finding("A", 1, 10), _finding("B", 1, 20), _finding("C", 1, 30)
    d, e = _finding("D", 2, 40), _finding("E", 1, 50)
    changes = {id(a): _scaled(1, 2), id(b): {"drop_wait": (np.array([2, 3]), None)},  # shares op 2 with a
               id(c): _scaled(3, 9),  # shares op 3 with b only: one group through b
               id(d): _scaled(1, 2, 3),  # the same ops, another capture
               id(e): _scaled(4, 5)}
    assert fix_groups([a, b, c, d, e], changes) == [[a, b, c]]


def test_members_are_marked_with_each_other_and_the_saving_together():
    a, b, c, zero = _finding("A", 1, 10, "x"), _finding("B", 1, 20, "y"), _finding("C", 1, 30, "z"), \
        _finding("Z", 1, 0)
    changes = {id(a): _scaled(1), id(b): _scaled(1, 2), id(c): _scaled(7), id(zero): _scaled(2, 7)}
    asked = []

    def together(members):
        asked.append([f.rule_id for f in members])
        return 25

    # zero saves nothing alone: it takes no part, so c (linked to the others only through it) stays alone
    assert attach_shared_fixes([a, b, c, zero], changes, together) == 1
    assert asked == [["A", "B"]]
    assert a.saving_together_ns == b.saving_together_ns == 25 and c.saving_together_ns is None
    assert a.shares_fix_with == [{"rule_id": "B", "rule_name": "rule-B", "saving_ns": 20,
                                  "fingerprint": fingerprint(b.to_dict())}]
    assert [o["rule_id"] for o in b.shares_fix_with] == ["A"] and c.shares_fix_with == []
    # the JSON carries the fields where set, and a kept result reads them back
    doc = a.to_dict()
    assert doc["saving_together_ns"] == 25 and doc["shares_fix_with"][0]["fingerprint"] == fingerprint(b.to_dict())
    assert "shares_fix_with" not in c.to_dict() and "saving_together_ns" not in c.to_dict()


def test_a_group_left_out_by_the_replays_bound_stays_unmarked():
    a, b = _finding("A", 1, 10), _finding("B", 1, 20)
    assert attach_shared_fixes([a, b], {id(a): _scaled(1), id(b): _scaled(1)}, lambda members: None) == 0
    assert a.shares_fix_with == [] and a.saving_together_ns is None


@pytest.fixture(scope="module")
def openacc(tmp_path_factory):
    capture = TRACES / "nsys" / "nsu_v100_openacc.sqlite"
    if not capture.exists():
        pytest.skip(f"real traces not present at {TRACES} (CI has ../shared/traces beside the checkout)")
    store = tmp_path_factory.mktemp("openacc") / "s.duckdb"
    return capture, store, api.open(capture, store=store).result


def test_two_rules_on_one_serial_kernel_save_together_what_whatif_says(openacc):
    capture, store, result = openacc
    grid = next(f for f in result.findings if f.rule_name == "small-grid")
    block = next(f for f in result.findings if f.rule_name == "block-size-not-multiple-of-32")
    doc = result.to_dict()
    by_rule = {f["rule_name"]: f for f in doc["findings"]}
    assert by_rule["small-grid"]["shares_fix_with"] == [
        {"rule_id": block.rule_id, "rule_name": block.rule_name, "saving_ns": block.saving_ns,
         "fingerprint": by_rule["block-size-not-multiple-of-32"]["fingerprint"]}]
    # each alone takes most of the window off; added up they would be nearly twice the window
    gpu = next(a for a in doc["captures"][0]["accounting"] if a["device_id"] == 0)
    window = gpu["window_end_ns"] - gpu["window_start_ns"]
    assert grid.saving_ns > 0.9 * window and block.saving_ns > 0.9 * window
    assert grid.saving_together_ns == block.saving_together_ns
    assert max(grid.saving_ns, block.saving_ns) <= grid.saving_together_ns <= window
    # whatif replays all 500 steps, the analysis its 256 middle ones scaled to all (MAX_ANALYSIS_STEPS)
    answer = api.whatif(capture, fixes=["small-grid", "block-size-not-multiple-of-32"], store=store)
    assert sum(c["saving_ns"] for c in answer["captures"]) == pytest.approx(grid.saving_together_ns, rel=0.01)
    # the sync-stall finding changes other operations: it shares with none
    stall = next(f for f in result.findings if f.rule_name == "sync-stall")
    assert stall.shares_fix_with == [] and stall.saving_together_ns is None
    assert doc["summary"]["savings"]["shared_fix_groups"] == 1
    assert result_from_dict(json.loads(json.dumps(doc))).findings[0].saving_together_ns == grid.saving_together_ns


def test_the_reports_name_the_other_finding_and_both_savings(openacc, tmp_path):
    _capture, _store, result = openacc
    html = render(result, "html")
    shown = [f["rule_name"] for f in result.to_dict()["findings"]]
    other = shown.index("block-size-not-multiple-of-32") + 1
    assert f'Its fix changes some of the same operations as <a href="#finding-{other}">finding {other} (NA103 ' \
           "block-size-not-multiple-of-32)</a>. Fixed together, the steps would be <b>20.9 s</b> shorter (replayed), " \
           "against 40.9 s for their savings one at a time added up." in html
    md = render(result, "md")
    assert f"same operations as finding {other} (NA103 block-size-not-multiple-of-32). Fixed together, the steps " \
           "would be **20.9 s** shorter" in md
