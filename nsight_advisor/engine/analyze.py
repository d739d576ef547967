"""The rule engine: load rule folders, run each on each capture of a store, judge, rank findings by impact.

Every selected rule gets exactly one :class:`~nsight_advisor.engine.model.Outcome` per analysis (findings,
clean, skipped or errored); a rule that fails never stops the others.
"""

from __future__ import annotations

import functools
import time
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Sequence

from nsight_advisor.common import sql_params
from nsight_advisor.engine.model import AnalysisResult, Outcome, severity_rank
from nsight_advisor.engine.harness import harness_rank, mark_harness

if TYPE_CHECKING:
    import duckdb

    from nsight_advisor.engine.rules import Rule

# duckdb, the rule loader and the runner load on first use: a warm `analyze` that reuses a kept result
# (nsight_advisor.store.result_cache) imports this package for its data classes only, and duckdb's import is
# most of such a run's time.

#: Columns of ``captures`` that reports may show (never paths or environment data).
CAPTURE_COLUMNS = ("capture_id", "source_name", "format", "tool", "tool_version", "export_schema_version",
                   "start_ns", "end_ns", "duration_ns")


def run_analysis(con: duckdb.DuckDBPyConnection, capture_ids: Sequence[int], *, rules_dirs: Iterable[Path] = (),
                 config_path: Path | None = None, overrides: Iterable[str] = (), select: Iterable[str] = (),
                 ignore: Iterable[str] = (), progress: bool = False, include_builtin: bool = True,
                 time_limit_s: float | None = None, window: str | None = None,
                 gpu: str | None = None) -> AnalysisResult:
    """Run the built-in rules and those in ``rules_dirs`` over ``capture_ids`` of the store behind ``con``.

    Config comes from ``config_path``, else ``./nsight-advisor.toml``, else ``[tool.nsight-advisor]`` in
    ``./pyproject.toml``; ``overrides`` are ``RULE.PARAM=VALUE`` strings. ``window`` is ``--window``
    (``START:END`` seconds or an NVTX range name), ``gpu`` is ``--gpu`` (a GPU model for captures that do not
    name theirs; else the config's ``[gpu]``). Bad rules or config raise RuleError/ConfigError before anything
    runs.
    """
    from nsight_advisor.analysis.accounting import parse_window
    from nsight_advisor.engine.config import apply_params, find_config, select_rules
    from nsight_advisor.analysis.gpu_override import resolve_gpu_override
    from nsight_advisor.common import parsed_toml
    from nsight_advisor.engine.rules import load_rules
    from nsight_advisor.engine.runner import DEFAULT_TIME_LIMIT_S
    from nsight_advisor.engine.waivers import apply_waivers, check_rules

    config = find_config(config_path)
    rules = load_rules([*config.rules_dirs, *map(Path, rules_dirs)], include_builtin=include_builtin)
    rules = apply_params(rules, config, overrides)
    all_rules, rules = rules, select_rules(rules, config, select, ignore)
    check_rules(config.waivers, all_rules, config.source)
    limit = time_limit_s or config.rule_time_limit_s or DEFAULT_TIME_LIMIT_S
    result = analyze_with_rules(con, capture_ids, rules, progress=progress, time_limit_s=limit,
                                window=parse_window(window), gpu=resolve_gpu_override(gpu, config.gpu))
    apply_waivers(result, config.waivers)
    parsed_toml.save()  # the rules' parses, for the next run (common/parsed_toml.py)
    return result


def rules_reading(tables: Iterable[str], *, rules_dirs: Iterable[Path] = (), config_path: Path | None = None,
                  include_builtin: bool = True) -> set[str]:
    """Which of ``tables`` the rules an analysis would load read: named in their SQL (a whole word) or in
    their ``[[requires]]``.

    A mention in a comment counts too: that can only make the store load more than it needs, never less.
    """
    import re

    from nsight_advisor.engine.config import find_config
    from nsight_advisor.engine.rules import load_rules

    config = find_config(config_path)
    rules = load_rules([*config.rules_dirs, *map(Path, rules_dirs)], include_builtin=include_builtin)
    read = set()
    for rule in rules:
        required = {r.value for r in rule.requires if r.kind == "table"}
        if any(r.kind == "gpu_metric" for r in rule.requires):
            required.add("gpu_metrics")
        named = {v for v in VIEW_TABLES if re.search(rf"\b{re.escape(v)}\b", rule.query, flags=re.IGNORECASE)}
        required.update(t for v in named for t in VIEW_TABLES[v])
        for table in tables:
            if table in required or re.search(rf"\b{re.escape(table)}\b", rule.query, flags=re.IGNORECASE):
                read.add(table)
    return read


