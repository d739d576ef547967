"""Build the wheel, install it into a fresh virtual environment, and run it from outside the repository.

A packaging mistake (a module or data folder left out of the wheel, a broken entry point) fails here.
The build runs in a copy of the sources so the checkout gets no build/ or egg-info folders.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from conftest import REPO, TRACES

pytestmark = pytest.mark.slow

SOURCES = ("pyproject.toml", "README.md", "nsight_advisor", "rules", "report_templates")


def _run(cmd: list[str], cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    return subprocess.run(cmd, cwd=cwd, env={**clean, **(env or {})}, capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A venv (seeing the system's dependencies) with our wheel installed; returns its bin folder.

    --ignore-installed: CI has already pip-installed the project into the system site-packages, which the venv
    sees; without it pip would call the requirement satisfied and install nothing into the venv.
    """
    tmp = tmp_path_factory.mktemp("pkg")
    src = tmp / "src"
    src.mkdir()
    for name in SOURCES:
        s = REPO / name
        if s.is_dir():
            shutil.copytree(s, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(s, src / name)
    dist = tmp / "dist"
    build = _run([sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "-w", str(dist)], cwd=src)
    if build.returncode != 0:
        text = build.stdout + build.stderr
        if any(w in text for w in ("Could not find a version", "connection", "Connection", "NewConnectionError")):
            pytest.skip("cannot fetch the build backend (setuptools) without network: " + text.strip().splitlines()[-1])
        pytest.fail("pip wheel failed:\n" + text[-3000:])
    wheels = list(dist.glob("nsight_advisor-*.whl"))
    assert len(wheels) == 1, list(dist.iterdir())
    env_dir = tmp / "venv"
    venv.EnvBuilder(system_site_packages=True, with_pip=False).create(env_dir)
    bindir = env_dir / "bin"
    install = _run([sys.executable, "-m", "pip", "--python", str(bindir / "python"), "install", "--no-deps",
                    "--ignore-installed", str(wheels[0])], cwd=tmp)
    if install.returncode != 0:  # pip < 22.3 has no --python: fall back to the venv's own pip, if any
        install = _run([str(bindir / "python"), "-m", "pip", "install", "--no-deps", "--ignore-installed",
                        str(wheels[0])], cwd=tmp)
    assert install.returncode == 0, install.stdout + install.stderr
    return bindir


def _built_from(installed: Path) -> Path:
    """The copy of the sources the wheel was built from (the checkout may have changed since)."""
    return installed.parent.parent / "src"


def test_console_script_help(installed: Path, tmp_path: Path) -> None:
    proc = _run([str(installed / "nsight-advisor"), "--help"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    for command in ("analyze", "ingest", "info", "query", "rules"):
        assert command in proc.stdout


def test_imports_from_the_venv_with_data_folders(installed: Path, tmp_path: Path) -> None:
    code = ("import nsight_advisor, pathlib; from nsight_advisor.common import resources as r; "
            "print(nsight_advisor.__file__); print(r.builtin_rules_dir()); print(r.templates_dir())")
    proc = _run([str(installed / "python"), "-c", code], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    module, rules, templates = (Path(line) for line in proc.stdout.splitlines())
    venv_dir = installed.parent
    assert venv_dir in module.parents, f"imported {module}, not the installed wheel"
    assert rules.name == "_rules" and venv_dir in rules.parents
    assert templates.name == "_templates" and venv_dir in templates.parents
    src = _built_from(installed)
    shipped_rules = {p.name for p in (src / "rules").iterdir() if p.is_dir() and (p / "rule.toml").exists()}
    assert shipped_rules == {p.parent.name for p in rules.glob("*/rule.toml")}
    assert shipped_rules, "no rule folders were packaged"
    assert {p.name for p in (src / "report_templates").iterdir() if p.is_file()} <= {p.name for p in templates.iterdir()}


def test_ingest_from_outside_the_repo(installed: Path, tmp_path: Path) -> None:
    export = TRACES / "nsys" / "nsys_ai_mock.sqlite"
    if not export.exists():
        pytest.skip(f"real traces absent at {TRACES}")
    store = tmp_path / "s.duckdb"
    env = {"NSIGHT_ADVISOR_CACHE": str(tmp_path / "cache")}
    proc = _run([str(installed / "nsight-advisor"), "ingest", str(export), "--store", str(store)], cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    q = _run([str(installed / "nsight-advisor"), "query", str(store), "select count(*) as n from kernels",
              "--format", "csv"], cwd=tmp_path, env=env)
    assert q.stdout.splitlines() == ["n", "2"], q.stderr
    sample = _run([str(installed / "python"), "-m", "nsight_advisor", "info",
                   str(REPO / "sample_traces" / "demo_training_step.sqlite")], cwd=tmp_path, env=env)
    assert sample.returncode == 0 and "ampere_sgemm_128x64_nn" in sample.stdout, sample.stderr
