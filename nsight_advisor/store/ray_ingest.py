"""Ingest many captures as Ray tasks: each task ingests one capture, the driver merges them in capture-id order.

Each task runs :func:`nsight_advisor.store.capture_tables.ingest_capture_tables` on whatever node Ray picks and
returns the capture's normalized tables as Arrow tables through Ray's object store; the driver appends them to
the store one capture at a time, in capture-id order, so the store is the same as the local pool's and the
driver holds one capture's tables at a time, whatever the number of ranks. At most a few tasks per cluster CPU
are submitted ahead of the merge, so finished results do not pile up in the object store either.

A task whose worker process dies (killed, out of memory, its node lost) is rerun by Ray up to
``max_retries`` times; ingesting a capture has no side effect outside the task's temporary folder, so a rerun
gives the same tables. A capture that cannot be read is an answer, not a failure: it is not retried, the
remaining tasks are cancelled and the run stops with that capture's one-line reason. A cluster that stops under
the run (``ray stop``, a lost head) stops it too, with one line naming the capture under way and the cluster.
"""

from __future__ import annotations

import collections
import logging
import os
import signal
import socket
from pathlib import Path
from typing import Collection, Sequence

import duckdb

from nsight_advisor.store.capture_tables import ingest_capture_tables, merge_capture_tables
from nsight_advisor.common.errors import InputError, NsightAdvisorError
from nsight_advisor.store.executors import Executor
from nsight_advisor.common.progress import Progress

#: Test hook: a task started while this names a file that does not exist yet creates it and kills its own
#: worker process (SIGKILL, no cleanup), once per run, as a crash or the out-of-memory killer would.
KILL_ONCE_ENV = "NSIGHT_ADVISOR_TEST_KILL_ONCE"


def capture_task(capture_id: int, path: str, defer: tuple[str, ...], expected_size: int,
                 kill_marker: str | None = None):
    """The body of one Ray task: the capture's tables, or the one-line reason it cannot be read (a str)."""
    if kill_marker:
        try:
            with open(kill_marker, "x"):
                pass
        except FileExistsError:
            pass
        else:
            os.kill(os.getpid(), signal.SIGKILL)
    try:
        return ingest_capture_tables(capture_id, Path(path), threads=1, defer=defer, expected_size=expected_size)
    except InputError as exc:
        return str(exc).strip().replace("\n", " ")


def ingest_with_ray(con: duckdb.DuckDBPyConnection, items: Sequence[tuple[int, Path]], executor: Executor, *,
                    progress: bool = False, defer: Collection[str] = ()) -> None:
    """Ingest every ``(capture_id, path)`` as a Ray task on the cluster at ``executor.address`` into ``con``."""
    import ray

    joined = _join(ray, executor.address)
    try:
        address = executor.address or ray.get_runtime_context().gcs_address
        task = ray.remote(num_cpus=1, max_retries=executor.max_retries)(capture_task)
        ahead = max(2, 2 * int(ray.cluster_resources().get("CPU", 1)))
        kill_marker = os.environ.get(KILL_ONCE_ENV) or None
        todo = collections.deque(sorted(items))
        pending: collections.deque = collections.deque()

        def submit() -> None:
            while todo and len(pending) < ahead:
                cid, path = todo.popleft()
                pending.append((cid, path, task.remote(cid, str(path), tuple(sorted(defer)),
                                                       os.stat(path).st_size, kill_marker)))

        with Progress(f"ingest {len(items)} captures on Ray", 2 * len(items), enabled=progress) as bar:
            try:
                submit()
                while pending:
                    _cid, path, ref = pending[0]
                    outcome = _get(ray, ref, path, executor.max_retries, address)
                    pending.popleft()
                    del ref
                    if isinstance(outcome, str):
                        raise InputError(outcome)
                    bar.step(f"ingested {Path(path).name}")
                    merge_capture_tables(con, outcome)
                    del outcome
                    bar.step(f"merged {Path(path).name}")
                    submit()
            except ClusterFailed:
                # nothing is cancelled on a cluster that failed: the disconnect below ends its tasks, and a cancel
                # racing the reply of a task the dead raylet had already failed made Ray's driver abort itself
                # (exit 1, no report and no line: "Tried to complete task that was not pending"; the corpus's
                # ray-cluster-killed-storing, two copies side by side: 3 runs in 25 before, 0 in 60 since)
                raise
            except BaseException:  # a bad capture, a dead worker, Ctrl-C: what is still pending is not needed
                for _cid, _path, other in pending:
                    ray.cancel(other)
                raise
    finally:
        if joined:
            ray.shutdown()