#: Analysis views that read a deferrable table (nsight_advisor.ingest.DEFERRABLE): a rule naming the view reads
#: the table. (gpu_idle_gaps reads nvtx_ranges too, but classifies its gaps from CUDA calls alone without them.)
VIEW_TABLES = {"host_activity": ("cpu_ops",)}


def analyze_with_rules(con: duckdb.DuckDBPyConnection, capture_ids: Sequence[int], rules: list[Rule], *,
                       progress: bool = False, time_limit_s: float | None = None, window=None,
                       gpu=None) -> AnalysisResult:
    """Run already loaded ``rules`` over ``capture_ids``; one outcome per rule, findings reconciled so that none
    claims time another already claims (docs/impact.md), ranked by severity, then by what the fix would save
    (``saving_ns`` where the capture's steps were replayed with it, else ``impact_ns``).

    ``time_limit_s`` bounds each rule's query (default: the runner's DEFAULT_TIME_LIMIT_S); ``window`` is an
    :class:`~nsight_advisor.analysis.accounting.WindowSpec`, ``gpu`` a
    :class:`~nsight_advisor.analysis.gpu_override.GpuOverride`.
    """
    from nsight_advisor.common.version import __version__
    from nsight_advisor.analysis import accounting
    from nsight_advisor.analysis.gpu_override import apply_gpu_override
    from nsight_advisor.analysis.pacing import find_pacing
    from nsight_advisor.engine.paced_findings import mark_paced, reword_paced
    from nsight_advisor.engine.regions import attach_regions
    from nsight_advisor.engine.source_frames import attach_source_frames
    from nsight_advisor.engine.runner import DEFAULT_TIME_LIMIT_S, disable_external_access
    from nsight_advisor.engine.store_runner import run_rule_on_captures
    from nsight_advisor.engine.two_connections import Lead, run_jobs
    from nsight_advisor.engine.rule_checks import RuleChecks, shared_reads
    from nsight_advisor.analysis.shared_views import materialize_shared
    from nsight_advisor.analysis.summary import build_summary
    from nsight_advisor.analysis.steps import steps_of
    from nsight_advisor.common.progress import Progress

    time_limit_s = time_limit_s or DEFAULT_TIME_LIMIT_S

    gpu_notes = apply_gpu_override(con, capture_ids, gpu)
    captures = read_captures(con, capture_ids)
    disable_external_access(con)
    iterations = accounting.prepare(con, capture_ids, window)
    ids = [c["capture_id"] for c in captures]
    checks = RuleChecks(con, ids)  # after prepare: its temp views count
    shared = shared_reads(rules, checks, len(captures))  # from the views' definitions, before any is materialized
    queries = [rule.query for rule in rules]
    made = accounting.views_read(queries)  # host_activity where a rule reads it: made with the rules, below
    materialize_shared(con, [view for view in shared if view not in made])
    found_steps = steps_of(con, capture_ids, {c: iterations.get(c) for c in capture_ids})
    building = None
    if found_steps:  # the replay's numpy only where there is a step to replay
        from nsight_advisor.engine.model_work import ModelWork
        from nsight_advisor.engine.whatif import MAX_ANALYSIS_OPS, MAX_ANALYSIS_STEPS

        # read now; built beside the rules' queries where that pays (engine/model_work.py)
        building = ModelWork(con, capture_ids, found_steps, max_ops=MAX_ANALYSIS_OPS, max_steps=MAX_ANALYSIS_STEPS)
    findings, outcomes = [], []
    checks_of = {id(con): checks}  # a connection's answers are its own (two_connections may add the twin's)

    def run(rule: Rule, connection):
        if id(connection) not in checks_of:
            checks_of[id(connection)] = RuleChecks(connection, ids)
        started = time.monotonic()
        results = run_rule_on_captures(connection, rule, captures, time_limit_s=time_limit_s,
                                       checks=checks_of[id(connection)])
        outcome = combine_outcomes(rule, results, len(captures))
        outcome.elapsed_s = round(time.monotonic() - started, 4)
        return outcome, results

    jobs = [functools.partial(run, rule) for rule in rules]
    jobs.append(lambda connection: build_summary(connection, list(capture_ids)))
    names = [f"{rule.id} {rule.name}" for rule in rules] + ["summary"]
    # host_activity (0.15 s of the DLRM job's analysis) is made while the first rules run, on two connections
    lead = Lead(make=lambda connection: accounting.materialize_read(connection, queries),
                needs=frozenset([len(rules), *(i for i, rule in enumerate(rules)
                                               if any(checks.reads_table(rule.query, v) for v in made))]))
    try:
        # One status line on a terminal, drawn only once the rules have taken over a second.
        with Progress("rules", len(jobs), enabled=progress) as bar:
            *ran, summary = run_jobs(con, jobs, lambda i: bar.step(names[i]), lead=lead if made else None,
                                     longest=frozenset([len(rules)]))
        for outcome, results in ran:
            outcomes.append(outcome)
            for _, res in results:
                findings.extend(res.findings)
        pacing = {cid: find_pacing(con, cid, iterations.get(cid)) for cid in capture_ids}
        mark_paced(findings, pacing)
        findings, accounts = settle_impacts(con, captures, findings)
        reword_paced(findings, pacing)
        breakdowns = attach_regions(con, captures, findings)
        attach_source_frames(con, findings)
        model = building.result() if building is not None else None
    finally:
        if building is not None:
            building.close()  # no thread left behind, whatever failed
    if model is not None:
        from nsight_advisor.engine.whatif import savings_replays

        replays = savings_replays(con, capture_ids, findings, model=model, candidates=True)
        if replays is not None:
            with replays:  # shared with a forked child where it can (engine/fix_replays.py)
                replays.start()
                summary["savings"], summary["graph_candidates"] = replays.finish()
            findings.sort(key=finding_rank)  # stable: the findings without a saving keep their order
    public = []
    for c in captures:
        cap = _public_capture(c)
        cap["accounting"] = accounts.get(c["capture_id"], [])
        found = iterations.get(c["capture_id"])
        cap["iterations"] = found.public() if found is not None else None
        paced = pacing.get(c["capture_id"])
        cap["pacing"] = paced.public() if paced is not None else None
        cap["nvtx_paths"] = breakdowns.get(c["capture_id"], [])
        if gpu_notes.get(c["capture_id"]):
            cap["gpu_notes"] = gpu_notes[c["capture_id"]]
        public.append(cap)
    return AnalysisResult(tool={"name": "nsight-advisor", "version": __version__},
                          captures=public, findings=findings, outcomes=outcomes, summary=summary)


