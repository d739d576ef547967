"""What each finding's fix changes in a replay of the step graph (docs/impact.md, "What a fix would save").

:func:`fix_of` turns a finding into the keyword arguments of ``analysis.replay.replay``: a kernel finding's
kernels shortened by the share of their time it claims (:func:`kernel_fix`); an idle finding's gaps closed
(:func:`idle_fix`, on the gaps :func:`finding_gaps` reads for all idle findings at once), the staged copies of a
host-copy gap made asynchronous from pinned memory; a copy finding's copies overlapped with the kernels
(:func:`copy_fix`); an exposed-communication finding's collectives overlapped with compute (:func:`comm_fix`).
Caches live on the graph (one per analysis).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from nsight_advisor.analysis.step_graph import HOST, KERNEL, MEMCPY, StepGraph
from nsight_advisor.common import sql_params
from nsight_advisor.common.runs import value_windows

if TYPE_CHECKING:
    from nsight_advisor.engine.model import Finding


def fix_of(con, g: StepGraph, f: Finding, gaps: dict[int, list[tuple]]) -> dict[str, Any] | None:
    """The change of the replay (``replay.replay``'s keyword arguments) that applies ``f``'s fix, None where
    its fix is not in the replay or changes nothing. ``gaps``: the idle findings' gaps (:func:`finding_gaps`)."""
    part = f.internal.get("part", "kernel")
    if part == "kernel":
        return kernel_fix(con, g, f)
    if part == "idle":
        return idle_fix(g, f, gaps.get(id(f)) or [])
    if part == "copy":
        return copy_fix(g, f)
    if part == "comm" and f.internal.get("comm") == "exposed":
        return comm_fix(con, g, f)
    if part == "host" and f.internal.get("host") == "pageable-copies":
        return pageable_fix(con, g, f)
    return None


def pageable_fix(con, g: StepGraph, f: Finding) -> dict[str, Any] | None:
    """The asynchronous copies of pageable memory of the finding's capture (a rule claiming ``impact_host =
    "pageable-copies"``) made from pinned memory (:func:`_pin_copies`): each call takes a launch's time instead of
    waiting while the driver stages its copy, and the copy starts as soon as its launch and its stream allow."""
    pinned = _pageable_calls(con, g).get(int(f.capture_id), set())
    w = capture_window(g, f.capture_id)
    ops = g.ops
    mine = np.flatnonzero((g.kinds[w] == HOST) & (_columns(g).capture[w] == f.capture_id)) + w.start
    calls = np.zeros(len(g), bool)
    calls[mine] = [(p, c) in pinned for p, c in zip(ops["pid"][mine].tolist(),
                                                    ops["correlation_id"][mine].tolist())]
    if not calls.any():
        return None
    change = {"own_scale": np.ones(len(g)), "drop_wait": np.zeros(len(g), bool)}
    _pin_copies(g, calls, change)
    return change


def _pageable_calls(con, g: StepGraph) -> dict[int, set[tuple]]:
    """Per capture of the graph, the (pid, correlation id) of its asynchronous copy calls of pageable memory: asked
    once per graph for every capture (once per finding, 64 ranks' queries took 0.2 s)."""
    kept = g.__dict__.get("_pageable_calls")
    if kept is None:
        rows = sql_params.execute(con, """
            select distinct a.capture_id, a.pid, a.correlation_id from api_calls a
            join memcpys m on m.capture_id = a.capture_id and m.correlation_id = a.correlation_id and m.pid = a.pid
            where a.capture_id in (select unnest($c::integer[]))
              and (m.src_kind = 'pageable' or m.dst_kind = 'pageable')
              and (a.base_name ilike 'cudaMemcpy%async%' or a.base_name ilike 'cuMemcpy%async%')""",
                                  {"c": sorted(_columns(g).windows)}).fetchall()
        kept = g.__dict__["_pageable_calls"] = {}
        for cid, pid, corr in rows:
            kept.setdefault(int(cid), set()).add((pid, corr))
    return kept


@dataclass
class _Columns:
    capture: np.ndarray  # each op's capture
    device: np.ndarray  # each op's device, float (nan: none)
    starts: np.ndarray  # int64
    ends: np.ndarray  # int64
    windows: dict[int, slice]  # capture -> the ops from its first to its last


def _columns(g: StepGraph) -> _Columns:
    """The graph's columns a fix reads, as arrays made once per graph (a fix per finding converting them again cost
    a pass over the whole graph each)."""
    kept = g.__dict__.get("_fix_columns")
    if kept is None:
        ops = g.ops
        capture = ops["capture_id"]
        windows = value_windows(capture)
        kept = g.__dict__["_fix_columns"] = _Columns(
            capture=capture, device=ops["device_id"],
            starts=ops["start_ns"], ends=ops["end_ns"], windows=windows)
    return kept


def capture_window(g: StepGraph, capture_id: int) -> slice:
    """The ops from the capture's first to its last: the graph holds each capture's ops one after the other
    (step_graph.build_graph), so a fix's passes over them cost the capture's size, not the job's. Callers still
    test each op's capture: the window is all they need to look at, not all it holds."""
    return _columns(g).windows.get(int(capture_id), slice(0, 0))


def copy_fix(g: StepGraph, f: Finding) -> dict[str, Any] | None:
    """The exposed time of the finding's copies hidden (``internal["copies"]``: the rule's ``impact_copies``
    directions, on its device): each copy of those directions takes only the part of its time that a kernel of its
    device overlapped, as if it ran beside the kernels (pinned memory, a side stream, the next batch prefetched).
    The share is each copy's own, measured on the recorded times, as copy_exposure measures the rule's claim."""
    directions = set(f.internal.get("copies") or ())
    if not directions or f.device_id is None:
        return None
    w = capture_window(g, f.capture_id)
    kind = g.kinds[w]
    on_device = _on_device(g, f)
    direction = np.where(g.name_matches("host-to-device", lower=True)[w], "h2d",
                         np.where(g.name_matches("device-to-host", lower=True)[w], "d2h", "other"))
    copies = np.flatnonzero(on_device & (kind == MEMCPY) & np.isin(direction, list(directions))) + w.start
    if not len(copies):
        return None
    starts, ends = _columns(g).starts, _columns(g).ends
    covered = _covered(starts[w][on_device & (kind == KERNEL)], ends[w][on_device & (kind == KERNEL)],
                       starts[copies], ends[copies])
    length = np.maximum(ends[copies] - starts[copies], 1)
    scale = np.ones(len(g))
    scale[copies] = np.clip(covered / length, 0.0, 1.0)
    return {"own_scale": scale} if (scale < 1).any() else None


def comm_fix(con, g: StepGraph, f: Finding) -> dict[str, Any] | None:
    """The exposed transfer of the finding's communication kernels hidden (a rule claiming ``impact_comm =
    "exposed"``, on its device): each keeps only the part of its transfer that a compute kernel of its device
    overlapped, as if the collective ran beside the compute (started as soon as its input was ready). The transfer
    is the kernel's time after the last rank of its collective arrived (the graph's matched collectives; the whole
    kernel where none is matched), so a wait for a late rank, which collective-straggler claims, stays."""
    if f.device_id is None:
        return None
    w = capture_window(g, f.capture_id)
    on_device = _on_device(g, f) & (g.kinds[w] == KERNEL)
    comm = on_device & g.name_in(_comm_names(con, g, f.capture_id))[w]
    kernels = np.flatnonzero(comm) + w.start
    if not len(kernels):
        return None
    starts, ends = _columns(g).starts, _columns(g).ends
    # the transfer starts when the last rank arrived (the latest start among the collective's members)
    arrived = starts[kernels].copy()
    grouped = g.group[kernels] >= 0
    for n in np.flatnonzero(grouped):
        arrived[n] = max(starts[m] for m in g.members[int(g.group[kernels[n]])])
    lo = np.minimum(np.maximum(arrived, starts[kernels]), ends[kernels])
    compute = on_device & ~comm
    covered = _covered(starts[w][compute], ends[w][compute], lo, ends[kernels])
    transfer = np.maximum(ends[kernels] - lo, 1)
    scale = np.ones(len(g))
    scale[kernels] = np.clip(covered / transfer, 0.0, 1.0)
    return {"own_scale": scale} if (scale < 1).any() else None


def _on_device(g: StepGraph, f: Finding) -> np.ndarray:
    """The operations of the finding's capture on its device, a boolean mask over the ops of the capture's window
    (:func:`capture_window`)."""
    w, cols = capture_window(g, f.capture_id), _columns(g)
    return (cols.capture[w] == f.capture_id) & (cols.device[w] == f.device_id)


def _comm_names(con, g: StepGraph, capture_id: int) -> list[str]:
    """The capture's communication kernel names (the store's na_comm_name), asked once per graph for every
    capture."""
    kept = g.__dict__.get("_comm_names")
    if kept is None:
        kept = g.__dict__["_comm_names"] = {}
        for cid, name in sql_params.execute(con, """
                select capture_id, name from kernel_names
                where capture_id in (select unnest($c::integer[])) and na_comm_name(name) order by all""",
                                            {"c": sorted(_columns(g).windows)}).fetchall():
            kept.setdefault(int(cid), []).append(name)
    return kept.get(int(capture_id), [])


def _covered(k_start: np.ndarray, k_end: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """For each interval [lo, hi), the time within it that the union of the intervals [k_start, k_end) covers."""
    if not len(k_start):
        return np.zeros(len(lo))
    order = np.argsort(k_start, kind="stable")
    a, b = k_start[order], np.maximum.accumulate(k_end[order])
    # merge: an interval starts a new run when it starts after every earlier one ended
    new = np.r_[True, a[1:] > b[:-1]]
    run = np.cumsum(new) - 1
    run_a = a[new]
    run_b = np.zeros(int(run[-1]) + 1, np.int64)
    np.maximum.at(run_b, run, b)
    before = np.r_[0, np.cumsum(run_b - run_a)]  # union length of the runs before each run

    def upto(t: np.ndarray) -> np.ndarray:  # union length before time t
        k = np.searchsorted(run_a, t, "right") - 1
        inside = np.clip(t - run_a[np.maximum(k, 0)], 0, run_b[np.maximum(k, 0)] - run_a[np.maximum(k, 0)])
        return np.where(k >= 0, before[np.maximum(k, 0)] + inside, 0)

    return (upto(hi) - upto(lo)).astype(np.float64)


def kernel_fix(con, g: StepGraph, f: Finding) -> dict[str, Any] | None:
    """The finding's kernels shortened by the share of their time it claims on its device: the rule's own claim
    (``internal["device_claims"]``, engine/impact.py), what this fix alone would take off them, not its settled
    share of the partition (``impact_ns``), which other findings on the same kernels took their part of. A finding
    that was never reconciled falls back to its claims scaled by its impact."""
    own = (f.internal.get("device_claims") or {}).get(f.device_id)
    settle = 1.0
    if own is None:
        own = f.internal.get("claims") or []
        settle = f.impact_ns / f.claimed_ns if f.claimed_ns > 0 else 1.0
    claims = [(s, ns) for s, ns in own if s is not None and ns > 0]
    if not claims:
        return None
    times = _kernel_time(con, g, f.capture_id, f.device_id)
    index = _kernel_index(g)
    # the finding's kernels: those of its capture (and device), then those of each claimed name among them
    w = capture_window(g, f.capture_id)
    mine = index.kernels[np.searchsorted(index.kernels, w.start):np.searchsorted(index.kernels, w.stop)]
    cols = _columns(g)
    mine = mine[cols.capture[mine] == f.capture_id]
    if f.device_id is not None:
        mine = mine[cols.device[mine] == f.device_id]
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
    codes: np.ndarray  # each operation's name, as a code
    by_subject: dict[str, list[int]]  # a name or short name: the codes of the names it stands for


def _kernel_index(g: StepGraph) -> _KernelIndex:
    """The graph's kernels and their names as codes (their captures and devices: :func:`_columns`), made once per
    graph (not once per finding: 41 kernel findings on the 8 DLRM ranks compared 262k names per claim), each
    distinct name shortened once."""
    kept = g.__dict__.get("_kernel_index")
    if kept is None:
        ops = g.ops
        codes, uniques = g.name_codes()  # a missing name as "" (last)
        by_subject: dict[str, list[int]] = {}
        for code, name in enumerate(uniques):
            by_subject.setdefault(name, []).append(code)
            short = _short_name(name)
            if short != name:
                by_subject.setdefault(short, []).append(code)
        kept = g.__dict__["_kernel_index"] = _KernelIndex(
            kernels=np.flatnonzero(ops["kind"] == KERNEL), codes=np.asarray(codes),
            by_subject=by_subject)
    return kept


def _short_name(name: str) -> str:
    base = re.sub(r"\(.*$", "", name)
    base = re.sub(r"<.*$", "", base)
    return base.split("::")[-1].split(" ")[-1]


def _kernel_time(con, g: StepGraph, capture_id: int, device_id) -> dict[str, float]:
    """Kernel time by name and by short name in one capture (and device; all of its devices for None), asked once
    per graph for every capture and device."""
    kept = g.__dict__.get("_kernel_time")
    if kept is None:
        kept = g.__dict__["_kernel_time"] = {}
        # per device, and per capture over its devices (grouping(device_id) = 1): the sums as the store adds them
        rows = sql_params.execute(con, """
            select capture_id, grouping(device_id) = 1, device_id, name, short_name, sum(total_ns)
            from kernel_totals where capture_id in (select unnest($c::integer[]))
            group by grouping sets ((capture_id, device_id, name, short_name), (capture_id, name, short_name))
            order by all""", {"c": sorted(_columns(g).windows)}).fetchall()
        for cid, every, dev, name, short, ns in rows:
            if not every and dev is None:
                continue  # a kernel without a device counts only towards its capture's whole
            out = kept.setdefault((int(cid), None if every else int(dev)), {})
            for key_name in {name, short} - {None}:
                out[key_name] = out.get(key_name, 0.0) + float(ns or 0)
    return kept.get((int(capture_id), None if device_id is None else int(device_id)), {})


def finding_gaps(con, g: StepGraph, findings: list[Finding]) -> dict[int, list[tuple]]:
    """Each idle finding's own gaps (start_ns, end_ns, cause) on its capture's clock, keyed by ``id(finding)``,
    asked in one query for all of them: a rule claims the longest gaps of its causes (gpu-idle-gap those of 1 ms or
    more), so the longest ones until they hold its impact (ties: the earlier first); of those, the ones the
    graph's steps meet (a gap outside them holds none of its operations). Chosen in SQL: a long capture has a
    million gaps."""
    asked = []
    cols = _columns(g)
    for f in findings:
        causes = [str(c) for c in f.internal.get("causes") or ()]
        w = capture_window(g, f.capture_id)
        mine = cols.capture[w] == f.capture_id
        if not causes or f.device_id is None or not mine.any():
            continue
        offset = g.clock(f.capture_id, 0)
        asked.append((f, causes, int(cols.starts[w][mine].min()) - offset, int(cols.ends[w][mine].max()) - offset))
    if not asked:
        return {}
    rows = sql_params.execute(con, """
        with f as (
            select unnest($k::integer[]) as k, unnest($c::integer[]) as capture_id, unnest($d::integer[]) as device_id,
                   unnest($causes::varchar[][]) as causes, unnest($impact::bigint[]) as impact,
                   unnest($lo::bigint[]) as lo, unnest($hi::bigint[]) as hi
        ),
        g as (
            -- one row per finding and cause, joined on the cause too: with list_contains() as the condition every
            -- gap of the device (a million launch gaps) was joined to each finding first and then dropped
            select f.k, f.impact, f.lo, f.hi, g.start_ns, g.end_ns, g.cause, g.end_ns - g.start_ns as d
            from (select k, capture_id, device_id, unnest(list_distinct(causes)) as cause, impact, lo, hi from f) f
            join gpu_idle_gaps g
                on g.capture_id = f.capture_id and g.device_id = f.device_id and g.cause = f.cause
               and g.position = 'between'
        ),
        -- a gap is held when the gaps before it (longest first, ties by start) sum to less than the impact: the
        -- running sum taken over the distinct lengths, not over every gap (a long capture's million launch gaps
        -- sorted took a second); only the length where the sum reaches the impact is split by start
        lengths as (select k, d, any_value(impact) as impact, count(*) as n from g group by k, d),
        running as (
            select *, coalesce(sum(d * n) over (partition by k order by d desc
                                                rows between unbounded preceding and 1 preceding), 0) as before
            from lengths
        ),
        kept as (
            select k, d, case when before + (n - 1) * d < impact then null
                              else (impact - before + d - 1) // d end as take
            from running where before < impact
        ),
        whole as (
            select g.k, g.start_ns, g.end_ns, g.cause from g join kept using (k, d)
            where kept.take is null and g.end_ns >= g.lo and g.start_ns <= g.hi
        ),
        part as (
            select g.k, g.start_ns, g.end_ns, g.cause, g.lo, g.hi, kept.take,
                   row_number() over (partition by g.k order by g.start_ns) as r
            from g join kept using (k, d) where kept.take is not null
        )
        select k, start_ns, end_ns, cause from whole
        union all
        select k, start_ns, end_ns, cause from part where r <= take and end_ns >= lo and start_ns <= hi
        order by k, start_ns""",
                              {"k": list(range(len(asked))), "c": [int(f.capture_id) for f, *_ in asked],
                               "d": [int(f.device_id) for f, *_ in asked], "causes": [c for _f, c, _l, _h in asked],
                               "impact": [int(f.impact_ns) for f, *_ in asked], "lo": [lo for *_, lo, _h in asked],
                               "hi": [hi for *_, hi in asked]}).fetchall()
    out: dict[int, list[tuple]] = {}
    for k, start, end, cause in rows:
        out.setdefault(id(asked[k][0]), []).append((start, end, cause))
    return out


def idle_fix(g: StepGraph, f: Finding, gaps: list[tuple]) -> dict[str, Any] | None:
    """The gaps of the finding's causes closed (its gaps: :func:`finding_gaps`): the host's work within them
    removed (the part of each stretch of host work between two calls that lies in a gap; an allocation's or a
    staged copy's call itself), and a synchronization whose return opened a sync gap no longer waiting."""
    offset = g.clock(f.capture_id, 0)
    if not gaps:
        return None
    lo = np.array([s + offset for s, _e, _c in gaps], np.int64)
    hi = np.array([e + offset for _s, e, _c in gaps], np.int64)
    is_sync = np.array([c == "sync" for _s, _e, c in gaps])
    removes_call = np.array([c in ("allocation", "host-copy") for _s, _e, c in gaps])
    # the capture's window (capture_window): every op outside it keeps its lags, its time and its waits
    w, cols, n = capture_window(g, f.capture_id), _columns(g), len(g)
    kind, cids, devices = g.kinds[w], cols.capture[w], cols.device[w]
    pid = g.ops["pid"][w]  # float64, NaN where missing
    pids = set(pid[(cids == f.capture_id) & (devices == f.device_id) & ~np.isnan(pid)].tolist())
    host = (kind == HOST) & (cids == f.capture_id) & np.isin(pid, sorted(pids))
    starts, ends = cols.starts[w], cols.ends[w]
    lag0, pred0, wait_pred = g.lag[w, 0], g.pred[w, 0], g.wait_pred[w]
    # the host work before each call: [start - lag, start); its overlap with the gap holding the call's start
    work_lo = starts - np.where(g.from_start[w, 0], 0, np.maximum(lag0, 0))
    k = np.maximum(np.searchsorted(lo, starts, "right") - 1, 0)
    in_gap = host & (starts > lo[k]) & (starts <= hi[k]) & ~is_sync[k] & (pred0 >= 0)
    cut = np.where(in_gap, starts - np.maximum(work_lo, lo[k]), 0).clip(min=0)
    lag_scale = np.ones(n)
    has_lag = lag0 > 0
    lag_scale[w][has_lag] = 1.0 - cut[has_lag] / lag0[has_lag]
    own_scale = np.ones(n)
    own_scale[w] = np.where(host & (starts >= lo[k]) & (ends <= hi[k]) & removes_call[k] & (wait_pred < 0), 0.0, 1.0)
    # a blocking call whose return opened a sync gap: it no longer waits
    ke = np.maximum(np.searchsorted(lo, ends, "right") - 1, 0)
    at_gap = np.zeros(n, bool)
    at_gap[w] = host & (ends >= lo[ke]) & (ends <= hi[ke]) & is_sync[ke] & (wait_pred >= 0)
    change = {"host_lag_scale": lag_scale, "drop_wait": at_gap, "own_scale": own_scale}
    staged = np.array([c == "host-copy" for _s, _e, c in gaps])
    if staged.any():
        host_all = np.zeros(n, bool)
        host_all[w] = host
        _staged_copies(g, host_all, cols.starts, cols.ends, lo[staged], hi[staged], change)
    if not (lag_scale < 1).any() and not change["drop_wait"].any() and not (change["own_scale"] < 1).any() \
            and "prompt_start" not in change:
        return None
    return change


def _staged_copies(g: StepGraph, host: np.ndarray, starts: np.ndarray, ends: np.ndarray, lo: np.ndarray,
                   hi: np.ndarray, change: dict[str, Any]) -> None:
    """A synchronous copy or set of the host's (``host``: the finding's calls) that overlaps a host-copy gap
    [``lo``, ``hi``] made asynchronous from pinned memory, in ``change``: the call takes a launch's time (the
    capture's typical launch latency) and no longer waits for the GPU, and its copy starts as soon as its launch
    and its stream allow (a pageable host-to-device copy starts only once the host has staged it, after the call
    returned, and the next one waits for the next call's staging). A copy the call waited for itself (device to
    host: the host needs the data) is still waited for, without the time the host spent copying it out of the
    staging buffer. A call reaching into a gap only at its edge counts, as its staging is what kept the GPU idle
    there."""
    ops = g.ops
    copy_call = host & ops["blocking"] & ~g.name_matches("Synchronize")
    # the gap starting last before the call ends: the call overlaps it when it ends after the gap starts and
    # starts before the gap ends
    k = np.searchsorted(lo, ends, "right") - 1
    _pin_copies(g, copy_call & (k >= 0) & (starts < hi[np.maximum(k, 0)]), change)


def _pin_copies(g: StepGraph, overlaps: np.ndarray, change: dict[str, Any]) -> None:
    """The copy calls ``overlaps`` (a mask of host ops) made asynchronous from pinned memory, in ``change`` (its
    ``own_scale`` and ``drop_wait`` updated, ``wait_lag_scale`` and ``prompt_start`` set): see
    :func:`_staged_copies`."""
    calls = np.flatnonzero(overlaps)
    if not len(calls):
        return
    typical = float(g.typical.get("launch", 0))
    own = g.own_ns[calls].astype(np.float64)
    change["own_scale"][calls] = np.minimum(change["own_scale"][calls],
                                            np.where(own > typical, typical / np.maximum(own, 1.0), 1.0))
    launched = np.flatnonzero(np.isin(g.pred[:, 1], calls))
    caller = g.pred[launched, 1]
    waits_own = np.zeros(len(g), bool)
    waits_own[caller[g.wait_pred[caller] == launched]] = True
    change["drop_wait"] = change["drop_wait"] | (overlaps & ~waits_own & (g.wait_pred >= 0))
    wait_scale = np.ones(len(g))
    wait_scale[waits_own] = 0.0
    change["wait_lag_scale"] = wait_scale
    prompt = np.zeros(len(g), bool)
    prompt[launched] = True
    change["prompt_start"] = prompt
