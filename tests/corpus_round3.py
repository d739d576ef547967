"""Round three of the robustness corpus (issue 26): the cases that broke a promise, one builder each.

Imported at the end of ``tests/corpus.py`` (its helpers are defined by then) and appended to its ``CASES``.
Big inputs are written on the fly into the case's folder; the memory cases run under a 2 GB address-space
limit (``Setup.address_space_bytes``).
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

from corpus import MOCK, TRACES, Case, Run, Setup, Unavailable, _cli, _copy, _rule_folder

#: The address-space limit of the memory cases: a run that held a long member or a deep nest whole would need more.
TWO_GB = 2 << 30


# --------------------------------------------------------------------------------------------------- the cache


def _first_analyze(capture: Path, workdir: Path) -> Path:
    """Analyze ``capture`` once (the cache folder gets its store); returns that store's path."""
    first = _cli(["analyze", str(capture), "--format", "json", "-o", str(workdir / "first.json")], workdir,
                 timeout_s=120)
    (workdir / "first.json").unlink(missing_ok=True)
    stores = sorted((workdir / "cache").glob("*.duckdb"))
    if first.rc != 0 or len(stores) != 1:
        raise Unavailable(f"could not build the cache entry: {first.stderr.strip()[:200]}")
    return stores[0]


def b_cache_link_to(target: str) -> callable:
    """The cached store replaced by a link to the capture itself, or to a notes file of the user's; the lock beside
    it planted as a link to the notes too (a lock file is truncated when taken)."""
    def build(folder: Path) -> Setup:
        capture = _copy(MOCK, folder)
        notes = folder / "notes.txt"
        notes.write_text("the user's notes: must survive\n")
        store = _first_analyze(capture, folder.parent)
        store.unlink()
        store.symlink_to(capture if target == "capture" else notes)
        store.with_name(store.name + ".lock").symlink_to(notes)
        setup = Setup(args=[str(capture)], names=[capture.name], watched=[capture, notes])
        setup.after = _cache_has_no_links
        return setup

    return build


def _cache_has_no_links(run: Run) -> list[str]:
    cache = run.workdir / "cache"
    return [f"the cache still holds a link: {p.name}" for p in cache.glob("*.duckdb") if p.is_symlink()]


def b_cache_results_link(folder: Path) -> Setup:
    """The cache's results folder replaced by a link to a folder of the user's: nothing is written there."""
    capture = _copy(MOCK, folder)
    elsewhere = folder / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("kept\n")
    _first_analyze(capture, folder.parent)
    results = folder.parent / "cache" / "results"
    for p in results.iterdir():
        p.unlink()
    results.rmdir()
    results.symlink_to(elsewhere, target_is_directory=True)
    setup = Setup(args=[str(capture)], names=[capture.name], watched=[capture, elsewhere])
    setup.cached_first = True
    return setup


def b_cache_secret_planted(folder: Path) -> Setup:
    """The user's cache secret planted as a link to a notes file: refused with its name, the notes untouched."""
    capture = _copy(MOCK, folder)
    notes = folder / "notes.txt"
    notes.write_text("0123456789abcdef0123456789abcdef")  # 32 hex digits: a secret the planter knows
    cache = folder.parent / "cache"
    cache.mkdir(exist_ok=True)
    (cache / f"secret-{os.geteuid()}").symlink_to(notes)
    return Setup(args=[str(capture)], names=[f"secret-{os.geteuid()}"], watched=[capture, notes],
                 error_words=["not this user's private file"])


def b_cache_folder_open_to_others(folder: Path) -> Setup:
    """The cache folder of this user, made before with mode 0777: the run makes it 0700 (names carry the secret)."""
    capture = _copy(MOCK, folder)
    cache = folder.parent / "cache"
    cache.mkdir(exist_ok=True)
    cache.chmod(0o777)
    setup = Setup(args=[str(capture)], names=[capture.name], watched=[capture])

    def private(run: Run) -> list[str]:
        mode = cache.stat().st_mode & 0o7777
        return [] if mode == 0o700 else [f"the cache folder is still mode {mode:o}"]

    setup.after = private
    return setup


def b_cache_folder_of_another_user(via_link: bool) -> callable:
    """NSIGHT_ADVISOR_CACHE names a folder (mode 0777) of another user, or a link of this user's to one: refused,
    nothing written into it."""
    def build(folder: Path) -> Setup:
        if os.geteuid() != 0:
            raise Unavailable("making a folder of another user needs root (chown)")
        capture = _copy(MOCK, folder)
        theirs = folder.parent / "theirs"
        theirs.mkdir(mode=0o777)
        theirs.chmod(0o777)
        os.chown(theirs, 54321, 54321)
        given = theirs
        if via_link:
            given = folder.parent / "my-cache"
            given.symlink_to(theirs, target_is_directory=True)
        setup = Setup(args=[str(capture)], names=[given.name], watched=[capture, theirs],
                      error_words=["a folder of another user"], env={"NSIGHT_ADVISOR_CACHE": str(given)})
        setup.after = lambda run: [f"the run wrote {sorted(p.name for p in theirs.iterdir())[:3]} into the other "
                                   "user's folder"] if any(theirs.iterdir()) else []
        return setup

    return build


CACHE_CASES = (
    Case("cache-store-link-to-capture", "cache-links", "the cached store replaced by a symlink to the capture, its "
         "lock by a symlink to a notes file; analyze --no-cache", b_cache_link_to("capture"), "analyzed",
         sources=(MOCK,)),
    Case("cache-store-link-to-notes", "cache-links", "the cached store a symlink to a notes file of the user's",
         b_cache_link_to("notes"), "analyzed", sources=(MOCK,)),
    Case("cache-results-link", "cache-links", "the cache's results folder a symlink to another folder",
         b_cache_results_link, "analyzed", sources=(MOCK,)),
    Case("cache-secret-planted", "cache-links", "the cache's key secret planted as a symlink (a known secret)",
         b_cache_secret_planted, "rejected", sources=(MOCK,)),
    Case("cache-folder-open-to-others", "cache-links", "the user's own cache folder made before with mode 0777: "
         "analyzed, the folder 0700 afterwards", b_cache_folder_open_to_others, "analyzed", sources=(MOCK,)),
    Case("cache-folder-of-another-user", "cache-links", "NSIGHT_ADVISOR_CACHE names another user's folder (0777)",
         b_cache_folder_of_another_user(False), "rejected", sources=(MOCK,)),
    Case("cache-folder-link-to-another-user", "cache-links", "NSIGHT_ADVISOR_CACHE is the user's link to another "
         "user's folder (0777)", b_cache_folder_of_another_user(True), "rejected", sources=(MOCK,)),
)



