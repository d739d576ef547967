"""The robustness corpus: malformed and hostile inputs, generated from the real traces and from scratch.

No binary is committed: every input is written into a temporary folder by a builder, most of them by copying a
real export from ``../shared/traces`` and editing the copy with :mod:`sqlite3`. Each case runs through the CLI as a
subprocess (``python -m nsight_advisor analyze CASE --format json -o OUT --no-cache`` with the cache pointed at a
temporary folder) and the run is held to the promise the project makes about bad input:

* exit 2 with one line on stderr that names the file and the problem, no traceback, and nothing left behind
  (no report, no store, no temporary file); or
* exit 0 (or 1) with a report, and where rows were dropped or repaired, the report says so (``ingest_notes``);
* always: every input byte-identical afterwards (sha256), no new file beside the input, nothing from the capture
  executed (hostile strings show as escaped text in HTML; SQL in a rule cannot write, attach or read files).

``python -m tools.gen_docs --robustness`` (or ``python tests/corpus.py --write-doc``) runs every case and writes
``docs/robustness.md``; the test suite (``tests/test_robustness.py``) fails when that file is stale.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import html
import html.parser
import json
import os
import random
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parent.parent
TRACES = REPO.parent / "shared" / "traces"
DOC = REPO / "docs" / "robustness.md"

MOCK = "nsys/nsys_ai_mock.sqlite"  # 2 kernels, 9 runtime calls, 1 memcpy: the base of most SQLite mutations
SANDBOX = "nsys/cuda_perf_sandbox.sqlite"  # 38-column kernel table, OSRT rows
FUSER = "nsys/fuser_h200_matmul.sqlite"  # kernels, runtime, 652 NVTX ranges with inline text, a GPU table
NCU_REP = "ncu/monte_carlo_pi.ncu-rep"
NSYS_REP = "nsys-raw/csc746_vecadd.nsys-rep"
CSV_DETAILS = "ncu-csv/sgemm_rtx2080ti.details.ncu2024.1.csv"
CSV_RAW = "ncu-csv/sgemm_rtx2080ti.raw.ncu2022.3.csv"
CSV_SESSION = "ncu-csv/sgemm_rtx2080ti.session.ncu2024.1.csv"

# Strings an attacker would put in a kernel name, an NVTX range or an API name.
HOSTILE = (
    '<script>alert("k")</script>',
    "<img src=x onerror=alert(1)>",
    "</style><script>alert(2)</script>",
    '"><svg onload=alert(3)>',
    "</textarea></title><iframe src=javascript:alert(4)>",
    "{{7*7}} ${7*7} {0.__class__} %s%n",
    "'; DROP TABLE kernels; --",
    "[click](javascript:alert(5))",
    "\x1b]0;pwned\x07\x1b[2J\x1b[31mterminal escapes",
)
SCRIPT_NAME = HOSTILE[0]

REPORT_LIMIT_BYTES = 5_000_000  # a report stays under 5 MB, whatever the capture holds

# --------------------------------------------------------------------------------------------------- data shapes


@dataclass
class Setup:
    """What a builder wrote: the arguments of ``analyze`` and what the run must leave alone."""

    args: list[str]  # captures and extra options of `analyze` (the runner adds --format, -o, --no-cache)
    names: list[str]  # the error line must contain one of these (the offending file's name)
    watched: list[Path]  # files and folders that must stay byte-identical
    error_words: list[str] = field(default_factory=list)  # when rejected, one of these must be in the line
    forbidden: list[Path] = field(default_factory=list)  # must not exist after the run (ATTACH/COPY targets)
    existing_output: bytes | None = None  # content of -o before the run (kept on failure)
    output_name: str = "report"  # file name (without suffix) of -o inside the output folder
    secrets: list[str] = field(default_factory=list)  # must not appear in any output (file contents rules read)
    cwd_files: dict[str, str] = field(default_factory=dict)  # files written into the run's working folder
    env: dict[str, str] = field(default_factory=dict)  # environment overrides ("{workdir}" is replaced)
    output: str | None = None  # -o exactly as given (an input, a FIFO, a device, "-"), instead of out/report.FMT
    cached_first: bool = False  # the first run reuses the cache (no --no-cache): a damaged cache entry is met
    interrupt: tuple[int, float] | None = None  # (signal, seconds): sent to the run; expected exit 128 + signal
    after: Callable[["Run"], list[str]] | None = None  # runs after the CLI (unblocks readers, restores files)
    close_stdout: bool = False  # the CLI starts with its stdout closed (and no -o: the report goes to stdout)
    extra_calls: list[tuple[list[str], str]] = field(default_factory=list)  # (argv, "rejected"/"analyzed") run after
    address_space_bytes: int | None = None  # RLIMIT_AS of every CLI run of the case (the memory cases: 2 GB)


@dataclass(frozen=True)
class Case:
    """One malformed or hostile input and what a correct run does with it."""

    id: str
    group: str
    what: str
    build: Callable[[Path], Setup]
    expect: str  # "rejected" (exit 2), "analyzed" (exit 0/1) or "either"
    sources: tuple[str, ...] = ()  # real traces the builder copies, relative to ../shared/traces
    checks: tuple[Callable[["Run"], list[str]], ...] = ()
    formats: tuple[str, ...] = ("json",)
    also: tuple[str, ...] = ()  # other commands to run on the first capture: "info", "ingest", "query"
    timeout_s: int = 180
    store_may_remain: bool = False  # a rejection after a successful ingest (bad rule, bad config) may keep the cache


@dataclass
class Invocation:
    """One CLI subprocess and what came of it."""

    argv: list[str]
    rc: int | None
    stdout: str
    stderr: str
    seconds: float
    crash_detail: str = ""


@dataclass
class Run:
    """Everything one case produced, with the problems found (empty = the case passed)."""

    case: Case
    workdir: Path
    setup: Setup | None = None
    calls: list[Invocation] = field(default_factory=list)
    outputs: dict[str, Path] = field(default_factory=dict)
    outcome: str = ""
    message: str = ""
    problems: list[str] = field(default_factory=list)

    @property
    def main(self) -> Invocation:
        return self.calls[0]

    @property
    def stores(self) -> list[Path]:
        return sorted((self.workdir / "cache").glob("*.duckdb"))

    def report(self, fmt: str = "json"):
        """The parsed JSON report (or None when there is none)."""
        path = self.outputs.get(fmt)
        if self.setup is not None and self.setup.output == "-" and self.calls:
            text = self.calls[0].stdout
        elif path is None or not path.is_file():  # a FIFO or a device given to -o is not read back
            return None
        else:
            text = path.read_text(encoding="utf-8")
        try:
            return json.loads(text)
        except (ValueError, UnicodeDecodeError):
            return None

    def store(self) -> Path | None:
        """The store analyze left in the cache folder, if any."""
        stores = sorted((self.workdir / "cache").glob("*.duckdb"))
        return stores[0] if stores else None

    def store_rows(self, sql: str) -> list[tuple] | None:
        """Rows of ``sql`` over the store analyze built (None when there is no store or the SQL fails)."""
        import duckdb

        store = self.store()
        if store is None:
            return None
        snapshot = self.workdir / "store-copy.duckdb"
        shutil.copyfile(store, snapshot)  # query a copy: the cache folder's listing is checked afterwards
        try:
            con = duckdb.connect(str(snapshot), read_only=True)
            try:
                return con.execute(sql).fetchall()
            finally:
                con.close()
        except duckdb.Error:
            return None
        finally:
            snapshot.unlink(missing_ok=True)


# --------------------------------------------------------------------------------------------------- builders


class Unavailable(Exception):
    """A builder cannot make its input here (a real trace or a tool is missing)."""


def _trace(rel: str) -> Path:
    path = TRACES / rel
    if not path.exists():
        raise Unavailable(f"real trace {rel} absent at {TRACES}")
    return path


def _copy(rel: str, folder: Path, name: str | None = None) -> Path:
    src = _trace(rel)
    dst = folder / (name or src.name)
    shutil.copyfile(src, dst)  # copyfile: a writable copy (the real traces are read-only)
    return dst


def _setup(path: Path, **kw) -> Setup:
    return Setup(args=[str(path)], names=[path.name], watched=[path], **kw)


def _rng(seed: str) -> random.Random:
    return random.Random(hashlib.sha256(seed.encode()).digest())


def _random_bytes(seed: str, n: int) -> bytes:
    return _rng(seed).randbytes(n)


def _edit(path: Path, *statements: str, params: dict[int, tuple] | None = None) -> None:
    """Run SQL statements on a copied export (statement i gets params[i] when given)."""
    con = sqlite3.connect(path)
    try:
        for i, sql in enumerate(statements):
            con.execute(sql, (params or {}).get(i, ()))
        con.commit()
    finally:
        con.close()


def _drop_indexes(con: sqlite3.Connection, table: str) -> None:
    for (name,) in con.execute(
        "select name from sqlite_master where type = 'index' and tbl_name = ? and sql is not null", (table,)
    ).fetchall():
        con.execute(f'drop index "{name}"')


def _relax(con: sqlite3.Connection, table: str) -> None:
    """Recreate ``table`` without its NOT NULL constraints (same columns, same rows)."""
    _drop_indexes(con, table)
    con.execute(f'create table "_relaxed" as select * from "{table}"')
    con.execute(f'drop table "{table}"')
    con.execute(f'alter table "_relaxed" rename to "{table}"')


def _with_con(path: Path, fn: Callable[[sqlite3.Connection], None]) -> None:
    con = sqlite3.connect(path)
    try:
        fn(con)
        con.commit()
    finally:
        con.close()


def _kernel_string_ids(con: sqlite3.Connection, column: str = "demangledName") -> list[int]:
    return [r[0] for r in con.execute(f"select distinct {column} from CUPTI_ACTIVITY_KIND_KERNEL order by 1")]


def _page_size(path: Path) -> int:
    with open(path, "rb") as fh:
        header = fh.read(100)
    size = int.from_bytes(header[16:18], "big")
    return 65536 if size == 1 else size


def _root_page(path: Path, table: str) -> int:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        row = con.execute("select rootpage from sqlite_master where name = ?", (table,)).fetchone()
    finally:
        con.close()
    return int(row[0])


def _overwrite(path: Path, offset: int, data: bytes) -> None:
    with open(path, "r+b") as fh:
        fh.seek(offset)
        fh.write(data)


def _truncate(rel: str, folder: Path, keep: Callable[[int], int], name: str) -> Setup:
    src = _trace(rel)
    data = src.read_bytes()
    dst = folder / name
    dst.write_bytes(data[: keep(len(data))])
    return _setup(dst)


# ---- paths


def b_missing(folder: Path) -> Setup:
    path = folder / "no_such_capture.sqlite"
    return Setup(args=[str(path)], names=[path.name], watched=[], error_words=["no such", "not found", "does not exist"])


def b_directory(folder: Path) -> Setup:
    path = folder / "capture.sqlite"
    path.mkdir()
    (path / "inside.txt").write_text("a folder, not a capture\n")
    return _setup(path, error_words=["directory"])


def b_fifo(folder: Path) -> Setup:
    path = folder / "capture.sqlite"
    os.mkfifo(path)
    return Setup(args=[str(path)], names=[path.name], watched=[], error_words=["regular file", "not a file", "fifo", "pipe"])


def b_zero(suffix: str) -> Callable[[Path], Setup]:
    def build(folder: Path) -> Setup:
        path = folder / f"empty{suffix}"
        path.write_bytes(b"")
        return _setup(path, error_words=["empty", "0 bytes"])

    return build


def b_html_file_name(folder: Path) -> Setup:
    return _setup(_copy(MOCK, folder, '"><img src=x onerror=alert(1)>.sqlite'))


def b_control_chars_file_name(folder: Path) -> Setup:
    path = folder / "evil\n\x1b[2Jname.sqlite"
    path.write_bytes(b"")
    return Setup(args=[str(path)], names=["name.sqlite"], watched=[path])


# ---- SQLite (nsys exports)


def b_sqlite_truncated(fraction_or_bytes) -> Callable[[Path], Setup]:
    def build(folder: Path) -> Setup:
        def keep(n: int) -> int:
            if isinstance(fraction_or_bytes, float):
                return int(n * fraction_or_bytes)
            return fraction_or_bytes if fraction_or_bytes > 0 else n + fraction_or_bytes

        return _truncate(MOCK, folder, keep, "truncated.sqlite")

    return build


def b_sqlite_minus_last_page(folder: Path) -> Setup:
    page = _page_size(_trace(MOCK))
    return _truncate(MOCK, folder, lambda n: n - page, "truncated.sqlite")


def b_sqlite_wrong_magic(folder: Path) -> Setup:
    path = _copy(MOCK, folder, "capture.sqlite")
    _overwrite(path, 0, b"SQLite format 2\x00")
    return _setup(path)


def b_sqlite_corrupt_table(table: str) -> Callable[[Path], Setup]:
    def build(folder: Path) -> Setup:
        path = _copy(MOCK, folder, "corrupt.sqlite")
        page = _page_size(path)
        root = _root_page(path, table)
        _overwrite(path, (root - 1) * page, _random_bytes(table, page))
        return _setup(path)

    return build


def b_sqlite_corrupt_schema(folder: Path) -> Setup:
    path = _copy(MOCK, folder, "corrupt.sqlite")
    page = _page_size(path)
    _overwrite(path, 100, _random_bytes("schema", page - 100))  # page 1 after the header: sqlite_master
    return _setup(path)


def b_sqlite_not_nsys(folder: Path) -> Setup:
    path = folder / "capture.sqlite"
    con = sqlite3.connect(path)
    con.execute("create table recipes (name text, minutes integer)")
    con.execute("insert into recipes values ('bread', 240)")
    con.commit()
    con.close()
    return _setup(path)


def b_sqlite_no_tables(folder: Path) -> Setup:
    path = folder / "capture.sqlite"
    con = sqlite3.connect(path)
    con.execute("pragma user_version = 7")  # forces SQLite to write its header: a valid, empty database
    con.commit()
    con.close()
    return _setup(path)


def b_sqlite_drop_column(table: str, column: str) -> Callable[[Path], Setup]:
    def build(folder: Path) -> Setup:
        path = _copy(MOCK, folder, "capture.sqlite")

        def fn(con):
            _drop_indexes(con, table)
            con.execute(f'alter table "{table}" drop column "{column}"')

        _with_con(path, fn)
        return _setup(path)

    return build


def b_sqlite_drop_table(table: str) -> Callable[[Path], Setup]:
    def build(folder: Path) -> Setup:
        path = _copy(MOCK, folder, "capture.sqlite")
        _edit(path, f'drop table "{table}"')
        return _setup(path)

    return build


def b_sqlite_text_in_integers(folder: Path) -> Setup:
    path = _copy(MOCK, folder, "capture.sqlite")
    _edit(path, "update CUPTI_ACTIVITY_KIND_KERNEL set start = 'yesterday', gridX = 'big' where rowid = 1",
          "update CUPTI_ACTIVITY_KIND_RUNTIME set end = 'later' where rowid = 2")
    return _setup(path)


def b_sqlite_blob_and_real(folder: Path) -> Setup:
    path = _copy(MOCK, folder, "capture.sqlite")
    _edit(path, "update CUPTI_ACTIVITY_KIND_KERNEL set registersPerThread = 3.5, streamId = x'00ff', "
                "blockX = 1e300 where rowid = 1")
    return _setup(path)


def b_sqlite_null_names(folder: Path) -> Setup:
    path = _copy(MOCK, folder, "capture.sqlite")

    def fn(con):
        _relax(con, "CUPTI_ACTIVITY_KIND_KERNEL")
        _relax(con, "CUPTI_ACTIVITY_KIND_RUNTIME")
        con.execute("update CUPTI_ACTIVITY_KIND_KERNEL set demangledName = null, shortName = null, "
                    "mangledName = null where rowid = 1")
        con.execute("update CUPTI_ACTIVITY_KIND_RUNTIME set nameId = null where rowid in (1, 2)")

    _with_con(path, fn)
    return _setup(path)


def b_sqlite_dangling_string_ids(folder: Path) -> Setup:
    path = _copy(MOCK, folder, "capture.sqlite")
    _edit(path, "update CUPTI_ACTIVITY_KIND_KERNEL set demangledName = 987654321, shortName = -5 where rowid = 1")
    return _setup(path)


def b_sqlite_end_before_start(folder: Path) -> Setup:
    path = _copy(MOCK, folder, "capture.sqlite")
    _edit(path, "update CUPTI_ACTIVITY_KIND_KERNEL set start = end, end = start where rowid = 1",
          "update CUPTI_ACTIVITY_KIND_RUNTIME set start = end, end = start where rowid = 3")
    return _setup(path)


def b_sqlite_negative(folder: Path) -> Setup:
    path = _copy(MOCK, folder, "capture.sqlite")
    _edit(path,
          "update CUPTI_ACTIVITY_KIND_KERNEL set start = -5000000000, end = -4999990000, registersPerThread = -1, "
          "gridX = 0, blockX = -32, staticSharedMemory = -1 where rowid = 1",
          "update CUPTI_ACTIVITY_KIND_MEMCPY set bytes = -1")
    return _setup(path)


def b_sqlite_absurd(folder: Path) -> Setup:
    path = _copy(MOCK, folder, "capture.sqlite")
    _edit(path,
          # end - start overflows a signed 64-bit integer; grid_x * grid_y * grid_z overflows it too
          "update CUPTI_ACTIVITY_KIND_KERNEL set start = -9223372036854775807, end = 9223372036854775807, "
          "gridX = 2147483647, gridY = 2147483647, gridZ = 4294967296, blockX = 2147483647, blockY = 2147483647, "
          "registersPerThread = 1099511627776, dynamicSharedMemory = 9223372036854775807, "
          "staticSharedMemory = 9223372036854775807 where rowid = 1",
          "update CUPTI_ACTIVITY_KIND_MEMCPY set bytes = 9223372036854775807",
          "update CUPTI_ACTIVITY_KIND_RUNTIME set end = 9223372036854775807 where rowid = 1")
    return _setup(path)


def b_sqlite_duplicate_kernels(folder: Path) -> Setup:
    path = _copy(MOCK, folder, "capture.sqlite")
    _edit(path, "insert into CUPTI_ACTIVITY_KIND_KERNEL select * from CUPTI_ACTIVITY_KIND_KERNEL")
    return _setup(path)


def b_sqlite_duplicate_runtime(folder: Path) -> Setup:
    path = _copy(MOCK, folder, "capture.sqlite")
    # the launching calls appear three times with the same correlation id: a join must not multiply kernels
    _edit(path, "insert into CUPTI_ACTIVITY_KIND_RUNTIME select * from CUPTI_ACTIVITY_KIND_RUNTIME "
                "where correlationId in (select correlationId from CUPTI_ACTIVITY_KIND_KERNEL)",
          "insert into CUPTI_ACTIVITY_KIND_RUNTIME select * from CUPTI_ACTIVITY_KIND_RUNTIME "
          "where correlationId in (select correlationId from CUPTI_ACTIVITY_KIND_KERNEL) and rowid <= 9")
    return _setup(path)


def b_sqlite_huge_name(folder: Path) -> Setup:
    path = _copy(MOCK, folder, "capture.sqlite")

    def fn(con):
        ids = _kernel_string_ids(con)
        con.execute("update StringIds set value = ? where id = ?", ("void huge<" + "A" * 1_048_576 + ">()", ids[0]))

    _with_con(path, fn)
    return _setup(path)


def b_sqlite_invalid_utf8(folder: Path) -> Setup:
    path = _copy(MOCK, folder, "capture.sqlite")

    def fn(con):
        ids = _kernel_string_ids(con)
        # TEXT values whose bytes are not UTF-8: what a capture of a latin-1 program name looks like
        con.execute("update StringIds set value = cast(x'6b65726ec3286e656cfffe80' as text) where id = ?", (ids[0],))
        api = con.execute("select nameId from CUPTI_ACTIVITY_KIND_RUNTIME limit 1").fetchone()[0]
        con.execute("update StringIds set value = cast(x'637564614d616c6c6f63c328' as text) where id = ?", (api,))

    _with_con(path, fn)
    return _setup(path)


def b_sqlite_nul_in_name(folder: Path) -> Setup:
    path = _copy(MOCK, folder, "capture.sqlite")

    def fn(con):
        ids = _kernel_string_ids(con)
        con.execute("update StringIds set value = cast(x'7665630061646400' as text) where id = ?", (ids[0],))

    _with_con(path, fn)
    return _setup(path)


def b_sqlite_hostile_strings(folder: Path) -> Setup:
    path = _copy(FUSER, folder, "capture.sqlite")

    def fn(con):
        # kernel names (demangled, short, mangled): one is exactly a script tag, the others carry payloads
        kernel_ids = sorted({i for col in ("demangledName", "shortName", "mangledName")
                             for i in _kernel_string_ids(con, col) if i is not None})
        for n, sid in enumerate(kernel_ids):
            value = SCRIPT_NAME if n == 0 else f"{HOSTILE[n % len(HOSTILE)]}kernel_{n}"
            con.execute("update StringIds set value = ? where id = ?", (value, sid))
        # first kernel's demangled and short name both become the script tag
        first = con.execute("select demangledName, shortName from CUPTI_ACTIVITY_KIND_KERNEL "
                            "order by end - start desc limit 1").fetchone()
        for sid in first:
            con.execute("update StringIds set value = ? where id = ?", (SCRIPT_NAME, sid))
        # API names: keep the recognisable call, add a payload
        for n, (sid,) in enumerate(con.execute("select distinct nameId from CUPTI_ACTIVITY_KIND_RUNTIME").fetchall()):
            con.execute("update StringIds set value = value || ? where id = ?", (HOSTILE[n % len(HOSTILE)], sid))
        # NVTX text, GPU name, thread names
        con.execute("update NVTX_EVENTS set text = ? || coalesce(text, '')", (HOSTILE[1],))
        con.execute("update TARGET_INFO_GPU set name = ?", ("NVIDIA H200 " + HOSTILE[2],))
        tables = {r[0] for r in con.execute("select name from sqlite_master where type = 'table'")}
        if "ThreadNames" in tables:
            con.execute("update StringIds set value = ? where id in (select nameId from ThreadNames)", (HOSTILE[3],))

    _with_con(path, fn)
    return _setup(path)


def b_sqlite_hostile_identifiers(folder: Path) -> Setup:
    path = _copy(MOCK, folder, "capture.sqlite")
    _edit(path,
          'create table "ENUM_X""; drop table kernels; --" (id integer, name text)',
          'create table "CUPTI_ACTIVITY_KIND_KERNEL\'); select 1; --" (start integer, end integer)',
          'alter table CUPTI_ACTIVITY_KIND_KERNEL add column "evil"", (select 1) as ""x" integer',
          'alter table StringIds add column "<script>alert(1)</script>" text')
    return _setup(path)


def b_cache_is_file(folder: Path) -> Setup:
    setup = _setup(_copy(MOCK, folder))
    blocker = folder.parent / "cache-file"
    blocker.write_text("a file where the cache folder should be\n")
    setup.env = {"NSIGHT_ADVISOR_CACHE": "{workdir}/cache-file"}
    setup.names = ["cache-file"]
    return setup


def b_pyproject_bad_section(folder: Path) -> Setup:
    setup = _setup(_copy(MOCK, folder))
    setup.cwd_files = {"pyproject.toml": '[project]\nname = "x"\n\n[tool.nsight-advisor]\nselect = 5\n'}
    setup.names = ["pyproject.toml"]
    return setup


def b_sqlite_infinite_view(folder: Path) -> Setup:
    path = _copy(MOCK, folder, "capture.sqlite")
    # a capture file can hold views; reading one runs its SQL. This one never ends.
    _edit(path, "drop table StringIds",
          "create view StringIds as with recursive n(i) as (select 1 union all select i + 1 from n) "
          "select i as id, 'x' as value from n")
    return _setup(path)


def b_sqlite_wal(folder: Path) -> Setup:
    path = _copy(MOCK, folder, "capture.sqlite")
    _edit(path, "pragma journal_mode = wal")  # persists in the header; readers may try to create -wal/-shm files
    folder.chmod(0o555)  # a read-only folder, as on a shared drive
    return _setup(path)


def b_sqlite_trailing_garbage(folder: Path) -> Setup:
    path = _copy(MOCK, folder, "capture.sqlite")
    with open(path, "ab") as fh:
        fh.write(_random_bytes("tail", 1 << 20))
    return _setup(path)


def b_sqlite_empty_kernels(folder: Path) -> Setup:
    path = _copy(MOCK, folder, "capture.sqlite")
    _edit(path, "delete from CUPTI_ACTIVITY_KIND_KERNEL", "delete from CUPTI_ACTIVITY_KIND_MEMCPY")
    return _setup(path, error_words=["nothing was profiled"])


def b_sqlite_gzip(folder: Path) -> Setup:
    path = folder / "capture.sqlite"
    path.write_bytes(gzip.compress(_trace(MOCK).read_bytes(), mtime=0))
    return _setup(path, error_words=["gzip", "compress"])


def b_sqlite_kernel_is_view(folder: Path) -> Setup:
    path = _copy(SANDBOX, folder, "capture.sqlite")
    # the kernel table replaced by a view over it that calls SQLite functions on every row
    _edit(path, "alter table CUPTI_ACTIVITY_KIND_KERNEL rename to k_real",
          "create view CUPTI_ACTIVITY_KIND_KERNEL as select * from k_real where randomblob(16) is not null")
    return _setup(path)


def _without_nsys(setup: Setup) -> Setup:
    # The same answer on every machine (the doc is generated from it): `nsys` hidden from PATH, so a raw report
    # is refused before any export; with nsys installed its own export error is the line (test_ingest_nsys_bad_input).
    setup.env["PATH"] = os.path.dirname(sys.executable)
    return setup


def b_rep_garbage(folder: Path) -> Setup:
    path = folder / "capture.nsys-rep"
    path.write_bytes(b"NVIDIA Tegra Profiler Report 1.\n" + _random_bytes("nsys-rep", 65536))
    return _without_nsys(_setup(path))


def b_rep_truncated(folder: Path) -> Setup:
    return _without_nsys(_truncate(NSYS_REP, folder, lambda n: n // 2, "truncated.nsys-rep"))


# ---- Nsight Compute reports


def b_ncu_garbage(folder: Path) -> Setup:
    path = folder / "garbage.ncu-rep"
    path.write_bytes(b"NVR\x00" + _random_bytes("ncu-garbage", 65536))
    return _setup(path)


def b_ncu_wrong_magic(folder: Path) -> Setup:
    path = folder / "random.ncu-rep"
    path.write_bytes(_random_bytes("ncu-random", 65536))
    return _setup(path)


def b_ncu_truncated(keep: Callable[[int], int], name: str) -> Callable[[Path], Setup]:
    def build(folder: Path) -> Setup:
        return _truncate(NCU_REP, folder, keep, name)

    return build


def b_ncu_zeroed_middle(folder: Path) -> Setup:
    path = _copy(NCU_REP, folder, "zeroed.ncu-rep")
    size = path.stat().st_size
    _overwrite(path, size // 2, b"\x00" * 8192)
    return _setup(path)


def b_ncu_as_sqlite_name(folder: Path) -> Setup:
    return _setup(_copy(NCU_REP, folder, "actually_ncu.sqlite"))


# ---- ncu CSV


def _csv_text(rel: str) -> str:
    return _trace(rel).read_text(encoding="utf-8")


def _write_csv(folder: Path, name: str, data: bytes | str, **kw) -> Setup:
    path = folder / name
    if isinstance(data, str):
        data = data.encode("utf-8")
    path.write_bytes(data)
    return _setup(path, **kw)


def b_csv_header_only(folder: Path) -> Setup:
    return _write_csv(folder, "header_only.csv", _csv_text(CSV_DETAILS).splitlines(keepends=True)[0])


def b_csv_binary(folder: Path) -> Setup:
    return _write_csv(folder, "binary.csv", _random_bytes("csv-binary", 20000))


def b_csv_gzip(folder: Path) -> Setup:
    return _write_csv(folder, "details.csv", gzip.compress(_trace(CSV_DETAILS).read_bytes(), mtime=0),
                      error_words=["gzip", "compress"])


def b_csv_ragged(folder: Path) -> Setup:
    lines = _csv_text(CSV_DETAILS).splitlines()
    out = [lines[0]]
    for n, line in enumerate(lines[1:]):
        fields = line.split('","')
        if n % 3 == 0:
            fields = fields[: max(1, len(fields) - 3)]
        elif n % 3 == 1:
            fields = fields + ["extra", "more", "fields"]
        out.append('","'.join(fields) + ('"' if not fields[-1].endswith('"') else ""))
    return _write_csv(folder, "ragged.csv", "\n".join(out) + "\n")


def b_csv_bom(folder: Path) -> Setup:
    return _write_csv(folder, "bom.csv", b"\xef\xbb\xbf" + _trace(CSV_DETAILS).read_bytes())


def b_csv_semicolon(folder: Path) -> Setup:
    text = _csv_text(CSV_DETAILS).replace('","', '";"')
    return _write_csv(folder, "semicolon.csv", text)


def b_csv_huge_field(folder: Path) -> Setup:
    lines = _csv_text(CSV_DETAILS).splitlines()
    first = lines[1].split('","')
    first[4] = "huge_kernel_" + "B" * (2 << 20)  # Kernel Name: 2 MiB, past csv's default field limit
    lines[1] = '","'.join(first)
    return _write_csv(folder, "huge_field.csv", "\n".join(lines) + "\n")


def b_csv_invalid_utf8(folder: Path) -> Setup:
    data = _trace(CSV_DETAILS).read_bytes().replace(b"volta_sgemm_32x128_nn", b"volta_sgemm_\xe9\xff\xfe_nn")
    return _write_csv(folder, "latin1.csv", data)


def b_csv_hostile(folder: Path) -> Setup:
    text = _csv_text(CSV_DETAILS).replace("volta_sgemm_32x128_nn", SCRIPT_NAME.replace('"', '""'))
    return _write_csv(folder, "hostile.csv", text)


def b_csv_unterminated_quote(folder: Path) -> Setup:
    lines = _csv_text(CSV_DETAILS).splitlines()
    lines[3] = lines[3] + ',"never closed'
    return _write_csv(folder, "unterminated.csv", "\n".join(lines) + "\n")


def b_csv_nul(folder: Path) -> Setup:
    data = _trace(CSV_DETAILS).read_bytes().replace(b"GPU Speed Of Light", b"GPU\x00Speed\x00Of Light", 3)
    return _write_csv(folder, "nul.csv", data)


def b_csv_session(folder: Path) -> Setup:
    return _setup(_copy(CSV_SESSION, folder))


def b_csv_numbers_absurd(folder: Path) -> Setup:
    lines = _csv_text(CSV_RAW).splitlines()
    # the raw page: one row per kernel after the header and units rows; every value becomes absurd
    for n in range(2, len(lines)):
        fields = lines[n].split('","')
        for i in range(11, len(fields)):
            fields[i] = ["1e999", "-1", "nan", "inf", "99999999999999999999999999", "--", "1,2,3"][i % 7]
        lines[n] = '","'.join(fields) + '"'
    return _write_csv(folder, "absurd_numbers.csv", "\n".join(lines) + "\n")


def b_csv_huge_ids(folder: Path) -> Setup:
    lines = _csv_text(CSV_DETAILS).splitlines()
    for n in range(1, len(lines)):
        fields = lines[n].split('","')
        fields[0] = '"29127719118'  # result ID beyond 32 bits
        fields[1] = "-99999999999999999999"  # process ID beyond 64 bits
        lines[n] = '","'.join(fields)
    return _write_csv(folder, "huge_ids.csv", "\n".join(lines) + "\n")


def b_text_not_csv(folder: Path) -> Setup:
    return _write_csv(folder, "notes.txt", "Just some notes about the profiling run\nNo commas here at all\n")


# ---- stores


def b_store_zero(folder: Path) -> Setup:
    path = folder / "store.duckdb"
    path.write_bytes(b"")
    return _setup(path)


def b_store_garbage(folder: Path) -> Setup:
    path = folder / "store.duckdb"
    path.write_bytes(_random_bytes("store", 300_000))
    return _setup(path)


def b_store_foreign(folder: Path) -> Setup:
    import duckdb

    path = folder / "store.duckdb"
    con = duckdb.connect(str(path))
    con.execute("create table recipes (name varchar, minutes integer)")
    con.execute("insert into recipes values ('bread', 240)")
    con.close()
    return _setup(path)


def b_store_truncated(folder: Path) -> Setup:
    built = folder / "built"
    built.mkdir()
    store = built / "good.duckdb"
    proc = _cli(["ingest", str(_trace(MOCK)), "--store", str(store)], folder, timeout_s=120)
    if proc.rc != 0 or not store.exists():
        raise Unavailable(f"could not build a store to truncate: {proc.stderr.strip()[:200]}")
    data = store.read_bytes()
    path = folder / "truncated.duckdb"
    path.write_bytes(data[: len(data) // 2])
    shutil.rmtree(built)
    return _setup(path)


# ---- outputs


def b_output_is_directory(folder: Path) -> Setup:
    setup = _setup(_copy(MOCK, folder))
    setup.names = ["a_folder"]
    setup.output_name = "<dir>"
    return setup


def b_output_parent_is_file(folder: Path) -> Setup:
    setup = _setup(_copy(MOCK, folder))
    setup.names = ["plain_file.txt"]
    setup.output_name = "<file-parent>"
    return setup


def b_output_existing_kept(folder: Path) -> Setup:
    path = folder / "empty.sqlite"
    path.write_bytes(b"")
    setup = _setup(path)
    setup.existing_output = b'{"previous": "report, must survive a failed run"}\n'
    return setup


def b_two_captures_one_bad(folder: Path) -> Setup:
    good = _copy(MOCK, folder)
    bad = folder / "bad.sqlite"
    bad.write_bytes(b"SQLite format 3\x00" + _random_bytes("bad-second", 4000))
    return Setup(args=[str(good), str(bad)], names=[bad.name], watched=[good, bad])


# ---- rule folders

_PROBE_TOML = '''id = "NA990"
name = "robustness-probe"
title = "Robustness probe"
category = "timeline"
severity = "info"
status = "preview"
principles = ["gpu-background.execution-model.waves"]
{extra_top}
[params.min_value]
type = "float"
default = {default}
unit = "count"
why = "Every row the query returns fires, so a run exercises evidence handling."

[judgement]
column = "value"
op = ">"
param = "min_value"

[finding]
group_by = ""
impact_column = "impact_ns"
order_by = "impact_ns"
evidence_columns = ["name", "value", "impact_ns"]
evidence_limit = 20
message = "{{rows}} row(s) fired"
fix = "Nothing to fix: this rule exists for the robustness tests."

[docs]
what = "Fires on every row its query returns."
why = "It exercises the engine with hostile SQL and huge results."
fix = "Nothing to fix."
limits = "A test rule."
'''

_PROBE_SQL = "select 'row' as name, 1.0 as value, 0 as impact_ns\n"


def _rule_folder(folder: Path, *, toml: str | None = None, sql: str | None = _PROBE_SQL, extra_top: str = "",
                 default: str = "0.0") -> Path:
    rules = folder / "rules"
    rule = rules / "robustness-probe"
    rule.mkdir(parents=True)
    (rule / "rule.toml").write_text(toml if toml is not None else _PROBE_TOML.format(extra_top=extra_top, default=default))
    if sql is not None:
        (rule / "query.sql").write_text(sql)
    (rule / "cases.toml").write_text("")
    return rules


def _rules_setup(folder: Path, rules: Path, *, names: list[str] | None = None, **kw) -> Setup:
    capture = _copy(MOCK, folder)
    return Setup(args=[str(capture), "--rules-dir", str(rules)], names=names or ["rule.toml", "robustness-probe"],
                 watched=[capture, rules], **kw)


def b_rules_bad_toml(folder: Path) -> Setup:
    rules = _rule_folder(folder, toml='id = "NA990\nname = robustness-probe\n[params\n')
    return _rules_setup(folder, rules)


def b_rules_unknown_key(folder: Path) -> Setup:
    rules = _rule_folder(folder, extra_top='colour = "red"\n')
    return _rules_setup(folder, rules, error_words=["colour"])


def b_rules_wrong_param_type(folder: Path) -> Setup:
    rules = _rule_folder(folder, default='"zero"')
    return _rules_setup(folder, rules)


def b_rules_missing_query(folder: Path) -> Setup:
    rules = _rule_folder(folder, sql=None)
    return _rules_setup(folder, rules, names=["query.sql", "robustness-probe"])


def b_rules_sql(sql: str, *, forbidden: tuple[str, ...] = (), secrets: tuple[str, ...] = ()) -> Callable[[Path], Setup]:
    def build(folder: Path) -> Setup:
        targets = [folder / name for name in forbidden]
        text = sql.format(**{f"target{i}": str(t) for i, t in enumerate(targets)})
        rules = _rule_folder(folder, sql=text)
        return _rules_setup(folder, rules, names=["query.sql", "robustness-probe", "NA990"],
                            forbidden=targets, secrets=list(secrets))

    return build


def b_rules_sql_scan(folder: Path) -> Setup:
    capture = _copy(MOCK, folder, "scanned.sqlite")
    sql = ("select name, 1.0 as value, 0 as impact_ns "
           f"from sqlite_scan('{capture}', 'TARGET_INFO_SYSTEM_ENV')")
    rules = _rule_folder(folder, sql=sql)
    return _rules_setup(folder, rules, names=["query.sql", "robustness-probe", "NA990"])


def b_rules_slow(folder: Path) -> Setup:
    sql = "select 'x' as name, count(*)::double as value, 0 as impact_ns from range(1000000000000) t(i)"
    rules = _rule_folder(folder, sql=sql)
    capture = _copy(MOCK, folder)
    config = folder / "nsight-advisor.toml"
    config.write_text("rule_time_limit_s = 2\n")
    return Setup(args=[str(capture), "--rules-dir", str(rules), "--config", str(config)],
                 names=["query.sql", "robustness-probe", "NA990"], watched=[capture, rules, config])


def b_rules_dir_missing(folder: Path) -> Setup:
    capture = _copy(MOCK, folder)
    rules = folder / "no_such_rules"
    return Setup(args=[str(capture), "--rules-dir", str(rules)], names=[rules.name], watched=[capture])


def b_rules_dir_is_file(folder: Path) -> Setup:
    capture = _copy(MOCK, folder)
    rules = folder / "rules.txt"
    rules.write_text("not a folder\n")
    return Setup(args=[str(capture), "--rules-dir", str(rules)], names=[rules.name], watched=[capture, rules])


# ---- configuration


def b_config(text: str, words: tuple[str, ...] = ()) -> Callable[[Path], Setup]:
    def build(folder: Path) -> Setup:
        capture = _copy(MOCK, folder)
        rules = _rule_folder(folder)
        config = folder / "nsight-advisor.toml"
        config.write_text(text)
        return Setup(args=[str(capture), "--rules-dir", str(rules), "--config", str(config)], names=[config.name],
                     watched=[capture, rules, config], error_words=list(words))

    return build


def b_config_missing(folder: Path) -> Setup:
    capture = _copy(MOCK, folder)
    config = folder / "no-such-config.toml"
    return Setup(args=[str(capture), "--config", str(config)], names=[config.name], watched=[capture])


def b_set(value: str, names: tuple[str, ...]) -> Callable[[Path], Setup]:
    def build(folder: Path) -> Setup:
        capture = _copy(MOCK, folder)
        rules = _rule_folder(folder)
        return Setup(args=[str(capture), "--rules-dir", str(rules), "--set", value], names=list(names),
                     watched=[capture, rules])

    return build


# ---- round two: data loss, input-at-fault crashes, lifecycle, smaller promises


def _fifo_reader(fifo: Path) -> Callable[[Run], list[str]]:
    """Reads ``fifo`` in a thread while the CLI runs; afterwards: the node is still a FIFO and got the report."""
    import stat as stat_mod
    import threading

    got: list[bytes] = []

    def read() -> None:
        with open(fifo, "rb") as fh:
            got.append(fh.read())

    thread = threading.Thread(target=read, daemon=True)
    thread.start()

    def after(run: Run) -> list[str]:
        with contextlib.suppress(OSError):  # a reader still waiting: let it see end of file
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        thread.join(5)
        problems = []
        if not stat_mod.S_ISFIFO(os.lstat(fifo).st_mode):
            problems.append("the FIFO given to -o was replaced by another kind of file")
        if run.outcome == "analyzed":
            try:
                json.loads((got[0] if got else b"").decode("utf-8"))
            except ValueError:
                problems.append("the report did not arrive through the FIFO")
        return problems

    return after


def b_output_is_input(how: str) -> Callable[[Path], Setup]:
    """-o (or --store) naming the capture itself, a symlink to it or a hard link to it."""
    def build(folder: Path) -> Setup:
        capture = _copy(MOCK, folder, "capture.sqlite")
        target = capture
        if how == "symlink":
            target = folder.parent / "out" / "link.json"
            target.parent.mkdir(exist_ok=True)
            target.symlink_to(capture)
        elif how == "hardlink":
            target = folder / "hard-link.json"
            os.link(capture, target)
        if how == "store":
            return Setup(args=[str(capture), "--store", str(capture)], names=[capture.name], watched=[capture],
                         error_words=["input"])
        return Setup(args=[str(capture)], names=[target.name], watched=[capture], output=str(target),
                     error_words=["input"])

    return build


def b_output_fifo(folder: Path) -> Setup:
    out = folder.parent / "out"
    out.mkdir(exist_ok=True)
    fifo = out / "report.fifo"
    os.mkfifo(fifo)
    setup = _setup(_copy(MOCK, folder))
    setup.output = str(fifo)
    setup.after = _fifo_reader(fifo)
    return setup


def b_output_char_device(folder: Path) -> Setup:
    import stat as stat_mod

    out = folder.parent / "out"
    out.mkdir(exist_ok=True)
    node = out / "null-device"
    try:
        os.mknod(node, 0o666 | stat_mod.S_IFCHR, os.makedev(1, 3))  # /dev/null's numbers
    except (PermissionError, OSError) as exc:
        raise Unavailable(f"cannot create a character device here ({exc.strerror}); needs root") from None
    setup = _setup(_copy(MOCK, folder))
    setup.output = str(node)

    def after(run: Run) -> list[str]:
        return [] if stat_mod.S_ISCHR(os.lstat(node).st_mode) else ["the device given to -o was replaced by a file"]

    setup.after = after
    return setup


def b_output_dash(folder: Path) -> Setup:
    setup = _setup(_copy(MOCK, folder))
    setup.output = "-"
    return setup


def b_output_disk_full(folder: Path) -> Setup:
    if not Path("/dev/full").exists():
        raise Unavailable("no /dev/full here")
    setup = _setup(_copy(MOCK, folder))
    setup.output = "/dev/full"
    setup.names = ["/dev/full"]
    setup.error_words = ["no space left"]
    return setup


def b_store_disk_full(folder: Path) -> Setup:
    """The store's file system fills up mid-ingest (a 400 KiB tmpfs; needs root to mount, else not run)."""
    capture = _copy(FUSER, folder)
    small = folder.parent / "small-disk"
    small.mkdir(exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=400k", "tmpfs", str(small)], capture_output=True,
                             text=True, timeout=30) if shutil.which("mount") else None
    if mounted is None or mounted.returncode != 0:
        raise Unavailable("cannot mount a small tmpfs here (needs root)")

    def after(run: Run) -> list[str]:
        left = sorted(p.name for p in small.rglob("*"))
        subprocess.run(["umount", str(small)], capture_output=True, timeout=30)
        return [f"a full disk kept {left[:3]}"] if left else []

    return Setup(args=[str(capture), "--store", str(small / "store.duckdb")], names=["small-disk"],
                 watched=[capture], error_words=["no space left"], after=after)


