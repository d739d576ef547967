"""Whether a command of the tool imported pandas: run in a fresh process, checked in ``sys.modules`` at its end (which
also sees an import made from DuckDB's or pyarrow's compiled side)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def pandas_after_ingest(export: Path, tmp_path: Path) -> str:
    """``'True'`` or ``'False'``: whether ``ingest EXPORT --store tmp_path/store.duckdb`` left pandas imported."""
    script = ("import sys\n"
              "from nsight_advisor.cli import main\n"
              "try:\n"
              "    main(['ingest', sys.argv[1], '--store', sys.argv[2]], standalone_mode=False)\n"
              "finally:\n"
              "    print('pandas' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", script, str(export), str(tmp_path / "store.duckdb")],
                         capture_output=True, text=True, cwd=tmp_path, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(REPO), "NSIGHT_ADVISOR_CACHE": str(tmp_path / "cache")})
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().splitlines()[-1]
