"""Several captures a side (repeated --base/--head, directories of ranks) and `analyze HEAD --baseline BASE`."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from test_compare import AFTER, BEFORE, _cli, _need
from test_report import validate_json_contract, validate_sarif


def _side_dir(tmp_path: Path, name: str, *captures: Path) -> Path:
    """A directory standing for one run's ranks: links to the real captures (never copies of them)."""
    folder = tmp_path / name
    folder.mkdir()
    for i, c in enumerate(captures):
        (folder / f"rank{i}.sqlite").symlink_to(c)
    (folder / "notes.txt").write_text("not a capture", encoding="utf-8")
    return folder


def _json(proc, out: Path) -> dict:
    assert proc.returncode == 0, proc.stderr
    from nsight_advisor.report.compare_report import comparison_schema

    data = json.loads(out.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator(comparison_schema()).validate(data)
    return data


def test_directories_and_repeated_options_give_each_side_its_ranks(tmp_path: Path) -> None:
    _need(BEFORE, AFTER)
    plain = _json(_cli("compare", str(BEFORE), str(AFTER), "-o", str(tmp_path / "a.json"), cwd=tmp_path),
                  tmp_path / "a.json")
    # a directory holding one capture is that capture
    one = _json(_cli("compare", "--base", str(_side_dir(tmp_path, "b1", BEFORE)), "--head", str(AFTER), "-o",
                     str(tmp_path / "b.json"), cwd=tmp_path), tmp_path / "b.json")
    assert one["verdict"] == plain["verdict"] and one["kernels"] == plain["kernels"]
    assert one["base"]["captures"] == [BEFORE.name]  # the link resolved: the report names the capture itself
    # two ranks a side: a directory on one side, repeated options on the other
    two = _json(_cli("compare", "--base", str(_side_dir(tmp_path, "b2", BEFORE, AFTER)), "--head", str(AFTER),
                     "--head", str(BEFORE), "-o", str(tmp_path / "c.json"), cwd=tmp_path), tmp_path / "c.json")
    notes = {n["aspect"]: n for n in two["comparability"]}
    assert (notes["captures"]["base"], notes["captures"]["head"]) == (2, 2)
    assert two["base"]["captures"] == [BEFORE.name, AFTER.name] and two["head"]["captures"] == [AFTER.name, BEFORE.name]
    # the same two captures on both sides: every kernel's launches are the sum of both, and nothing changed
    assert all(k["base"]["launches"] == k["head"]["launches"] for k in two["kernels"])
    launches = {k["name"]: k["base"]["launches"] for k in plain["kernels"]}
    for k in two["kernels"]:
        if k["name"] in launches:
            assert k["base"]["launches"] >= launches[k["name"]]
    assert two["verdict"]["status"] == "no change" and two["kernel_counts"]["slower"] == 0
    # ranks step together at the slowest: each side's steps are those of the capture with fewer of them
    assert two["iterations"]["base"]["steady"] == two["iterations"]["head"]["steady"] == 15


@pytest.mark.parametrize("args, says", [
    (["A", "B", "--head", "C"], "not both"),
    (["A"], "expected two paths, BASE and HEAD, got 1"),
    (["--base", "A"], "missing a side"),
])
def test_wrong_sides_are_one_line_exit_2(args: list[str], says: str, tmp_path: Path) -> None:
    proc = _cli("compare", *args, cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == "" and proc.stderr.count("\n") == 1 and says in proc.stderr


def test_empty_directory_is_exit_2(tmp_path: Path) -> None:
    _need(BEFORE)
    (tmp_path / "empty").mkdir()
    proc = _cli("compare", str(tmp_path / "empty"), str(BEFORE), cwd=tmp_path)
    assert proc.returncode == 2 and "BASE directory holds no capture" in proc.stderr


def test_analyze_with_baseline_holds_the_comparison(tmp_path: Path) -> None:
    _need(BEFORE, AFTER)
    out = tmp_path / "cmp.json"
    alone = _json(_cli("compare", str(BEFORE), str(AFTER), "-o", str(out), cwd=tmp_path), out)
    proc = _cli("analyze", str(AFTER), "--baseline", str(BEFORE), "--format", "json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    doc = validate_json_contract(proc.stdout)
    head = json.loads(_cli("analyze", str(AFTER), "--format", "json", cwd=tmp_path).stdout)
    assert doc["findings"] == head["findings"]  # the usual report, with a section more
    assert doc["comparison"] == alone
    md = _cli("analyze", str(AFTER), "--baseline", str(BEFORE), "--format", "md", cwd=tmp_path).stdout
    assert md.startswith("## Against the baseline: ") and len(md) <= 65_536
    assert md.index(alone["verdict"]["text"][:40]) < md.index("## nsight-advisor: ")
    sarif = validate_sarif(_cli("analyze", str(AFTER), "--baseline", str(BEFORE), "--format", "sarif",
                                cwd=tmp_path).stdout)
    states = {r["baselineState"] for r in sarif["runs"][0]["results"]}
    assert "new" in states and states <= {"new", "unchanged", "updated", "absent"}
    # --fail-on still judges HEAD's findings
    assert _cli("analyze", str(AFTER), "--baseline", str(BEFORE), "--fail-on", "error", "--format", "json",
                cwd=tmp_path).returncode == 1


def test_baseline_with_store_and_no_cache(tmp_path: Path) -> None:
    _need(BEFORE, AFTER)
    store = tmp_path / "head.duckdb"
    proc = _cli("analyze", str(AFTER), "--store", str(store), "--baseline", str(BEFORE), "--no-cache", "--format",
                "json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    doc = validate_json_contract(proc.stdout)
    assert doc["comparison"]["base"]["captures"] == [BEFORE.name]
    assert doc["comparison"]["iterations"]["head"]["count"] == 15
    # HEAD was read from its --store; only BASE went to the cache, never into HEAD's store
    assert len(list((tmp_path / "cache").glob("*.duckdb"))) == 1
    from nsight_advisor.workflow import query

    assert json.loads(query(store, "SELECT count(*) AS n FROM captures", "json"))[0]["n"] == 1
