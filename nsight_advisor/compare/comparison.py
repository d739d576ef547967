"""Compare two runs (BASE and HEAD): is HEAD comparable, what changed in time, is it real, and which findings changed.

:func:`compare_results` works on plain data (two analyses and each side's per-launch kernel durations) and returns
the comparison as one JSON-ready dict (its schema: ``report/comparison.schema.json``, docs/reports.md).
:func:`compare_paths` loads both sides (ingesting or reusing the cache, as ``analyze`` does) and calls it.
The statistics are in :mod:`nsight_advisor.compare.stats`.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from nsight_advisor.compare.kernel_keys import bare_key, kernel_key
from nsight_advisor.compare.iterations import iteration_notes, iteration_verdict, per_iteration, side_iterations
from nsight_advisor.compare.ncu import ncu_deltas, ncu_kernel_metrics
from nsight_advisor.compare.why import added_time_ns, explain
from nsight_advisor.compare.family import FDR_Q, MIN_LAUNCHES, family_q_values, kernel_verdict
from nsight_advisor.compare.gate import kernel_cost_pct, regression_gate, run_time_ns
from nsight_advisor.compare.short_names import short_kernel_key
from nsight_advisor.compare.stats import MIN_EFFECT_PCT, median_change, pct_change, same_work_change, total_change
from nsight_advisor.engine.fingerprint import finding_subject, fingerprint

#: Version of the comparison's JSON shape (docs/reports.md has its changelog).
COMPARISON_SCHEMA_VERSION = 3
#: A finding matched on both sides is better or worse when its impact moved by more than this share of the larger
#: of the two impacts; impacts are estimates and move a little with any timing noise.
FINDING_CHANGE_FRACTION = 0.10
PARTITION_PARTS = ("kernel_ns", "comm_ns", "copy_ns", "memset_ns", "idle_ns")


def kernel_durations(con, capture_ids: Sequence[int]) -> dict[str, list[int]]:
    """Per-launch durations (ns) keyed by :func:`kernel_key`, each list in ascending order.

    From the timeline (``kernels``); a capture without one (a Nsight Compute report or CSV) gives its profiled
    kernels' durations (``ncu_kernels``), which Nsight Compute measured under replay. Grouped in the database by the
    key's columns (building the key's text per launch there cost three times as much at a million launches): one
    row per kernel and configuration comes back, not one per launch.
    """
    import duckdb

    ids = list(capture_ids)

    def grouped(table: str) -> list[tuple]:
        return con.execute(
            "SELECT name, grid_x, grid_y, grid_z, block_x, block_y, block_z, "
            f"list(CAST(round(duration_ns) AS BIGINT) ORDER BY duration_ns) FROM {table} "
            "WHERE capture_id IN (SELECT unnest(?)) AND duration_ns IS NOT NULL GROUP BY ALL", [ids]).fetchall()

    rows = grouped("kernels")
    if not rows:
        try:
            rows = grouped("ncu_kernels")
        except duckdb.CatalogException:  # a store without Nsight Compute tables
            rows = []
    out: dict[str, list[int]] = {}
    for name, gx, gy, gz, bx, by, bz, durations in rows:
        key = kernel_key(name, (gx, gy, gz), (bx, by, bz))
        if key in out:  # a partly recorded configuration: one kernel under its name
            out[key] = sorted(out[key] + durations)
        else:
            out[key] = durations
    return out


def align_configurations(base: dict[str, list[int]], head: dict[str, list[int]]) -> tuple[dict, dict]:
    """Match by name alone where one side did not record launch configurations (a Nsight Compute CSV export of one
    version does, another does not): a kernel's configured keys on one side fold into its bare name when the other
    side has that bare name only."""
    base, head = dict(base), dict(head)
    for this, other in ((base, head), (head, base)):
        for key in [k for k in this if k not in other and bare_key(k) == k]:
            configured = [k for k in other if k not in this and k != key and bare_key(k) == key]
            if configured:
                other[key] = [d for k in configured for d in other.pop(k)]
    return base, head


def _gpu_models(captures: list[dict]) -> list[str]:
    return sorted(g.get("name") or "unknown GPU" for c in captures for g in c.get("gpus", []))


def _window_ns(captures: list[dict]) -> int:
    spans = [a["window_end_ns"] - a["window_start_ns"] for c in captures for a in c.get("accounting", [])]
    return max(spans) if spans else sum(int(c.get("duration_ns") or 0) for c in captures)


def comparability(base: dict, head: dict, base_kernels: dict, head_kernels: dict) -> list[dict]:
    """What differs between the runs that bears on comparing them: one note per aspect, ``same`` or not."""
    bc, hc = base["captures"], head["captures"]

    def versions(caps):
        return sorted({f"{c.get('tool')} {c.get('tool_version')}" for c in caps})

    launches_b = sum(map(len, base_kernels.values()))
    launches_h = sum(map(len, head_kernels.values()))
    notes = [
        ("GPU models", _gpu_models(bc), _gpu_models(hc)),
        ("GPU count", len(_gpu_models(bc)), len(_gpu_models(hc))),
        ("captures", len(bc), len(hc)),
        ("capture tool", versions(bc), versions(hc)),
        ("analysis window (ns)", _window_ns(bc), _window_ns(hc)),
        ("kernel launches", launches_b, launches_h),
        ("distinct kernels", len(base_kernels), len(head_kernels)),
    ]
    out = []
    for aspect, b, h in notes:
        same = b == h
        note = ""
        if not same and aspect in ("GPU models", "GPU count"):
            note = "different GPUs: the times compare different hardware"
        elif not same and aspect == "analysis window (ns)" and b and h:
            change = pct_change(float(b), float(h))
            if abs(change) >= MIN_EFFECT_PCT:
                note = f"HEAD's window is {change:+.1f}% longer: time per window covers a different span"
        elif not same and aspect == "kernel launches" and b and h:
            change = pct_change(float(b), float(h))
            if abs(change) >= MIN_EFFECT_PCT:
                note = (f"HEAD's window holds {change:+.1f}% launches: the verdict compares time for the same "
                        "work, not per window")
        out.append({"aspect": aspect, "base": b, "head": h, "same": same, "note": note})
    return out


def partition(base: dict, head: dict) -> list[dict]:
    """Each device's time partition (captures[].accounting) side by side, matched by capture order and device."""
    out = []

    def by_device(result):
        table = {}
        for i, cap in enumerate(result["captures"]):
            for acc in cap.get("accounting", []):
                table[(i, acc["device_id"])] = acc
        return table

    b, h = by_device(base), by_device(head)
    for key in sorted(set(b) | set(h)):
        row: dict[str, Any] = {"capture_index": key[0], "device_id": key[1], "parts": []}
        ab, ah = b.get(key), h.get(key)
        names = [(p, p[:-3]) for p in ("window_ns", *PARTITION_PARTS)]
        causes = sorted(set((ab or {}).get("idle_by_cause", {})) | set((ah or {}).get("idle_by_cause", {})))
        for field, label in names + [(c, f"idle: {c}") for c in causes]:
            def value(acc, field=field):
                if acc is None:
                    return None
                if field == "window_ns":
                    return acc["window_end_ns"] - acc["window_start_ns"]
                if field in acc:
                    return acc[field]
                return acc.get("idle_by_cause", {}).get(field)
            vb, vh = value(ab), value(ah)
            change = pct_change(float(vb), float(vh)) if vb is not None and vh is not None else None
            row["parts"].append({"part": label, "base_ns": vb, "head_ns": vh,
                                 "change_ns": None if vb is None or vh is None else vh - vb, "change_pct": change})
        out.append(row)
    return out


