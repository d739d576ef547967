"""What the CLI commands do, as plain functions: load captures into a store, analyze, render, query.

This is the only module that strings the layers together (ingest → store → engine → report); the
CLI only parses options and calls these.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Sequence

from nsight_advisor import result_cache, store_cache
from nsight_advisor.errors import InputError
from nsight_advisor.store_cache import cache_dir, cache_key
from nsight_advisor.row_format import format_rows
from nsight_advisor.text import first_line

if TYPE_CHECKING:
    import duckdb

# duckdb, the store and the ingest load lazily: the warm path of `analyze` (a kept result) never opens
# a database, and their import is a large part of a sub-second run.

STORE_SUFFIXES = (".duckdb", ".ddb")

__all__ = ["cache_dir", "cache_key", "check_input_path", "ingest_to_store", "load", "analyze", "info", "query",
           "write_report", "format_from_suffix", "reaches", "format_rows", "write_text_atomic"]


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
    from nsight_advisor.parallel_ingest import ingest_many
    from nsight_advisor.store import atomic_store, next_capture_id

    resolved = [check_input_path(Path(p)) for p in paths]
    refuse_inputs_as_output(Path(store_path), resolved, "store")
    target = Path(store_path).resolve()
    check_store_target(target, Path(store_path))
    with store_cache.build_lock(target, progress=progress), atomic_store(target) as con:
        from nsight_advisor.store_checks import refuse_already_stored

        refuse_already_stored(con, resolved, Path(store_path))
        first = next_capture_id(con)
        ids = list(range(first, first + len(resolved)))
        ingest_many(con, list(zip(ids, resolved)), work_dir=target.parent, progress=progress, executor=executor)
    return ids


def load(paths: Sequence[Path], *, store_path: Path | None = None, use_cache: bool = True,
         progress: bool = False, for_rules: bool = False) -> tuple[duckdb.DuckDBPyConnection, list[int]]:
    """A read-only connection to a store holding ``paths`` and their capture ids.

    A single ``.duckdb`` argument is opened as an existing store. Otherwise the captures are ingested
    (many at once in worker processes) into ``store_path``, or into the cache (:func:`cache_dir`) under
    :func:`cache_key`. Either store is reused when it already holds exactly these inputs, unchanged,
    unless ``use_cache`` is false. A ``store_path`` holding other captures is never overwritten.
    ``for_rules``: the caller only runs the built-in rules, so a cached store may lack the tables they do not
    read (what ``analyze`` builds); otherwise the store holds every table.
    """
    unread = _unread_by_rules(dict(rules_dirs=(), config_path=None)) if for_rules else frozenset()
    con, ids, _store = _load(_plan(paths, store_path), use_cache=use_cache, progress=progress, unread=unread)
    return con, ids


class _Plan:
    """Where the store for these inputs is (or will be), before anything is opened."""

    def __init__(self, target: Path, inputs: list[Path] | None, keyed: bool, given: Path | None) -> None:
        self.target = target  # the store file
        self.inputs = inputs  # resolved captures, or None when the argument is a store itself
        self.keyed = keyed  # target is the cache file named by cache_key(inputs)
        self.given = given  # --store as the user wrote it


def _plan(paths: Sequence[Path], store_path: Path | None) -> _Plan:
    paths = [Path(p) for p in paths]
    if not paths:
        raise InputError("no capture given")
    if len(paths) == 1 and paths[0].suffix.lower() in STORE_SUFFIXES:
        return _Plan(check_input_path(paths[0]), None, False, None)
    resolved = [check_input_path(p) for p in paths]
    if len(set(resolved)) != len(resolved):
        raise InputError("the same capture is given twice: " + ", ".join(sorted({str(p) for p in resolved
                                                                               if resolved.count(p) > 1})))
    if store_path is None:
        return _Plan(store_cache.cached_store_path(resolved), resolved, True, None)
    refuse_inputs_as_output(Path(store_path), resolved, "store")
    target = Path(store_path).resolve()
    check_store_target(target, Path(store_path))
    return _Plan(target, resolved, False, Path(store_path))


def check_store_target(target: Path, given: Path) -> None:
    """InputError unless ``target`` can hold a store: absent, or a regular file (a folder, pipe or device cannot)."""
    if target.is_dir():
        raise InputError(f"{given}: is a directory, expected a store file name (.duckdb)")
    if target.exists() and not target.is_file():
        raise InputError(f"{given}: not a regular file (a pipe, socket or device); give a store file name (.duckdb)")


def _load(plan: _Plan, *, use_cache: bool, progress: bool, executor=None,
          unread: frozenset[str] = frozenset()) -> tuple[duckdb.DuckDBPyConnection, list[int], Path]:
    """Open or build the store of ``plan``.

    ``unread``: tables the caller will not read. A cache store is then built without them (an ingest may
    defer them, see ``capture_deferred``), and a cache store that lacks a table the caller reads is rebuilt
    in full. A store the user named with ``--store`` is always complete.
    """
    target, resolved = plan.target, plan.inputs
    if resolved is None:
        return (*_open(target), target)
    defer = unread if plan.keyed else frozenset()

    def current():
        if not use_cache:
            return None
        return store_cache.open_if_current(target, resolved, keyed=plan.keyed, may_lack=defer)

    con = current()
    if con is None:
        with store_cache.build_lock(target, progress=progress):
            # Another process may have built it while we waited for the lock.
            con = current()
            if con is None:
                # A cache entry is ours, whatever is in it (a damaged one is rebuilt); a --store is the user's.
                if not plan.keyed:
                    _check_owned(plan.given, target, resolved)
                _ingest_fresh(resolved, target, progress, defer, executor)
                if plan.keyed:
                    for stale in store_cache.remove_stale_versions(target):
                        result_cache.forget_store(stale)
    if con is None:
        return (*_open(target), target)
    return con, _capture_ids(con), target


def _check_owned(given: Path, target: Path, resolved: list[Path]) -> None:
    """InputError unless the user's ``--store`` may be replaced: absent, or holding only these captures."""
    from nsight_advisor.store import connect

    if not target.exists() or store_cache.store_owned_by(target, resolved):
        return
    try:
        connect(target, read_only=True).close()
    except InputError as exc:
        detail = str(exc).split(": ", 1)[-1] if str(exc).startswith(str(target)) else str(exc)
        raise InputError(f"{given}: {detail}; give a new --store path (this file is left as it is)") from None
    raise InputError(f"{given}: holds other captures; give a new --store path, or analyze that store by itself")


