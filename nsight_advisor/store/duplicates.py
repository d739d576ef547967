"""Captures that cannot be analyzed together: the same capture twice, or two captures claiming one rank.

Either would be merged silently into a wrong answer (every finding twice; "rank 0 arrives 7.62 ms after rank 0",
waits counted once per copy), so an analysis refuses them with one line naming the files.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from nsight_advisor.common import sql_params
from nsight_advisor.common.errors import InputError

if TYPE_CHECKING:
    import duckdb


def _names(paths: list[str]) -> str:
    shown = [Path(p).name or p for p in paths[:4]]
    return ", ".join(shown) + (f" and {len(paths) - 4} more" if len(paths) > 4 else "")


def refuse_merged_duplicates(con: duckdb.DuckDBPyConnection, capture_ids: Sequence[int], where: Path) -> None:
    """InputError when two of ``capture_ids`` are one file ingested twice (same path, size and modification time),
    or two captures of one job claim the same rank (``capture_distributed``: same rank and world size)."""
    import duckdb

    ids = [int(i) for i in capture_ids]
    if len(ids) < 2:
        return
    try:
        # parameters as literals (sql_params): a Python list bound by DuckDB imports pandas
        twice = sql_params.execute(
            con, "SELECT source_path, list(capture_id ORDER BY capture_id) FROM captures "
            "WHERE list_contains($ids::INTEGER[], capture_id) "
            "GROUP BY source_path, source_size_bytes, source_mtime_ns HAVING count(*) > 1 ORDER BY 1 LIMIT 1",
            {"ids": ids}).fetchone()
        ranks = sql_params.execute(
            con, "SELECT d.rank, d.world_size, list(c.source_path ORDER BY c.capture_id) FROM capture_distributed d "
            "JOIN captures c USING (capture_id) WHERE list_contains($ids::INTEGER[], d.capture_id) "
            "GROUP BY d.rank, d.world_size HAVING count(*) > 1 ORDER BY 1, 2 LIMIT 1", {"ids": ids}).fetchone()
    except duckdb.Error:
        return  # a store without these tables is reported by what reads it
    if twice is not None:
        raise InputError(f"{where}: {Path(twice[0]).name} is in it {len(twice[1])} times (captures "
                         f"{', '.join(map(str, twice[1]))}): every finding would count it that often; build the "
                         f"store again with each capture once")
    if ranks is not None:
        rank, world, paths = ranks
        of = f" of {world}" if world is not None else ""
        raise InputError(f"{_names(paths)}: each claims rank {rank}{of}; a job's ranks are told apart by the rank "
                         f"each trace records, so give each rank's trace once (or analyze the runs separately)")


def refuse_already_stored(con: duckdb.DuckDBPyConnection, paths: list[Path], store: Path) -> None:
    """InputError when one of ``paths``, unchanged, is already in the store: ingesting it again would count it twice."""
    import duckdb

    for p in paths:
        st = p.stat()
        try:
            # literals, not Python parameters: DuckDB's first bound parameter imports pandas (0.25 s of `ingest`)
            row = sql_params.execute(con, "SELECT capture_id FROM captures WHERE source_path = ? AND "
                                     "source_size_bytes = ? AND source_mtime_ns = ?",
                                     [str(p), st.st_size, st.st_mtime_ns]).fetchone()
        except duckdb.Error:
            return  # a new store: no captures table yet
        if row is not None:
            raise InputError(f"{p}: already in {store} (capture {row[0]}); nothing was added (ingesting it again "
                             "would count every finding twice)")


__all__ = ["refuse_merged_duplicates", "refuse_already_stored"]
