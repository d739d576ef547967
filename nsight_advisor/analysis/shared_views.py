"""Analysis views that several rules read, materialized once per analysis when more than one rule run reads them.

A rule reads the analysis views through its own query, once per capture; DuckDB plans and computes a view afresh
each time. The kernels per launch configuration (``kernel_configs``, and with their occupancy
``kernel_config_occupancy``), the Nsight Compute pivots (``ncu_kernel_summary`` and the views over it) and
``host_activity`` are each read by two to six rules: as temp tables (which the store's views of the same name then
resolve to, as with nsight_advisor.analysis.accounting's) they are planned and computed once. On the 8 DLRM ranks
the rules' CPU time went from 7.5 to 4.8 s (docs/performance.md, "Small captures").
"""

from __future__ import annotations

from typing import Iterable

import duckdb

from nsight_advisor.analysis.accounting import stored

#: In dependency order: a view reads only views before it here (or the store's tables and the accounting's).
SHARED_VIEWS = ("kernel_configs", "kernel_config_occupancy", "ncu_kernel_inputs", "ncu_kernel_summary",
                "ncu_timeline_match", "ncu_kernel_classes", "ncu_warp_stalls", "ncu_kernel_efficiency", "host_activity")


#: The Nsight Compute tables every ``ncu_*`` view reads: where both are empty, so is each of those views.
NCU_SOURCES = ("ncu_kernels", "ncu_metrics")


def materialize_shared(con: duckdb.DuckDBPyConnection, wanted: Iterable[str]) -> list[str]:
    """Materialize the views of :data:`SHARED_VIEWS` named in ``wanted`` as temp tables; returns those made.

    In a store without Nsight Compute data (most Nsight Systems exports) the ``ncu_*`` views are made empty
    without computing them: their joins over empty tables still took 5 to 10 ms each of a small export's
    analysis (docs/performance.md, "Fixed cost, fourth pass")."""
    wanted = set(wanted)
    no_ncu = any(v.startswith("ncu_") for v in wanted) and not con.execute(
        "select " + " or ".join(f"exists (select 1 from {t})" for t in NCU_SOURCES)).fetchone()[0]
    made = []
    for view in SHARED_VIEWS:
        if view in wanted:
            empty = " limit 0" if no_ncu and view.startswith("ncu_") else ""
            con.execute(f"create or replace temp table {view} as select * from {stored(con, view)}{empty}")
            made.append(view)
    return made
