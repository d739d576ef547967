"""The cache folder is shared ground: nothing in it is followed, trusted or predictable to another user.

Three rules, one place:

* the cache folder is created private (mode 0700), and so are the folders made inside it; an existing cache folder
  must be this user's (or a link to a folder of this user's) and loses any access of group and others
  (:func:`secure_cache_dir`);
* an entry of the cache (a store, its lock, a kept result) is never reached through a symbolic link: an entry
  that is a link is replaced as a link (a rename over it replaces the link itself, never the file it names),
  read with ``O_NOFOLLOW`` or treated as absent, and a lock file is opened with ``O_NOFOLLOW``;
* the name of a cache entry carries a secret of this user (:func:`user_secret`, kept 0600 in the cache
  folder), so another user cannot predict it and plant a link or a store under it before a first run.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from pathlib import Path

from nsight_advisor.common.errors import InputError

#: File name of this user's secret in the cache folder (the uid keeps users of one shared folder apart).
SECRET_PREFIX = "secret-"

_secrets: dict[str, str] = {}  # cache folder -> this user's secret there


def ensure_private_dir(folder: Path) -> Path:
    """Create ``folder`` (and missing parents) with mode 0700; an existing folder is kept as it is."""
    folder = Path(folder)
    if not folder.is_dir():
        with contextlib.suppress(FileExistsError):
            os.makedirs(folder, mode=0o700, exist_ok=True)
    return folder


def secure_cache_dir(folder: Path) -> Path:
    """Make ``folder`` fit to be the cache folder: created 0700 when missing; an existing one must be a folder of
    this user, also when ``folder`` is a link (the folder it names), and loses any access of group and others.

    Taking group and other access away is safe: the names in a cache folder carry this user's secret, so nobody
    else could use its entries anyway. A folder of another user (or a link to one) is refused with InputError: its
    owner could plant or swap entries in it. Anything else (not a folder, not readable) is left to the caller.
    """
    folder = Path(folder)
    ensure_private_dir(folder)
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return folder
    try:  # the owner is checked and the mode changed on the folder opened, not on a name that could be swapped
        st = os.fstat(fd)
        if st.st_uid != os.geteuid():
            link = f"a link to {os.path.realpath(folder)}, " if os.path.islink(folder) else ""
            raise InputError(f"{folder}: the cache folder is {link}a folder of another user (uid {st.st_uid}); give "
                             "a cache folder of your own with NSIGHT_ADVISOR_CACHE")
        mode = stat.S_IMODE(st.st_mode)
        if mode & 0o077:
            with contextlib.suppress(OSError):  # the owner's own bits stay: a read-only folder stays read-only
                os.fchmod(fd, mode & 0o700) if hasattr(os, "fchmod") else os.chmod(folder, mode & 0o700)
    finally:
        os.close(fd)
    return folder


def is_link_or_foreign(path: Path) -> bool:
    """True when ``path`` exists and is a symbolic link, or not a regular file owned by this user."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISLNK(st.st_mode) or not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid()


def check_entry(path: Path) -> None:
    """InputError when the cache entry ``path`` is in the way of a new store: a folder (a rename cannot replace
    it). A link or a file there is replaced by the rename itself, never followed."""
    with contextlib.suppress(OSError):
        if stat.S_ISDIR(os.lstat(path).st_mode):
            raise InputError(f"{path}: a folder where a cached store belongs; remove it (or run with --no-cache)")


def open_lock(path: Path) -> int:
    """Open (creating) the lock file ``path`` without following a link: a link planted there is removed first."""
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    for _ in range(3):
        try:
            fd = os.open(path, flags, 0o600)
        except OSError as exc:
            if exc.errno != errno.ELOOP:
                raise
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)  # the link itself; the file it names is left alone
            continue
        if stat.S_ISREG(os.fstat(fd).st_mode):
            return fd
        os.close(fd)
        raise InputError(f"{path}: not a regular file; remove it (a lock file of nsight-advisor belongs here)")
    raise InputError(f"{path}: a symbolic link that cannot be removed; remove it (a lock file belongs here)")


def read_private_text(path: Path) -> str | None:
    """The text of the cache file ``path`` when it is a regular file of this user reached without a link; else None."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            return None
        try:
            return fh.read().decode("utf-8")
        except (OSError, UnicodeDecodeError):
            return None


def usable_subdir(folder: Path) -> bool:
    """Create the cache's subfolder ``folder`` (0700) if absent; True when it is a real folder of this user."""
    with contextlib.suppress(OSError):
        os.mkdir(folder, 0o700)
    try:
        st = os.lstat(folder)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid()


def user_secret(folder: Path) -> str:
    """This user's secret in the cache folder ``folder`` (created on first use, 0600, never through a link).

    Raises InputError when the secret's file exists but is not this user's own private file (someone else made
    it): the cache names would then be guessable, so the run stops and says what to remove.
    """
    key = str(folder)
    found = _secrets.get(key)
    if found is not None:
        return found
    secure_cache_dir(folder)
    path = Path(folder) / f"{SECRET_PREFIX}{os.geteuid()}"
    nofollow = getattr(os, "O_NOFOLLOW", 0)
    if not os.path.lexists(path):
        # Written whole under a fresh name, then linked into place: a process starting at the same moment
        # either makes the name or finds it complete, never empty.
        fresh = path.with_name(f"{path.name}.{secrets.token_hex(6)}.tmp")
        try:
            fd = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_EXCL | nofollow, 0o600)
            with os.fdopen(fd, "w") as fh:
                fh.write(secrets.token_hex(16))
            with contextlib.suppress(FileExistsError):
                os.link(fresh, path)
        except OSError:
            return _secrets.setdefault(key, "unwritable")  # a read-only cache folder: nothing is built there
        finally:
            with contextlib.suppress(OSError):
                os.unlink(fresh)
    try:
        fd = os.open(path, os.O_RDONLY | nofollow | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        fd = None
    if fd is not None:
        with os.fdopen(fd, "rb") as fh:
            st = os.fstat(fh.fileno())
            value = fh.read(64).decode("ascii", "replace").strip()
        if stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o077 and len(value) == 32:
            return _secrets.setdefault(key, value)
    raise InputError(f"{path}: not this user's private file (a link, another user's, or readable by others); "
                     "remove it, or give a cache folder of your own with NSIGHT_ADVISOR_CACHE")


__all__ = ["ensure_private_dir", "secure_cache_dir", "is_link_or_foreign", "check_entry", "open_lock", "read_private_text",
           "usable_subdir", "user_secret"]