def _join(ray, address: str | None) -> bool:
    """Connect this process to the cluster unless it already is (a notebook's own ``ray.init``); True when
    this call connected it (and so disconnects it at the end).

    Without ``address``: the cluster running on this machine when there is one, else a local cluster started
    for this run (as ``ray.init()`` does), which ends with it; either way one line on stderr says which."""
    if ray.is_initialized():
        return False
    if address is None:
        try:
            ray.init(address="auto", logging_level=logging.ERROR, log_to_driver=False)
        except (ConnectionError, RuntimeError, ValueError):
            ray.init(logging_level=logging.ERROR, log_to_driver=False, include_dashboard=False)
            cpus = int(ray.cluster_resources().get("CPU", 0))
            _say(f"no Ray cluster running; started a local one with {cpus} CPUs for this run "
                 "(`ray start --head` keeps one running, `--ray-address` names another)")
        else:
            _say(f"joined the running Ray cluster at {ray.get_runtime_context().gcs_address}")
        return True
    _reachable(address)
    try:
        ray.init(address=address, logging_level=logging.ERROR, log_to_driver=False)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise NsightAdvisorError(f"--ray-address {address}: no Ray cluster to join ({reason}); start one with "
                                 "`ray start --head` or give its address") from None
    return True


def _say(line: str) -> None:
    import sys

    print(f"nsight-advisor: {line}", file=sys.stderr, flush=True)


def _reachable(address: str) -> None:
    """NsightAdvisorError unless ``host:port`` accepts a connection within seconds: Ray itself retries an
    unreachable address for minutes before it gives up."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if address == "auto" or not host or not port.isdigit():
        return  # ``auto`` is found (or not) at once by Ray; any other form is Ray's to judge
    try:
        sock = socket.create_connection((host, int(port)), timeout=5)
    except OSError as exc:
        raise NsightAdvisorError(f"--ray-address {address}: no Ray cluster answers there "
                                 f"({exc.strerror or type(exc).__name__}); start one with `ray start --head`") from None
    with sock:
        answer = _grpc_answer(sock)
    if answer is not None:  # Ray's own client would log and retry for minutes (or crash) talking to it
        raise NsightAdvisorError(f"--ray-address {address}: not a Ray cluster ({answer}); give the address "
                                 "`ray start --head` printed")


#: What an HTTP/2 client sends first (RFC 9113 3.4), then an empty SETTINGS frame; a gRPC server (Ray's GCS and
#: its client server are gRPC) answers with a SETTINGS frame of its own.
_H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])


def _grpc_answer(sock: socket.socket, timeout_s: float = 5.0) -> str | None:
    """None when the service on ``sock`` answers as an HTTP/2 (gRPC) server does; else what it did instead."""
    sock.settimeout(timeout_s)
    try:
        sock.sendall(_H2_PREFACE)
        head = b""
        while len(head) < 9:
            chunk = sock.recv(9 - len(head))
            if not chunk:
                return "it closed the connection without an HTTP/2 answer"
            head += chunk
    except socket.timeout:
        return f"no HTTP/2 answer within {timeout_s:g} s"
    except OSError as exc:
        return f"the connection failed: {exc.strerror or type(exc).__name__}"
    if head[3] == 4:  # a SETTINGS frame
        return None
    shown = head.decode("ascii", "replace").split("\r", 1)[0]
    return f"it answered {shown!r}, not HTTP/2" if shown.isprintable() else "it answered, not in HTTP/2"


def _get(ray, ref, path: Path, retries: int, address: str | None = None):
    """The task's result; a task whose worker died more often than Ray retries it, or a cluster that stopped or
    failed under the run, is one line naming the capture (exit 2), not a traceback."""
    try:
        return ray.get(ref)
    except (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError,
            ray.exceptions.ObjectLostError) as exc:
        # a lost node is the cluster failing under the run: nothing is cancelled on it (ingest_with_ray)
        kind = ClusterFailed if isinstance(exc, ray.exceptions.NodeDiedError) else NsightAdvisorError
        raise kind(f"{path}: the Ray worker ingesting it died {retries + 1} times "
                   f"({type(exc).__name__}); see the cluster's logs") from None
    except ray.exceptions.RayTaskError as exc:
        if _raised_in_package(exc):
            raise  # our own task failed: a bug, reported as one
        raise _cluster_failed(path, address, getattr(exc, "cause", None) or exc) from None
    except (ray.exceptions.RayError, ConnectionError) as exc:  # the cluster went away (stopped, lost its head)
        raise _cluster_failed(path, address, exc) from None


def _raised_in_package(exc: BaseException) -> bool:
    """Whether a task's error came from this package's code: its traceback has a frame in nsight_advisor.

    When the cluster stops under a running task, Ray itself raises inside the task's worker (storing the result
    through a dead raylet: ``OSError: Broken pipe`` in ``ray._raylet``), and Ray wraps that as the task's error too;
    such a traceback has no frame of ours."""
    text = str(getattr(exc, "traceback_str", "") or "")
    return any(f"{sep}nsight_advisor{sep}" in text for sep in ("/", "\\"))


class ClusterFailed(NsightAdvisorError):
    """The Ray cluster stopped or failed under the run (one line, exit 2 like any NsightAdvisorError)."""


def _cluster_failed(path: Path, address: str | None, exc: BaseException) -> ClusterFailed:
    """The one line for a cluster that stopped or failed while ``path`` was being ingested."""
    lines = str(exc).strip().splitlines()
    detail = f"{type(exc).__name__}: {lines[0][:200]}" if lines else type(exc).__name__
    where = f" at {address}" if address else ""
    return ClusterFailed(f"{path}: the Ray cluster{where} stopped or failed while ingesting it ({detail}); "
                         "see the cluster's logs")