# --------------------------------------------------------------------------------------------------- -o and inputs


def b_output_is_config(folder: Path) -> Setup:
    """``analyze --config cfg.toml -o cfg.toml``, and the same with ``compare``: the config is an input."""
    capture = _copy(MOCK, folder)
    config = folder / "cfg.toml"
    config.write_text('[[waive]]\nrule = "NA403"\nreason = "accepted"\n')
    setup = Setup(args=[str(capture), "--config", str(config)], names=[config.name], watched=[capture, config],
                  error_words=["is an input"], output=str(config))
    setup.extra_calls = [(["compare", str(capture), str(capture), "--config", str(config), "-o", str(config)],
                          "rejected")]
    return setup


def b_output_is_rule_file(folder: Path) -> Setup:
    """``-o rules/robustness-probe/query.sql`` with that ``--rules-dir``."""
    capture = _copy(MOCK, folder)
    rules = _rule_folder(folder)
    query = rules / "robustness-probe" / "query.sql"
    return Setup(args=[str(capture), "--rules-dir", str(rules)], names=[query.name], watched=[capture, rules],
                 error_words=["is an input"], output=str(query))


def b_output_is_local_config(folder: Path) -> Setup:
    """``-o nsight-advisor.toml`` in a folder where that file is the configuration the run finds by itself."""
    capture = _copy(MOCK, folder)
    setup = Setup(args=[str(capture)], names=["nsight-advisor.toml"], watched=[capture],
                  error_words=["is an input"], output="nsight-advisor.toml",
                  cwd_files={"nsight-advisor.toml": 'select = []\n'})

    def unchanged(run: Run) -> list[str]:
        text = (run.workdir / "cwd" / "nsight-advisor.toml").read_text()
        return [] if text == "select = []\n" else ["./nsight-advisor.toml was overwritten"]

    setup.after = unchanged
    return setup


OUTPUT_CASES = (
    Case("output-is-config", "inputs-as-output", "-o names the --config file (analyze, then compare)",
         b_output_is_config, "rejected", sources=(MOCK,)),
    Case("output-is-rule-file", "inputs-as-output", "-o names a query.sql under --rules-dir", b_output_is_rule_file,
         "rejected", sources=(MOCK,)),
    Case("output-is-found-config", "inputs-as-output", "-o names ./nsight-advisor.toml, the config found in the "
         "working folder", b_output_is_local_config, "rejected", sources=(MOCK,)),
)



# --------------------------------------------------------------------------------------------------- Kineto JSON


_EVENT = (b'{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1000.5, "dur": 2.25, '
          b'"args": {"device": 0, "stream": 7, "correlation": 1, "grid": [1, 1, 1], "block": [32, 1, 1]}}')


def _gzip_parts(path: Path, parts: list) -> None:
    """Write ``parts`` gzipped: bytes as they are, ``(bytes, n)`` as n copies (streamed: 1 GiB costs ~4 s, no memory)."""
    import zlib

    comp = zlib.compressobj(1, zlib.DEFLATED, 31)
    with open(path, "wb") as fh:
        for part in parts:
            if isinstance(part, tuple):
                chunk, n = part
                for _ in range(n):
                    fh.write(comp.compress(chunk))
            else:
                fh.write(comp.compress(part))
        fh.write(comp.flush())


def b_kineto(name: str, parts: list, *, words: tuple[str, ...] = (), memory: bool = False) -> callable:
    """A Kineto trace (gzipped) built from ``parts``; ``memory``: the run gets a 2 GB address-space limit."""
    def build(folder: Path) -> Setup:
        path = folder / f"{name}.pt.trace.json.gz"
        _gzip_parts(path, parts)
        setup = Setup(args=[str(path)], names=[path.name], watched=[path], error_words=list(words))
        if memory:
            setup.address_space_bytes = TWO_GB
        return setup

    build.address_space_bytes = TWO_GB if memory else None  # seen without building (tests/test_robustness.py)
    return build


def check_two_kernels(run: Run) -> list[str]:
    """Both kernels of the trace were read (the space between them is no reason to drop one)."""
    rows = run.store_rows("select count(*) from kernels")
    return [] if rows == [(2,)] else [f"expected the trace's 2 kernels in the store, found {rows}"]


_MIB = 1 << 20
_DEEP = 200_000

