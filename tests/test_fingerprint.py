"""Stable finding fingerprints: the same problem on two runs keeps its identity while its numbers move, in the
analysis JSON, in ``analyze``'s SARIF ``partialFingerprints`` and in ``compare``."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema

from test_compare import AFTER, BEFORE, _cli, _need


def _analysis(path: Path, cwd: Path, fmt: str) -> dict:
    proc = _cli("analyze", str(path), "--format", fmt, cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_same_finding_on_before_and_after_keeps_its_fingerprint(tmp_path: Path) -> None:
    from nsight_advisor.engine.fingerprint import FINGERPRINT_KEY, finding_subject, fingerprint
    from test_report import sarif_schema

    _need(BEFORE, AFTER)
    before, after = _analysis(BEFORE, tmp_path, "json"), _analysis(AFTER, tmp_path, "json")
    by_fp = {f["fingerprint"]: f for f in before["findings"]}
    same = [(by_fp[f["fingerprint"]], f) for f in after["findings"] if f["fingerprint"] in by_fp]
    # the same problem on both runs, told by its rule, device and subject while its message's numbers differ
    moved = [(b, a) for b, a in same if b["message"] != a["message"]]
    assert len(moved) >= 3, [(b["message"], a["message"]) for b, a in same]
    for b, a in moved:
        assert (b["rule_id"], b["device_id"], finding_subject(b)) == (a["rule_id"], a["device_id"], finding_subject(a))
        assert fingerprint(b) == b["fingerprint"] == a["fingerprint"]
    # different devices or rules never share one: unique within a run
    assert len(by_fp) == len(before["findings"])
    # analyze's SARIF writes the same identity, and its results match the JSON's findings one to one
    for path, analysis in ((BEFORE, before), (AFTER, after)):
        log = _analysis(path, tmp_path, "sarif")
        jsonschema.Draft7Validator(sarif_schema()).validate(log)
        got = sorted(r["partialFingerprints"][FINGERPRINT_KEY] for r in log["runs"][0]["results"])
        assert got == sorted(f["fingerprint"] for f in analysis["findings"])
    # compare matches findings by the same fingerprint
    out = tmp_path / "cmp.json"
    assert _cli("compare", str(BEFORE), str(AFTER), "-o", str(out), cwd=tmp_path).returncode == 0
    matched = {f["fingerprint"] for f in json.loads(out.read_text())["findings"] if f["status"] != "new"
               and f["status"] != "resolved"}
    assert matched == {a["fingerprint"] for _, a in same}


def test_fingerprint_ignores_numbers_and_evidence_below_the_top_row() -> None:
    from nsight_advisor.engine.fingerprint import fingerprint

    f = {"rule_id": "NA101", "device_id": 0, "message": "grid of 50 blocks < 68 SMs",
         "evidence_columns": ["kernel", "blocks"], "evidence": [{"kernel": "k1", "blocks": 50}, {"kernel": "k2"}]}
    g = {**f, "message": "grid of 20 blocks < 68 SMs", "evidence": [{"kernel": "k1", "blocks": 20}]}
    assert fingerprint(f) == fingerprint(g)
    assert fingerprint(f) != fingerprint({**f, "device_id": 1})
    assert fingerprint(f) != fingerprint({**f, "evidence": [{"kernel": "k2", "blocks": 50}]})
    assert fingerprint({**f, "device_id": None}) != fingerprint(f)