def _open(store: Path) -> tuple[duckdb.DuckDBPyConnection, list[int]]:
    import duckdb

    from nsight_advisor.store import connect

    con = connect(store, read_only=True)
    try:
        return con, _capture_ids(con)
    except duckdb.Error as exc:
        con.close()
        raise InputError(f"{store}: not an nsight-advisor store (no captures table)") from exc


def _capture_ids(con: duckdb.DuckDBPyConnection) -> list[int]:
    return [r[0] for r in con.execute("SELECT capture_id FROM captures ORDER BY capture_id").fetchall()]


def _ingest_fresh(paths: list[Path], store_path: Path, progress: bool, defer=frozenset(), executor=None) -> None:
    """Build a new store holding ``paths`` (capture ids 1..n) and rename it over ``store_path``."""
    from nsight_advisor.parallel_ingest import ingest_many

    items = list(zip(range(1, len(paths) + 1), paths))
    store_cache.build_store(store_path, lambda con: ingest_many(
        con, items, work_dir=store_path.parent, progress=progress, defer=defer, executor=executor))


#: DuckDB memory for the rules and the summary; beyond it DuckDB evicts cached blocks and spills, so the
#: analysis of a 10M-kernel store needs no more memory than that of a small one, at no cost in rule time
#: (docs/performance.md, "Measurements behind the code").
ANALYSIS_MEMORY_LIMIT = "512MB"


def _bound_memory(con: duckdb.DuckDBPyConnection, spill: Path | None = None) -> None:
    """The analysis memory limit; what DuckDB spills beyond it goes to ``spill`` (in the run folder)."""
    import duckdb

    with contextlib.suppress(duckdb.Error):
        con.execute(f"SET memory_limit = '{ANALYSIS_MEMORY_LIMIT}'")
    if spill is not None:
        with contextlib.suppress(duckdb.Error):
            con.execute("SET temp_directory = '" + str(spill).replace("'", "''") + "'")


