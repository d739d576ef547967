"""The steps of a capture that the what-if replays (nsight_advisor.engine.whatif): its steady iterations, else the
PyTorch profiler's ``ProfilerStep#N`` ranges.

Kept apart from the replay so that an analysis can ask whether any capture has steps before it imports the
replay's numpy and pandas (most small exports have none: docs/performance.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping, Sequence

from nsight_advisor.analysis.iterations import Iterations, find_all_iterations
from nsight_advisor.common import sql_params

if TYPE_CHECKING:
    import duckdb

#: A capture's steps: (start_ns, end_ns) of each, and where they came from.
Steps = tuple[list[tuple[int, int]], str]


def steps_of(con: duckdb.DuckDBPyConnection, capture_ids: Sequence[int],
             iterations: Mapping[int, Iterations | None] | None = None) -> dict[int, Steps]:
    """The captures, of ``capture_ids``, that have steps, with their steps (asked for all captures at once): a
    capture's steady iterations, else its ``ProfilerStep#N`` ranges. ``iterations``: the captures' iterations
    when already found (an analysis finds them before it moves its window to the steady state: the steps replayed
    are the iterations that window was set by, and they are not looked for twice)."""
    ids = [int(c) for c in capture_ids]
    if iterations is None:
        iterations = find_all_iterations(con, ids)
    out: dict[int, Steps] = {}
    for cid, found in iterations.items():
        if found is not None:
            out[cid] = (list(found.spans[found.warmup:]), found.source)
    rest = [c for c in ids if c not in out]
    if rest:
        for cid, start, end in sql_params.execute(con, """
                select capture_id, start_ns, end_ns from nvtx_ranges
                where capture_id in (select unnest($ids::integer[])) and regexp_matches(text, '^ProfilerStep#[0-9]+$')
                  and end_ns > start_ns
                order by capture_id, start_ns""", {"ids": rest}).fetchall():
            out.setdefault(int(cid), ([], "NVTX range 'ProfilerStep#N'"))[0].append((int(start), int(end)))
    return {c: out[c] for c in ids if c in out}
