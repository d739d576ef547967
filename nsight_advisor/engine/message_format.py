"""The formatter for rule messages and fixes: fields by name only, widths bounded.

A rule's ``message`` and ``fix`` are ``str.format`` templates written by whoever wrote the rule folder, and
Python's formatter would follow any attribute or index in a field (``{top.__init__.__globals__[...]}`` reaches
module globals and the environment) and honour any width (``{rows:>1000000000}`` is a 1 GB string). This one
allows exactly the names the engine passes (``rows``, ``impact``, the params, ...) and ``top.COLUMN``, and
refuses a width or precision above :data:`MAX_WIDTH`.
"""

from __future__ import annotations

import decimal
import re
import string
from typing import Any, Mapping, Sequence

from nsight_advisor.common.text import format_duration_ns

#: The largest width or precision a format spec may ask for.
MAX_WIDTH = 200

_FIELD = re.compile(r"(?P<name>[A-Za-z][A-Za-z0-9_]*)(?:\.(?P<column>[A-Za-z][A-Za-z0-9_]*))?\Z")
_NUMBERS = re.compile(r"\d+")


class MessageFormatter(string.Formatter):
    """``string.Formatter`` restricted to ``{name}`` and ``{top.column}`` with bounded widths.

    An unknown or disallowed field raises KeyError; a width beyond :data:`MAX_WIDTH` raises ValueError. A NULL
    prints as ``n/a``, and a value that does not suit a numeric spec prints as text instead of failing the rule.
    """

    def get_field(self, field_name: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> tuple[Any, str]:
        m = _FIELD.match(field_name)
        if m is None or (m.group("column") is not None and m.group("name") != "top"):
            raise KeyError(field_name)
        value = kwargs[m.group("name")]
        if m.group("column") is not None:
            value = getattr(value, m.group("column"))  # the top row's column (AttributeError when absent)
        return value, m.group("name")

    def format_field(self, value: Any, format_spec: str) -> str:
        if any(int(n) > MAX_WIDTH for n in _NUMBERS.findall(format_spec)):
            raise ValueError(f"format spec {format_spec!r} asks for more than {MAX_WIDTH} characters")
        if value is None:
            return "n/a"
        if isinstance(value, decimal.Decimal):
            value = float(value)
        if format_spec == "time":  # a duration in ns, written as people read it: '4.49 ms'
            return format_duration_ns(value)
        try:
            return super().format_field(value, format_spec)
        except (ValueError, TypeError):
            return str(value)


class RuleRunError(Exception):
    """The rule could not run on this capture; the message is the outcome's reason."""


def format_message(template: str, context: dict[str, Any]) -> str:
    """Fill a message template; RuleRunError naming the placeholder when one is unknown."""
    try:
        return MessageFormatter().vformat(template, (), context)
    except (KeyError, AttributeError, IndexError) as exc:
        raise RuleRunError(f"message placeholder {exc} is unknown (names: rows, impact, impact_pct, threshold, "
                           "observed, group, top.COLUMN and the params)") from None
    except ValueError as exc:
        raise RuleRunError(f"message template is malformed: {exc}") from None


def message_fields(template: str) -> list[str]:
    """Field names a template uses (``top.name`` kept whole); ValueError when malformed."""
    return [f for _, f, _, _ in string.Formatter().parse(template) if f is not None]
