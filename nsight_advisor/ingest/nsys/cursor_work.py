"""Work run on a thread, on a cursor of its own, while the ingest goes on: the span of a deferred table asked ahead
(reader.SpanQuery), the steps read beside the kernels (side_steps.SideSteps). DuckDB releases Python's lock while
a query runs, so the thread's queries and the caller's run at once."""

from __future__ import annotations

import contextlib
import threading

import duckdb


class CursorWork:
    """:meth:`work` run on a thread over ``cursor`` (a connection of its own, closed with the work), started by
    :meth:`start`; :meth:`wait` waits for it and raises what it raised, :meth:`close` ends it early."""

    def __init__(self, cursor: duckdb.DuckDBPyConnection, name: str) -> None:
        self._cursor = cursor
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._guarded, name=name, daemon=True)

    def work(self, cursor: duckdb.DuckDBPyConnection) -> None:
        raise NotImplementedError

    def start(self) -> None:
        self._thread.start()

    def _guarded(self) -> None:
        try:
            self.work(self._cursor)
        except BaseException as exc:  # noqa: BLE001  (raised again in the caller's thread by wait())
            self._error = exc

    def wait(self) -> None:
        """Wait for the work; raise what it raised."""
        self._thread.join()
        with contextlib.suppress(duckdb.Error):
            self._cursor.close()
        if self._error is not None:
            raise self._error

    def close(self) -> None:
        """End the work if it still runs (its query interrupted) and wait for the thread: it must not outlive the
        ingest."""
        if self._thread.is_alive():
            with contextlib.suppress(duckdb.Error):
                self._cursor.interrupt()
        self._thread.join()
        with contextlib.suppress(duckdb.Error):
            self._cursor.close()
