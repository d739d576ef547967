"""Exit codes are documented where users look (--help of every command, README) and are what the CLI returns:
0 done, 1 findings at or above --fail-on, 2 bad input or usage (one line), 3 internal error (bug report + details file).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
EXIT_LINES = {
    "0": re.compile(r"\b0\s+done"),
    "1": re.compile(r"\b1\s+findings at or above --fail-on"),
    "2": re.compile(r"\b2\s+bad input or usage"),
    "3": re.compile(r"\b3\s+internal error"),
}


def _cli(*args: str, cwd: Path, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "NSIGHT_ADVISOR_CACHE": str(cwd / "cache"), "TMPDIR": str(cwd),
           **(env_extra or {})}
    return subprocess.run([sys.executable, "-m", "nsight_advisor", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize("command", [[], ["analyze"]])
def test_help_documents_exit_codes(command, tmp_path):
    """`--help` of the program and of analyze lists the four exit codes."""
    proc = _cli(*command, "--help", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    for code, pattern in EXIT_LINES.items():
        assert pattern.search(proc.stdout), f"--help of {' '.join(command) or 'the program'} lacks exit code {code}"
    assert "report" in proc.stdout.lower()  # exit 3 asks for a bug report


def test_readme_documents_exit_codes():
    """README states the same four exit codes."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    flat = " ".join(text.split())
    for code, words in {"0": "done", "1": "findings at or above", "2": "bad input or usage",
                        "3": "internal error (please report it"}.items():
        assert re.search(rf"`{code}`\s+{re.escape(words)}", flat), f"README does not document exit code {code} ({words})"


def test_usage_error_is_exit_2_one_line(tmp_path):
    """A usage mistake (unknown option) is exit 2 with one line, no traceback."""
    proc = _cli("analyze", "--no-such-option", "x.sqlite", cwd=tmp_path)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "Traceback" not in proc.stderr


def test_internal_error_is_exit_3_with_details_file(tmp_path):
    """A bug (here: an unreadable cache folder path forced through an env var) never prints a traceback: exit 3,
    one line that asks for a bug report and names the file holding the details."""
    from nsight_advisor import cli

    # Drive the real error path in-process: a command that raises a plain exception.
    @cli.main.command("boom-for-test", hidden=True)
    def _boom():
        raise ZeroDivisionError("simulated bug")

    try:
        old = os.environ.get("TMPDIR")
        os.environ["TMPDIR"] = str(tmp_path)
        import tempfile

        tempfile.tempdir = None
        with pytest.raises(SystemExit) as exc:
            cli.main.main(["boom-for-test"], prog_name="nsight-advisor")
        assert exc.value.code == 3
    finally:
        cli.main.commands.pop("boom-for-test", None)
        if old is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = old
        tempfile.tempdir = None
    crash_files = list(tmp_path.glob("nsight-advisor-crash-*.txt"))
    assert len(crash_files) == 1
    details = crash_files[0].read_text()
    assert "ZeroDivisionError: simulated bug" in details and "Traceback" in details


def test_internal_error_message(tmp_path, capsys):
    """The exit-3 line asks for a report and names the details file."""
    from nsight_advisor import cli

    @cli.main.command("boom-for-test-2", hidden=True)
    def _boom():
        raise RuntimeError("simulated bug")

    try:
        with pytest.raises(SystemExit):
            cli.main.main(["boom-for-test-2"], prog_name="nsight-advisor")
    finally:
        cli.main.commands.pop("boom-for-test-2", None)
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "internal error" in err and "report" in err
    m = re.search(r"details in (\S+)", err)
    assert m and Path(m.group(1)).exists()
    Path(m.group(1)).unlink()
