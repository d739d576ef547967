"""Stream the elements of one array member of a top-level JSON object, with the standard library's C scanner.

``json``'s scanner (``JSONDecoder.scan_once``) decodes one value from a position in a string; this module feeds it
a window of the file (:data:`READ_BYTES` at a time, more while one value is longer) and steps from element to
element of the array, so memory holds the window and one element, never the file. It is the same parser
``json.loads`` uses, which decodes a Kineto trace's events in about 30% less CPU time than ijson's C backend
(docs/performance.md). Numbers with a fraction or an exponent come out as ``decimal.Decimal`` from the file's own
digits (rounded to 60 significant digits); whole numbers as ``int``; ``NaN`` and ``Infinity`` (not JSON) are refused.

The reader has limits, so that no input costs more than time and memory in proportion to its size
(:class:`JSONLimit`, docs/robustness.md): one value (an event, a header member, a string) of at most
:data:`MAX_VALUE_CHARS` characters; numbers within ±10^:data:`MAX_EXPONENT`; whole numbers of at most
Python's 4,300 digits; values nested at most :data:`MAX_VALUE_DEPTH` levels (an event is level 1, its ``args``
level 2), header members :data:`MAX_HEADER_DEPTH`. Space between values is dropped as it is read, never held.

Everything after the array is read too, up to the object's closing brace, so a file cut short anywhere is
reported (:class:`TruncatedJSON`), as is text that is not JSON (:class:`BadJSON`, with its character offset).
"""

from __future__ import annotations

import codecs
import decimal
import json
import re
from typing import IO, Iterator

#: Bytes read from the file per refill of the window.
READ_BYTES = 1 << 20

_SPACE = re.compile(r"[ \t\n\r]*")
# What may follow an element of the array: a comma or the closing bracket, with whitespace either side.
_AFTER_ELEMENT = re.compile(r"[ \t\n\r]*([,\]])[ \t\n\r]*")
# A value cut by the window's end fails within this many characters of it (a cut literal, number or escape);
# an unterminated string fails where the string starts, so it always asks for more text.
_CUT_MARGIN = 12
# The end of a text cut inside a literal or a number ("nu", "1.", "-"): truncated rather than bad.
_CUT_TAIL = re.compile(r"(?:n(?:u(?:ll?)?)?|t(?:r(?:ue?)?)?|f(?:a(?:l(?:se?)?)?)?|[-+.eE0-9]{1,11})")
# Characters left in the window below which the element loop refills it first.
_AHEAD = 64 * 1024

#: Longest single value (an event, a header member, a string) in characters: a trace's events are a few hundred
#: characters and its header a few kilobytes; a longer value is refused rather than held in memory.
MAX_VALUE_CHARS = 16 << 20

#: Largest decimal exponent of a number (as a double's): 1e999990 would cost a minute of CPU to convert.
MAX_EXPONENT = 308

#: Deepest nesting of a value (an event is level 1, its ``args`` level 2, a list in them level 3): Kineto writes 4
#: at most (``"Input Dims": [[1, 2], [3]]``). Deeper is refused: the check costs time in proportion to the value's
#: size, and only a value with more than this many brackets is walked at all. Python's scanner would recurse to
#: about 900 levels before it fails.
MAX_VALUE_DEPTH = 64

#: Deepest nesting of a header member (members before the array): Kineto's are 3 levels deep at most.
MAX_HEADER_DEPTH = 32

# Fractional numbers: Decimals of the file's digits, rounded to 60 significant digits (more than any time stamp
# needs), an exponent beyond ±MAX_EXPONENT refused (tiny ones become 0).
_NUMBERS = decimal.Context(prec=60, Emax=MAX_EXPONENT, Emin=-MAX_EXPONENT,
                           traps=[decimal.Overflow, decimal.InvalidOperation])


class TruncatedJSON(ValueError):
    """The text ends inside the JSON value."""


class BadJSON(ValueError):
    """The text is not JSON; the message says what was expected and at which character."""


class JSONLimit(ValueError):
    """The text is JSON (or may be) but passes one of the reader's limits; the message says which and where."""


class _TooDeep(JSONLimit):
    """A value nested deeper than the limit it was read with."""


def _too_deep_error(at: int, max_depth: int) -> _TooDeep:
    return _TooDeep(f"a value nested deeper than {max_depth} levels at character {at:,}")


def _limit_error(exc: BaseException, at: int, max_depth: int) -> JSONLimit:
    """The reader's limit that ``exc``, raised by the scanner in the value at character ``at``, stands for."""
    where = f"in the value at character {at:,}"
    if isinstance(exc, RecursionError):  # the scanner's own limit (~900 levels) is far past ``max_depth``
        return _too_deep_error(at, max_depth)
    if isinstance(exc, ArithmeticError):
        return JSONLimit(f"a number beyond 1e{MAX_EXPONENT} {where}")
    if "digits" in str(exc):
        return JSONLimit(f"a whole number of more than 4,300 digits {where}")
    return JSONLimit(f"{str(exc)[:100]} {where}")


def _refuse_constant(name: str):
    raise BadJSON(f"{name} is not a JSON number")


