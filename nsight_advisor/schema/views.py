"""Derived views over the normalized tables (kernel classes, ncu roofline numbers, ...).

Each ``views/*.sql`` file holds ``CREATE OR REPLACE VIEW`` statements over the normalized tables only;
files run in name order, so a view may build on views from an earlier file.
"""

from __future__ import annotations

from importlib import resources

import duckdb


def view_sql_files() -> list[tuple[str, str]]:
    """(file name, SQL text) of every view file, in the order they run."""
    folder = resources.files("nsight_advisor.schema") / "views"
    files = sorted((f for f in folder.iterdir() if f.name.endswith(".sql")), key=lambda f: f.name)
    return [(f.name, f.read_text(encoding="utf-8")) for f in files]


def create_views(con: duckdb.DuckDBPyConnection) -> None:
    """Create or replace every derived view."""
    for _name, sql in view_sql_files():
        for statement in _split_statements(sql):
            con.execute(statement)


def _split_statements(sql: str) -> list[str]:
    # View files hold no string literals with ';' (kept simple on purpose; lint checks each file parses).
    return [s.strip() for s in sql.split(";") if s.strip() and not _only_comments(s)]


def _only_comments(text: str) -> bool:
    return all(not line.strip() or line.strip().startswith("--") for line in text.splitlines())
