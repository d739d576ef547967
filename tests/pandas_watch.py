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
    return pandas_after(["ingest", str(export), "--store", str(tmp_path / "store.duckdb")], tmp_path)


def pandas_after(args: list[str], tmp_path: Path, module: str = "pandas") -> str:
    """``'True'`` or ``'False'``: whether the command ``nsight-advisor ARGS`` left pandas (or ``module``) imported
    (its cache folder in ``tmp_path``)."""
    script = ("import sys\n"
              "from nsight_advisor.cli import main\n"
              "try:\n"
              "    main(sys.argv[1:], standalone_mode=False)\n"
              "finally:\n"
              f"    print({module!r} in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, cwd=tmp_path,
                         timeout=300,
                         env={**os.environ, "PYTHONPATH": str(REPO), "NSIGHT_ADVISOR_CACHE": str(tmp_path / "cache")})
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().splitlines()[-1]
