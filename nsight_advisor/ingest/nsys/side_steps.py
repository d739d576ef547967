"""Steps of an export's ingest read on a second connection while the kernels are read.

The copies, sets and synchronizations need nothing the kernels' step writes (nor the calls' step: the kernels look
their launching thread up in the calls, and run after them). Read one after the other, they ran after the kernels'
insert, whose last part (the launching thread's join and the insert's last row groups) leaves one of two cores idle,
and then on their own (263k copies of the 1M-kernel export: 0.2 s at about 1.5 cores). Read on a connection of their
own beside the kernels, they take a part of that idle core: eight alternated cold analyzes of the 1M-kernel export,
median 6.08 -> 5.98 s (docs/performance.md, "Twenty-seventh pass").

Both connections write other tables of the store in their own transactions (DuckDB appends to different tables
without conflict); the enum tables the steps join are in the ingest's scratch database, which every connection
sees. What a run records is the same as one step after the other, in any order the two connections take: rows of
other tables, and notes that readers sort.
"""

from __future__ import annotations

import copy
from typing import Callable

import duckdb

from nsight_advisor.ingest.nsys.catalog import KERNEL
from nsight_advisor.ingest.nsys.cursor_work import CursorWork
from nsight_advisor.ingest.nsys.reader import ExportReader

#: The kernel table's rows from which the steps are read beside the kernels: below it the kernels take well under
#: a tenth of a second and there is nothing to overlap (a thread and a connection cost about a millisecond).
SIDE_MIN_KERNELS = 100_000


class SideSteps(CursorWork):
    """``steps`` (name -> reader of one step, in order) run on a thread, on a second connection to the instance of
    ``reader``'s store; :meth:`wait` waits for them and raises what one raised (:attr:`failed_step` names it),
    :meth:`close` ends them."""

    def __init__(self, reader: ExportReader, steps: dict[str, Callable[[ExportReader], None]]) -> None:
        database = reader.con.execute("SELECT current_database()").fetchone()[0]
        cursor = reader.con.cursor()
        try:
            cursor.execute(f'USE "{database.replace(chr(34), chr(34) * 2)}"')  # the store, as the ingest's own
        except BaseException:
            cursor.close()
            raise
        super().__init__(cursor, "nsight-advisor-side-steps")
        self.steps = steps
        self.failed_step: str | None = None  # the step that raised, as the ingest's error message names it
        self._reader = copy.copy(reader)  # the same export, catalog and capture, through the second connection
        self._reader.con = cursor
        self._reader.copied = dict(reader.copied)  # a lenient copy it makes is a temp table of its own connection
        self.start()

    def work(self, cursor: duckdb.DuckDBPyConnection) -> None:
        for step, fill in self.steps.items():
            self.failed_step = step
            self._reader.run(step, fill)
        self.failed_step = None


def side_worthwhile(reader: ExportReader) -> bool:
    """Whether the export's kernels are many enough for the steps beside them to pay (:data:`SIDE_MIN_KERNELS`)."""
    return reader.cat.at_least(KERNEL, SIDE_MIN_KERNELS)
