"""The time accounting of one analysis: its window, and each device's time partition over it.

The partition itself is SQL (the analysis views in ``schema/views/30_*`` to ``32_*``); this module sets the
analysis window when the user chose one, materializes the views that every rule would otherwise recompute, and
reads the partition into the report's ``accounting`` objects. docs/impact.md describes the model.
"""

from __future__ import annotations

import re
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

from nsight_advisor.common import sql_params
from nsight_advisor.common.errors import ConfigError

#: Parts of a device's time partition a finding's impact can come out of (docs/impact.md); host = host-wide.
IMPACT_PARTS = ("kernel", "comm", "copy", "memset", "idle", "host")
#: Why a GPU idled: the closed vocabulary of gpu_idle_gaps.cause (schema/views/32_idle_gaps.sql).
IDLE_CAUSES = ("launch", "dependency", "startup", "jit", "allocation", "host-copy", "sync", "host", "unknown")
#: Copy directions: the closed vocabulary of copy_exposure.direction (schema/views/31_time_partition.sql).
COPY_DIRECTIONS = ("h2d", "d2h", "other")
#: What a comm-part rule claims of its communication: its exposed transfer (no compute beside it) or its waits for
#: a late rank.
COMM_CLAIMS = ("exposed", "wait")
#: What a host-part rule claims of the host's time: the calls of asynchronous copies from or to pageable memory,
#: which block while the driver stages them.
HOST_CLAIMS = ("pageable-copies",)

if TYPE_CHECKING:
    import duckdb

#: Views computed once per analysis into temp tables of the same name, which shadow the stored views for every
#: rule and the summary (in this order: a later one reads the earlier ones): the sweep over every GPU operation,
#: the gap classification and the deduplicated calls are each read by several rules, the collectives matched
#: across ranks by the cross-rank rules of every capture of a job, and the kernels' sums per name by the summary,
#: the impacts and the what-if's kernel fixes.
MATERIALIZED_VIEWS = ("analysis_window", "cuda_api_calls", "gpu_time_segments", "gpu_idle_gaps", "gpu_time_partition",
                      "copy_exposure", "comm_ranks", "collective_ops", "collective_clock_offsets", "collective_ranks",
                      "kernel_totals")

#: Stores with at most this many kernel rows get ``kernels`` (the rows joined with their three names) as a temp
#: table too, before the views above: about twenty rules, the partition and the summary read it, and DuckDB
#: plans and runs its three name joins again in each. Copied once, it took the 8 DLRM ranks' rules from 0.58 to
#: 0.48 s (docs/performance.md, "Thirteenth pass"). Larger stores keep the view: each copied row repeats its
#: names (a million kernels would hold a few hundred MB of them).
SMALL_KERNEL_ROWS = 100_000

#: Views computed into temp tables only when a rule of the analysis reads them (after MATERIALIZED_VIEWS, which
#: they read): host_activity joins every CUDA call, OS runtime call and operator with the idle gaps, and both
#: gpu-idle-gap and startup-cost read it.
ON_DEMAND_VIEWS = ("host_activity",)

_SECONDS = re.compile(r"^\s*([0-9]*\.?[0-9]+)?\s*:\s*([0-9]*\.?[0-9]+)?\s*$")


@dataclass(frozen=True)
class WindowSpec:
    """What ``--window`` asked for: seconds from the capture's start (either end open), or an NVTX range name."""

    start_s: float | None = None
    end_s: float | None = None
    nvtx_range: str | None = None
    whole: bool = False

    def describe(self) -> str:
        if self.whole:
            return "first to last GPU operation (--window all)"
        if self.nvtx_range is not None:
            return f"NVTX range '{self.nvtx_range}' (--window)"
        return f"{_fmt_s(self.start_s, '0')} s to {_fmt_s(self.end_s, 'end')} s of the capture (--window)"


def _fmt_s(value: float | None, default: str) -> str:
    return default if value is None else f"{value:g}"


def parse_window(text: str | None) -> WindowSpec | None:
    """``START:END`` in seconds from the capture's start (either may be empty), ``all`` for the whole capture (no
    steady-state window), else an NVTX range name."""
    if text is None or not text.strip():
        return None
    if text.strip() == "all":
        return WindowSpec(whole=True)
    match = _SECONDS.match(text)
    if match:
        start = float(match.group(1)) if match.group(1) else None
        end = float(match.group(2)) if match.group(2) else None
        if start is not None and end is not None and end <= start:
            raise ConfigError(f"--window {text!r}: the end must come after the start (seconds from the capture's start)")
        return WindowSpec(start, end)
    return WindowSpec(nvtx_range=text.strip())


