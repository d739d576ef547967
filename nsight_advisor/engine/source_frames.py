"""The source functions behind host-side findings (``findings[].source_frames``), from the capture's backtraces.

A finding whose evidence rows name a CUDA API call and the process (and thread) that made it (``api`` or
``host_activity``, ``pid``, ``tid``: sync-stall, sync-memcpy, gpu-idle-gap) gets the backtraces recorded inside
those calls on that thread: the OS runtime calls and CPU samples that fall within one of the calls, and the calls'
own CUDA backtraces (host_calls, callchain_frames). Each backtrace counts once for its innermost *program* frame:
the first frame, going outwards, that is not the CUDA runtime or driver, the C library, the profiler's injection
or an unresolved address (the SQL macro ``na_program_frame`` in schema/views/35_host_activity.sql, the one
definition, which host_samples uses too; :func:`is_program_frame` asks it). The :data:`TOP_FRAMES` most frequent are kept, most frequent
first. A capture without backtraces gives every finding an empty list; its ``capture_missing`` row says which
``nsys profile`` option records them.
"""

from __future__ import annotations

import functools
import re
from collections import Counter, defaultdict
from typing import TYPE_CHECKING, Iterable

from nsight_advisor.common import sql_params
from nsight_advisor.schema.views import view_sql_files

if TYPE_CHECKING:
    import duckdb

    from nsight_advisor.engine.model import Finding

#: Frames listed per finding.
TOP_FRAMES = 5
#: Evidence columns that name the API call a finding concerns, in the order looked for.
API_COLUMNS = ("api", "host_activity")


def is_program_frame(symbol: str | None, module: str | None, unresolved: bool | None) -> bool:
    """True for a frame of the program itself, by the SQL macro ``na_program_frame`` (module docstring)."""
    return bool(_macro_connection().execute("select na_program_frame(?, ?, ?)",
                                            [symbol, module, unresolved]).fetchone()[0])


@functools.lru_cache(maxsize=1)
def _macro_connection() -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB holding the view files' na_program_frame macro (the store has it too)."""
    import duckdb

    con = duckdb.connect()
    for _name, sql in view_sql_files():
        for statement in con.extract_statements(sql):
            if re.search(r"create\s+or\s+replace\s+macro\s+na_program_frame\b", statement.query, re.IGNORECASE):
                con.execute(statement)
                return con
    raise LookupError("na_program_frame: no such macro in nsight_advisor/schema/views")


def module_name(module: str | None) -> str:
    """The file name of a frame's module (its directory says where the build lay, not what it is)."""
    return (module or "").rsplit("/", 1)[-1]


def attach_source_frames(con: duckdb.DuckDBPyConnection, findings: Iterable[Finding]) -> None:
    """Set ``source_frames`` on every finding whose evidence names an API call and a thread (module docstring)."""
    by_capture: dict[int, list[Finding]] = defaultdict(list)
    for f in findings:
        f.source_frames = []
        if _keys(f):
            by_capture[f.capture_id].append(f)
    for cid, found in by_capture.items():
        has = sql_params.execute(con, "select count(*) from host_calls where capture_id = ?", [cid]).fetchone()[0]
        if not has:
            continue
        keys = [(i, *k) for i, f in enumerate(found) for k in _keys(f)]
        hits = _chains_inside(con, cid, keys)
        frames = _program_frames(con, cid, {(s, c) for _, s, c, _ in hits})
        counts: dict[int, Counter] = defaultdict(Counter)
        for i, source, chain, n in hits:
            frame = frames.get((source, chain))
            if frame is not None:
                counts[i][frame] += n
        for i, f in enumerate(found):
            f.source_frames = [{"symbol": sym, "module": mod, "count": n}
                               for (sym, mod), n in sorted(counts[i].items(), key=lambda kv: (-kv[1], kv[0]))
                               [:TOP_FRAMES]]


def _keys(f: Finding) -> list[tuple[str, int, int | None]]:
    """(api, pid, tid or None) of the evidence rows that name an API call and its process."""
    keys = set()
    for row in f.evidence:
        api = next((row[c] for c in API_COLUMNS if isinstance(row.get(c), str)), None)
        pid = row.get("pid")
        if api and isinstance(pid, int):
            tid = row.get("tid")
            keys.add((api, pid, tid if isinstance(tid, int) else None))
    return sorted(keys, key=lambda k: (k[0], k[1], -1 if k[2] is None else k[2]))


def _chains_inside(con: duckdb.DuckDBPyConnection, cid: int, keys: list[tuple]) -> list[tuple]:
    """(finding index, source, callchain id, backtraces) of the backtraces recorded inside the keyed API calls."""
    con.execute("create or replace temp table _na_frame_keys (fi integer, api varchar, pid bigint, tid bigint)")
    try:
        # one statement with lists, not executemany: DuckDB's executemany imports pandas (0.25 s on a cold run)
        sql_params.execute(con, """
            insert into _na_frame_keys
            select unnest($fi::integer[]), unnest($api::varchar[]), unnest($pid::bigint[]), unnest($tid::bigint[])""",
                           {"fi": [k[0] for k in keys], "api": [k[1] for k in keys], "pid": [k[2] for k in keys],
                            "tid": [k[3] for k in keys]})
        # Calls of one API on one thread do not overlap: the last one starting at or before a backtrace is the
        # only one that can hold it (an ASOF join, where a range join would pair every call with every backtrace).
        return sql_params.execute(con, """
            with calls as (
                select k.fi, a.pid, a.tid, a.start_ns, a.end_ns
                from _na_frame_keys k
                join api_calls a on a.capture_id = $cid and a.base_name = k.api and a.pid = k.pid
                 and (k.tid is null or a.tid = k.tid)
            ),
            traces as (
                select k.fi, h.source, h.callchain_id, h.pid, h.tid, h.start_ns, h.end_ns
                from _na_frame_keys k
                join host_calls h on h.capture_id = $cid and h.pid = k.pid and (k.tid is null or h.tid = k.tid)
            )
            select t.fi, t.source::varchar, t.callchain_id, count(*) as n
            from traces t
            asof join calls c on c.fi = t.fi and c.pid = t.pid and c.tid = t.tid and t.start_ns >= c.start_ns
            where t.end_ns <= c.end_ns
            group by all
            order by all""", {"cid": cid}).fetchall()
    finally:
        con.execute("drop table if exists _na_frame_keys")


def _program_frames(con: duckdb.DuckDBPyConnection, cid: int,
                    chains: set[tuple[str, int]]) -> dict[tuple[str, int], tuple[str, str]]:
    """The innermost program frame (symbol, module file name) of each backtrace that has one."""
    if not chains:
        return {}
    sources = sorted({s for s, _ in chains})
    rows = sql_params.execute(con, """
        select source::varchar, callchain_id, arg_min(symbol, depth), arg_min(module, depth)
        from callchain_frames
        where capture_id = $cid and source::varchar in (select unnest($sources::varchar[]))
          and callchain_id in (select unnest($ids::bigint[])) and na_program_frame(symbol, module, unresolved)
        group by all""",
        {"cid": cid, "sources": sources, "ids": sorted({c for _, c in chains})}).fetchall()
    return {(source, chain): (symbol, module_name(module)) for source, chain, symbol, module in rows
            if (source, chain) in chains}


__all__ = ["attach_source_frames", "is_program_frame", "module_name", "TOP_FRAMES"]
