"""The house checks itself: the layers of docs/architecture.md hold, no import circle, a root that stays small.

The layer contracts themselves are import-linter's (``[tool.importlinter]`` in pyproject.toml, run here and by CI
as ``lint-imports``). This file keeps what import-linter does not say: no import cycle among the package's modules
(function-level imports included), at most 8 modules at the package's root, no module over 500 lines, and the CLI
as a shell over the API.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

PACKAGE = REPO / "nsight_advisor"
MAX_LINES = 500
MAX_ROOT_MODULES = 8
#: The subpackages of docs/architecture.md, each a layer or part of one.
SUBPACKAGES = {"common", "catalog", "schema", "ingest", "store", "analysis", "engine", "authoring", "report", "compare"}


def _module(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> set[str]:
    return {_module(p) for p in PACKAGE.rglob("*.py")}


def _imports(path: Path, modules: set[str]) -> set[str]:
    """The package's modules that ``path`` imports, at the top, inside a function or under TYPE_CHECKING.

    ``from pkg import name`` is an import of the module ``pkg.name`` when there is one, else of ``pkg`` (as
    import-linter reads it): importing a sibling module through its package is no import of the package's
    ``__init__``."""
    module = _module(path)
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
                base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
            subs = {f"{base}.{a.name}" for a in node.names} & modules
            out.update(subs)
            if len(subs) < len(node.names):
                out.add(base)
    return {name for name in out if name in modules and name != module}


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {_module(p): _imports(p, modules) for p in sorted(PACKAGE.rglob("*.py"))}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return out


def test_graph_is_read():
    """The checks below see the package's real imports (the parser is not silently finding nothing)."""
    graph = _graph()
    assert len(graph) > 80
    assert "nsight_advisor.schema.tables" in graph["nsight_advisor.ingest.nsys.reader"]
    assert "nsight_advisor.engine.analyze" in graph["nsight_advisor.workflow"]
    assert "nsight_advisor.workflow" in graph["nsight_advisor.api"]


def test_the_cycle_finder_finds_a_cycle():
    """A made-up graph with a circle of three and a self-contained pair: the finder names the circle only."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"d"}}
    assert _cycles(graph) == [["a", "b", "c"]]


def test_no_import_cycle():
    """No module reaches itself through the package's imports, function-level ones included."""
    cycles = _cycles(_graph())
    assert not cycles, "import cycles:\n  " + "\n  ".join(" <-> ".join(c) for c in cycles)


def test_import_linter_contracts_are_kept():
    """``lint-imports`` (pyproject.toml's [tool.importlinter]) keeps every contract, at least the layers and two
    more."""
    try:
        import importlinter  # noqa: F401
    except ImportError:
        pytest.skip("import-linter is not installed (it is in the test extras: pip install '.[test]')")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    run = subprocess.run([sys.executable, "-c", "from importlinter.cli import lint_imports_command; "
                          "lint_imports_command()"], cwd=REPO, capture_output=True, text=True, timeout=300, env=env)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out
    kept = [line for line in out.splitlines() if "Contracts:" in line]
    assert kept and int(kept[0].split("Contracts:")[1].split("kept")[0]) >= 3, out


def test_the_root_is_small():
    """The package's root holds at most 8 modules; everything else lives in the subpackage of its layer."""
    root = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(root) <= MAX_ROOT_MODULES, root
    packages = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    assert SUBPACKAGES <= packages, SUBPACKAGES - packages


def test_every_package_is_installed():
    """Every package of the source tree is in pyproject.toml's ``packages`` (a package left out installs as
    nothing, and only the installed CLI would notice)."""
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib

    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["packages"])
    packages = {_module(p.parent / "__init__.py") for p in PACKAGE.rglob("__init__.py")}
    assert packages <= listed, sorted(packages - listed)


def test_no_module_over_500_lines():
    """No Python module of the package or the tools is longer than 500 lines: split it by what it does."""
    long = {str(p.relative_to(REPO)): n for p in [*PACKAGE.rglob("*.py"), *(REPO / "tools").rglob("*.py")]
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines: {long}"


def test_the_cli_is_a_shell_over_the_api():
    """The CLI reaches the layers only through the API (and the workflow's output helpers and compare's side
    parsing): it imports nothing of ingest, schema, store, analysis, engine or report itself."""
    imports = _graph()["nsight_advisor.cli"]
    layers = {"ingest", "schema", "store", "analysis", "engine", "report", "authoring"}
    assert not {n for n in imports if n.split(".")[1] in layers}, sorted(imports)
    assert "nsight_advisor.api" in imports


def test_nothing_imports_the_cli():
    """The CLI is the outermost shell: nothing but ``__main__`` imports it."""
    users = [m for m, imports in _graph().items() if "nsight_advisor.cli" in imports and m != "nsight_advisor.__main__"]
    assert not users
