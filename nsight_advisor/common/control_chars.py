"""Control characters out of everything printed or rendered as text.

A capture's strings (kernel names, NVTX ranges, file names) may carry terminal escapes (OSC sets a window
title, CSI clears the screen), raw carriage returns that hide a line, or bidirectional overrides that make
text read differently from what it is. Text for a terminal, a Markdown file or an HTML page keeps tabs and
newlines and loses the rest; JSON and SARIF escape them as JSON does and keep the strings exact.
"""

from __future__ import annotations

import re

# C0 except tab and newline, DEL, C1, and the Unicode bidirectional embeddings, overrides and isolates.
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def strip_controls(text: str) -> str:
    """``text`` without control characters (tabs and newlines kept)."""
    return _CONTROLS.sub("", text)


def terminal_safe(text: str) -> str:
    """``text`` for a terminal (stdout): each control character but tab and newline written as the six characters
    ``\\uXXXX``, so it shows instead of acting. The one function every text bound for stdout passes through.

    The same spelling is a JSON string escape of the same character: JSON or SARIF on stdout stays valid and
    decodes to exactly the strings it holds (a raw control character can only stand inside a JSON string).
    """
    return _CONTROLS.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