def analyze(paths: Sequence[Path], *, rules_dirs=(), config_path=None, overrides=(), select=(), ignore=(),
            store_path=None, use_cache=True, progress=False, window=None, gpu=None, executor=None):
    """Ingest (or reuse) the captures and run every selected rule; returns an AnalysisResult.

    With several captures the result's ``summary["combined"]`` holds the combined view (slowest
    capture, findings merged across captures): see :mod:`nsight_advisor.combined_view`. With
    ``use_cache``, the result of an identical earlier analysis (same store file, rules and settings) is
    reused: see :mod:`nsight_advisor.result_cache`. ``executor``: where many captures are ingested.
    """
    from nsight_advisor.combined_view import combined_view
    from nsight_advisor.engine import run_analysis

    settings = dict(rules_dirs=rules_dirs, config_path=config_path, overrides=overrides, select=select,
                    ignore=ignore, window=window, gpu=gpu)
    plan = _plan(paths, store_path)
    if use_cache and plan.keyed and plan.target.is_file():
        # The warm path: a cached store is complete by construction (renamed into place whole) and holds
        # capture ids 1..n, so a kept result for it needs no database connection at all.
        cached = result_cache.read_result(
            result_cache.result_key(plan.target, list(range(1, len(plan.inputs) + 1)), **settings))
        if cached is not None:
            return cached
    con, ids, store = _load(plan, use_cache=use_cache, progress=progress, unread=_unread_by_rules(settings),
                            executor=executor)
    spill = None
    try:
        from nsight_advisor.store_checks import refuse_merged_duplicates

        refuse_merged_duplicates(con, ids, store if plan.inputs is None else Path(paths[0]))
        key = result_cache.result_key(store, ids, **settings)
        cached = result_cache.read_result(key) if use_cache else None
        if cached is not None:
            return cached
        spill = _spill_folder(store)
        _bound_memory(con, spill)
        result = run_analysis(con, ids, progress=progress, **settings)
    finally:
        con.close()
        _remove_spill(spill)
    combined = combined_view(result)
    if combined is not None:
        result.summary["combined"] = combined
    result_cache.write_result(key, result)
    return result


def _spill_folder(store: Path) -> Path | None:
    """Where DuckDB may spill during the analysis: this run's folder beside the store (None when it cannot be
    made, e.g. a read-only folder: DuckDB then keeps its own default)."""
    from nsight_advisor.run_folder import run_folder

    try:
        return run_folder(store.parent) / "spill"
    except OSError:
        return None


def _remove_spill(spill: Path | None) -> None:
    import shutil

    from nsight_advisor.run_folder import release

    if spill is not None:
        shutil.rmtree(spill, ignore_errors=True)
        release(spill.parent)


def _unread_by_rules(settings: dict) -> frozenset[str]:
    """Deferrable tables that no rule an analysis with ``settings`` could run reads (by name in its SQL).

    Selection is ignored on purpose (a rule left out now may be selected on the cached store later), and so
    is anything that stops the rules from loading: the analysis reports that itself, on a complete store.
    """
    from nsight_advisor.engine import rules_reading
    from nsight_advisor.ingest import DEFERRABLE

    try:
        read = rules_reading(DEFERRABLE, rules_dirs=settings["rules_dirs"], config_path=settings["config_path"])
        if settings.get("window") and ":" not in str(settings["window"]) and str(settings["window"]).strip() != "all":
            read.add("nvtx_ranges")  # --window names an NVTX range
    except Exception:  # noqa: BLE001 - a broken rule or config is reported by the analysis itself
        return frozenset()
    return frozenset(DEFERRABLE) - read


def format_from_suffix(output: Path | None) -> str:
    """Report format implied by an output file name (html when unknown)."""
    if output is None:
        return "html"
    return {".json": "json", ".md": "md", ".sarif": "sarif", ".markdown": "md"}.get(output.suffix.lower(), "html")


