"""The rules (and the summary) of a small store's analysis run on two connections at once, one per core.

A store whose tables all fit one DuckDB row group runs its queries on one thread (nsight_advisor.store.opening:
a scan that cannot be split gains nothing from more), and a rule's query there is mostly planning: 0.3 of the
0.4 s that the 8 DLRM ranks' 18 rule queries take. DuckDB plans and runs on the calling thread without Python's
lock, so two Python threads, each with its own connection, run two rules at a time. The second connection is the
first's twin (nsight_advisor.analysis.twin_connection): the analysis's temp tables and views copied to it once, by
the second thread while the first runs the first rule.

Each thread takes the next job (a rule, the summary) not yet taken, and the results are put back in the jobs'
order, so the outcomes, findings and their order are those of one connection running the jobs in turn. A job must
leave nothing behind on its connection that a later stage reads (a temp table it makes, it drops). A larger store
keeps one connection: its queries already use every core.

Python code does not gain from a second thread (measured: a thread of DuckDB queries beside a thread of Python
takes the sum of their times, as each query's return waits for the interpreter's lock), so only stages that are
DuckDB queries are run this way.

The twin is only a way to go faster: where it cannot be made or filled (DuckDB out of memory, as under a tight
address-space limit: a second thread and the copies need more), the jobs run on the first connection alone.
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Sequence

from nsight_advisor.store.opening import store_threads
from nsight_advisor.store.parallel_ingest import usable_cores

if TYPE_CHECKING:
    import duckdb


#: Fewer jobs than this are run on one connection: the twin costs about as much as a rule.
MIN_JOBS = 4
#: Temp tables of more rows than this in all are not copied to a twin: the copy is held twice (64 DLRM ranks:
#: 0.5 s faster with the twin, but 135 MB more peak memory, against about 10,000 rows and a few MB for 8 ranks).
MAX_TWIN_ROWS = 50_000


@dataclass(frozen=True)
class Lead:
    """Work some jobs need done first on their connection: ``make(connection)`` makes temp tables (a view the jobs
    read, materialized) and returns their names; ``needs``: the indices of the jobs that read them."""

    make: Callable[[Any], Sequence[str]]
    needs: frozenset[int]


def run_jobs(con: duckdb.DuckDBPyConnection, jobs: Sequence[Callable[[Any], Any]], done: Callable[[int], None],
             lead: Lead | None = None, longest: frozenset[int] = frozenset()) -> list[Any]:
    """``job(connection)`` for each of ``jobs``, in their order or two at a time (module docstring), ``connection``
    being ``con`` or its twin; ``done(index)`` as each finishes. Returns their results in the jobs' order.

    ``lead``: done first on one connection. With the twin, the second thread makes its tables there (the twin is
    read before it) while this thread runs the jobs that do not need them, and this thread copies them before its
    first job that does; ``con`` has them afterwards either way.

    ``longest``: jobs known to take longest, taken first among those that need the lead (or among those that do
    not), so that the two threads end about together rather than one idling while the other runs the longest job
    last (the summary: 60 ms of the 8 DLRM ranks' 0.5 s)."""
    twin = None
    if len(jobs) >= MIN_JOBS and _one_thread_store(con) and usable_cores() >= 2 and _temp_rows(con) <= MAX_TWIN_ROWS:
        twin = _open_twin(con)
    if twin is None:
        if lead is not None:
            lead.make(con)
        out = []
        for i, job in enumerate(jobs):
            out.append(job(con))
            done(i)
        return out
    return _on_two(con, twin[0], twin[1], jobs, done, lead, longest)


def _open_twin(con) -> tuple[Any, Any] | None:
    """A second connection and what :func:`write_temp` makes on it, read from ``con``; None where it cannot be had
    (DuckDB out of memory: an address space held tight): the jobs then run on ``con`` alone, as a larger store's."""
    import duckdb

    from nsight_advisor.analysis.twin_connection import read_temp, release
    from nsight_advisor.common.connections import second_connection

    try:
        state = read_temp(con)
        return second_connection(con), [state]
    except (duckdb.Error, MemoryError):
        with contextlib.suppress(duckdb.Error):
            release(con)
        return None


def _on_two(con, twin, state: list, jobs: Sequence[Callable[[Any], Any]], done: Callable[[int], None],
            lead: Lead | None, longest: frozenset[int] = frozenset()) -> list[Any]:
    """:func:`run_jobs` with ``twin`` made from ``state`` (held only until written: a many-rank job's copies are tens
    of MB) by the second thread. Where that fails (memory), the second thread takes no job and this thread runs
    them all, the lead included."""
    import duckdb

    from nsight_advisor.analysis.twin_connection import read_temp, release, write_temp

    results: list[Any] = [None] * len(jobs)
    errors: list[BaseException] = []
    lock = threading.Lock()
    needs = lead.needs if lead is not None else frozenset()
    queue = iter(queue_order(len(jobs), needs, longest))
    made: list[Any] = []  # the lead's tables as made on the twin, once they are (until copied here)
    ready = threading.Event()  # set once the twin is ready (``made`` then holds the lead), or could not be made
    adopted = lead is None

    def take() -> int | None:
        with lock:
            if errors:
                return None
            return next(queue, None)

    def work(connection, here: bool) -> None:
        nonlocal adopted
        try:
            while (i := take()) is not None:
                if here and i in needs and not adopted:
                    adopt()
                    adopted = True
                results[i] = jobs[i](connection)
                with lock:
                    done(i)
        except BaseException as exc:  # noqa: BLE001 - raised again by the caller's thread
            with lock:
                errors.append(exc)

    def adopt() -> None:
        ready.wait()
        if made:
            write_temp(con, made.pop())
        else:  # the twin could not be made: the lead is made here
            lead.make(con)

    def helper_work() -> None:
        try:
            write_temp(twin, state.pop())  # while the other thread runs the first job
            if lead is not None:
                made.append(read_temp(twin, lead.make(twin)))
        except (duckdb.Error, MemoryError):
            return  # no twin (memory): this thread takes no job
        except BaseException as exc:  # noqa: BLE001 - a fault, not a shortage: raised again by the caller's thread
            with lock:
                errors.append(exc)
            return
        finally:
            ready.set()
        work(twin, False)

    helper = threading.Thread(target=helper_work, name="nsight-advisor-rules", daemon=True)
    helper.start()
    stop = True
    try:
        work(con, True)  # records its error (Ctrl-C and SIGTERM land in this thread) and stops taking jobs
        if not errors and not adopted:
            try:
                adopt()  # no job of this thread needed it; later stages read ``con``
            except BaseException as exc:  # noqa: BLE001 - raised below, after the second thread's error if any
                errors.append(exc)
        stop = bool(errors)
    finally:
        if stop:
            twin.interrupt()  # the twin's query in flight stops too, rather than run to its end
        try:
            helper.join()
        finally:
            twin.close()
            with contextlib.suppress(duckdb.Error):  # an interrupted or failed run keeps its own error
                release(con)
    if errors:
        raise errors[0]
    return results


def queue_order(jobs: int, needs: frozenset[int], longest: frozenset[int]) -> list[int]:
    """The order two threads take ``jobs`` jobs in: those that need the lead (``needs``) last, so that neither
    thread waits for it while others remain; in each group the ``longest`` first; else the jobs' order."""
    return sorted(range(jobs), key=lambda i: (i in needs, i not in longest))


def _temp_rows(con) -> int:
    """Rows in ``con``'s temp tables (DuckDB's count, exact for a table written once)."""
    return int(con.execute("select coalesce(sum(estimated_size), 0) from duckdb_tables() "
                           "where temporary and not internal").fetchone()[0])


def _one_thread_store(con) -> bool:
    """Whether the store runs its queries on one DuckDB thread (a small store: store.opening.fit_small_store); a
    setting that cannot be read keeps one connection."""
    return store_threads(con) == 1


