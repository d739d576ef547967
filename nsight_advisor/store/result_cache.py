"""Reuse the findings of an identical earlier analysis: same store file, same rules, same settings.

Rules are pure functions of the store and their parameters, so when nothing of that changed the earlier
result is the answer; this makes a warm ``analyze`` cost a file read and a render instead of every rule's
query over millions of rows. The key covers the store file (path, inode, size, mtime), the capture ids,
every file of the package, the built-in rules and the extra rule folders (path, size, mtime), the
resolved configuration, ``--set``/``--select``/``--ignore`` and the tool version. Results in which a rule
errored are never kept (a time limit under load is no property of the capture). One result per store is
kept, in the cache folder under ``results/``, with the reports rendered from it (``KEY.html``, ...), so a
warm run does not even render.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from nsight_advisor.common import cache_safety
from nsight_advisor.common.file_walk import walk_files
from nsight_advisor.common.run_folder import release, temp_path
from nsight_advisor.common.version import __version__
from nsight_advisor.store.cache import cache_dir

_PACKAGE_DIR = Path(__file__).resolve().parent.parent  # the nsight_advisor package


def results_dir() -> Path:
    """Where cached analysis results live (inside :func:`~nsight_advisor.store.cache.cache_dir`)."""
    return cache_dir() / "results"


def result_key(store: Path, capture_ids: Sequence[int], *, config: Any, rules_dirs: Iterable[Path] = (),
               overrides: Iterable[str] = (), select: Iterable[str] = (), ignore: Iterable[str] = (),
               window: str | None = None, gpu: str | None = None) -> str:
    """``STORE-STATE``: a hash of the store's path, then of everything the result depends on. ``config`` is the
    resolved configuration (its ``repr`` is hashed, and its ``rules_dirs`` are read like ``rules_dirs``)."""
    from nsight_advisor.common.resources import builtin_rules_dir, templates_dir

    store = Path(store).resolve()
    st = store.stat()

    folders = [_PACKAGE_DIR, builtin_rules_dir(), templates_dir(), *map(Path, config.rules_dirs),
               *map(Path, rules_dirs)]
    state = hashlib.sha256()
    for part in (__version__, st.st_ino, st.st_size, st.st_mtime_ns, list(capture_ids), repr(config),
                 list(overrides), list(select), list(ignore), window, gpu):
        state.update(repr(part).encode() + b"\0")
    for folder in folders:
        state.update(os.fsencode(f"{folder.resolve()}\0"))  # fsencode: a file name need not be UTF-8
        for entry in _files(folder):
            fst = entry.stat()
            state.update(os.fsencode(f"{entry.path}|{fst.st_size}|{fst.st_mtime_ns}\0"))
    where = hashlib.sha256(os.fsencode(str(store))).hexdigest()[:16]
    return f"{where}-{state.hexdigest()[:24]}"


def _files(folder: Path) -> list[os.DirEntry]:
    """Every file under ``folder`` but compiled Python, sorted; ``__pycache__`` and dot folders left out."""
    out = walk_files(folder, skip_dir=lambda name: name == "__pycache__" or name.startswith("."),
                     skip_file=lambda name: name.endswith((".pyc", ".pyo")))
    out.sort(key=lambda e: e.path)
    return out


#: Turns a kept result's JSON document back into the result object (the engine's ``result_from_dict``).
Decode = Callable[[dict], Any]


def read_result(key: str, decode: Decode) -> Any | None:
    """The cached result under ``key`` (``decode`` of its JSON), or None (absent or unreadable)."""
    text = cache_safety.read_private_text(results_dir() / f"{key}.json")  # never through a link
    if text is None:
        return None
    try:
        result = decode(json.loads(text))
    except (ValueError, TypeError, KeyError):
        return None
    result._cache_key = key
    return result


def write_result(key: str, result: Any, decode: Decode) -> bool:
    """Keep ``result`` (an object with ``outcomes`` and ``to_dict()``) under ``key``, replacing older results of
    the same store; False when not kept (an errored rule, or JSON that ``decode`` would not give back the same)."""
    if any(o.status == "errored" for o in result.outcomes):
        return False
    doc = result.to_dict()
    try:
        text = json.dumps(doc, allow_nan=False)
    except (TypeError, ValueError):
        return False
    back = json.loads(text)
    if back != doc or decode(back).to_dict() != doc:
        return False  # would not come back identical (tuples, non-JSON values): not worth a surprise
    folder = results_dir()
    if not cache_safety.usable_subdir(folder):  # a link or another user's folder: nothing is kept there
        return False
    try:
        tmp = temp_path(".tmp", near=folder)
        try:
            tmp.write_text(text, encoding="utf-8")
            os.replace(tmp, folder / f"{key}.json")
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
            release(tmp.parent)
    except OSError:
        return False
    where = key.split("-", 1)[0]
    for old in folder.glob(f"{where}-*"):
        if old.name.split(".", 1)[0] != key:
            with contextlib.suppress(FileNotFoundError):
                old.unlink()
    result._cache_key = key  # lets write_report keep and reuse the rendered report too
    return True


def rendered_path(result: Any, fmt: str, doc: dict | None = None) -> Path | None:
    """Where ``result`` rendered as ``fmt`` is kept beside its cached result; None when the result is not cached.
    ``doc``: ``result.to_dict()`` when the caller has it.

    The result's own digest is part of the name: a caller that changed the result after analyze() gets a fresh
    render, never one of the unchanged result. (Computed once per report: the digest serializes the whole
    result, 18 ms on the 8 DLRM ranks.)"""
    key = getattr(result, "_cache_key", None)
    if key is None:
        return None
    doc = result.to_dict() if doc is None else doc
    digest = hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()[:16]
    return results_dir() / f"{key}.{digest}.{fmt}"


def read_rendered(target: Path | None) -> str | None:
    """The report kept at ``target`` (:func:`rendered_path`), if any."""
    return None if target is None else cache_safety.read_private_text(target)


def write_rendered(target: Path | None, text: str) -> None:
    """Keep ``text`` at ``target`` (:func:`rendered_path`), only while the result it renders is kept."""
    if target is None:
        return
    folder = target.parent
    key = target.name.split(".", 1)[0]
    if not (folder / f"{key}.json").exists() or not cache_safety.usable_subdir(folder):
        return
    try:
        tmp = temp_path(".tmp", near=folder)
    except OSError:
        return
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, target)
    except OSError:
        pass
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        release(tmp.parent)


def forget_store(store: Path) -> None:
    """Drop the cached results of the store at ``store`` (called when the store is rebuilt or removed)."""
    where = hashlib.sha256(os.fsencode(str(Path(store).resolve()))).hexdigest()[:16]
    for old in results_dir().glob(f"{where}-*"):
        with contextlib.suppress(FileNotFoundError):
            old.unlink()
