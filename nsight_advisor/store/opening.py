"""Opening the store for a set of inputs: one object owns where the store is, whether it is current, building it
under a lock, and the results of earlier analyses kept beside it.

:class:`StoreHandle` is the only way a run gets a store: ``analyze``, ``info``, ``query`` and the API resolve their
inputs into one, ask it for a kept result (the warm path, no database opened), then ``open()`` it (reuse, or
ingest under the store's lock) and read what it holds.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from nsight_advisor.common.errors import InputError
from nsight_advisor.common.run_folder import release, run_folder
from nsight_advisor.store import cache as store_cache
from nsight_advisor.store import result_cache

if TYPE_CHECKING:
    import duckdb

# duckdb, the store and the ingest load lazily: the warm path of `analyze` (a kept result) never opens
# a database, and their import is a large part of a sub-second run.

STORE_SUFFIXES = (".duckdb", ".ddb")


class StoreHandle:
    """The store of one set of inputs (captures, or one store file), before anything is opened.

    ``paths``: the captures (or a single ``.duckdb`` store); ``store_path``: ``--store``, else the cache (the file
    named by :func:`~nsight_advisor.store.cache.cache_key` of the inputs). A ``--store`` holding other captures is
    never overwritten, and the same capture given twice is refused.
    """

    def __init__(self, paths: Sequence[Path], store_path: Path | None = None) -> None:
        paths = [Path(p) for p in paths]
        if not paths:
            raise InputError("no capture given")
        self.given = Path(store_path) if store_path is not None else None  # --store as the user wrote it
        if len(paths) == 1 and paths[0].suffix.lower() in STORE_SUFFIXES:
            self.target, self.inputs, self.keyed = check_input_path(paths[0]), None, False
            return
        resolved = [check_input_path(p) for p in paths]
        if len(set(resolved)) != len(resolved):
            raise InputError("the same capture is given twice: " + ", ".join(sorted({str(p) for p in resolved
                                                                                   if resolved.count(p) > 1})))
        self.inputs: list[Path] | None = resolved  # resolved captures, or None when the argument is a store itself
        if store_path is None:
            self.target, self.keyed = store_cache.cached_store_path(resolved), True  # the cache file of the inputs
            return
        refuse_inputs_as_output(Path(store_path), resolved, "store")
        self.target = Path(store_path).resolve()  # the store file
        self.keyed = False
        check_store_target(self.target, Path(store_path))

    def result_key(self, ids: Sequence[int], **settings: Any) -> str:
        """The key of an analysis of ``ids`` with ``settings`` (see :func:`~nsight_advisor.store.result_cache.result_key`)."""
        return result_cache.result_key(self.target, list(ids), **settings)

    def kept_result(self, decode: result_cache.Decode, **settings: Any) -> Any | None:
        """The kept result of an identical earlier analysis of a cached store, without opening a database; else None.

        A cached store is complete by construction (renamed into place whole) and holds capture ids 1..n, so its
        result key is known before it is opened."""
        if not (self.keyed and self.target.is_file()):
            return None
        return result_cache.read_result(self.result_key(range(1, len(self.inputs) + 1), **settings), decode)

    def open_if_current(self, may_lack: Iterable[str] = ()) -> duckdb.DuckDBPyConnection | None:
        """A connection to the cached store when it is current (it may lack the tables ``may_lack``); else None."""
        if not self.keyed:
            return None
        return store_cache.open_if_current(self.target, self.inputs, keyed=True, may_lack=frozenset(may_lack))

    def open(self, *, use_cache: bool = True, progress: bool = False, executor=None,
             unread: frozenset[str] = frozenset(), instance=None) -> tuple[duckdb.DuckDBPyConnection, list[int]]:
        """A read-only connection to the store and its capture ids: the current store reused (unless
        ``use_cache`` is false), else built under the store's lock while nothing else builds it.

        ``unread``: tables the caller will not read. A cache store is then built without them (an ingest may
        defer them, see ``capture_deferred``), and a cache store that lacks a table the caller reads is rebuilt
        in full. A store the user named with ``--store`` is always complete. ``instance``: a prepared DuckDB
        instance to build the store with (nsight_advisor.store.ingest_instance; the caller closes it).
        """
        target, resolved = self.target, self.inputs
        if resolved is None:
            return _open(target, current=True)
        defer = unread if self.keyed else frozenset()

        def current():
            if not use_cache:
                return None
            return store_cache.open_if_current(target, resolved, keyed=self.keyed, may_lack=defer)

        con = current()
        if con is None:
            with store_cache.build_lock(target, progress=progress):
                # Another process may have built it while we waited for the lock.
                con = current()
                if con is None:
                    # A cache entry is ours, whatever is in it (a damaged one is rebuilt); a --store is the user's.
                    if not self.keyed:
                        _check_owned(self.given, target, resolved)
                    _ingest_fresh(resolved, target, progress, defer, executor, instance)
                    if self.keyed:
                        for stale in store_cache.remove_stale_versions(target):
                            result_cache.forget_store(stale)
        if con is None:
            return _open(target)
        return con, capture_ids(con)


def check_input_path(path: Path) -> Path:
    """Resolve ``path`` or raise InputError naming what is wrong with it."""
    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise InputError(f"{path}: a loop of symbolic links, no file at the end of it") from None
        if os.path.islink(path):
            raise InputError(f"{path}: a symbolic link to {os.readlink(path)}, which does not exist") from None
        if not isinstance(exc, FileNotFoundError):
            raise InputError(f"{path}: cannot be read ({exc.strerror or exc})") from None
        raise InputError(f"{path}: no such file") from None
    if path.is_dir():
        raise InputError(f"{path}: is a directory, expected a capture file")
    if not path.is_file():  # a pipe or device: reading it could block forever
        raise InputError(f"{path}: not a regular file (a pipe, socket or device); pass the capture file itself")
    if not os.access(path, os.R_OK):
        raise InputError(f"{path}: permission denied")
    return path.resolve()


def refuse_inputs_as_output(output: Path | None, inputs: Iterable[Path], what: str = "output") -> None:
    """InputError when ``output`` is, or resolves to, one of ``inputs``: the same file through a symlink or a
    hard link included (same device and inode). Writing there would replace an input, which is never done."""
    if output is None or str(output) == "-":
        return
    try:
        out_st = os.stat(output)
    except OSError:
        out_st = None
    out_real = os.path.realpath(output)
    for item in inputs:
        if item is None:
            continue
        same = os.path.realpath(item) == out_real
        if not same and out_st is not None:
            with contextlib.suppress(OSError):
                st = os.stat(item)
                same = (st.st_dev, st.st_ino) == (out_st.st_dev, out_st.st_ino) and stat.S_ISREG(st.st_mode)
        if same:
            raise InputError(f"{output}: is an input ({item}); the {what} would overwrite it, give another path")


def ingest_to_store(paths: Iterable[Path], store_path: Path, *, progress: bool = False, executor=None) -> list[int]:
    """Ingest captures into ``store_path`` (created or extended atomically), in parallel on ``executor`` if many."""
    from nsight_advisor.store.database import atomic_store, next_capture_id
    from nsight_advisor.store.parallel_ingest import ingest_many

    resolved = [check_input_path(Path(p)) for p in paths]
    refuse_inputs_as_output(Path(store_path), resolved, "store")
    target = Path(store_path).resolve()
    check_store_target(target, Path(store_path))
    with store_cache.build_lock(target, progress=progress), atomic_store(target) as con:
        from nsight_advisor.store.duplicates import refuse_already_stored

        refuse_already_stored(con, resolved, Path(store_path))
        first = next_capture_id(con)
        ids = list(range(first, first + len(resolved)))
        ingest_many(con, list(zip(ids, resolved)), work_dir=target.parent, progress=progress, executor=executor)
    return ids


def check_store_target(target: Path, given: Path) -> None:
    """InputError unless ``target`` can hold a store: absent, or a regular file (a folder, pipe or device cannot)."""
    if target.is_dir():
        raise InputError(f"{given}: is a directory, expected a store file name (.duckdb)")
    if target.exists() and not target.is_file():
        raise InputError(f"{given}: not a regular file (a pipe, socket or device); give a store file name (.duckdb)")


def _check_owned(given: Path, target: Path, resolved: list[Path]) -> None:
    """InputError unless the user's ``--store`` may be replaced: absent, or holding only these captures."""
    from nsight_advisor.store.database import connect

    if not target.exists() or store_cache.store_owned_by(target, resolved):
        return
    try:
        connect(target, read_only=True).close()
    except InputError as exc:
        detail = str(exc).split(": ", 1)[-1] if str(exc).startswith(str(target)) else str(exc)
        raise InputError(f"{given}: {detail}; give a new --store path (this file is left as it is)") from None
    raise InputError(f"{given}: holds other captures; give a new --store path, or analyze that store by itself")


