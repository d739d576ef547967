"""Waivers (``[[waive]]`` in the config): accepted findings stay out of ``--fail-on`` and ``--fail-on-regression``,
are marked in every format, and stop applying after their last day, which the reports then say."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from test_compare import BEFORE, CLOVERLEAF, _cli, _compare_json, _most_launched, _need, stretch_kernel
from test_report import validate_json_contract, validate_sarif

FUTURE, PAST = "2099-12-31", "2020-01-01"


def _config(tmp_path: Path, *entries: tuple[str, str, str, str]) -> Path:
    path = tmp_path / "waivers.toml"
    path.write_text("".join(f'[[waive]]\nrule = "{r}"\nsubject = "{s}"\nreason = "{why}"\nexpires = {exp}\n\n'
                            for r, s, why, exp in entries), encoding="utf-8")
    return path


def test_parse_dates_expiry_and_mistakes(tmp_path: Path) -> None:
    from nsight_advisor.engine.waivers import parse_waivers
    from nsight_advisor.common.errors import ConfigError

    day = dt.date(2026, 12, 1)
    entry = {"rule": "NA401", "subject": "*", "reason": "accepted"}
    ws = parse_waivers([{**entry, "expires": dt.date(2026, 12, 1)}, {**entry, "expires": "2026-11-30"}],
                       tmp_path / "c.toml", today=day)
    assert [w.expired for w in ws] == [False, True]  # the expiry date is the last day it applies
    for bad, says in (({**entry, "expires": "next week"}, "expected a date YYYY-MM-DD"),
                      ({"rule": "NA401", "subject": "*", "expires": "2027-01-01"}, "key 'reason'"),
                      ({**entry, "expires": "2027-01-01", "device": 0}, "unknown key 'device'")):
        with pytest.raises(ConfigError, match=says):
            parse_waivers([bad], tmp_path / "c.toml", today=day)


def test_subject_matching_by_text_glob_or_fingerprint() -> None:
    from nsight_advisor.engine.fingerprint import fingerprint
    from nsight_advisor.engine.waivers import Waiver, waiver_for

    f = {"rule_id": "NA101", "rule_name": "small-grid", "device_id": 0, "evidence_columns": ["kernel", "blocks"],
         "evidence": [{"kernel": "gemm_kernel<128>", "blocks": 50}]}

    def w(rule, subject, expired=False):
        return Waiver(rule, subject, "why", dt.date(2030, 1, 1), expired)

    assert waiver_for(f, [w("NA101", "gemm_kernel<128>")]) is not None
    assert waiver_for(f, [w("small-grid", "gemm_*")]) is not None  # rule by name, subject by glob
    assert waiver_for(f, [w("NA101", fingerprint(f))]) is not None
    assert waiver_for(f, [w("NA101", "other_kernel")]) is None  # wrong subject
    assert waiver_for(f, [w("NA102", "*")]) is None  # wrong rule
    # an unexpired waiver wins over an expired one; an expired one alone is reported, not applied
    assert waiver_for(f, [w("NA101", "*", True), w("NA101", "gemm*")]).expired is False
    assert waiver_for(f, [w("NA101", "*", True)]).expired is True


def test_analyze_waiver_applied_expired_and_wrong_subject(tmp_path: Path) -> None:
    _need(BEFORE)
    # the mfu capture's highest severity is warning, from four rules (gpu-idle-gap, NA401, on both GPUs)
    plain = json.loads(_cli("analyze", str(BEFORE), "--format", "json", cwd=tmp_path).stdout)
    warned = {f["rule_id"] for f in plain["findings"] if f["severity"] == "warning"}
    assert "NA401" in warned and not any(f["severity"] == "error" for f in plain["findings"])
    assert _cli("analyze", str(BEFORE), "--fail-on", "warning", "--format", "json", cwd=tmp_path).returncode == 1
    counts = {r: sum(f["rule_id"] == r for f in plain["findings"]) for r in warned}
    assert counts["NA401"] == 2

    hostile = "accepted <script>alert(1)</script> | see #12"
    others = [(r, "*", "accepted", FUTURE) for r in sorted(warned - {"NA401"})]
    active = _config(tmp_path, ("NA401", "*", hostile, FUTURE), *others,
                     ("sync-stall", "no-such-subject", "x", FUTURE))
    proc = _cli("analyze", str(BEFORE), "--config", str(active), "--fail-on", "warning", "--format", "json",
                cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr  # every warning is waived
    data = validate_json_contract(proc.stdout)
    hostile_waived = [f for f in data["findings"] if f["waiver"] and f["waiver"]["reason"] == hostile]
    assert {f["rule_id"] for f in hostile_waived} == {"NA401"} and len(hostile_waived) == 2
    assert all(f["waiver"]["status"] == "active" for f in hostile_waived)
    # the waiver with the wrong subject matches nothing and says so
    assert [(w["rule"], w["status"], w["findings"]) for w in data["waivers"]] == \
        [("NA401", "active", 2), *((r, "active", counts[r]) for r, *_ in others), ("sync-stall", "active", 0)]
    assert all(f["waiver"] is None for f in data["findings"] if f["rule_id"] == "NA301")
    # --fail-on still sees what is not waived (sync-stall's info findings)
    assert _cli("analyze", str(BEFORE), "--config", str(active), "--fail-on", "info", "--format", "json",
                cwd=tmp_path).returncode == 1

    sarif = validate_sarif(_cli("analyze", str(BEFORE), "--config", str(active), "--format", "sarif",
                                cwd=tmp_path).stdout)
    suppressed = [r for r in sarif["runs"][0]["results"] if r.get("suppressions")]
    assert len(suppressed) == sum(counts.values())
    mine = [r for r in suppressed if r["ruleId"] == "NA401"]
    assert len(mine) == 2 and mine[0]["suppressions"] == [{"kind": "external", "status": "accepted",
                                                            "justification": f"waived ({hostile}) until {FUTURE}"}]
    md = _cli("analyze", str(BEFORE), "--config", str(active), "--format", "md", cwd=tmp_path).stdout
    assert md.count("*waived (accepted &lt;script&gt;") == 2 and "<script>" not in md
    html = _cli("analyze", str(BEFORE), "--config", str(active), "--format", "html", cwd=tmp_path).stdout
    assert html.count("waived (accepted &lt;script&gt;alert(1)&lt;/script&gt;") == 2 and "<script>alert" not in html

    expired = _config(tmp_path, ("gpu-idle-gap", "*", "old acceptance", PAST))
    proc = _cli("analyze", str(BEFORE), "--config", str(expired), "--fail-on", "warning", "--format", "json",
                cwd=tmp_path)
    assert proc.returncode == 1  # expired: the warnings count again
    data = validate_json_contract(proc.stdout)
    assert data["waivers"] == [{"rule": "gpu-idle-gap", "subject": "*", "reason": "old acceptance",
                                "expires": PAST, "status": "expired", "findings": 2}]
    md = _cli("analyze", str(BEFORE), "--config", str(expired), "--format", "md", cwd=tmp_path).stdout
    assert md.count(f"waiver expired on {PAST} (old acceptance): it no longer applies") == 2
    sarif = validate_sarif(_cli("analyze", str(BEFORE), "--config", str(expired), "--format", "sarif",
                                cwd=tmp_path).stdout)
    assert not any(r.get("suppressions") for r in sarif["runs"][0]["results"])


def test_bad_waiver_is_one_line_exit_2(tmp_path: Path) -> None:
    _need(BEFORE)
    for entry, says in ((("NA999", "*", "typo", FUTURE), "[[waive]] rule 'NA999': unknown rule"),
                        (("NA201", "*", "x", '"soon"'), "expected a date YYYY-MM-DD")):
        proc = _cli("analyze", str(BEFORE), "--config", str(_config(tmp_path, entry)), "--format", "json",
                    cwd=tmp_path)
        assert proc.returncode == 2 and proc.stdout == "", proc.stderr
        assert proc.stderr.count("\n") == 1 and says in proc.stderr


def test_compare_regression_waiver(tmp_path: Path) -> None:
    _need(CLOVERLEAF)
    sid, name = _most_launched(CLOVERLEAF)
    head = tmp_path / "stretched.sqlite"
    stretch_kernel(CLOVERLEAF, head, sid, 1.3)
    _, failing = _compare_json(CLOVERLEAF, head, tmp_path, "--fail-on-regression", "0")
    assert failing.returncode == 1
    pattern = name.split("(")[0].split("<")[0] + "*"
    accepted = _config(tmp_path, ("regression", pattern, "slower by design", FUTURE))
    data, passing = _compare_json(CLOVERLEAF, head, tmp_path, "--fail-on-regression", "0", "--config",
                                  str(accepted))
    assert passing.returncode == 0
    slower = [k for k in data["kernels"] if k["status"] == "slower"]
    assert slower and all(k["waiver"]["status"] == "active" for k in slower)
    assert data["waivers"][0]["findings"] >= len(slower)
    md = _cli("compare", str(CLOVERLEAF), str(head), "--config", str(accepted), cwd=tmp_path).stdout
    assert "slower ✱; waived (slower by design) until 2099-12-31" in md
    stale = _config(tmp_path, ("regression", pattern, "slower by design", PAST))
    data, failing = _compare_json(CLOVERLEAF, head, tmp_path, "--fail-on-regression", "0", "--config", str(stale))
    assert failing.returncode == 1 and all(k["waiver"]["status"] == "expired" for k in data["kernels"]
                                           if k["status"] == "slower")
