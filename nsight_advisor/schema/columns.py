"""The vocabulary of the store's table definitions: a column (name with its unit, type, meaning), a table, and the
columns most tables share."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Column:
    """One column: its name (unit in the suffix), DuckDB type and meaning."""

    name: str
    type: str
    doc: str


@dataclass(frozen=True)
class Table:
    """One table of the store, with a docstring and its columns.

    ``rows_in`` names the stored table under a table that is a view (``kernels`` stands on ``kernel_rows``):
    read it like any table; write its rows with the function its docstring names.
    """

    name: str
    doc: str
    columns: tuple[Column, ...] = field(default_factory=tuple)
    rows_in: str | None = None

    @property
    def stored(self) -> bool:
        """Whether the table holds its rows itself (False for a view)."""
        return self.rows_in is None

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]


def cols(*specs: tuple[str, str, str]) -> tuple[Column, ...]:
    """Columns from ``(name, type, doc)`` triples."""
    return tuple(Column(*spec) for spec in specs)


CAPTURE_ID = ("capture_id", "INTEGER", "Capture this row belongs to (captures.capture_id).")
DEVICE_ID = ("device_id", "INTEGER", "GPU the work ran on (gpus.device_id); the export's deviceId.")
TIMES = (
    ("start_ns", "BIGINT", "Start, ns on the capture's timeline."),
    ("end_ns", "BIGINT", "End, ns on the capture's timeline."),
    ("duration_ns", "BIGINT", "end_ns - start_ns, ns."),
)


def ids_for_text(columns: tuple[Column, ...], ids: dict[str, tuple[str, str, str]]) -> tuple[Column, ...]:
    """The columns of the stored table under a view: the view's, with each text column named in ``ids``
    replaced by the id column that refers to its text."""
    return tuple(Column(*ids[c.name]) if c.name in ids else c for c in columns)
