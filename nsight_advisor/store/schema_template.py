"""An empty store with the schema and the analysis views, made once per schema and copied for each new store.

Creating the schema binds some eighty view definitions: 0.4 to 0.6 s of every new store, a quarter of a cold
``analyze`` of a small capture. A copy of a store that already holds them takes milliseconds. The template lives
in the cache folder's support folder as ``schema-<fingerprint>.duckdb``; the fingerprint covers DuckDB's version and the text of
every table and view definition, so a changed schema makes a new template and the old one is removed.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import shutil
from pathlib import Path

#: The template's file name: ``schema-`` + fingerprint + this suffix.
PREFIX, SUFFIX = "schema-", ".duckdb"


def fingerprint() -> str:
    """A digest of DuckDB's version and every table and view definition."""
    import duckdb

    from nsight_advisor.common.version import SCHEMA_VERSION
    from nsight_advisor.schema import TABLES
    from nsight_advisor.schema.views import view_sql_files

    digest = hashlib.sha256(f"{duckdb.__version__}\0{SCHEMA_VERSION}".encode())
    for table in TABLES:
        digest.update(repr((table.name, table.stored, table.doc,
                            [(c.name, c.type, c.doc) for c in table.columns])).encode())
    for name, sql in view_sql_files():
        digest.update(f"\0{name}\0{sql}".encode())
    return digest.hexdigest()[:16]


def copy_template(dst: Path) -> bool:
    """Copy the template store to ``dst`` (made first when absent); False when there is none to copy (a cache
    folder that cannot be written), and the caller creates the schema itself."""
    from nsight_advisor.common.run_folder import support_dir

    folder = support_dir()
    template = folder / f"{PREFIX}{fingerprint()}{SUFFIX}"
    if not template.is_file():
        try:
            _make(template)
        except OSError:
            return False
    try:
        shutil.copyfile(template, dst)
    except OSError as exc:
        with contextlib.suppress(OSError):
            Path(dst).unlink()  # a partial copy is no store
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            # the disk is full: the command says so, naming where the store was being written (store-disk-full)
            raise OSError(exc.errno, exc.strerror, str(dst)) from None
        return False
    return True


def _make(template: Path) -> None:
    """Build the template in a temporary file beside it and rename it into place; remove older templates."""
    import duckdb

    from nsight_advisor.schema import create_schema

    template.parent.mkdir(parents=True, exist_ok=True)
    tmp = template.with_name(f".{template.name}.{os.getpid()}.tmp")
    try:
        con = duckdb.connect(str(tmp), config={"autoinstall_known_extensions": "false",
                                               "autoload_known_extensions": "false"})
        try:
            create_schema(con)
            con.execute("CHECKPOINT")
        finally:
            con.close()
        os.replace(tmp, template)
    except duckdb.Error as exc:
        raise OSError(str(exc)) from None
    finally:
        for leftover in (tmp, Path(str(tmp) + ".wal")):
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()
    for old in template.parent.glob(f"{PREFIX}*{SUFFIX}"):
        if old != template:
            with contextlib.suppress(OSError):
                old.unlink()
