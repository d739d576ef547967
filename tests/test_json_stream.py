"""The windowed JSON array reader the Kineto ingest streams events with (nsight_advisor/ingest/kineto/json_stream.py).

Every element must equal what ``json.loads`` (with Decimal fractions) makes of the whole text, whatever the window
size, so that values cut by the window's end are never read short; a text cut anywhere is TruncatedJSON, and text
that is not JSON is BadJSON, never a silently shorter list.
"""

from __future__ import annotations

import io
import json
from decimal import Decimal

import pytest

from nsight_advisor.ingest.kineto.json_stream import BadJSON, TruncatedJSON, iter_array

# Fractions, exponents, escapes, a surrogate pair, multi-byte UTF-8, nesting and non-object elements.
_DOC = (
    '{"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "A100"}], "traceEvents": [\n'
    + ",\n".join(
        json.dumps({"ph": "X", "cat": "kernel", "name": f"k\u00e9\u20ac{i}\\\"\n\U0001F600", "pid": i,
                    "args": {"grid": [1, 2, 3], "x": None, "ok": True}}, ensure_ascii=i % 2 == 0)
        .replace('"pid"', f'"ts": 4458684537537.{i:03d}, "dur": 1e3, "pid"')
        for i in range(120))
    + ',\n5, "s", -1.25E-2, null, [], {}\n], "traceName": "t", "baseTimeNanoseconds": 17}\n'
)
_DATA = _DOC.encode()
_EXPECTED = json.loads(_DOC, parse_float=Decimal)["traceEvents"]


def _read(data: bytes, read_bytes: int = 1 << 20) -> list:
    return list(iter_array(io.BytesIO(data), "traceEvents", read_bytes=read_bytes))


@pytest.mark.parametrize("read_bytes", [1, 2, 3, 5, 17, 64, 1000, 1 << 20])
def test_elements_equal_json_loads_whatever_the_window(read_bytes: int) -> None:
    got = _read(_DATA, read_bytes)
    assert got == _EXPECTED
    assert got[0]["ts"] == Decimal("4458684537537.000") and str(got[7]["ts"]) == "4458684537537.007"
    assert type(got[0]["pid"]) is int and got[0]["dur"] == Decimal("1e3")


def test_a_text_cut_anywhere_is_truncated_never_short() -> None:
    for cut in range(0, len(_DATA) - 2, 7):
        with pytest.raises(TruncatedJSON):
            _read(_DATA[:cut], read_bytes=13)


@pytest.mark.parametrize("text, error", [
    (b'{"traceEvents": [1,,2]}', "expecting a value at character 19"),
    (b'{"traceEvents": [1 2]}', "expecting ',' or ']'"),
    (b'{"traceEvents": [NaN]}', "NaN is not a JSON number"),
    (b'{"traceEvents": [1]} x', "text after the end"),
    (b'{"x": 1}', "no 'traceEvents' member"),
    (b'[1]', "expecting '{'"),
    (b'{"traceEvents": [1], 3: 4}', "expecting a member name"),
    (b'{"traceEvents": [{"a" 1}]}', "expecting ':' delimiter"),
])
def test_text_that_is_not_json_is_bad_json(text: bytes, error: str) -> None:
    for read_bytes in (1, 4, 1 << 20):
        with pytest.raises(BadJSON, match=error.replace("[", r"\[")):
            _read(text, read_bytes)


def test_empty_array_bom_and_members_after_it() -> None:
    assert _read(b'\xef\xbb\xbf {"traceEvents" : [ ] , "x": [1]} \n') == []
    with pytest.raises(TruncatedJSON):
        _read(b'{"traceEvents": [], "x": 1')


def test_an_element_longer_than_the_window() -> None:
    big = '{"traceEvents": [{"name": "' + "k" * 300_000 + '"}, 1]}'
    assert _read(big.encode(), read_bytes=1000) == [{"name": "k" * 300_000}, 1]


def _event_with_args_nested(depth: int, *, brackets_beside: int = 0) -> bytes:
    """An event whose ``args`` is ``depth`` - 1 levels deep (the event level 1, ``args`` level 2); ``brackets_beside``
    shallow lists beside it (many brackets, no depth)."""
    inner = "[" * (depth - 2) + "1" + "]" * (depth - 2)
    beside = ", ".join("[1]" for _ in range(brackets_beside))
    return (f'{{"traceEvents": [{{"ph": "X", "beside": [{beside}]}}, '
            f'{{"ph": "X", "args": {{"x": {inner}}}}}]}}').encode()


@pytest.mark.parametrize("read_bytes", [7, 1 << 20])
def test_events_nested_up_to_the_limit_are_read_and_deeper_is_refused(read_bytes: int) -> None:
    """MAX_VALUE_DEPTH (64) is a policy: an event of 64 levels is read, one of 65 is refused, naming where."""
    from nsight_advisor.ingest.kineto.json_stream import MAX_VALUE_DEPTH, JSONLimit

    assert MAX_VALUE_DEPTH == 64
    events = _read(_event_with_args_nested(64, brackets_beside=500), read_bytes)  # 500 brackets, 3 levels: read
    assert len(events) == 2 and len(events[0]["beside"]) == 500
    deep = _event_with_args_nested(65)
    at = deep.index(b'{"ph": "X", "args"')  # the event at fault is named, by its first character
    with pytest.raises(JSONLimit, match=f"^a value nested deeper than 64 levels at character {at}$"):
        _read(deep, read_bytes)


def test_an_event_nested_200000_deep_fails_at_once_with_the_limit() -> None:
    """The scanner's own recursion limit (~900) is met first: the same limit is named, in time bounded by the input."""
    import time

    from nsight_advisor.ingest.kineto.json_stream import JSONLimit

    data = b'{"traceEvents": [{"ph": "X", "args": ' + b"[" * 200_000 + b"]" * 200_000 + b"}]}"
    started = time.monotonic()
    with pytest.raises(JSONLimit, match="nested deeper than 64 levels"):
        _read(data)
    assert time.monotonic() - started < 5
