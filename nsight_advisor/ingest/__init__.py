"""Ingest: read every supported capture format into the normalized store, and nothing about rules.

``ingest_captures`` sniffs each file's format (``detect``) and hands it to the reader for that format.
A reader fills the normalized tables for one capture id, records what the capture lacks in
``capture_missing`` (with the profiler option that would have recorded it), and raises
:class:`~nsight_advisor.common.errors.InputError` with one precise line when the file cannot be read.
Readers open inputs read-only and never modify them.

The entry points (``ingest_capture``, ``ingest_captures``, ``ingest_kineto_traces``: ingest/readers.py, and
``DEFERRABLE``) load on first use, not with the package: a process that imports one reader's parser alone (the
early parse of PyTorch traces, ingest/kineto/early_parse.py, forked while the command line starts) then does not
pay for DuckDB's import.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DEFERRABLE", "ingest_capture", "ingest_captures", "ingest_kineto_traces"]


def __getattr__(name: str) -> Any:
    if name == "DEFERRABLE":
        from nsight_advisor.ingest.deferred import DEFERRABLE

        return DEFERRABLE
    if name in __all__:
        from nsight_advisor.ingest import readers

        return getattr(readers, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
