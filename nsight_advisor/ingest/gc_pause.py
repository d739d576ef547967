"""Python's cyclic garbage collector paused while an ingest streams rows it builds by the thousand."""

from __future__ import annotations

import contextlib
import gc


@contextlib.contextmanager
def gc_paused():
    """Python's cyclic garbage collector off for a block (restored after). A stream of events makes dicts, tuples,
    Arrow and numpy objects by the thousand with no cycles among them; collections would only traverse them
    (their cost: docs/performance.md)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
