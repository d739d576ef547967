"""Derived views over the normalized tables: kernel classes, ncu roofline numbers, and the analysis layer.

Each ``views/*.sql`` file holds ``CREATE OR REPLACE VIEW`` (and ``MACRO``) statements over the normalized tables
only; files run in name order, so a view may build on views from an earlier file.

The analysis layer (files ``30_`` to ``39_``) documents each view in a comment block above it, the way Perfetto's
SQL standard library does::

    -- @view gpu_idle_gaps
    -- What one row is, in a sentence or two.
    -- @column capture_id Capture (captures.capture_id).
    -- @column cause Why the GPU idled: ...

:func:`documented_views` reads those blocks: rules may name these views in ``[[requires]]``, ``rules show`` and
docs/analysis-views.md list them, and a test checks every returned column is documented.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the rule loader reads view names on the warm path, which never loads duckdb
    import duckdb


@dataclass(frozen=True)
class ViewDoc:
    """One documented view or macro of the analysis layer."""

    name: str
    kind: str  # view | macro
    doc: str
    columns: tuple[tuple[str, str], ...]
    file: str


def view_sql_files() -> list[tuple[str, str]]:
    """(file name, SQL text) of every view file, in the order they run."""
    folder = resources.files("nsight_advisor.schema") / "views"
    files = sorted((f for f in folder.iterdir() if f.name.endswith(".sql")), key=lambda f: f.name)
    return [(f.name, f.read_text(encoding="utf-8")) for f in files]


def create_views(con: duckdb.DuckDBPyConnection) -> None:
    """Create or replace every derived view."""
    for _name, sql in view_sql_files():
        # DuckDB's own parser splits the file: comments and string literals may hold ';'
        for statement in con.extract_statements(sql):
            con.execute(statement)


_TAG = re.compile(r"^--\s*@(view|macro|column)\s+(\S+)\s*(.*)$")


@lru_cache(maxsize=1)
def documented_views() -> tuple[ViewDoc, ...]:
    """Every ``@view`` and ``@macro`` block of the view files, in file order."""
    out: list[ViewDoc] = []
    for file, sql in view_sql_files():
        current: dict | None = None
        for raw in sql.splitlines():
            line = raw.strip()
            if not line.startswith("--"):
                if current is not None:
                    out.append(_finish(current, file))
                    current = None
                continue
            tag = _TAG.match(line)
            if tag and tag.group(1) in ("view", "macro"):
                if current is not None:
                    out.append(_finish(current, file))
                current = {"name": tag.group(2).split("(")[0], "kind": tag.group(1), "doc": [], "columns": []}
            elif tag and current is not None:
                current["columns"].append((tag.group(2), tag.group(3).strip()))
            elif current is not None:
                text = line[2:].strip()
                if current["columns"]:  # a column's description continued on the next line
                    name, doc = current["columns"][-1]
                    current["columns"][-1] = (name, f"{doc} {text}".strip())
                else:
                    current["doc"].append(text)
        if current is not None:
            out.append(_finish(current, file))
    return tuple(out)


def _finish(block: dict, file: str) -> ViewDoc:
    return ViewDoc(block["name"], block["kind"], " ".join(t for t in block["doc"] if t).strip(),
                   tuple(block["columns"]), file)


def analysis_view_names() -> list[str]:
    """Names of the documented views (macros excluded): what ``[[requires]]`` may name besides tables."""
    return [v.name for v in documented_views() if v.kind == "view"]


def views_markdown() -> str:
    """docs/analysis-views.md: every documented view and macro with its columns (regenerate with
    ``python -m tools.gen_docs``; a test keeps the page current)."""
    out = ["# Analysis views", "",
           "Generated from the `@view` blocks of `nsight_advisor/schema/views/*.sql` by "
           "`python -m tools.gen_docs`; do not edit by hand.", "",
           "Rules read these views instead of re-deriving busy time, gaps or classes on their own, and may name "
           "them in `[[requires]]`. [impact.md](impact.md) explains the time accounting they implement.", ""]
    for v in documented_views():
        out.append(f"## `{v.name}` ({v.kind}, {v.file})")
        out.append("")
        out.append(v.doc)
        out.append("")
        if v.columns:
            out.append("| column | meaning |")
            out.append("|---|---|")
            out.extend(f"| `{name}` | {_cell(doc)} |" for name, doc in v.columns)
            out.append("")
    return "\n".join(out)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


if __name__ == "__main__":
    print(views_markdown(), end="")
