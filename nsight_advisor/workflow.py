"""What the CLI commands do, as plain functions: load captures into a store, analyze, render, query.

This is the only module that strings the layers together (ingest → store → engine → report); the
CLI only parses options and calls these.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import json
import os
from pathlib import Path
from typing import Iterable, Sequence

import duckdb

from nsight_advisor import SCHEMA_VERSION
from nsight_advisor.errors import InputError
from nsight_advisor.store import atomic_store, connect, next_capture_id

STORE_SUFFIXES = (".duckdb", ".ddb")


def cache_dir() -> Path:
    """Where cached stores live: $NSIGHT_ADVISOR_CACHE, else $XDG_CACHE_HOME/nsight-advisor, else ~/.cache/nsight-advisor."""
    env = os.environ.get("NSIGHT_ADVISOR_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "nsight-advisor"


def check_input_path(path: Path) -> Path:
    """Resolve ``path`` or raise InputError naming what is wrong with it."""
    if not path.exists():
        raise InputError(f"{path}: no such file")
    if path.is_dir():
        raise InputError(f"{path}: is a directory, expected a capture file")
    if not os.access(path, os.R_OK):
        raise InputError(f"{path}: permission denied")
    return path.resolve()


def cache_key(paths: Sequence[Path]) -> str:
    """Key of a cached store: every input's resolved path, size and mtime, plus our schema version."""
    h = hashlib.sha256(f"schema={SCHEMA_VERSION}".encode())
    for p in paths:
        st = p.stat()
        h.update(f"|{p}|{st.st_size}|{st.st_mtime_ns}".encode())
    return h.hexdigest()[:24]


def ingest_to_store(paths: Iterable[Path], store_path: Path, *, progress: bool = False) -> list[int]:
    """Ingest captures into the store at ``store_path`` (created or extended atomically)."""
    from nsight_advisor.ingest import ingest_captures

    resolved = [check_input_path(Path(p)) for p in paths]
    with atomic_store(store_path) as con:
        first = next_capture_id(con)
        ids = list(range(first, first + len(resolved)))
        ingest_captures(con, list(zip(ids, resolved)), progress=progress)
    return ids


def load(paths: Sequence[Path], *, store_path: Path | None = None, use_cache: bool = True,
         progress: bool = False) -> tuple[duckdb.DuckDBPyConnection, list[int]]:
    """A read-only connection to a store holding ``paths`` and their capture ids.

    A single ``.duckdb`` argument is opened as an existing store. Otherwise the captures are
    ingested into ``store_path`` or a cached store keyed by :func:`cache_key`.
    """
    paths = [Path(p) for p in paths]
    if len(paths) == 1 and paths[0].suffix.lower() in STORE_SUFFIXES:
        store = check_input_path(paths[0])
        con = connect(store, read_only=True)
        ids = [r[0] for r in con.execute("SELECT capture_id FROM captures ORDER BY capture_id").fetchall()]
        return con, ids
    resolved = [check_input_path(p) for p in paths]
    if store_path is None:
        store_path = cache_dir() / f"{cache_key(resolved)}.duckdb"
        if not use_cache or not _store_is_complete(store_path, len(resolved)):
            _ingest_fresh(resolved, store_path, progress)
    else:
        _ingest_fresh(resolved, store_path, progress)
    con = connect(store_path, read_only=True)
    ids = [r[0] for r in con.execute("SELECT capture_id FROM captures ORDER BY capture_id").fetchall()]
    return con, ids


def _store_is_complete(store_path: Path, n_captures: int) -> bool:
    if not store_path.exists():
        return False
    try:
        con = connect(store_path, read_only=True)
    except InputError:
        return False
    try:
        return con.execute("SELECT count(*) FROM captures").fetchone()[0] == n_captures
    except duckdb.Error:
        return False
    finally:
        con.close()


