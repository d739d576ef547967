"""The steps of a capture that the what-if replays (nsight_advisor.engine.whatif): its steady iterations, else the
PyTorch profiler's ``ProfilerStep#N`` ranges.

Kept apart from the replay so that an analysis can ask whether any capture has steps before it imports the
replay's numpy and pandas (most small exports have none: docs/performance.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from nsight_advisor.analysis.iterations import find_iterations
from nsight_advisor.common import sql_params

if TYPE_CHECKING:
    import duckdb

#: A capture's steps: (start_ns, end_ns) of each, and where they came from.
Steps = tuple[list[tuple[int, int]], str]


def capture_steps(con: duckdb.DuckDBPyConnection, capture_id: int) -> Steps | None:
    """The steps of a capture: its steady iterations, else its ``ProfilerStep#N`` ranges; None without either."""
    found = find_iterations(con, capture_id)
    if found is not None:
        return list(found.spans[found.warmup:]), found.source
    rows = sql_params.execute(con, """
        select start_ns, end_ns from nvtx_ranges
        where capture_id = $cid and regexp_matches(text, '^ProfilerStep#[0-9]+$') and end_ns > start_ns
        order by start_ns""", {"cid": capture_id}).fetchall()
    if rows:
        return [(int(s), int(e)) for s, e in rows], "NVTX range 'ProfilerStep#N'"
    return None


def steps_of(con: duckdb.DuckDBPyConnection, capture_ids: Sequence[int]) -> dict[int, Steps]:
    """The captures, of ``capture_ids``, that have steps, with their steps."""
    found = {int(c): capture_steps(con, int(c)) for c in capture_ids}
    return {c: v for c, v in found.items() if v}
