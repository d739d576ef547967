"""Raw Nsight Systems reports (.nsys-rep, .qdrep): converted with `nsys export` when nsys is installed.

Only NVIDIA's own tool reads the raw format. When ``nsys`` is not on PATH, or is too old for the report
(nsys 2022.4 answers "Version number is invalid" for 2025 reports), the user gets one line with the
command to run themselves.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Collection

import duckdb

from nsight_advisor.common import sql_params
from nsight_advisor.common.errors import InputError

EXPORT_TIMEOUT_S = 600


def export_command(path: Path) -> str:
    """The `nsys export` command that turns ``path`` into an SQLite export beside it."""
    return f"nsys export --type sqlite -o {path.with_suffix('.sqlite')} {path}"


def ingest_nsys_report(con: duckdb.DuckDBPyConnection, capture_id: int, path: Path, *, progress: bool = False,
                       defer: Collection[str] = ()) -> None:
    """Export ``path`` to SQLite in a temporary folder with `nsys export`, then ingest that export.

    ``defer``: as for :func:`~nsight_advisor.ingest.nsys.export.ingest_nsys_sqlite`.
    """
    from nsight_advisor.ingest.nsys.export import ingest_nsys_sqlite

    path = Path(path)
    nsys = shutil.which("nsys")
    if nsys is None:
        raise InputError(f"{path}: raw Nsight Systems report and `nsys` is not on PATH; "
                         f"convert it first: {export_command(path)}")
    from nsight_advisor.common.run_folder import run_folder

    # In the run folder: an interrupted export (a full copy of the capture) is removed with it, or reclaimed.
    with tempfile.TemporaryDirectory(prefix="export-", dir=run_folder()) as tmp:
        out = Path(tmp) / (path.stem + ".sqlite")
        try:
            proc = subprocess.run([nsys, "export", "--type", "sqlite", "--force-overwrite", "true", "-o", str(out),
                                   str(path)], capture_output=True, text=True, errors="replace",
                                  timeout=EXPORT_TIMEOUT_S, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise InputError(f"{path}: `nsys export` took over {EXPORT_TIMEOUT_S} s; run it yourself: "
                             f"{export_command(path)}") from None
        if proc.returncode != 0 or not out.exists():
            detail = _last_line(proc.stderr) or _last_line(proc.stdout) or f"exit code {proc.returncode}"
            raise InputError(f"{path}: `nsys export` failed ({detail}); export it with an nsys at least as new as "
                             f"the one that recorded it: {export_command(path)}")
        ingest_nsys_sqlite(con, capture_id, out, progress=progress, defer=defer)
        # The temporary export disappears: point the capture at the report the user gave.
        st = path.stat()
        sql_params.execute(con, "UPDATE captures SET source_path = ?, source_name = ?, source_size_bytes = ?, "
                           "source_mtime_ns = ?, format = 'nsys-rep' WHERE capture_id = ?",
                           [str(path.resolve()), path.name, st.st_size, st.st_mtime_ns, capture_id])


def _last_line(text: str | None) -> str:
    lines = [s.strip() for s in (text or "").splitlines() if s.strip()]
    return lines[-1][:300] if lines else ""
