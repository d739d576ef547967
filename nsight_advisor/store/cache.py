"""The cache of trace stores: where cached stores live, when a store can be reused, and how one is built.

A second analysis of an unchanged capture reuses the store the first one built (the key is every input's
resolved path, size and mtime plus our schema version, hashed with the user's secret: see cache_safety, which
also keeps every entry of the cache from being followed through a link). A store is always built in a temporary file in
the same folder and renamed over the target in one step, so a reader never sees a half-built store, and
an exclusive lock file beside the target makes a second process that wants the same store wait for the
first instead of building it twice.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Collection, Iterator, Sequence

from nsight_advisor.common import cache_safety, sql_params
from nsight_advisor.common.errors import InputError
from nsight_advisor.common.run_folder import cache_dir  # noqa: F401 - where the cache is, part of this API
from nsight_advisor.common.run_folder import pid_alive
from nsight_advisor.common.version import SCHEMA_VERSION

try:
    import fcntl
except ImportError:  # Windows: no flock; the atomic rename alone still keeps every store whole
    fcntl = None

if TYPE_CHECKING:
    import duckdb

# duckdb and the schema load lazily: computing where a cached store is must stay cheap (the warm path).

STORE_SUFFIX = ".duckdb"
_TMP_SUFFIX = ".tmp"


def cache_key(paths: Sequence[Path]) -> str:
    """Key of a cached store: ``PATHS-STATE``, hashes (seeded with the user's secret) of the inputs' resolved paths
    and of their size, mtime, our schema version and the derived views' SQL.

    The first half names the inputs only, so a rebuilt store for re-exported captures replaces the stale
    one instead of piling up beside it.
    """
    # The user's secret makes the name unguessable to other users of a shared cache folder (cache_safety).
    names = hashlib.sha256(cache_safety.user_secret(cache_dir()).encode())
    state = hashlib.sha256(f"schema={SCHEMA_VERSION}|views={_views_digest()}".encode())
    for p in paths:
        st = p.stat()
        names.update(b"|" + os.fsencode(p))  # fsencode: a file name need not be UTF-8
        state.update(b"|" + os.fsencode(p) + f"|{st.st_size}|{st.st_mtime_ns}".encode())
    return f"{names.hexdigest()[:16]}-{state.hexdigest()[:16]}"


def _views_digest() -> str:
    """Hash of the derived views' SQL: a store keeps the views it was built with, so new ones need a new store."""
    digest = hashlib.sha256()
    for f in sorted((Path(__file__).resolve().parent.parent / "schema" / "views").glob("*.sql")):
        digest.update(f.name.encode() + b"\0" + f.read_bytes())
    return digest.hexdigest()[:16]


def cached_store_path(paths: Sequence[Path]) -> Path:
    """The cache file for these (resolved) inputs."""
    return cache_dir() / f"{cache_key(paths)}{STORE_SUFFIX}"


def open_if_current(store_path: Path, paths: Sequence[Path], *, keyed: bool,
                    may_lack: Collection[str] = ()) -> duckdb.DuckDBPyConnection | None:
    """A read-only connection to the store at ``store_path`` when it already holds these inputs, else None.

    ``may_lack``: tables the caller will not read; a store whose ingest deferred any other table (see
    ``capture_deferred``) is not current for this caller.

    ``keyed``: the store's file name is :func:`cache_key` of the inputs, which already encodes their size,
    mtime and our schema version, so one capture count suffices (the warm path stays one query). Any
    other store must record exactly these paths, sizes and mtimes, and have our tables and columns.
    """
    import duckdb

    from nsight_advisor.store.database import connect

    if not store_path.is_file() or (keyed and cache_safety.is_link_or_foreign(store_path)):
        return None  # a cache entry that is a link, or not this user's, is never read (it is rebuilt)
    try:
        con = connect(store_path, read_only=True)
    except InputError:
        return None
    try:
        if keyed:
            ok = con.execute("SELECT count(*) FROM captures").fetchone()[0] == len(paths)
        else:
            ok = _holds_exactly(con, paths) and schema_is_current(con)
        ok = ok and not sql_params.execute(
            con, "SELECT count(*) FROM capture_deferred WHERE NOT list_contains($ok::VARCHAR[], data)",
            {"ok": sorted(may_lack)}).fetchone()[0]
    except duckdb.Error:
        ok = False
    if not ok:
        con.close()
        return None
    return con


def store_owned_by(store_path: Path, paths: Sequence[Path]) -> bool:
    """True when replacing ``store_path`` loses nothing: it is absent, or every capture in it is one of ``paths``.

    A store holding other captures (built by ``ingest``), or a file that is no store at all, belongs to
    the user and is never overwritten.
    """
    import duckdb

    from nsight_advisor.store.database import connect

    if not store_path.exists():
        return True
    try:
        con = connect(store_path, read_only=True)
    except InputError:
        return False
    try:
        stored = {r[0] for r in con.execute("SELECT source_path FROM captures").fetchall()}
    except duckdb.Error:
        return False
    finally:
        con.close()
    return stored <= {str(p) for p in paths}


def _holds_exactly(con: duckdb.DuckDBPyConnection, paths: Sequence[Path]) -> bool:
    rows = con.execute(
        "SELECT source_path, source_size_bytes, source_mtime_ns FROM captures ORDER BY capture_id"
    ).fetchall()
    wanted = []
    for p in paths:
        st = p.stat()
        wanted.append((str(p), st.st_size, st.st_mtime_ns))
    return rows == wanted


def schema_is_current(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether the store behind ``con`` has this version's tables and views, with their columns in order."""
    from nsight_advisor.schema import TABLES

    # The store records no schema version, so compare its columns with ours: a store from another
    # schema version differs in at least one table or column.
    have: dict[str, list[str]] = {}
    for table, column in con.execute(
        "SELECT table_name, column_name FROM duckdb_columns() WHERE database_name = current_database() "
        "AND schema_name = 'main' ORDER BY table_name, column_index"
    ).fetchall():
        have.setdefault(table, []).append(column)
    return all(have.get(t.name) == t.column_names for t in TABLES)


#: Seconds a run waits for another process building the same store before it gives up (exit 2 naming the
#: holder); NSIGHT_ADVISOR_LOCK_WAIT_S overrides it. A build of a very large capture can take minutes.
LOCK_WAIT_S = 600.0


def lock_wait_s() -> float:
    """The lock wait in seconds: $NSIGHT_ADVISOR_LOCK_WAIT_S when it is a positive number, else LOCK_WAIT_S."""
    try:
        value = float(os.environ.get("NSIGHT_ADVISOR_LOCK_WAIT_S", ""))
    except ValueError:
        return LOCK_WAIT_S
    return value if 0 < value < float("inf") else LOCK_WAIT_S


@contextlib.contextmanager
def build_lock(store_path: Path, *, progress: bool = False) -> Iterator[None]:
    """Hold an exclusive lock on ``STORE.lock`` while building ``store_path``; the lock file is removed after.

    A second process asking for the same store waits here until the first has renamed its store into
    place, then finds it complete and reuses it. The wait is announced on stderr (what is waited for, and
    the holder's pid, which the lock file holds) and ends after :func:`lock_wait_s` with an InputError.
    """
    if fcntl is None:
        yield
        return
    lock_path = store_path.with_name(store_path.name + ".lock")
    cache_safety.ensure_private_dir(lock_path.parent)
    told = False
    deadline = time.monotonic() + lock_wait_s()
    while True:
        fd = cache_safety.open_lock(lock_path)  # never through a link: the lock file is truncated below
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    holder = _holder(fd)
                    if not told:
                        print(f"nsight-advisor: waiting for process {holder or '?'} to finish building "
                              f"{store_path} (at most {lock_wait_s():g} s) ...", file=sys.stderr, flush=True)
                        told = True
                    if time.monotonic() >= deadline:
                        raise InputError(f"{store_path}: process {holder or '?'} has been building this store for "
                                         f"over {lock_wait_s():g} s (lock {lock_path.name}); stop it, or set "
                                         f"NSIGHT_ADVISOR_LOCK_WAIT_S to wait longer") from None
                    time.sleep(0.2)
        except BaseException:
            os.close(fd)
            raise
        # The holder before us unlinks the lock file when done; a lock on that unlinked file guards
        # nothing, so lock the file now at the path instead.
        try:
            same = os.fstat(fd).st_ino == os.lstat(lock_path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    with contextlib.suppress(OSError):
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(lock_path)
        os.close(fd)


def _holder(fd: int) -> str:
    """The pid the lock's holder wrote into the lock file ('' when unknown)."""
    with contextlib.suppress(OSError):
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        return text if text.isdigit() else ""
    return ""


def build_store(target: Path, fill: Callable[[duckdb.DuckDBPyConnection], None], *, instance=None) -> None:
    """Build a new store at ``target``: ``fill`` a fresh temporary store beside it, then rename it over ``target``.

    Call under :func:`build_lock`. Readers holding the old store open keep reading the old file; on any
    error the temporary file is removed and ``target`` is left as it was. ``instance``: a prepared DuckDB
    instance to build it with (nsight_advisor.store.ingest_instance).
    """
    from nsight_advisor.store.database import atomic_store

    cache_safety.check_entry(target)
    remove_dead_temp_files(target)
    # follow=False: a link at ``target`` is replaced itself; the file it names is never written.
    with atomic_store(target, fresh=True, follow=False, instance=instance) as con:
        fill(con)


def remove_dead_temp_files(target: Path) -> None:
    """Remove temporary stores for ``target`` left by processes that were killed mid-build."""
    for path in target.parent.glob(f".{target.name}.build-*{_TMP_SUFFIX}*"):
        pid = path.name[len(target.name) + 8:].split("-", 1)[0]
        # our own earlier build of this target is over by now; another process's, while that process lives, is not
        if not pid.isdigit() or (int(pid) != os.getpid() and pid_alive(int(pid))):
            continue
        if path.is_dir() and not path.is_symlink():  # DuckDB's spill folder beside the build (``<build>.tmp``)
            shutil.rmtree(path, ignore_errors=True)
            continue
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def remove_stale_versions(target: Path) -> list[Path]:
    """Remove cached stores of the same inputs built from an older state (size, mtime or schema) of them."""
    paths_part = target.name.split("-", 1)[0]
    removed = []
    for path in target.parent.glob(f"{paths_part}-*{STORE_SUFFIX}"):
        if path != target:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
                removed.append(path)
    return removed