def b_output_long_name(folder: Path) -> Setup:
    setup = _setup(_copy(MOCK, folder))
    setup.output_name = "r" * 245  # + ".json": 250 characters, the file system allows 255
    return setup


def b_store_long_name(folder: Path) -> Setup:
    capture = _copy(MOCK, folder)
    store = folder.parent / "out" / ("s" * 233 + ".duckdb")  # 240 characters
    store.parent.mkdir(exist_ok=True)
    return Setup(args=[str(capture), "--store", str(store)], names=[store.name], watched=[capture])


def b_cache_damaged(how: str, *, cached_first: bool) -> Callable[[Path], Setup]:
    """The cached store of the capture damaged after a first analyze: truncated, zeroed or random bytes."""
    def build(folder: Path) -> Setup:
        capture = _copy(MOCK, folder)
        workdir = folder.parent
        first = _cli(["analyze", str(capture), "--format", "json", "-o", str(workdir / "first.json")], workdir,
                     timeout_s=120)
        stores = sorted((workdir / "cache").glob("*.duckdb"))
        (workdir / "first.json").unlink(missing_ok=True)
        if first.rc != 0 or len(stores) != 1:
            raise Unavailable(f"could not build the cache entry to damage: {first.stderr.strip()[:200]}")
        data = stores[0].read_bytes()
        damaged = {"truncated": data[: len(data) // 3], "zeroed": bytes(len(data)),
                   "random": _random_bytes("cache-store", len(data))}[how]
        stores[0].write_bytes(damaged)
        setup = _setup(capture)
        setup.cached_first = cached_first
        return setup

    return build


def b_store_user_damaged(folder: Path) -> Setup:
    capture = _copy(MOCK, folder)
    store = folder / "mine.duckdb"
    store.write_bytes(_random_bytes("user-store", 300_000))
    return Setup(args=[str(capture), "--store", str(store)], names=[store.name], watched=[capture, store],
                 error_words=["store"])


def b_sqlite_stringids_duplicates(folder: Path) -> Setup:
    path = _copy(MOCK, folder, "capture.sqlite")

    def fn(con):
        con.execute("create table s2 (id integer, value text)")
        con.execute("insert into s2 select id, value from StringIds")
        con.execute("insert into s2 select id, value || ' (again)' from StringIds")  # every id twice
        con.execute("drop table StringIds")
        con.execute("alter table s2 rename to StringIds")

    _with_con(path, fn)
    return _setup(path, error_words=["StringIds"])


def b_sqlite_wal_pending(folder: Path) -> Setup:
    """A WAL-mode export whose -wal file holds rows the main file does not (a copy taken mid-write)."""
    src = folder / "writer.sqlite"
    shutil.copyfile(_trace(MOCK), src)
    con = sqlite3.connect(src)
    con.execute("pragma journal_mode = wal")
    con.execute("pragma wal_autocheckpoint = 0")
    con.execute("insert into CUPTI_ACTIVITY_KIND_KERNEL select * from CUPTI_ACTIVITY_KIND_KERNEL")
    con.commit()
    path = folder / "capture.sqlite"
    shutil.copyfile(src, path)
    shutil.copyfile(f"{src}-wal", f"{path}-wal")
    con.close()
    for leftover in (src, Path(f"{src}-wal"), Path(f"{src}-shm")):
        leftover.unlink(missing_ok=True)
    setup = _setup(path)
    setup.watched.append(Path(f"{path}-wal"))
    return setup


def b_rules_dir_cycle(folder: Path) -> Setup:
    rules = _rule_folder(folder)
    (rules / "robustness-probe" / "loop-a").symlink_to(rules)
    (rules / "robustness-probe" / "loop-b").symlink_to(rules)
    (rules / "again").symlink_to(rules)
    return _rules_setup(folder, rules)


# -- exports whose damage crashed the ingest (exit 3): now one line, or analyzed with notes


def b_sqlite_rename_column(table: str, column: str, new: str) -> Callable[[Path], Setup]:
    def build(folder: Path) -> Setup:
        path = _copy(MOCK, folder, "capture.sqlite")

        def fn(con):
            _drop_indexes(con, table)
            con.execute(f'alter table "{table}" rename column "{column}" to "{new}"')

        _with_con(path, fn)
        return _setup(path)

    return build


def _retype(con: sqlite3.Connection, table: str, types: dict[str, str], select: dict[str, str] | None = None) -> None:
    """Recreate ``table`` with some columns declared as other types (values converted by ``select``)."""
    _drop_indexes(con, table)
    cols = [r[1] for r in con.execute(f'pragma table_info("{table}")')]
    decl = ", ".join(f'"{c}" {types.get(c, "")}'.strip() for c in cols)
    exprs = ", ".join((select or {}).get(c, f'"{c}"') for c in cols)
    con.execute(f'create table "_retyped" ({decl})')
    con.execute(f'insert into "_retyped" select {exprs} from "{table}"')
    con.execute(f'drop table "{table}"')
    con.execute(f'alter table "_retyped" rename to "{table}"')


def b_sqlite_text_times(folder: Path) -> Setup:
    path = _copy(MOCK, folder, "capture.sqlite")
    _with_con(path, lambda con: _retype(con, "CUPTI_ACTIVITY_KIND_KERNEL", {"start": "TEXT", "end": "TEXT"},
                                        {"start": "cast(start as text)", "end": 'cast("end" as text)'}))
    return _setup(path)


def b_sqlite_int64_extremes(folder: Path) -> Setup:
    path = _copy(FUSER, folder, "capture.sqlite")
    _edit(path, "update NVTX_EVENTS set start = -9223372036854775808, end = 9223372036854775807 "
                "where rowid in (select rowid from NVTX_EVENTS limit 3)",
          "update CUPTI_ACTIVITY_KIND_RUNTIME set start = -9223372036854775808, end = 9223372036854775807 "
          "where rowid in (select rowid from CUPTI_ACTIVITY_KIND_RUNTIME limit 2)",
          "update CUPTI_ACTIVITY_KIND_RUNTIME set start = 9223372036854775807, end = 9223372036854775807 "
          "where rowid in (select rowid from CUPTI_ACTIVITY_KIND_RUNTIME limit 1 offset 5)")
    return _setup(path)


def b_sqlite_virtual_table(folder: Path) -> Setup:
    path = _copy(MOCK, folder, "capture.sqlite")

    def fn(con):
        try:
            con.execute("create virtual table v using fts5(a)")
        except sqlite3.OperationalError:
            raise Unavailable("this SQLite has no fts5") from None
        con.execute("drop table v")
        _drop_indexes(con, "CUPTI_ACTIVITY_KIND_RUNTIME")
        con.execute("drop table CUPTI_ACTIVITY_KIND_RUNTIME")
        con.execute('create virtual table CUPTI_ACTIVITY_KIND_RUNTIME using fts5(start, "end", nameId)')

    _with_con(path, fn)
    return _setup(path)


def b_sqlite_enum_ids(kind: str) -> Callable[[Path], Setup]:
    def build(folder: Path) -> Setup:
        path = _copy(MOCK, folder, "capture.sqlite")

        def fn(con):
            for table in ("ENUM_CUDA_MEMCPY_OPER", "ENUM_CUDA_MEM_KIND", "ENUM_CUDA_KERNEL_LAUNCH_TYPE"):
                _retype(con, table, {"id": "TEXT"})
                if kind == "text":
                    con.execute(f"update {table} set id = 'id-' || id")
                else:
                    con.execute(f"update {table} set id = null where rowid % 2 = 0")

        _with_con(path, fn)
        return _setup(path)

    return build


def b_sqlite_stringids_text_ids(folder: Path) -> Setup:
    path = _copy(MOCK, folder, "capture.sqlite")
    _with_con(path, lambda con: _retype(con, "StringIds", {"id": "TEXT", "value": "TEXT"},
                                        {"id": "cast(id as text)"}))
    return _setup(path)


def b_sqlite_gpu_facts_text(folder: Path) -> Setup:
    path = _copy(MOCK, folder, "capture.sqlite")
    _edit(path, "update TARGET_INFO_GPU set smCount = 'many', clockRate = 'fast', computeMajor = 'nine', "
                "l2CacheSize = x'00', totalMemory = 1e400, maxWarpsPerSm = -5")
    return _setup(path)


def b_sqlite_byte_flips(seed: int) -> Callable[[Path], Setup]:
    """A few random bytes of a real export overwritten (after its header): SQLite's own error text may carry
    the damage, invalid UTF-8 included."""
    def build(folder: Path) -> Setup:
        path = _copy(MOCK, folder, "flipped.sqlite")
        rng = _rng(f"sqlite-flip-{seed}")
        size = path.stat().st_size
        with open(path, "r+b") as fh:
            for _ in range(8):
                fh.seek(rng.randrange(100, size))
                fh.write(bytes([rng.randrange(256)]))
        return _setup(path)

    return build


def b_ncu_byte_flips(seed: int) -> Callable[[Path], Setup]:
    def build(folder: Path) -> Setup:
        path = _copy(NCU_REP, folder, "flipped.ncu-rep")
        rng = _rng(f"ncu-flip-{seed}")
        size = path.stat().st_size
        with open(path, "r+b") as fh:
            fh.seek(rng.randrange(64, size - 3))
            fh.write(rng.randbytes(3))
        return _setup(path)

    return build


def b_non_utf8_name(folder: Path) -> Setup:
    name = os.fsdecode(b"capture-\xff\xfe.sqlite")
    try:
        path = folder / name
        shutil.copyfile(_trace(MOCK), path)
    except (UnicodeEncodeError, OSError) as exc:
        raise Unavailable(f"this file system refuses non-UTF-8 names ({exc})") from None
    return _setup(path)


def b_capture_replaced(folder: Path) -> Setup:
    """The capture is swapped with another file again and again while the run reads it."""
    import threading

    path = _copy(SANDBOX, folder, "capture.sqlite")
    other = folder.parent / "swap"
    other.mkdir(exist_ok=True)
    shutil.copyfile(_trace(NCU_REP), other / "b")
    shutil.copyfile(path, other / "a")
    stop = threading.Event()

    def swap() -> None:
        n = 0
        while not stop.wait(0.01):
            n += 1
            tmp = other / "next"
            shutil.copyfile(other / ("b" if n % 2 else "a"), tmp)
            os.replace(tmp, path)

    thread = threading.Thread(target=swap, daemon=True)
    thread.start()

    def after(run: Run) -> list[str]:
        stop.set()
        thread.join(5)
        shutil.copyfile(other / "a", path)
        return []

    setup = Setup(args=[str(path)], names=[path.name], watched=[], after=after)
    return setup


def b_lock_held(folder: Path) -> Setup:
    """Another (stopped) process holds the lock of the store this run needs: the run says what it waits for and
    gives up after NSIGHT_ADVISOR_LOCK_WAIT_S (2 s here)."""
    import fcntl

    capture = _copy(MOCK, folder)
    workdir = folder.parent
    env = _env(workdir)
    where = subprocess.run([sys.executable, "-c", "import sys; from pathlib import Path; from nsight_advisor.store.cache "
                            "import cached_store_path; print(cached_store_path([Path(sys.argv[1]).resolve()]))",
                            str(capture)], env=env, capture_output=True, text=True, timeout=60)
    if where.returncode != 0:
        raise Unavailable(f"cannot compute the cache path: {where.stderr.strip()[-200:]}")
    lock = Path(where.stdout.strip() + ".lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.write(fd, str(os.getpid()).encode())

    def after(run: Run) -> list[str]:
        os.close(fd)
        lock.unlink(missing_ok=True)
        return []

    setup = _setup(capture, error_words=["building"])
    setup.names = [capture.name, lock.name.split(".")[0]]
    setup.env = {"NSIGHT_ADVISOR_LOCK_WAIT_S": "2"}
    setup.cached_first = True
    setup.after = after
    return setup


def b_interrupt(signum: int) -> Callable[[Path], Setup]:
    """A signal while a rule query runs (a query that would run for minutes): the run stops at once, cleanly."""
    import signal

    def build(folder: Path) -> Setup:
        rules = _rule_folder(folder, sql="select 'x' as name, 1.0 as value, 0 as impact_ns "
                                         "from range(100000000000) t(i) where i = -1 limit 1\n")
        setup = _rules_setup(folder, rules)
        setup.interrupt = (signum, 4.0)
        return setup

    return build


# -- smaller promises


def b_controls_in_strings(folder: Path) -> Setup:
    """Terminal escapes (OSC title, CSI clear, a raw ESC, C1 CSI, a bidi override) in kernel and API names."""
    path = _copy(MOCK, folder, "capture.sqlite")
    evil = "k\x1b]0;owned\x07\x1b[2J\x1b[31mred\x9b2J\u202egnp.exe\rhidden"

    def fn(con):
        for sid in _kernel_string_ids(con):
            con.execute("update StringIds set value = ? || value where id = ?", (evil, sid))

    _with_con(path, fn)
    return _setup(path)


def check_no_controls(run: Run) -> list[str]:
    """No control character (bar tab and newline) in any text report or anything a command printed."""
    bad = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
    problems = [f"{' '.join(inv.argv[3:4]) or 'a command'} printed a control character"
                for inv in run.calls if bad.search(inv.stdout) or bad.search(inv.stderr)]
    for fmt in ("md", "html"):
        path = run.outputs.get(fmt)
        if path is not None and path.is_file() and bad.search(path.read_text(encoding="utf-8", errors="replace")):
            problems.append(f"the {fmt} report holds a control character")
    return problems


def b_query_escape(sql: str, *, home: bool = False) -> Callable[[Path], Setup]:
    """`query` with SQL that would write a file or install an extension: refused, nothing written."""
    def build(folder: Path) -> Setup:
        capture = _copy(MOCK, folder)
        target = folder.parent / "written-by-query.csv"
        setup = _setup(capture)
        setup.forbidden = [target, folder.parent / "home" / ".duckdb"]
        setup.env = {"HOME": "{workdir}/home"}
        (folder.parent / "home").mkdir(exist_ok=True)
        setup.names = [capture.name, "query failed"]
        setup.extra_calls = [(["query", str(capture), sql.format(target=target)], "rejected")]
        return setup

    return build


def b_rules_template(message: str, *, secret: str = "") -> Callable[[Path], Setup]:
    """A rule whose message template reaches for Python objects or asks for a gigantic width."""
    def build(folder: Path) -> Setup:
        toml = _PROBE_TOML.format(extra_top="", default="0.0").replace('message = "{rows} row(s) fired"',
                                                                       f"message = {json.dumps(message)}")
        assert message in toml
        rules = _rule_folder(folder, toml=toml, sql="select 'row' as name, 1.0 as value, 5 as impact_ns\n")
        setup = _rules_setup(folder, rules, names=["robustness-probe", "NA990"], secrets=[secret] if secret else [])
        if secret:
            setup.env = {"NSA_TEST_SECRET": secret}
        return setup

    return build


def b_rules_judge_not_imported(folder: Path) -> Setup:
    """A rule folder whose judge.py writes a file when imported: `rules list` and an analyze that does not
    select the rule must not import it."""
    rules = _rule_folder(folder)
    marker = folder.parent / "judge-was-imported"
    (rules / "robustness-probe" / "judge.py").write_text(
        f"open({str(marker)!r}, 'w').write('imported')\n\ndef judge(row, params):\n    return True\n")
    setup = _rules_setup(folder, rules)
    setup.args += ["--select", "NA101"]
    setup.forbidden = [marker]
    setup.extra_calls = [(["rules", "list", "--rules-dir", str(rules)], "analyzed")]
    return setup


def b_stdout_closed(folder: Path) -> Setup:
    setup = _setup(_copy(MOCK, folder))
    setup.close_stdout = True
    setup.names = ["stdout"]
    return setup


def b_path_symlink_loop(folder: Path) -> Setup:
    a, b = folder / "loop-a.sqlite", folder / "loop-b.sqlite"
    a.symlink_to(b)
    b.symlink_to(a)
    return Setup(args=[str(a)], names=[a.name], watched=[], error_words=["loop"])


def b_config_is_directory(folder: Path) -> Setup:
    capture = _copy(MOCK, folder)
    config = folder / "configs"
    config.mkdir()
    return Setup(args=[str(capture), "--config", str(config)], names=[config.name], watched=[capture],
                 error_words=["directory"])


def b_csv_utf16(folder: Path) -> Setup:
    return _write_csv(folder, "utf16.csv", _csv_text(CSV_DETAILS).encode("utf-16"))


def b_kernels_without_device(folder: Path) -> Setup:
    path = _copy(MOCK, folder, "capture.sqlite")

    def fn(con):
        _drop_indexes(con, "CUPTI_ACTIVITY_KIND_KERNEL")
        con.execute("alter table CUPTI_ACTIVITY_KIND_KERNEL drop column deviceId")

    _with_con(path, fn)
    return _setup(path)


def check_gpu_rules_skipped(run: Run) -> list[str]:
    """When analyzed: the rules that need the kernel's GPU are skipped with a reason, not reported clean."""
    report = run.report() or {}
    wanted = {"small-grid", "tail-effect", "low-occupancy"}
    outcomes = {o.get("rule_name"): o for o in report.get("outcomes", []) if o.get("rule_name") in wanted}
    return [f"{name} is {o.get('status')}, expected skipped (no kernel deviceId)" for name, o in outcomes.items()
            if o.get("status") != "skipped" or not o.get("reason")]


# --------------------------------------------------------------------------------------------------- extra checks


def check_notes(data: str) -> Callable[[Run], list[str]]:
    """When analyzed: the store has an ingest_notes row for ``data`` and the JSON report carries its text."""

    def check(run: Run) -> list[str]:
        if run.outcome != "analyzed":
            return []
        rows = run.store_rows(f"select note from ingest_notes where data = '{data}'")
        if not rows:
            return [f"no ingest_notes row for {data}: the report does not say what was ignored"]
        problems = []
        report = json.dumps(run.report() or {})
        if not any(_words(note or "") <= _words(report) for (note,) in rows):
            problems.append(f"the JSON report does not carry the ingest note for {data} ({rows[0][0]!r})")
        page = run.outputs.get("html")
        if page is not None and page.is_file():
            shown = html.unescape(page.read_text(encoding="utf-8", errors="replace"))
            if not any((note or "") in shown for (note,) in rows):
                problems.append(f"the HTML report does not show the ingest note for {data}")
        return problems

    check.__name__ = f"notes for {data}"
    return check


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9_]+", text.lower()))


def check_rows_kept(table: str, source_sql: str, source: str = "input") -> Callable[[Run], list[str]]:
    """When analyzed: ``table`` holds as many rows as ``source_sql`` counts in the input, or a note says why not."""

    def check(run: Run) -> list[str]:
        if run.outcome != "analyzed" or run.setup is None:
            return []
        con = sqlite3.connect(f"file:{run.setup.watched[0]}?mode=ro&immutable=1", uri=True)
        try:
            expected = con.execute(source_sql).fetchone()[0]
        finally:
            con.close()
        got = run.store_rows(f"select count(*) from {table}")
        notes = run.store_rows(f"select count(*) from ingest_notes where data = '{table}'") or [(0,)]
        if got is None:
            return [f"no store to count {table} in"]
        if got[0][0] != expected and not notes[0][0]:
            return [f"{table}: {got[0][0]} rows in the store, {expected} in the capture, and no ingest note says why"]
        return []

    check.__name__ = f"{table} rows kept"
    return check


def check_html_safe(run: Run) -> list[str]:
    """The HTML report shows hostile strings as text: no injected tag, handler or script."""
    path = run.outputs.get("html")
    if run.outcome != "analyzed" or path is None or not path.exists():
        return []
    text = path.read_text(encoding="utf-8", errors="replace")
    scan = _HtmlScan()
    scan.feed(text)
    scan.close()
    problems = [f"HTML: {p}" for p in scan.problems]
    shown = "".join(scan.text)
    payloads = [p for p in HOSTILE[:4] if p in shown] + [p for p in HOSTILE[:4] if p.replace('"', "&quot;") in shown]
    if not payloads and not any(p in text for p in ("&lt;script&gt;", "&lt;img", "&#60;script")):
        problems.append("HTML: no hostile name is shown as text at all (were kernel names dropped?)")
    if "{{7*7}}" not in shown and "49 ${7*7}" in shown:
        problems.append("HTML: a template expression from a kernel name was evaluated")
    return problems


def check_json_keeps_strings(*needles: str) -> Callable[[Run], list[str]]:
    """The JSON report keeps the capture's strings verbatim (escaping is the renderer's job, not ingest's)."""

    def check(run: Run) -> list[str]:
        if run.outcome != "analyzed":
            return []
        strings = "\n".join(_all_strings(run.report()))
        lost = [n for n in needles if n not in strings]
        return [f"JSON: {lost[0]!r} is not in the report verbatim"] if lost else []

    check.__name__ = "json keeps strings"
    return check


def check_no_terminal_escapes(run: Run) -> list[str]:
    """Nothing a command prints carries a raw escape character from the capture (terminal injection)."""
    return [f"{' '.join(inv.argv[3:4])}: a raw ESC from the capture reached the terminal"
            for inv in run.calls if "\x1b" in inv.stdout or "\x1b" in inv.stderr]


def check_report_bounded(run: Run) -> list[str]:
    """Every report written stays under REPORT_LIMIT_BYTES."""
    problems = []
    for fmt, path in run.outputs.items():
        if path.exists() and path.stat().st_size > REPORT_LIMIT_BYTES:
            problems.append(f"{fmt} report is {path.stat().st_size:,} bytes (> {REPORT_LIMIT_BYTES:,})")
    return problems


def check_evidence_bounded(run: Run) -> list[str]:
    """The probe rule fired on every row, its evidence kept at most evidence_limit rows and counted the rest."""
    if run.outcome != "analyzed":
        return []
    report = run.report() or {}
    mine = [f for f in report.get("findings", []) if f.get("rule_id") == "NA990"]
    if not mine:
        return ["the probe rule made no finding (expected one with 2,000,000 firing rows)"]
    problems = []
    for finding in mine:
        if len(finding.get("evidence", [])) > 20:
            problems.append(f"evidence has {len(finding['evidence'])} rows (limit 20)")
        total = finding.get("evidence_total_rows")
        if total is not None and total < 2_000_000:
            problems.append(f"evidence_total_rows is {total}, expected 2,000,000")
    return problems + check_report_bounded(run)


def check_probe_not_findings(run: Run) -> list[str]:
    """When analyzed: the hostile probe rule errored (it must not run), and the other rules still ran."""
    if run.outcome != "analyzed":
        return []
    report = run.report() or {}
    outcomes = {o.get("rule_id"): o for o in report.get("outcomes", [])}
    probe = outcomes.get("NA990")
    problems = []
    if probe is None:
        problems.append("no outcome for the probe rule NA990")
    elif probe.get("status") != "errored":
        problems.append(f"probe rule NA990 has status {probe.get('status')!r}, expected 'errored'")
    if len(outcomes) < 2:
        problems.append("the other rules did not run")
    return problems


def check_store_not_written(run: Run) -> list[str]:
    """The store has no table a rule tried to create."""
    rows = run.store_rows("select table_name from information_schema.tables where table_name ilike '%pwned%'")
    return [f"a rule created table {rows[0][0]} in the store"] if rows else []


def check_ncu_kernels(run: Run) -> list[str]:
    """When a truncated report is analyzed it must hold kernels (ncu_report returns zero ranges silently)."""
    if run.outcome != "analyzed":
        return []
    rows = run.store_rows("select count(*) from ncu_kernels")
    if not rows or rows[0][0] == 0:
        return ["analyzed with zero ncu kernels: a damaged report was silently read as empty"]
    return []


def _all_strings(obj) -> list[str]:
    out: list[str] = []
    stack = [obj]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return out


class _HtmlScan(html.parser.HTMLParser):
    """Finds what an injected string could do in a report: scripts, handlers, javascript: URLs, frames."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.problems: list[str] = []
        self.text: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        if tag in ("iframe", "object", "embed", "frame", "base"):
            self.problems.append(f"<{tag}> element present")
        if tag == "script":
            self._in_script = True
            if any(name == "src" for name, _ in attrs):
                self.problems.append("<script src=...> present")
        for name, value in attrs:
            value = value or ""
            if name.startswith("on") and "alert" in value:
                self.problems.append(f"<{tag} {name}=...> handler from a capture string")
            if value.strip().lower().startswith("javascript:"):
                self.problems.append(f"<{tag} {name}=javascript:...> URL")
        if tag == "img" and dict(attrs).get("src") == "x":
            self.problems.append("<img src=x> injected")

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_script = False

    def handle_data(self, data):
        if self._in_script:
            if "alert(" in data:
                self.problems.append("a capture string inside a <script> block")
        else:
            self.text.append(data)


# --------------------------------------------------------------------------------------------------- the corpus

CASES: tuple[Case, ...] = (
    # paths
    Case("path-missing", "path", "a path that does not exist", b_missing, "rejected", also=("info",)),
    Case("path-directory", "path", "a directory named capture.sqlite", b_directory, "rejected",
         also=("info", "ingest")),
    Case("path-fifo", "path", "a named pipe (FIFO) named capture.sqlite: reading it would block forever", b_fifo,
         "rejected", timeout_s=30),
    Case("path-html-name", "path", 'a real export whose file name is "><img src=x onerror=alert(1)>.sqlite',
         b_html_file_name, "analyzed", sources=(MOCK,), formats=("json", "html"), checks=(check_html_safe,)),
    Case("path-control-chars", "path", "an empty file whose name holds a newline and a terminal escape",
         b_control_chars_file_name, "rejected"),
    Case("zero-byte-sqlite", "empty", "zero-byte .sqlite", b_zero(".sqlite"), "rejected",
         also=("info", "ingest")),
    Case("zero-byte-ncu-rep", "empty", "zero-byte .ncu-rep", b_zero(".ncu-rep"), "rejected"),
    Case("zero-byte-csv", "empty", "zero-byte .csv", b_zero(".csv"), "rejected"),
    Case("zero-byte-nsys-rep", "empty", "zero-byte .nsys-rep", b_zero(".nsys-rep"), "rejected"),
    # SQLite exports
    Case("sqlite-truncated-100", "sqlite", "real export cut after its 100-byte header", b_sqlite_truncated(100),
         "rejected", sources=(MOCK,), also=("info", "ingest")),
    Case("sqlite-truncated-page1", "sqlite", "real export cut after its first page (schema only)",
         b_sqlite_truncated(4096), "rejected", sources=(MOCK,), also=("info",)),
    Case("sqlite-truncated-half", "sqlite", "real export cut in half", b_sqlite_truncated(0.5), "rejected",
         sources=(MOCK,), also=("info", "ingest")),
    Case("sqlite-truncated-last-page", "sqlite", "real export missing its last page", b_sqlite_minus_last_page,
         "rejected", sources=(MOCK,)),
    Case("sqlite-wrong-magic", "sqlite", "real export with the header 'SQLite format 2'", b_sqlite_wrong_magic,
         "rejected", sources=(MOCK,)),
    Case("sqlite-corrupt-kernel-page", "sqlite", "kernel table's root page overwritten with random bytes",
         b_sqlite_corrupt_table("CUPTI_ACTIVITY_KIND_KERNEL"), "rejected", sources=(MOCK,),
         also=("info", "ingest")),
    Case("sqlite-corrupt-strings-page", "sqlite", "StringIds root page overwritten with random bytes",
         b_sqlite_corrupt_table("StringIds"), "rejected", sources=(MOCK,)),
    Case("sqlite-corrupt-schema", "sqlite", "page 1 (sqlite_master) overwritten after the header",
         b_sqlite_corrupt_schema, "rejected", sources=(MOCK,), also=("info",)),
    Case("sqlite-trailing-garbage", "sqlite", "real export with 1 MiB of random bytes appended",
         b_sqlite_trailing_garbage, "either", sources=(MOCK,)),
    Case("sqlite-not-nsys", "sqlite", "an SQLite database of recipes (no nsys tables)", b_sqlite_not_nsys,
         "rejected", also=("info", "ingest")),
    Case("sqlite-no-tables", "sqlite", "a valid SQLite database with no tables", b_sqlite_no_tables, "rejected"),
    Case("sqlite-gzip", "sqlite", "gzip of a real export, named .sqlite", b_sqlite_gzip, "rejected",
         sources=(MOCK,)),
    Case("sqlite-missing-kernel-name", "sqlite", "kernel table without its demangledName column",
         b_sqlite_drop_column("CUPTI_ACTIVITY_KIND_KERNEL", "demangledName"), "either", sources=(MOCK,)),
    Case("sqlite-missing-start", "sqlite", "runtime table without its start column",
         b_sqlite_drop_column("CUPTI_ACTIVITY_KIND_RUNTIME", "start"), "either", sources=(MOCK,)),
    Case("sqlite-missing-stringids", "sqlite", "export without its StringIds table",
         b_sqlite_drop_table("StringIds"), "either", sources=(MOCK,)),
    Case("sqlite-text-in-integers", "sqlite", "text ('yesterday', 'big') in integer columns start/gridX/end",
         b_sqlite_text_in_integers, "either", sources=(MOCK,)),
    Case("sqlite-blob-and-real", "sqlite", "a BLOB stream id, 3.5 registers, 1e300 threads", b_sqlite_blob_and_real,
         "either", sources=(MOCK,)),
    Case("sqlite-null-names", "sqlite", "NULL kernel names and API names (NOT NULL dropped)", b_sqlite_null_names,
         "either", sources=(MOCK,),
         checks=(check_rows_kept("kernels", "select count(*) from CUPTI_ACTIVITY_KIND_KERNEL"),)),
    Case("sqlite-dangling-string-ids", "sqlite", "kernel names pointing at string ids that do not exist",
         b_sqlite_dangling_string_ids, "either", sources=(MOCK,),
         checks=(check_rows_kept("kernels", "select count(*) from CUPTI_ACTIVITY_KIND_KERNEL"),)),
    Case("sqlite-end-before-start", "sqlite", "a kernel and an API call with end < start",
         b_sqlite_end_before_start, "analyzed", sources=(MOCK,), formats=("json", "html"),
         checks=(check_notes("kernels"),)),
    Case("sqlite-negative-values", "sqlite", "negative times, registers, block size and copy bytes",
         b_sqlite_negative, "either", sources=(MOCK,)),
    Case("sqlite-absurd-values", "sqlite", "int64-overflowing duration, grid and shared memory; 2^32 grid z; 2^63-1 copy bytes",
         b_sqlite_absurd, "either", sources=(MOCK,)),
    Case("sqlite-duplicate-kernels", "sqlite", "every kernel row twice (duplicate correlation ids)",
         b_sqlite_duplicate_kernels, "analyzed", sources=(MOCK,),
         checks=(check_rows_kept("kernels", "select count(*) from CUPTI_ACTIVITY_KIND_KERNEL"),)),
    Case("sqlite-duplicate-runtime", "sqlite", "launch API rows repeated with the same correlation id",
         b_sqlite_duplicate_runtime, "analyzed", sources=(MOCK,),
         checks=(check_rows_kept("kernels", "select count(*) from CUPTI_ACTIVITY_KIND_KERNEL"),)),
    Case("sqlite-huge-kernel-name", "sqlite", "a 1 MiB kernel name", b_sqlite_huge_name, "analyzed",
         sources=(MOCK,), formats=("json", "html", "md"), checks=(check_report_bounded,)),
    Case("sqlite-invalid-utf8", "sqlite", "invalid UTF-8 bytes in a kernel name and an API name",
         b_sqlite_invalid_utf8, "analyzed", sources=(MOCK,), also=("info",), checks=(check_notes("StringIds"),)),
    Case("sqlite-nul-in-name", "sqlite", "a NUL byte inside a kernel name", b_sqlite_nul_in_name, "either",
         sources=(MOCK,), formats=("json", "html")),
    Case("sqlite-hostile-strings", "sqlite", "HTML/script/template/SQL payloads in kernel, API, NVTX, GPU and thread names",
         b_sqlite_hostile_strings, "analyzed", sources=(FUSER,), formats=("json", "html", "md", "sarif"),
         also=("info", "query"),
         checks=(check_html_safe, check_json_keeps_strings(SCRIPT_NAME), check_no_terminal_escapes)),
    Case("sqlite-hostile-identifiers", "sqlite", "tables and columns whose names carry quotes, SQL and HTML",
         b_sqlite_hostile_identifiers, "analyzed", sources=(MOCK,),
         checks=(check_rows_kept("kernels", "select count(*) from CUPTI_ACTIVITY_KIND_KERNEL"),)),
    Case("sqlite-infinite-view", "sqlite", "StringIds replaced by a view that never ends (recursive CTE)",
         b_sqlite_infinite_view, "either", sources=(MOCK,), timeout_s=90),
    Case("sqlite-kernel-view", "sqlite", "kernel table replaced by a view calling SQLite functions",
         b_sqlite_kernel_is_view, "either", sources=(SANDBOX,)),
    Case("sqlite-wal-readonly-dir", "sqlite", "export in WAL journal mode, in a read-only folder", b_sqlite_wal,
         "analyzed", sources=(MOCK,)),
    Case("sqlite-no-kernels", "sqlite", "real export with its kernel and memcpy rows deleted: nothing to judge",
         b_sqlite_empty_kernels, "rejected", sources=(MOCK,), store_may_remain=True),
    Case("nsys-rep-garbage", "nsys-rep", "nsys-rep header followed by random bytes", b_rep_garbage, "rejected"),
    Case("nsys-rep-truncated", "nsys-rep", "real .nsys-rep cut in half", b_rep_truncated, "rejected",
         sources=(NSYS_REP,)),
    # Nsight Compute reports
    Case("ncu-rep-garbage", "ncu-rep", "NVR magic followed by 64 KiB of random bytes", b_ncu_garbage, "rejected", also=("info",)),
    Case("ncu-rep-wrong-magic", "ncu-rep", "64 KiB of random bytes named .ncu-rep", b_ncu_wrong_magic, "rejected"),
    Case("ncu-rep-truncated-1k", "ncu-rep", "real report cut after 1 KiB", b_ncu_truncated(lambda n: 1024,
         "truncated.ncu-rep"), "rejected", sources=(NCU_REP,), also=("info",)),
    Case("ncu-rep-truncated-half", "ncu-rep", "real report cut in half", b_ncu_truncated(lambda n: n // 2,
         "truncated.ncu-rep"), "either", sources=(NCU_REP,), checks=(check_ncu_kernels,)),
    Case("ncu-rep-truncated-tail", "ncu-rep", "real report missing its last byte",
         b_ncu_truncated(lambda n: n - 1, "truncated.ncu-rep"), "either", sources=(NCU_REP,),
         checks=(check_ncu_kernels,)),
    Case("ncu-rep-zeroed-middle", "ncu-rep", "real report with 8 KiB of zeros in the middle", b_ncu_zeroed_middle,
         "either", sources=(NCU_REP,), checks=(check_ncu_kernels,)),
    Case("ncu-rep-named-sqlite", "ncu-rep", "real .ncu-rep named actually_ncu.sqlite (magic decides)",
         b_ncu_as_sqlite_name, "analyzed", sources=(NCU_REP,)),
    # ncu CSV
    Case("csv-header-only", "csv", "header line of a real details CSV, no rows", b_csv_header_only, "either",
         sources=(CSV_DETAILS,)),
    Case("csv-binary", "csv", "20 KB of random bytes named .csv", b_csv_binary, "rejected"),
    Case("csv-gzip", "csv", "gzip of a real CSV, named .csv", b_csv_gzip, "rejected", sources=(CSV_DETAILS,)),
    Case("csv-ragged", "csv", "real CSV with rows missing and gaining fields", b_csv_ragged, "either",
         sources=(CSV_DETAILS,)),
    Case("csv-bom", "csv", "real details CSV with a UTF-8 byte-order mark", b_csv_bom, "analyzed",
         sources=(CSV_DETAILS,)),
    Case("csv-semicolon", "csv", "real CSV re-delimited with semicolons", b_csv_semicolon, "either",
         sources=(CSV_DETAILS,)),
    Case("csv-huge-field", "csv", "real CSV with a 2 MiB kernel name field", b_csv_huge_field, "either",
         sources=(CSV_DETAILS,), formats=("json", "html"), checks=(check_report_bounded,)),
    Case("csv-invalid-utf8", "csv", "real CSV with latin-1 bytes in a kernel name", b_csv_invalid_utf8, "either",
         sources=(CSV_DETAILS,)),
    Case("csv-hostile-names", "csv", "real CSV whose kernel name is a script tag", b_csv_hostile, "analyzed",
         sources=(CSV_DETAILS,), formats=("json", "html"),
         checks=(check_html_safe, check_json_keeps_strings(SCRIPT_NAME))),
    Case("csv-unterminated-quote", "csv", "real CSV with a quote that never closes", b_csv_unterminated_quote,
         "either", sources=(CSV_DETAILS,)),
    Case("csv-nul-bytes", "csv", "real CSV with NUL bytes inside fields", b_csv_nul, "either",
         sources=(CSV_DETAILS,)),
    Case("csv-session-page", "csv", "real session page (not kernel data)", b_csv_session, "either",
         sources=(CSV_SESSION,)),
    Case("csv-absurd-numbers", "csv", "real raw CSV with 1e999, nan, inf, -1, 1,2,3 as metric values",
         b_csv_numbers_absurd, "either", sources=(CSV_RAW,)),
    Case("csv-huge-ids", "csv", "real CSV whose result IDs and process IDs overflow 32 and 64 bits", b_csv_huge_ids,
         "either", sources=(CSV_DETAILS,)),
    Case("text-not-csv", "csv", "a .txt of prose, no commas", b_text_not_csv, "rejected"),
    # stores
    Case("store-zero-byte", "store", "zero-byte .duckdb given as a store", b_store_zero, "rejected"),
    Case("store-garbage", "store", "300 KB of random bytes named .duckdb", b_store_garbage, "rejected"),
    Case("store-foreign", "store", "a valid DuckDB file of recipes (not a trace store)", b_store_foreign,
         "rejected"),
    Case("store-truncated", "store", "a store ingested from a real export, cut in half", b_store_truncated,
         "rejected", sources=(MOCK,)),
    # outputs
    Case("output-is-directory", "output", "-o names an existing folder", b_output_is_directory, "rejected",
         sources=(MOCK,), store_may_remain=True),
    Case("output-parent-is-file", "output", "-o names a path under a regular file", b_output_parent_is_file,
         "rejected", sources=(MOCK,), store_may_remain=True),
    Case("output-existing-kept", "output", "bad input while -o already holds a report", b_output_existing_kept,
         "rejected"),
    Case("cache-dir-is-file", "output", "NSIGHT_ADVISOR_CACHE names a regular file", b_cache_is_file, "rejected",
         sources=(MOCK,)),
    Case("two-captures-one-bad", "output", "a real export and a corrupt one in one analyze",
         b_two_captures_one_bad, "rejected", sources=(MOCK,)),
    # rule folders
    Case("rules-bad-toml", "rules", "rule.toml that is not TOML", b_rules_bad_toml, "rejected", sources=(MOCK,),
         store_may_remain=True),
    Case("rules-unknown-key", "rules", "rule.toml with an unknown key (colour)", b_rules_unknown_key, "rejected",
         sources=(MOCK,), store_may_remain=True),
    Case("rules-wrong-param-type", "rules", 'a float param whose default is "zero"', b_rules_wrong_param_type,
         "rejected", sources=(MOCK,), store_may_remain=True),
    Case("rules-missing-query", "rules", "a rule folder without query.sql", b_rules_missing_query, "rejected",
         sources=(MOCK,), store_may_remain=True),
    Case("rules-sql-error", "rules", "query.sql with a syntax error", b_rules_sql("selec nothing frm nowhere"),
         "either", sources=(MOCK,), store_may_remain=True, checks=(check_probe_not_findings,)),
    Case("rules-sql-unknown-table", "rules", "query.sql reading a raw export table",
         b_rules_sql("select 'x' as name, 1.0 as value, 0 as impact_ns from CUPTI_ACTIVITY_KIND_KERNEL"),
         "either", sources=(MOCK,), store_may_remain=True, checks=(check_probe_not_findings,)),
    Case("rules-sql-write", "rules", "query.sql that creates a table in the store",
         b_rules_sql("create table pwned as select 1 as x;\n" + _PROBE_SQL), "either", sources=(MOCK,),
         store_may_remain=True, checks=(check_probe_not_findings, check_store_not_written)),
    Case("rules-sql-attach", "rules", "query.sql that ATTACHes a new database file",
         b_rules_sql("attach '{target0}' as evil;\ncreate table evil.t as select 1 as x;\n" + _PROBE_SQL,
                     forbidden=("attached.duckdb",)),
         "either", sources=(MOCK,), store_may_remain=True, checks=(check_probe_not_findings,)),
    Case("rules-sql-copy-to", "rules", "query.sql that COPYs the kernels to a file",
         b_rules_sql("copy (select * from kernels) to '{target0}';\n" + _PROBE_SQL, forbidden=("stolen.csv",)),
         "either", sources=(MOCK,), store_may_remain=True, checks=(check_probe_not_findings,)),
    Case("rules-sql-read-file", "rules", "query.sql that read_csv()s /etc/passwd into its evidence",
         b_rules_sql("select column0 as name, 1.0 as value, 0 as impact_ns "
                     "from read_csv('/etc/passwd', header = false, sep = ':')", secrets=("root:x:0", "/bin/bash")),
         "either", sources=(MOCK,), store_may_remain=True, checks=(check_probe_not_findings,)),
    Case("rules-sql-read-text", "rules", "query.sql that read_text()s /etc/hostname",
         b_rules_sql("select content as name, 1.0 as value, 0 as impact_ns from read_text('/etc/hostname')",
                     secrets=(Path("/etc/hostname").read_text().strip() if Path("/etc/hostname").exists() else "",)),
         "either", sources=(MOCK,), store_may_remain=True, checks=(check_probe_not_findings,)),
    Case("rules-sql-scan-capture", "rules", "a single SELECT that sqlite_scan()s the capture's environment table",
         b_rules_sql_scan, "either", sources=(MOCK,), store_may_remain=True, checks=(check_probe_not_findings,)),
    Case("rules-sql-install", "rules", "query.sql that installs and loads an extension",
         b_rules_sql("install httpfs;\nload httpfs;\n" + _PROBE_SQL), "either", sources=(MOCK,),
         store_may_remain=True, checks=(check_probe_not_findings,)),
    Case("rules-sql-reenable-access", "rules", "query.sql that turns external access back on",
         b_rules_sql("set enable_external_access = true;\n" + _PROBE_SQL), "either", sources=(MOCK,),
         store_may_remain=True, checks=(check_probe_not_findings,)),
    Case("rules-endless-query", "rules", "a query that would run for hours (time limit set to 2 s)", b_rules_slow,
         "analyzed", sources=(MOCK,), store_may_remain=True, timeout_s=120, checks=(check_probe_not_findings,)),
    Case("rules-million-rows", "rules", "a rule whose query fires on 2,000,000 rows",
         b_rules_sql("select 'row ' || i as name, 1.0 as value, i as impact_ns from range(2000000) t(i)"),
         "analyzed", sources=(MOCK,), store_may_remain=True, formats=("json", "html", "md", "sarif"),
         checks=(check_evidence_bounded,)),
    Case("rules-dir-missing", "rules", "--rules-dir names a folder that does not exist", b_rules_dir_missing,
         "rejected", sources=(MOCK,), store_may_remain=True),
    Case("rules-dir-is-file", "rules", "--rules-dir names a regular file", b_rules_dir_is_file, "rejected",
         sources=(MOCK,), store_may_remain=True),
    # configuration
    Case("config-bad-toml", "config", "nsight-advisor.toml that is not TOML", b_config("select = [NA101\n"),
         "rejected", sources=(MOCK,), store_may_remain=True),
    Case("config-unknown-key", "config", "nsight-advisor.toml with an unknown key", b_config('colour = "red"\n',
         ("colour",)), "rejected", sources=(MOCK,), store_may_remain=True),
    Case("config-wrong-type", "config", "a rule param set to a string in nsight-advisor.toml",
         b_config('[rules.robustness-probe]\nmin_value = "zero"\n', ("min_value",)), "rejected", sources=(MOCK,),
         store_may_remain=True),
    Case("config-pyproject-bad", "config", "./pyproject.toml with select = 5 under [tool.nsight-advisor]",
         b_pyproject_bad_section, "rejected", sources=(MOCK,), store_may_remain=True),
    Case("config-missing", "config", "--config names a file that does not exist", b_config_missing, "rejected",
         sources=(MOCK,), store_may_remain=True),
    Case("set-no-equals", "config", "--set robustness-probe.min_value (no =)",
         b_set("robustness-probe.min_value", ("robustness-probe.min_value", "--set")), "rejected", sources=(MOCK,),
         store_may_remain=True),
    Case("set-unknown-rule", "config", "--set no-such-rule.x=1", b_set("no-such-rule.x=1", ("no-such-rule",)),
         "rejected", sources=(MOCK,), store_may_remain=True),
    Case("set-unknown-param", "config", "--set robustness-probe.nope=1",
         b_set("robustness-probe.nope=1", ("nope",)), "rejected", sources=(MOCK,), store_may_remain=True),
    Case("set-wrong-type", "config", "--set robustness-probe.min_value=abc",
         b_set("robustness-probe.min_value=abc", ("min_value", "abc")), "rejected", sources=(MOCK,),
         store_may_remain=True),
    Case("set-nan", "config", "--set robustness-probe.min_value=nan", b_set("robustness-probe.min_value=nan",
         ("min_value", "nan")), "rejected", sources=(MOCK,), store_may_remain=True),
    # round two -- data loss and wrong answers
    Case("output-is-input", "data-loss", "-o names the capture itself", b_output_is_input("same"), "rejected",
         sources=(MOCK,)),
    Case("output-symlink-to-input", "data-loss", "-o names a symlink to the capture", b_output_is_input("symlink"),
         "rejected", sources=(MOCK,)),
    Case("output-hardlink-to-input", "data-loss", "-o names a hard link to the capture",
         b_output_is_input("hardlink"), "rejected", sources=(MOCK,)),
    Case("store-is-input", "data-loss", "--store names the capture itself", b_output_is_input("store"), "rejected",
         sources=(MOCK,)),
    Case("output-fifo", "data-loss", "-o names a FIFO with a reader: written through, still a FIFO",
         b_output_fifo, "analyzed", sources=(MOCK,)),
    Case("output-char-device", "data-loss", "-o names a character device (1,3 as /dev/null): still a device",
         b_output_char_device, "analyzed", sources=(MOCK,)),
    Case("output-dash", "data-loss", "-o - writes the report to stdout", b_output_dash, "analyzed",
         sources=(MOCK,)),
    Case("cache-store-truncated", "data-loss", "the cached store cut to a third, then analyze --no-cache",
         b_cache_damaged("truncated", cached_first=False), "analyzed", sources=(MOCK,)),
    Case("cache-store-zeroed", "data-loss", "the cached store overwritten with zeros, then analyze",
         b_cache_damaged("zeroed", cached_first=True), "analyzed", sources=(MOCK,), formats=("json", "md")),
    Case("cache-store-random", "data-loss", "the cached store overwritten with random bytes, then analyze",
         b_cache_damaged("random", cached_first=True), "analyzed", sources=(MOCK,)),
    Case("store-user-damaged", "data-loss", "--store names a damaged file of the user's: named, left as it is",
         b_store_user_damaged, "rejected", sources=(MOCK,), also=("ingest",)),
    Case("sqlite-stringids-duplicate-ids", "data-loss", "StringIds gives every id two values",
         b_sqlite_stringids_duplicates, "rejected", sources=(MOCK,)),
    Case("sqlite-wal-pending-rows", "data-loss", "WAL-mode export whose -wal file holds rows the main file lacks",
         b_sqlite_wal_pending, "analyzed", sources=(MOCK,)),
    Case("rules-dir-symlink-cycle", "data-loss", "a rules folder holding symlinks to itself (directory cycles)",
         b_rules_dir_cycle, "analyzed", sources=(MOCK,), timeout_s=90, store_may_remain=True),
    # round two -- the input at fault, not the program (was exit 3)
    Case("sqlite-renamed-kernel-column", "input-at-fault", "kernel table's start column renamed",
         b_sqlite_rename_column("CUPTI_ACTIVITY_KIND_KERNEL", "start", "begin"), "either", sources=(MOCK,)),
    Case("sqlite-renamed-runtime-column", "input-at-fault", "runtime table's nameId column renamed",
         b_sqlite_rename_column("CUPTI_ACTIVITY_KIND_RUNTIME", "nameId", "name_ref"), "either", sources=(MOCK,)),
    Case("sqlite-renamed-stringids-column", "input-at-fault", "StringIds' value column renamed",
         b_sqlite_rename_column("StringIds", "value", "text"), "either", sources=(MOCK,)),
    Case("sqlite-text-start-end", "input-at-fault", "kernel start/end declared and stored as TEXT",
         b_sqlite_text_times, "either", sources=(MOCK,)),
    Case("sqlite-int64-extremes", "input-at-fault", "INT64 extremes as NVTX and runtime start/end",
         b_sqlite_int64_extremes, "analyzed", sources=(FUSER,),
         also=("ingest",), checks=(check_notes("api_calls"),)),
    Case("sqlite-virtual-table", "input-at-fault", "the runtime table replaced by an FTS5 virtual table",
         b_sqlite_virtual_table, "either", sources=(MOCK,)),
    Case("sqlite-enum-text-ids", "input-at-fault", "ENUM tables whose ids are text",
         b_sqlite_enum_ids("text"), "either", sources=(MOCK,)),
    Case("sqlite-enum-null-ids", "input-at-fault", "ENUM tables with NULL ids", b_sqlite_enum_ids("null"),
         "either", sources=(MOCK,)),
    Case("sqlite-stringids-text-ids", "input-at-fault", "StringIds ids declared and stored as TEXT",
         b_sqlite_stringids_text_ids, "either", sources=(MOCK,)),
    Case("sqlite-gpu-facts-text", "input-at-fault", "GPU facts that are text, a blob, 1e400 and negative",
         b_sqlite_gpu_facts_text, "either", sources=(MOCK,)),
    # seeds 10 (SQLite's error text not UTF-8), 14 (a name not UTF-8 reaching DuckDB) and 37 (the reader's metric
    # lookup fails) crashed the ingest before; the others are a sample
    *(Case(f"sqlite-byte-flips-{n}", "input-at-fault", f"8 random bytes of a real export overwritten (seed {n})",
           b_sqlite_byte_flips(n), "either", sources=(MOCK,)) for n in (0, 1, 2, 3, 4, 5, 10)),
    *(Case(f"ncu-rep-byte-flips-{n}", "input-at-fault", f"3 bytes of a real .ncu-rep overwritten (seed {n})",
           b_ncu_byte_flips(n), "either", sources=(NCU_REP,)) for n in (0, 1, 2, 3, 4, 14, 37)),
    Case("capture-replaced-during-run", "input-at-fault", "the capture swapped with an .ncu-rep every 10 ms",
         b_capture_replaced, "either", sources=(SANDBOX, NCU_REP)),
    Case("path-non-utf8-name", "input-at-fault", "a real export whose file name holds bytes that are not UTF-8",
         b_non_utf8_name, "analyzed", sources=(MOCK,), also=("info",)),
    Case("interrupt-sigint", "input-at-fault", "Ctrl-C (SIGINT) while a rule query runs", b_interrupt(2),
         "interrupted", sources=(MOCK,), store_may_remain=True, timeout_s=60),
    Case("report-disk-full", "input-at-fault", "-o /dev/full: the report's disk is full", b_output_disk_full,
         "rejected", sources=(MOCK,), store_may_remain=True),
    Case("store-disk-full", "input-at-fault", "--store on a file system that fills up during the ingest",
         b_store_disk_full, "rejected", sources=(FUSER,)),
    # round two -- lifecycle
    Case("interrupt-sigterm", "lifecycle", "SIGTERM while a rule query runs: temporary files removed",
         b_interrupt(15), "interrupted", sources=(MOCK,), store_may_remain=True, timeout_s=60),
    Case("lock-held-by-stopped-process", "lifecycle", "another process holds the store's lock and never lets go",
         b_lock_held, "rejected", sources=(MOCK,), timeout_s=60),
    # round two -- smaller promises
    Case("strings-with-control-chars", "smaller-promises", "OSC/CSI escapes, C1 CSI, a bidi override and CR in names",
         b_controls_in_strings, "analyzed", sources=(MOCK,), formats=("md", "html"), also=("info", "query"),
         checks=(lambda run: check_no_controls(run),)),
    Case("query-copy-to", "smaller-promises", "`query` with COPY ... TO a file", b_query_escape(
        "copy (select * from kernels) to '{target}'"), "analyzed", sources=(MOCK,)),
    Case("query-install-extension", "smaller-promises", "`query` with INSTALL httpfs (HOME in the case's folder)",
         b_query_escape("install httpfs"), "analyzed", sources=(MOCK,)),
    Case("query-reenable-access", "smaller-promises", "`query` that turns external access back on, then reads",
         b_query_escape("set enable_external_access = true"), "analyzed", sources=(MOCK,)),
    Case("rules-template-globals", "smaller-promises", "a message template reaching module globals and the "
         "environment", b_rules_template("{top.__init__.__globals__}", secret="s3cr3t-token-4711"), "analyzed",
         sources=(MOCK,), store_may_remain=True, checks=(check_probe_not_findings,)),
    Case("rules-template-huge-width", "smaller-promises", "a message template asking for a 1e9-character width",
         b_rules_template("{rows:>1000000000}"), "analyzed", sources=(MOCK,), store_may_remain=True,
         checks=(check_probe_not_findings, check_report_bounded)),
    Case("rules-judge-not-imported", "smaller-promises", "judge.py of an unselected rule, and `rules list`",
         b_rules_judge_not_imported, "analyzed", sources=(MOCK,), store_may_remain=True),
    Case("config-time-limit-inf", "smaller-promises", "rule_time_limit_s = inf", b_config(
        "rule_time_limit_s = inf\n", ("rule_time_limit_s",)), "rejected", sources=(MOCK,), store_may_remain=True),
    Case("config-time-limit-nan", "smaller-promises", "rule_time_limit_s = nan", b_config(
        "rule_time_limit_s = nan\n", ("rule_time_limit_s",)), "rejected", sources=(MOCK,), store_may_remain=True),
    Case("stdout-closed", "smaller-promises", "analyze with its stdout closed and no -o", b_stdout_closed,
         "rejected", sources=(MOCK,), store_may_remain=True),
    Case("path-symlink-loop", "smaller-promises", "the capture is a loop of two symlinks", b_path_symlink_loop,
         "rejected"),
    Case("config-is-directory", "smaller-promises", "--config names a directory", b_config_is_directory,
         "rejected", sources=(MOCK,), store_may_remain=True),
    Case("csv-utf16", "smaller-promises", "a real details CSV saved again as UTF-16", b_csv_utf16, "analyzed",
         sources=(CSV_DETAILS,)),
    Case("kernels-without-device-id", "smaller-promises", "kernel table without its deviceId column",
         b_kernels_without_device, "analyzed", sources=(MOCK,), checks=(check_gpu_rules_skipped,)),
    Case("output-long-name", "lifecycle", "a 250-character -o file name", b_output_long_name, "analyzed",
         sources=(MOCK,)),
    Case("store-long-name", "lifecycle", "a 240-character --store file name", b_store_long_name, "analyzed",
         sources=(MOCK,)),
)


# --------------------------------------------------------------------------------------------------- the runner


def _env(workdir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["NSIGHT_ADVISOR_CACHE"] = str(workdir / "cache")
    env["XDG_CACHE_HOME"] = str(workdir / "xdg-cache")
    env["TMPDIR"] = str(workdir / "tmp")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.pop("NO_COLOR", None)
    return env


def _cli(args: list[str], workdir: Path, *, timeout_s: int, env: dict[str, str] | None = None,
         interrupt: tuple[int, float] | None = None, close_stdout: bool = False,
         address_space_bytes: int | None = None) -> Invocation:
    """Run ``python -m nsight_advisor ARGS`` in ``workdir/cwd`` with the cache and TMPDIR inside ``workdir``;
    ``interrupt``: (signal, seconds) sent to the process after that long; ``address_space_bytes``: RLIMIT_AS."""
    for sub in ("cache", "xdg-cache", "tmp", "cwd"):
        (workdir / sub).mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "nsight_advisor", *args]
    if interrupt is not None:  # a background test run may ignore SIGINT, and a child inherits that: undo it
        argv[1:3] = ["-c", "import runpy, signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
                           "runpy.run_module('nsight_advisor', run_name='__main__')"]
    if close_stdout:  # as `nsight-advisor analyze X >&-` does: fd 1 closed before Python starts
        argv[1:3] = ["-c", "import os, subprocess, sys; sys.exit(subprocess.call([sys.executable, '-m', "
                           "'nsight_advisor', *sys.argv[1:]], stdout=subprocess.DEVNULL, "
                           "preexec_fn=lambda: os.close(1)))"]
    full_env = _env(workdir)
    full_env.update({k: v.replace("{workdir}", str(workdir)) for k, v in (env or {}).items()})
    if address_space_bytes is not None:  # glibc reserves 64 MiB of address space per thread's arena: not memory used
        full_env["MALLOC_ARENA_MAX"] = "2"
    started = time.monotonic()
    proc = subprocess.Popen(argv, cwd=workdir / "cwd", env=full_env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                            preexec_fn=_limit_address_space(address_space_bytes))
    if interrupt is not None:
        signum, delay = interrupt
        time.sleep(delay)
        if proc.poll() is None:
            proc.send_signal(signum)
    try:
        out, err = proc.communicate(timeout=timeout_s)
        rc = proc.returncode
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        rc = None
    inv = Invocation(argv=argv, rc=rc, stdout=out.decode("utf-8", "replace"), stderr=err.decode("utf-8", "replace"),
                     seconds=time.monotonic() - started)
    if rc == 3:
        inv.crash_detail = _crash_detail(inv.stderr)
    return inv


def _limit_address_space(limit: int | None):
    """A preexec function that caps the child's address space at ``limit`` bytes (None: no cap)."""
    if limit is None:
        return None

    def cap() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    return cap


def _crash_detail(stderr: str) -> str:
    """The last frames of the traceback the CLI wrote for an internal error."""
    m = re.search(r"details in (\S+\.txt)", stderr)
    if not m or not Path(m.group(1)).exists():
        return ""
    lines = Path(m.group(1)).read_text(encoding="utf-8", errors="replace").strip().splitlines()
    frames = [ln.strip() for ln in lines if ln.strip().startswith("File ")]
    where = frames[-1] if frames else ""
    return f"{lines[-1] if lines else ''} at {where}".strip()


def _digest(path: Path) -> dict[str, str]:
    """sha256 of a file, or of every file under a folder (keyed by relative path)."""
    if not path.exists() and not path.is_symlink():
        return {}
    if path.is_dir():
        return {str(p.relative_to(path)): _sha256(p) for p in sorted(path.rglob("*")) if p.is_file()}
    if not path.is_file():
        return {"": "not a regular file"}
    return {"": _sha256(path)}


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _listing(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")} if folder.exists() else set()


def _leftovers(folder: Path) -> list[str]:
    """Temporary or half-written files in ``folder``."""
    bad = []
    for p in folder.rglob("*") if folder.exists() else ():
        name = p.name
        if name.startswith(".") or name.endswith((".tmp", ".wal", ".old", ".partial", "-journal", "-shm")):
            bad.append(name)
    return sorted(bad)


def _output_path(setup: Setup, out_dir: Path, fmt: str) -> Path:
    if setup.output_name == "<dir>":
        target = out_dir / "a_folder"
        target.mkdir(exist_ok=True)
        return target
    if setup.output_name == "<file-parent>":
        parent = out_dir / "plain_file.txt"
        parent.write_text("a file, not a folder\n")
        return parent / f"report.{fmt}"
    return out_dir / f"{setup.output_name}.{fmt}"


def _classify(inv: Invocation) -> str:
    if inv.rc is None:
        return "timed out"
    if inv.rc in (130, 143):
        return "interrupted"
    if inv.rc == 2:
        return "rejected"
    if inv.rc in (0, 1):
        return "analyzed"
    if inv.rc == 3:
        return "crashed"
    return f"exit {inv.rc}"


def _check_error_line(inv: Invocation, setup: Setup, label: str) -> list[str]:
    problems = []
    # a run that waited for a lock said so first: the rejection is the line after that notice
    text = "\n".join(ln for ln in inv.stderr.strip().splitlines() if not ln.startswith("nsight-advisor: waiting for"))
    lines = text.splitlines()
    if "Traceback" in inv.stderr or "Traceback" in inv.stdout:
        problems.append(f"{label}: traceback printed")
    if len(lines) != 1:
        problems.append(f"{label}: stderr has {len(lines)} lines, expected exactly one")
    if "\x1b" in inv.stderr:
        problems.append(f"{label}: a raw terminal escape reached stderr")
    line = text.replace("\n", "\\n")
    if setup.names and not any(n in line or repr(n)[1:-1] in line for n in setup.names):
        problems.append(f"{label}: the error does not name the file ({setup.names[0]!r})")
    if setup.error_words and not any(w.lower() in line.lower() for w in setup.error_words):
        problems.append(f"{label}: the error does not say the problem (expected one of {setup.error_words})")
    return problems


def run_case(case: Case, workdir: Path) -> Run:
    """Build ``case`` under ``workdir`` and run it through the CLI; ``Run.problems`` lists every broken promise."""
    run = Run(case=case, workdir=workdir)
    inputs = workdir / "input"
    out_dir = workdir / "out"
    for sub in (inputs, out_dir):
        sub.mkdir(parents=True, exist_ok=True)
    setup = case.build(inputs)  # may raise Unavailable
    run.setup = setup
    (workdir / "cwd").mkdir(exist_ok=True)
    for name, text in setup.cwd_files.items():
        (workdir / "cwd" / name).write_text(text, encoding="utf-8")
    before = {str(p): _digest(p) for p in setup.watched}
    listing_before = _listing(inputs)

    for n, fmt in enumerate(case.formats):
        output = Path(setup.output) if setup.output is not None else _output_path(setup, out_dir, fmt)
        if setup.existing_output is not None:
            output.write_bytes(setup.existing_output)
        out_before = _listing(out_dir)
        # the first format ingests afresh; the others may reuse the cached store (the cache is checked too)
        cache_flag = ["--no-cache"] if n == 0 and not setup.cached_first else []
        out_flag = [] if setup.close_stdout else ["-o", str(output)]
        inv = _cli(["analyze", *setup.args, "--format", fmt, *out_flag, *cache_flag], workdir,
                   timeout_s=case.timeout_s, env=setup.env, interrupt=setup.interrupt,
                   close_stdout=setup.close_stdout, address_space_bytes=setup.address_space_bytes)
        run.calls.append(inv)
        run.outputs[fmt] = output
        outcome = _classify(inv)
        label = f"analyze --format {fmt}"
        if n == 0:
            run.outcome = outcome
        elif outcome != run.outcome:
            run.problems.append(f"{label}: {outcome}, but --format {case.formats[0]} was {run.outcome}")
        run.problems += _check_invocation(case, setup, inv, outcome, label)
        if outcome == "rejected":
            if setup.existing_output is not None:
                if not output.exists() or output.read_bytes() != setup.existing_output:
                    run.problems.append(f"{label}: a failed run changed the existing report")
            elif output.is_file() and setup.output is None:
                run.problems.append(f"{label}: a failed run left a report at {output.name}")
            new = _listing(out_dir) - out_before - {output.name}
            if new and setup.output_name not in ("<dir>", "<file-parent>"):
                run.problems.append(f"{label}: a failed run left {sorted(new)} in the output folder")
        elif outcome == "analyzed" and setup.output == "-":
            run.problems += _check_report_text(inv.stdout, fmt, label)
            if (workdir / "cwd" / "-").exists():
                run.problems.append(f"{label}: -o - wrote a file named '-' instead of stdout")
        elif outcome == "analyzed" and setup.output is None:
            run.problems += _check_report(output, fmt, label)
        if outcome in ("rejected", "interrupted") and not case.store_may_remain and run.stores:
            run.problems.append(f"{label}: a failed ingest left a store in the cache folder")
        run.problems += [f"{label}: left {name} in the output folder" for name in _leftovers(out_dir)]
        run.problems += [f"{label}: left {name} in the cache folder" for name in _leftovers(workdir / "cache")]

    for argv, expected in setup.extra_calls:
        closed = argv[:1] == ["--closed-stdout"]  # the command starts with its stdout closed
        extra = _cli(argv[1:] if closed else argv, workdir, timeout_s=case.timeout_s, env=setup.env,
                     address_space_bytes=setup.address_space_bytes, close_stdout=closed)
        run.calls.append(extra)
        label = " ".join(argv[:2])
        got = _classify(extra)
        run.problems += _check_invocation(case, setup, extra, got, label)
        if got != expected:
            run.problems.append(f"{label}: {got}, expected {expected}: {extra.stderr.strip()[-200:]}")
    if setup.after is not None:
        run.problems += setup.after(run)
    run.problems += _check_temp_folders(run)
    first_capture = setup.args[0] if setup.args else ""
    for command in case.also:
        if command == "query":
            inv = _cli(["query", first_capture, "select name, short_name from kernels order by name limit 20"],
                       workdir, timeout_s=case.timeout_s, env=setup.env)
        elif command == "ingest":
            store = out_dir / "ingested.duckdb"
            inv = _cli(["ingest", first_capture, "--store", str(store)], workdir, timeout_s=case.timeout_s,
                       env=setup.env)
        else:
            inv = _cli([command, first_capture], workdir, timeout_s=case.timeout_s, env=setup.env)
        run.calls.append(inv)
        outcome = _classify(inv)
        run.problems += _check_invocation(case, setup, inv, outcome, command)
        if outcome != run.outcome and outcome != "analyzed":
            run.problems.append(f"{command}: {outcome}, but analyze was {run.outcome}")
        if command == "ingest" and outcome == "rejected" and (out_dir / "ingested.duckdb").exists():
            run.problems.append("ingest: a failed ingest left the store behind")
        run.problems += [f"{command}: left {name} in the output folder" for name in _leftovers(out_dir)]

    after = {str(p): _digest(p) for p in setup.watched}
    for path, digest in before.items():
        if after.get(path) != digest:
            run.problems.append(f"input changed: {Path(path).name} (sha256 differs)")
    new_files = _listing(inputs) - listing_before
    if new_files:
        run.problems.append(f"new files appeared beside the input: {sorted(new_files)[:5]}")
    for path in setup.forbidden:
        if path.exists():
            run.problems.append(f"a rule wrote {path.name}: SQL from a rule reached the file system")
    for secret in (s for s in setup.secrets if s):
        for fmt, path in run.outputs.items():
            if path.is_file() and secret in path.read_text(encoding="utf-8", errors="replace"):
                run.problems.append(f"{fmt} report contains text read from a system file ({secret[:20]!r})")
    run.problems += check_no_negative_notes(run)
    if case.expect == "interrupted" and run.outcome != "interrupted":
        run.problems.append(f"expected exit 130/143 after the signal, got {run.outcome}")
    if case.expect == "rejected" and run.outcome == "analyzed":
        run.problems.append("accepted an input that must be rejected with exit 2")
    if case.expect == "analyzed" and run.outcome == "rejected":
        run.problems.append(f"rejected an input that must be analyzed: {run.main.stderr.strip()[:300]}")
    for check in case.checks:
        try:
            run.problems += check(run)
        except Exception as exc:  # a check that cannot run is a finding about the output, not a test bug
            run.problems.append(f"check {getattr(check, '__name__', check)!s} failed: {type(exc).__name__}: {exc}")
    run.message = _message(run)
    return run


def _check_temp_folders(run: Run) -> list[str]:
    """Every temporary file lives in the run's own folder and goes with it: TMPDIR stays empty, and no run folder
    (``.nsa-run-*``) or other hidden file is left anywhere in the case's folder."""
    problems = []
    tmp = run.workdir / "tmp"
    left = sorted(str(p.relative_to(tmp)) for p in tmp.rglob("*")) if tmp.exists() else []
    left = [name for name in left if not name.startswith("nsight-advisor-crash-")]  # exit 3 is reported itself
    if left:
        problems.append(f"left {left[:3]} in TMPDIR")
    runs = sorted(p.name for p in run.workdir.rglob(".nsa-*"))
    if runs:
        problems.append(f"left {runs[:3]} behind")
    return problems


def check_no_negative_notes(run: Run) -> list[str]:
    """When analyzed: no ingest note counts a negative number of rows."""
    if run.outcome != "analyzed":
        return []
    rows = run.store_rows("select data, rows from ingest_notes where rows < 0") or []
    return [f"ingest note on {data} counts {rows} rows" for data, rows in rows]


def _check_invocation(case: Case, setup: Setup, inv: Invocation, outcome: str, label: str) -> list[str]:
    if outcome == "interrupted":
        problems = []
        if inv.stderr.strip() != "nsight-advisor: interrupted":
            problems.append(f"{label}: interrupted, but stderr is {inv.stderr.strip()[-200:]!r}")
        if setup.interrupt is None:
            problems.append(f"{label}: exit {inv.rc} without a signal")
        return problems
    if outcome == "timed out":
        return [f"{label}: still running after {case.timeout_s} s (hang)"]
    if outcome == "crashed":
        return [f"{label}: internal error (exit 3): {inv.stderr.strip()[:300]} [{inv.crash_detail}]"]
    if outcome.startswith("exit"):
        return [f"{label}: unexpected {outcome}: {inv.stderr.strip()[-300:]}"]
    if outcome == "rejected":
        return _check_error_line(inv, setup, label)
    problems = []
    if "Traceback" in inv.stderr:
        problems.append(f"{label}: traceback printed on success")
    return problems


def _check_report_text(text: str, fmt: str, label: str) -> list[str]:
    if not text.strip():
        return [f"{label}: exit 0 but nothing on stdout"]
    if fmt in ("json", "sarif"):
        try:
            json.loads(text)
        except ValueError as exc:
            return [f"{label}: stdout is not valid JSON ({exc})"]
    return []


def _check_report(output: Path, fmt: str, label: str) -> list[str]:
    if not output.is_file() or output.stat().st_size == 0:
        return [f"{label}: exit 0 but no report at {output.name}"]
    if fmt in ("json", "sarif"):
        try:
            json.loads(output.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:
            return [f"{label}: the report is not valid JSON ({exc})"]
    return []


def _message(run: Run) -> str:
    inv = run.main
    if run.outcome == "rejected":
        text = inv.stderr.strip().replace("\n", "\\n")
    elif run.outcome == "analyzed":
        text = _summary(run)
    elif run.outcome == "crashed":
        text = f"{inv.stderr.strip()} [{inv.crash_detail}]"
    elif run.outcome == "timed out":
        text = f"no answer after {run.case.timeout_s} s"
    else:
        text = inv.stderr.strip()[-300:]
    text = text.replace(str(run.workdir / "input") + "/", "").replace(str(run.workdir) + "/", "")
    text = re.sub(r"/\S*/nsight-advisor-crash-\S+\.txt", "<crash file>", text)
    # what changes from run to run (a pid, a cache key) would make the generated doc churn
    text = re.sub(r"process \d+", "process PID", text)
    text = re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:PORT", text)
    # which of Ray's errors reaches the driver first when a cluster stops depends on the timing
    text = re.sub(r"(stopped or failed while ingesting it) \(.*\)(; see the cluster's logs)", r"\1 (RAY'S ERROR)\2",
                  text)
    return re.sub(r"\b[0-9a-f]{16}-[0-9a-f]{16}\b", "KEY", text)


def _summary(run: Run) -> str:
    report = run.report() or {}
    findings = report.get("findings", [])
    statuses: dict[str, int] = {}
    for outcome in report.get("outcomes", []):
        statuses[outcome.get("status", "?")] = statuses.get(outcome.get("status", "?"), 0) + 1
    parts = [f"report: {len(findings)} finding(s)"]
    if statuses:
        parts.append("rules " + ", ".join(f"{v} {k}" for k, v in sorted(statuses.items())))
    errored = [o for o in report.get("outcomes", []) if o.get("status") == "errored" and o.get("rule_id") == "NA990"]
    if errored:
        parts.append(f"NA990 errored: {str(errored[0].get('reason', ''))[:160]}")
    notes = run.store_rows("select data, rows, note from ingest_notes order by data") or []
    for data, rows, note in notes[:3]:
        parts.append(f"note on {data} ({rows} rows): {note}")
    return "; ".join(parts)


# --------------------------------------------------------------------------------------------------- the doc


def _cell(text: str, limit: int = 260) -> str:
    text = text if len(text) <= limit else text[: limit - 1] + "…"
    text = text.replace("\\", "\\\\").replace("|", "\\|").replace("`", "\\`").replace("\n", " ")
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in text)


#: The classes of cases, in the order the doc lists them (``Case.group``).
GROUPS = {
    "path": "paths: missing, folders, pipes, hostile names",
    "empty": "empty files",
    "sqlite": "damaged or edited Nsight Systems exports",
    "nsys-rep": "raw Nsight Systems reports",
    "ncu-rep": "damaged Nsight Compute reports",
    "csv": "damaged or foreign ncu CSV files",
    "store": "damaged or foreign stores",
    "output": "outputs and the cache folder",
    "rules": "hostile or broken rule folders",
    "config": "bad configuration",
    "data-loss": "data loss and wrong answers: outputs resolving to an input, FIFOs and devices, damaged cache "
                 "entries, duplicate string ids, WAL exports, rule-folder cycles",
    "input-at-fault": "the input at fault, not the program (once exit 3): renamed columns, TEXT times, INT64 "
                      "extremes, virtual tables, bad ENUM and string ids, non-numeric GPU facts, byte flips, a "
                      "capture replaced mid-run, non-UTF-8 names, Ctrl-C, a full disk",
    "lifecycle": "lifecycle: signals, locks, temporary names",
    "smaller-promises": "smaller promises: control characters, `query` sandbox, message templates, judge.py, "
                        "time limits, closed stdout, missing deviceId, messages",
    "cache-links": "round three: links and planted files in the cache folder",
    "inputs-as-output": "round three: -o naming a configuration, rule or waiver file the run reads",
    "json-limits": "round three: Kineto JSON past the reader's limits (depth, digits, exponents, long members, "
                   "space between events), the memory cases under a 2 GB address-space limit",
    "silently-wrong": "round three: duplicate ranks, captures ingested twice, StringIds as a view, option values "
                      "nan/inf/negative",
    "special-files": "round three: FIFOs and devices where a rule or case file belongs, non-UTF-8 names",
    "terminal": "round three: terminal escapes in compare and rules output, closed stdout, compare's helper",
    "ray-address": "round three: --ray-address at a service that is not Ray, and a Ray cluster stopped mid-run",
}


def _class_table(runs: list[Run]) -> list[str]:
    lines = ["| class | cases | pass | outcomes |", "|---|---|---|---|"]
    for group, title in GROUPS.items():
        mine = [r for r in runs if r.case.group == group]
        if not mine:
            continue
        outcomes: dict[str, int] = {}
        for r in mine:
            outcomes[r.outcome] = outcomes.get(r.outcome, 0) + 1
        spread = ", ".join(f"{n} {o}" for o, n in sorted(outcomes.items()))
        lines.append(f"| {_cell(title, 300)} | {len(mine)} | {sum(1 for r in mine if not r.problems)} | {spread} |")
    return lines


def render_doc(runs: list[Run], skipped: dict[str, str]) -> str:
    """docs/robustness.md: the corpus table (input, expected, outcome, message, verdict)."""
    ok = sum(1 for r in runs if not r.problems)
    lines = [
        "# Robustness corpus",
        "",
        "Generated by `python -m tools.gen_docs --robustness` (it runs every case); do not edit by hand. "
        "`tests/test_robustness.py` fails when this page is stale.",
        "",
        "Every input below is built in a temporary folder by `tests/corpus.py` (from the real traces in "
        "`../shared/traces` or from scratch; nothing binary is committed) and run as `python -m nsight_advisor "
        "analyze INPUT --format json -o OUT --no-cache` with the cache in a temporary folder (some cases also run "
        "`info`, `ingest`, or the html/md/sarif formats). A case passes when the run ends in one of two ways: "
        "**rejected** (exit 2, one line on stderr naming the file and the problem, no traceback, no report or "
        "store left behind) or **analyzed** (exit 0 with a report; rows dropped or repaired are listed in "
        "`ingest_notes` and the report), and in every case the input is byte-identical afterwards, no temporary "
        "file is left, and nothing from the input runs (hostile names are escaped in HTML; rule SQL cannot write, "
        "attach, copy or read files). A case expected to be **interrupted** gets SIGINT or SIGTERM mid-run and must "
        "exit 130 or 143 with the one line `nsight-advisor: interrupted`. Every case also holds to: no exit 3, "
        "TMPDIR empty afterwards and no run folder (`.nsa-run-*`) or other temporary file left anywhere in the "
        "case's folder (every temporary file lives in the run's own folder and goes with it), and no ingest note "
        "counting a negative number of rows.",
        "",
        f"{len(runs)} cases run, {ok} pass, {len(runs) - ok} fail"
        + (f", {len(skipped)} not run here" if skipped else "") + ".",
        "",
        *limits_section(),
        "## Classes",
        "",
        *_class_table(runs),
        "",
        "## Cases",
        "",
        "| # | case | input | expected | outcome | message | verdict |",
        "|---|---|---|---|---|---|---|",
    ]
    for n, run in enumerate(runs, 1):
        verdict = "pass" if not run.problems else "FAIL: " + "; ".join(run.problems)
        lines.append(f"| {n} | `{run.case.id}` | {_cell(run.case.what, 120)} | {run.case.expect} | "
                     f"{run.outcome} | {_cell(run.message)} | {_cell(verdict, 400)} |")
    for case_id, reason in skipped.items():
        lines.append(f"| - | `{case_id}` | not run | | | {_cell(reason)} | |")
    return "\n".join(lines) + "\n"


def ordered(runs: list[Run]) -> list[Run]:
    """``runs`` in the corpus's order."""
    order = {c.id: i for i, c in enumerate(CASES)}
    return sorted(runs, key=lambda r: order.get(r.case.id, 0))


def write_doc(runs: list[Run], skipped: dict[str, str] | None = None, path: Path = DOC) -> Path:
    """Write the corpus table atomically."""
    runs = ordered(runs)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(render_doc(runs, skipped or {}), encoding="utf-8")
    os.replace(tmp, path)
    return path


def main(argv: list[str]) -> int:
    """``python tests/corpus.py [--write-doc] [CASE_ID...]``: run cases, print a line each, optionally write the doc."""
    write = "--write-doc" in argv
    wanted = [a for a in argv if not a.startswith("--")]
    cases = [c for c in CASES if not wanted or c.id in wanted]
    runs, skipped = [], {}
    with tempfile.TemporaryDirectory(prefix="nsa-robustness-") as tmp:
        for case in cases:
            workdir = Path(tmp) / case.id
            try:
                run = run_case(case, workdir)
            except Unavailable as exc:
                skipped[case.id] = str(exc)
                print(f"SKIP {case.id}: {exc}", flush=True)
                continue
            finally:
                _make_writable(workdir)
            runs.append(run)
            status = "pass" if not run.problems else "FAIL " + " | ".join(run.problems)
            print(f"{case.id:32s} {run.outcome:10s} {status}\n    {run.message[:300]}", flush=True)
    if write and not wanted:
        print(f"wrote {write_doc(runs, skipped)}")
    return 0 if all(not r.problems for r in runs) else 1


def _make_writable(folder: Path) -> None:
    """Undo the read-only folders some cases make, so temporary folders can be removed."""
    for p in [folder, *folder.rglob("*")] if folder.exists() else ():
        if p.is_dir() and not p.is_symlink():
            p.chmod(0o755)


if __name__ == "__main__":
    import corpus as _module  # one copy of this module, the one corpus_round3 imports by name

    sys.exit(_module.main(sys.argv[1:]))

# The round-three cases (tests/corpus_round3.py) build on the helpers above.
from corpus_round3 import CASES as _ROUND_THREE, limits_section  # noqa: E402

CASES = CASES + _ROUND_THREE
