"""Fast checks of the mechanisms behind round three of the hardening (issue 26); tests/corpus_round3.py runs the
cases end to end through the CLI."""

from __future__ import annotations

import io
import json
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from nsight_advisor.common import cache_safety
from nsight_advisor.store import cache as store_cache
from nsight_advisor.common.control_chars import terminal_safe
from nsight_advisor.engine.waivers import _star_match
from nsight_advisor.common.errors import ConfigError, InputError, RuleError
from nsight_advisor.ingest.kineto import json_stream
from nsight_advisor.common.regular_file import read_regular_text
from nsight_advisor.engine.run_inputs import files_read

REPO = Path(__file__).resolve().parent.parent


def test_cache_folder_is_private_and_keys_carry_the_users_secret(tmp_path, monkeypatch):
    monkeypatch.setenv("NSIGHT_ADVISOR_CACHE", str(tmp_path / "cache"))
    capture = tmp_path / "cap.sqlite"
    capture.write_bytes(b"x")
    key = store_cache.cache_key([capture])
    cache = tmp_path / "cache"
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    secret = cache / f"{cache_safety.SECRET_PREFIX}{os.geteuid()}"
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600 and len(secret.read_text()) == 32
    cache_safety._secrets.clear()
    secret.write_text("0" * 32)  # another secret: another key, so a name cannot be predicted without it
    assert store_cache.cache_key([capture]) != key


def test_a_planted_secret_is_refused(tmp_path):
    folder = tmp_path / "shared"
    folder.mkdir()
    (folder / f"{cache_safety.SECRET_PREFIX}{os.geteuid()}").symlink_to(tmp_path / "elsewhere")
    cache_safety._secrets.pop(str(folder), None)
    with pytest.raises(InputError, match="not this user's private file"):
        cache_safety.user_secret(folder)


