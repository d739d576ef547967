"""Tell capture formats apart by their first bytes (then by file name), never by trust in the name alone."""

from __future__ import annotations

from pathlib import Path

from nsight_advisor.common.errors import InputError
from nsight_advisor.ingest.kineto.json_events import MARKER_KEYS
from nsight_advisor.ingest.kineto.json_events import sniff as sniff_json

SQLITE_MAGIC = b"SQLite format 3\x00"
NCU_REP_MAGIC = b"NVR\x00"  # every .ncu-rep seen, 2020.2 to 2025.3
NSYS_REP_MAGIC = b"NVIDIA Tegra Profiler Report"  # .nsys-rep and .qdrep
GZIP_MAGIC = b"\x1f\x8b"

FORMATS = ("nsys-sqlite", "nsys-rep", "ncu-rep", "ncu-csv", "kineto-json")


def detect_format(path: Path) -> str:
    """Return one of :data:`FORMATS` for ``path`` or raise InputError saying what the file is not."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(4096)
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, expected a capture file") from None
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    suffix = path.suffix.lower()
    if not head:
        raise InputError(f"{path}: empty file (0 bytes), not a capture")
    if head.startswith(SQLITE_MAGIC):
        return "nsys-sqlite"
    if head.startswith(NCU_REP_MAGIC):
        return "ncu-rep"
    if head.startswith(NSYS_REP_MAGIC):
        return "nsys-rep"
    json_kind = sniff_json(path, head)
    if json_kind == "kineto-json":
        return "kineto-json"
    if json_kind == "json":
        raise InputError(f"{path}: JSON that is not a PyTorch profiler trace (none of {', '.join(MARKER_KEYS)} "
                         "near its start)")
    if json_kind == "gzip":
        raise InputError(f"{path}: gzip-compressed and not a PyTorch profiler trace; decompress it first (gunzip) "
                         "and pass the capture itself")
    if suffix in (".sqlite", ".sqlite3", ".db"):
        raise InputError(f"{path}: not an SQLite database (wrong header); expected the output of `nsys export --type sqlite`")
    if suffix == ".ncu-rep":
        raise InputError(f"{path}: not an Nsight Compute report (wrong header)")
    if suffix in (".nsys-rep", ".qdrep"):
        raise InputError(f"{path}: not an Nsight Systems report (wrong header)")
    if suffix in (".csv", ".txt") or _looks_like_text(head):
        if suffix in (".csv", ".txt") or b"," in head:
            return "ncu-csv"
    raise InputError(
        f"{path}: unknown capture format; expected an nsys SQLite export (.sqlite), a raw nsys report "
        "(.nsys-rep/.qdrep), an Nsight Compute report (.ncu-rep), an `ncu --csv` export (.csv) or a PyTorch "
        "profiler trace (.json, .json.gz)"
    )


def _looks_like_text(head: bytes) -> bool:
    if b"\x00" in head:
        return False
    try:
        head.decode("utf-8")
    except UnicodeDecodeError:
        # a multi-byte character cut at the 4096-byte boundary is still text
        try:
            head[:-4].decode("utf-8")
        except UnicodeDecodeError:
            return False
    return True