JSON_CASES = (
    Case("kineto-deep-pg-config", "json-limits", "distributedInfo.pg_config nested 200,000 arrays deep (400 KB)",
         b_kineto("deep_pg", [b'{"distributedInfo": {"rank": 0, "pg_config": ', (b"[", _DEEP), (b"]", _DEEP),
                              b'}, "traceEvents": []}'], words=("nested",), memory=True), "rejected", timeout_s=60),
    Case("kineto-deep-device-properties", "json-limits", "deviceProperties 200,000 objects deep",
         b_kineto("deep_props", [b'{"deviceProperties": [', (b'{"a": ', _DEEP), b"0", (b"}", _DEEP),
                                 b'], "traceEvents": []}'], words=("nested",), memory=True), "rejected",
         timeout_s=60),
    Case("kineto-deep-event-args", "json-limits", "an event whose args is nested 200,000 arrays deep (400 KB), after "
         "500 good events", b_kineto("deep_event", [b'{"traceEvents": [', (_EVENT + b",", 500),
                                                    b'{"ph": "X", "name": "deep", "args": {"x": ', (b"[", _DEEP),
                                                    (b"]", _DEEP), b"}}]}"], words=("nested deeper than 64",),
                                                   memory=True), "rejected", timeout_s=60),
    Case("kineto-header-long-integer", "json-limits", "schemaVersion an integer of 5,000 digits",
         b_kineto("long_int", [b'{"schemaVersion": ', b"9" * 5000, b', "traceEvents": []}'], words=("digits",)),
         "rejected", timeout_s=60),
    Case("kineto-event-long-integer", "json-limits", "an event's pid an integer of 5,000 digits, 100 KiB into the "
         "events (the event at fault is named, not the one before)",
         b_kineto("long_int_event", [b'{"traceEvents": [', (_EVENT + b",", 500), b'{"ph": "X", "pid": ',
                                     b"9" * 5000, b"}]}"], words=("digits",)), "rejected", timeout_s=60),
    Case("kineto-header-gib-string", "json-limits", "a 1 GiB string member before traceEvents (4.7 MB gzipped)",
         b_kineto("gib_string", [b'{"schemaVersion": 1, "note": "', (b"a" * _MIB, 1024), b'", "traceEvents": []}'],
                  words=("longer than",), memory=True), "rejected", timeout_s=120),
    Case("kineto-huge-exponents", "json-limits", 'ten events whose "ts" is 1e999990',
         b_kineto("huge_exp", [b'{"traceEvents": [',
                               b",".join(_EVENT.replace(b"1000.5", b"1e999990") for _ in range(10)), b"]}"],
                  words=("1e308",)), "rejected", timeout_s=60),
    Case("kineto-gib-space-between-events", "json-limits", "1 GiB of spaces between two events (valid JSON)",
         b_kineto("gib_space", [b'{"traceEvents": [', _EVENT, b",", (b" " * _MIB, 1024), _EVENT, b"]}"],
                  memory=True), "analyzed", timeout_s=300, checks=(check_two_kernels,)),
    Case("kineto-gib-member-after-events", "json-limits", "a 1 GiB string member after traceEvents",
         b_kineto("gib_after", [b'{"traceEvents": [', _EVENT, b'], "traceName": "', (b"a" * _MIB, 1024), b'"}'],
                  words=("longer than",), memory=True), "rejected", timeout_s=120),
)


# --------------------------------------------------------------------------------------------------- silently wrong

DLRM = "kineto/dlrm_8rank/worker0_step_12.1694128201545.pt.trace.json.gz"  # rank 0 of 8


def b_duplicate_ranks(folder: Path) -> Setup:
    """Three copies of rank 0's trace under other names: three traces that all claim rank 0 of 8."""
    paths = [_copy(DLRM, folder, f"rank{n}.pt.trace.json.gz") for n in range(3)]
    return Setup(args=[str(p) for p in paths], names=[p.name for p in paths], watched=paths,
                 error_words=["claims rank 0 of 8"])


def b_ingested_twice(folder: Path) -> Setup:
    """``ingest a.sqlite --store s.duckdb`` twice: the second is refused, the store left with the capture once."""
    capture = _copy(MOCK, folder)
    store = folder.parent / "out" / "s.duckdb"
    setup = Setup(args=[str(capture)], names=[capture.name], watched=[capture])
    setup.extra_calls = [(["ingest", str(capture), "--store", str(store)], "analyzed"),
                         (["ingest", str(capture), "--store", str(store)], "rejected")]

    def once(run: Run) -> list[str]:
        import duckdb

        con = duckdb.connect(str(store), read_only=True)
        try:
            n = con.execute("select count(*) from captures").fetchone()[0]
        finally:
            con.close()
        store.unlink()
        return [] if n == 1 else [f"the store holds the capture {n} times"]

    setup.after = once
    return setup


def b_store_with_a_capture_twice(folder: Path) -> Setup:
    """A store that holds one capture twice (as ingest built it before it refused that): analyze refuses it."""
    import duckdb

    capture = _copy(MOCK, folder)
    store = folder / "twice.duckdb"
    first = _cli(["ingest", str(capture), "--store", str(store)], folder.parent, timeout_s=120)
    if first.rc != 0:
        raise Unavailable(f"could not ingest: {first.stderr.strip()[:200]}")
    con = duckdb.connect(str(store))
    try:  # the second copy, as the old ingest added it: every table's rows again under capture id 2
        for (table,) in con.execute("select table_name from duckdb_tables() where schema_name = 'main'").fetchall():
            cols = [c for (c,) in con.execute(f"select column_name from duckdb_columns() where table_name = '{table}' "
                                              "and schema_name = 'main' order by column_index").fetchall()]
            if "capture_id" in cols:
                select = ", ".join("2" if c == "capture_id" else f'"{c}"' for c in cols)
                con.execute(f'insert into "{table}" select {select} from "{table}" where capture_id = 1')
        con.execute("checkpoint")
    finally:
        con.close()
    return Setup(args=[str(store)], names=[store.name, capture.name], watched=[capture, store],
                 error_words=["times"])


def b_stringids_view(folder: Path) -> Setup:
    """StringIds replaced by a view over a copy of it: read within limits (was ignored: every name n/a, no note)."""
    import sqlite3

    path = _copy(MOCK, folder, "capture.sqlite")
    con = sqlite3.connect(path)
    try:
        con.execute("create table strings_copy as select * from StringIds")
        con.execute("drop table StringIds")
        con.execute("create view StringIds as select * from strings_copy")
        con.commit()
    finally:
        con.close()
    return Setup(args=[str(path)], names=[path.name], watched=[path])


def check_view_noted(run: Run) -> list[str]:
    """The view was read (every kernel has its name) and a note says StringIds came from a view."""
    rows = run.store_rows("select note from ingest_notes where data = 'StringIds'") or []
    problems = [] if any("view" in r[0] for r in rows) else ["no ingest note says StringIds is a view"]
    named = run.store_rows("select count(*) filter (where name is null), count(*) from kernels")
    if not named or named[0][0] or not named[0][1]:
        problems.append(f"kernel names not read from the StringIds view (unnamed, all: {named})")
    return problems


def b_fail_on_regression(value: str) -> callable:
    """``compare A A --fail-on-regression VALUE``: refused (nan compared false and disabled the gate)."""
    def build(folder: Path) -> Setup:
        capture = _copy(MOCK, folder)
        setup = Setup(args=[str(capture)], names=[capture.name, "--fail-on-regression"], watched=[capture])
        setup.extra_calls = [(["compare", str(capture), str(capture), "--fail-on-regression", value], "rejected")]
        return setup

    return build


