"""What a PyTorch traces' ingest stored, for tests that compare ingests done different ways (one process, a forked
child, an early parse): every table's rows, sorted, and the notes in the order they were written."""

from __future__ import annotations

import gzip
from pathlib import Path

from nsight_advisor.ingest.kineto.trace import ingest_kineto_many
from nsight_advisor.store.database import connect

TABLES = ("captures", "gpus", "kernels", "kernel_names", "api_calls", "memcpys", "memsets", "syncs", "nvtx_ranges",
          "nvtx_domains", "cpu_ops", "collectives", "capture_distributed", "kernel_occupancy", "capture_missing",
          "ingest_notes")


def ingested(items) -> dict:
    """The rows of every table after ``ingest_kineto_many(items)`` into a fresh in-memory store."""
    con = connect(None)
    try:
        ingest_kineto_many(con, items)
        got = {t: con.execute(f"select * exclude (ingested_at) from {t} order by all" if t == "captures"
                              else f"select * from {t} order by all").fetchall() for t in TABLES}
        # the notes in the order they were written, as one process writes them
        got["order"] = [con.execute(f"select capture_id, data from {t}").fetchall()
                        for t in ("capture_missing", "ingest_notes")]
        return got
    finally:
        con.close()


def broken(tmp_path: Path, source: Path, name: str) -> Path:
    """``source`` cut in the middle of its JSON, gzipped again (a readable gzip, an unreadable trace)."""
    text = gzip.decompress(source.read_bytes())
    path = tmp_path / name
    path.write_bytes(gzip.compress(text[: len(text) // 2]))
    return path
