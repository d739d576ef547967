"""Ingest many captures at once: this process ingests the first, worker processes the others, then one merge.

Up to the core count of captures are ingested at the same time. Each worker ingests its capture into its
own temporary DuckDB file under the capture id the parent gave it, while the parent ingests the first
capture straight into the store (no worker start-up, no copy for it); the parent then copies every
normalized table of each worker's file into the store in capture-id order, so the store is the same
whatever order the workers finish in. A single capture (or a single core) is ingested in-process, and so is
every small capture (:data:`SMALL_CAPTURE_BYTES`): a worker's interpreter, imports, store and merge cost
more than ingesting it (docs/performance.md, "Small captures"). Small PyTorch traces only (a job's ranks) are
ingested together, each statement run once for all of them (``ingest.ingest_kineto_traces``).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Collection, Sequence

import duckdb

from nsight_advisor.common.errors import InputError
from nsight_advisor.common.progress import Progress
from nsight_advisor.ingest.kineto.json_events import json_bytes
from nsight_advisor.schema import TABLES
from nsight_advisor.store.database import connect


_EXIT_INPUT_ERROR = 2

#: A capture this small on disk is ingested in the parent process, straight into the store, never by a worker:
#: a worker costs about 1.5 CPU-seconds before it reads a byte (interpreter, imports, its own store, the merge),
#: more than the whole ingest of a capture this size (a 2.9 MB nsys export ingests in about 0.7 s).
SMALL_CAPTURE_BYTES = 8 << 20


def is_small(path: Path) -> bool:
    """True when ``path`` is small enough to ingest in this process (see :data:`SMALL_CAPTURE_BYTES`;
    ``$NSIGHT_ADVISOR_SMALL_CAPTURE_BYTES`` overrides it, 0 sends every capture after the first to a worker)."""
    limit = os.environ.get("NSIGHT_ADVISOR_SMALL_CAPTURE_BYTES", "")
    limit = int(limit) if limit.isdigit() else SMALL_CAPTURE_BYTES
    try:
        size = json_bytes(path)  # a gzipped capture (Kineto JSON) counts as the JSON it holds
    except OSError:
        return True  # the ingest itself reports what is wrong with it
    return size < limit


def usable_cores() -> int:
    """CPU cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def ingest_many(con: duckdb.DuckDBPyConnection, items: Sequence[tuple[int, Path]], *, work_dir: Path,
                progress: bool = False, max_workers: int | None = None, defer: Collection[str] = (),
                executor=None) -> None:
    """Ingest every ``(capture_id, path)`` into the store behind ``con``, in parallel when there are cores.

    The first capture is ingested in this process, straight into the store, while worker processes
    ingest the others into temporary stores in ``work_dir`` (on the store's file system, since they can
    be as large as the captures); those are merged in capture-id order and removed before this
    returns, whatever happens. ``defer``: tables the caller will not read (see ``ingest_capture``).
    ``executor``: an :class:`nsight_advisor.store.executors.Executor`; with ``kind == "ray"`` every capture is
    ingested as a Ray task instead (:mod:`nsight_advisor.store.ray_ingest`), into the same store.
    """
    from nsight_advisor.ingest import ingest_capture, ingest_captures, ingest_kineto_traces

    items = [(cid, Path(p)) for cid, p in items]
    if executor is not None and executor.kind == "ray":
        from nsight_advisor.store.ray_ingest import ingest_with_ray

        ingest_with_ray(con, items, executor, progress=progress, defer=defer)
        return
    # The first capture and every small one are ingested here, in capture-id order; the others by workers.
    large = [(cid, path) for cid, path in items[1:] if not is_small(path)]
    workers = min(len(large) + 1, max_workers or usable_cores())
    if workers <= 1 or not large:
        if not large and items and is_small(items[0][1]):
            # small captures only: one DuckDB thread (their tables fit in a row group or two; more threads cost CPU)
            saved = con.execute("SELECT current_setting('threads')").fetchone()[0]
            con.execute("SET threads = 1")
            try:
                if len(items) > 1 and all(_is_kineto(path) for _, path in items):
                    ingest_kineto_traces(con, items, progress=progress, defer=defer)
                else:
                    ingest_captures(con, items, progress=progress, defer=defer)
            finally:
                # a reader's fatal DuckDB error invalidates the connection: the error that says why must surface,
                # not this reset's (the hostile corpus's ncu-rep-byte-flips-14)
                with contextlib.suppress(duckdb.Error):
                    con.execute(f"SET threads = {int(saved)}")
            return
        ingest_captures(con, items, progress=progress, defer=defer)
        return
    threads = max(1, usable_cores() // workers)
    from nsight_advisor.common.run_folder import release, run_folder

    tmp_dir = Path(tempfile.mkdtemp(prefix="ingest-", dir=run_folder(work_dir)))
    pool = _WorkerPool(workers - 1, threads, defer)
    try:
        with Progress(f"ingest {len(items)} captures", len(items) + len(large), enabled=progress) as bar:
            jobs = {cid: (cid, path, tmp_dir / f"capture-{cid}.duckdb") for cid, path in large}
            futures = {cid: pool.submit(job) for cid, job in jobs.items()}
            saved = con.execute("SELECT current_setting('threads')").fetchone()[0]
            for cid, path in items:
                if cid not in jobs:
                    con.execute(f"SET threads = {threads}")
                    try:
                        ingest_capture(con, cid, path, progress=False, defer=defer)
                    finally:
                        con.execute(f"SET threads = {int(saved)}")
                    bar.step(f"ingested {path.name}")
                    continue
                part = jobs[cid][2]
                futures[cid].result()  # re-raises the worker's InputError as is
                bar.step(f"ingested {path.name}")
                _merge(con, part)
                part.unlink()
                bar.step(f"merged {path.name}")
    except BaseException:
        pool.kill()
        raise
    finally:
        pool.shutdown()
        shutil.rmtree(tmp_dir, ignore_errors=True)
        release(tmp_dir.parent)


def _is_kineto(path: Path) -> bool:
    from nsight_advisor.ingest.detect import detect_format

    try:
        return detect_format(path) == "kineto-json"
    except Exception:  # noqa: BLE001 - the ingest itself says what is wrong with the file
        return False


class _WorkerPool:
    """Runs ``python -m nsight_advisor.store.parallel_ingest`` jobs, at most ``size`` at a time.

    Workers are fresh interpreters, not multiprocessing children: a fork would copy the parent's DuckDB
    threads mid-flight, and spawn re-runs the caller's main module, which breaks scripts and notebooks
    that call the library without a main guard.
    """

    def __init__(self, size: int, threads: int, defer: Collection[str] = ()) -> None:
        self.threads = threads
        self.defer = ",".join(sorted(defer))
        self.env = dict(os.environ)
        package_root = str(Path(__file__).resolve().parents[2])
        self.env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, self.env.get("PYTHONPATH")]))
        self.running: dict[int, subprocess.Popen] = {}
        self.lock = threading.Lock()
        self.failed = threading.Event()
        self.executor = concurrent.futures.ThreadPoolExecutor(max_workers=max(1, size))

    def submit(self, job: tuple[int, Path, Path]) -> concurrent.futures.Future:
        return self.executor.submit(self._run, job)

    def _run(self, job: tuple[int, Path, Path]) -> None:
        cid, path, out = job
        cmd = [sys.executable, "-m", "nsight_advisor.store.parallel_ingest", str(cid), str(path), str(out),
               str(self.threads), self.defer, str(os.getpid())]
        with self.lock:
            if self.failed.is_set():
                raise RuntimeError("ingest cancelled")
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.PIPE, env=self.env)
            self.running[cid] = proc
        _out, err = proc.communicate()
        with self.lock:
            self.running.pop(cid, None)
        if proc.returncode == 0:
            return
        self.failed.set()
        text = err.decode("utf-8", "replace").strip()
        if proc.returncode == _EXIT_INPUT_ERROR:
            raise InputError(text.splitlines()[-1] if text else f"{path}: cannot be ingested")
        raise RuntimeError(f"ingest worker for {path} failed (exit {proc.returncode}): {text[-2000:]}")

    def kill(self) -> None:
        self.failed.set()
        with self.lock:
            for proc in self.running.values():
                proc.kill()

    def shutdown(self) -> None:
        self.executor.shutdown(wait=True, cancel_futures=True)


