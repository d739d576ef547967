"""What a change would save: replay the step graph with it applied and compare the steps (docs/impact.md).

:func:`step_model` builds, for some captures, the graph of their steps (analysis/step_graph.py): the steady
iterations (analysis/iterations.py), else the PyTorch profiler's ``ProfilerStep#N`` ranges. :func:`whatif` answers an
engineer's question ("this kernel 1.3x faster"); :func:`attach_savings` gives each finding its ``saving_ns``: the
replay with the finding's fix applied, against the replay without it, summed over the steps.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from nsight_advisor.common import sql_params
from nsight_advisor.analysis.critical_path import (critical_path, device_units, map_steps, path_summary, replay,
                                                   step_totals)
from nsight_advisor.analysis.iterations import _quantile
from nsight_advisor.analysis.steps import Steps, steps_of
from nsight_advisor.analysis.step_graph import HOST, KERNEL, StepGraph, build_graph

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
#: In an analysis, the findings' replays together run at most this many operations (findings in rank order; the
#: rest keep saving_ns None and ``summary.savings.findings_not_replayed`` counts them): each finding replays the
#: whole graph, so a job's cost grew with ranks squared (64 DLRM ranks: 761 findings x 51k operations, 116 of
#: the analysis's 210 s). Ten million is about ten seconds.
MAX_ANALYSIS_REPLAY_OPS = 10_000_000
#: Idle causes whose fix removes the host's work in the gap (the GPU waited for the host to do something else).
HOST_WORK_CAUSES = ("host", "allocation", "unknown", "host-copy", "launch", "jit", "startup")


@dataclass
class StepModel:
    """The graph of some captures' steps: per capture, its steps on the graph's clock and where they came from."""

    graph: StepGraph
    steps: dict[int, list[tuple[int, int]]]
    sources: dict[int, str]
    base: tuple[np.ndarray, np.ndarray] = field(default=None)  # the unchanged replay (= the recorded times)
    kept: dict[int, tuple[int, int]] = field(default_factory=dict)  # capture -> (steps in the graph, steps found)
    units: dict[int, dict[int, np.ndarray]] = field(default_factory=dict)  # capture -> its GPUs' ops (device_units)

    def durations(self, times: tuple[np.ndarray, np.ndarray] | None = None) -> dict[int, list[float]]:
        """Each capture's step durations under ``times`` (the recorded ones when None), ns."""
        times = times if times is not None else self.base
        return {cid: map_steps(self.graph, cid, spans, times, self.on_host(cid)) for cid, spans in self.steps.items()}

    def totals(self, times: tuple[np.ndarray, np.ndarray] | None = None) -> dict[tuple[int, int], float]:
        """What a saving is measured on, under ``times``: each capture's steps summed, keyed ``(capture, -1)``; in a
        capture whose GPUs run processes of their own (:func:`device_units`), each GPU's, keyed ``(capture,
        device)``, as a job's ranks in captures of their own are."""
        times = times if times is not None else self.base
        return {(cid, device): total for cid, spans in self.steps.items()
                for device, total in step_totals(self.graph, cid, spans, times, self.on_host(cid),
                                                 self.units.get(cid)).items()}

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
    graph = build_graph(con, list(found), spans)
    steps = {c: [(graph.clock(c, s), graph.clock(c, e)) for s, e in v[0]] for c, v in found.items()}
    model = StepModel(graph, steps, {c: v[1] for c, v in found.items()})
    model.kept = kept
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
             + (select count(*) from api_calls where capture_id = $c and start_ns between $lo and $hi)""",
                                  {"c": capture_id, "lo": lo, "hi": hi}).fetchone()[0])


def kernel_ops(graph: StepGraph, name: str) -> np.ndarray:
    """Kernels named ``name`` exactly, else those whose name contains it (a boolean mask over the ops)."""
    kernels = graph.ops["kind"].to_numpy() == KERNEL
    names = graph.ops["name"].fillna("")
    exact = kernels & (names == name).to_numpy()
    if exact.any():
        return exact
    return kernels & names.str.contains(name, regex=False).to_numpy()


def whatif(con: duckdb.DuckDBPyConnection, capture_ids: Sequence[int], *, kernel: str, speedup: float,
           names: dict[int, str] | None = None) -> dict[str, Any]:
    """The steps of ``capture_ids`` with the kernels named ``kernel`` ``speedup`` times faster, replayed: each
    capture's median step before and after, the critical path of its median step; ValueError when nothing
    matches."""
    if not speedup > 0:
        raise ValueError(f"speedup must be above 0, got {speedup}")
    model = step_model(con, capture_ids)
    if model is None:
        raise ValueError("no steps found: the capture has no repeating iterations and no ProfilerStep#N ranges")
    mask = kernel_ops(model.graph, kernel)
    if not mask.any():
        raise ValueError(f"no kernel named {kernel!r} (or containing it) within the capture's steps")
    scale = np.where(mask, 1.0 / speedup, 1.0)
    after = replay(model.graph, own_scale=scale)
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
    chosen = model.graph.ops.loc[mask, "name"]
    # a job's step runs at its slowest rank's pace (a GPU that runs processes of its own is a rank)
    top = max([g for c in captures for g in c.get("gpus", [c])], key=lambda c: c["median_iteration_ns"])
    return {"change": {"kernel": kernel, "speedup": speedup, "kernel_names": sorted(chosen.unique().tolist()),
                       "launches": int(mask.sum())},
            "median_iteration_ns": top["median_iteration_ns"],
            "predicted_median_iteration_ns": top["predicted_median_iteration_ns"],
            "captures": captures}


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
    from nsight_advisor.engine.path_share import step_paths

    if model is True:  # none given: build it
        model = step_model(con, capture_ids, max_ops=MAX_ANALYSIS_OPS, max_steps=MAX_ANALYSIS_STEPS)
    if not isinstance(model, StepModel):
        return {"captures": [], "steps": 0, "findings": 0}
    before = model.totals()
    paths = step_paths(model.graph, model.steps, model.base, model.units)
    given = skipped = 0
    budget = MAX_ANALYSIS_REPLAY_OPS
    replayed = []
    for f in findings:
        if f.capture_id not in model.steps or f.impact_ns <= 0:
            continue
        if budget < len(model.graph):
            skipped += 1
            continue
        budget -= len(model.graph)
        replayed.append(f)
    gaps = _finding_gaps(con, model, [f for f in replayed if f.internal.get("part", "kernel") == "idle"])
    changes: dict[int, dict[str, Any]] = {}
    for f in replayed:
        change = _fix_of(con, model, f, gaps)
        if change is None:
            continue
        changes[id(f)] = change
        f.critical_path_pct = paths.share_pct(f.capture_id, change, f.device_id)
        f.saving_ns = _saved(model, before, replay(model.graph, **change))
        given += 1
    _all_ranks_savings(model, before, [f for f in replayed if id(f) in changes], changes, budget)
    return {"captures": sorted(model.steps), "steps": sum(total for _kept, total in model.kept.values()),
            "replayed_steps": sum(kept for kept, _total in model.kept.values()), "findings": given,
            "ranked_by": "saving_ns" if given else "impact_ns",
            **({"findings_not_replayed": skipped} if skipped else {})}


def _saved(model: StepModel, before: dict[tuple[int, int], float], after: tuple[np.ndarray, np.ndarray]) -> int:
    """What the replayed steps got shorter in all (:meth:`StepModel.totals`: each capture's, or each GPU's of a
    capture whose GPUs run processes of their own; the middle steps kept stand for all)."""
    now = model.totals(after)
    saved = 0.0
    for key, was in before.items():
        kept, total = model.kept.get(key[0], (1, 1))
        saved += (was - now[key]) * total / kept
    return max(int(round(saved)), 0)


def _all_ranks_savings(model: StepModel, before: dict[tuple[int, int], float], findings: list[Finding],
                       changes: dict[int, dict[str, Any]], budget: int) -> None:
    """Set ``saving_all_ranks_ns`` on the findings of each rule and subject that fires on two or more ranks or GPUs:
    their fixes applied at once, replayed within ``budget`` operations (ranks waiting for each other at a
    collective gain nothing from one rank's fix alone)."""
    from nsight_advisor.engine.combined_view import finding_subject

    groups: dict[tuple[str, str], list[Finding]] = {}
    for f in findings:
        groups.setdefault((f.rule_id, finding_subject(f)), []).append(f)
    used = 0
    for members in groups.values():
        if len({(f.capture_id, f.device_id) for f in members}) < 2 or budget - used < len(model.graph):
            continue
        used += len(model.graph)
        saved = _saved(model, before, replay(model.graph, **combine_changes([changes[id(f)] for f in members])))
        for f in members:
            f.saving_all_ranks_ns = saved


def combine_changes(changes: list[dict[str, Any]]) -> dict[str, Any]:
    """Several findings' fixes as one change of the replay: the scales multiplied, the dropped waits together."""
    out: dict[str, Any] = {}
    for change in changes:
        for key, value in change.items():
            if key not in out:
                out[key] = np.array(value, copy=True)
            elif key == "drop_wait":
                out[key] |= value
            else:
                out[key] *= value
    return out


def _fix_of(con, model: StepModel, f: Finding, gaps: dict[int, list[tuple]]) -> dict[str, Any] | None:
    part = f.internal.get("part", "kernel")
    if part == "kernel":
        return _kernel_fix(con, model, f)
    if part == "idle":
        return _idle_fix(model, f, gaps.get(id(f)) or [])
    return None


def _kernel_fix(con, model: StepModel, f: Finding) -> dict[str, Any] | None:
    """The finding's kernels shortened by the share of their time it claims."""
    g = model.graph
    claims = [(s, ns) for s, ns in (f.internal.get("claims") or []) if s is not None and ns > 0]
    if not claims:
        return None
    settle = f.impact_ns / f.claimed_ns if f.claimed_ns > 0 else 1.0
    times = _kernel_time(con, model, f.capture_id, f.device_id)
    index = _kernel_index(model)
    # the finding's kernels: those of its capture (and device), then those of each claimed name among them
    mine = index.kernels[(index.capture == f.capture_id)[index.kernels]]
    if f.device_id is not None:
        mine = mine[index.device[mine] == f.device_id]
    scale = np.ones(len(g))
    for subject, ns in claims:
        total = times.get(subject, 0)
        codes = index.by_subject.get(subject)
        if total <= 0 or not codes:
            continue
        share = min(ns * settle / total, 1.0)
        scale[mine[np.isin(index.codes[mine], codes)]] *= 1.0 - share
    return {"own_scale": scale} if (scale < 1).any() else None


@dataclass
class _KernelIndex:
    kernels: np.ndarray  # positions of the graph's kernels
    capture: np.ndarray  # each operation's capture
    device: np.ndarray  # each operation's device (nan: none)
    codes: np.ndarray  # each operation's name, as a code
    by_subject: dict[str, list[int]]  # a name or short name: the codes of the names it stands for


def _kernel_index(model: StepModel) -> _KernelIndex:
    """The graph's kernels by capture, device and name, made once per model (not once per finding: 41 kernel
    findings on the 8 DLRM ranks compared 262k names per claim), each distinct name shortened once."""
    kept = model.__dict__.get("_kernel_index")
    if kept is None:
        import pandas as pd  # pandas only where a step is replayed (tests/test_sql_params.py)

        ops = model.graph.ops
        codes, uniques = pd.factorize(ops["name"].fillna(""))
        by_subject: dict[str, list[int]] = {}
        for code, name in enumerate(uniques):
            by_subject.setdefault(name, []).append(code)
            short = _short_name(name)
            if short != name:
                by_subject.setdefault(short, []).append(code)
        kept = model.__dict__["_kernel_index"] = _KernelIndex(
            kernels=np.flatnonzero(ops["kind"].to_numpy() == KERNEL), capture=ops["capture_id"].to_numpy(),
            device=ops["device_id"].to_numpy(dtype=float, na_value=np.nan), codes=np.asarray(codes),
            by_subject=by_subject)
    return kept


def _short_name(name: str) -> str:
    base = re.sub(r"\(.*$", "", name)
    base = re.sub(r"<.*$", "", base)
    return base.split("::")[-1].split(" ")[-1]


def _kernel_time(con, model: StepModel, capture_id: int, device_id) -> dict[str, float]:
    """Kernel time by name and by short name in one capture (and device): asked once per capture and device."""
    kept = model.__dict__.setdefault("_kernel_time", {})
    key = (capture_id, device_id)
    if key in kept:
        return kept[key]
    rows = sql_params.execute(con, """
        select name, short_name, sum(duration_ns) from kernels
        where capture_id = $cid and ($dev is null or device_id = $dev) group by all""",
                              {"cid": capture_id, "dev": device_id}).fetchall()
    out: dict[str, float] = {}
    for name, short, ns in rows:
        for key_name in {name, short} - {None}:
            out[key_name] = out.get(key_name, 0.0) + float(ns or 0)
    kept[key] = out
    return out


def _finding_gaps(con, model: StepModel, findings: list[Finding]) -> dict[int, list[tuple]]:
    """Each idle finding's own gaps (start_ns, end_ns, cause) on its capture's clock, keyed by ``id(finding)``,
    asked in one query for all of them: a rule claims the longest gaps of its causes (gpu-idle-gap those of 1 ms or
    more), so the longest ones until they hold its impact (ties: the earlier first); of those, the ones the
    graph's steps meet (a gap outside them holds none of its operations). Chosen in SQL: a long capture has a
    million gaps."""
    asked = []
    g = model.graph
    capture = g.ops["capture_id"].to_numpy()
    starts, ends = g.ops["start_ns"].to_numpy(np.int64), g.ops["end_ns"].to_numpy(np.int64)
    for f in findings:
        causes = [str(c) for c in f.internal.get("causes") or ()]
        mine = capture == f.capture_id
        if not causes or f.device_id is None or not mine.any():
            continue
        offset = g.clock(f.capture_id, 0)
        asked.append((f, causes, int(starts[mine].min()) - offset, int(ends[mine].max()) - offset))
    if not asked:
        return {}
    rows = sql_params.execute(con, """
        with f as (
            select unnest($k::integer[]) as k, unnest($c::integer[]) as capture_id, unnest($d::integer[]) as device_id,
                   unnest($causes::varchar[][]) as causes, unnest($impact::bigint[]) as impact,
                   unnest($lo::bigint[]) as lo, unnest($hi::bigint[]) as hi
        ),
        g as (
            select f.k, f.impact, f.lo, f.hi, g.start_ns, g.end_ns, g.cause, g.end_ns - g.start_ns as d
            from f join gpu_idle_gaps g
                on g.capture_id = f.capture_id and g.device_id = f.device_id and list_contains(f.causes, g.cause)
               and g.position = 'between'
        ),
        held as (
            select *, sum(d) over (partition by k order by d desc, start_ns rows unbounded preceding) as total from g
        )
        select k, start_ns, end_ns, cause from held
        where total - d < impact and end_ns >= lo and start_ns <= hi
        order by k, start_ns""",
                              {"k": list(range(len(asked))), "c": [int(f.capture_id) for f, *_ in asked],
                               "d": [int(f.device_id) for f, *_ in asked], "causes": [c for _f, c, _l, _h in asked],
                               "impact": [int(f.impact_ns) for f, *_ in asked], "lo": [lo for *_, lo, _h in asked],
                               "hi": [hi for *_, hi in asked]}).fetchall()
    out: dict[int, list[tuple]] = {}
    for k, start, end, cause in rows:
        out.setdefault(id(asked[k][0]), []).append((start, end, cause))
    return out


def _idle_fix(model: StepModel, f: Finding, gaps: list[tuple]) -> dict[str, Any] | None:
    """The gaps of the finding's causes closed (its gaps: :func:`_finding_gaps`): the host's work within them
    removed (the part of each stretch of host work between two calls that lies in a gap; an allocation's or a
    staged copy's call itself), and a synchronization whose return opened a sync gap no longer waiting."""
    g = model.graph
    offset = g.clock(f.capture_id, 0)
    if not gaps:
        return None
    lo = np.array([s + offset for s, _e, _c in gaps], np.int64)
    hi = np.array([e + offset for _s, e, _c in gaps], np.int64)
    is_sync = np.array([c == "sync" for _s, _e, c in gaps])
    removes_call = np.array([c in ("allocation", "host-copy") for _s, _e, c in gaps])
    ops = g.ops
    kind, cids = ops["kind"].to_numpy(), ops["capture_id"].to_numpy()
    devices = ops["device_id"].to_numpy(dtype=float, na_value=np.nan)
    pids = set(ops.loc[(cids == f.capture_id) & (devices == f.device_id), "pid"].dropna().tolist())
    host = (kind == HOST) & (cids == f.capture_id) & ops["pid"].isin(pids).to_numpy()
    starts, ends = ops["start_ns"].to_numpy(np.int64), ops["end_ns"].to_numpy(np.int64)
    # the host work before each call: [start - lag, start); its overlap with the gap holding the call's start
    work_lo = starts - np.where(g.from_start[:, 0], 0, np.maximum(g.lag[:, 0], 0))
    k = np.maximum(np.searchsorted(lo, starts, "right") - 1, 0)
    in_gap = host & (starts > lo[k]) & (starts <= hi[k]) & ~is_sync[k] & (g.pred[:, 0] >= 0)
    cut = np.where(in_gap, starts - np.maximum(work_lo, lo[k]), 0).clip(min=0)
    lag_scale = np.ones(len(g))
    has_lag = g.lag[:, 0] > 0
    lag_scale[has_lag] = 1.0 - cut[has_lag] / g.lag[has_lag, 0]
    own_scale = np.where(host & (starts >= lo[k]) & (ends <= hi[k]) & removes_call[k] & (g.wait_pred < 0), 0.0, 1.0)
    # a blocking call whose return opened a sync gap: it no longer waits
    ke = np.maximum(np.searchsorted(lo, ends, "right") - 1, 0)
    at_gap = host & (ends >= lo[ke]) & (ends <= hi[ke]) & is_sync[ke] & (g.wait_pred >= 0)
    if not (lag_scale < 1).any() and not at_gap.any() and not (own_scale < 1).any():
        return None
    return {"host_lag_scale": lag_scale, "drop_wait": at_gap, "own_scale": own_scale}


def graph_candidates(model: StepModel | None) -> dict[str, Any] | None:
    """The report's ``summary.graph_candidates`` (analysis/kernel_sequences.py) for a step model; None without
    one."""
    from nsight_advisor.analysis import kernel_sequences

    if model is None:
        return None
    return kernel_sequences.graph_candidates(model.graph, model.steps, model.base, model.kept,
                                             on_host={cid: model.on_host(cid) for cid in model.steps},
                                             units=model.units)
