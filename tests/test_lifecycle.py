"""Process lifecycle: ingest workers die with their parent, and the temporary files of a run that was
killed outright (SIGKILL: no cleanup runs) are reclaimed by the next run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
TRACES = REPO.parent / "shared" / "traces" / "nsys"
BIG = ["cutlass_benchmark.sqlite", "csc746_vecadd.sqlite", "nsys_ai_mfu_2gpu_before.sqlite"]


def _workers_of(parent: int) -> list[int]:
    """Pids of ingest workers whose parent is ``parent`` (read from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == parent and b"nsight_advisor.store.parallel_ingest" in cmdline:
            found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc").is_dir() or (os.cpu_count() or 1) < 2, reason="needs Linux /proc and 2 cores")
def test_sigkill_mid_ingest_leaves_no_worker_and_the_next_run_reclaims_its_files(tmp_path):
    captures = [TRACES / name for name in BIG]
    if not all(p.exists() for p in captures):
        pytest.skip(f"real traces absent at {TRACES}")
    env = {**os.environ, "PYTHONPATH": str(REPO), "NSIGHT_ADVISOR_CACHE": str(tmp_path / "cache"),
           "TMPDIR": str(tmp_path), "NSIGHT_ADVISOR_SMALL_CAPTURE_BYTES": "0"}  # workers even for small captures
    store = tmp_path / "stores" / "run.duckdb"
    proc = subprocess.Popen([sys.executable, "-m", "nsight_advisor", "ingest", *map(str, captures), "--store",
                             str(store)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    workers: list[int] = []
    deadline = time.monotonic() + 60
    while not workers and proc.poll() is None and time.monotonic() < deadline:
        workers = _workers_of(proc.pid)
        time.sleep(0.02)
    if not workers:
        proc.wait(60)
        pytest.skip("the ingest finished before a worker could be seen")
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    deadline = time.monotonic() + 10
    while any(_alive(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(w) for w in workers), "an ingest worker outlived its killed parent"
    left = sorted(p.name for p in store.parent.iterdir())
    assert not store.exists()
    assert any(name.startswith(".nsa-run-") for name in left), left  # what SIGKILL leaves: the run folder only
    done = subprocess.run([sys.executable, "-m", "nsight_advisor", "ingest", str(captures[0]), "--store", str(store)],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in store.parent.iterdir()) == [store.name]
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(("nsight-advisor", "."))) == []


@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_in_python_code_is_an_interruption(tmp_path, signum, code):
    """A signal that lands while Python code runs (click turns it into its Abort) still ends the run as an
    interruption: exit 130 or 143 and the one line, not 'aborted' with exit 2."""
    sample = Path(__file__).resolve().parent.parent / "sample_traces" / "demo_training_step.sqlite"
    script = ("import sys, time\n"
              "import nsight_advisor.workflow as w\n"
              "real = w.analyze\n"
              "def slow(*a, **k):\n"
              "    print('analyzing', flush=True); time.sleep(30); return real(*a, **k)\n"
              "w.analyze = slow\n"
              "from nsight_advisor.cli import main\n"
              "sys.argv = ['nsight-advisor', 'analyze', sys.argv[1], '--no-cache', '-q', '--format', 'json']\n"
              "main()\n")
    proc = subprocess.Popen([sys.executable, "-c", script, str(sample)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "NSIGHT_ADVISOR_CACHE": str(tmp_path)})
    assert proc.stdout.readline().strip() == "analyzing"
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    assert (proc.returncode, err.strip()) == (code, "nsight-advisor: interrupted")