def _worker_main(argv: list[str]) -> int:
    """Worker process body: ingest one capture into its own store file (exit 2 with one line on bad input)."""
    from nsight_advisor.ingest import ingest_capture

    capture_id, path, out, threads = int(argv[0]), Path(argv[1]), Path(argv[2]), int(argv[3])
    defer = [t for t in (argv[4] if len(argv) > 4 else "").split(",") if t]
    if len(argv) > 5:
        _die_with_parent(int(argv[5]))
    try:
        con = connect(out)
        try:
            con.execute(f"SET threads = {threads}")
            ingest_capture(con, capture_id, path, progress=False, defer=defer)
            con.execute("CHECKPOINT")
        finally:
            con.close()
    except InputError as exc:
        print(str(exc).strip().replace("\n", " "), file=sys.stderr)
        return _EXIT_INPUT_ERROR
    return 0


def _die_with_parent(parent_pid: int) -> None:
    """Ask the kernel to kill this worker when its parent dies (Linux), and exit now if it already has.

    A parent killed with SIGKILL runs no cleanup; without this its workers would go on ingesting for nobody.
    """
    with contextlib.suppress(OSError, AttributeError):
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    if os.getppid() != parent_pid:  # the parent died before the request took effect
        os._exit(_EXIT_INPUT_ERROR)


def _merge(con: duckdb.DuckDBPyConnection, part: Path) -> None:
    literal = "'" + str(part).replace("'", "''") + "'"
    con.execute(f"ATTACH {literal} AS part (READ_ONLY)")
    try:
        for table in TABLES:
            if not table.stored:  # a view over stored tables, copied themselves
                continue
            cols = ", ".join(table.column_names)
            con.execute(f"INSERT INTO main.{table.name} ({cols}) SELECT {cols} FROM part.main.{table.name}")
    finally:
        with contextlib.suppress(duckdb.Error):
            con.execute("DETACH part")


if __name__ == "__main__":
    sys.exit(_worker_main(sys.argv[1:]))