def write_report(result, fmt: str, output: Path | None) -> None:
    """Render ``result`` as ``fmt`` to ``output`` (atomically) or stdout."""
    text = result_cache.read_rendered(result, fmt)
    if text is None:
        from nsight_advisor.report import render

        text = render(result, fmt)
        result_cache.write_rendered(result, fmt, text)
    if output is None:
        write_stdout(text)
        return
    write_text_atomic(Path(output), text)


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename: never a half-written file.

    Only a regular file (or a new name) is ever replaced by the rename. ``-`` is stdout; a pipe, a device or
    anything under /dev or /proc (``/dev/stdout``) is written to directly, and stays what it is.
    """
    if str(path) == "-":
        write_stdout(text)
        return
    given = Path(path)
    try:
        st = os.stat(given)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise InputError(f"{given}: cannot be written ({exc.strerror or exc})") from None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise InputError(f"{given}: is a directory, expected an output file name")
    resolved = Path(os.path.realpath(given))
    special = {Path(os.path.abspath(given)).parts[1:2], resolved.parts[1:2]} & {("dev",), ("proc",)}
    if (st is not None and not stat.S_ISREG(st.st_mode)) or special:
        _write_direct(given, text)
        return
    try:
        resolved.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise InputError(f"{given}: cannot create the output's folder: a file of that name is in the way") from None
    from nsight_advisor.run_folder import release, temp_path

    # In this run's folder beside the output (same file system for the rename; a short name, since the output's
    # own may already be as long as the file system allows; reclaimed by a later run if this one is killed).
    tmp = temp_path(".tmp", near=resolved.parent)
    try:
        _write_file(tmp, text, shown=given)
        os.replace(tmp, resolved)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        release(tmp.parent)


def _write_file(path: Path, text: str, *, shown: Path) -> None:
    try:
        # backslashreplace: a file name that is not UTF-8 (a lone surrogate in the text) is written as its escape
        with open(path, "w", encoding="utf-8", errors="backslashreplace") as fh:
            fh.write(text)
            fh.flush()
    except OSError as exc:
        raise InputError(f"{shown}: cannot be written ({exc.strerror or exc})") from None


def _write_direct(path: Path, text: str) -> None:
    """Write to a pipe or device in place (opening it for append never truncates or replaces a node)."""
    try:
        with open(path, "a", encoding="utf-8", errors="backslashreplace") as fh:
            fh.write(text)
            fh.flush()
    except OSError as exc:
        raise InputError(f"{path}: cannot be written ({exc.strerror or exc})") from None


def write_stdout(text: str) -> None:
    """``text`` on stdout through :func:`~nsight_advisor.control_chars.terminal_safe` (every command's output goes
    this way); a closed or full stdout is an error (exit 2), not a silent loss."""
    from nsight_advisor.control_chars import terminal_safe

    text = terminal_safe(text).encode("utf-8", "backslashreplace").decode("utf-8")  # file names not UTF-8
    try:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        raise
    except (OSError, ValueError, AttributeError) as exc:
        problem = getattr(exc, "strerror", None) or "closed"
        raise InputError(f"stdout: the output cannot be written ({problem})") from None


def reaches(result, level: str) -> bool:
    """True when a finding that no unexpired waiver accepts is at or above ``level``."""
    from nsight_advisor.engine.model import severity_rank

    return any(severity_rank(f.severity) >= severity_rank(level) for f in result.findings if not f.waived())


def info(path: Path, fmt: str = "text") -> str:
    """Describe a capture (or store) for humans or as JSON."""
    from nsight_advisor.describe import describe, format_description
    from nsight_advisor.ingest import DEFERRABLE

    # The store `analyze` cached is described as it is, naming what it left out with the export's row count:
    # `info` right after `analyze` must not cost a second, full ingest. Without a cached store, a full one.
    plan = _plan([path], None)
    con = None
    if plan.keyed:
        con = store_cache.open_if_current(plan.target, plan.inputs, keyed=True, may_lack=DEFERRABLE)
    if con is not None:
        ids = _capture_ids(con)
    else:
        con, ids = load([path])
    try:
        desc = describe(con, ids)
    finally:
        con.close()
    from nsight_advisor.control_chars import strip_controls

    return json.dumps(desc, indent=2, default=str) if fmt == "json" else strip_controls(format_description(desc))


def query(source: Path, sql: str, fmt: str = "table") -> str:
    """Run read-only SQL over a store or capture; returns text in ``fmt`` (table, csv or json)."""
    import duckdb

    con, _ = load([source])
    try:
        rel = store_sql(con, sql)
        if rel is None:
            return ""
        try:
            columns = list(rel.columns)
            rows = rel.fetchall()
        except duckdb.Error as exc:
            raise InputError(f"query failed: {first_line(exc)}") from exc
    finally:
        con.close()
    return format_rows(columns, rows, fmt)


def store_sql(con, sql: str):
    """``con.sql(sql)`` for a user's SQL, which reads the store and nothing else, as a rule's does: no files (COPY
    TO, read_csv), no ATTACH, no extension installed or loaded; the configuration is locked so no SET undoes that.
    InputError with DuckDB's first line when the SQL fails."""
    import duckdb

    from nsight_advisor.engine.runner import disable_external_access

    disable_external_access(con)
    con.execute("SET lock_configuration = true")
    try:
        return con.sql(sql)
    except duckdb.Error as exc:
        if isinstance(exc, getattr(duckdb, "InterruptException", ())):  # Ctrl-C, not a fault of the SQL
            raise KeyboardInterrupt from None
        raise InputError(f"query failed: {first_line(exc)}") from exc
