"""Ingest many captures at once: one worker process per capture (up to the core count), then one merge.

Each worker ingests its capture into its own temporary DuckDB file under the capture id the parent gave
it; the parent then copies every normalized table of each file into the store, in capture-id order, so
the store is the same whatever order the workers finish in. A single capture (or a single core) is
ingested in-process: a worker would only add its start-up time.
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
from typing import Sequence

import duckdb

from nsight_advisor.errors import InputError
from nsight_advisor.progress import Progress
from nsight_advisor.schema import TABLES
from nsight_advisor.store import connect


_EXIT_INPUT_ERROR = 2


def usable_cores() -> int:
    """CPU cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def ingest_many(con: duckdb.DuckDBPyConnection, items: Sequence[tuple[int, Path]], *, work_dir: Path,
                progress: bool = False, max_workers: int | None = None) -> None:
    """Ingest every ``(capture_id, path)`` into the store behind ``con``, in parallel when it pays.

    ``work_dir`` holds the workers' temporary stores (on the store's file system, since they can be as
    large as the captures); they are removed before this returns, whatever happens.
    """
    from nsight_advisor.ingest import ingest_captures

    items = [(cid, Path(p)) for cid, p in items]
    workers = min(len(items), max_workers or usable_cores())
    if workers <= 1:
        ingest_captures(con, items, progress=progress)
        return
    tmp_dir = Path(tempfile.mkdtemp(prefix=".nsight-advisor-ingest-", dir=work_dir))
    try:
        with Progress(f"ingest {len(items)} captures", 2 * len(items), enabled=progress) as bar:
            parts = _run_workers(items, tmp_dir, workers, bar)
            for capture_id, part in parts:
                _merge(con, part)
                part.unlink()
                bar.step(f"merged capture {capture_id}")
    finally:
        shutil.rmtree(tmp_dir, ignore_errors=True)


def _run_workers(items: Sequence[tuple[int, Path]], tmp_dir: Path, workers: int,
                 bar: Progress) -> list[tuple[int, Path]]:
    # Workers are fresh interpreters (``python -m nsight_advisor.parallel_ingest``), not multiprocessing
    # children: a fork would copy the parent's DuckDB threads mid-flight, and spawn re-runs the caller's
    # main module, which breaks scripts and notebooks that call the library without a main guard.
    threads = max(1, usable_cores() // workers)
    jobs = [(cid, Path(p), tmp_dir / f"capture-{cid}.duckdb") for cid, p in items]
    env = dict(os.environ)
    package_root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    running: dict[int, subprocess.Popen] = {}
    lock = threading.Lock()
    failed = threading.Event()

    def run(job: tuple[int, Path, Path]) -> None:
        cid, path, out = job
        cmd = [sys.executable, "-m", "nsight_advisor.parallel_ingest", str(cid), str(path), str(out), str(threads)]
        with lock:
            if failed.is_set():
                return
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.PIPE, env=env)
            running[cid] = proc
        _out, err = proc.communicate()
        with lock:
            running.pop(cid, None)
        if proc.returncode == 0:
            return
        failed.set()
        text = err.decode("utf-8", "replace").strip()
        if proc.returncode == _EXIT_INPUT_ERROR:
            raise InputError(text.splitlines()[-1] if text else f"{path}: cannot be ingested")
        raise RuntimeError(f"ingest worker for {path} failed (exit {proc.returncode}): {text[-2000:]}")

    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {pool.submit(run, job): job for job in jobs}
        try:
            for future in concurrent.futures.as_completed(futures):
                future.result()
                bar.step(f"ingested {futures[future][1].name}")
        except BaseException:
            failed.set()
            with lock:
                for proc in running.values():
                    proc.kill()
            raise
    return [(cid, out) for cid, _path, out in jobs]


def _worker_main(argv: list[str]) -> int:
    """Worker process body: ingest one capture into its own store file (exit 2 with one line on bad input)."""
    from nsight_advisor.ingest import ingest_capture

    capture_id, path, out, threads = int(argv[0]), Path(argv[1]), Path(argv[2]), int(argv[3])
    try:
        con = connect(out)
        try:
            con.execute(f"SET threads = {threads}")
            ingest_capture(con, capture_id, path, progress=False)
            con.execute("CHECKPOINT")
        finally:
            con.close()
    except InputError as exc:
        print(str(exc).strip().replace("\n", " "), file=sys.stderr)
        return _EXIT_INPUT_ERROR
    return 0


def _merge(con: duckdb.DuckDBPyConnection, part: Path) -> None:
    literal = "'" + str(part).replace("'", "''") + "'"
    con.execute(f"ATTACH {literal} AS part (READ_ONLY)")
    try:
        for table in TABLES:
            cols = ", ".join(table.column_names)
            con.execute(f"INSERT INTO main.{table.name} ({cols}) SELECT {cols} FROM part.main.{table.name}")
    finally:
        with contextlib.suppress(duckdb.Error):
            con.execute("DETACH part")


if __name__ == "__main__":
    sys.exit(_worker_main(sys.argv[1:]))
