"""The store cache: reuse of an unchanged capture's store, --no-cache, --store, concurrency, no leftovers."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO, TRACES
from nsight_advisor.common import cache_safety
from nsight_advisor.store import cache as store_cache
from nsight_advisor import workflow
from nsight_advisor.common.errors import InputError

SMALL = TRACES / "nsys" / "nsys_ai_mock.sqlite"
MEDIUM = TRACES / "nsys" / "pipit_cloverleaf_a100.sqlite"


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """An empty cache folder, used by this process and the CLI processes it starts."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("NSIGHT_ADVISOR_CACHE", str(folder))
    # Kept results are keyed on the package's own files too; pin that part so that a source file edited
    # while the suite runs (a developer at work) cannot turn a warm run into a cold one mid-test.
    from nsight_advisor.store import result_cache

    monkeypatch.setattr(result_cache, "_PACKAGE_DIR", tmp_path / "pinned-package")
    return folder


@pytest.fixture
def capture(tmp_path) -> Path:
    """A private copy of a real export, so its mtime can be changed."""
    if not SMALL.exists():
        pytest.skip(f"real traces not present at {TRACES}")
    dst = tmp_path / "inputs" / SMALL.name
    dst.parent.mkdir()
    shutil.copyfile(SMALL, dst)
    return dst


def _stores(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.duckdb"))


def _names(folder: Path) -> list[str]:
    """What ``folder`` holds, less the user's cache secret (cache_safety) and the schema template's ``support/``
    folder (store.schema_template): both stay, by design."""
    return sorted(p.name for p in folder.iterdir()
                  if not p.name.startswith(cache_safety.SECRET_PREFIX) and p.name != "support")


def _load_ids(paths, **kw):
    con, ids = workflow.load(paths, **kw)
    con.close()
    return ids


def _cli(*args: str, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "nsight_advisor", *args], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})})


def test_cache_location_env_and_default(monkeypatch, tmp_path):
    monkeypatch.delenv("NSIGHT_ADVISOR_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert store_cache.cache_dir() == tmp_path / "xdg" / "nsight-advisor"
    monkeypatch.setenv("NSIGHT_ADVISOR_CACHE", str(tmp_path / "mine"))
    assert workflow.cache_dir() == tmp_path / "mine"


def test_second_load_reuses_the_store(cache, capture):
    assert _load_ids([capture]) == [1]
    [store] = _stores(cache)
    before = store.stat()
    assert _load_ids([capture]) == [1]
    assert _stores(cache) == [store]
    after = store.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)  # not rebuilt
    assert _names(cache) == [store.name]  # no lock or temp files left


