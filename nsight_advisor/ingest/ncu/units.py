"""Nsight Compute units: parse the unit spellings of every ncu version and convert values to base units.

Base units stored in ``ncu_metrics.unit``: ``ns`` for times, ``byte`` for sizes, ``<x>/second`` for rates
(``byte/second``, ``sector/second``), ``hz`` for clock rates, and every other unit as ncu wrote it
(``%``, ``cycle``, ``inst``, ``byte/cycle``, ``''`` for plain counts).

Spellings seen: ncu 2024.1 and older CSV print scaled units (``usecond``, ``msecond``, ``Kbyte``,
``Gbyte/second``, ``cycle/nsecond``, ``sector/usecond``); ncu 2025+ and ``ncu_report`` print short base units
(``ns``, ``byte/s``, ``hz``). Byte prefixes scale by 1000, not 1024 (ncu 2019.1 and newer).
"""

from __future__ import annotations

import re

_TIME_NS = {
    "nsecond": 1.0, "ns": 1.0,
    "usecond": 1e3, "us": 1e3,
    "msecond": 1e6, "ms": 1e6,
    "second": 1e9, "s": 1e9,
}
_SI = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_FREQ_HZ = {"hz": 1.0, "khz": 1e3, "mhz": 1e6, "ghz": 1e9}
# Quantities ncu prints with an SI prefix when it auto-scales (Kbyte, Gbyte, Ksector, Minst ...).
_SCALED = re.compile(r"^([KMGTP]?)(byte|bytes|sector|sectors|inst|cycle|cycles|request|requests|warp|warps|thread|threads|block|blocks)$")


def _numerator(unit: str) -> tuple[float, str]:
    """(factor, base) for one side of a unit: time → ns, SI-scaled quantities → their base."""
    if unit in _TIME_NS:
        return _TIME_NS[unit], "ns"
    match = _SCALED.match(unit)
    if match:
        return _SI[match.group(1)], match.group(2)
    return 1.0, unit


def to_base(value: float | None, unit: str | None) -> tuple[float | None, str]:
    """Convert ``value`` given in ``unit`` to base units; returns ``(value, base_unit)``.

    >>> to_base(10.72, "usecond")
    (10720.0, 'ns')
    >>> to_base(76.441791, "Gbyte/second")[1]
    'byte/second'
    """
    unit = (unit or "").strip()
    factor, base = unit_factor(unit)
    if value is None:
        return None, base
    return value * factor, base


def unit_factor(unit: str | None) -> tuple[float, str]:
    """(multiplier, base unit) that turns a value in ``unit`` into base units."""
    unit = (unit or "").strip()
    if not unit or unit == "%":
        return 1.0, unit
    lowered = unit.lower()
    if lowered in _FREQ_HZ:
        return _FREQ_HZ[lowered], "hz"
    if "/" in unit:
        num, _, den = unit.partition("/")
        num_factor, num_base = _numerator(num)
        if den in _TIME_NS:
            # a rate: per ns/us/ms/s -> per second
            per_second = 1e9 / _TIME_NS[den]
            if num_base == "ns":  # time per time is a plain ratio
                return num_factor / _TIME_NS[den], ""
            if num_base in ("cycle", "cycles"):
                return num_factor * per_second, "hz"
            return num_factor * per_second, f"{num_base}/second"
        den_factor, den_base = _numerator(den)
        return num_factor / den_factor, f"{num_base}/{den_base}"
    factor, base = _numerator(unit)
    return factor, base


__all__ = ["to_base", "unit_factor"]
