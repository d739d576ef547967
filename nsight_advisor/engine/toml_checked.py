"""Typed, strict access to a rule's TOML: each failure names the file, the line of the key and the fix.

TOML parsers do not report positions, so :func:`locate` finds a key's line by a text search.
"""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path
from typing import Any, Callable, Iterable

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

from nsight_advisor.common.errors import RuleError
from nsight_advisor.common.regular_file import read_regular_text
from nsight_advisor.common import parsed_toml

PARAM_TYPES = {"int": int, "float": float, "str": str, "bool": bool}


class TomlTable:
    """A TOML table being validated: remembers which keys were read, to reject unknown ones."""

    def __init__(self, data: dict, path: Path, prefix: str = ""):
        self.data, self.path, self.prefix = data, path, prefix
        self.seen: set[str] = set()

    def key(self, name: str) -> str:
        return f"{self.prefix}{name}"

    def fail(self, name: str, problem: str, fix: str) -> RuleError:
        return RuleError(f"{locate(self.path, self.prefix, name)}: key '{self.key(name)}': {problem}; {fix}")

    def get(self, name: str, types: type | tuple[type, ...], *, required: bool = True, default: Any = None,
            fix: str = "") -> Any:
        self.seen.add(name)
        if name not in self.data:
            if required:
                raise self.fail(name, "missing", fix or f"add {self.key(name)} = ...")
            return default
        value = self.data[name]
        if isinstance(value, bool) and bool not in (types if isinstance(types, tuple) else (types,)):
            raise self.fail(name, f"expected {_type_names(types)}, got a boolean", fix or "fix the value")
        if not isinstance(value, types):
            quoted_number = isinstance(value, str) and re.fullmatch(r"\s*-?[0-9.]+(e-?[0-9]+)?\s*", value)
            hint = "remove the quotes" if quoted_number and {int, float} & set(
                types if isinstance(types, tuple) else (types,)) else (fix or "fix the value's type")
            raise self.fail(name, f"expected {_type_names(types)}, got {_toml_type(value)} {value!r}", hint)
        return value

    def choice(self, name: str, choices: Iterable[str], *, required: bool = True, default: str = "") -> str:
        value = self.get(name, str, required=required, default=default)
        choices = tuple(choices)
        if value not in choices:
            raise self.fail(name, f"{value!r} is not one of {', '.join(choices)}", "use one of those")
        return value

    def str_list(self, name: str, *, required: bool = True) -> list[str]:
        value = self.get(name, list, required=required, default=[])
        for item in value:
            if not isinstance(item, str):
                raise self.fail(name, f"expected a list of strings, found {_toml_type(item)} {item!r}",
                                "quote every item")
        return value

    def reject_unknown(self, allowed_extra: Iterable[str] = ()) -> None:
        unknown = sorted(set(self.data) - self.seen - set(allowed_extra))
        if unknown:
            known = ", ".join(sorted(self.seen))
            raise self.fail(unknown[0], "unknown key", f"remove it or use one of: {known} (docs/rule-format.md)")


_HEADER = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")


def locate(path: Path, prefix: str, name: str) -> str:
    """``path:LINE`` of key ``name`` in the table ``prefix`` ("params.x.", "requires[0].", ""), else ``path``.

    A best-effort text search (TOML parsers do not report positions): the key's line, or the table's header line
    when the key is missing.
    """
    try:
        lines = read_regular_text(path, OSError).splitlines()
    except (OSError, UnicodeDecodeError):
        return str(path)
    section = prefix.rstrip(".")
    index = None
    m = re.match(r"^(.*)\[(\d+)\]$", section)
    name_re = re.compile(rf"^\s*[\"']?{re.escape(name)}[\"']?\s*=")
    start = -1
    if section:
        wanted, nth = (m.group(1), int(m.group(2))) if m else (section, 0)
        seen = -1
        for i, line in enumerate(lines):
            h = _HEADER.match(line)
            if h and h.group(1).replace('"', "") == wanted:
                seen += 1
                if seen == nth:
                    start = i
                    break
        if start < 0:
            # keys of a table written inline or dotted (params.x = {...}): look for the last dotted part
            return _first_match(lines, re.compile(rf"^\s*{re.escape(section.split('.')[-1])}\b"), path)
    for i in range(start + 1, len(lines)):
        if _HEADER.match(lines[i]):
            break
        if name_re.match(lines[i]):
            index = i
            break
    if index is None:
        index = start if start >= 0 else None
    return f"{path}:{index + 1}" if index is not None else str(path)


def _first_match(lines: list[str], pattern: re.Pattern, path: Path) -> str:
    for i, line in enumerate(lines):
        if pattern.match(line):
            return f"{path}:{i + 1}"
    return str(path)


def _type_names(types: type | tuple[type, ...]) -> str:
    types = types if isinstance(types, tuple) else (types,)
    return " or ".join(_toml_type_name(t) for t in types)


def _toml_type_name(t: type) -> str:
    return {str: "a string", int: "an integer", float: "a number", bool: "true/false", list: "a list",
            dict: "a table"}.get(t, t.__name__)


def _toml_type(value: Any) -> str:
    return _toml_type_name(type(value)).replace("an integer", "integer").replace("a ", "")


def coerce_value(value: Any, type_name: str, where: str | Callable[[], str]) -> Any:
    """Check ``value`` against a param type (int | float | str | bool); RuleError naming ``where`` otherwise.

    ``where`` may be a function giving the text, called only for the error: finding a key's line reads its file
    again (:func:`locate`), which every rule's every parameter did on every load, about 40 ms of each analyze."""
    if type_name == "float" and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    expected = PARAM_TYPES[type_name]
    if type_name in ("int", "float") and isinstance(value, bool):
        raise RuleError(f"{_text(where)}: expected {type_name}, got a boolean {value!r}; write a number")
    if not isinstance(value, expected):
        hint = "remove the quotes" if isinstance(value, str) and type_name != "str" else f"write a {type_name}"
        raise RuleError(f"{_text(where)}: expected {type_name}, got {type(value).__name__} {value!r}; {hint}")
    if type_name == "float" and not math.isfinite(value):  # a nan threshold compares false: the rule goes silent
        raise RuleError(f"{_text(where)}: expected a finite number, got {value!r}")
    return value


def _text(where: str | Callable[[], str]) -> str:
    return where if isinstance(where, str) else where()


def read_toml(path: Path) -> dict:
    """Parse a TOML file; RuleError with the file and line when it is not valid TOML."""
    try:
        text = read_regular_text(path, RuleError)
    except FileNotFoundError:
        raise RuleError(f"{path}: missing; every rule folder needs rule.toml, query.sql and cases.toml") from None
    except UnicodeDecodeError as exc:
        raise RuleError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        return parsed_toml.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise RuleError(f"{path}: invalid TOML: {exc}") from None
