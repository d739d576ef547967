"""Reconcile what findings claim, so that no two findings on one device claim the same nanosecond.

Each rule estimates its own impact (``claimed_ns``) and says which part of a device's time partition it comes out
of (``impact_part`` in rule.toml). This module settles the final ``impact_ns`` of every finding (docs/impact.md):

1. kernel-part claims are spread over the devices that ran the kernels they name (by each device's share of that
   kernel's time), and claims of several findings on the same kernel on the same device combine as
   ``T * (1 - prod(1 - s_i))`` with ``s_i = claim_i / T`` (T: the kernel's time there) instead of adding up;
2. per device, each part's claims are scaled down together when they exceed that part of the partition (kernel
   claims within kernel time, idle claims of a cause within that cause's idle time, copy claims within copy time);
   host-wide claims (no device) together stay within the capture's duration;
3. a finding whose claims land on several devices becomes one finding per device.

``impact_pct`` is then a share of the device's analysis window, of the capture (host-wide findings), or of the
summed profiled kernel time (a Nsight Compute report alone, which has no timeline).
"""

from __future__ import annotations

import copy
import math
from collections import defaultdict
from typing import TYPE_CHECKING, Any, Iterable

from nsight_advisor.common import sql_params
from nsight_advisor.engine.model import Finding

if TYPE_CHECKING:
    import duckdb

Device = Any  # an int device id, or None


def kernel_times(con: duckdb.DuckDBPyConnection, capture_ids: Iterable[int]) -> dict[int, dict[str, dict[Device, float]]]:
    """Per capture, kernel name (full and short) -> device -> summed duration, from the timeline, else from Nsight
    Compute; the key None holds every kernel's time once. One query for all captures (and one more for those
    without a timeline): once per capture, 256 ranks took 2.1 s of queries."""
    ids = [int(c) for c in capture_ids]
    rows = sql_params.execute(con, """
        select capture_id, device_id, name, short_name, sum(total_ns) from kernel_totals
        where capture_id in (select unnest($ids::integer[])) group by all
    """, {"ids": ids}).fetchall()
    without = sorted(set(ids) - {int(r[0]) for r in rows})
    if without:
        rows += sql_params.execute(con, """
            select capture_id, null, name, short_name, sum(duration_ns) from ncu_kernels
            where capture_id in (select unnest($ids::integer[])) group by all
        """, {"ids": without}).fetchall()
    out: dict[int, dict[str | None, dict[Device, float]]] = {
        cid: defaultdict(lambda: defaultdict(float)) for cid in ids}
    for cid, device, name, short, ns in rows:
        mine = out[int(cid)]
        for key in {name, short} - {None}:
            mine[key][device] += float(ns or 0)
        mine[None][device] += float(ns or 0)  # every kernel once: the total
    return out


def reconcile(findings: list[Finding], captures: Iterable[dict], accounting: dict[int, list[dict]],
              kernel_times: dict[int, dict[str, dict[Device, float]]]) -> list[Finding]:
    """The findings with final impacts (see the module docstring); a finding may become one per device."""
    from nsight_advisor.engine.runner import finalize

    by_capture: dict[int, list[Finding]] = defaultdict(list)
    for f in findings:
        by_capture[f.capture_id].append(f)
    out: list[Finding] = []
    for cap in captures:
        cid = cap["capture_id"]
        mine = by_capture.pop(cid, [])
        if mine:
            out.extend(_reconcile_capture(mine, cap, accounting.get(cid) or [], kernel_times.get(cid) or {},
                                          finalize))
    for rest in by_capture.values():  # findings of a capture not described (should not happen): unchanged
        out.extend(rest)
    return out


def _reconcile_capture(findings: list[Finding], cap: dict, devices: list[dict],
                       kernel_times: dict[str, dict[Device, float]], finalize) -> list[Finding]:
    budgets = {d["device_id"]: d for d in devices}
    timeline = bool(budgets)
    if not timeline and not (cap.get("duration_ns") or 0) > 0:
        # a report without a recorded duration: its profiled kernels' time is what findings share
        cap = {**cap, "duration_ns": sum((kernel_times.get(None) or {}).values())}
    kernel_total = {d: b["kernel_ns"] for d, b in budgets.items()}
    # claims: [finding index, device, part key, subject, ns]
    claims: list[list] = []
    for i, f in enumerate(findings):
        part = f.internal.get("part", "kernel")
        if part == "host" or (f.device_id is None and part != "kernel"):
            claims.append([i, None, ("host",), None, float(f.claimed_ns)])
        elif part == "kernel":
            claims.extend(_kernel_claims(i, f, kernel_times, kernel_total, timeline))
        elif part == "idle":
            claims.append([i, f.device_id, ("idle", tuple(sorted(f.internal.get("causes") or ()))), None,
                           float(f.claimed_ns)])
        else:
            claims.append([i, f.device_id, (part,), None, float(f.claimed_ns)])
    _keep_own_kernel_claims(findings, claims)
    _combine_kernel_subjects(claims, kernel_times)
    _cap_parts(claims, budgets, cap, timeline)
    return _findings_per_device(findings, claims, budgets, cap, timeline, finalize)


