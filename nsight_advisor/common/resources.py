"""Where the shipped data folders are, installed or run from a source checkout.

In the repository ``rules/`` and ``report_templates/`` sit at the top level (the design card's layout);
the wheel maps them into the package as ``nsight_advisor/_rules`` and ``nsight_advisor/_templates``.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent.parent  # the nsight_advisor package


def _first_existing(*candidates: Path) -> Path:
    for candidate in candidates:
        if candidate.is_dir():
            return candidate
    return candidates[0]


def builtin_rules_dir() -> Path:
    """The folder holding the built-in rule folders."""
    return _first_existing(_PACKAGE_DIR / "_rules", _PACKAGE_DIR.parent / "rules")


def templates_dir() -> Path:
    """The folder holding the report templates."""
    return _first_existing(_PACKAGE_DIR / "_templates", _PACKAGE_DIR.parent / "report_templates")
