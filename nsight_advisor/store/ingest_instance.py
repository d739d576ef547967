"""A DuckDB instance made ready for an Nsight Systems ingest on a second thread, while the run does other work.

Reading an export needs DuckDB's sqlite scanner, and loading it checks the extension's signature: DuckDB reads and
hashes the 35 MB file, 0.1 to 0.15 s, more than a small export's whole ingest (docs/performance.md, "Thirteenth
pass"). The check stays on; it runs on a thread of its own from the moment a run knows it will read an export,
beside the interpreter's work that comes before the ingest (loading the rules, resolving the cache entry,
copying the schema template), so that on two cores it costs next to nothing in wall time. So does the count of
the export's event tables that the catalog reads first (ingest/nsys/count_prefetch.py), on a third.

The instance is in memory, with the settings :func:`nsight_advisor.store.database.connect` gives a store's
connection; the store being built is attached to it and made its default database
(:func:`nsight_advisor.store.database.attach_store`), so the ingest writes the same file, the same way. An instance
not taken (the store was current after all) is closed by :meth:`PreparedInstance.close`; one whose preparation
failed is never handed out: the ingest then connects as usual and reports the failure itself.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Iterable

import duckdb

from nsight_advisor.ingest.detect import NSYS_REP_MAGIC, SQLITE_MAGIC
from nsight_advisor.ingest.nsys import count_prefetch
from nsight_advisor.ingest.nsys.catalog import count_ahead, load_sqlite_scanner, wal_mode
from nsight_advisor.store.database import CONNECT_CONFIG

#: The first bytes of the inputs whose ingest loads the sqlite scanner in this process: an nsys SQLite export,
#: and a raw report (exported to SQLite first), as nsight_advisor.ingest.detect tells them apart.
_SCANNED = (SQLITE_MAGIC, NSYS_REP_MAGIC)


class PreparedInstance:
    """An in-memory DuckDB connection with the sqlite scanner loaded, made on a thread started at creation;
    ``counted``: an export whose event tables are counted meanwhile on another (ingest/nsys/count_prefetch.py)."""

    def __init__(self, counted: Path | None = None) -> None:
        self._con: duckdb.DuckDBPyConnection | None = None
        self._taken = False
        self._counted = counted
        if counted is not None:
            count_ahead(counted)
        self._thread = threading.Thread(target=self._prepare, name="nsight-advisor-scanner", daemon=True)
        self._thread.start()

    def _prepare(self) -> None:
        # Nothing is imported here: the modules are imported by the thread that starts this one, so that no two
        # threads import at once.
        con = None
        try:
            con = duckdb.connect(":memory:", config=dict(CONNECT_CONFIG))
            load_sqlite_scanner(con)
        except Exception:  # noqa: BLE001  (the ingest connects as usual and meets the same failure itself)
            if con is not None:
                con.close()
            return
        self._con = con

    def take(self) -> duckdb.DuckDBPyConnection | None:
        """The prepared connection, once (None when its preparation failed, or after the first call)."""
        self._thread.join()
        if self._taken:
            return None
        self._taken = True
        return self._con

    def close(self) -> None:
        """Close the connection unless it was taken (waits for the threads: they must not outlive the run)."""
        self._thread.join()
        if not self._taken and self._con is not None:
            self._con.close()
        self._taken = True
        if self._counted is not None:
            count_prefetch.discard(self._counted)


def prepare_for(paths: Iterable[Path] | None) -> PreparedInstance | None:
    """A :class:`PreparedInstance` when the first of ``paths`` (the capture the ingest reads in this process) is
    an nsys export or report, else None."""
    first = next(iter(paths or ()), None)
    if first is None:
        return None
    try:
        with open(first, "rb") as fh:
            head = fh.read(max(20, *(len(m) for m in _SCANNED)))
    except OSError:
        return None
    if not head.startswith(_SCANNED):
        return None
    # an export read in place (a WAL-mode one is read from a copy: its counts are the copy's) has its tables
    # counted meanwhile
    in_place = head.startswith(SQLITE_MAGIC) and not wal_mode(head)
    return PreparedInstance(counted=Path(first) if in_place else None)
