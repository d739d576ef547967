"""How the command line words what went wrong: one line, the user's own paths, a full disk named as such, and the
file that holds an internal error's details."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import traceback
from pathlib import Path

from nsight_advisor.common.text import first_line, printable
from nsight_advisor.common.version import __version__


def user_path(path: str) -> str:
    """A temporary file's path as the user knows it: the folder its run folder is in (see run_folder)."""
    from nsight_advisor.common.run_folder import PREFIX

    marker = f"{os.sep}{PREFIX}"
    return path.split(marker, 1)[0] if marker in path else path


def disk_full(exc: BaseException) -> str | None:
    """'FOLDER: no space left on device' when a write (DuckDB's included) ran out of space, else None."""
    import errno
    import re

    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"{user_path(os.fsdecode(exc.filename or '?'))}: no space left on device"
    text = str(exc)
    if "No space left on device" not in text and "Disk quota exceeded" not in text:
        return None
    m = re.search(r'"([^"]+)"', text)
    where = user_path(m.group(1)) if m else "the store's folder"
    return f"{where}: no space left on device (free some space, or point NSIGHT_ADVISOR_CACHE / --store elsewhere)"


def escape_args(text: str) -> str:
    """Command-line paths holding newlines or escapes, escaped inside ``text`` so the message stays one line."""
    for arg in sys.argv[1:]:
        if arg.isprintable():
            continue
        forms = {arg, os.path.abspath(arg), os.path.basename(arg)}
        with contextlib.suppress(OSError, ValueError):
            forms.add(str(Path(arg).resolve()))
        for form in sorted(forms - {""}, key=len, reverse=True):
            text = text.replace(form, printable(form))
    return text


def one_line(text: str) -> str:
    """The first line of ``text``, control characters escaped, at most 500 characters."""
    return first_line(printable(first_line(text)), limit=500)


def write_crash_report(exc: BaseException) -> str:
    """Write ``exc``'s traceback (with the version and argv) to a new temporary file; its path."""
    fd, path = tempfile.mkstemp(prefix="nsight-advisor-crash-", suffix=".txt")
    with open(fd, "w", encoding="utf-8") as fh:
        fh.write(f"nsight-advisor {__version__}\nargv: {sys.argv!r}\n\n")
        fh.write("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
    return path
