"""A second connection to the DuckDB instance behind a connection, reading and writing the same store.

``con.cursor()`` opens a connection to the same instance, on the instance's own default database. A store
connection opened directly has the store as that database; a store attached to a prepared in-memory instance
(nsight_advisor.store.ingest_instance) is the default of the connection that attached it (``USE``) only, so a
cursor of it must be pointed at the store the same way, or its writes would land in the instance's empty memory
database (``Table with name ... does not exist``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import duckdb

#: The name under which a store is attached to a prepared instance (nsight_advisor.store.database.attach_store).
ATTACHED_STORE = "nsa_store"


def second_connection(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """``con.cursor()`` on the same default database as ``con``: the store, whether opened or attached.

    Asks the new connection, not ``con``: a caller may hold ``con`` busy streaming a result, which any other
    statement on it would end."""
    cur = con.cursor()
    attached = cur.execute("SELECT count(*) FROM duckdb_databases() "
                           f"WHERE database_name = '{ATTACHED_STORE}'").fetchone()[0]
    if attached:
        cur.execute(f"USE {ATTACHED_STORE}")
    return cur
