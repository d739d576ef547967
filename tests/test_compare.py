"""`compare BASE HEAD` on real exports: the real before/after pair, a capture against itself, and controlled pairs
made from a real export (one kernel stretched by a known factor; timing noise only)."""

from __future__ import annotations

import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from conftest import REPO, TRACES

NSYS = TRACES / "nsys"
BEFORE = NSYS / "nsys_ai_mfu_2gpu_before.sqlite"
AFTER = NSYS / "nsys_ai_mfu_2gpu_after.sqlite"
CLOVERLEAF = NSYS / "pipit_cloverleaf_a100.sqlite"


def _need(*paths: Path) -> None:
    for p in paths:
        if not p.exists():
            pytest.skip(f"real traces absent at {p}")


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "NSIGHT_ADVISOR_CACHE": str(cwd / "cache")}
    return subprocess.run([sys.executable, "-m", "nsight_advisor", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def _compare_json(base: Path, head: Path, cwd: Path, *extra: str) -> tuple[dict, subprocess.CompletedProcess]:
    out = cwd / f"cmp-{base.stem}-{head.stem}.json"
    proc = _cli("compare", str(base), str(head), "-o", str(out), *extra, cwd=cwd)
    assert proc.returncode in (0, 1), proc.stderr
    data = json.loads(out.read_text(encoding="utf-8"))
    from nsight_advisor.report.compare_report import comparison_schema

    jsonschema.Draft202012Validator(comparison_schema()).validate(data)
    return data, proc


# ---- controlled pairs, made from a real export -------------------------------------------------------------------

def _timed_tables(con: sqlite3.Connection) -> list[str]:
    tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    return [t for t in tables if {"start", "end"} <= {r[1] for r in con.execute(f'PRAGMA table_info("{t}")')}]


def stretch_kernel(src: Path, dst: Path, demangled_id: int, factor: float) -> None:
    """Copy ``src`` to ``dst`` with every launch of one kernel (by demangled-name string id) ``factor`` times as
    long, and every timestamp at or after each stretched launch's original end moved later by the time added."""
    shutil.copyfile(src, dst)
    con = sqlite3.connect(dst)
    rows = con.execute("SELECT start, end FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE demangledName = ? ORDER BY end",
                       [demangled_id]).fetchall()
    cum, shifts = 0, []
    for start, end in rows:
        cum += round((end - start) * (factor - 1.0))
        shifts.append((end, cum))
    con.execute("CREATE TEMP TABLE shift(orig_end INTEGER PRIMARY KEY, cum INTEGER)")
    con.executemany("INSERT OR REPLACE INTO shift VALUES (?, ?)", shifts)

    def moved(col: str) -> str:
        return f'COALESCE((SELECT cum FROM shift WHERE orig_end <= t."{col}" ORDER BY orig_end DESC LIMIT 1), 0)'

    for table in _timed_tables(con):
        con.execute(f'UPDATE "{table}" AS t SET start = start + {moved("start")}, "end" = "end" + {moved("end")} '
                    'WHERE start IS NOT NULL AND "end" IS NOT NULL')
    con.commit()
    con.close()


def jitter_kernels(src: Path, dst: Path, fraction: float, seed: int) -> None:
    """Copy ``src`` to ``dst`` with every kernel's duration scaled by a seeded uniform factor in 1 ± ``fraction``."""
    shutil.copyfile(src, dst)
    con = sqlite3.connect(dst)
    rng = random.Random(seed)
    rows = con.execute("SELECT rowid, start, end FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY rowid").fetchall()
    con.executemany('UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET "end" = ? WHERE rowid = ?',
                    [(s + max(1, round((e - s) * (1 + rng.uniform(-fraction, fraction)))), r) for r, s, e in rows])
    con.commit()
    con.close()


def _most_launched(src: Path) -> tuple[int, str]:
    con = sqlite3.connect(f"file:{src}?mode=ro", uri=True)
    try:
        return con.execute(
            "SELECT k.demangledName, s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = "
            "k.demangledName GROUP BY 1, 2 ORDER BY count(*) DESC, sum(k.\"end\" - k.start) DESC, 1 LIMIT 1").fetchone()
    finally:
        con.close()


def _costliest(src: Path) -> tuple[int, str]:
    con = sqlite3.connect(f"file:{src}?mode=ro", uri=True)
    try:
        return con.execute(
            "SELECT k.demangledName, s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = "
            "k.demangledName GROUP BY 1, 2 ORDER BY sum(k.\"end\" - k.start) DESC, 1 LIMIT 1").fetchone()
    finally:
        con.close()


def _of(kernels: list[dict], name: str) -> list[dict]:
    return [k for k in kernels if k["name"] == name or k["name"].startswith(name + " <<<")]


def test_stretched_kernel_is_named_with_its_factor(tmp_path: Path) -> None:
    _need(CLOVERLEAF)
    sid, name = _most_launched(CLOVERLEAF)
    head = tmp_path / "stretched.sqlite"
    stretch_kernel(CLOVERLEAF, head, sid, 1.3)
    data, proc = _compare_json(CLOVERLEAF, head, tmp_path)
    assert proc.returncode == 0, proc.stderr
    stretched = _of(data["kernels"], name)
    assert stretched, name
    for k in stretched:
        assert k["status"] == "slower" and k["significant"], k
        assert 28.0 <= k["median_change_pct"] <= 32.0, k
        assert k["ci_low_pct"] > 0
        assert k["base"]["launches"] == k["head"]["launches"] > 1
    others = [k for k in data["kernels"] if k not in stretched]
    assert others and all(k["status"] in ("unchanged", "too few") and not k["significant"] for k in others)
    # CloverLeaf's setup kernels run once: too few launches to tell, and said so
    once = [k for k in others if k["base"]["launches"] < 4]
    assert once and all(k["status"] == "too few" and k["ci_low_pct"] is None and k["q_value"] is None
                        and k["note"].startswith("too few launches to tell") for k in once)
    assert data["statistics"]["kernels_tested"] == len(data["kernels"]) - len(once)
    assert data["kernel_counts"]["slower"] == len(stretched)
    assert all(k["short_name"].startswith("par_ranged1d_kernel <<<") for k in stretched)
    # --fail-on-regression judges what the run pays: the kernel's +30% adds its share of the run's time, tiny here
    (k,) = stretched
    share = 100.0 * (k["head"]["total_ns"] - k["base"]["total_ns"]) / data["statistics"]["run_time_ns"]
    assert 0 < k["cost_pct"] < 0.1 and k["cost_pct"] == pytest.approx(share, rel=0.05)
    again, failing = _compare_json(CLOVERLEAF, head, tmp_path, "--fail-on-regression", "0")
    assert failing.returncode == 1
    assert again["gate"] == {"threshold_pct": 0.0, "tripped": True, "tripped_by": [
        {"what": "kernel", "name": k["name"], "short_name": k["short_name"], "change_pct": k["median_change_pct"],
         "cost_pct": k["cost_pct"]}]}
    assert {**again, "gate": data["gate"]} == data  # seeded: the same pair gives the same intervals
    passing_data, passing = _compare_json(CLOVERLEAF, head, tmp_path, "--fail-on-regression", "1")
    assert passing.returncode == 0 and passing_data["gate"]["tripped_by"] == []


def test_stretched_costliest_kernel_moves_the_headline(tmp_path: Path) -> None:
    _need(CLOVERLEAF)
    # the costliest kernel holds about 7% of the GPU time: doubled, it moves the total well past the noise
    sid, name = _costliest(CLOVERLEAF)
    head = tmp_path / "stretched.sqlite"
    stretch_kernel(CLOVERLEAF, head, sid, 2.0)
    data, _ = _compare_json(CLOVERLEAF, head, tmp_path)
    kernel_ns = sum(k["base"]["total_ns"] for k in _of(data["kernels"], name))
    g = data["gpu_time"]
    assert g["significant"] and abs(g["change_pct"] - 100.0 * kernel_ns / g["base_ns"]) < 1.0, g
    # CloverLeaf's 10 time steps each launch the kernel once, and every later timestamp moved by the time added:
    # each step grows by its launch, so the median step by about the kernel's share of the steps' time
    steps = json.loads(_cli("analyze", str(CLOVERLEAF), "--format", "json", cwd=tmp_path).stdout)
    steps = steps["captures"][0]["iterations"]
    assert steps["count"] == 10 and [k["base"]["launches"] for k in _of(data["kernels"], name)] == [10]
    expected = 100.0 * kernel_ns / sum(steps["durations_ns"])
    v = data["verdict"]
    assert v["status"] == "slower" and v["significant"] and v["measure"] == "per iteration"
    assert abs(v["change_pct"] - expected) < 1.0, (v, expected)
    assert v["ci_low_pct"] <= v["change_pct"] <= v["ci_high_pct"]
    assert v["text"].startswith(f"HEAD is {v['change_pct']:.1f}% slower per iteration (median of 10 and 10 steady")
    for k in _of(data["kernels"], name):
        assert k["status"] == "slower" and 98.0 <= k["median_change_pct"] <= 102.0, k


def test_noise_only_copy_reports_no_significant_change(tmp_path: Path) -> None:
    _need(CLOVERLEAF)
    head = tmp_path / "noise.sqlite"
    jitter_kernels(CLOVERLEAF, head, 0.01, seed=7)
    data, proc = _compare_json(CLOVERLEAF, head, tmp_path, "--fail-on-regression", "0")
    assert proc.returncode == 0, proc.stderr
    assert data["verdict"]["status"] == "no change" and not data["verdict"]["significant"]
    assert not any(k["significant"] for k in data["kernels"])
    assert data["kernel_counts"]["unchanged"] + data["kernel_counts"]["too few"] == len(data["kernels"]) > 50
    # the noise is there (medians moved), only not beyond it
    assert any(k["median_change_pct"] != 0 for k in data["kernels"])


def test_capture_against_itself_is_no_change(tmp_path: Path) -> None:
    _need(CLOVERLEAF)
    data, proc = _compare_json(CLOVERLEAF, CLOVERLEAF, tmp_path, "--fail-on-regression", "0")
    assert proc.returncode == 0, proc.stderr
    assert data["verdict"]["status"] == "no change" and data["verdict"]["change_pct"] == 0
    assert all(n["same"] for n in data["comparability"])
    assert all(k["status"] in ("unchanged", "too few") and k["median_change_pct"] == 0 and not k["significant"]
               for k in data["kernels"])
    assert data["findings"] and all(f["status"] == "unchanged" and f["base_impact_ns"] == f["head_impact_ns"]
                                    for f in data["findings"])
    md = _cli("compare", str(CLOVERLEAF), str(CLOVERLEAF), cwd=tmp_path)
    assert md.returncode == 0, md.stderr
    assert "**no change:" in md.stdout
    sarif = _sarif(CLOVERLEAF, CLOVERLEAF, tmp_path)
    results = sarif["runs"][0]["results"]
    assert len(results) == len(data["findings"]) and all(r["baselineState"] == "unchanged" for r in results)


# ---- the real pair -----------------------------------------------------------------------------------------------

def test_real_pair_json(tmp_path: Path) -> None:
    _need(BEFORE, AFTER)
    data, proc = _compare_json(BEFORE, AFTER, tmp_path, "--fail-on-regression", "3")
    assert data["verdict"]["text"].startswith("HEAD is 13.8% slower per iteration (median of 17 and 15 steady "
                                              "iterations), 95% CI +3.8% to +24.9%; GPU kernel time same work +2.2%")
    # the gate trips on what the user pays: the run's 13.8% per iteration, and says so
    assert proc.returncode == 1 and data["gate"]["tripped_by"] == [
        {"what": "run", "name": "per iteration", "change_pct": data["verdict"]["change_pct"],
         "cost_pct": data["verdict"]["change_pct"]}]
    assert data["statistics"]["kernels_tested"] == 48 and data["kernel_counts"]["too few"] == 0
    launches = {n["aspect"]: n for n in data["comparability"]}["kernel launches"]
    assert launches["base"] == 4010 and launches["head"] == 3587 and launches["note"]
    # both runs repeat a step (17 and 15 transformer blocks in the window): the headline is wall time per
    # iteration, with the GPU kernel time for the same work beside it, and the notes say how much work each holds
    notes = {n["aspect"]: n for n in data["comparability"]}
    assert (notes["iterations"]["base"], notes["iterations"]["head"]) == (17, 15) and notes["iterations"]["note"]
    assert notes["kernel launches per iteration"]["base"] == round(4010 / 17, 1)
    assert notes["kernel launches per iteration"]["head"] == round(3587 / 15, 1)
    v, it = data["verdict"], data["iterations"]
    assert v["measure"] == "per iteration" and "GPU kernel time same work" in v["text"]
    assert (it["base"]["steady"], it["head"]["steady"]) == (17, 15)
    assert v["change_pct"] == it["median_change_pct"] == pytest.approx(
        100.0 * (it["head"]["median_ns"] / it["base"]["median_ns"] - 1.0))
    assert v["ci_low_pct"] < v["change_pct"] < v["ci_high_pct"]
    assert v["significant"] == (v["ci_low_pct"] > 0 or v["ci_high_pct"] < 0)
    assert data["gpu_time"]["base_ns"] == sum(k["base"]["total_ns"] for k in data["kernels"])
    # the partition side by side matches each side's analysis
    for side, path in (("base", BEFORE), ("head", AFTER)):
        analysis = json.loads(_cli("analyze", str(path), "--format", "json", cwd=tmp_path).stdout)
        for dev in data["partition"]:
            acc = next(a for a in analysis["captures"][0]["accounting"] if a["device_id"] == dev["device_id"])
            kernel = next(p for p in dev["parts"] if p["part"] == "kernel")
            assert kernel[f"{side}_ns"] == acc["kernel_ns"]
        # every finding of each side is matched exactly once
        matched = [f for f in data["findings"] if f[f"{side}_impact_ns"] is not None]
        assert sorted(f[f"{side}_impact_ns"] for f in matched) == sorted(f["impact_ns"] for f in analysis["findings"])
    assert {f["status"] for f in data["findings"]} <= {"new", "resolved", "better", "worse", "unchanged"}
    assert len({f["fingerprint"] for f in data["findings"]}) == len(data["findings"])


def test_real_pair_markdown(tmp_path: Path) -> None:
    _need(BEFORE, AFTER)
    proc = _cli("compare", str(BEFORE), str(AFTER), "--format", "md", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    md = proc.stdout
    assert len(md) <= 65_536
    assert "nsys\\_ai\\_mfu\\_2gpu\\_before.sqlite → nsys\\_ai\\_mfu\\_2gpu\\_after.sqlite" in md
    assert "### Kernels" in md and "### Time partition" in md and "### Findings" in md
    assert "kernel launches: 4010 → 3587" in md
    assert str(TRACES) not in md  # file names only


def _sarif(base: Path, head: Path, cwd: Path) -> dict:
    from test_report import sarif_schema

    out = cwd / f"cmp-{base.stem}-{head.stem}.sarif"
    proc = _cli("compare", str(base), str(head), "-o", str(out), cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    log = json.loads(out.read_text(encoding="utf-8"))
    jsonschema.Draft7Validator(sarif_schema()).validate(log)
    return log


def test_real_pair_sarif_both_ways(tmp_path: Path) -> None:
    _need(BEFORE, AFTER)
    forward, _ = _compare_json(BEFORE, AFTER, tmp_path)
    ahead = _sarif(BEFORE, AFTER, tmp_path)["runs"][0]
    back = _sarif(AFTER, BEFORE, tmp_path)["runs"][0]
    states = {"new": "new", "resolved": "absent", "better": "updated", "worse": "updated", "unchanged": "unchanged"}
    by_fp = {f["fingerprint"]: states[f["status"]] for f in forward["findings"]}
    assert len(by_fp) == len(forward["findings"]) == len(ahead["results"])
    assert {r["partialFingerprints"]["nsightAdvisorSubject/v1"]: r["baselineState"] for r in ahead["results"]} == by_fp
    # the pair the other way round: what was new is absent, the rest keeps its fingerprint
    flipped = {"new": "absent", "absent": "new", "updated": "updated", "unchanged": "unchanged"}
    assert {r["partialFingerprints"]["nsightAdvisorSubject/v1"]: r["baselineState"] for r in back["results"]} == \
        {fp: flipped[state] for fp, state in by_fp.items()}
    assert "new" in by_fp.values()
    absent = [r for r in back["results"] if r["baselineState"] == "absent"]
    assert all(r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == AFTER.name for r in absent)
    assert {a["location"]["uri"] for a in back["artifacts"]} == {BEFORE.name, AFTER.name}


def test_markdown_keeps_hostile_kernel_names_inert() -> None:
    from nsight_advisor.compare.comparison import compare_results
    from nsight_advisor.report.compare_report import render_comparison

    hostile = "evil|kernel<script>alert(1)</script>`x`\n# heading"
    empty = {"tool": {"name": "nsight-advisor"}, "captures": [], "findings": [], "outcomes": []}
    c = compare_results(empty, empty, {hostile: [100, 101, 102]}, {hostile: [100, 101]})
    md = render_comparison(c, "md")
    row = next(line for line in md.splitlines() if "evil" in line)
    assert row.count(" | ") == 7  # eight cells: the '|' in the name is escaped
    # inside one code span (literal text in GFM, never HTML): backticks and the line break taken out
    assert "| `evil\\|kernel<script>alert(1)</script>'x' # heading` |" in row
    assert md.count("<script>") == 1 and "\n# heading" not in md


@pytest.mark.parametrize("stem", ["sgemm_rtx2080ti.details", "monte_carlo_pi.details", "sgemm_rtx2080ti.raw",
                                  "monte_carlo_pi.raw"])
def test_ncu_csv_version_pair_is_no_change(stem: str, tmp_path: Path) -> None:
    """The same run exported by Nsight Compute 2022.3 and 2024.1 (one records launch configurations, the other
    not in the details pages): every kernel matched, nothing changed."""
    base = TRACES / "ncu-csv" / f"{stem}.ncu2022.3.csv"
    head = TRACES / "ncu-csv" / f"{stem}.ncu2024.1.csv"
    _need(base, head)
    data, proc = _compare_json(base, head, tmp_path, "--fail-on-regression", "0")
    assert proc.returncode == 0
    assert data["verdict"]["status"] == "no change" and data["verdict"]["change_pct"] == 0
    assert data["kernels"] and all(k["status"] in ("unchanged", "too few")
                                   and k["base"]["launches"] == k["head"]["launches"]
                                   for k in data["kernels"])
    assert data["kernel_counts"]["added"] == data["kernel_counts"]["removed"] == 0
    assert all(f["status"] == "unchanged" for f in data["findings"])


def test_bad_input_is_one_line_exit_2(tmp_path: Path) -> None:
    _need(CLOVERLEAF)
    proc = _cli("compare", str(CLOVERLEAF), str(tmp_path / "missing.sqlite"), cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "missing.sqlite: no such file" in proc.stderr
    out = tmp_path / "x.json"
    proc = _cli("compare", str(CLOVERLEAF), str(CLOVERLEAF), "--fail-on-regression", "-1", "-o", str(out),
                cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and not out.exists()