def prepare(con: duckdb.DuckDBPyConnection, capture_ids: Sequence[int],
            window: WindowSpec | None = None) -> dict[int, Any]:
    """Set the analysis window and materialize :data:`MATERIALIZED_VIEWS` as temp tables; returns each capture's
    :class:`~nsight_advisor.analysis.iterations.Iterations` (or None).

    Without ``window``, a capture whose iterations were found is judged from its first steady iteration
    (nsight_advisor.analysis.steady); ``--window all`` (``WindowSpec(whole=True)``) keeps the default window.

    A window that selects nothing in a capture (no such NVTX range) leaves that capture on its default window:
    the report's accounting names the window each capture got.
    """
    from nsight_advisor.analysis.iterations import find_all_iterations
    from nsight_advisor.analysis.steady import apply_steady_window

    chosen = window is not None and not window.whole
    if chosen:
        _set_window(con, capture_ids, window)
    iterations: dict[int, Any] = {}
    # the few combinations of kernel names the rows use, once: kernels and kernel_classes join their rows with them
    # (views/05_kernels.sql), in every rule that reads either
    con.execute(f"create or replace temp table kernel_name_sets as select * from {stored(con, 'kernel_name_sets')}")
    if _few_kernels(con):
        con.execute(f"create or replace temp table kernels as select * from {stored(con, 'kernels')}")
    for view in MATERIALIZED_VIEWS:
        if view == "analysis_window":
            if not chosen:
                con.execute(f"create or replace temp table {view} as select * from {stored(con, view)}")
                if window is not None:
                    con.execute(f"update analysis_window set source = {sql_params.literal(window.describe())}")
            # the iterations come from the whole default window (or the user's); the rest of the views from the
            # steady state when no window was given
            iterations = find_all_iterations(con, capture_ids)
            if window is None:
                apply_steady_window(con, iterations)
            continue
        if view == "cuda_api_calls" and not _has_nested_calls(con, capture_ids):
            # nothing to deduplicate (the usual case): the calls with their names and class through one join with
            # the few names, classified once, instead of a copy of every call
            con.execute("""
                create or replace temp table _na_api_classes as
                select capture_id, name_id, name, base_name, na_api_class(base_name) as api_class from api_names""")
            con.execute("""
                create or replace temp view cuda_api_calls as
                select a.capture_id, a.pid, a.tid, a.correlation_id, c.name, c.base_name, a.kind, a.start_ns,
                       a.end_ns, a.duration_ns, a.return_value, coalesce(c.api_class, 'other') as api_class
                from api_call_rows a
                left join _na_api_classes c on c.capture_id = a.capture_id and c.name_id = a.name_id""")
            continue
        con.execute(f"create or replace temp table {view} as select * from {stored(con, view)}")
    return iterations


def materialize_read(con: duckdb.DuckDBPyConnection, queries: Sequence[str]) -> list[str]:
    """Materialize each of :data:`ON_DEMAND_VIEWS` that one of ``queries`` names (after :func:`prepare`); returns
    the views materialized."""
    read = views_read(queries)
    for view in read:
        con.execute(f"create or replace temp table {view} as select * from {stored(con, view)}")
    return read


def views_read(queries: Sequence[str]) -> list[str]:
    """Those of :data:`ON_DEMAND_VIEWS` that one of ``queries`` names: what :func:`materialize_read` makes."""
    return [v for v in ON_DEMAND_VIEWS if any(re.search(rf"\b{v}\b", q, flags=re.IGNORECASE) for q in queries)]


def _few_kernels(con) -> bool:
    """Whether the store holds at most :data:`SMALL_KERNEL_ROWS` kernel rows (of all its captures: the view is
    copied whole, as the analysis's other temp tables are)."""
    return con.execute("select count(*) from kernel_rows").fetchone()[0] <= SMALL_KERNEL_ROWS


def _has_nested_calls(con, capture_ids: Sequence[int]) -> bool:
    """Whether any of the captures recorded a call twice under one correlation id (see cuda_api_calls)."""
    ids = ", ".join(str(int(i)) for i in capture_ids) or "null"
    return con.execute(f"""
        select exists (
            select 1 from api_call_rows
            where capture_id in ({ids}) and correlation_id is not null and correlation_id <> 0
            group by capture_id, pid, tid, correlation_id having count(*) > 1)""").fetchone()[0]


def stored(con, view: str) -> str:
    """The store's own view ``view``, fully qualified: ``main.view`` would find a temp table of that name first."""
    database = _DATABASES.get(con)
    if database is None:  # asked once per connection (an analysis asks for about 20 views)
        database = _DATABASES[con] = con.execute("select current_database()").fetchone()[0]
    return '"' + database.replace('"', '""') + '".main.' + view


