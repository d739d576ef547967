"""A kernel's short name from its demangled name, as every reader of a capture writes ``short_name``."""

from __future__ import annotations

import functools
import re

_BRACKETS = re.compile(r"([<>])")
_PARENS = re.compile(r"[()]")


@functools.lru_cache(maxsize=8192)
def short_kernel_name(name: str | None) -> str | None:
    """Base function name of a demangled kernel name: no return type, namespace, template or arguments.

    Kept per distinct name for the process: a job's ranks repeat the same few hundred names, and a name of a C++
    template runs to hundreds of characters (the eight DLRM ranks: 0.18 s, one character at a time, per rank).

    >>> short_kernel_name("void computeValue<float>(unsigned int*, curandStateXORWOW*, unsigned int)")
    'computeValue'
    """
    if not name:
        return name
    text = name.strip()
    # drop the argument list: the last balanced (...) at the end
    if text.endswith(")"):
        depth = 0
        for paren in reversed(list(_PARENS.finditer(text))):
            depth += 1 if paren.group() == ")" else -1
            if depth == 0:
                text = text[:paren.start()]
                break
    # drop template arguments at every depth (an unmatched ">" is dropped as well)
    out, depth = [], 0
    for piece in _BRACKETS.split(text):
        if piece == "<":
            depth += 1
        elif piece == ">":
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(piece)
    text = "".join(out).strip()
    text = text.split(" ")[-1] if " " in text else text
    text = text.split("::")[-1] if "::" in text else text
    return text or name
