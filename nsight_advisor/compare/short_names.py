"""A kernel's short name, as Nsight Systems shows it: the demangled base name without return type, namespaces,
template arguments or parameters (``void at::native::vectorized_elementwise_kernel<4, ...>(int, ...)`` is
``vectorized_elementwise_kernel``), with the launch configuration kept when the comparison's key has one."""

from __future__ import annotations

import re

_OPEN = {"<": ">", "(": ")", "[": "]", "{": "}"}
_CLOSE = {v: k for k, v in _OPEN.items()}
#: What may remain of a demangled C++ name outside its brackets: a return type and a qualified name.
_OUTSIDE = re.compile(r"[A-Za-z0-9_:~ *&,]*")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def short_name(name: str) -> str:
    """The base name of a demangled kernel name; the name unchanged when it is not one (unbalanced brackets, or
    characters no C++ name has: a hostile or already short name is never made to say something else)."""
    if not (name[:1].isalnum() or name[:1] == "_" or name.startswith("(anonymous namespace)")):
        return name  # a demangled name starts with its return type or its name
    depth: list[str] = []
    kept = []
    for ch in name:
        if ch in _OPEN:
            depth.append(ch)
        elif ch in _CLOSE:
            if not depth or depth[-1] != _CLOSE[ch]:
                if ch == ">" and depth and depth[-1] == "(":  # '->' inside a parameter list
                    continue
                return name
            depth.pop()
        elif not depth:
            kept.append(ch)
    outside = "".join(kept).strip()
    if depth or not _OUTSIDE.fullmatch(outside):
        return name
    words = outside.replace("*", " ").replace("&", " ").split()
    if not words:
        return name
    base = words[-1].rsplit("::", 1)[-1]
    return base if _IDENT.fullmatch(base) else name


def short_kernel_key(key: str) -> str:
    """A comparison's kernel key (``name <<<(grid), (block)>>>``) with the name shortened, the launch
    configuration kept."""
    if key.endswith(">>>") and " <<<" in key:
        name, config = key.rsplit(" <<<", 1)
        return f"{short_name(name)} <<<{config}"
    return short_name(key)