def _open(store: Path, current: bool = False) -> tuple[duckdb.DuckDBPyConnection, list[int]]:
    """A read-only connection to ``store`` and its capture ids. ``current``: the store is the user's (given as the
    input, not built by this run), so it must also have this version's tables, views and columns: an older one's
    views would be read by this version's analysis (a view added since, missing, stopped it with an internal
    error)."""
    import duckdb

    from nsight_advisor.store.database import connect

    con = connect(store, read_only=True)
    try:
        ids = capture_ids(con)
        stale = current and not store_cache.schema_is_current(con)
    except duckdb.Error as exc:
        con.close()
        raise InputError(f"{store}: not an nsight-advisor store (no captures table)") from exc
    if stale:
        con.close()
        raise InputError(f"{store}: written by another version of nsight-advisor (its tables or views differ from "
                         "this version's); ingest its captures into a new store (nsight-advisor ingest CAPTURES "
                         "--store NEW.duckdb)")
    return con, ids


def capture_ids(con: duckdb.DuckDBPyConnection) -> list[int]:
    """The capture ids of the store behind ``con``, in order."""
    return [r[0] for r in con.execute("SELECT capture_id FROM captures ORDER BY capture_id").fetchall()]


def _ingest_fresh(paths: list[Path], store_path: Path, progress: bool, defer=frozenset(), executor=None,
                  instance=None) -> None:
    """Build a new store holding ``paths`` (capture ids 1..n) and rename it over ``store_path``."""
    from nsight_advisor.store.parallel_ingest import ingest_many

    items = list(zip(range(1, len(paths) + 1), paths))
    store_cache.build_store(store_path, lambda con: ingest_many(
        con, items, work_dir=store_path.parent, progress=progress, defer=defer, executor=executor),
        instance=instance)


