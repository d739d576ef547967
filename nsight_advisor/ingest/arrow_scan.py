"""Arrow data handed to DuckDB as a view over its raw Arrow C stream.

Registering a pyarrow object (``con.register``) makes DuckDB scan it through ``pyarrow.dataset``: an import of
14 ms (more where pandas is not loaded yet) and about 0.6 ms more per scan than the stream (1.6 ms against 1.0 ms
for a 500-row batch; a PyTorch trace's ingest hands DuckDB a dozen batches). A stream is read once: each view is
for one statement.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import duckdb


def stream_view(con: duckdb.DuckDBPyConnection, name: str, data: Any) -> None:
    """Make ``data`` (a pyarrow Table or RecordBatchReader) the temporary view ``name`` of ``con``, for one read.

    Registered as a relation: ``create_view`` would write a view into the store's own catalog (and two ingest
    threads writing one there conflict)."""
    con.register(name, con.from_arrow(data.__arrow_c_stream__()))


def drop_view(con: duckdb.DuckDBPyConnection, name: str) -> None:
    """Drop the view :func:`stream_view` made."""
    con.unregister(name)