def _kernel_claims(i: int, f: Finding, kernel_times, kernel_total, timeline: bool) -> list[list]:
    """One claim per evidence row and device; what the evidence rows do not cover is spread by kernel time."""
    out = []
    listed = 0.0
    for subject, ns in f.internal.get("claims") or []:
        if ns <= 0:
            continue
        listed += ns
        out.extend([i, d, ("kernel",), subject, share]
                   for d, share in _spread(ns, kernel_times.get(subject) if subject is not None else None,
                                           f.device_id, kernel_total, timeline))
    rest = float(f.claimed_ns) - listed
    if rest > 0.5:
        out.extend([i, d, ("kernel",), None, share] for d, share in _spread(rest, None, f.device_id, kernel_total,
                                                                             timeline))
    return out


def _keep_own_kernel_claims(findings: list[Finding], claims: list[list]) -> None:
    """Each kernel finding's own claims per device and kernel, spread over devices but not yet combined with other
    findings' or scaled to a budget, as ``internal["device_claims"]`` ({device: [(kernel, ns)]}): what the fix
    alone would take off those kernels, which the what-if replays (engine/finding_fixes.py), where ``impact_ns``
    is the finding's share of a partition."""
    own: dict[int, dict[Device, list]] = defaultdict(lambda: defaultdict(list))
    for i, device, part, subject, ns in claims:
        if part == ("kernel",) and subject is not None:
            own[i][device].append((subject, ns))
    for i, per_device in own.items():
        findings[i].internal["device_claims"] = dict(per_device)


def _spread(ns: float, per_device: dict | None, device: Device, kernel_total: dict, timeline: bool):
    if device is not None or not timeline:
        return [(device, ns)]
    weights = {d: t for d, t in (per_device or {}).items() if d in kernel_total and t > 0}
    if not weights:
        weights = {d: t for d, t in kernel_total.items() if t > 0} or {d: 1.0 for d in kernel_total}
    total = sum(weights.values())
    return [(d, ns * w / total) for d, w in weights.items()] if total > 0 else [(None, ns)]


def _combine_kernel_subjects(claims: list[list], kernel_times) -> None:
    """Several findings on one kernel on one device: 1 - prod(1 - s) of its time, shared in proportion."""
    groups: dict[tuple, list[list]] = defaultdict(list)
    for c in claims:
        if c[2] == ("kernel",) and c[3] is not None:
            groups[(c[1], c[3])].append(c)
    for (device, subject), members in groups.items():
        claimed = sum(c[4] for c in members)
        if claimed <= 0:
            continue
        base = (kernel_times.get(subject) or {}).get(device, 0.0)
        base = max(base, max(c[4] for c in members))
        remaining = 1.0
        for c in members:
            remaining *= 1.0 - min(c[4] / base, 1.0)
        combined = base * (1.0 - remaining)
        if combined < claimed:
            for c in members:
                c[4] *= combined / claimed


def _cap_parts(claims: list[list], budgets: dict, cap: dict, timeline: bool) -> None:
    """Scale each (device, part) group of claims down to the time that part holds."""
    groups: dict[tuple, list[list]] = defaultdict(list)
    for c in claims:
        groups[(c[1], c[2])].append(c)
    duration = float(cap.get("duration_ns") or 0)
    for (device, part), members in groups.items():
        budget = _budget(device, part, budgets, duration, timeline)
        _scale(members, budget)
    # idle claims of different causes may still overlap when a user's rule names causes another rule names
    for device, b in budgets.items():
        _scale([c for c in claims if c[1] == device and c[2][0] == "idle"], float(b["idle_ns"]))


def _budget(device: Device, part: tuple, budgets: dict, duration: float, timeline: bool) -> float:
    if part == ("host",) or device not in budgets:
        return duration  # host-wide, or a Nsight Compute report alone (its duration is the profiled kernel time)
    b = budgets[device]
    if part[0] == "idle":
        causes = part[1] or tuple(b["idle_by_cause"])
        return float(sum(b["idle_by_cause"].get(c, 0) for c in causes))
    return float(b.get(f"{part[0]}_ns", 0))


def _scale(members: list[list], budget: float) -> None:
    total = sum(c[4] for c in members)
    if total > budget and total > 0:
        for c in members:
            c[4] *= max(budget, 0.0) / total


def _findings_per_device(findings: list[Finding], claims: list[list], budgets: dict, cap: dict, timeline: bool,
                         finalize) -> list[Finding]:
    per: dict[int, dict[Device, float]] = defaultdict(lambda: defaultdict(float))
    for i, device, _part, _subject, ns in claims:
        per[i][device] += ns
    duration = float(cap.get("duration_ns") or 0)
    basis_alone = "capture" if cap.get("tool") != "ncu" else "profiled kernel time"
    out = []
    for i, f in enumerate(findings):
        shares = per.get(i) or {f.device_id: 0.0}
        ordered = sorted(shares.items(), key=lambda kv: -kv[1])
        for n, (device, ns) in enumerate(ordered):
            g = f if n == 0 else _clone(f)
            g.device_id = device
            # floor (rounding up could claim a nanosecond past a budget), forgiving float error in the scaling
            impact = int(math.floor(ns + 1e-6))
            if device is not None and device in budgets:
                window = budgets[device]["window_end_ns"] - budgets[device]["window_start_ns"]
                g.impact_basis = "analysis window"
            else:
                window = duration
                g.impact_basis = basis_alone
            pct = round(100.0 * impact / window, 3) if window > 0 else 0.0
            finalize(g, impact, pct)
            out.append(g)
    return out


def _clone(f: Finding) -> Finding:
    internal = f.internal
    f.internal = {}
    try:
        g = copy.deepcopy(f)
    finally:
        f.internal = internal
    g.internal = internal
    return g
