"""A helper process tied to its parent's life: it ends when the parent ends, however the parent ends, and cleans up.

``compare`` analyzes HEAD in a helper process while it analyzes BASE. Killed with SIGKILL, the parent cannot stop
its helper, so the helper watches for itself: on Linux the kernel sends it SIGTERM when the parent dies
(``PR_SET_PDEATHSIG``), and everywhere its stdin is a pipe from the parent whose end (EOF) means the parent is
gone. SIGTERM in the helper raises, so ``finally`` blocks and atexit remove its run folder, lock and partial store.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading

#: Seconds the parent gives a helper to clean up after SIGTERM before it sends SIGKILL.
TERM_GRACE_S = 20.0

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


class HelperStopped(KeyboardInterrupt):
    """SIGTERM in the helper (from the parent, or the kernel when the parent died)."""


def start_helper(argv: list[str]) -> subprocess.Popen:
    """Start ``python ARGV`` as a helper: its stdin a pipe this process holds, its parent's pid in the environment."""
    env = {**os.environ, "NSIGHT_ADVISOR_PARENT_PID": str(os.getpid())}
    return subprocess.Popen([sys.executable, *argv], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=env)


def stop_helper(proc: subprocess.Popen) -> None:
    """End ``proc`` if it still runs: SIGTERM (it cleans up), then SIGKILL after :data:`TERM_GRACE_S`."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.terminate()
        try:
            proc.wait(timeout=TERM_GRACE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    with contextlib.suppress(OSError):
        if proc.stdin is not None:
            proc.stdin.close()


def become_helper() -> None:
    """In the helper, first thing: SIGTERM raises :class:`HelperStopped`; the helper ends when its parent does."""
    def stop(_signum, _frame):
        raise HelperStopped

    signal.signal(signal.SIGTERM, stop)
    parent = os.environ.get("NSIGHT_ADVISOR_PARENT_PID", "")
    if sys.platform.startswith("linux"):
        with contextlib.suppress(Exception):  # no libc prctl: the stdin watch below still applies
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if parent.isdigit() and os.getppid() != int(parent):  # the parent died before prctl took effect
        raise HelperStopped
    threading.Thread(target=_watch_stdin, name="parent-watch", daemon=True).start()


def _watch_stdin() -> None:
    """Read stdin until EOF (the parent closed it or died), then SIGTERM this process."""
    with contextlib.suppress(Exception):
        while os.read(sys.stdin.fileno(), 4096):
            pass
    os.kill(os.getpid(), signal.SIGTERM)


__all__ = ["start_helper", "stop_helper", "become_helper", "HelperStopped", "TERM_GRACE_S"]
