"""What the step graph (analysis/step_graph.py) is built from, read from the store: each capture's clock offset, its
operations (CUDA calls and GPU operations) and its collectives' ranks.

The reads are apart from the building so that the building needs no connection: an analysis reads the rows before
its rules and builds the graph on a thread beside their queries (engine/model_work.py). An operation's kind is
numbered here as step_graph numbers it (``HOST``, ``KERNEL``, ``MEMCPY``, ``MEMSET``: 0 to 3).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

from nsight_advisor.analysis.op_table import OpTable
from nsight_advisor.common import sql_params

if TYPE_CHECKING:
    import duckdb


@dataclass
class GraphRows:
    """What step_graph.graph_from builds a graph from, as :func:`read_graph` read it: the captures' clock offsets,
    their operations and their collectives' ranks (rows of collective_ranks)."""

    offsets: dict[int, int]
    ops: OpTable
    collectives: list[tuple]


def read_graph(con: duckdb.DuckDBPyConnection, capture_ids: Sequence[int],
               spans: dict[int, tuple[int, int]] | None = None) -> GraphRows:
    """The rows of ``capture_ids``' graph, each capture's operations limited to ``spans[capture_id]`` = (start, end)
    on its own clock (those overlapping it) when given (step_graph.build_graph)."""
    ids = [int(i) for i in capture_ids]
    offsets = _offsets(con, ids)
    ops = _ops(con, ids, [(spans or {}).get(cid, (-(2 ** 62), 2 ** 62)) for cid in ids], offsets)
    collectives = sql_params.execute(con, """
        select capture_id, device_id, start_ns, end_ns, job, process_group, collective, "index"
        from collective_ranks where capture_id in (select unnest($ids::integer[])) order by all""",
                                     {"ids": ids}).fetchall() if len(ops) else []
    return GraphRows(offsets, ops, collectives)


def _offsets(con, ids: list[int]) -> dict[int, int]:
    rows = sql_params.execute(con, """
        select capture_id, max(offset_ns) from collective_clock_offsets
        where capture_id in (select unnest($ids::integer[])) group by 1""", {"ids": ids}).fetchall()
    return {int(c): int(o or 0) for c, o in rows}


def _ops(con, ids: list[int], spans: list[tuple[int, int]], offsets: dict[int, int]) -> OpTable:
    """Host calls and GPU operations of each of ``ids`` overlapping its span (lo, hi), times plus its clock offset,
    capture by capture in one query, in a fixed order: ties (the critical path's first by index) go one way."""
    result = sql_params.execute(con, """
        with spans as (select unnest($ids::integer[]) as capture_id, unnest($pos::integer[]) as pos,
                              unnest($lo::bigint[]) as lo, unnest($hi::bigint[]) as hi, unnest($off::bigint[]) as off)
        select s.pos, a.capture_id, 0::tinyint as kind, a.pid, a.tid, null::integer as device_id,
               null::integer as stream_id, a.correlation_id, a.base_name as name, a.start_ns + s.off as start_ns,
               a.end_ns + s.off as end_ns
        from cuda_api_calls a join spans s using (capture_id)
        where a.end_ns >= s.lo and a.start_ns <= s.hi and a.end_ns >= a.start_ns
        union all
        select s.pos, r.capture_id, 1, r.pid, null, r.device_id, r.stream_id, r.correlation_id, n.name,
               r.start_ns + s.off, r.end_ns + s.off
        from kernel_rows r join spans s using (capture_id)
        left join kernel_names n on n.capture_id = r.capture_id and n.name_id = r.name_id
        where r.end_ns >= s.lo and r.start_ns <= s.hi and r.end_ns >= r.start_ns
        union all
        select s.pos, m.capture_id, 2, m.pid, null, m.device_id, m.stream_id, m.correlation_id,
               coalesce(m.direction, 'memcpy'), m.start_ns + s.off, m.end_ns + s.off
        from memcpys m join spans s using (capture_id)
        where m.end_ns >= s.lo and m.start_ns <= s.hi and m.end_ns >= m.start_ns
        union all
        select s.pos, m.capture_id, 3, m.pid, null, m.device_id, m.stream_id, m.correlation_id, 'memset',
               m.start_ns + s.off, m.end_ns + s.off
        from memsets m join spans s using (capture_id)
        where m.end_ns >= s.lo and m.start_ns <= s.hi and m.end_ns >= m.start_ns
        order by pos, kind, start_ns, end_ns, pid, tid, device_id, stream_id, correlation_id, name
        """, {"ids": ids, "pos": list(range(len(ids))), "lo": [lo for lo, _hi in spans],
              "hi": [hi for _lo, hi in spans], "off": [offsets.get(cid, 0) for cid in ids]})
    return OpTable.from_result(result, drop=("pos",))  # start_ns and end_ns: int64, as bigint sums
