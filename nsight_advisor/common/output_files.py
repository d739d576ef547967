"""Writing a report or any output file: atomically through a temporary file and a rename, or to stdout, a pipe or a
device as it is. Never a half-written file; a closed or full stdout is an error, not a silent loss."""

from __future__ import annotations

import contextlib
import os
import stat
import sys
from pathlib import Path

from nsight_advisor.common.control_chars import terminal_safe
from nsight_advisor.common.errors import InputError
from nsight_advisor.common.run_folder import release, temp_path


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


def _write_file(path: Path, text: str, *, shown: Path, mode: str = "w") -> None:
    try:
        # backslashreplace: a file name that is not UTF-8 (a lone surrogate in the text) is written as its escape
        with open(path, mode, encoding="utf-8", errors="backslashreplace") as fh:
            fh.write(text)
            fh.flush()
    except OSError as exc:
        raise InputError(f"{shown}: cannot be written ({exc.strerror or exc})") from None


def _write_direct(path: Path, text: str) -> None:
    """Write to a pipe or device in place (opening it for append never truncates or replaces a node)."""
    _write_file(path, text, shown=path, mode="a")


def write_stdout(text: str) -> None:
    """``text`` on stdout through :func:`~nsight_advisor.common.control_chars.terminal_safe` (every command's output
    goes this way); a closed or full stdout is an error (exit 2), not a silent loss."""
    text = terminal_safe(text).encode("utf-8", "backslashreplace").decode("utf-8")  # file names not UTF-8
    try:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        raise
    except (OSError, ValueError, AttributeError) as exc:
        problem = getattr(exc, "strerror", None) or "closed"
        raise InputError(f"stdout: the output cannot be written ({problem})") from None
