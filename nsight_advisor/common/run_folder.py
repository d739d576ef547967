"""One run folder per process and place: where every temporary file of a run lives.

A run's temporary files (the store being built, the workers' partial stores, the copy of a WAL-mode export,
the SQLite file of an `nsys export`) are all made inside a folder named ``.nsa-run-PID-RANDOM``. The folder
is removed when the run ends, however it ends short of SIGKILL (a normal exit, an error, Ctrl-C, SIGTERM:
the CLI turns SIGTERM into an exit). A run that finds the folder of a process that no longer exists (killed
with SIGKILL, or a power cut) removes it: the leftovers of one crash never outlive the next run.

Temporary stores must be renamed into place, so they are made in a run folder beside their target (same
file system); everything else goes to the run folder in the cache folder.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import secrets
import shutil
import tempfile
from pathlib import Path

PREFIX = ".nsa-run-"

_folders: dict[str, Path] = {}  # resolved parent -> this process's run folder there


def run_folder(near: Path | None = None) -> Path:
    """This process's run folder inside the folder ``near`` (default: the cache folder), created on first use.

    Creating it first removes the run folders there whose process is gone.
    """
    parent = Path(near) if near is not None else _default_parent()
    parent.mkdir(parents=True, exist_ok=True)
    key = str(parent.resolve())
    folder = _folders.get(key)
    if folder is not None and folder.is_dir():
        return folder
    reclaim(parent)
    folder = parent / f"{PREFIX}{os.getpid()}-{secrets.token_hex(3)}"
    folder.mkdir(mode=0o700)
    if not _folders:
        atexit.register(remove_all)
    _folders[key] = folder
    return folder


def temp_path(suffix: str, near: Path | None = None) -> Path:
    """A fresh, short file name inside the run folder (nothing is created)."""
    return run_folder(near) / f"{secrets.token_hex(4)}{suffix}"


def release(folder: Path) -> None:
    """Remove the run folder ``folder`` when nothing is left in it (a library caller's process lives on)."""
    with contextlib.suppress(OSError):
        folder.rmdir()
        for key, known in list(_folders.items()):
            if known == folder:
                _folders.pop(key, None)


def cache_dir() -> Path:
    """Where cached stores live: $NSIGHT_ADVISOR_CACHE, else $XDG_CACHE_HOME/nsight-advisor, else ~/.cache/nsight-advisor."""
    env = os.environ.get("NSIGHT_ADVISOR_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "nsight-advisor"


def support_dir() -> Path:
    """Files any run may reuse whatever its inputs (the schema template, compiled report templates): the cache
    folder's ``support`` folder. Removing it is safe; the next run makes what it needs again."""
    return cache_dir() / "support"


def _default_parent() -> Path:
    from nsight_advisor.common.cache_safety import secure_cache_dir

    parent = cache_dir()
    try:
        secure_cache_dir(parent)  # InputError when it is another user's
        if os.access(parent, os.W_OK):
            return parent
    except OSError:
        pass
    return Path(tempfile.gettempdir())


def remove_all() -> None:
    """Remove every run folder of this process (registered with atexit; safe to call twice)."""
    for key, folder in list(_folders.items()):
        if folder.name.startswith(f"{PREFIX}{os.getpid()}-"):  # a forked child leaves its parent's folders alone
            shutil.rmtree(folder, ignore_errors=True)
        _folders.pop(key, None)


def reclaim(parent: Path) -> list[Path]:
    """Remove the run folders in ``parent`` whose process no longer exists; returns what was removed."""
    removed = []
    with contextlib.suppress(OSError):
        for entry in os.scandir(parent):
            if not entry.name.startswith(PREFIX):
                continue
            pid = entry.name[len(PREFIX):].split("-", 1)[0]
            if pid.isdigit() and not pid_alive(int(pid)):
                shutil.rmtree(entry.path, ignore_errors=True)
                removed.append(Path(entry.path))
    return removed


def pid_alive(pid: int) -> bool:
    """True when a process ``pid`` exists (other than this one)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    return True
