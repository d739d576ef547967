"""Where in the program each finding's impact lies: its share per NVTX path (``findings[].regions``).

Fed the findings after their impacts are settled (nsight_advisor.engine.impact). A finding's operations are:

- kernel part: the launches, within the analysis window on the finding's device, of the kernels its evidence rows
  name; each row's claim spreads over the paths its kernel's launches were made from, by their time;
- copy and memset parts: the device's copies (or sets) in the window, by their time;
- idle part: the device's idle gaps (gpu_idle_gaps) of the finding's causes, at least as long as the rule's
  ``min_gap_ns`` when it has one, by their length; a gap lies in the innermost range open at its midpoint on the
  thread that named its cause, else on the thread that launched the operation ending it.

An operation's path is its innermost push/pop range at launch (nvtx_op_paths, views/33_nvtx_projection.sql) in
one domain: of the domains open around it, the one whose ranges name the capture's operations most finely (the
most distinct paths, then the most operations), so that an NCCL kernel launched inside PyTorch's operator ranges
is placed in those, and a kernel inside both a profiler step and a record_function range in the latter. Each finding gets the :data:`TOP_PATHS` paths with the
largest shares, then ``(other)`` for the rest and ``(no NVTX range)`` for operations launched outside every range,
so that the shares sum to 100. A finding whose operations cannot be told (host-wide findings, a kernel finding
naming no kernel), or a capture without NVTX ranges (or with over :data:`MAX_RANGES` of them, or nested deeper than
:data:`MAX_DEPTH`), gets an empty list.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any, Iterable

from nsight_advisor.common import sql_params

if TYPE_CHECKING:
    import duckdb

    from nsight_advisor.engine.model import Finding

#: Captures with more push/pop ranges than this get no regions: nesting millions of ranges costs minutes
#: (docs/performance.md), and an export that large defers its NVTX table on the cold path anyway
#: (nsight_advisor.ingest.nsys.export.DEFER_MIN_ROWS).
MAX_RANGES = 250_000
#: Captures whose push/pop ranges nest deeper than this get no regions: a path holds every range open around an
#: operation, so its cost grows with the square of the depth (20,000 nested ranges, an unbalanced push in a loop,
#: ran DuckDB out of memory); programs nest a few dozen levels.
MAX_DEPTH = 64
#: Paths listed per finding before the rest is summed as OTHER.
TOP_PATHS = 5
#: Paths listed in a capture's breakdown.
BREAKDOWN_PATHS = 15
OTHER = "(other)"
NO_RANGE = "(no NVTX range)"
_TEMP_TABLES = ("_na_op_region", "_na_op_paths", "_na_domain_rank", "nvtx_open_paths", "nvtx_range_paths")


def attach_regions(con: duckdb.DuckDBPyConnection, captures: Iterable[dict],
                   findings: list[Finding]) -> dict[int, list[dict[str, Any]]]:
    """Set ``regions`` on every finding (see the module docstring); returns, per capture with NVTX ranges, its
    GPU time by path (:func:`_breakdown`). The paths of every capture are placed at once (a handful of queries
    whatever the number of ranks), then each finding's weights are read per capture."""
    by_capture: dict[int, list[Finding]] = defaultdict(list)
    for f in findings:
        by_capture[f.capture_id].append(f)
    cids = _with_ranges(con, [int(cap["capture_id"]) for cap in captures])
    if not cids:
        return {}
    _prepare_op_regions(con, cids)
    try:
        breakdowns = _breakdowns(con, cids)
        kernel_paths = _KernelPaths(con, cids)
        gap_weights = _all_gap_weights(con, [f for cid in cids for f in by_capture.get(cid) or []
                                             if f.internal.get("part") == "idle" and f.device_id is not None])
        for cid in cids:
            for f in by_capture.get(cid) or []:
                weights = _weights(con, cid, f, kernel_paths, gap_weights)
                f.regions = _shares(weights, f.impact_ns) if weights else []
    finally:
        for table in _TEMP_TABLES:
            con.execute(f"drop table if exists temp.main.{table}")
    return breakdowns


