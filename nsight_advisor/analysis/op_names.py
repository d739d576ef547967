"""Tests on the names of a step graph's operations, made once per distinct name (a few hundred over a graph's rows)."""

from __future__ import annotations

import re
from typing import Any

import numpy as np


def names_matching(names: np.ndarray, pattern: str, *, regex: bool = False, lower: bool = False) -> np.ndarray:
    """Whether each of ``names`` (an object array; a missing one, None, read as empty) contains ``pattern``: a
    regular expression searched for when ``regex``, else plain text; in the lowercased name when ``lower``. Tested
    once per distinct name: an op table repeats a few hundred names over its rows (pandas' ``str.contains`` on the
    1M-kernel export's 93k replayed ops took 50 ms; on its few hundred names, well under one)."""
    return match_distinct(*distinct_names(names), pattern, regex, lower)


def distinct_names(names: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """(a code per row into the list, the distinct names in order of first appearance, with "" last for a missing
    name)."""
    index: dict[Any, int] = {}
    values = names.tolist() if isinstance(names, np.ndarray) else list(names)
    codes = np.fromiter((index.setdefault(v, len(index)) for v in values), np.int64, len(values))
    uniques = list(index)
    missing = index.get(None)
    if missing is not None:  # a missing name reads as the empty one, placed last
        uniques.pop(missing)
        codes = np.where(codes == missing, len(uniques), codes - (codes > missing))
    return codes, [*map(str, uniques), ""]


def match_distinct(codes: np.ndarray, distinct: list[str], pattern: str, regex: bool, lower: bool) -> np.ndarray:
    """Whether each row's name (``codes`` into ``distinct``, :func:`distinct_names`) contains ``pattern``."""
    texts = [t.lower() for t in distinct] if lower else distinct
    if regex:
        search = re.compile(pattern).search
        hit = [search(t) is not None for t in texts]
    else:
        hit = [pattern in t for t in texts]
    return np.asarray(hit, bool)[codes]
