"""A forked child that computes one Python value for this process while it does other work: a second core for
Python, which threads cannot give (they share the interpreter's lock).

Why a fork is safe here although DuckDB's threads may run in this process: the child runs only the function it is
given, which must use nothing of DuckDB (a connection, a relation) nor any lock another thread may hold; it pickles
the value into a pipe and leaves with ``os._exit``, so nothing of the parent's (a store, exit handlers, unflushed
output) is used or closed twice. Whatever goes wrong in it (an error, a value that does not pickle, a crash, a
signal), :meth:`Child.result` says so with None and the caller computes the value itself: a child only ever makes
things faster, never different.

Used by the PyTorch traces' parse (ingest/kineto/parallel_parse.py) and the what-if's replays
(engine/fix_replays.py).
"""

from __future__ import annotations

import contextlib
import os
import pickle
import select
import signal
import struct
import threading
import time
import warnings
from typing import Any, Callable


def can_fork() -> bool:
    """Whether a child can be forked to good effect: no other Python thread runs and :func:`two_cores`."""
    return not other_threads() and two_cores()


def other_threads() -> bool:
    """Whether another Python thread runs (the sqlite scanner's, store/ingest_instance.py; a library caller's): it
    may hold a lock, an import's, that a forked child would wait for forever."""
    return threading.active_count() > 1


def two_cores() -> bool:
    """Whether ``fork`` exists and this process may run on two cores or more."""
    return hasattr(os, "fork") and hasattr(os, "sched_getaffinity") and len(os.sched_getaffinity(0)) >= 2


class Child:
    """A forked child computing ``work()``; :meth:`result` collects its value, :meth:`stop` ends it."""

    def __init__(self, work: Callable[[], Any]) -> None:
        self.reader, writer = os.pipe()
        with warnings.catch_warnings():
            # Python 3.12+ warns of a fork in a process with threads (DuckDB's): the child uses none of their state
            warnings.simplefilter("ignore", DeprecationWarning)
            self.pid = os.fork()
        if self.pid == 0:  # the child: compute, send, leave without running anything of the parent's
            status = 1
            try:
                os.close(self.reader)
                payload = pickle.dumps(work(), protocol=pickle.HIGHEST_PROTOCOL)
                with os.fdopen(writer, "wb") as out:
                    out.write(payload)
                status = 0
            except BaseException:  # noqa: BLE001 - the parent computes the value itself
                pass
            finally:
                os._exit(status)
        os.close(writer)
        self.done = False

    def result(self, wait_s: float) -> Any | None:
        """The child's value once it has exited; None when it failed, or sent nothing within ``wait_s`` seconds (it
        is then ended)."""
        chunks, deadline = [], time.monotonic() + wait_s
        try:
            while True:
                ready, _, _ = select.select([self.reader], [], [], max(0.0, deadline - time.monotonic()))
                if not ready:  # stuck: end it
                    self.stop()
                    return None
                chunk = os.read(self.reader, 1 << 20)
                if not chunk:
                    break
                chunks.append(chunk)
        except BaseException:
            self.stop()
            raise
        os.close(self.reader)
        _, status = os.waitpid(self.pid, 0)
        self.done = True
        data = b"".join(chunks)
        if os.waitstatus_to_exitcode(status) != 0 or not data:
            return None
        try:
            return pickle.loads(data)
        except Exception:  # noqa: BLE001 - a payload cut short
            return None

    def stop(self) -> None:
        """End the child (this process failed first, or the child is stuck) and close its pipe."""
        if self.done:
            return
        self.done = True
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.close(self.reader)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)


class Tickets:
    """Numbers 0 to n-1 that this process and its forked children take in turn, each number once: a pipe holding
    them all, each read taking one (a read of 4 of the bytes a pipe holds is whole: Linux copies under the pipe's
    lock, and every number is written before any is read). Work shared this way balances itself: whoever is free
    takes the next number."""

    #: A pipe holds 64 kB by default: more numbers would block their writing.
    MAX = 16_000

    def __init__(self, n: int) -> None:
        if n > self.MAX:
            raise ValueError(f"at most {self.MAX} tickets, not {n}")
        self.reader, writer = os.pipe()
        try:
            if n:
                os.write(writer, struct.pack(f"<{n}i", *range(n)))
        finally:
            os.close(writer)
        os.set_blocking(self.reader, False)

    def take(self) -> int | None:
        """The next number; None once all are taken (or the tickets are closed)."""
        if self.reader < 0:
            return None
        try:
            data = os.read(self.reader, 4)
        except BlockingIOError:
            return None
        return struct.unpack("<i", data)[0] if len(data) == 4 else None

    def close(self) -> None:
        """Close the pipe, once: a second close would close whatever file took its number since."""
        if self.reader >= 0:
            with contextlib.suppress(OSError):
                os.close(self.reader)
            self.reader = -1