def _median(values: list[int]) -> float | None:
    if not values:
        return None
    s = sorted(values)
    n = len(s)
    return float(s[n // 2]) if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2.0


def kernels(base_kernels: dict[str, list[int]], head_kernels: dict[str, list[int]]) -> list[dict]:
    """Every kernel of either side with its status and the change of its total and median time; the kernels on
    both sides judged as one family (:mod:`nsight_advisor.compare.family`)."""
    # each side's launches as arrays once, for the rank tests and the bootstraps alike (the lists stay for the sums)
    arrays = [{k: np.asarray(v, dtype=np.float64) for k, v in side.items()} for side in (base_kernels, head_kernels)]
    both = sorted(k for k in set(base_kernels) & set(head_kernels) if base_kernels[k] and head_kernels[k])
    tested, p_values, q_values = family_q_values([(arrays[0][k], arrays[1][k]) for k in both])
    family = {k: (bool(t), p, q) for k, t, p, q in zip(both, tested, p_values, q_values)}
    out = []
    for key in set(base_kernels) | set(head_kernels):
        b, h = base_kernels.get(key, []), head_kernels.get(key, [])
        is_tested, p, q = family.get(key, (False, None, None))
        # the bootstrap interval only where the rank test runs: with fewer launches it has no idea of the spread
        stats = median_change(arrays[0].get(key, b), arrays[1].get(key, h), key, interval=is_tested)
        if not b:
            status = "added"
        elif not h:
            status = "removed"
        else:
            status, stats = kernel_verdict(stats, len(b), len(h), q, int(tested.sum()))
            stats["p_value"] = None if p is None or not is_tested else float(p)
        tb, th = sum(b), sum(h)
        out.append({
            "name": key, "short_name": short_kernel_key(key), "status": status,
            "base": {"launches": len(b), "total_ns": tb, "median_ns": _median(b)},
            "head": {"launches": len(h), "total_ns": th, "median_ns": _median(h)},
            "total_change_ns": th - tb,
            "total_change_pct": pct_change(tb, th) if b and h else None,
            "median_change_pct": stats["median_change_pct"] if b and h else None,
            "significant": stats["significant"],
            "ci_low_pct": stats["ci_low_pct"], "ci_high_pct": stats["ci_high_pct"],
            "p_value": stats.get("p_value"), "q_value": stats.get("q_value"),
            "note": stats["note"],
        })
    # Significant changes and kernels on one side first, each group by the time it moved, then by name.
    out.sort(key=lambda k: (k["status"] in ("unchanged", "too few"), -abs(k["total_change_ns"]), k["name"]))
    return out


def findings(base: dict, head: dict) -> list[dict]:
    """Findings matched by fingerprint: new, resolved, better, worse or unchanged, with both impacts."""
    def grouped(result):
        table = defaultdict(list)
        for i, f in enumerate(result["findings"]):
            table[fingerprint(f)].append((i, f))
        return table

    b, h = grouped(base), grouped(head)
    out = []
    for fp in list(dict.fromkeys([*b, *h])):
        bs, hs = b.get(fp, []), h.get(fp, [])
        for i in range(max(len(bs), len(hs))):
            ib_index, fb = bs[i] if i < len(bs) else (None, None)
            ih_index, fh = hs[i] if i < len(hs) else (None, None)
            ib = fb["impact_ns"] if fb else None
            ih = fh["impact_ns"] if fh else None
            if fb is None:
                status = "new"
            elif fh is None:
                status = "resolved"
            elif abs(ih - ib) > FINDING_CHANGE_FRACTION * max(ib, ih):
                status = "worse" if ih > ib else "better"
            else:
                status = "unchanged"
            f = fh or fb
            out.append({
                "fingerprint": fp, "status": status, "rule_id": f["rule_id"], "rule_name": f["rule_name"],
                "severity": f["severity"], "device_id": f.get("device_id"), "subject": finding_subject(f),
                "title": f["title"], "base_impact_ns": ib, "head_impact_ns": ih,
                "impact_change_ns": None if ib is None or ih is None else ih - ib,
                "base_message": fb["message"] if fb else None, "head_message": fh["message"] if fh else None,
                "base_index": ib_index, "head_index": ih_index,
                # HEAD's waiver when the finding is in HEAD (a resolved one keeps BASE's, for the record)
                "waiver": f.get("waiver"),
            })
    order = {"new": 0, "worse": 1, "resolved": 2, "better": 3, "unchanged": 4}
    out.sort(key=lambda f: (order[f["status"]], -max(f["base_impact_ns"] or 0, f["head_impact_ns"] or 0)))
    return out


def verdict(gpu_time: dict, same_work: dict, launches: tuple[int, int]) -> dict:
    """The headline: HEAD slower, faster, or no change in GPU kernel time.

    When both windows hold the same amount of work (kernel launches within :data:`MIN_EFFECT_PCT`), the measure
    is the summed kernel time per analysis window; otherwise it is the time for BASE's work
    (:func:`~nsight_advisor.compare.stats.same_work_change`), and the per-window figure is stated beside it.
    """
    work_change = pct_change(float(launches[0]), float(launches[1])) if launches[0] else None
    same_amount = work_change is not None and abs(work_change) < MIN_EFFECT_PCT
    measure = gpu_time if same_amount else same_work
    basis = "per analysis window" if same_amount else "for the same work (BASE's launches of the kernels on both sides)"
    change = measure["change_pct"]
    out = {"measure": "per window" if same_amount else "same work", "change_pct": change,
           "ci_low_pct": measure["ci_low_pct"], "ci_high_pct": measure["ci_high_pct"],
           "significant": bool(measure["significant"])}
    if change is None:
        return {**out, "status": "no data", "text": "no kernel ran on both sides: no verdict can be given"}
    interval = ""
    if measure["ci_low_pct"] is not None:
        interval = f", 95% CI {measure['ci_low_pct']:+.1f}% to {measure['ci_high_pct']:+.1f}%"
    aside = ""
    if not same_amount and gpu_time["change_pct"] is not None and work_change is not None:
        aside = (f"; per analysis window {gpu_time['change_pct']:+.1f}%, with {work_change:+.1f}% kernel launches "
                 "in HEAD's window")
    if measure["ci_low_pct"] is None and change != 0:
        return {**out, "status": "no significance",
                "text": f"HEAD's GPU kernel time {basis} is {change:+.1f}% of BASE's; no significance can be given "
                        f"(one launch per kernel, no spread to judge noise by){aside}"}
    if not measure["significant"]:
        return {**out, "status": "no change",
                "text": f"no change: HEAD's GPU kernel time {basis} is {change:+.1f}% of BASE's, within noise or "
                        f"below {MIN_EFFECT_PCT:g}%{interval}{aside}"}
    status = "slower" if change > 0 else "faster"
    return {**out, "status": status,
            "text": f"HEAD is {abs(change):.1f}% {status} in GPU kernel time {basis}{interval}{aside}"}


def statistics(ks: list[dict], run_ns: int, run_basis: str) -> dict:
    """How the kernels were judged, for the reports to state: the test, the family, the minimum launches, and the
    run's time that a kernel's cost is a share of (:mod:`nsight_advisor.compare.gate`)."""
    tested = sum(1 for k in ks if k["q_value"] is not None)
    return {"test": "two-sided Wilcoxon-Mann-Whitney rank-sum test of launch durations (exact up to 40 launches)",
            "interval": "seeded bootstrap 95% interval of the median's change",
            "kernels_tested": tested, "fdr_q": FDR_Q, "correction": "Benjamini-Hochberg",
            "min_launches": MIN_LAUNCHES, "min_effect_pct": MIN_EFFECT_PCT, "run_time_ns": run_ns,
            "run_time": run_basis,
            "text": f"{tested} kernel{'s' if tested != 1 else ''} tested; false discovery rate controlled at "
                    f"{FDR_Q * 100:g}% (Benjamini-Hochberg over rank tests); kernels with fewer than "
                    f"{MIN_LAUNCHES} launches a side are too few to tell"}


def compare_results(base, head, base_kernels: dict[str, list[int]], head_kernels: dict[str, list[int]],
                    *, base_name: str = "BASE", head_name: str = "HEAD", base_ncu: dict | None = None,
                    head_ncu: dict | None = None) -> dict:
    """The comparison of two analyses (AnalysisResult or its ``to_dict()``) and their per-launch kernel durations
    (as :func:`kernel_durations` returns them), as one JSON-ready dict."""
    bd = base if isinstance(base, dict) else base.to_dict()
    hd = head if isinstance(head, dict) else head.to_dict()
    base_kernels, head_kernels = align_configurations(base_kernels, head_kernels)
    keys = sorted(set(base_kernels) | set(head_kernels))
    gpu_time = total_change([base_kernels.get(k, []) for k in keys], [head_kernels.get(k, []) for k in keys])
    same_work = same_work_change([(base_kernels[k], head_kernels[k]) for k in keys
                                  if k in base_kernels and k in head_kernels])
    launches = (sum(map(len, base_kernels.values())), sum(map(len, head_kernels.values())))
    ks = kernels(base_kernels, head_kernels)
    run_ns, run_basis = run_time_ns(bd, gpu_time["base_ns"])
    counts = defaultdict(int)
    for k in ks:
        counts[k["status"]] += 1
        k["cost_pct"] = kernel_cost_pct(k, run_ns)
    fs = findings(bd, hd)
    fcounts = defaultdict(int)
    for f in fs:
        fcounts[f["status"]] += 1
    its = per_iteration(side_iterations(bd["captures"]), side_iterations(hd["captures"]))
    headline = verdict(gpu_time, same_work, launches)
    notes = comparability(bd, hd, base_kernels, head_kernels) + iteration_notes(its, launches)
    if its["median_change_pct"] is not None:
        aside = ("" if headline["change_pct"] is None else
                 f"; GPU kernel time {headline['measure']} {headline['change_pct']:+.1f}%")
        headline = iteration_verdict(its, aside)
        for n in notes:
            if n["aspect"] == "kernel launches" and n["note"]:
                n["note"] = n["note"].split(":")[0] + ": the verdict compares wall time per iteration"
    out = {
        "schema_version": COMPARISON_SCHEMA_VERSION,
        "tool": bd.get("tool", {}),
        "base": {"name": base_name, "captures": [c.get("source_name") for c in bd["captures"]]},
        "head": {"name": head_name, "captures": [c.get("source_name") for c in hd["captures"]]},
        "verdict": headline,
        "iterations": its,
        "gpu_time": gpu_time,
        "same_work": same_work,
        "min_effect_pct": MIN_EFFECT_PCT,
        "comparability": notes,
        "partition": partition(bd, hd),
        "kernel_counts": {s: counts[s] for s in ("added", "removed", "slower", "faster", "unchanged", "too few")},
        "statistics": statistics(ks, run_ns, run_basis),
        "kernels": ks,
        "finding_counts": {s: fcounts[s] for s in ("new", "resolved", "better", "worse", "unchanged")},
        "findings": fs,
    }
    out["gate"] = regression_gate(out, None)
    out["ncu_kernels"] = ncu_deltas(base_ncu, head_ncu) if base_ncu and head_ncu else []
    out["why"] = explain(out, bd, hd, added_time_ns(out))
    if out["why"]:
        out["verdict"]["text"] += f"; first explanation: {out['why'][0]['text']}"
    return out


def waive_kernels(comparison: dict, waivers) -> None:
    """Mark each kernel that a ``rule = "regression"`` waiver names (its subject: the kernel's name with or without
    its launch configuration, or a glob) with that waiver (``kernels[].waiver``); an expired one is marked too,
    and no longer applies."""
    from nsight_advisor.engine.waivers import REGRESSION_RULE, subject_matches

    chosen = [w for w in waivers if w.rule.casefold() == REGRESSION_RULE]
    counts: dict = defaultdict(int)
    for k in comparison["kernels"]:
        matching = [w for w in chosen if subject_matches(w.subject, (k["name"], bare_key(k["name"])))]
        w = next((w for w in matching if not w.expired), matching[0] if matching else None)
        k["waiver"] = w.public() if w is not None else None
        if w is not None:
            counts[w] += 1
    comparison["waivers"] = [w.public(counts[w]) for w in chosen]


def _accepted(item: dict) -> bool:
    return (item.get("waiver") or {}).get("status") == "active"


def worst_regression_pct(comparison: dict) -> float | None:
    """The largest significant slowdown in percent (the headline's or a kernel's median), or None.

    A kernel whose slowdown a waiver accepts does not count; neither does the headline when every significantly
    slower kernel is accepted (the slowdown is the accepted kernels').
    """
    worst = []
    slower = [k for k in comparison["kernels"] if k["status"] == "slower"]
    open_ = [k for k in slower if not _accepted(k)]
    headline = comparison["verdict"]
    if headline["significant"] and headline["change_pct"] > 0 and (open_ or not slower):
        worst.append(headline["change_pct"])
    worst += [k["median_change_pct"] for k in open_]
    return max(worst) if worst else None


def analyze_side(paths: Sequence[Path], *, use_cache: bool = True, progress: bool = False,
                 config_path: Path | None = None):
    """One side of a comparison: its analysis (an AnalysisResult, reusing the cache as ``analyze`` does; waivers
    from the config applied), its per-launch kernel durations and its Nsight Compute kernels' metrics."""
    from nsight_advisor import workflow

    result = workflow.analyze(paths, use_cache=use_cache, progress=progress, config_path=config_path)
    return (result, *side_kernels(paths, progress=progress))


def side_kernels(paths: Sequence[Path], *, store_path: Path | None = None,
                 progress: bool = False) -> tuple[dict[str, list[int]], dict]:
    """A side's per-launch kernel durations and its Nsight Compute kernels' metrics, read from the store its
    analysis just built or reused (``store_path``, else the cache): read as it is, even with the cache off, so
    nothing is ingested twice."""
    from nsight_advisor import workflow

    con, ids = workflow.load(paths, store_path=store_path, progress=progress, for_rules=True)
    try:
        return kernel_durations(con, ids), ncu_kernel_metrics(con, ids)
    finally:
        con.close()


def side_name(paths: Sequence[Path]) -> str:
    """A side as the report names it: its file names, never their folders."""
    return ", ".join(Path(p).name for p in paths)


def _analyze_in_background(paths: Sequence[Path], config_path: Path | None):
    """HEAD analyzed in a second process (:func:`nsight_advisor.compare.sides.main`: the analysis only, no report)
    while this one analyzes BASE: it leaves its store and result in the shared cache, where :func:`analyze_side`
    then finds them (docs/performance.md). None on a single usable core, where it would only compete."""
    from nsight_advisor.common.child_lifecycle import start_helper
    from nsight_advisor.store.parallel_ingest import usable_cores

    if usable_cores() < 2:
        return None
    # tied to this process's life (child_lifecycle): it ends, cleaning up, when this process ends in any way
    return start_helper(["-m", "nsight_advisor.compare.sides", *(["--config", str(config_path)] if config_path
                                                                 is not None else []), "--", *map(str, paths)])


def compare_paths(base: Sequence[Path], head: Sequence[Path], *, use_cache: bool = True,
                  progress: bool = False, config_path: Path | None = None) -> tuple[dict, tuple]:
    """Analyze both sides and compare them (:func:`compare_results`), kernels marked with the config's
    ``regression`` waivers; returns the comparison and both analyses (SARIF needs them)."""
    from nsight_advisor.engine.config import find_config

    helper = _analyze_in_background(head, config_path) if use_cache else None
    try:
        b = analyze_side(base, use_cache=use_cache, progress=progress, config_path=config_path)
        if helper is not None:
            helper.wait()
    finally:
        if helper is not None:  # still running when BASE failed or the run was interrupted: stopped, cleaning up
            from nsight_advisor.common.child_lifecycle import stop_helper

            stop_helper(helper)
    # HEAD's analysis is now in the cache (or, should the helper have failed, made here and its error reported)
    h = analyze_side(head, use_cache=use_cache, progress=progress, config_path=config_path)
    comparison = compare_results(b[0], h[0], b[1], h[1], base_name=side_name(base), head_name=side_name(head),
                                 base_ncu=b[2], head_ncu=h[2])
    waive_kernels(comparison, find_config(config_path).waivers)
    return comparison, (b[0], h[0])