def _breakdowns(con, cids: list[int]) -> dict[int, list[dict[str, Any]]]:
    """The report's ``captures[].nvtx_paths``: GPU time of the operations in the analysis window by the path they
    were launched from (their innermost range: time launched from a nested range counts there, not in the range
    around it), the :data:`BREAKDOWN_PATHS` largest, then (other) and (no NVTX range); shares of all of it."""
    per: dict[int, list[tuple]] = defaultdict(list)
    for cid, *row in sql_params.execute(con, """
        select o.capture_id, coalesce(r.path, $none), sum(o.duration_ns), count(*)
        from gpu_ops o
        join analysis_window w on w.capture_id = o.capture_id
        left join _na_op_region r
            on r.capture_id = o.capture_id and r.device_id = o.device_id and r.op = o.op and r.pid = o.pid
            and r.correlation_id = o.correlation_id and r.start_ns = o.start_ns
        where o.capture_id in (select unnest($c::integer[])) and o.end_ns > w.start_ns and o.start_ns < w.end_ns
        group by all""", {"c": cids, "none": NO_RANGE}).fetchall():
        per[cid].append(tuple(row))
    return {cid: _breakdown(per.get(cid, [])) for cid in cids}


def _breakdown(rows: list[tuple]) -> list[dict[str, Any]]:
    """One capture's breakdown from its (path, ns, operations) rows."""
    total = sum(float(ns or 0) for _, ns, _ in rows)
    if total <= 0:
        return []
    named = sorted(((p, float(ns or 0), n) for p, ns, n in rows if p != NO_RANGE), key=lambda r: (-r[1], r[0]))
    listed = named[:BREAKDOWN_PATHS]
    rest = named[BREAKDOWN_PATHS:]
    if rest:
        listed.append((OTHER, sum(r[1] for r in rest), sum(r[2] for r in rest)))
    listed.extend((p, float(ns or 0), n) for p, ns, n in rows if p == NO_RANGE)
    return [{"path": p, "gpu_ns": int(ns), "ops": int(n), "share_pct": round(100.0 * ns / total, 3)}
            for p, ns, n in listed]


def _with_ranges(con, cids: list[int]) -> list[int]:
    """The captures, of ``cids``, with push/pop ranges to place operations in, few and shallow enough to do it on
    every analysis; in the order given."""
    if not cids:
        return []
    rows = sql_params.execute(con, """
        select capture_id, count(*), coalesce(max(depth), 0) from nvtx_ranges
        where capture_id in (select unnest($c::integer[])) and event_type = 'push_pop' and tid is not null
          and end_ns > start_ns
        group by capture_id""", {"c": cids}).fetchall()
    ok = {cid for cid, count, depth in rows if 0 < count <= MAX_RANGES and depth <= MAX_DEPTH}
    return [cid for cid in cids if cid in ok]


def _prepare_op_regions(con, cids: list[int]) -> None:
    """Temp tables of the captures: nvtx_range_paths and nvtx_open_paths (shadowing the views of those names, so
    that the ranges are nested once, not once per view that reads them), _na_op_paths (nvtx_op_paths),
    _na_domain_rank (each capture's domains in the order of preference of the module docstring) and _na_op_region
    (each operation launched within a range, with its one path)."""
    from nsight_advisor.analysis.accounting import stored

    sql_params.execute(con, f"""
        create or replace temp table nvtx_range_paths as
        select * from {stored(con, 'nvtx_range_paths')} where capture_id in (select unnest($c::integer[]))""",
                       {"c": cids})
    con.execute(f"create or replace temp table nvtx_open_paths as select * from {stored(con, 'nvtx_open_paths')}")
    sql_params.execute(con, f"""
        create or replace temp table _na_op_paths as
        select * from {stored(con, 'nvtx_op_paths')} where capture_id in (select unnest($c::integer[]))""",
                       {"c": cids})
    con.execute("""
        create or replace temp table _na_domain_rank as
        select capture_id, domain,
               row_number() over (partition by capture_id order by count(distinct path) desc, count(*) desc, domain)
                   as rank
        from _na_op_paths group by capture_id, domain""")
    con.execute("""
        create or replace temp table _na_op_region as
        select o.capture_id, o.device_id, o.pid, o.tid, o.correlation_id, o.op, o.start_ns, o.end_ns, o.duration_ns,
               arg_min(case when o.domain = 'Default' then o.path else o.domain || ':' || o.path end, r.rank)
                   as path
        from _na_op_paths o join _na_domain_rank r using (capture_id, domain)
        group by all""")


