"""The command line leaves without tearing the interpreter down (common/process_exit.py), and still does what a
normal exit does that anyone can see: atexit functions run (run folders go), stdout and stderr are flushed, the
exit code is the command's, and a thread still working is waited for."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from nsight_advisor.common import process_exit

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "sample_traces" / "demo_training_step.sqlite"


def _python(code: str, **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120, **kw)


@pytest.mark.parametrize("code", [0, 1])
def test_atexit_functions_run_and_streams_are_flushed(code):
    proc = _python(
        "import atexit, sys\n"
        "atexit.register(lambda: print('atexit ran', flush=False))\n"
        "class Kept:\n"
        "    def __del__(self):\n"
        "        sys.stdout.write('torn down')\n"  # a normal exit would free it on the way out
        "kept = Kept()\n"
        "from nsight_advisor.common.process_exit import exit_now\n"
        "sys.stdout.write('x' * 100000)\n"  # more than a pipe's buffer holds, unflushed
        "sys.stderr.write('to stderr')\n"
        f"exit_now({code})\n")
    assert proc.returncode == code
    assert proc.stdout == "x" * 100000 + "atexit ran\n"  # and not "torn down": the interpreter was not
    assert proc.stderr == "to stderr"


def test_other_codes_take_the_normal_way_out():
    for code in (2, 3, "a message"):  # an error of the command, or of Python's own making
        with pytest.raises(SystemExit) as raised:
            process_exit.exit_now(code)
        assert raised.value.code == code
    # None is 0, as for sys.exit
    proc = _python("from nsight_advisor.common.process_exit import exit_now\nexit_now(None)\n")
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")


def test_a_thread_still_working_is_waited_for():
    # in this process: the fast way would kill the thread, so exit_now leaves through sys.exit
    release = threading.Event()
    worker = threading.Thread(target=release.wait)
    worker.start()
    try:
        with pytest.raises(SystemExit) as raised:
            process_exit.exit_now(0)
        assert raised.value.code == 0
    finally:
        release.set()
        worker.join()
    # and in a process of its own: the thread's last words are written before the process ends
    proc = _python(
        "import threading, time\n"
        "def late():\n"
        "    time.sleep(0.3)\n"
        "    print('thread done', flush=True)\n"
        "threading.Thread(target=late).start()\n"
        "from nsight_advisor.common.process_exit import exit_now\n"
        "exit_now(0)\n")
    assert proc.returncode == 0
    assert proc.stdout == "thread done\n"


@pytest.mark.skipif(not SAMPLE.exists(), reason="the bundled sample is missing")
def test_the_command_line_exits_this_way_with_its_output_whole(tmp_path):
    cache = tmp_path / "cache"
    env = {**os.environ, "PYTHONPATH": str(REPO), "NSIGHT_ADVISOR_CACHE": str(cache)}
    proc = subprocess.run([sys.executable, "-m", "nsight_advisor", "analyze", str(SAMPLE), "--format", "json",
                           "--no-cache"], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)  # every byte of a report larger than a pipe's buffer arrived
    assert report["findings"]
    # the run folder (where the store was built) was removed by the atexit function that owns it
    assert not list(cache.rglob(".nsa-run-*"))
    # --fail-on: exit code 1, the fast way too
    proc = subprocess.run([sys.executable, "-m", "nsight_advisor", "analyze", str(SAMPLE), "--format", "json",
                           "--fail-on", "info", "-o", str(tmp_path / "r.json")], capture_output=True, text=True,
                          env=env, timeout=300)
    assert proc.returncode == 1, proc.stderr
    assert json.loads((tmp_path / "r.json").read_text())["findings"]