#: Each open connection's database name (a connection cannot change its default database without USE, which the
#: analysis never runs).
_DATABASES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _set_window(con, capture_ids: Sequence[int], window: WindowSpec) -> None:
    ids = ", ".join(str(int(i)) for i in capture_ids) or "null"
    if window.nvtx_range is not None:
        # a name matches itself and the numbered instances PyTorch writes (ProfilerStep matches ProfilerStep#6)
        name = sql_params.literal(window.nvtx_range)
        chosen = f"""
            select capture_id, min(start_ns) as start_ns, max(end_ns) as end_ns,
                   {sql_params.literal(window.describe())} as source
            from nvtx_ranges
            where (text = {name} or (starts_with(text, {name} || '#')
                                     and regexp_full_match(substr(text, length({name}) + 2), '[0-9]+')))
              and capture_id in ({ids}) and end_ns > start_ns
            group by capture_id"""
        if not con.execute(f"select exists ({chosen})").fetchone()[0]:
            raise ConfigError(_no_such_range(con, ids, window.nvtx_range))
    else:
        start = "c.start_ns" if window.start_s is None else f"c.start_ns + {int(round(window.start_s * 1e9))}"
        end = "c.end_ns" if window.end_s is None else f"least(c.end_ns, c.start_ns + {int(round(window.end_s * 1e9))})"
        chosen = f"""
            select c.capture_id, {start} as start_ns, {end} as end_ns,
                   {sql_params.literal(window.describe())} as source
            from captures c where c.capture_id in ({ids})"""
    con.execute(f"""
        create or replace temp table analysis_window as
        with chosen as ({chosen}),
        fallback as (select * from {stored(con, 'analysis_window')} where capture_id not in (select capture_id from chosen))
        select capture_id, start_ns, end_ns, end_ns - start_ns as duration_ns, source from chosen
        where end_ns > start_ns
        union all
        select capture_id, start_ns, end_ns, duration_ns, source from fallback""")


def _no_such_range(con, ids: str, name: str) -> str:
    """The one line for a --window range name that no capture holds, with the most frequent names it does hold."""
    common = [r[0] for r in con.execute(f"""
        select regexp_replace(text, '#[0-9]+$', '') as family, count(*) as n from nvtx_ranges
        where capture_id in ({ids}) and text is not null group by 1 order by n desc, family limit 5""").fetchall()]
    shown = ", ".join(repr(c[:60]) for c in common) if common else "none: the captures hold no NVTX ranges"
    return (f"--window {name[:80]!r}: no NVTX range of that name (or numbered '{name[:80]}#N') in the captures; "
            f"names they hold: {shown}; or give seconds (START:END) or 'all'")


def read_accounting(con: duckdb.DuckDBPyConnection, capture_ids: Sequence[int]) -> dict[int, list[dict[str, Any]]]:
    """Per capture, one object per device: the window, kernel/comm/copy/memset/idle time and idle time by cause.

    The five parts add up to the window exactly (a test holds every real capture to it); ``before_window_ns`` is
    the time from the capture's first recorded event to the window's start (one-time startup, not judged).
    """
    ids = [int(i) for i in capture_ids]
    out: dict[int, list[dict[str, Any]]] = {i: [] for i in ids}
    if not ids:
        return out
    windows = {r[0]: r[1:] for r in sql_params.execute(con, """
        select w.capture_id, w.start_ns, w.end_ns, w.source, greatest(w.start_ns - c.start_ns, 0)
        from analysis_window w join captures c using (capture_id)
        where w.capture_id in (select unnest($ids::integer[]))""", {"ids": ids}).fetchall()}
    devices: dict[tuple[int, Any], dict[str, Any]] = {}
    for cid, device, part, cause, ns in sql_params.execute(con, """
            select capture_id, device_id, part, cause, duration_ns from gpu_time_partition
            where capture_id in (select unnest($ids::integer[]))
            order by capture_id, device_id nulls last, part, cause""", {"ids": ids}).fetchall():
        if cid not in windows:
            continue
        start, end, source, before = windows[cid]
        entry = devices.setdefault((cid, device), {
            "device_id": None if device is None else int(device),
            "window_start_ns": int(start), "window_end_ns": int(end), "window_source": source,
            "before_window_ns": int(before),
            "kernel_ns": 0, "comm_ns": 0, "copy_ns": 0, "memset_ns": 0, "idle_ns": 0,
            "idle_by_cause": {c: 0 for c in IDLE_CAUSES},
        })
        ns = int(ns or 0)
        entry[f"{part}_ns"] += ns
        if part == "idle":
            entry["idle_by_cause"][cause or "unknown"] += ns
    for (cid, _device), entry in devices.items():
        out[cid].append(entry)
    return out


def add_idle_claims(accounts: dict[int, list[dict[str, Any]]], findings: Sequence[Any]) -> None:
    """Set ``idle_claimed_ns`` on every accounting row: the idle time the settled findings of that device claim
    (rules whose ``impact_part`` is idle; the reconciliation keeps their sum within ``idle_ns``)."""
    claimed: dict[tuple[int, Any], int] = {}
    for f in findings:
        rule = f.internal.get("rule") if isinstance(getattr(f, "internal", None), dict) else None
        if rule is None or rule.finding.impact_part != "idle" or f.device_id is None:
            continue
        key = (f.capture_id, f.device_id)
        claimed[key] = claimed.get(key, 0) + int(f.impact_ns or 0)
    for cid, rows in accounts.items():
        for entry in rows:
            entry["idle_claimed_ns"] = min(claimed.get((cid, entry["device_id"]), 0), entry["idle_ns"])