def _weights(con, cid: int, f: Finding, kernel_paths: "_KernelPaths",
             gap_weights: dict[int, dict[str, float]]) -> dict[str, float]:
    part = f.internal.get("part", "kernel")
    if f.device_id is None or part == "host":
        return {}
    if part == "kernel":
        return _kernel_weights(kernel_paths, cid, f)
    if part in ("copy", "memset"):
        return _op_weights(con, cid, f.device_id, "memcpy" if part == "copy" else "memset")
    if part == "idle":
        return gap_weights.get(id(f), {})
    return {}


class _KernelPaths:
    """The captures' kernel time in the analysis window by capture, device, name, short name and path, asked once
    for all kernel findings (one query per finding was most of the regions step on many ranks)."""

    def __init__(self, con, cids: list[int]) -> None:
        self.con, self.cids = con, cids
        self._rows: dict[tuple[int, int], list[tuple]] | None = None

    def rows(self, cid: int, device_id: int) -> list[tuple]:
        """(name, short_name, path, ns) of the capture's kernels on the device."""
        if self._rows is None:
            self._rows = defaultdict(list)
            for capture, device, *row in sql_params.execute(self.con, """
                select k.capture_id, k.device_id, k.name, k.short_name, coalesce(r.path, $none), sum(k.duration_ns)
                from kernels k
                join analysis_window w on w.capture_id = k.capture_id
                left join _na_op_region r
                    on r.capture_id = k.capture_id and r.device_id = k.device_id and r.op = 'kernel'
                    and r.pid = k.pid and r.correlation_id = k.correlation_id and r.start_ns = k.start_ns
                where k.capture_id in (select unnest($c::integer[])) and k.end_ns > w.start_ns
                  and k.start_ns < w.end_ns
                group by all""", {"c": self.cids, "none": NO_RANGE}).fetchall():
                self._rows[(capture, device)].append(tuple(row))
        return self._rows.get((cid, device_id), [])


def _kernel_weights(kernel_paths: _KernelPaths, cid: int, f: Finding) -> dict[str, float]:
    claims: dict[str, float] = defaultdict(float)
    for subject, ns in f.internal.get("claims") or []:
        if isinstance(subject, str) and ns > 0:
            claims[subject] += ns
    if not claims:
        return {}
    rows = [r for r in kernel_paths.rows(cid, f.device_id) if r[0] in claims or r[1] in claims]
    per_subject: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for name, short, path, ns in rows:
        subject = name if name in claims else short
        per_subject[subject][path] += float(ns or 0)
    out: dict[str, float] = defaultdict(float)
    for subject, paths in per_subject.items():
        total = sum(paths.values())
        for path, ns in paths.items():
            if total > 0:
                out[path] += claims[subject] * ns / total
    return out


def _op_weights(con, cid: int, device: int, op: str) -> dict[str, float]:
    rows = sql_params.execute(con, """
        with w as (select start_ns, end_ns from analysis_window where capture_id = $c)
        select coalesce(r.path, $none), sum(o.duration_ns)
        from gpu_ops o
        cross join w
        left join _na_op_region r
            on r.capture_id = o.capture_id and r.device_id = o.device_id and r.op = o.op and r.pid = o.pid
            and r.correlation_id = o.correlation_id and r.start_ns = o.start_ns
        where o.capture_id = $c and o.device_id = $d and o.op = $op and o.end_ns > w.start_ns and o.start_ns < w.end_ns
        group by all""", {"c": cid, "d": device, "op": op, "none": NO_RANGE}).fetchall()
    return {path: float(ns or 0) for path, ns in rows}