def settle_impacts(con: duckdb.DuckDBPyConnection, captures: list[dict], findings: list) -> tuple[list, dict]:
    """Reconcile the findings' claims against each device's time partition (nsight_advisor.engine.impact) and
    rank them; returns the findings and the accounting they were settled against."""
    from nsight_advisor.analysis import accounting
    from nsight_advisor.engine.impact import kernel_times, reconcile

    ids = [c["capture_id"] for c in captures]
    accounts = accounting.read_accounting(con, ids)
    settled = reconcile(findings, captures, accounts, kernel_times(con, ids))
    mark_harness(settled)
    settled.sort(key=finding_rank)
    accounting.add_idle_claims(accounts, settled)
    return settled, accounts


def finding_rank(f) -> tuple:
    """Sort key of the ranking: the product's kernels before test-harness kernels (engine.harness), then severity
    (a rule may cap one-time costs at info), then what the fix would save: ``saving_ns`` where the step graph was
    replayed with it (claimed time is not saved time where work overlaps, docs/impact.md), or
    ``saving_all_ranks_ns`` where the rule fires on several ranks or GPUs (a job's ranks run the same code: its fix
    reaches all of them, and ranks that wait for each other gain from it only together), else the time claimed
    (``impact_ns``); ties by the time claimed."""
    saving = getattr(f, "saving_all_ranks_ns", None)
    if saving is None:
        saving = getattr(f, "saving_ns", None)
    return (harness_rank(f), -severity_rank(f.severity), -(f.impact_ns if saving is None else saving), -f.impact_ns,
            f.rule_id, f.capture_id,
            -1 if f.device_id is None else f.device_id)