def b_config_param_nan(folder: Path) -> Setup:
    """A rule parameter set to nan in the configuration file (TOML has nan): refused, naming the key."""
    capture = _copy(MOCK, folder)
    rules = _rule_folder(folder)
    config = folder / "nsight-advisor.toml"
    config.write_text("[rules.robustness-probe]\nmin_value = nan\n")
    return Setup(args=[str(capture), "--rules-dir", str(rules), "--config", str(config)], names=["min_value"],
                 watched=[capture, rules, config], error_words=["finite"])



def b_nvtx_nested(n: int, *, flat: bool = False) -> callable:
    """A real export with ``n`` NVTX push/pop ranges on one thread, each inside the one before (an unbalanced push in
    a loop), or side by side (``flat``)."""
    import sqlite3

    def build(folder: Path) -> Setup:
        path = _copy("nsys/fuser_h200_matmul.sqlite", folder, "nested.sqlite")
        con = sqlite3.connect(path)
        try:
            tid, = con.execute("select globalTid from NVTX_EVENTS where eventType = 59 limit 1").fetchone()
            start, end = 635_000_000, 1_290_000_000
            rows = ([(start + i, start + i + 1, f"flat{i}", tid) for i in range(n)] if flat else
                    [(start + i, end - i, "nest", tid) for i in range(n)])
            con.executemany("insert into NVTX_EVENTS (start, end, eventType, text, globalTid, domainId) "
                            "values (?, ?, 59, ?, ?, 0)", rows)
            con.commit()
        finally:
            con.close()
        return Setup(args=[str(path)], names=[path.name], watched=[path])

    return build


def b_many_waivers(n: int) -> callable:
    """A configuration with ``n`` waivers (globs of the kind people write: a prefix and a star)."""
    def build(folder: Path) -> Setup:
        capture = _copy(MOCK, folder)
        config = folder / "nsight-advisor.toml"
        with open(config, "w") as fh:
            for i in range(n):
                fh.write(f'[[waive]]\nrule = "NA403"\nsubject = "kernel{i}*"\nreason = "r"\nexpires = 2999-01-01\n')
        return Setup(args=[str(capture), "--config", str(config)], names=[config.name], watched=[capture, config])

    return build

WRONG_CASES = (
    Case("waivers-100000", "silently-wrong", "a configuration with 100,000 waivers (10,000 took 10 s, 100,000 did not "
         "finish in 300 s)", b_many_waivers(100_000), "analyzed", sources=(MOCK,), timeout_s=120),
    Case("nvtx-nested-20000", "silently-wrong", "20,000 NVTX ranges each inside the one before (an unbalanced push in "
         "a loop): no regions, not an exit 3", b_nvtx_nested(20_000), "analyzed",
         sources=("nsys/fuser_h200_matmul.sqlite",), timeout_s=180),
    Case("nvtx-nested-200000", "silently-wrong", "200,000 nested NVTX ranges", b_nvtx_nested(200_000), "analyzed",
         sources=("nsys/fuser_h200_matmul.sqlite",), timeout_s=300),
    Case("nvtx-flat-200000", "silently-wrong", "200,000 NVTX ranges side by side", b_nvtx_nested(200_000, flat=True),
         "analyzed", sources=("nsys/fuser_h200_matmul.sqlite",), timeout_s=300),
    Case("compare-fail-on-regression-nan", "silently-wrong", "compare --fail-on-regression nan (and the analyze "
         "before it)", b_fail_on_regression("nan"), "analyzed", sources=(MOCK,)),
    Case("compare-fail-on-regression-inf", "silently-wrong", "compare --fail-on-regression inf",
         b_fail_on_regression("inf"), "analyzed", sources=(MOCK,)),
    Case("config-param-nan", "silently-wrong", "[rules.robustness-probe] min_value = nan in the config",
         b_config_param_nan, "rejected", sources=(MOCK,), store_may_remain=True),
    Case("kineto-duplicate-ranks", "silently-wrong", "three traces that all claim rank 0 of 8", b_duplicate_ranks,
         "rejected", sources=(DLRM,), store_may_remain=True),
    Case("ingest-twice", "silently-wrong", "ingest a.sqlite --store s.duckdb twice", b_ingested_twice, "analyzed",
         sources=(MOCK,)),
    Case("store-capture-twice", "silently-wrong", "a store holding one capture twice (built before the refusal)",
         b_store_with_a_capture_twice, "rejected", sources=(MOCK,)),
    Case("sqlite-stringids-view", "silently-wrong", "StringIds a view over a copy of itself", b_stringids_view,
         "analyzed", sources=(MOCK,), checks=(check_view_noted,)),
)


# --------------------------------------------------------------------------------------------------- special files


def b_rule_file_special(name: str, kind: str) -> callable:
    """A rule folder whose ``name`` is a FIFO (``kind="fifo"``) or a symlink to /dev/zero (``"zero"``)."""
    def build(folder: Path) -> Setup:
        capture = _copy(MOCK, folder)
        rules = _rule_folder(folder)
        target = rules / "robustness-probe" / name
        target.unlink(missing_ok=True)
        if kind == "fifo":
            os.mkfifo(target)
        else:
            target.symlink_to("/dev/zero")
        setup = Setup(args=[str(capture), "--rules-dir", str(rules)], names=[name], watched=[capture, rules],
                      error_words=["not a regular file"])
        if name == "cases.toml":  # analyze does not read a rule's cases; `rules test` and `rules lint` do
            setup.args = [str(capture)]
            setup.names = [capture.name, name]
            # they report a bad rule as a failed test or a lint problem (exit 1), naming the file
            setup.extra_calls = [(["rules", "test", str(rules)], "analyzed"), (["rules", "lint", str(rules)],
                                                                              "analyzed")]
            setup.after = lambda run: [f"{' '.join(c.argv[3:5])}: does not name the FIFO" for c in run.calls[1:]
                                       if "not a regular file" not in c.stdout + c.stderr]
        return setup

    return build