def test_a_lock_link_is_replaced_not_followed(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("keep me")
    lock = tmp_path / "x.duckdb.lock"
    lock.symlink_to(notes)
    fd = cache_safety.open_lock(lock)
    try:
        os.ftruncate(fd, 0)
    finally:
        os.close(fd)
    assert notes.read_text() == "keep me" and not lock.is_symlink()


def test_terminal_safe_shows_controls_and_keeps_json_exact():
    text = json.dumps({"k": "a\x1b[2J\x07\x9b31m\u202eb\tc"}, ensure_ascii=False)
    safe = terminal_safe(text)
    assert not any(0x7f <= ord(c) <= 0x9f or ord(c) < 0x20 and c not in "\t\n" for c in safe)
    assert json.loads(safe) == json.loads(text)
    assert terminal_safe("line\n\ttab") == "line\n\ttab"


def test_special_files_are_refused_without_blocking(tmp_path):
    fifo = tmp_path / "query.sql"
    os.mkfifo(fifo)
    with pytest.raises(RuleError, match="not a regular file"):
        read_regular_text(fifo, RuleError)  # would block forever if opened for a plain read
    with pytest.raises(ConfigError, match="not a regular file"):
        read_regular_text(Path("/dev/zero"), ConfigError)
    big = tmp_path / "big.toml"
    big.write_bytes(b"#" * 101)
    with pytest.raises(RuleError, match="longer than"):
        read_regular_text(big, RuleError, limit_bytes=100)


def test_files_read_lists_configs_and_rule_files(tmp_path):
    (tmp_path / "nsight-advisor.toml").write_text("")
    rule = tmp_path / "rules" / "r"
    rule.mkdir(parents=True)
    (rule / "query.sql").write_text("select 1")
    (rule / "loop").symlink_to(tmp_path / "rules", target_is_directory=True)  # a cycle ends
    found = {p.name for p in files_read(rules_dirs=[tmp_path / "rules"], cwd=tmp_path)}
    assert found == {"nsight-advisor.toml", "query.sql"}


def _limit(text: str, key: str = "traceEvents"):
    return list(json_stream.iter_array(io.BytesIO(text.encode()), key, read_bytes=64))


@pytest.mark.parametrize("text, words", [
    ('{"traceEvents": [{"ts": 1e999990}]}', "beyond 1e308"),
    ('{"traceEvents": [{"pid": ' + "9" * 5000 + "}]}", "4,300 digits"),
    ('{"traceEvents": [' + "[" * 5000 + "]" * 5000 + "]}", "nested deeper than 64 levels"),
        ('{"traceEvents": [{"args": ' + "[" * 64 + "]" * 64 + "}]}", "nested deeper than 64 levels"),
])
def test_the_reader_refuses_values_past_its_limits(text, words):
    with pytest.raises(json_stream.JSONLimit, match=words):
        _limit(text)


def test_a_value_longer_than_the_limit_is_refused_before_it_is_held(monkeypatch):
    monkeypatch.setattr(json_stream, "MAX_VALUE_CHARS", 1000)
    with pytest.raises(json_stream.JSONLimit, match="longer than 1,000"):
        _limit('{"traceEvents": [{"name": "' + "a" * 5000 + '"}]}')


def test_space_between_events_is_not_held(monkeypatch):
    monkeypatch.setattr(json_stream, "MAX_VALUE_CHARS", 1000)  # 100,000 spaces held would pass it
    events = _limit('{"traceEvents": [{"a": 1},' + " " * 100_000 + '{"a": 2}' + " " * 100_000 + "]}")
    assert events == [{"a": 1}, {"a": 2}]


def test_header_members_and_their_depth():
    head = json_stream.members_before(io.BytesIO(b'{"schemaVersion": 1, "x": [[1]], "traceEvents": []}'),
                                      "traceEvents")
    assert head == {"schemaVersion": 1, "x": [[1]]}
    deep = b'{"x": ' + b"[" * 40 + b"]" * 40 + b', "traceEvents": []}'
    with pytest.raises(json_stream.JSONLimit, match="nested deeper than 32"):
        json_stream.members_before(io.BytesIO(deep), "traceEvents")


def test_star_globs_match_as_fnmatch_does():
    from fnmatch import fnmatchcase

    for pattern in ("*", "a*", "*a", "a*b", "*a*", "a*b*c", "ab", "a**b", "*ab*ab*"):
        for text in ("", "a", "ab", "abc", "aXbYc", "abab", "ba", "aab", "abXab"):
            assert _star_match(text, pattern) == fnmatchcase(text, pattern), (text, pattern)


def test_an_empty_compare_side_is_refused():
    from nsight_advisor.compare.sides import resolve_sides

    with pytest.raises(InputError, match="empty path given for HEAD"):
        resolve_sides(["a.sqlite", ""], [], [])


def test_fail_on_regression_refuses_nan(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO), "NSIGHT_ADVISOR_CACHE": str(tmp_path / "c")}
    proc = subprocess.run([sys.executable, "-m", "nsight_advisor", "compare", "a", "b", "--fail-on-regression", "nan"],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert proc.returncode == 2 and "finite" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_ctrl_c_in_query_is_a_keyboard_interrupt(tmp_path, monkeypatch):
    """Analysis.query() interrupted by SIGINT raises KeyboardInterrupt (DuckDB's own error before)."""
    capture = REPO.parent / "shared" / "traces" / "nsys" / "nsys_ai_mock.sqlite"
    if not capture.exists():
        pytest.skip(f"real trace absent at {capture}")
    import signal

    import nsight_advisor

    monkeypatch.setenv("NSIGHT_ADVISOR_CACHE", str(tmp_path / "c"))
    run = nsight_advisor.open(capture)
    run.query("select 1 as x")  # ingested before the timer starts
    timer = threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            run.query("select count(*) from range(1000000000000) t(i) where i % 7 = 3")
    finally:
        timer.cancel()


def test_a_not_ray_address_is_refused_fast():
    import http.server
    import socket
    import time

    from nsight_advisor.common.errors import NsightAdvisorError
    from nsight_advisor.store.ray_ingest import _reachable

    class Quiet(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        started = time.monotonic()
        with pytest.raises(NsightAdvisorError, match="not a Ray cluster"):
            _reachable(f"127.0.0.1:{server.server_address[1]}")
        assert time.monotonic() - started < 5
    finally:
        server.shutdown()
        server.server_close()
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        with pytest.raises(NsightAdvisorError, match="no HTTP/2 answer"):
            _reachable(f"127.0.0.1:{silent.getsockname()[1]}")


def _store_with(captures: list[tuple], ranks: list[tuple]):
    import duckdb

    con = duckdb.connect()
    con.execute("create table captures (capture_id integer, source_path varchar, source_size_bytes bigint, "
                "source_mtime_ns bigint)")
    con.execute("create table capture_distributed (capture_id integer, rank integer, world_size integer)")
    for row in captures:
        con.execute("insert into captures values (?, ?, ?, ?)", row)
    for row in ranks:
        con.execute("insert into capture_distributed values (?, ?, ?)", row)
    return con


def test_captures_claiming_one_rank_or_stored_twice_are_refused():
    from nsight_advisor.store.duplicates import refuse_merged_duplicates

    ok = _store_with([(1, "/a/r0.json", 1, 1), (2, "/a/r1.json", 1, 1)], [(1, 0, 2), (2, 1, 2)])
    refuse_merged_duplicates(ok, [1, 2], Path("s.duckdb"))
    ranks = _store_with([(1, "/a/x.json", 1, 1), (2, "/a/y.json", 1, 1)], [(1, 0, 8), (2, 0, 8)])
    with pytest.raises(InputError, match=r"x.json, y.json: each claims rank 0 of 8"):
        refuse_merged_duplicates(ranks, [1, 2], Path("s.duckdb"))
    twice = _store_with([(1, "/a/c.sqlite", 5, 7), (2, "/a/c.sqlite", 5, 7)], [])
    with pytest.raises(InputError, match=r"c.sqlite is in it 2 times"):
        refuse_merged_duplicates(twice, [1, 2], Path("s.duckdb"))
    refuse_merged_duplicates(twice, [1], Path("s.duckdb"))  # one of them alone is fine


def test_regions_skip_ranges_nested_too_deep():
    import duckdb

    from nsight_advisor.engine import regions

    con = duckdb.connect()
    con.execute("create table nvtx_ranges (capture_id integer, event_type varchar, tid bigint, start_ns bigint, "
                "end_ns bigint, depth integer)")
    con.executemany("insert into nvtx_ranges values (1, 'push_pop', 7, ?, ?, ?)",
                    [(i, 1000 - i, i) for i in range(regions.MAX_DEPTH + 1)])
    assert regions._with_ranges(con, [1]) == [1]  # depths 0..MAX_DEPTH: deep enough, still placed
    con.execute("insert into nvtx_ranges values (1, 'push_pop', 7, 500, 501, ?)", [regions.MAX_DEPTH + 1])
    assert regions._with_ranges(con, [1]) == []


def test_a_string_view_is_read_within_limits(tmp_path, monkeypatch):
    import sqlite3

    from nsight_advisor.ingest.nsys import string_views as nsys_views

    path = tmp_path / "x.sqlite"
    con = sqlite3.connect(path)
    con.execute("create table s (id integer, value text)")
    con.executemany("insert into s values (?, ?)", [(1, "k1"), (2, "k2"), ("x", "not an id")])
    con.execute("create view StringIds as select * from s")
    con.execute("create view Endless as with recursive r(id, value) as (select 1, 'a' union all "
                "select id + 1, value from r) select * from r")
    con.execute("create view Huge as select 1 as id, zeroblob(100000000) as value")
    con.commit()
    con.close()
    assert nsys_views.read_string_view(path, "StringIds") == [(1, "k1"), (2, "k2")]
    monkeypatch.setattr(nsys_views, "VIEW_READ_S", 0.5)
    monkeypatch.setattr(nsys_views, "MAX_VIEW_ROWS", 10**9)
    with pytest.raises(nsys_views.ViewUnreadable, match="within 0.5 s"):
        nsys_views.read_string_view(path, "Endless")
    with pytest.raises(nsys_views.ViewUnreadable):
        nsys_views.read_string_view(path, "Huge")


@pytest.mark.parametrize("case_id", ["kineto-deep-pg-config", "kineto-header-long-integer", "output-is-config"])
def test_quick_round_three_cases_end_to_end(case_id, tmp_path):
    """A few quick corpus cases in the default run (the whole corpus is marked slow); the first runs under the
    2 GB address-space limit the memory cases get."""
    import corpus

    case = next(c for c in corpus.CASES if c.id == case_id)
    try:
        run = corpus.run_case(case, tmp_path / case_id)
    except corpus.Unavailable as exc:
        pytest.skip(str(exc))
    finally:
        corpus._make_writable(tmp_path / case_id)
    assert not run.problems, f"{run.outcome}: {run.message}\n" + "\n".join(run.problems)
    if case_id == "kineto-deep-pg-config":
        assert run.setup.address_space_bytes == 2 << 30 and run.main.seconds < 30


# --------------------------------------------------------------------------------------------------- cache folder


def test_an_existing_cache_folder_of_this_user_is_made_private(tmp_path, monkeypatch):
    """A cache folder made before (0755, 0775, 0777 with the sticky bit) loses group and other access on the next
    run; the owner's bits stay (a read-only folder stays read-only)."""
    for mode, after in ((0o755, 0o700), (0o777, 0o700), (0o1777, 0o700), (0o555, 0o500), (0o700, 0o700)):
        folder = tmp_path / f"cache-{mode:o}"
        folder.mkdir()
        folder.chmod(mode)
        cache_safety.secure_cache_dir(folder)
        assert stat.S_IMODE(folder.stat().st_mode) == after, oct(mode)
        folder.chmod(0o700)
    monkeypatch.setenv("NSIGHT_ADVISOR_CACHE", str(tmp_path / "shared-cache"))
    (tmp_path / "shared-cache").mkdir(mode=0o777)
    (tmp_path / "shared-cache").chmod(0o777)
    cache_safety._secrets.pop(str(tmp_path / "shared-cache"), None)
    capture = tmp_path / "cap.sqlite"
    capture.write_bytes(b"x")
    store_cache.cache_key([capture])  # what every cached analyze computes first
    assert stat.S_IMODE((tmp_path / "shared-cache").stat().st_mode) == 0o700


def test_a_link_to_a_folder_of_this_user_is_followed_and_made_private(tmp_path):
    real = tmp_path / "scratch-cache"
    real.mkdir(mode=0o755)
    real.chmod(0o755)
    link = tmp_path / "cache"
    link.symlink_to(real, target_is_directory=True)
    cache_safety.secure_cache_dir(link)
    assert link.is_symlink() and stat.S_IMODE(real.stat().st_mode) == 0o700


def _another_uid() -> int:
    if os.geteuid() != 0:
        pytest.skip("making a folder of another user needs root (chown)")
    return 54321


def test_a_cache_folder_of_another_user_is_refused_with_one_line(tmp_path):
    """Directly and through a link: its owner could plant or swap entries; the folder is left as it is."""
    uid = _another_uid()
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o755)
    os.chown(theirs, uid, uid)
    with pytest.raises(InputError, match=rf"^{theirs}: the cache folder is a folder of another user \(uid {uid}\)"):
        cache_safety.secure_cache_dir(theirs)
    link = tmp_path / "cache"
    link.symlink_to(theirs, target_is_directory=True)
    with pytest.raises(InputError, match=rf"^{link}: the cache folder is a link to {theirs}, a folder of another "
                                         rf"user \(uid {uid}\); give a cache folder of your own"):
        cache_safety.secure_cache_dir(link)
    assert stat.S_IMODE(theirs.stat().st_mode) == 0o755 and theirs.stat().st_uid == uid


def test_analyze_with_a_cache_folder_of_another_user_is_exit_2(tmp_path):
    """Through the CLI: one line, exit 2, no report, nothing written into the other user's folder."""
    uid = _another_uid()
    traces = REPO.parent / "shared" / "traces" / "nsys" / "nsys_ai_mock.sqlite"
    if not traces.exists():
        pytest.skip(f"real traces absent at {traces}")
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o777)
    theirs.chmod(0o777)
    os.chown(theirs, uid, uid)
    link = tmp_path / "cache-link"
    link.symlink_to(theirs, target_is_directory=True)
    for cache in (theirs, link):
        out = tmp_path / "r.json"
        proc = subprocess.run([sys.executable, "-m", "nsight_advisor", "analyze", str(traces), "-q", "-o", str(out)],
                              capture_output=True, text=True, cwd=REPO, timeout=120,
                              env={**os.environ, "NSIGHT_ADVISOR_CACHE": str(cache), "PYTHONPATH": str(REPO)})
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.count("\n") == 1 and "a folder of another user" in proc.stderr, proc.stderr
        assert not out.exists() and list(theirs.iterdir()) == []