def read_captures(con: duckdb.DuckDBPyConnection, capture_ids: Sequence[int]) -> list[dict]:
    """Rows of ``captures`` (the public columns) plus each capture's GPUs, in ``capture_ids`` order."""
    ids = list(capture_ids)
    if not ids:
        return []
    cols = ", ".join(CAPTURE_COLUMNS)
    rows = sql_params.execute(con, f"select {cols} from captures where capture_id in (select unnest(?::integer[]))",
                       [ids]).fetchall()
    by_id = {r[0]: dict(zip(CAPTURE_COLUMNS, r)) for r in rows}
    gpus = sql_params.execute(
        con,
        "select capture_id, device_id, name, sm_count, compute_capability from gpus "
        "where capture_id in (select unnest(?::integer[])) order by capture_id, device_id", [ids]).fetchall()
    from nsight_advisor.engine.advice import read_profiles

    programs, gpu_facts = read_profiles(con, ids)
    out = []
    for cid in ids:
        cap = by_id.get(cid) or {c: None for c in CAPTURE_COLUMNS} | {"capture_id": cid}
        cap["gpus"] = [{"device_id": d, "name": n, "sm_count": s, "compute_capability": cc,
                        **gpu_facts.get((g, d), {})}
                       for (g, d, n, s, cc) in gpus if g == cid]
        cap["program"] = {**programs.get(cid, {"stack": "unknown", "stacks_seen": [], "evidence": ""}),
                          "tensor_core_precisions": sorted({g.get("tensor_core_precisions", "") for g in cap["gpus"]
                                                            if g.get("capabilities")}),
                          "dram_peak_bytes_per_s": min((g["dram_peak_bytes_per_s"] for g in cap["gpus"]
                                                        if g.get("dram_peak_bytes_per_s")), default=None)}
        out.append(cap)
    return out


def _public_capture(capture: dict) -> dict:
    from nsight_advisor.common.json_values import jsonable

    return {k: jsonable(v) for k, v in capture.items()}


def combine_outcomes(rule: Rule, results: list, n_captures: int) -> Outcome:
    """One outcome for a rule from its per-capture results: errored > findings > clean > skipped."""
    multi = n_captures > 1

    def label(capture: dict, text: str) -> str:
        return f"capture {capture['capture_id']} ({capture.get('source_name')}): {text}" if multi else text

    errored = [(c, r) for c, r in results if r.status == "errored"]
    n_findings = sum(len(r.findings) for _, r in results)
    if errored:
        return Outcome(rule.id, rule.name, "errored", reason="; ".join(label(c, r.reason) for c, r in errored),
                       findings=n_findings)
    if n_findings:
        rows = sum(r.firing_rows for _, r in results)
        return Outcome(rule.id, rule.name, "findings", reason=f"{rows} firing row(s)", findings=n_findings)
    ran = [(c, r) for c, r in results if r.status == "clean"]
    if ran:
        skipped = [(c, r) for c, r in results if r.status == "skipped"]
        reason = "; ".join(label(c, "skipped: " + r.reason) for c, r in skipped)
        return Outcome(rule.id, rule.name, "clean", reason=reason)
    if not results:
        return Outcome(rule.id, rule.name, "skipped", reason="no captures to analyze")
    skipped = [r for _, r in results]
    reason = "; ".join(label(c, r.reason) for c, r in results)
    option = next((r.capture_option for r in skipped if r.capture_option), "")
    return Outcome(rule.id, rule.name, "skipped", reason=reason, capture_option=option)


__all__ = ["run_analysis", "analyze_with_rules", "read_captures", "settle_impacts"]
