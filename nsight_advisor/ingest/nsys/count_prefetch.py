"""Row counts of an export's event tables, read on a thread ahead of the ingest that needs them.

The catalog (ingest/nsys/catalog.py) counts the kernels, CUDA calls, copies, sets and synchronizations of an
export before any of them is read: SQLite counts a table by walking all of its pages, 0.2 s for the 1M-kernel
export's 2.7M rows, on one core, while nothing else runs. A run that knows it will ingest an export asks for the
counts as it starts (store/ingest_instance.py), and they are counted on a thread of their own, beside the
interpreter's work before the ingest (loading the rules, the sqlite scanner's signature check): SQLite runs without
Python's lock. The catalog takes them when it reaches its counts, and counts itself whatever the thread could not
(an error, a file changed since): the counts and the errors are those of counting in place.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path
from typing import Sequence

#: Counts asked for and not yet taken, by file (its resolved path and the state :func:`_file_state` reads).
_PENDING: dict[str, CountPrefetch] = {}
_LOCK = threading.Lock()


class CountPrefetch:
    """The row counts of ``tables`` (those the export holds) in the SQLite file at ``uri``, read on a thread
    started at creation; ``state``: the file's state when asked (:func:`_file_state`)."""

    def __init__(self, uri: str, tables: Sequence[str], state: tuple) -> None:
        self.state = state
        self._counts: dict[str, int] | None = None
        self._thread = threading.Thread(target=self._count, args=(uri, tuple(tables)),
                                        name="nsight-advisor-counts", daemon=True)
        self._thread.start()

    def _count(self, uri: str, tables: tuple[str, ...]) -> None:
        try:
            src = sqlite3.connect(uri, uri=True)
            try:
                present = {r[0] for r in src.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
                counts = {}
                for table in tables:
                    if table in present:
                        counts[table] = int(src.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0])
            finally:
                src.close()
        except Exception:  # noqa: BLE001  (the catalog counts in place and meets the same error itself)
            return
        self._counts = counts

    def counts(self) -> dict[str, int] | None:
        """The counts (waits for the thread); None where they could not be read."""
        self._thread.join()
        return self._counts


def start(path: Path, uri: str, tables: Sequence[str]) -> None:
    """Start counting ``tables`` of the export at ``path`` (opened as ``uri``), unless already asked."""
    key, state = _key(path), _file_state(path)
    if state is None:
        return
    with _LOCK:
        if key not in _PENDING:
            _PENDING[key] = CountPrefetch(uri, tables, state)


def take(path: Path) -> dict[str, int] | None:
    """The counts asked for ``path``, once (waits for them); None when none were asked, they could not be read,
    or the file changed since."""
    with _LOCK:
        pending = _PENDING.pop(_key(path), None)
    if pending is None:
        return None
    counts = pending.counts()
    return counts if counts is not None and _file_state(path) == pending.state else None


def discard(path: Path) -> None:
    """Forget the counts asked for ``path`` when not taken, once their thread is over (a run whose store was
    current reads no export: no thread of it may outlive the run's ingest)."""
    with _LOCK:
        pending = _PENDING.pop(_key(path), None)
    if pending is not None:
        pending.counts()


def _key(path: Path) -> str:
    return os.path.realpath(path)


def _file_state(path: Path) -> tuple | None:
    """What tells a file changed: device, inode, size and modification time; None when it cannot be read."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns
