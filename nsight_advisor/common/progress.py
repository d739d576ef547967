"""A minimal progress bar on stderr, shown only when stderr is a terminal and the work takes over a second."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """Step counter that draws ``label [#####.....] 3/8 step`` on stderr.

    Nothing is drawn when ``enabled`` is false, when the stream is not a TTY, or before
    ``delay_s`` has passed (short ingests stay silent). ``close()`` clears the line.
    """

    def __init__(self, label: str, total_steps: int, *, enabled: bool = True, delay_s: float = 1.0,
                 stream: TextIO | None = None) -> None:
        self.label = label
        self.total_steps = max(1, total_steps)
        self.done_steps = 0
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled and _isatty(self.stream)
        self.delay_s = delay_s
        self._started_s = time.monotonic()
        self._drawn = False

    def step(self, what: str = "") -> None:
        """Mark one step done and redraw when visible; ``what`` names the step about to start."""
        self.done_steps = min(self.total_steps, self.done_steps + 1)
        self._draw(what)

    def _draw(self, what: str) -> None:
        if not self.enabled or time.monotonic() - self._started_s < self.delay_s:
            return
        width = 24
        filled = int(width * self.done_steps / self.total_steps)
        line = f"\r{self.label} [{'#' * filled}{'.' * (width - filled)}] {self.done_steps}/{self.total_steps} {what}"
        self.stream.write(line[:120].ljust(80))
        self.stream.flush()
        self._drawn = True

    def close(self) -> None:
        """Erase the bar (if it was drawn)."""
        if self._drawn:
            self.stream.write("\r" + " " * 80 + "\r")
            self.stream.flush()
            self._drawn = False

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _isatty(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False
