"""TOML parsed once per text, kept across runs in the cache's support folder.

Every analysis loads the rules, and Python's TOML parser took 65 ms of a cold ``analyze`` of a small capture
(the 25 built-in rules' ``rule.toml``: a tenth of the run above its floor, docs/performance.md). The parse of each
text is kept as JSON under the text's SHA-256, so an edited file is simply a new entry; a text whose parse JSON
cannot carry exactly (a TOML date, a NaN) is parsed every time. A missing, unreadable or damaged store of parses
is the same as an empty one: nothing here can fail a run. The cache folder's rules hold (common/cache_safety.py):
the file is read only when it is a regular file of this user, never through a link, and written only by an
analysis, into a cache folder made private first.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
import sys
import tempfile
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

#: The file in the support folder (nsight_advisor.common.run_folder.support_dir).
FILE_NAME = "toml-parsed.json"
#: Entries kept, newest last: edited rules leave their old texts behind.
MAX_ENTRIES = 512

_kept: dict[str, str] | None = None  # digest -> the parse as JSON text
_changed = False


def loads(text: str) -> dict[str, Any]:
    """``tomllib.loads(text)``, from the kept parse when there is one (a new object on every call: callers may
    change what they get). TOMLDecodeError as tomllib raises it."""
    global _changed
    kept = _load()
    key = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    hit = kept.get(key)
    if hit is not None:
        with contextlib.suppress(ValueError):
            value = json.loads(hit)
            if isinstance(value, dict):
                return value
    parsed = tomllib.loads(text)
    try:
        dumped = json.dumps(parsed, allow_nan=False)
        exact = json.loads(dumped) == parsed
    except (TypeError, ValueError):  # a date or time, a NaN or infinity: JSON would not give it back
        exact = False
    if exact:
        kept.pop(key, None)
        kept[key] = dumped
        _changed = True
    return parsed


def save() -> None:
    """Write the parses made in this process beside the kept ones (atomically; nothing when it cannot)."""
    global _changed
    if not _changed or _kept is None:
        return
    _changed = False
    from nsight_advisor.common.cache_safety import ensure_private_dir, secure_cache_dir
    from nsight_advisor.common.errors import InputError
    from nsight_advisor.common.run_folder import cache_dir

    path = _path()
    entries = dict(list(_kept.items())[-MAX_ENTRIES:])
    with contextlib.suppress(OSError, InputError):
        secure_cache_dir(cache_dir())  # InputError: another user's folder, where nothing is written
        ensure_private_dir(path.parent)
        fd, tmp = tempfile.mkstemp(prefix=f".{FILE_NAME}.", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(entries, out)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise


def _load() -> dict[str, str]:
    global _kept
    if _kept is None:
        _kept = {}
        with contextlib.suppress(OSError, ValueError):
            data = json.loads(_read_own(_path()))
            if isinstance(data, dict):
                _kept = {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, str)}
    return _kept


def _read_own(path: Path) -> str:
    """The text of ``path`` when it is a regular file of this user, opened without following a link; else OSError."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_size > 16 << 20:
            raise OSError(f"{path}: not a file of this user's")
        return f.read().decode("utf-8")


def _path() -> Path:
    from nsight_advisor.common.run_folder import support_dir

    return support_dir() / FILE_NAME
