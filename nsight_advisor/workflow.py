"""What the commands do, as plain functions: load captures into a store, analyze, render, query.

``analyze`` reads as the layers run: resolve the inputs and open their store (``store.opening``), run the
analysis and the rules (``engine.analyze``), render (``report``). The API and ``compare`` call these; the CLI
calls the API. docs/architecture.md follows one call through the layers.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from nsight_advisor.common.errors import InputError
from nsight_advisor.common.output_files import write_stdout, write_text_atomic
from nsight_advisor.common.row_format import format_rows
from nsight_advisor.common.text import first_line
from nsight_advisor.store import result_cache
from nsight_advisor.store.cache import cache_dir, cache_key
from nsight_advisor.store.opening import (  # noqa: F401 - check_input_path ... ingest_to_store: this module's API
    ANALYSIS_MEMORY_LIMIT, StoreHandle, bound_memory, fit_small_store, capture_ids, check_input_path, ingest_to_store,
    refuse_inputs_as_output, remove_spill, spill_folder)

if TYPE_CHECKING:
    import duckdb

# duckdb, the store and the ingest load lazily: the warm path of `analyze` (a kept result) never opens
# a database, and their import is a large part of a sub-second run.

__all__ = ["cache_dir", "cache_key", "check_input_path", "ingest_to_store", "load", "analyze", "info", "query",
           "write_report", "format_from_suffix", "reaches", "format_rows", "write_text_atomic"]


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
    return StoreHandle(paths, store_path).open(use_cache=use_cache, progress=progress, unread=unread)


def analyze(paths: Sequence[Path], *, rules_dirs=(), config_path=None, overrides=(), select=(), ignore=(),
            store_path=None, use_cache=True, progress=False, window=None, gpu=None, executor=None):
    """Ingest (or reuse) the captures and run every selected rule; returns an AnalysisResult.

    With several captures the result's ``summary["combined"]`` holds the combined view (slowest
    capture, findings merged across captures): see :mod:`nsight_advisor.engine.combined_view`. With
    ``use_cache``, the result of an identical earlier analysis (same store file, rules and settings) is
    reused: see :mod:`nsight_advisor.store.result_cache`. ``executor``: where many captures are ingested.
    """
    from nsight_advisor.engine.analyze import run_analysis
    from nsight_advisor.engine.combined_view import combined_view
    from nsight_advisor.engine.config import find_config
    from nsight_advisor.engine.model import result_from_dict

    settings = dict(rules_dirs=rules_dirs, config_path=config_path, overrides=overrides, select=select,
                    ignore=ignore, window=window, gpu=gpu)
    keyed = dict(settings, config=find_config(config_path))
    del keyed["config_path"]
    store = StoreHandle(paths, store_path)  # the inputs, resolved and checked
    if use_cache:
        cached = store.kept_result(result_from_dict, **keyed)  # the warm path: no database opened
        if cached is not None:
            return cached
    # Where this process will read an nsys export, DuckDB's sqlite scanner loads on a second thread meanwhile
    # (nsight_advisor.store.ingest_instance); not for Ray, whose tasks read the exports.
    from nsight_advisor.store.ingest_instance import prepare_for

    instance = prepare_for(store.inputs) if executor is None or executor.kind != "ray" else None
    try:
        con, ids = store.open(use_cache=use_cache, progress=progress, unread=_unread_by_rules(settings),
                              executor=executor, instance=instance)
    finally:
        if instance is not None:
            instance.close()
    spill = None
    try:
        from nsight_advisor.store.duplicates import refuse_merged_duplicates

        refuse_merged_duplicates(con, ids, store.target if store.inputs is None else Path(paths[0]))
        key = store.result_key(ids, **keyed)
        cached = result_cache.read_result(key, result_from_dict) if use_cache else None
        if cached is not None:
            return cached
        spill = spill_folder(store.target)
        bound_memory(con, spill)
        fit_small_store(con)
        result = run_analysis(con, ids, progress=progress, **settings)
    finally:
        con.close()
        remove_spill(spill)
    combined = combined_view(result)
    if combined is not None:
        result.summary["combined"] = combined
    result_cache.write_result(key, result, result_from_dict)
    return result


def _unread_by_rules(settings: dict) -> frozenset[str]:
    """Deferrable tables that no rule an analysis with ``settings`` could run reads (by name in its SQL).

    Selection is ignored on purpose (a rule left out now may be selected on the cached store later), and so
    is anything that stops the rules from loading: the analysis reports that itself, on a complete store.
    """
    from nsight_advisor.engine.analyze import rules_reading
    from nsight_advisor.ingest import DEFERRABLE

    try:
        read = rules_reading(DEFERRABLE, rules_dirs=settings["rules_dirs"], config_path=settings["config_path"])
        if settings.get("window") and ":" not in str(settings["window"]) and str(settings["window"]).strip() != "all":
            read.add("nvtx_ranges")  # --window names an NVTX range
    except Exception:  # noqa: BLE001 - a broken rule or config is reported by the analysis itself
        return frozenset()
    return frozenset(DEFERRABLE) - read


def files_read(*, config_path: Path | None = None, rules_dirs=()) -> list[Path]:
    """The configuration and rule files a run with these settings reads: an output may not name them
    (:func:`nsight_advisor.engine.run_inputs.files_read`)."""
    from nsight_advisor.engine.run_inputs import files_read as read

    return read(config_path=config_path, rules_dirs=rules_dirs)


def refuse_if_nothing_profiled(result) -> None:
    """InputError when no capture of ``result`` recorded GPU work: "no rule found a problem" would read as a
    healthy program (:mod:`nsight_advisor.engine.nothing_profiled`)."""
    from nsight_advisor.engine.nothing_profiled import refuse_if_nothing_profiled as refuse

    refuse(result)


def format_from_suffix(output: Path | None) -> str:
    """Report format implied by an output file name (html when unknown)."""
    if output is None:
        return "html"
    return {".json": "json", ".md": "md", ".sarif": "sarif", ".markdown": "md"}.get(output.suffix.lower(), "html")


def write_report(result, fmt: str, output: Path | None) -> None:
    """Render ``result`` as ``fmt`` to ``output`` (atomically) or stdout."""
    from nsight_advisor.report.data import as_dict

    doc = as_dict(result)  # one conversion for the kept report's name and the render (each converts the whole result)
    kept_at = result_cache.rendered_path(result, fmt, doc)
    text = result_cache.read_rendered(kept_at)
    if text is None:
        from nsight_advisor.report import render

        text = render(doc, fmt)
        result_cache.write_rendered(kept_at, text)
    if output is None:
        write_stdout(text)
        return
    write_text_atomic(Path(output), text)


def reaches(result, level: str) -> bool:
    """True when a finding that no unexpired waiver accepts is at or above ``level``."""
    from nsight_advisor.engine.model import severity_rank

    return any(severity_rank(f.severity) >= severity_rank(level) for f in result.findings if not f.waived())


def info(path: Path, fmt: str = "text") -> str:
    """Describe a capture (or store) for humans or as JSON."""
    from nsight_advisor.analysis.describe import describe, format_description
    from nsight_advisor.ingest import DEFERRABLE

    # The store `analyze` cached is described as it is, naming what it left out with the export's row count:
    # `info` right after `analyze` must not cost a second, full ingest. Without a cached store, a full one.
    con = StoreHandle([path]).open_if_current(may_lack=DEFERRABLE)
    if con is not None:
        ids = capture_ids(con)
    else:
        con, ids = load([path])
    try:
        desc = describe(con, ids)
    finally:
        con.close()
    from nsight_advisor.common.control_chars import strip_controls

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
