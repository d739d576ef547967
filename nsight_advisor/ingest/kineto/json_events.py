"""Stream a PyTorch profiler (Kineto) trace: its header and its events, one at a time, never the whole file.

A Kineto trace is Chrome-trace JSON, usually gzipped: one object whose ``traceEvents`` array holds every event,
and beside it ``schemaVersion``, ``deviceProperties`` and ``distributedInfo``, which Kineto writes before the
events (``traceName`` and ``baseTimeNanoseconds`` come after them and are not read). The header and the events
are read with the standard library's C scanner (:mod:`.json_stream`), within the reader's limits on a value's
length, a number's size and nesting, which builds one small dict per event and keeps nothing else
(docs/performance.md compares it with ijson's C backend and DuckDB's JSON reader).

Numbers with a fraction come out as ``decimal.Decimal`` built from the file's own digits, so a timestamp in
microseconds becomes integer nanoseconds exactly (:func:`to_ns`), with no float in between.
"""

from __future__ import annotations

import gzip
import zlib
from decimal import Decimal, localcontext
from pathlib import Path
from typing import IO, Iterator

from nsight_advisor.common.errors import InputError
from nsight_advisor.ingest.kineto.json_stream import BadJSON, JSONLimit, TruncatedJSON, iter_array, members_before
from nsight_advisor.common.text import first_line

GZIP_MAGIC = b"\x1f\x8b"

#: Top-level keys that mark a JSON file as a Kineto trace (any one of them within the sniffed head).
MARKER_KEYS = ("traceEvents", "schemaVersion", "deviceProperties", "distributedInfo")

#: Bytes of (decompressed) text detection looks at.
SNIFF_BYTES = 64 * 1024

#: Bytes read from the file per parser call.
READ_BYTES = 1 << 20

#: A gzipped trace's JSON is about this many times its size on disk (what the parse reads: :func:`json_bytes`).
GZIP_WEIGHT = 8


def json_bytes(path: Path) -> int:
    """About how many bytes of JSON the trace at ``path`` holds: its size, :data:`GZIP_WEIGHT` times it when
    gzipped (by name). OSError when it cannot be read."""
    size = path.stat().st_size
    return size * GZIP_WEIGHT if path.name.endswith(".gz") else size


def sniff(path: Path, head: bytes) -> str | None:
    """``'kineto-json'`` when ``head`` (the file's first bytes) starts a Kineto trace, ``'json'`` for other JSON,
    ``'gzip'`` for other gzip data, else None. A gzip head is decompressed (its first :data:`SNIFF_BYTES`)."""
    gz = head.startswith(GZIP_MAGIC)
    if gz:
        try:
            with gzip.open(path, "rb") as fh:
                head = fh.read(SNIFF_BYTES)
        except (OSError, EOFError, zlib.error):
            return "gzip"  # the ingest of whatever it is says what is wrong with it
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if not text.startswith((b"{", b"[")):
        return "gzip" if gz else None
    if not gz and len(head) < SNIFF_BYTES:
        with open(path, "rb") as fh:
            head = fh.read(SNIFF_BYTES)
    if any(b'"' + key.encode() + b'"' in head for key in MARKER_KEYS):
        return "kineto-json"
    return "json"


def open_text(path: Path) -> IO[bytes]:
    """The trace's JSON bytes: the file itself, or its decompressed content when it is gzipped."""
    with open(path, "rb") as fh:
        gz = fh.read(2) == GZIP_MAGIC
    return gzip.open(path, "rb") if gz else open(path, "rb")


def read_header(path: Path) -> dict:
    """The top-level members written before ``traceEvents`` (schemaVersion, deviceProperties, distributedInfo...).

    Read with the same bounded reader as the events (:func:`~.json_stream.members_before`). Raises InputError when
    the file is not a JSON object, has no ``traceEvents`` array, or passes one of the reader's limits.
    """
    try:
        with open_text(path) as fh:
            header = members_before(fh, "traceEvents", read_bytes=READ_BYTES)
    except BadJSON as exc:
        text = str(exc)
        if text in ("its top level is no object", "traceEvents is no array"):
            raise InputError(f"{path}: JSON that is not a PyTorch profiler trace ({text})") from None
        raise input_error(path, exc) from None
    except Exception as exc:  # noqa: BLE001 - every read or parse error of the input becomes one line
        raise input_error(path, exc) from None
    if header is None:
        raise InputError(f"{path}: JSON that is not a PyTorch profiler trace (no traceEvents array)")
    return header


def iter_events(path: Path) -> Iterator[dict]:
    """Every element of ``traceEvents``, one dict at a time. Errors of the input surface as InputError."""
    try:
        with open_text(path) as fh:
            yield from iter_array(fh, "traceEvents", read_bytes=READ_BYTES)
    except InputError:
        raise
    except Exception as exc:  # noqa: BLE001 - see read_header
        raise input_error(path, exc) from None


def input_error(path: Path, exc: BaseException) -> InputError:
    """One line saying why the trace at ``path`` cannot be read, for a read or parse error ``exc``."""
    text = first_line(exc)
    if isinstance(exc, JSONLimit):
        return InputError(f"{path}: {text[:200]}; a limit of the trace reader (docs/robustness.md)")
    if isinstance(exc, RecursionError):
        return InputError(f"{path}: values nested too deeply for the trace reader (docs/robustness.md)")
    if isinstance(exc, TruncatedJSON):
        return InputError(f"{path}: truncated JSON (the file ends inside the trace); copy the trace again")
    if isinstance(exc, BadJSON):
        return InputError(f"{path}: not valid JSON ({text[:200]})")
    if isinstance(exc, EOFError) or "end-of-stream" in text:
        return InputError(f"{path}: truncated gzip file ({text}); copy the trace again")
    if isinstance(exc, (zlib.error, gzip.BadGzipFile)):
        return InputError(f"{path}: corrupt gzip data ({text})")
    if isinstance(exc, UnicodeDecodeError):
        return InputError(f"{path}: not UTF-8 text ({text[:200]})")
    if isinstance(exc, OSError):
        return InputError(f"{path}: cannot be read ({exc.strerror or text})")
    raise exc


def to_ns(value, what: str) -> int:
    """Microseconds as written in the trace (an int, or a Decimal of its digits) as integer nanoseconds.

    Exact for up to three fraction digits (all Kineto writes); finer digits are cut off (toward zero), as
    ``int(value * 1000)`` does in the ingest's loop. Raises ValueError naming ``what`` for anything that is not
    a number.
    """
    if type(value) in (int, Decimal):
        with localcontext() as ctx:
            ctx.prec = 60
            return int(value * 1000)
    raise ValueError(f"{what} is {_shown(value)}, not a number")


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


__all__ = ["sniff", "open_text", "read_header", "iter_events", "input_error", "to_ns", "MARKER_KEYS"]