def _all_gap_weights(con, findings: list[Finding]) -> dict[int, dict[str, float]]:
    """Each idle finding's gap time by path, keyed by ``id(finding)``: its device's gaps of its causes (at least
    its rule's ``min_gap_ns`` long), each in the innermost range open at its midpoint on the thread that named its
    cause, else on the thread that launched the operation ending it. One query for all the findings (one each
    was a fifth of the regions step of the 8 DLRM ranks)."""
    if not findings:
        return {}
    keys, cids, devices, min_gaps, causes = [], [], [], [], []
    for k, f in enumerate(findings):
        rule = f.internal.get("rule")
        keys.append(k)
        cids.append(int(f.capture_id))
        devices.append(int(f.device_id))
        min_gaps.append(int((rule.values().get("min_gap_ns") if rule is not None else None) or 0))
        causes.append([str(c) for c in f.internal.get("causes") or ()])
    rows = sql_params.execute(con, """
        with f as (
            select unnest($k::integer[]) as k, unnest($c::integer[]) as capture_id, unnest($d::integer[]) as device_id,
                   unnest($min_gap::bigint[]) as min_gap, unnest($causes::varchar[][]) as causes
        ),
        ends as (
            select capture_id, device_id, start_ns, any_value(pid) as pid, any_value(tid) as tid
            from _na_op_region
            where capture_id in (select capture_id from f)
            group by all
        ),
        gaps as (
            select f.k, g.capture_id, g.start_ns, g.end_ns, g.duration_ns, (g.start_ns + g.end_ns) // 2 as mid_ns,
                   coalesce(g.host_pid, n.pid) as pid, coalesce(g.host_tid, n.tid) as tid
            from f
            join gpu_idle_gaps g
                on g.capture_id = f.capture_id and g.device_id = f.device_id and g.duration_ns >= f.min_gap
               and (len(f.causes) = 0 or list_contains(f.causes, g.cause))
            left join ends n on n.capture_id = g.capture_id and n.device_id = g.device_id and n.start_ns = g.end_ns
        ),
        placed as (
            select g.k, g.start_ns, o.domain, o.path
            from gaps g
            join (select distinct capture_id, pid, tid, domain from temp.main.nvtx_open_paths) td
                on td.capture_id = g.capture_id and td.pid = g.pid and td.tid = g.tid
            asof join temp.main.nvtx_open_paths o
                on o.capture_id = g.capture_id and o.pid = g.pid and o.tid = g.tid and o.domain = td.domain
               and g.mid_ns >= o.t_ns
            where o.path is not null
        ),
        chosen as (
            select p.k, p.start_ns,
                   arg_min(case when p.domain = 'Default' then p.path else p.domain || ':' || p.path end,
                           coalesce(d.rank, 1000000)) as path
            from placed p
            join f using (k)
            left join _na_domain_rank d on d.capture_id = f.capture_id and d.domain = p.domain
            group by p.k, p.start_ns
        )
        select g.k, coalesce(c.path, $none), sum(g.duration_ns)
        from gaps g left join chosen c using (k, start_ns)
        group by all""", {"k": keys, "c": cids, "d": devices, "min_gap": min_gaps, "causes": causes,
                          "none": NO_RANGE}).fetchall()
    out: dict[int, dict[str, float]] = {}
    for k, path, ns in rows:
        out.setdefault(id(findings[k]), {})[path] = float(ns or 0)
    return out


def _shares(weights: dict[str, float], impact_ns: int) -> list[dict[str, Any]]:
    """The top paths by weight, then (other) and (no NVTX range), as shares of 100 and of ``impact_ns``."""
    total = sum(w for w in weights.values() if w > 0)
    if total <= 0:
        return []
    named = sorted(((p, w) for p, w in weights.items() if w > 0 and p != NO_RANGE), key=lambda kv: (-kv[1], kv[0]))
    listed = named[:TOP_PATHS]
    rest = sum(w for _, w in named[TOP_PATHS:])
    if rest > 0:
        listed.append((OTHER, rest))
    if weights.get(NO_RANGE, 0) > 0:
        listed.append((NO_RANGE, weights[NO_RANGE]))
    return [{"path": p, "share_pct": round(100.0 * w / total, 3), "impact_ns": int(round(impact_ns * w / total))}
            for p, w in listed]