class _Window:
    """The decoded text of a byte stream from the first unread character on, refilled on demand."""

    def __init__(self, fh: IO[bytes], read_bytes: int) -> None:
        self.fh, self.read_bytes = fh, read_bytes
        self.decode = codecs.getincrementaldecoder("utf-8-sig")().decode  # a split character waits for its rest
        self.buf, self.pos, self.offset, self.eof = "", 0, 0, False
        decoder = json.JSONDecoder(parse_float=_NUMBERS.create_decimal, parse_constant=_refuse_constant)
        self.scan = decoder.scan_once

    def refill(self) -> bool:
        """Drop the read text and append the next chunk, at least as long as what is pending (so a long value
        costs a few rescans, not one per chunk). False at the end of the stream."""
        if self.eof:
            return False
        pending = len(self.buf) - self.pos
        if pending > MAX_VALUE_CHARS:
            raise JSONLimit(f"a value longer than {MAX_VALUE_CHARS:,} characters at character {self.offset + self.pos:,}")
        data = self.fh.read(max(self.read_bytes, pending))
        try:
            text = self.decode(data, final=not data)
        except UnicodeDecodeError as exc:
            if not data and exc.reason == "unexpected end of data":  # cut inside a character
                raise TruncatedJSON("the text ends inside the JSON") from None
            raise
        self.offset += self.pos
        self.buf, self.pos = self.buf[self.pos:] + text, 0
        self.eof = not data
        return True

    def skip_space(self) -> None:
        while True:
            self.pos = _SPACE.match(self.buf, self.pos).end()
            if self.pos < len(self.buf) or not self.refill():
                return

    def peek(self) -> str:
        """The next non-space character; TruncatedJSON at the end of the text."""
        self.skip_space()
        if self.pos >= len(self.buf):
            raise TruncatedJSON("the text ends inside the JSON")
        return self.buf[self.pos]

    def expect(self, char: str) -> None:
        if self.peek() != char:
            self.bad(f"expecting {char!r}")
        self.pos += 1

    def bad(self, what: str, pos: int | None = None):
        raise BadJSON(f"{what} at character {self.offset + (self.pos if pos is None else pos):,}")

    def value(self, max_depth: int = MAX_VALUE_DEPTH):
        """The next value (whitespace before it skipped); the window moves past it. _TooDeep when it is nested
        deeper than ``max_depth`` levels."""
        self.skip_space()
        while True:
            try:
                obj, end = self.scan(self.buf, self.pos)
            except StopIteration as stop:  # its value: where a value was expected (maybe inside this one)
                self.retry_or_raise("expecting a value", stop.value)
                continue
            except json.JSONDecodeError as exc:
                cut = exc.msg.startswith("Unterminated string") or (
                    exc.msg.startswith("Invalid \\uXXXX") and exc.pos > len(self.buf) - 6)
                self.retry_or_raise(exc.msg, exc.pos, cut)
                continue
            except BadJSON:
                raise
            except (ValueError, ArithmeticError, RecursionError) as exc:
                raise _limit_error(exc, self.offset + self.pos, max_depth) from None
            if end > len(self.buf) - _CUT_MARGIN and self.refill():  # a number ("1." of "1.5") may be cut
                continue
            if _too_deep(self.buf, self.pos, end, obj, max_depth):
                raise _too_deep_error(self.offset + self.pos, max_depth)
            self.pos = end
            return obj

    def retry_or_raise(self, what: str, pos: int, unterminated: bool = False) -> None:
        """After a failed scan: refill when the window's end may have cut the value, else raise.
        ``unterminated``: the scan ran to the window's end (a string or escape that is not finished)."""
        if (unterminated or pos > len(self.buf) - _CUT_MARGIN) and self.refill():
            return
        if unterminated or pos >= len(self.buf) or _CUT_TAIL.fullmatch(self.buf, pos):  # at the text's end
            raise TruncatedJSON("the text ends inside the JSON")
        self.bad(what[:1].lower() + what[1:], pos)

    def after_element(self) -> bool:
        """Past the comma or bracket after an array element: True when another element follows.

        Space is dropped as it is read (a refill keeps only the unread text), so a long run of it costs time in
        proportion to its length and no memory."""
        while True:
            self.skip_space()
            if self.pos >= len(self.buf):
                raise TruncatedJSON("the text ends inside the JSON")
            char = self.buf[self.pos]
            if char not in ",]":
                self.bad("expecting ',' or ']' after an array element")
            self.pos += 1
            self.skip_space()
            return char == ","


def iter_array(fh: IO[bytes], key: str, *, read_bytes: int = READ_BYTES) -> Iterator:
    """Each element of the array that is member ``key`` of the top-level object in ``fh``, one at a time.

    Raises BadJSON (not JSON, or ``key`` absent or not an array), TruncatedJSON (the text ends early),
    UnicodeDecodeError (not UTF-8) or JSONLimit (past one of the reader's limits).
    """
    w = _Window(fh, read_bytes)
    w.expect("{")
    if not _find_member(w, key):
        w.bad(f"no {key!r} member before the end of the object")
    w.expect("[")
    if w.peek() == "]":
        w.pos += 1
    else:
        yield from _elements(w)
    _finish_object(w)


