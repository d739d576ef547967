"""A job's small PyTorch traces parsed on two cores: a forked child parses the later traces while this process parses
the earlier ones, then hands back what it read for this process to stage, in order, as if it had read it itself.

The parse (JSON elements into rows, rows into Arrow batches) is most of a small trace's ingest and is Python: one
core. The 8 DLRM ranks parse in 0.2 to 0.3 s of a 0.35 to 0.45 s ingest, while the second core idles.

Why a fork here, when the store never forks an ingest worker (store/parallel_ingest.py starts fresh interpreters:
a fork would copy the parent's DuckDB threads mid-flight): this child never touches DuckDB. It parses files into
Python and Arrow objects and hands them back (common/forked_child.py). Whatever goes wrong in it (a trace that
cannot be read, an object that does not pickle, a crash, a signal), this process parses the child's traces itself
afterwards: the error raised is then the first trace's in ``items`` order, and the store is the same, as with one
process. What the child sends back (each batch in the order it was made, each trace's header, file status, notes
and counts) is replayed through the same calls a parse in this process makes, so the batches are flushed at the
same points.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Sequence

from nsight_advisor.common.forked_child import Child, other_threads as _other_threads, two_cores
from nsight_advisor.ingest.kineto.early_parse import claim
from nsight_advisor.ingest.kineto.json_events import json_bytes

#: Below this many bytes of traces in all (as :func:`~nsight_advisor.ingest.kineto.json_events.json_bytes` counts them), the
#: traces are parsed in this process: a fork and the hand-back cost about 10 to 20 ms, what two 50 kB gzipped
#: ranks take to parse.
MIN_FORK_BYTES = 1 << 20
#: Once this process has parsed its share in T seconds, the child's is waited for WAIT_FACTOR * T + WAIT_MIN_S
#: seconds at most: the shares are about equal, so a child that takes far longer is stuck (it is ended, and its
#: traces parsed here).
WAIT_FACTOR, WAIT_MIN_S = 10, 30.0


def parse_traces(ing: Any, items: Sequence[tuple[int, Path]], parse_one: Callable[[int, Path], None],
                 done: Callable[[Path], None]) -> None:
    """``parse_one(capture_id, path)`` for each of ``items`` into ``ing``, in order as far as ``ing`` can tell;
    ``done(path)`` after each.

    ``ing``: the ingest they are read into (ingest.kineto.trace's ``_Ingest``): a parse fills its ``headers``,
    ``stats``, ``rows``, ``note_rows`` and ``missing_rows`` and hands each batch to its ``append``."""
    early = claim(items, keep_cpu_ops=not ing.defer_cpu_ops)  # parsed while the command line started
    if early is not None:
        early.finish(ing, items, parse_one, done)
        return
    split = fork_split(items)
    if split is None:
        for cid, path in items:
            parse_one(cid, path)
            done(path)
        return
    first, later = items[:split], items[split:]
    child = _fork(ing, later, parse_one)
    started = time.monotonic()
    try:
        for cid, path in first:
            parse_one(cid, path)
            done(path)
    except BaseException:
        child.stop()
        raise
    # the child's share is about this process's: one that takes many times longer is stuck, and is parsed here
    payload = _collect(child, WAIT_FACTOR * (time.monotonic() - started) + WAIT_MIN_S)
    if payload is not None:
        _replay(ing, payload)
        for _, path in later:
            done(path)
        return
    for cid, path in later:  # the child failed: read them here, which raises what one process would
        parse_one(cid, path)
        done(path)


def fork_split(items: Sequence[tuple[int, Path]]) -> int | None:
    """Where ``items`` split between this process (before) and a forked child (from there on), about half of their
    bytes each; None when they are parsed here: fewer than two, too small in all, one core, or no ``fork``."""
    if len(items) < 2 or _other_threads() or not two_cores():
        return None
    sizes = [_weight(path) for _, path in items]
    total = sum(sizes)
    if total < MIN_FORK_BYTES:
        return None
    seen = 0
    for index, size in enumerate(sizes[:-1]):
        seen += size
        if seen * 2 >= total:
            return index + 1
    return len(items) - 1


def _weight(path: Path) -> int:
    try:
        return json_bytes(path)
    except OSError:
        return 0  # the parse says what is wrong with it


def _fork(ing: Any, later: Sequence[tuple[int, Path]], parse_one: Callable[[int, Path], None]) -> Child:
    """Start the child that parses ``later`` (common/forked_child.py)."""
    return Child(lambda: _parse(ing, later, parse_one))


def _parse(ing: Any, later: Sequence[tuple[int, Path]], parse_one: Callable[[int, Path], None]) -> dict:
    """In the child: parse ``later`` with every batch kept (never inserted: the store is the parent's)."""
    batches: list[tuple[str, Any]] = []
    ing.append = lambda table, batch: batches.append((table, batch))  # this instance only, in the child only
    notes, missing = len(ing.note_rows), len(ing.missing_rows)
    for cid, path in later:
        parse_one(cid, path)
    return {"batches": batches, "notes": ing.note_rows[notes:], "missing": ing.missing_rows[missing:],
            "traces": [(cid, ing.headers[cid], ing.stats[cid], ing.rows[cid].parsed_state()) for cid, _ in later]}


def _collect(child: Child, wait_s: float) -> dict | None:
    """The child's payload once it has exited; None when it failed, or sent nothing within ``wait_s`` seconds (it
    is then ended)."""
    return child.result(wait_s)


def _replay(ing: Any, payload: dict) -> None:
    """What the child read, put into ``ing`` by the calls its own parse would have made, in the same order."""
    from nsight_advisor.ingest.kineto.rows import EventRows

    for cid, header, stat, state in payload["traces"]:
        ing.headers[cid], ing.stats[cid], ing.rows[cid] = header, stat, EventRows.restored(state)
    ing.note_rows.extend(payload["notes"])
    ing.missing_rows.extend(payload["missing"])
    for table, batch in payload["batches"]:
        ing.append(table, batch)
