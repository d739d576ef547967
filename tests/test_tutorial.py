"""docs/writing-rules.md, followed literally: its files are written, its commands run, its outputs checked.

Fenced blocks ```` ```LANG file=PATH ```` are written to PATH when the walk reaches them, ```` ```console ````
lines starting with ``$ `` are run with bash (``nsight-advisor`` is this checkout's ``python -m nsight_advisor``),
and every line of a ```` ```text output ```` block must appear in the preceding command's output. The trimmed JSON
finding shown in the tutorial must match what the real capture produces.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, TRACES

TUTORIAL = REPO / "docs" / "writing-rules.md"
CAPTURE = TRACES / "nsys" / "pipit_cloverleaf_a100.sqlite"
BLOCK = re.compile(r"^```([^\n]*)\n(.*?)^```", re.S | re.M)


def tutorial_steps() -> list[tuple[str, str, str]]:
    """(kind, info, body) for every fenced block, in order: file, console, output, json or other."""
    steps = []
    for m in BLOCK.finditer(TUTORIAL.read_text(encoding="utf-8")):
        info, body = m.group(1).strip(), m.group(2)
        if " file=" in f" {info}":
            steps.append(("file", info.split("file=", 1)[1].strip(), body))
        elif info == "console":
            steps.append(("console", "", body))
        elif info == "text output":
            steps.append(("output", "", body))
        elif info == "json":
            steps.append(("json", "", body))
        else:
            steps.append(("other", info, body))
    return steps


def test_tutorial_has_the_steps_it_promises():
    kinds = [k for k, _, _ in tutorial_steps()]
    files = [i for k, i, _ in tutorial_steps() if k == "file"]
    assert {"my-rules/long-kernels/rule.toml", "my-rules/long-kernels/query.sql",
            "my-rules/long-kernels/cases.toml"} <= set(files)
    assert kinds.count("console") >= 5 and "json" in kinds


@pytest.fixture
def shell_env(tmp_path):
    """An environment where `nsight-advisor` runs this checkout, with its own cache and $CAPTURE set."""
    if not CAPTURE.exists():
        pytest.skip(f"real capture absent at {CAPTURE}")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "nsight-advisor"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m nsight_advisor "$@"\n')
    wrapper.chmod(0o755)
    env = dict(os.environ)
    env.update(PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", CAPTURE=str(CAPTURE),
               NSIGHT_ADVISOR_CACHE=str(tmp_path / "cache"),
               PYTHONPATH=f"{REPO}{os.pathsep}{env.get('PYTHONPATH', '')}")
    work = tmp_path / "work"
    work.mkdir()
    return work, env


def _normalize(line: str) -> str:
    return " ".join(line.split())


@pytest.mark.slow
def test_following_the_tutorial_gives_a_rule_that_fires_on_the_real_capture(shell_env):
    work, env = shell_env
    last_output = ""
    ran = []
    for kind, info, body in tutorial_steps():
        if kind == "file":
            path = work / info
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(body, encoding="utf-8")
        elif kind == "console":
            for line in body.splitlines():
                if not line.startswith("$ "):
                    continue
                command = line[2:]
                proc = subprocess.run(["bash", "-c", command], cwd=work, env=env, capture_output=True, text=True,
                                      timeout=600)
                last_output = proc.stdout + proc.stderr
                assert proc.returncode == 0, f"`{command}` exited {proc.returncode}:\n{last_output}"
                ran.append(command)
        elif kind == "output":
            actual = {_normalize(x) for x in last_output.splitlines()}
            for expected in body.splitlines():
                if expected.strip():
                    assert _normalize(expected) in actual, f"tutorial shows {expected!r}; the command printed:\n{last_output}"
    assert any("analyze" in c and "--rules-dir my-rules" in c for c in ran)

    # Step 7: the rule fires on the real capture, and the tutorial's trimmed finding is what it produces.
    result = json.loads((work / "long-kernels.json").read_text())
    finding = next(f for f in result["findings"] if f["rule_name"] == "long-kernels")
    shown = json.loads(next(body for kind, _, body in tutorial_steps() if kind == "json"))
    for key, value in shown.items():
        assert finding[key] == value, f"tutorial shows {key}={value!r}, the run gave {finding[key]!r}"
    assert {o["rule_name"]: o["status"] for o in result["outcomes"]} == {"long-kernels": "findings"}

    # Step 8: --set relaxes the budget; the project config applies its own budget and ignore list.
    relaxed = json.loads((work / "relaxed.json").read_text())
    assert relaxed["findings"] == []
    assert relaxed["outcomes"][0]["status"] == "clean"
    project = json.loads((work / "project.json").read_text())
    statuses = {o["rule_name"]: o["status"] for o in project["outcomes"]}
    assert "small-grid" not in statuses and statuses["long-kernels"] == "findings"
    ours = next(f for f in project["findings"] if f["rule_name"] == "long-kernels")
    assert ours["threshold"] == 1.5
