"""The what-if's step model (engine/whatif.py) built on a thread of its own while the rules' queries run.

The analysis replays its findings' fixes on the captures' step model after the rules. The model is read from the
store in a few queries (the 1M-kernel export: about 0.1 s), then built in Python and numpy: the graph's edges, the
unchanged replay and the steps' critical paths (about 0.35 s there), none of which needs a connection. The rules'
queries of a large store run in DuckDB, on one connection, without Python's lock, and keep about 1.7 of two cores
busy. So :class:`ModelWork` reads the rows first, on the analysis's connection, and builds the model on a second
thread beside the rules; meanwhile the interpreter hands its lock over every :data:`SWITCH_INTERVAL_S` instead of
every 5 ms, so that a rule's query returning waits little for the thread's Python.

A small store's rules already run on two threads, one per core (engine/two_connections.py), as the model's building
would compete with them for the interpreter's lock: there, and with one core, the model is built when it is asked
for, as before. The model is the same either way: the same functions on the same rows.
"""

from __future__ import annotations

import sys
import threading
from typing import TYPE_CHECKING, Any, Sequence

from nsight_advisor.store.opening import store_threads
from nsight_advisor.store.parallel_ingest import usable_cores

if TYPE_CHECKING:
    import duckdb

    from nsight_advisor.engine.whatif import ModelRows, StepModel

#: How often the interpreter hands its lock to another thread while the model is built beside the rules, s.
SWITCH_INTERVAL_S = 0.0005


class ModelWork:
    """The step model of ``capture_ids`` with ``found`` steps (analysis/steps.py steps_of), at most ``max_ops``
    operations and ``max_steps`` steps a capture (engine/whatif.py step_model): read from ``con`` at once, built on
    a thread where the store's queries run on more than one DuckDB thread and two cores are usable (module
    docstring), else by :meth:`result`. :meth:`close` (also on leaving a ``with`` block) waits for the thread."""

    def __init__(self, con: duckdb.DuckDBPyConnection, capture_ids: Sequence[int], found: dict[int, Any], *,
                 max_ops: int | None, max_steps: int | None) -> None:
        from nsight_advisor.engine.whatif import read_model

        self._rows: ModelRows | None = read_model(con, capture_ids, max_ops, max_steps, found)
        self._model: StepModel | None = None
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._interval: float | None = None
        if self._rows is not None and _parallel_store(con) and usable_cores() >= 2:
            self._interval = sys.getswitchinterval()
            sys.setswitchinterval(SWITCH_INTERVAL_S)
            self._thread = threading.Thread(target=self._build, name="nsight-advisor-model", daemon=True)
            self._thread.start()

    def __enter__(self) -> ModelWork:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def result(self) -> StepModel | None:
        """The model (None where no capture has steps), with its steps' critical paths where built on the thread;
        an error the building met is raised here."""
        if self._thread is None and self._rows is not None and self._model is None:
            self._build(paths=False)  # finish() walks the paths where it needs them, as before
        self.close()
        if self._error is not None:
            raise self._error
        return self._model

    def close(self) -> None:
        """Wait for the thread, if one runs, and give the interpreter back its switch interval."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._interval is not None:
            sys.setswitchinterval(self._interval)
            self._interval = None

    def _build(self, paths: bool = True) -> None:
        from nsight_advisor.engine.path_share import step_paths
        from nsight_advisor.engine.whatif import model_from

        try:
            model = model_from(self._rows)
            if paths:
                model.paths = step_paths(model.graph, model.steps, model.base, model.units)
            self._model = model
        except BaseException as exc:  # noqa: BLE001 - raised again by result(), on the analysis's thread
            self._error = exc
        finally:
            self._rows = None


def _parallel_store(con) -> bool:
    """Whether the store runs its queries on more than one DuckDB thread (not a small store:
    store.opening.fit_small_store, whose rules run on two connections instead); a setting that cannot be read builds
    the model when asked, as before."""
    return (store_threads(con) or 0) > 1
