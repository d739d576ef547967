"""Walking a folder tree that may hold symlinked folders, cycles included."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable


def walk_files(folder: Path, *, skip_dir: Callable[[str], bool] = lambda name: False,
               skip_file: Callable[[str], bool] = lambda name: False, regular_only: bool = False,
               limit: int | None = None) -> list[os.DirEntry]:
    """The files under ``folder``, symlinked folders followed and each real folder walked once (a folder linking to
    itself, or to one above it, is a cycle that would never end). ``skip_dir``/``skip_file`` leave entries out by
    name; ``regular_only`` keeps regular files only; the walk stops once ``limit`` files are found. An entry or folder
    that cannot be read is passed over."""
    out: list[os.DirEntry] = []
    seen: set[str] = set()
    stack = [str(folder)]
    while stack and (limit is None or len(out) < limit):
        current = stack.pop()
        real = os.path.realpath(current)
        if real in seen:
            continue
        seen.add(real)
        try:
            with os.scandir(current) as it:
                for entry in it:
                    try:
                        if entry.is_dir():
                            if not skip_dir(entry.name):
                                stack.append(entry.path)
                        elif (not regular_only or entry.is_file()) and not skip_file(entry.name):
                            out.append(entry)
                    except OSError:
                        continue
        except OSError:
            continue
    return out