def _elements(w: _Window) -> Iterator:
    """The array's elements, from its first to past its closing bracket.

    The hot path of a trace's read: the window's text and position are held in locals, and the window is
    refilled before fewer than :data:`_AHEAD` characters are left, so an element is cut by the window's end
    (and decoded again by the slow path, :meth:`_Window.value`) only when it is longer than that.
    """
    scan, after = w.scan, _AFTER_ELEMENT.match
    buf, pos, ahead = w.buf, w.pos, len(w.buf) - _AHEAD
    count = buf.count  # an element's depth is at most the brackets in its text (see _too_deep)
    while True:
        if pos > ahead and not w.eof:
            w.pos = pos
            w.refill()
            buf, pos, ahead = w.buf, w.pos, len(w.buf) - _AHEAD
            count = buf.count
        try:
            obj, end = scan(buf, pos)
            if end > len(buf) - _CUT_MARGIN or count("[", pos, end) + count("{", pos, end) > MAX_VALUE_DEPTH:
                raise StopIteration  # maybe cut by the window's end, or maybe too deep: the slow path checks
            pos = end
        except Exception:  # noqa: BLE001 - the slow path scans again and says what is wrong
            w.pos = pos
            obj = w.value()
            buf, pos, ahead = w.buf, w.pos, len(w.buf) - _AHEAD
            count = buf.count
        yield obj
        m = after(buf, pos)
        if m is not None and m.end() < len(buf):
            pos = m.end()
            if m.group(1) == "]":
                break
        else:
            w.pos = pos
            more = w.after_element()
            buf, pos, ahead = w.buf, w.pos, len(w.buf) - _AHEAD
            count = buf.count
            if not more:
                break
    w.pos = pos


def members_before(fh: IO[bytes], key: str, *, read_bytes: int = READ_BYTES) -> dict | None:
    """The members of the top-level object in ``fh`` written before member ``key``, when ``key`` is there and its
    value starts an array; None when the object ends without ``key``.

    Raises BadJSON (the top level is no object, ``key`` is not an array, or not JSON), TruncatedJSON, JSONLimit (a
    member nested deeper than :data:`MAX_HEADER_DEPTH`, or past the reader's limits) or UnicodeDecodeError.
    """
    w = _Window(fh, read_bytes)
    if w.peek() != "{":
        raise BadJSON("its top level is no object")
    w.pos += 1
    out: dict = {}
    if w.peek() == "}":
        return None
    while True:
        name = w.value()
        if type(name) is not str:
            w.bad("expecting a member name")
        w.expect(":")
        if name == key:
            if w.peek() != "[":
                raise BadJSON(f"{key} is no array")
            return out
        start = w.offset + w.pos
        try:
            out[name] = w.value(MAX_HEADER_DEPTH)
        except _TooDeep:
            raise JSONLimit(f"member {name[:40]!r} nested deeper than {MAX_HEADER_DEPTH} levels at character "
                            f"{start:,}") from None
        char = w.peek()
        w.pos += 1
        if char == "}":
            return None
        if char != ",":
            w.bad("expecting ',' or '}'", w.pos - 1)


def _too_deep(text: str, start: int, end: int, value, max_depth: int) -> bool:
    """Whether ``value``, decoded from ``text[start:end]``, is nested deeper than ``max_depth`` levels. Its depth is
    at most the number of opening brackets in its text, counted at C speed: most values are never walked."""
    if text.count("[", start, end) + text.count("{", start, end) <= max_depth:
        return False
    return _depth(value) > max_depth


def _depth(value) -> int:
    """Nesting depth of a decoded value (a scalar is 0), without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            item = list(item.values())
        elif not isinstance(item, list):
            continue
        deepest = max(deepest, level)
        stack.extend((v, level + 1) for v in item if isinstance(v, (dict, list)))
    return deepest


def _find_member(w: _Window, key: str) -> bool:
    """Move past the ':' of member ``key`` of the object just opened; False when the object ends first."""
    if w.peek() == "}":
        return False
    while True:
        name = w.value()
        if type(name) is not str:
            w.bad("expecting a member name")
        w.expect(":")
        if name == key:
            return True
        w.value()
        char = w.peek()
        w.pos += 1
        if char == "}":
            return False
        if char != ",":
            w.bad("expecting ',' or '}'", w.pos - 1)


def _finish_object(w: _Window) -> None:
    """Read the members after the array to the object's end, then nothing but space."""
    while True:
        char = w.peek()
        w.pos += 1
        if char == "}":
            break
        if char != ",":
            w.bad("expecting ',' or '}'", w.pos - 1)
        if type(w.value()) is not str:
            w.bad("expecting a member name")
        w.expect(":")
        w.value()
    w.skip_space()
    if w.pos < len(w.buf):
        w.bad("text after the end of the JSON")


__all__ = ["iter_array", "members_before", "TruncatedJSON", "BadJSON", "JSONLimit", "READ_BYTES", "MAX_VALUE_CHARS",
           "MAX_EXPONENT", "MAX_HEADER_DEPTH", "MAX_VALUE_DEPTH"]