def _ingest_fresh(paths: list[Path], store_path: Path, progress: bool) -> None:
    """Build a new store at ``store_path`` (replacing any old one) in one atomic rename."""
    from nsight_advisor.ingest import ingest_captures

    with contextlib.suppress(FileNotFoundError):
        # atomic_store extends an existing store; a fresh ingest must start empty.
        os.replace(store_path, str(store_path) + ".old")
    try:
        with atomic_store(store_path) as con:
            ingest_captures(con, list(zip(range(1, len(paths) + 1), paths)), progress=progress)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(str(store_path) + ".old")


def analyze(paths: Sequence[Path], *, rules_dirs=(), config_path=None, overrides=(), select=(), ignore=(),
            store_path=None, use_cache=True, progress=False):
    """Ingest (or reuse) the captures and run every selected rule; returns an AnalysisResult."""
    from nsight_advisor.engine import run_analysis

    con, ids = load(paths, store_path=store_path, use_cache=use_cache, progress=progress)
    try:
        return run_analysis(con, ids, rules_dirs=rules_dirs, config_path=config_path, overrides=overrides,
                            select=select, ignore=ignore, progress=progress)
    finally:
        con.close()


def format_from_suffix(output: Path | None) -> str:
    """Report format implied by an output file name (html when unknown)."""
    if output is None:
        return "html"
    return {".json": "json", ".md": "md", ".sarif": "sarif", ".markdown": "md"}.get(output.suffix.lower(), "html")


def write_report(result, fmt: str, output: Path | None) -> None:
    """Render ``result`` as ``fmt`` to ``output`` (atomically) or stdout."""
    from nsight_advisor.report import render

    text = render(result, fmt)
    if output is None:
        print(text, end="" if text.endswith("\n") else "\n")
        return
    write_text_atomic(Path(output), text)


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename: never a half-written file."""
    path = path.resolve()
    if path.is_dir():
        raise InputError(f"{path}: is a directory, expected an output file name")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def reaches(result, level: str) -> bool:
    """True when a finding is at or above ``level``."""
    from nsight_advisor.engine.model import severity_rank

    return any(severity_rank(f.severity) >= severity_rank(level) for f in result.findings)


def info(path: Path, fmt: str = "text") -> str:
    """Describe a capture (or store) for humans or as JSON."""
    from nsight_advisor.describe import describe, format_description

    con, ids = load([path])
    try:
        desc = describe(con, ids)
    finally:
        con.close()
    return json.dumps(desc, indent=2, default=str) if fmt == "json" else format_description(desc)


def query(source: Path, sql: str, fmt: str = "table") -> str:
    """Run read-only SQL over a store or capture; returns text in ``fmt`` (table, csv or json)."""
    con, _ = load([source])
    try:
        try:
            rel = con.sql(sql)
        except duckdb.Error as exc:
            raise InputError(f"query failed: {str(exc).strip().splitlines()[0]}") from exc
        if rel is None:
            return ""
        try:
            columns = list(rel.columns)
            rows = rel.fetchall()
        except duckdb.Error as exc:
            raise InputError(f"query failed: {str(exc).strip().splitlines()[0]}") from exc
    finally:
        con.close()
    return format_rows(columns, rows, fmt)


def format_rows(columns: list[str], rows: list[tuple], fmt: str) -> str:
    """Format query rows as an aligned table, CSV, or a JSON array of objects."""
    if fmt == "json":
        return json.dumps([dict(zip(columns, r)) for r in rows], indent=2, default=str) + "\n"
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows(rows)
        return buf.getvalue()
    cells = [columns] + [["NULL" if v is None else str(v) for v in r] for r in rows]
    widths = [min(60, max(len(row[i]) for row in cells)) for i in range(len(columns))]

    def fit(text: str, width: int) -> str:
        return text if len(text) <= width else text[: width - 1] + "…"

    lines = ["  ".join(fit(c, w).ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines.append(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")
    return "\n".join(lines) + "\n"
