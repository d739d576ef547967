"""The house checks itself: layers import one way, and no module grows past what one reader holds in mind.

Data flows ingest -> schema -> rules (engine) -> report (DESIGN.md). The layers below the joining modules know
nothing of the layers beside or above them, so a change to the report never reaches ingest, and the API and the
workflow are the only places that put the layers together.
"""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import REPO

PACKAGE = REPO / "nsight_advisor"
LAYERS = ("ingest", "schema", "engine", "report")
#: What each layer must never import (the top-level modules that join layers are forbidden to every layer).
FORBIDDEN = {
    "ingest": {"engine", "report"},
    "schema": {"ingest", "engine", "report"},
    "engine": {"ingest", "report"},
    "report": {"ingest", "engine"},
}
#: The modules allowed to import more than one of ingest, engine and report.
JOINERS = {"nsight_advisor.api", "nsight_advisor.workflow"}
#: Top-level modules that join layers or drive them: no layer imports these.
TOP = {"api", "workflow", "cli", "__main__", "compare", "combined_view", "result_cache", "parallel_ingest"}
MAX_LINES = 500


def _module(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Every nsight_advisor module ``path`` imports, at the top or inside a function."""
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
            out.add(base)
            out.update(f"{base}.{a.name}" for a in node.names)
    return {name for name in out if name.split(".")[0] == "nsight_advisor"}


def _layer(name: str) -> str | None:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else None


def _graph() -> dict[str, set[str]]:
    return {_module(p): _imports(p) for p in sorted(PACKAGE.rglob("*.py"))}


def test_graph_is_read():
    """The checks below see the package's real imports (the parser is not silently finding nothing)."""
    graph = _graph()
    assert len(graph) > 50
    assert "nsight_advisor.schema" in {_layer(n) and f"nsight_advisor.{_layer(n)}" for n in
                                       graph["nsight_advisor.ingest.nsys_reader"]}
    assert "nsight_advisor.engine" in {f"nsight_advisor.{_layer(n)}" for n in graph["nsight_advisor.workflow"]}
    assert "nsight_advisor.workflow" in graph["nsight_advisor.api"]


def test_layers_import_one_way():
    """ingest and schema import nothing of engine or report; report nothing of ingest or engine; engine nothing of
    ingest or report; no layer imports the modules that join layers."""
    wrong = []
    for module, imports in _graph().items():
        layer = _layer(module)
        if layer is None:
            continue
        for name in imports:
            target = _layer(name)
            if target in FORBIDDEN[layer] or (target is None and name.split(".")[1:2] and name.split(".")[1] in TOP):
                wrong.append(f"{module} imports {name}")
    assert not wrong, "layering broken:\n  " + "\n  ".join(sorted(wrong))


def test_only_the_api_and_workflow_join_layers():
    """A module that imports two of ingest, engine and report is the API or the workflow."""
    joined = {}
    for module, imports in _graph().items():
        layers = {_layer(n) for n in imports} & {"ingest", "engine", "report"}
        if len(layers) > 1 and module not in JOINERS:
            joined[module] = sorted(layers)
    assert not joined, f"only {sorted(JOINERS)} may join layers: {joined}"


def test_nothing_imports_the_cli():
    """The CLI is the outermost shell: nothing but ``__main__`` imports it."""
    users = [m for m, imports in _graph().items() if "nsight_advisor.cli" in imports and m != "nsight_advisor.__main__"]
    assert not users


def test_no_module_over_500_lines():
    """No Python module of the package or the tools is longer than 500 lines: split it by what it does."""
    long = {str(p.relative_to(REPO)): n for p in [*PACKAGE.rglob("*.py"), *(REPO / "tools").rglob("*.py")]
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines: {long}"


def test_the_cli_is_a_shell_over_the_api():
    """The CLI reaches the layers only through the API (and the workflow's output helpers): it imports nothing of
    ingest, schema, engine or report itself, and every command calls the API."""
    imports = _graph()["nsight_advisor.cli"]
    assert not {n for n in imports if _layer(n)}, sorted(n for n in imports if _layer(n))
    assert "nsight_advisor.api" in imports