#: DuckDB memory for the rules and the summary; beyond it DuckDB evicts cached blocks and spills, so the
#: analysis of a 10M-kernel store needs no more memory than that of a small one, at no cost in rule time
#: (docs/performance.md, "Measurements behind the code").
ANALYSIS_MEMORY_LIMIT = "512MB"


def bound_memory(con: duckdb.DuckDBPyConnection, spill: Path | None = None) -> None:
    """The analysis memory limit; what DuckDB spills beyond it goes to ``spill`` (in the run folder). Row order in
    the analysis's temp tables is not kept: every read that needs an order asks for it (ORDER BY), and a temp table
    written from a parallel query without it skips the merge that keeps it (the 1M-kernel export's ``prepare``:
    1.58-1.65 s against 1.68-1.76 s)."""
    import duckdb

    with contextlib.suppress(duckdb.Error):
        con.execute(f"SET memory_limit = '{ANALYSIS_MEMORY_LIMIT}'")
        con.execute("SET preserve_insertion_order = false")
    if spill is not None:
        with contextlib.suppress(duckdb.Error):
            con.execute("SET temp_directory = '" + str(spill).replace("'", "''") + "'")


#: DuckDB splits a scan by row groups of this many rows: a store whose tables are all smaller gains nothing from
#: more threads, and paid a third more CPU for them in its rules (docs/performance.md, "Small captures").
ROW_GROUP_ROWS = 122_880

#: DuckDB optimizer passes that only pay off on large data: on a store whose every table fits in one row group
#: they cost more planning time than they save (vecadd's analysis: 0.35 -> 0.32 s; docs/performance.md, "Fixed
#: cost, fourth pass"). None changes a result; the join order is kept (without it a query could join two tables
#: of a hundred thousand rows without a condition before the one that relates them).
SMALL_STORE_SKIPPED_OPTIMIZERS = ("statistics_propagation", "compressed_materialization", "build_side_probe_side",
                                  "join_filter_pushdown", "late_materialization", "common_subplan",
                                  "top_n_window_elimination", "sampling_pushdown")


def fit_small_store(con: duckdb.DuckDBPyConnection) -> None:
    """For a store whose every table fits in one row group: one DuckDB thread and no optimizer pass of
    :data:`SMALL_STORE_SKIPPED_OPTIMIZERS`; the defaults otherwise."""
    import duckdb

    with contextlib.suppress(duckdb.Error):
        rows = con.execute("SELECT coalesce(max(estimated_size), 0) FROM duckdb_tables() "
                           "WHERE database_name = current_database()").fetchone()[0]
        if rows < ROW_GROUP_ROWS:
            con.execute("SET threads = 1")
            con.execute("SET disabled_optimizers = '" + ",".join(SMALL_STORE_SKIPPED_OPTIMIZERS) + "'")


def store_threads(con: duckdb.DuckDBPyConnection) -> int | None:
    """The DuckDB threads the store's queries run on (1 for a small store: :func:`fit_small_store`); None where the
    setting cannot be read. The analysis runs a small store's rules on two connections
    (engine/two_connections.py) and builds a larger one's step model beside its rules (engine/model_work.py)."""
    try:
        return int(con.execute("select current_setting('threads')").fetchone()[0])
    except Exception:  # noqa: BLE001 - a setting it cannot read: each caller keeps its plain way
        return None


def spill_folder(store: Path) -> Path | None:
    """Where DuckDB may spill during the analysis: this run's folder beside the store (None when it cannot be
    made, e.g. a read-only folder: DuckDB then keeps its own default)."""
    try:
        return run_folder(store.parent) / "spill"
    except OSError:
        return None


def remove_spill(spill: Path | None) -> None:
    """Remove the spill folder of :func:`spill_folder` and release its run folder."""
    if spill is not None:
        shutil.rmtree(spill, ignore_errors=True)
        release(spill.parent)
