"""What a change would save: replay the step graph with it applied and compare the steps (docs/impact.md).

:func:`step_model` builds, for some captures, the graph of their steps (analysis/step_graph.py): the steady
iterations (analysis/iterations.py), else the PyTorch profiler's ``ProfilerStep#N`` ranges. :func:`whatif` answers an
engineer's question ("this kernel 1.3x faster"); :func:`attach_savings` gives each finding its ``saving_ns``: the
replay with the finding's fix applied, against the replay without it, summed over the steps.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from nsight_advisor.common import sql_params
from nsight_advisor.analysis.critical_path import critical_path, device_units, map_steps, path_summary, step_totals
from nsight_advisor.analysis.replay import replay
from nsight_advisor.analysis.iterations import _quantile
from nsight_advisor.analysis.steps import Steps, steps_of
from nsight_advisor.analysis.graph_rows import GraphRows, read_graph
from nsight_advisor.analysis.step_graph import KERNEL, StepGraph, graph_from
from nsight_advisor.engine.finding_fixes import finding_gaps, fix_of
from nsight_advisor.engine.fix_replays import SavingsReplays, sparse

if TYPE_CHECKING:
    import duckdb

    from nsight_advisor.engine.model import Finding

#: In an analysis, a capture's steps are replayed up to this many operations (its middle steps; the savings are
#: scaled to all its steps): a replay runs about a million operations a second, each finding replays once, and
#: the graph costs about 6 us an operation to build (the 1M-kernel export's 1M operations: 6.2 s to build, 9 s
#: of replays, more than the rest of its cold analyze together).
MAX_ANALYSIS_OPS = 250_000
#: ... and at most this many steps: steady steps are alike, and a few hundred of them average out step-to-step
#: noise about as well as thousands do (the 1M-kernel replay export, 8,148 steps: the savings of its 256 middle
#: steps, scaled, are within 0.01% (low-tensor-core-use) and 1.3% (sync-stall) of those of 3,031 steps; 64 steps
#: were 12.5% off on sync-stall, whose waits vary over longer stretches).
MAX_ANALYSIS_STEPS = 256


@dataclass
class StepModel:
    """The graph of some captures' steps: per capture, its steps on the graph's clock and where they came from."""

    graph: StepGraph
    steps: dict[int, list[tuple[int, int]]]
    sources: dict[int, str]
    base: tuple[np.ndarray, np.ndarray] = field(default=None)  # the unchanged replay (= the recorded times)
    kept: dict[int, tuple[int, int]] = field(default_factory=dict)  # capture -> (steps in the graph, steps found)
    units: dict[int, dict[int, np.ndarray]] = field(default_factory=dict)  # capture -> its GPUs' ops (device_units)
    paths: Any = None  # the steps' critical paths (engine/path_share.py StepPaths), where already walked

    def durations(self, times: tuple[np.ndarray, np.ndarray] | None = None) -> dict[int, list[float]]:
        """Each capture's step durations under ``times`` (the recorded ones when None), ns."""
        times = times if times is not None else self.base
        return {cid: map_steps(self.graph, cid, spans, times, self.on_host(cid)) for cid, spans in self.steps.items()}

    def totals(self, times: tuple[np.ndarray, np.ndarray] | None = None,
               captures: set[int] | None = None) -> dict[tuple[int, int], float]:
        """What a saving is measured on, under ``times``: each capture's steps summed, keyed ``(capture, -1)``; in a
        capture whose GPUs run processes of their own (:func:`device_units`), each GPU's, keyed ``(capture,
        device)``, as a job's ranks in captures of their own are. ``captures``: only these."""
        times = times if times is not None else self.base
        return {(cid, device): total for cid, spans in self.steps.items() if captures is None or cid in captures
                for device, total in step_totals(self.graph, cid, spans, times, self.on_host(cid),
                                                 self.units.get(cid)).items()}

    def moved(self, times: tuple[np.ndarray, np.ndarray]) -> set[int]:
        """The captures with an op whose replayed start or end under ``times`` differs from the unchanged replay."""
        changed = (times[0] != self.base[0]) | (times[1] != self.base[1])
        return set(np.unique(self.graph.ops["capture_id"][changed]).tolist())

    def on_host(self, capture_id: int) -> bool:
        """Whether the capture's steps are the host's (NVTX ranges), not a kernel sequence's."""
        return self.sources.get(capture_id, "").startswith("NVTX")