def b_config_special(where: str) -> callable:
    """The configuration a FIFO: given with --config, or found as ./nsight-advisor.toml."""
    def build(folder: Path) -> Setup:
        capture = _copy(MOCK, folder)
        if where == "given":
            config = folder / "cfg.toml"
            os.mkfifo(config)
            return Setup(args=[str(capture), "--config", str(config)], names=[config.name], watched=[capture],
                         error_words=["not a regular file"])
        cwd = folder.parent / "cwd"
        cwd.mkdir(exist_ok=True)
        os.mkfifo(cwd / "nsight-advisor.toml")
        setup = Setup(args=[str(capture)], names=["nsight-advisor.toml"], watched=[capture],
                      error_words=["not a regular file"])
        setup.after = lambda run: [(run.workdir / "cwd" / "nsight-advisor.toml").unlink()] and []
        return setup

    return build



def b_non_utf8_in_folders(folder: Path) -> Setup:
    """A capture whose file name is not UTF-8 inside a compare side's folder, and such a file in a rule folder."""
    side = folder / "side"
    side.mkdir()
    capture = _copy(MOCK, side, os.fsdecode(b"rank\xff.sqlite"))
    rules = _rule_folder(folder)
    (rules / "robustness-probe" / os.fsdecode(b"notes\xfe.txt")).write_text("a note\n")
    out = folder.parent / "out"
    setup = Setup(args=[str(capture), "--rules-dir", str(rules)], names=["rank"], watched=[side, rules])
    setup.extra_calls = [(["compare", str(side), str(side), "--format", fmt, "-o", str(out / f"compare.{fmt}")],
                          "analyzed") for fmt in ("json", "html", "md")]
    return setup


def b_kineto_non_utf8_name(folder: Path) -> Setup:
    """A valid PyTorch trace whose file name holds bytes that are not UTF-8 (was refused as damaged)."""
    path = _copy("kineto/alexnet_trace.json.gz", folder, os.fsdecode(b"trace-\xff.json.gz"))
    return Setup(args=[str(path)], names=["trace-"], watched=[path])

SPECIAL_CASES = (
    Case("kineto-non-utf8-name", "special-files", "a real PyTorch trace whose file name is not UTF-8",
         b_kineto_non_utf8_name, "analyzed", sources=("kineto/alexnet_trace.json.gz",)),
    Case("non-utf8-names-in-folders", "special-files", "a capture named with bytes that are not UTF-8 in a compare "
         "side's folder, and such a file in a --rules-dir rule folder", b_non_utf8_in_folders, "analyzed",
         sources=(MOCK,)),
    Case("rules-query-fifo", "special-files", "a rule's query.sql is a FIFO", b_rule_file_special("query.sql", "fifo"),
         "rejected", sources=(MOCK,), timeout_s=60, store_may_remain=True),
    Case("rules-query-dev-zero", "special-files", "a rule's query.sql is a symlink to /dev/zero",
         b_rule_file_special("query.sql", "zero"), "rejected", sources=(MOCK,), timeout_s=60, store_may_remain=True),
    Case("rules-toml-fifo", "special-files", "a rule's rule.toml is a FIFO", b_rule_file_special("rule.toml", "fifo"),
         "rejected", sources=(MOCK,), timeout_s=60, store_may_remain=True),
    Case("rules-cases-fifo", "special-files", "a rule's cases.toml is a FIFO (rules test, rules lint)",
         b_rule_file_special("cases.toml", "fifo"), "analyzed", sources=(MOCK,), timeout_s=60),
    Case("config-fifo", "special-files", "--config names a FIFO", b_config_special("given"), "rejected",
         sources=(MOCK,), timeout_s=60, store_may_remain=True),
    Case("config-found-fifo", "special-files", "./nsight-advisor.toml is a FIFO", b_config_special("found"),
         "rejected", sources=(MOCK,), timeout_s=60, store_may_remain=True),
)


# --------------------------------------------------------------------------------------------------- the terminal

EVIL = "\x1b]0;pwned\x07\x1b[2J\x9b31m\u202e"  # OSC title + BEL, CSI clear, C1 CSI, a bidi override


def b_controls_compare_and_rules(folder: Path) -> Setup:
    """Escapes in kernel names and a regression waiver's reason (compare's Markdown on stdout), and in a rule's title
    (`rules list`, `rules show`): every command's stdout shows them as escapes."""
    import sqlite3

    base = _copy(MOCK, folder, "base.sqlite")
    head = _copy(MOCK, folder, "head.sqlite")
    for path in (base, head):
        con = sqlite3.connect(path)
        try:
            con.execute("update StringIds set value = ? || value where id in (select distinct demangledName from "
                        "CUPTI_ACTIVITY_KIND_KERNEL)", (EVIL,))
            con.commit()
        finally:
            con.close()
    config = folder / "cfg.toml"
    config.write_text('[[waive]]\nrule = "regression"\nsubject = "*"\nexpires = 2999-12-31\nreason = "accepted \\u001b[2J\\u009b31m"\n')
    rules = _rule_folder(folder)
    toml = rules / "robustness-probe" / "rule.toml"
    toml.write_text(toml.read_text().replace('title = "Robustness probe"',
                                             'title = "Robustness \\u001b]0;pwned\\u0007 probe \\u009b2J"'))
    setup = Setup(args=[str(base)], names=[base.name], watched=[base, head, config, rules])
    setup.extra_calls = [(["compare", str(base), str(head), "--config", str(config)], "analyzed"),
                         (["rules", "list", "--rules-dir", str(rules)], "analyzed"),
                         (["rules", "show", "NA990", "--rules-dir", str(rules)], "analyzed")]
    return setup


def _check_terminal(run: Run) -> list[str]:
    from corpus import check_no_controls

    problems = check_no_controls(run)
    compare = run.calls[1].stdout if len(run.calls) > 1 else ""
    if "\\u001b" not in compare and "\\u009b" not in compare:
        problems.append("compare's Markdown does not show the escapes (were the names or the reason lost?)")
    return problems


def b_stdout_closed(command: str) -> callable:
    """``query``, ``info`` or ``rules list`` with stdout closed: exit 2 with one line, not exit 0."""
    def build(folder: Path) -> Setup:
        capture = _copy(MOCK, folder)
        argv = {"query": ["query", str(capture), "select count(*) from kernels"], "info": ["info", str(capture)],
                "rules": ["rules", "list"]}[command]
        setup = Setup(args=[str(capture)], names=[capture.name, "stdout"], watched=[capture])
        setup.extra_calls = [(["--closed-stdout", *argv], "rejected")]
        return setup

    return build



