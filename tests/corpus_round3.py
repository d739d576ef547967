"""Round three of the robustness corpus (issue 26): the cases that broke a promise, one builder each.

Imported at the end of ``tests/corpus.py`` (its helpers are defined by then) and appended to its ``CASES``.
Big inputs are written on the fly into the case's folder; the memory cases run under a 2 GB address-space
limit (``Setup.address_space_bytes``).
"""

from __future__ import annotations

import gzip
import json
import os
import sys
from pathlib import Path

from corpus import (MOCK, Case, Run, Setup, Unavailable, _cli, _copy, _rule_folder, _trace)

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


CASES: tuple[Case, ...] = (*CACHE_CASES, *OUTPUT_CASES)

__all__ = ["CASES", "TWO_GB"]
