"""A kernel's identity across two runs: its name, with its launch configuration where the capture recorded one."""

from __future__ import annotations

from typing import Sequence


def kernel_key(name: str | None, grid: Sequence, block: Sequence) -> str:
    """A kernel's identity across runs: its name, with grid and block when the capture recorded all six, as
    ``name <<<(gx,gy,gz), (bx,by,bz)>>>``."""
    name = name if name is not None else "(unnamed)"
    if any(v is None for v in (*grid, *block)):
        return name
    return f"{name} <<<({grid[0]},{grid[1]},{grid[2]}), ({block[0]},{block[1]},{block[2]})>>>"


def bare_key(key: str) -> str:
    """A kernel key without its launch configuration: the kernel's name."""
    return key.rsplit(" <<<", 1)[0] if key.endswith(">>>") else key