def _children(pid: int) -> list[int]:
    """The pids of ``pid``'s children (Linux /proc)."""
    out = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out += [int(x) for x in (task / "children").read_text().split()]
        except OSError:
            continue
    return out


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie has exited
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][:1] != "Z"
    except OSError:
        return False


#: What a compare-helper attempt that came too late says (compare had finished before it could be stopped).
ENDED_FIRST = "compare ended before it could be stopped"


def b_compare_helper(signum: int) -> callable:
    """``compare A B`` stopped while its helper analyzes HEAD: compare alone by SIGKILL (the helper must end by
    itself), or compare's process group by SIGTERM (both clean up: no run folder, lock or partial store left)."""
    def build(folder: Path) -> Setup:
        import signal
        import subprocess
        import time

        from corpus import _env

        if not sys.platform.startswith("linux") or len(os.sched_getaffinity(0)) < 2:
            raise Unavailable("compare starts its helper only on Linux with two usable cores")
        # 2,000,001 kernel events: seconds of ingest (a minute on a loaded machine before issue 30; built in a second)
        base, head = folder / "base.pt.trace.json.gz", folder / "head.pt.trace.json.gz"
        for path in (base, head):
            _gzip_parts(path, [b'{"schemaVersion": 1, "traceEvents": [', ((_EVENT + b",") * 1000, 2000), _EVENT,
                               b"]}"])
        setup = Setup(args=[str(base)], names=[base.name], watched=[base, head])

        def after(run: Run) -> list[str]:
            import shutil

            # An attempt in which compare finished before it could be stopped tests nothing (the analyses got
            # faster than the 2,000,001 events were sized for, and a loaded machine varies): it is made again.
            for _attempt in range(3):
                problems = stop_compare(run.workdir)
                shutil.rmtree(run.workdir / "cache2", ignore_errors=True)
                if problems != [ENDED_FIRST]:
                    return problems
            return [f"{ENDED_FIRST}, three times"]

        def stop_compare(workdir: Path) -> list[str]:
            env = _env(workdir)
            env["NSIGHT_ADVISOR_CACHE"] = str(workdir / "cache2")  # a cold cache: HEAD's ingest is under way
            proc = subprocess.Popen([sys.executable, "-m", "nsight_advisor", "compare", str(base), str(head),
                                     "-q"], cwd=workdir / "cwd", env=env, start_new_session=True,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            helpers: list[int] = []
            deadline = time.monotonic() + 60
            while not helpers and time.monotonic() < deadline and proc.poll() is None:
                time.sleep(0.1)
                helpers = _children(proc.pid)
            problems = []
            if not helpers:
                proc.wait(timeout=120)
                return ["compare started no helper (or ended before it was seen)"]
            # stop compare once the helper is building HEAD's store (its run folder is in the cache folder)
            deadline = time.monotonic() + 60
            while (time.monotonic() < deadline and proc.poll() is None
                   and not any(list((workdir / "cache2").glob(f".nsa-run-{h}-*")) for h in helpers)):
                time.sleep(0.1)
            time.sleep(0.5)
            if proc.poll() is not None:
                proc.stderr.read()
                return [ENDED_FIRST]
            if signum == signal.SIGTERM:  # as a terminal, a job control or a service manager does: the whole group
                os.killpg(proc.pid, signum)
            else:  # kill -9 of compare alone
                proc.send_signal(signum)
            rc = proc.wait(timeout=120)
            err = proc.stderr.read().decode("utf-8", "replace").strip()
            if signum == signal.SIGTERM and (rc != 143 or err != "nsight-advisor: interrupted"):
                problems.append(f"compare after SIGTERM: exit {rc}, stderr {err[-200:]!r}")
            deadline = time.monotonic() + 15  # the helper, stopped or orphaned, must end within this
            while any(_alive(h) for h in helpers) and time.monotonic() < deadline:
                time.sleep(0.2)
            left = [h for h in helpers if _alive(h)]
            if left:
                problems.append(f"compare's helper {left} still runs 15 s after compare ended")
                for h in left:
                    os.kill(h, signal.SIGKILL)
            cache2 = workdir / "cache2"
            if signum == signal.SIGTERM:
                stray = sorted(p.name for p in cache2.rglob("*") if p.name.startswith(".") or p.suffix == ".lock")
                if stray:
                    problems.append(f"left after SIGTERM: {stray[:4]}")
            else:  # SIGKILL: compare itself cannot clean up; the next run reclaims what the dead processes left
                _cli(["analyze", str(base), "--format", "json", "-o", str(workdir / "again.json")], workdir,
                     timeout_s=180, env={"NSIGHT_ADVISOR_CACHE": str(cache2)})
                (workdir / "again.json").unlink(missing_ok=True)
            return problems

        setup.after = after
        return setup

    return build

TERMINAL_CASES = (
    Case("controls-compare-rules", "terminal", "ESC, BEL, C1 CSI and a bidi override in kernel names, a waiver's "
         "reason and a rule's title: compare's Markdown, rules list and rules show on stdout",
         b_controls_compare_and_rules, "analyzed", sources=(MOCK,), checks=(_check_terminal,)),
    Case("compare-killed-helper-ends", "terminal", "compare killed with SIGKILL while its helper ingests HEAD: the "
         "helper ends by itself", b_compare_helper(9), "analyzed", timeout_s=300),
    Case("compare-sigterm-helper-cleans", "terminal", "compare stopped with SIGTERM while its helper ingests HEAD: "
         "exit 143, no run folder, lock or partial store left", b_compare_helper(15), "analyzed",
         timeout_s=300),
    *(Case(f"stdout-closed-{c}", "terminal", f"`{c}{' list' if c == 'rules' else ''}` with its stdout closed",
           b_stdout_closed(c), "analyzed", sources=(MOCK,)) for c in ("query", "info", "rules")),
)


# --------------------------------------------------------------------------------------------------- --ray-address


def b_not_ray(kind: str) -> callable:
    """``--executor ray --ray-address`` at an HTTP server, or at a TCP listener that never answers."""
    def build(folder: Path) -> Setup:
        import http.server
        import importlib.util
        import socket
        import threading

        if importlib.util.find_spec("ray") is None:
            raise Unavailable("Ray is not installed")
        captures = [_copy(DLRM, folder, f"rank{n}.pt.trace.json.gz") for n in range(2)]
        if kind == "http":
            server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _QuietHandler)
            threading.Thread(target=server.serve_forever, daemon=True).start()
            port, stop = server.server_address[1], lambda: (server.shutdown(), server.server_close())
        else:
            listener = socket.socket()
            listener.bind(("127.0.0.1", 0))
            listener.listen()
            port, stop = listener.getsockname()[1], listener.close
        setup = Setup(args=[*map(str, captures), "--executor", "ray", "--ray-address", f"127.0.0.1:{port}"],
                      names=[f"127.0.0.1:{port}"], watched=captures, error_words=["not a Ray cluster"])
        setup.after = lambda run: [stop()] and []
        return setup

    return build


