"""Ending the command-line process without tearing the interpreter down.

After a command has done its work, a normal exit still frees every object, unloads duckdb, pyarrow and numpy and
returns their memory page by page: 70 to 110 ms after a cold analysis of the 8 DLRM ranks (4% of the run), for
memory the kernel takes back at once when the process ends. :func:`exit_now` does what a normal exit does that
anyone can observe (the atexit functions, which remove run folders, and the flushes of stdout and stderr) and
then ends the process. Only the command line calls it, after its command has returned: an embedding caller (a
test's CliRunner, the API) never gets here.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from typing import NoReturn

#: Exit codes of a finished command (done; findings at or above --fail-on). Any other code takes the normal way
#: out, which matters nowhere for speed.
FINISHED = (0, 1)


def exit_now(code: object) -> NoReturn:
    """End the process with ``code`` (a SystemExit's code): at once where the command finished and no other
    thread of ours still runs (a normal exit waits for such threads), else through :func:`sys.exit`."""
    if code is None:
        code = 0
    if not isinstance(code, int) or code not in FINISHED or _threads_running():
        sys.exit(code)
    atexit._run_exitfuncs()  # what the interpreter would run on its way out (they are cleared once run)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed or broken stream: let the interpreter report it as it would
        sys.exit(code)
    os._exit(code)


def _threads_running() -> bool:
    """Whether a non-daemon thread other than this one is alive: an exit waits for it to finish."""
    main = threading.main_thread()
    return threading.current_thread() is not main or any(
        t is not main and not t.daemon and t.is_alive() for t in threading.enumerate())
