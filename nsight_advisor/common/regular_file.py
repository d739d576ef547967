"""Read a file that must be a regular file (a rule's files, a config): a FIFO or a device is refused, never read.

Opening a FIFO for reading blocks until a writer comes (forever, in a batch job), and /dev/zero never ends; so
the file is opened without blocking, checked with fstat to be a regular file, and read only up to a limit.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

#: Largest file read this way (a rule's query, TOML or judge.py, a config): 16 MiB.
MAX_BYTES = 16 << 20


def read_regular_text(path: Path, error: type[Exception], *, limit_bytes: int = MAX_BYTES) -> str:
    """The UTF-8 text of the regular file ``path``; ``error`` (a message naming the file) when it is a pipe, socket
    or device, longer than ``limit_bytes``, or unreadable. FileNotFoundError and UnicodeDecodeError pass through."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise
    except IsADirectoryError:
        raise error(f"{path}: is a directory, expected a file") from None
    except OSError as exc:
        raise error(f"{path}: cannot be read ({exc.strerror or exc})") from None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if stat.S_ISDIR(st.st_mode):
            raise error(f"{path}: is a directory, expected a file")
        if not stat.S_ISREG(st.st_mode):
            raise error(f"{path}: not a regular file (a pipe, socket or device); give the file itself")
        data = fh.read(limit_bytes + 1)
    if len(data) > limit_bytes:
        raise error(f"{path}: longer than {limit_bytes:,} bytes; not a file of this kind")
    return data.decode("utf-8")


def is_regular(path: Path) -> bool:
    """True when ``path`` is (or links to) a regular file."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def identity(path: Path) -> tuple | None:
    """What changes when a file is replaced or rewritten: device, inode, size, mtime (None when unreadable). A
    reader compares it before and after a read to know the file did not change meanwhile (ingest/failures.py)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return stat_identity(st)


def stat_identity(st: os.stat_result) -> tuple:
    """:func:`identity` of a status already taken."""
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


__all__ = ["read_regular_text", "is_regular", "identity", "stat_identity", "MAX_BYTES"]
