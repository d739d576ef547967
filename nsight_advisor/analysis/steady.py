"""The steady-state analysis window: where a capture's iterations are found, the default window starts after the
warm-up iterations, so that allocation, compilation and autotuning in the first steps are not judged as idle time a
fix could recover (docs/impact.md). ``--window`` still wins, and ``--window all`` keeps the whole capture.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nsight_advisor.common import sql_params

if TYPE_CHECKING:
    import duckdb

    from nsight_advisor.analysis.iterations import Iterations


def describe(found: Iterations) -> str:
    """The window's ``source`` text: where it starts and why."""
    what = f"{found.source}: {len(found.spans)} iterations"
    if found.warmup:
        return (f"steady state: from iteration {found.warmup + 1} ({found.warmup} warm-up iteration"
                f"{'s' if found.warmup > 1 else ''} left out; {what}) to the last GPU operation; --window all for the "
                f"whole capture")
    return f"steady state: from the first iteration ({what}) to the last GPU operation; --window all for the whole capture"


def apply_steady_window(con: duckdb.DuckDBPyConnection, iterations: dict[int, Iterations | None]) -> None:
    """Move the start of the temp table ``analysis_window`` to the first steady iteration of each capture that has
    iterations starting inside its window; other captures keep theirs."""
    rows = [(cid, found.steady_start_ns, describe(found)) for cid, found in iterations.items() if found is not None]
    if not rows:
        return
    con.execute("create or replace temp table _na_steady (capture_id integer, start_ns bigint, source varchar)")
    for cid, start, source in rows:
        sql_params.execute(con, "insert into _na_steady values ($c, $s, $src)", {"c": cid, "s": start, "src": source})
    con.execute("""
        create or replace temp table _na_window_before as select * from analysis_window""")
    con.execute("""
        create or replace temp table analysis_window as
        select capture_id, if(moved, steady_ns, start_ns) as start_ns, end_ns,
               end_ns - if(moved, steady_ns, start_ns) as duration_ns, if(moved, steady_source, source) as source
        from (select w.*, s.start_ns as steady_ns, s.source as steady_source,
                     coalesce(s.start_ns > w.start_ns and s.start_ns < w.end_ns, false) as moved
              from _na_window_before w left join _na_steady s using (capture_id))""")
    con.execute("drop table _na_steady")
    con.execute("drop table _na_window_before")
