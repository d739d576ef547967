"""Bad inputs through the CLI: exit 2, one line on stderr, no traceback, input unchanged, no store left behind."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, TRACES

SAMPLE = REPO / "sample_traces" / "demo_training_step.sqlite"


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "NSIGHT_ADVISOR_CACHE": str(cwd / "cache")}
    return subprocess.run([sys.executable, "-m", "nsight_advisor", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def _make(kind: str, tmp: Path) -> Path:
    if kind == "zero-byte":
        p = tmp / "empty.sqlite"
        p.write_bytes(b"")
    elif kind == "truncated":
        p = tmp / "truncated.sqlite"
        p.write_bytes(SAMPLE.read_bytes()[: SAMPLE.stat().st_size // 2])
    elif kind == "not-sqlite":
        p = tmp / "garbage.sqlite"
        p.write_bytes(b"\x00\x01binary junk that is not a database" * 50)
    elif kind == "sqlite-without-nsys-tables":
        p = tmp / "other.sqlite"
        con = sqlite3.connect(p)
        con.execute("CREATE TABLE customers (id INTEGER, name TEXT)")
        con.execute("INSERT INTO customers VALUES (1, 'x')")
        con.commit()
        con.close()
    elif kind == "unknown-extension":
        p = tmp / "capture.xyz"
        p.write_bytes(b"\x00\x00\x00 some binary \xff\xfe")
    elif kind == "missing-path":
        p = tmp / "does-not-exist.sqlite"
    elif kind == "directory":
        p = tmp / "a_directory.sqlite"
        p.mkdir()
    else:
        raise AssertionError(kind)
    return p


def _digest(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


@pytest.mark.parametrize("kind", ["zero-byte", "truncated", "not-sqlite", "sqlite-without-nsys-tables",
                                  "unknown-extension", "missing-path", "directory"])
def test_bad_input_exits_2_with_one_line(kind: str, tmp_path: Path) -> None:
    bad = _make(kind, tmp_path)
    before = _digest(bad)
    store = tmp_path / "out" / "store.duckdb"
    proc = _cli("ingest", str(bad), "--store", str(store), cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert bad.name in lines[0]
    assert _digest(bad) == before
    assert not store.exists()
    leftovers = [p.name for p in store.parent.glob("*")] if store.parent.exists() else []
    assert [n for n in leftovers if not n.endswith(".lock")] == []


def test_raw_report_without_usable_nsys_names_the_command(tmp_path: Path) -> None:
    raw = TRACES / "nsys-raw" / "fuser_h200_matmul.nsys-rep"
    if not raw.exists():
        pytest.skip(f"real traces absent at {TRACES}")
    env_path = os.environ.get("PATH", "")
    # Hide nsys (if installed) so the message path is exercised deterministically.
    import shutil

    nsys = shutil.which("nsys")
    path_without_nsys = os.pathsep.join(d for d in env_path.split(os.pathsep)
                                        if not nsys or Path(d).resolve() != Path(nsys).resolve().parent)
    env = {**os.environ, "PYTHONPATH": str(REPO), "PATH": path_without_nsys,
           "NSIGHT_ADVISOR_CACHE": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, "-m", "nsight_advisor", "ingest", str(raw), "--store",
                           str(tmp_path / "s.duckdb")], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert "nsys export --type sqlite" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "s.duckdb").exists()


def test_raw_report_with_nsys_on_path(tmp_path: Path) -> None:
    import shutil

    raw = TRACES / "nsys-raw" / "csc746_vecadd.nsys-rep"
    if shutil.which("nsys") is None:
        pytest.skip("nsys is not installed (optional: Nsight Systems from Debian non-free)")
    if not raw.exists():
        pytest.skip(f"real traces absent at {TRACES}")
    proc = _cli("ingest", str(raw), "--store", str(tmp_path / "s.duckdb"), cwd=tmp_path)
    if proc.returncode == 2:  # this nsys cannot read the report: the one line names the command
        assert "nsys export --type sqlite" in proc.stderr
        return
    assert proc.returncode == 0, proc.stderr
    q = _cli("query", str(tmp_path / "s.duckdb"), "select count(*) as n from kernels", "--format", "csv", cwd=tmp_path)
    assert q.stdout.splitlines() == ["n", "1"]
