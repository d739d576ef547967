"""The two sides of a comparison as the command line gives them: ``BASE HEAD`` positionally, or each side as
repeated ``--base``/``--head`` options; a directory stands for the captures in it (the ranks of one run).
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from nsight_advisor.common.errors import InputError

#: File names that a capture in a side's directory has (analyze tells formats apart by content; these are the
#: names the tools write).
CAPTURE_SUFFIXES = (".sqlite", ".nsys-rep", ".qdrep", ".ncu-rep", ".csv", ".json", ".json.gz")


def expand(paths: Sequence[str | Path], side: str) -> list[Path]:
    """``paths`` with each directory replaced by the capture files directly in it, by name; InputError when a
    directory holds none."""
    out: list[Path] = []
    for given in paths:
        if isinstance(given, str) and not given.strip():  # Path("") would be ".", the current folder
            raise InputError(f"an empty path given for {side}; give a capture or a folder of captures")
        p = Path(given)
        if p.is_dir():
            found = sorted(f for f in p.iterdir() if f.is_file() and f.name.lower().endswith(CAPTURE_SUFFIXES))
            if not found:
                raise InputError(f"{p}: {side} directory holds no capture ({', '.join(CAPTURE_SUFFIXES)})")
            out += found
        else:
            out.append(p)
    return out


def resolve_sides(positional: Sequence[str | Path], base: Sequence[str | Path], head: Sequence[str | Path]) -> tuple[list, list]:
    """BASE's and HEAD's captures: two positional paths, or ``--base`` and ``--head`` (each repeatable), never
    both; InputError saying which form to use."""
    if positional and (base or head):
        raise InputError("give BASE HEAD, or --base and --head options, not both")
    if positional:
        if len(positional) != 2:
            raise InputError(f"expected two paths, BASE and HEAD, got {len(positional)}; use --base/--head "
                             "(repeatable) for several captures a side")
        base, head = [positional[0]], [positional[1]]
    if not base or not head:
        raise InputError("missing a side: give BASE HEAD, or at least one --base and one --head")
    return expand(base, "BASE"), expand(head, "HEAD")


def main(argv: list[str]) -> int:
    """``python -m nsight_advisor.compare.sides [--config FILE] -- CAPTURE...``: analyze one side into the cache and
    write nothing else; the comparing process picks the result up (its own errors are reported there). Exit 0,
    else 2; 143 when stopped (SIGTERM, or its parent died: :mod:`nsight_advisor.common.child_lifecycle`)."""
    from nsight_advisor import workflow
    from nsight_advisor.common.child_lifecycle import HelperStopped, become_helper

    try:
        become_helper()
    except HelperStopped:
        return 143
    config = None
    if argv[:1] == ["--config"]:
        config, argv = Path(argv[1]), argv[2:]
    paths = [Path(p) for p in argv[1:]] if argv[:1] == ["--"] else [Path(p) for p in argv]
    try:
        workflow.analyze(paths, config_path=config)
    except HelperStopped:  # the parent stopped us or died: finally blocks and atexit have cleaned up
        return 143
    except Exception:  # noqa: BLE001 - the comparing process analyzes this side again and reports the error
        return 2
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
