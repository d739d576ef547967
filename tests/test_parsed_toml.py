"""The rules' TOML parsed once per text and kept in the support folder (common/parsed_toml.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib

import pytest

from nsight_advisor.common.resources import builtin_rules_dir
from nsight_advisor.common import parsed_toml

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    """An empty cache folder and no parse kept in this process."""
    monkeypatch.setenv("NSIGHT_ADVISOR_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(parsed_toml, "_kept", None)
    monkeypatch.setattr(parsed_toml, "_changed", False)
    return tmp_path / "cache" / "support" / parsed_toml.FILE_NAME


def _forget(monkeypatch) -> None:
    """As a new process: the kept parses read from the file again."""
    monkeypatch.setattr(parsed_toml, "_kept", None)
    monkeypatch.setattr(parsed_toml, "_changed", False)


def test_every_builtin_rule_parses_as_tomllib_parses_it_from_the_kept_file(fresh, monkeypatch):
    texts = [p.read_text() for p in sorted(builtin_rules_dir().glob("*/rule.toml"))]
    assert len(texts) >= 20
    reference = [tomllib.loads(t) for t in texts]
    first = [parsed_toml.loads(t) for t in texts]
    parsed_toml.save()
    kept = json.loads(fresh.read_text())
    assert len(kept) == len(set(texts))
    _forget(monkeypatch)
    monkeypatch.setattr(parsed_toml.tomllib, "loads", lambda text: pytest.fail("parsed again"))
    again = [parsed_toml.loads(t) for t in texts]
    assert again == first == reference
    # every call gives a new object: a caller's change does not reach the next one
    again[0]["id"] = "changed"
    assert parsed_toml.loads(texts[0])["id"] != "changed"


def test_what_json_cannot_carry_is_parsed_every_time(fresh, monkeypatch):
    text = 'when = 1979-05-27T07:32:00Z\nn = 1\n'
    assert parsed_toml.loads(text) == tomllib.loads(text)
    parsed_toml.save()
    assert not fresh.exists()  # nothing new was kept
    assert parsed_toml.loads("x = inf\n") == {"x": float("inf")}
    assert parsed_toml.loads("x = 1.0\ny = 1\n") == {"x": 1.0, "y": 1}
    assert isinstance(parsed_toml.loads("x = 1.0\n")["x"], float)


def test_an_edited_text_is_a_new_entry_and_a_bad_one_raises_as_tomllib(fresh):
    assert parsed_toml.loads('a = "one"\n') == {"a": "one"}
    assert parsed_toml.loads('a = "two"\n') == {"a": "two"}
    with pytest.raises(tomllib.TOMLDecodeError):
        parsed_toml.loads('a = "unclosed\n')


@pytest.mark.parametrize("damage", ["not json", "[1, 2]", '{"k": 3}', ""])
def test_a_damaged_file_is_an_empty_one(fresh, monkeypatch, damage):
    fresh.parent.mkdir(parents=True)
    fresh.write_text(damage)
    assert parsed_toml.loads('a = 1\n') == {"a": 1}
    parsed_toml.save()
    assert list(json.loads(fresh.read_text()).values()) == ['{"a": 1}']


def test_a_planted_entry_is_not_read_through_a_link(fresh, monkeypatch, tmp_path):
    text = 'a = 1\n'
    planted = tmp_path / "planted.json"
    import hashlib

    planted.write_text(json.dumps({hashlib.sha256(text.encode()).hexdigest(): '{"a": 666}'}))
    fresh.parent.mkdir(parents=True)
    fresh.symlink_to(planted)
    assert parsed_toml.loads(text) == {"a": 1}
    # the same file, not a link: read (it is this user's)
    fresh.unlink()
    fresh.write_text(planted.read_text())
    _forget(monkeypatch)
    assert parsed_toml.loads(text) == {"a": 666}


def test_an_analysis_keeps_the_rules_parses_for_the_next_run(tmp_path, traces_dir):
    """A cold analyze writes the file; the next one reads every rule from it (the parser is never called)."""
    export = traces_dir / "nsys" / "csc746_vecadd.sqlite"
    env = {**os.environ, "NSIGHT_ADVISOR_CACHE": str(tmp_path / "cache"), "PYTHONPATH": REPO}
    cmd = [sys.executable, "-m", "nsight_advisor", "analyze", str(export), "--no-cache", "-q", "--format", "json",
           "-o"]
    subprocess.run([*cmd, str(tmp_path / "a.json")], env=env, check=True, capture_output=True, cwd=tmp_path)
    kept = tmp_path / "cache" / "support" / parsed_toml.FILE_NAME
    assert len(json.loads(kept.read_text())) >= 20
    # the principles catalog is parsed by its own layer, which cannot use the kept parses (pyproject.toml's layers)
    probe = ("import sys, runpy, tomllib\n"
             "parse = tomllib.loads\n"
             "def refuse(text):\n"
             "    if '[judgement]' in text or '[finding]' in text: raise SystemExit('parsed a rule again')\n"
             "    return parse(text)\n"
             "tomllib.loads = refuse\n"
             "sys.argv = ['nsight_advisor', *sys.argv[1:]]\n"
             "runpy.run_module('nsight_advisor', run_name='__main__')\n")
    done = subprocess.run([sys.executable, "-c", probe, *cmd[3:], str(tmp_path / "b.json")], env=env,
                          capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    findings = [json.loads((tmp_path / f).read_text())["findings"] for f in ("a.json", "b.json")]
    assert findings[0] and findings[0] == findings[1]
