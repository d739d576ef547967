"""PyTorch traces parsed while the command line is still starting: a child forked before DuckDB, Arrow and numpy are
imported parses them while this process imports those, and the ingest takes what it parsed.

Why: a cold ``analyze`` of a job's small traces spends its first 0.2 s importing those libraries before it reads a
byte, and the parse (JSON elements into rows) needs none of them: it is pure Python (ingest/kineto/rows.py and
json_events.py; the package ``nsight_advisor.ingest`` loads DuckDB only on first use of a reader for this reason).
The 8 DLRM ranks parse in 0.2 to 0.3 s: about what the imports take.

How: the command line wraps its run in :func:`parsing_early` with the paths it was given. Where they are all small
PyTorch traces (by name: ``.json`` or ``.json.gz``; :data:`MAX_EARLY_BYTES` in all) and the machine has two cores,
a child (common/forked_child.py) takes the traces one at a time from :class:`~nsight_advisor.common.forked_child.Tickets`
and parses each into a :class:`ParsedTrace`: the batches of rows the parse hands its sink, untouched, and what the
parse counted. When the ingest comes to parse the same traces (ingest/kineto/parallel_parse.py calls :func:`claim`),
this process takes the traces the child has not begun, collects the child's, and stages every trace in order
through the calls its own parse would have made (``_Ingest.parsed``, ingest/kineto/trace.py): the same batches,
converted to Arrow and flushed at the same points, so the store is the same as from a parse in one process.

A trace that neither parsed (it cannot be read, it changed while it was read, the child failed or was ended) is
parsed by the ingest itself, in its turn: the error raised is then that of the first trace that cannot be read,
as in one process. A run that never claims the parse (a cached store, inputs that are not these traces, a
failure before the ingest) ends the child when it leaves :func:`parsing_early`.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import Any, Callable, Iterator, NamedTuple, Sequence

from nsight_advisor.common.forked_child import Child, Tickets, can_fork
from nsight_advisor.common.regular_file import identity, stat_identity
from nsight_advisor.common.text import is_utf8
from nsight_advisor.ingest.gc_pause import gc_paused
from nsight_advisor.ingest.kineto.json_events import json_bytes

#: At most this many bytes of traces in all (as :func:`~nsight_advisor.ingest.kineto.json_events.json_bytes` counts them) are parsed
#: early: the rows are held as Python objects until the ingest stages them (the 64 replicated DLRM ranks, 27 MB
#: so counted: 158,000 rows, about 55 MB more at the driver's peak).
MAX_EARLY_BYTES = 64 << 20
#: Each process holds at most this many parsed rows (about 0.35 kB each as Python objects): a file that
#: decompresses to far more than its size says (a gzip bomb) is left to the ingest's own parse, which streams.
MAX_HELD_ROWS = 500_000
#: Once this process has parsed what the child had not begun, in T seconds, the child (parsing one trace at most by
#: then) is waited for WAIT_FACTOR * T + WAIT_MIN_S seconds: one that takes longer is stuck, and is ended.
WAIT_FACTOR, WAIT_MIN_S = 10, 30.0


class ParsedTrace(NamedTuple):
    """One trace parsed in another process: its header, each batch its parse handed the sink as ``(table,
    columns, rows)`` in order, its EventRows' state once over (``EventRows.parsed_state``), its file's status."""

    header: dict
    batches: list
    state: dict
    stat: os.stat_result


class EarlyParse:
    """The child parsing ``paths`` and the tickets it shares with this process."""

    def __init__(self, paths: list[Path]) -> None:
        self.paths = paths
        self.tickets = Tickets(len(paths))
        self.child = Child(lambda: _parse_taken(self.paths, self.tickets))

    def finish(self, ing: Any, items: Sequence[tuple[int, Path]], parse_one: Callable[[int, Path], None],
               done: Callable[[Path], None]) -> None:
        """Stage ``items`` (the traces at ``paths``, in order) into ``ing``: those the child parsed from what it
        sends, those this process takes from the tickets after parsing them here, any other by ``parse_one``."""
        started = time.monotonic()
        try:
            parsed = _parse_taken(self.paths, self.tickets)
        except BaseException:
            self.stop()
            raise
        self.tickets.close()
        parsed.update(self.child.result(WAIT_FACTOR * (time.monotonic() - started) + WAIT_MIN_S) or {})
        for index, (cid, path) in enumerate(items):
            trace = parsed.pop(index, None)
            if trace is None:  # not parsed, or not readable: here, raising what one process would
                parse_one(cid, path)
            else:
                ing.parsed(cid, trace)
            done(path)

    def stop(self) -> None:
        """End the child and close the tickets."""
        self.child.stop()
        self.tickets.close()


_pending: EarlyParse | None = None


@contextlib.contextmanager
def parsing_early(paths: Sequence[Path | str]) -> Iterator[None]:
    """Within: the traces at ``paths`` parsed by a forked child, for the ingest to :func:`claim`, where they are all
    small PyTorch traces and a child can be forked to good effect (else nothing happens). The child is ended on
    leaving, whether the ingest claimed it or not."""
    global _pending
    early = _start(paths) if _pending is None else None
    if early is None:
        yield
        return
    _pending = early
    try:
        yield
    finally:
        _pending = None
        early.stop()


def claim(items: Sequence[tuple[int, Path]], *, keep_cpu_ops: bool) -> EarlyParse | None:
    """The early parse of exactly ``items``' traces, in their order, for the ingest to finish; None when there is
    none (it is then ended: the ingest parses these traces itself, and no other will come)."""
    global _pending
    early, _pending = _pending, None
    if early is None:
        return None
    if not keep_cpu_ops or early.paths != [_resolved(path) for _, path in items]:
        early.stop()  # a parse that defers the operators' rows holds other batches
        return None
    return early


def _start(paths: Sequence[Path | str]) -> EarlyParse | None:
    """The child parsing ``paths``, or None where an early parse does not pay or cannot be done safely."""
    resolved = [_resolved(Path(path)) for path in paths]
    if not resolved or len(resolved) > Tickets.MAX or None in resolved or not can_fork():
        return None
    total = 0
    for path in resolved:
        name = path.name
        if not name.endswith((".json", ".json.gz")) or not is_utf8(str(path)):  # others go through ingest.failures
            return None
        try:
            total += json_bytes(path)
        except OSError:
            return None
    if total > MAX_EARLY_BYTES:
        return None
    return EarlyParse(resolved)


def _resolved(path: Path) -> Path | None:
    try:
        return path.resolve() if path.is_file() else None
    except OSError:
        return None


def _parse_taken(paths: list[Path], tickets: Tickets) -> dict[int, ParsedTrace]:
    """Parse the traces whose numbers this process takes from ``tickets``, until none are left, or one cannot be
    read here or would take the rows held past :data:`MAX_HELD_ROWS` (the ingest reads that one and those left
    itself, streaming)."""
    parsed: dict[int, ParsedTrace] = {}
    held = 0
    while (index := tickets.take()) is not None:
        trace = parse_trace(paths[index], MAX_HELD_ROWS - held)
        if trace is None:
            break
        parsed[index] = trace
        held += sum(len(batch) for _, _, batch in trace.batches)
    return parsed


class _TooManyRows(Exception):
    pass


def parse_trace(path: Path, max_rows: int = MAX_HELD_ROWS) -> ParsedTrace | None:
    """The trace at ``path`` parsed as the ingest parses it, its batches kept; None when it cannot be read, changed
    while it was (the ingest's own parse then says why), or holds more than ``max_rows`` rows."""
    from nsight_advisor.ingest.kineto.json_events import iter_events, read_header
    from nsight_advisor.ingest.kineto.rows import EventRows

    batches: list[tuple] = []
    held = 0

    def keep(table: str, columns: tuple, batch: list) -> None:
        nonlocal held
        held += len(batch)
        if held > max_rows:
            raise _TooManyRows
        batches.append((table, columns, batch))

    try:
        before = identity(path)
        header = read_header(path)
        rows = EventRows(keep)
        with gc_paused():
            rows.consume(iter_events(path))
        stat = os.stat(path)  # the file as it was read (the ingest's own parse takes it there too)
    except Exception:  # noqa: BLE001 - the ingest's parse raises what one process would
        return None
    if before is None or stat_identity(stat) != before:
        return None
    return ParsedTrace(header, batches, rows.parsed_state(), stat)