def step_model(con: duckdb.DuckDBPyConnection, capture_ids: Sequence[int],
               max_ops: int | None = None, max_steps: int | None = None,
               found: dict[int, Steps] | None = None) -> StepModel | None:
    """The step graph of those of ``capture_ids`` that have steps, one graph for all (ranks of a job meet at their
    collectives); None when none has steps. ``max_steps``: a capture keeps at most this many of its middle steps;
    ``max_ops``: and a capture whose kept steps hold more GPU operations and CUDA calls than this keeps only that
    many operations' worth of them (``StepModel.kept``). ``found``: the captures' steps when already read
    (nsight_advisor.analysis.steps.steps_of)."""
    rows = read_model(con, capture_ids, max_ops, max_steps, found)
    return model_from(rows) if rows is not None else None


@dataclass
class ModelRows:
    """What :func:`model_from` builds a :class:`StepModel` from, as :func:`read_model` read it: the graph's rows,
    each capture's kept steps on its own clock and where they came from, and ``StepModel.kept``."""

    graph: GraphRows
    found: dict[int, tuple[list[tuple[int, int]], str]]
    kept: dict[int, tuple[int, int]]


def read_model(con: duckdb.DuckDBPyConnection, capture_ids: Sequence[int], max_ops: int | None = None,
               max_steps: int | None = None, found: dict[int, Steps] | None = None) -> ModelRows | None:
    """:func:`step_model`'s reads of the store (None: no capture has steps); :func:`model_from` needs no connection
    (engine/model_work.py builds the model on a thread of its own while the rules' queries run)."""
    found = dict(found) if found is not None else steps_of(con, capture_ids)
    if not found:
        return None
    kept = {c: (len(v[0]), len(v[0])) for c, v in found.items()}
    for c, (spans, source) in list(found.items()):
        middle = _middle(spans, min(len(spans), max_steps or len(spans)))
        if max_ops:
            ops = _op_count(con, c, middle[0][0], middle[-1][1])
            if ops > max_ops:
                middle = _middle(spans, max(1, len(middle) * max_ops // ops))
        if len(middle) < len(spans):
            found[c] = (middle, source)
            kept[c] = (len(middle), len(spans))
    spans = {c: (v[0][0][0], v[0][-1][1]) for c, v in found.items()}
    return ModelRows(read_graph(con, list(found), spans), found, kept)


def model_from(rows: ModelRows) -> StepModel:
    """The step model of what :func:`read_model` read: its graph, its steps on the graph's clock and the unchanged
    replay."""
    graph = graph_from(rows.graph)
    found = rows.found
    steps = {c: [(graph.clock(c, s), graph.clock(c, e)) for s, e in v[0]] for c, v in found.items()}
    model = StepModel(graph, steps, {c: v[1] for c, v in found.items()})
    model.kept = rows.kept
    model.base = replay(graph)
    model.units = {c: units for c in steps if (units := device_units(graph, c))}
    return model


def _middle(spans: list[tuple[int, int]], keep: int) -> list[tuple[int, int]]:
    """The ``keep`` steps in the middle of ``spans``."""
    first = (len(spans) - keep) // 2
    return spans[first:first + keep]


def _op_count(con, capture_id: int, lo: int, hi: int) -> int:
    return int(sql_params.execute(con, """
        select (select count(*) from kernel_rows where capture_id = $c and start_ns between $lo and $hi)
             + (select count(*) from api_call_rows where capture_id = $c and start_ns between $lo and $hi)""",
                                  {"c": capture_id, "lo": lo, "hi": hi}).fetchone()[0])


def kernel_ops(graph: StepGraph, name: str) -> np.ndarray:
    """Kernels named ``name`` exactly, else those whose name contains it (a boolean mask over the ops)."""
    kernels = graph.ops["kind"] == KERNEL
    exact = kernels & graph.name_in({name})
    if exact.any():
        return exact
    return kernels & graph.name_matches(name)


def whatif(con: duckdb.DuckDBPyConnection, capture_ids: Sequence[int], *, kernel: str | None = None,
           speedup: float | None = None, fixes: Sequence[Finding] = (), names: dict[int, str] | None = None
           ) -> dict[str, Any]:
    """The steps of ``capture_ids`` replayed with a change: the kernels named ``kernel`` ``speedup`` times faster,
    and the fix of each of ``fixes`` (findings of an analysis of these captures, each fix as ``saving_ns`` models
    it: engine/finding_fixes.py), all at once. Each capture's median step before and after, the critical path of
    its median step; ValueError when the change is empty, matches nothing or no fix is modeled."""
    if kernel is None and not fixes:
        raise ValueError("name a change: --kernel NAME with --speedup F, or --fix RULE")
    if kernel is not None and not (speedup is not None and speedup > 0):
        raise ValueError(f"speedup must be above 0, got {speedup}")
    model = step_model(con, capture_ids)
    if model is None:
        raise ValueError("no steps found: the capture has no repeating iterations and no ProfilerStep#N ranges")
    changes, described = [], {}
    if kernel is not None:
        mask = kernel_ops(model.graph, kernel)
        if not mask.any():
            raise ValueError(f"no kernel named {kernel!r} (or containing it) within the capture's steps")
        changes.append({"own_scale": np.where(mask, 1.0 / speedup, 1.0)})
        chosen = model.graph.ops["name"][mask]
        described = {"kernel": kernel, "speedup": speedup, "kernel_names": sorted(set(chosen.tolist())),
                     "launches": int(mask.sum())}
    if fixes:
        fixed, applied = _fix_changes(con, model, fixes)
        changes += fixed
        described["fixes"] = applied
    after = replay(model.graph, **combine_changes(changes))
    before_d, after_d = model.durations(), model.durations(after)
    captures = []
    for cid in sorted(model.steps):
        b, a = before_d[cid], after_d[cid]
        median_k = int(np.argsort(b, kind="stable")[len(b) // 2]) if b else 0
        s, e = model.steps[cid][median_k]
        path = critical_path(model.graph, s, e, cid, model.base)
        gpus = _gpu_steps(model, cid, after)
        captures.append({
            "capture_id": cid, "source_name": (names or {}).get(cid), "steps": len(b),
            "step_source": model.sources[cid],
            "median_iteration_ns": _quantile(sorted(int(round(x)) for x in b), 0.5),
            "predicted_median_iteration_ns": _quantile(sorted(int(round(x)) for x in a), 0.5),
            "iterations_ns": [int(round(x)) for x in b],
            "predicted_iterations_ns": [int(round(x)) for x in a],
            # a capture whose GPUs run processes of their own: the sum of its GPUs' savings, as for a finding
            "saving_ns": sum(g["saving_ns"] for g in gpus) if gpus else int(round(sum(b) - sum(a))),
            "critical_path": {"step": median_k, **path_summary(model.graph, path)},
            **({"gpus": gpus} if gpus else {}),
        })
    # a job's step runs at its slowest rank's pace (a GPU that runs processes of its own is a rank)
    top = max([g for c in captures for g in c.get("gpus", [c])], key=lambda c: c["median_iteration_ns"])
    return {"change": described,
            "median_iteration_ns": top["median_iteration_ns"],
            "predicted_median_iteration_ns": top["predicted_median_iteration_ns"],
            "captures": captures}


def _fix_changes(con, model: StepModel, fixes: Sequence[Finding]) -> tuple[list[dict[str, Any]], list[dict]]:
    """The replay's change for each finding of ``fixes`` on ``model``'s graph, and per rule what was applied:
    ``{"rule", "rule_id", "findings", "replayed"}``. ValueError when none of a rule's findings has a fix the replay
    models."""
    gaps = finding_gaps(con, model.graph, [f for f in fixes if f.internal.get("part", "kernel") == "idle"])
    changes, by_rule = [], {}
    for f in fixes:
        entry = by_rule.setdefault(f.rule_name, {"rule": f.rule_name, "rule_id": f.rule_id, "findings": 0,
                                                 "replayed": 0})
        entry["findings"] += 1
        change = fix_of(con, model.graph, f, gaps) if f.capture_id in model.steps else None
        if change is not None:
            changes.append(change)
            entry["replayed"] += 1
    for entry in by_rule.values():
        if not entry["replayed"]:
            raise ValueError(f"{entry['rule']}: the replay does not model its fix, or its findings change nothing "
                             "in these steps (docs/impact.md, section 4)")
    return changes, list(by_rule.values())


def _gpu_steps(model: StepModel, capture_id: int, after: tuple[np.ndarray, np.ndarray]) -> list[dict[str, Any]]:
    """Each GPU's steps before and after, where the capture's GPUs run processes of their own (device_units): the
    capture's steps measured on the GPU's own operations and its processes' calls."""
    g, spans = model.graph, model.steps[capture_id]
    out = []
    for device, among in model.units.get(capture_id, {}).items():
        b = map_steps(g, capture_id, spans, model.base, model.on_host(capture_id), among)
        a = map_steps(g, capture_id, spans, after, model.on_host(capture_id), among)
        out.append({"device_id": device,
                    "median_iteration_ns": _quantile(sorted(int(round(x)) for x in b), 0.5),
                    "predicted_median_iteration_ns": _quantile(sorted(int(round(x)) for x in a), 0.5),
                    "saving_ns": int(round(sum(b) - sum(a)))})
    return out


def attach_savings(con: duckdb.DuckDBPyConnection, capture_ids: Sequence[int], findings: list[Finding],
                   model: StepModel | None | bool = True) -> dict:
    """Set ``saving_ns`` and ``critical_path_pct`` on each finding whose fix the replay can model (kernel-time and
    idle-time findings) in a capture with steps; the others keep None. Returns the report's ``summary.savings``:
    the captures replayed, their steps, the findings given a saving and what the findings are ranked by.
    ``model``: the captures' step model when already built (None: they have no steps)."""
    replays = savings_replays(con, capture_ids, findings, model)
    if replays is None:
        return {"captures": [], "steps": 0, "findings": 0}
    with replays:
        replays.start()
        return replays.finish()[0]


def savings_replays(con: duckdb.DuckDBPyConnection, capture_ids: Sequence[int], findings: list[Finding],
                    model: StepModel | None | bool = True, *, candidates: bool = False) -> SavingsReplays | None:
    """:func:`attach_savings` in two parts: this one reads the store (each finding's fix, as the operations it
    alters); the replays it returns need no connection (engine/fix_replays.py: ``start()`` shares them with a
    forked child where it can; ``finish()`` sets the findings' attributes and returns ``(summary.savings, summary.graph_candidates)``, the latter where ``candidates``). None where no
    capture has steps."""
    if model is True:  # none given: build it
        model = step_model(con, capture_ids, max_ops=MAX_ANALYSIS_OPS, max_steps=MAX_ANALYSIS_STEPS)
    if not isinstance(model, StepModel):
        return None
    eligible = [f for f in findings if f.capture_id in model.steps and f.impact_ns > 0]
    gaps = finding_gaps(con, model.graph, [f for f in eligible if f.internal.get("part", "kernel") == "idle"])
    # every finding's fix first (a pass over its capture's ops), kept as the ops it alters
    changes: dict[int, dict[str, Any]] = {}
    for f in eligible:
        change = fix_of(con, model.graph, f, gaps)
        if change is not None:  # None: a rule whose fix is not in the replay
            changes[id(f)] = sparse(change)  # a job keeps one per finding: as whole-graph arrays, too much memory
    fixed = [f for f in eligible if id(f) in changes]
    return SavingsReplays(model, fixed, changes, (lambda: graph_candidates(model)) if candidates else None)


def combine_changes(changes: list[dict[str, Any]]) -> dict[str, Any]:
    """Several findings' fixes as one change of the replay: the scales multiplied, the masks (dropped waits,
    prompt starts) together."""
    out: dict[str, Any] = {}
    for change in changes:
        for key, value in change.items():
            if key not in out:
                out[key] = np.array(value, copy=True)
            elif out[key].dtype == bool:  # drop_wait, prompt_start
                out[key] |= value
            else:
                out[key] *= value
    return out


def graph_candidates(model: StepModel | None) -> dict[str, Any] | None:
    """The report's ``summary.graph_candidates`` (analysis/kernel_sequences.py) for a step model; None without
    one."""
    from nsight_advisor.analysis import kernel_sequences

    if model is None:
        return None
    return kernel_sequences.graph_candidates(model.graph, model.steps, model.base, model.kept,
                                             on_host={cid: model.on_host(cid) for cid in model.steps},
                                             units=model.units)
