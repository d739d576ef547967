"""The severities of a finding, in order, and their rank: the one place the order is written."""

from __future__ import annotations

SEVERITIES = ("info", "warning", "error")


def severity_rank(severity: str) -> int:
    """0 for info, 1 for warning, 2 for error; -1 for anything else (so an unknown severity sorts last)."""
    return SEVERITIES.index(severity) if severity in SEVERITIES else -1