def test_changed_capture_is_reingested_and_the_stale_store_removed(cache, capture):
    _load_ids([capture])
    [old] = _stores(cache)
    st = capture.stat()
    os.utime(capture, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    _load_ids([capture])
    [new] = _stores(cache)
    assert new != old and not old.exists()
    assert new.name.split("-")[0] == old.name.split("-")[0]  # same inputs, newer state


def test_cache_key_changes_with_size_mtime_and_schema(capture, monkeypatch):
    key = workflow.cache_key([capture])
    st = capture.stat()
    os.utime(capture, ns=(st.st_atime_ns, st.st_mtime_ns + 1))
    assert workflow.cache_key([capture]) != key
    key = workflow.cache_key([capture])
    monkeypatch.setattr(store_cache, "SCHEMA_VERSION", 10_000)
    assert workflow.cache_key([capture]) != key
    # a store keeps the views it was built with, so changed view SQL means another store
    key = workflow.cache_key([capture])
    monkeypatch.setattr(store_cache, "_views_digest", lambda: "changed-views")
    assert workflow.cache_key([capture]) != key


def test_no_cache_forces_a_fresh_ingest(cache, capture):
    _load_ids([capture])
    [store] = _stores(cache)
    ino = store.stat().st_ino
    assert _load_ids([capture], use_cache=False) == [1]
    [again] = _stores(cache)
    assert again == store and again.stat().st_ino != ino  # a new file renamed over the old one


def test_store_option_overrides_the_cache(cache, capture, tmp_path):
    target = tmp_path / "out" / "run.duckdb"
    assert _load_ids([capture], store_path=target) == [1]
    # no store in the cache: at most the support folder (the schema template every new store is copied from)
    assert target.is_file() and (not cache.exists() or _names(cache) == [])
    ino = target.stat().st_ino
    assert _load_ids([capture], store_path=target) == [1]
    assert target.stat().st_ino == ino  # reused
    assert _load_ids([capture], store_path=target, use_cache=False) == [1]
    assert target.stat().st_ino != ino
    assert sorted(p.name for p in target.parent.iterdir()) == ["run.duckdb"]


def test_store_option_never_overwrites_someone_elses_store(capture, tmp_path, cache):
    if not MEDIUM.exists():
        pytest.skip(f"real traces not present at {TRACES}")
    other = tmp_path / "other.duckdb"
    workflow.ingest_to_store([MEDIUM], other)
    before = other.read_bytes()
    with pytest.raises(InputError, match="other captures"):
        workflow.load([capture], store_path=other)
    assert other.read_bytes() == before
    not_a_store = tmp_path / "notes.duckdb"
    not_a_store.write_text("my notes")
    with pytest.raises(InputError):
        workflow.load([capture], store_path=not_a_store, use_cache=False)
    assert not_a_store.read_text() == "my notes"


def test_failed_ingest_leaves_nothing_behind(cache, tmp_path):
    bad = tmp_path / "truncated.sqlite"
    bad.write_bytes(SMALL.read_bytes()[:5000] if SMALL.exists() else b"SQLite format 3\x00" + b"\x00" * 100)
    with pytest.raises(InputError):
        workflow.load([bad])
    assert not cache.exists() or _names(cache) == []


def test_leftovers_of_a_killed_build_are_removed(cache, capture):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    target = store_cache.cached_store_path([capture.resolve()])
    cache.mkdir(exist_ok=True)  # computing the key creates it (with the secret)
    leftover = cache / f".{target.name}.build-{int(dead.stdout)}-0123abcd.tmp"
    leftover.write_bytes(b"half a store")
    # what else a killed build leaves beside it: DuckDB's spill folder, and any file named after the build
    spill = cache / f"{leftover.name}.tmp"
    spill.mkdir()
    (spill / "duckdb_temp_storage-0.tmp").write_bytes(b"spilled")
    scratch = cache / f"{leftover.name}.{int(dead.stdout)}-89abcdef.nvtx-depth.parquet"
    scratch.write_bytes(b"depths")
    _load_ids([capture])
    assert not leftover.exists() and not spill.exists() and not scratch.exists()
    assert _names(cache) == [target.name]


def test_two_processes_at_once_share_one_store(cache, tmp_path):
    """Two CLI processes analyze the same capture at the same moment; both succeed; one intact store."""
    if not MEDIUM.exists():
        pytest.skip(f"real traces not present at {TRACES}")
    sql = "select count(*) as n, sum(duration_ns) as t from kernels"
    procs = [_cli("query", str(MEDIUM), sql, "--format", "csv") for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
    assert outs[0][0] == outs[1][0]
    assert outs[0][0].splitlines()[1].startswith("1312,")  # CloverLeaf: 1312 kernels
    [store] = _stores(cache)
    assert _names(cache) == [store.name]
    con, ids = workflow.load([MEDIUM])  # the store is complete and reused
    try:
        assert ids == [1] and con.execute("select count(*) from kernels").fetchone()[0] == 1312
    finally:
        con.close()


def test_concurrent_fresh_ingests_never_corrupt_the_store(cache):
    """--no-cache runs racing each other and a reader: every one succeeds and the store stays whole."""
    if not MEDIUM.exists():
        pytest.skip(f"real traces not present at {TRACES}")
    _load_ids([MEDIUM])
    code = ("import sys; from pathlib import Path; from nsight_advisor import workflow\n"
            "con, ids = workflow.load([Path(sys.argv[1])], use_cache=sys.argv[2] == 'cache')\n"
            "print(con.execute('select count(*) from kernels').fetchone()[0])\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [subprocess.Popen([sys.executable, "-c", code, str(MEDIUM), mode], cwd=REPO, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for mode in ("fresh", "fresh", "cache")]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        assert out.strip() == "1312"
    [store] = _stores(cache)
    assert _names(cache) == [store.name]


def test_lock_is_exclusive_and_removed(tmp_path):
    """A second holder (a child process) gets the lock only after the first released it."""
    target = tmp_path / "x.duckdb"
    code = ("import sys, time; from pathlib import Path; from nsight_advisor.store.cache import build_lock\n"
            "with build_lock(Path(sys.argv[1])): print(time.time())\n")
    with store_cache.build_lock(target):
        assert (tmp_path / "x.duckdb.lock").exists()
        child = subprocess.Popen([sys.executable, "-c", code, str(target)], cwd=REPO, stdout=subprocess.PIPE,
                                 text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
        time.sleep(1.5)
        released_at = time.time()
    out, _ = child.communicate(timeout=60)
    assert child.returncode == 0 and float(out) >= released_at
    assert list(tmp_path.iterdir()) == []


def test_analyze_help_documents_the_cache():
    p = _cli("analyze", "--help")
    out, _ = p.communicate(timeout=60)
    assert p.returncode == 0
    assert "NSIGHT_ADVISOR_CACHE" in out and "--no-cache" in out


def test_warm_analyze_reuses_the_result_without_running_rules(cache, capture, monkeypatch):
    import nsight_advisor.engine.analyze as engine

    cold = workflow.analyze([capture])
    assert list((cache / "results").glob("*.json"))

    def no_rules(*args, **kwargs):
        raise AssertionError("rules ran on the warm path")

    real = engine.run_analysis
    monkeypatch.setattr(engine, "run_analysis", no_rules)
    warm = workflow.analyze([capture])
    assert warm.to_dict() == cold.to_dict()
    # anything that can change the findings runs the rules again
    with pytest.raises(AssertionError, match="rules ran"):
        workflow.analyze([capture], use_cache=False)
    with pytest.raises(AssertionError, match="rules ran"):
        workflow.analyze([capture], overrides=["small-grid.min_blocks_per_sm=2"])
    monkeypatch.setattr(engine, "run_analysis", real)
    assert _timeless(workflow.analyze([capture], use_cache=False)) == _timeless(cold)


def _timeless(result) -> dict:
    doc = result.to_dict()
    for outcome in doc["outcomes"]:
        outcome.pop("elapsed_s")
    return doc


def test_results_with_errored_rules_are_not_kept(cache, capture, monkeypatch):
    from nsight_advisor.store import result_cache
    from nsight_advisor.engine.model import Outcome

    result = workflow.analyze([capture])
    result.outcomes.append(Outcome("NA999", "broken", "errored", reason="time limit"))
    from nsight_advisor.engine.model import result_from_dict

    assert result_cache.write_result("x-y", result, result_from_dict) is False
    assert not (result_cache.results_dir() / "x-y.json").exists()


def test_result_round_trips_through_json(cache):
    if not MEDIUM.exists():
        pytest.skip(f"real traces not present at {TRACES}")
    from nsight_advisor.engine.model import result_from_dict

    result = workflow.analyze([MEDIUM])
    assert result.findings  # CloverLeaf has findings, so evidence and principles are exercised
    back = result_from_dict(json.loads(json.dumps(result.to_dict())))
    assert back.to_dict() == result.to_dict()
    assert type(back.findings[0].principles[0]).__name__ == "PrincipleRef"


def test_warm_run_reuses_the_rendered_report_unless_the_result_changed(cache, capture, tmp_path, monkeypatch):
    import nsight_advisor.report as report

    cold = workflow.analyze([capture])
    workflow.write_report(cold, "html", tmp_path / "cold.html")
    warm = workflow.analyze([capture])

    def no_render(*args, **kwargs):
        raise AssertionError("rendered again")

    real = report.render
    monkeypatch.setattr(report, "render", no_render)
    workflow.write_report(warm, "html", tmp_path / "warm.html")
    assert (tmp_path / "warm.html").read_bytes() == (tmp_path / "cold.html").read_bytes()
    warm.findings = warm.findings[:0]  # a caller edited the result: its report must be rendered anew
    with pytest.raises(AssertionError, match="rendered again"):
        workflow.write_report(warm, "html", tmp_path / "edited.html")
    monkeypatch.setattr(report, "render", real)
    workflow.write_report(warm, "md", tmp_path / "warm.md")  # another format: rendered once, then kept
    assert (tmp_path / "warm.md").stat().st_size > 0


def test_result_key_follows_the_package_and_rule_files(cache, capture, tmp_path, monkeypatch):
    from nsight_advisor.engine.config import find_config
    from nsight_advisor.store import result_cache
    from nsight_advisor.store.opening import StoreHandle

    handle = StoreHandle([capture])
    con, ids = handle.open()
    con.close()
    store, config = handle.target, find_config(None)
    pkg = tmp_path / "pinned-package"
    pkg.mkdir()
    (pkg / "a.py").write_text("x = 1\n")
    key = result_cache.result_key(store, ids, config=config)
    (pkg / "a.py").write_text("x = 22\n")  # a code change (size differs)
    assert result_cache.result_key(store, ids, config=config) != key
    rules = tmp_path / "my-rules"
    rules.mkdir()
    key = result_cache.result_key(store, ids, config=config, rules_dirs=[rules])
    (rules / "rule.toml").write_text("id = 'X'\n")
    assert result_cache.result_key(store, ids, config=config, rules_dirs=[rules]) != key


# --- tables analyze defers --------------------------------------------------------------------------------

WITH_NVTX = TRACES / "nsys" / "fuser_h200_matmul.sqlite"


def _nvtx_state(store: Path) -> tuple[int, list[str], int]:
    from nsight_advisor.store.database import connect

    con = connect(store, read_only=True)
    try:
        rows = con.execute("SELECT count(*) FROM nvtx_ranges").fetchone()[0]
        deferred = [d for (d,) in con.execute("SELECT data FROM capture_deferred ORDER BY data").fetchall()]
        duration = con.execute("SELECT duration_ns FROM captures").fetchone()[0]
    finally:
        con.close()
    return rows, deferred, duration


def test_analyze_loads_small_deferrable_tables_anyway(cache):
    # 652 NVTX ranges load in milliseconds and name the causes of idle gaps (nvFuser's NVRTC ranges): only a table
    # of DEFER_MIN_ROWS rows or more is left out
    if not WITH_NVTX.exists():
        pytest.skip(f"real traces not present at {TRACES}")
    workflow.analyze([WITH_NVTX])
    (store,) = _stores(cache)
    assert _nvtx_state(store)[:2] == (652, [])


def test_analyze_defers_tables_no_rule_reads_and_query_completes_the_store(cache, tmp_path, monkeypatch):
    if not WITH_NVTX.exists():
        pytest.skip(f"real traces not present at {TRACES}")
    from nsight_advisor.ingest.nsys import reader as nsys_reader

    monkeypatch.setattr(nsys_reader, "DEFER_MIN_ROWS", 100)  # the real exports' NVTX tables are all small
    full = tmp_path / "full.duckdb"
    workflow.ingest_to_store([WITH_NVTX], full)
    full_rows, full_deferred, full_duration = _nvtx_state(full)
    assert full_rows == 652 and full_deferred == []

    workflow.analyze([WITH_NVTX])
    (store,) = _stores(cache)
    rows, deferred, duration = _nvtx_state(store)
    assert (rows, deferred) == (0, ["nvtx_ranges"])  # no GPU metrics table: gpu_metrics is missing, not deferred
    assert duration == full_duration, "the capture span still covers the deferred NVTX ranges"
    assert "not loaded: nvtx_ranges (652 rows in the export" in workflow.info(store)
    # `info` on the capture describes that store as it is, instead of a second, full ingest
    mtime = store.stat().st_mtime_ns
    assert "not loaded: nvtx_ranges (652 rows in the export" in workflow.info(WITH_NVTX)
    assert store.stat().st_mtime_ns == mtime
    # A caller that runs only the built-in rules reuses that store as it is.
    mtime = store.stat().st_mtime_ns
    _load_ids([WITH_NVTX], for_rules=True)
    assert store.stat().st_mtime_ns == mtime and _nvtx_state(store)[1] == ["nvtx_ranges"]

    # A command that may read the deferred table rebuilds the cached store in full, once.
    out = workflow.query(WITH_NVTX, "SELECT count(*) AS n FROM nvtx_ranges", "json")
    assert json.loads(out) == [{"n": full_rows}]
    assert _nvtx_state(store) == (full_rows, [], full_duration)
    # ... and analyze is content with the complete store.
    before = store.stat().st_mtime_ns
    workflow.analyze([WITH_NVTX], use_cache=True)
    assert store.stat().st_mtime_ns == before


def test_a_rule_that_reads_nvtx_gets_it_loaded(cache, tmp_path):
    if not WITH_NVTX.exists():
        pytest.skip(f"real traces not present at {TRACES}")
    from nsight_advisor.engine.analyze import rules_reading
    from nsight_advisor.authoring.commands import new_rule

    new_rule("nvtx-reader", tmp_path / "rules")
    query = tmp_path / "rules" / "nvtx-reader" / "query.sql"
    query.write_text(query.read_text().replace("from api_calls a", "from api_calls a, (select 1 from nvtx_ranges limit 1)"))
    assert rules_reading(["nvtx_ranges", "gpu_metrics"]) == set()
    assert rules_reading(["nvtx_ranges", "gpu_metrics"], rules_dirs=[tmp_path / "rules"]) == {"nvtx_ranges"}

    workflow.analyze([WITH_NVTX], rules_dirs=[tmp_path / "rules"])
    (store,) = _stores(cache)
    assert _nvtx_state(store)[:2] == (652, [])


def test_the_store_option_always_gets_every_table(cache, tmp_path):
    if not WITH_NVTX.exists():
        pytest.skip(f"real traces not present at {TRACES}")
    target = tmp_path / "mine.duckdb"
    workflow.analyze([WITH_NVTX], store_path=target)
    assert _nvtx_state(target)[:2] == (652, [])