class _QuietHandler(__import__("http.server").server.BaseHTTPRequestHandler):
    def log_message(self, *args) -> None:  # noqa: D102 - the corpus prints its own lines
        pass


def _process_group(pgid: int) -> list[tuple[int, str]]:
    """The live processes of process group ``pgid`` (Linux /proc) with their first command-line word (Ray's workers
    name themselves ``ray::TASK`` there while they run one)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(") ", 1)[1].split()
            if int(fields[2]) == pgid and fields[0] != "Z":
                found.append((int(entry.name), (entry / "cmdline").read_bytes().split(b"\0")[0].decode("utf-8",
                                                                                                      "replace")))
        except (OSError, IndexError, ValueError):
            continue
    return found


def _environ_names(pid: int, needle: bytes) -> bool:
    try:
        return needle in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False


def _wait_for_folder(folder: Path, deadline: float) -> None:
    """Until a task's temporary folder (``nsa-capture-*``) has come and gone in ``folder``: its ingest is done."""
    import time

    seen = False
    while time.monotonic() < deadline:
        present = any(p.name.startswith("nsa-capture-") for p in folder.iterdir())
        if seen and not present:
            return
        seen = seen or present
        time.sleep(0.002)


def b_ray_stopped(how: str) -> callable:
    """A one-node Ray cluster of one CPU (``ray start --head --block`` in its own process group, so that it is
    stopped by its process group and by nothing broader), stopped the moment its worker starts ingesting the first
    of the 8 DLRM ranks: ``term`` sends SIGTERM to every Ray process as ``ray stop`` does; ``kill`` kills the raylet
    first and the rest 2 s later, as ``ray stop --force`` does; ``late`` does what ``kill`` does once the worker has read the capture (its
    temporary folder came and went), so that the worker fails inside Ray storing its result."""
    def build(folder: Path) -> Setup:
        import atexit
        import importlib.util
        import shutil
        import signal
        import socket
        import subprocess
        import tempfile
        import threading
        import time

        if importlib.util.find_spec("ray") is None:
            raise Unavailable("Ray is not installed")
        if not sys.platform.startswith("linux"):
            raise Unavailable("the case finds the cluster's processes through Linux's /proc")
        ranks = sorted((TRACES / "kineto" / "dlrm_8rank").glob("*.pt.trace.json.gz"))
        if len(ranks) != 8:
            raise Unavailable("the 8 DLRM ranks are not present")
        captures = [_copy(str(r.relative_to(TRACES)), folder) for r in ranks]
        # Ray's socket paths must stay under 108 bytes: a short folder of /tmp, not the case's folder
        home = Path(tempfile.mkdtemp(prefix="nsa-ray-", dir="/tmp"))
        node_tmp = home / "node-tmp"  # the tasks' TMPDIR: what a killed worker leaves goes with the cluster's folder
        node_tmp.mkdir()
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        log = home / "head.log"
        with open(log, "wb") as out:
            head = subprocess.Popen([sys.executable, "-m", "ray.scripts.scripts", "start", "--head", "--block",
                                     "--num-cpus=1", "--include-dashboard=false", f"--port={port}",
                                     f"--temp-dir={home}", "--disable-usage-stats"], start_new_session=True,
                                    stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    env={**os.environ, "TMPDIR": str(node_tmp)})

        def stop_cluster() -> None:  # what is left of the cluster, by its own process group
            with contextlib.suppress(ProcessLookupError):
                os.killpg(head.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                head.wait(timeout=30)
            shutil.rmtree(home, ignore_errors=True)

        atexit.register(stop_cluster)  # whatever happens to the case, the cluster does not outlive the corpus
        deadline = time.monotonic() + 90
        while b"Ray runtime started" not in log.read_bytes():  # GCS and raylet are up and registered
            if head.poll() is not None or time.monotonic() > deadline:
                stop_cluster()
                raise Unavailable(f"ray start --head failed: {log.read_bytes()[-300:].decode('utf-8', 'replace')}")
            time.sleep(0.1)
        stopped: dict[str, float] = {}

        def stop_when_a_task_runs() -> None:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and head.poll() is None:
                group = _process_group(head.pid)
                if any(word.startswith("ray::capture_task") for _pid, word in group):
                    if how == "late":  # the worker has read the capture and is handing its tables to Ray
                        _wait_for_folder(node_tmp, deadline)
                    stopped["at"] = time.monotonic()
                    if how == "term":
                        os.killpg(head.pid, signal.SIGTERM)
                    else:
                        for pid, word in group:
                            if word.endswith("/raylet"):
                                os.kill(pid, signal.SIGKILL)
                        time.sleep(2)
                        os.killpg(head.pid, signal.SIGKILL)
                    return
                time.sleep(0.05)

        watcher = threading.Thread(target=stop_when_a_task_runs, daemon=True)
        watcher.start()
        setup = Setup(args=[*map(str, captures), "--executor", "ray", "--ray-address", f"127.0.0.1:{port}"],
                      names=[c.name for c in captures], watched=captures, error_words=["Ray cluster"])

        def after(run: Run) -> list[str]:
            watcher.join(timeout=130)
            problems = [] if "at" in stopped else ["the run ended before the cluster was stopped under it"]
            with contextlib.suppress(subprocess.TimeoutExpired):
                head.wait(timeout=20)  # SIGTERM: Ray's processes end by themselves (most of them)
            left_tmp = sorted(p.name for p in node_tmp.iterdir()) if node_tmp.exists() else []
            if how == "term" and left_tmp:  # a worker stopped by SIGTERM cleans up; SIGKILL cannot
                problems.append(f"the stopped worker left {left_tmp[:3]} in the node's temporary folder")
            stop_cluster()
            atexit.unregister(stop_cluster)
            cache = str(run.workdir / "cache").encode()
            orphans = [pid for pid in map(int, filter(str.isdigit, os.listdir("/proc")))
                       if _environ_names(pid, b"NSIGHT_ADVISOR_CACHE=" + cache)]
            if orphans:  # the driver (analyze) started them: they would run on after it
                problems.append(f"processes of the run still alive after it ended: {orphans[:4]}")
                for pid in orphans:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
            return problems

        setup.after = after
        return setup

    return build


RAY_CASES = (
    Case("ray-address-http-server", "ray-address", "--ray-address at an HTTP server (Ray logged and retried for "
         "minutes)", b_not_ray("http"), "rejected", sources=(DLRM,), timeout_s=60),
    Case("ray-address-silent-listener", "ray-address", "--ray-address at a TCP listener that never answers (108 s, "
         "then a segfault)", b_not_ray("raw"), "rejected", sources=(DLRM,), timeout_s=60),
    Case("ray-cluster-stopped", "ray-address", "the Ray cluster (one node, one CPU) stopped as `ray stop` does "
         "(SIGTERM) the moment its worker starts ingesting the first of 8 ranks", b_ray_stopped("term"), "rejected",
         sources=(DLRM,), timeout_s=120),
    Case("ray-cluster-killed", "ray-address", "the Ray cluster's raylet killed the moment its worker starts "
         "ingesting the first of 8 ranks, the rest of the cluster 2 s later (as `ray stop --force` does)",
         b_ray_stopped("kill"), "rejected", sources=(DLRM,), timeout_s=120),
    Case("ray-cluster-killed-storing", "ray-address", "the Ray cluster's raylet killed the moment its worker has "
         "read the first rank and hands the tables to Ray, the rest 2 s later (Ray's own error inside the task, "
         "`OSError: Broken pipe`, was an exit 3)", b_ray_stopped("late"), "rejected", sources=(DLRM,), timeout_s=120),
)


# --------------------------------------------------------------------------------------------------- the limits


def limits_section() -> list[str]:
    """The limits that are policy, with the numbers the code uses (docs/robustness.md, "Limits")."""
    repo = str(Path(__file__).resolve().parent.parent)
    if repo not in sys.path:
        sys.path.insert(0, repo)
    from nsight_advisor.common import regular_file
    from nsight_advisor.engine import run_inputs
    from nsight_advisor.common.child_lifecycle import TERM_GRACE_S
    from nsight_advisor.engine import regions
    from nsight_advisor.ingest.kineto import json_stream as js
    from nsight_advisor.ingest.nsys import string_views as nsys_views

    return [
        "## Limits",
        "",
        "Round three's cases (issue 26) hold because of these limits; each is a policy, and passing one is one line "
        "on stderr and exit 2 unless said otherwise.",
        "",
        f"- **PyTorch (Kineto) traces**, header and events alike: one JSON value (an event, a header member, a string) "
        f"of at most {js.MAX_VALUE_CHARS:,} characters; numbers within 1e{js.MAX_EXPONENT} (fractions kept to 60 "
        f"significant digits); whole numbers of at most 4,300 digits (Python's limit); header members nested at most "
        f"{js.MAX_HEADER_DEPTH} levels, any other value (an event is level 1, its `args` level 2) at most "
        f"{js.MAX_VALUE_DEPTH} levels. Space between "
        f"values is dropped as it is read, so it costs time in proportion to its length and no memory.",
        f"- **Rule and configuration files** (rule.toml, query.sql, cases.toml, judge.py, the config given or found): "
        f"regular files of at most {regular_file.MAX_BYTES:,} bytes; a FIFO, socket or device is refused, not read.",
        "- **`-o`** may not name any file the run reads: the captures, `--store`, `--baseline`, the configuration "
        f"(given, or ./nsight-advisor.toml and ./pyproject.toml found) and every file under the rule folders (at most "
        f"{run_inputs.MAX_RULE_FILES:,} a folder are looked at).",
        "- **The cache folder** is created private (0700); one that exists loses group and other access (its owner's "
        "bits stay), and one of another user, or a link to one, is refused; its entries (stores, locks, kept results) are never "
        "followed through a symbolic link (a link there is replaced as a link); cache names carry a secret of the "
        "user's (`secret-UID`, 0600, in the cache folder), and a secret file that is a link, another user's or "
        "readable by others is refused.",
        "- **Captures analyzed together** may not claim the same rank of one job (rank and world size), and a store "
        "may not hold one capture twice; `ingest` refuses a capture already in the store.",
        f"- **Views in an nsys export**: a StringIds view is read by running its SQL read-only within "
        f"{nsys_views.VIEW_READ_S:g} s, values of at most {nsys_views.MAX_VALUE_BYTES:,} bytes and "
        f"{nsys_views.MAX_VIEW_ROWS:,} rows (past them it is not read); other views are not read. An ingest note says "
        "which.",
        f"- **Regions**: a capture whose NVTX push/pop ranges nest deeper than {regions.MAX_DEPTH} levels (or number "
        f"over {regions.MAX_RANGES:,}) is analyzed without regions (exit 0).",
        "- **Numbers given as options** (`--fail-on-regression`, `--set` on a float parameter, a float parameter in "
        "the config) must be finite.",
        "- **`--ray-address`** must answer an HTTP/2 preface as a gRPC server does within 5 s.",
        f"- **compare's helper process** ends when compare ends (SIGTERM from the kernel on Linux, and the end of a pipe "
        f"everywhere); compare stops a running helper with SIGTERM and sends SIGKILL {TERM_GRACE_S:g} s later.",
        "- **Text on stdout** passes through one function that writes each control character but tab and newline as "
        "`\\uXXXX` (a JSON escape of the same character, so JSON stays exact); a closed stdout is exit 2.",
        "",
    ]

CASES: tuple[Case, ...] = (*CACHE_CASES, *OUTPUT_CASES, *JSON_CASES, *WRONG_CASES, *SPECIAL_CASES, *TERMINAL_CASES, *RAY_CASES)

__all__ = ["CASES", "TWO_GB", "limits_section"]
