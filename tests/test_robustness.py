"""The robustness corpus (tests/corpus.py) through the CLI: malformed and hostile input never crashes, never loses
data, never runs. One test per case; when one pytest run has run every case, docs/robustness.md must match what
it would say (``python -m tools.gen_docs --robustness`` rewrites it)."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import corpus
import pytest

REQUIRED_KINDS = {
    # the list, each with the case ids that cover it
    "zero-byte files": ["zero-byte-sqlite", "zero-byte-ncu-rep", "zero-byte-csv"],
    "truncated at several offsets": ["sqlite-truncated-100", "sqlite-truncated-half", "ncu-rep-truncated-1k",
                                     "ncu-rep-truncated-tail", "nsys-rep-truncated", "store-truncated"],
    "wrong magic": ["sqlite-wrong-magic", "ncu-rep-wrong-magic"],
    "directory or missing path": ["path-directory", "path-missing"],
    "SQLite with corrupted pages": ["sqlite-corrupt-kernel-page", "sqlite-corrupt-schema"],
    "SQLite without nsys tables": ["sqlite-not-nsys", "sqlite-no-tables"],
    "expected columns missing": ["sqlite-missing-kernel-name", "sqlite-missing-start"],
    "wrong types": ["sqlite-text-in-integers", "sqlite-blob-and-real"],
    "NULL names": ["sqlite-null-names"],
    "end < start": ["sqlite-end-before-start"],
    "negative or absurd values": ["sqlite-negative-values", "sqlite-absurd-values"],
    "duplicate correlation ids": ["sqlite-duplicate-kernels", "sqlite-duplicate-runtime"],
    "1 MB kernel names": ["sqlite-huge-kernel-name"],
    "invalid UTF-8": ["sqlite-invalid-utf8", "csv-invalid-utf8"],
    "HTML and script in every string column": ["sqlite-hostile-strings", "csv-hostile-names", "path-html-name"],
    ".ncu-rep garbage and truncation": ["ncu-rep-garbage", "ncu-rep-truncated-half"],
    "CSV empty, header-only, binary, gzip, ragged, BOM, delimiter, huge fields": [
        "zero-byte-csv", "csv-header-only", "csv-binary", "csv-gzip", "csv-ragged", "csv-bom", "csv-semicolon",
        "csv-huge-field"],
    "rule folders: bad TOML, unknown keys, SQL errors": ["rules-bad-toml", "rules-unknown-key", "rules-sql-error"],
    "rule SQL that writes, attaches, copies or reads files": ["rules-sql-write", "rules-sql-attach",
                                                              "rules-sql-copy-to", "rules-sql-read-file"],
    "queries returning millions of rows": ["rules-million-rows"],
    # the second round of hostile inputs, class by class
    "-o/--store resolving to an input": ["output-is-input", "output-symlink-to-input", "output-hardlink-to-input",
                                         "store-is-input"],
    "FIFOs, devices and stdout as -o": ["output-fifo", "output-char-device", "output-dash"],
    "damaged cache entries and user stores": ["cache-store-truncated", "cache-store-zeroed", "cache-store-random",
                                              "store-user-damaged"],
    "StringIds duplicates and WAL exports": ["sqlite-stringids-duplicate-ids", "sqlite-wal-pending-rows"],
    "rule folders with directory cycles": ["rules-dir-symlink-cycle"],
    "input-caused exit 3": ["sqlite-renamed-kernel-column", "sqlite-renamed-runtime-column",
                            "sqlite-renamed-stringids-column", "sqlite-text-start-end", "sqlite-int64-extremes",
                            "sqlite-virtual-table", "sqlite-enum-text-ids", "sqlite-enum-null-ids",
                            "sqlite-stringids-text-ids", "sqlite-gpu-facts-text", "sqlite-byte-flips-0",
                            "ncu-rep-byte-flips-0", "capture-replaced-during-run", "report-disk-full",
                            "path-non-utf8-name", "interrupt-sigint"],
    "lifecycle": ["interrupt-sigterm", "lock-held-by-stopped-process", "output-long-name", "store-long-name"],
    "smaller promises": ["strings-with-control-chars", "query-copy-to", "query-install-extension",
                         "rules-template-globals", "rules-template-huge-width", "rules-judge-not-imported",
                         "config-time-limit-inf", "config-time-limit-nan", "stdout-closed",
                         "kernels-without-device-id", "path-symlink-loop", "config-is-directory", "csv-utf16"],
    # round three (issue 26), one entry per class of its list
    "1 links in the cache folder": ["cache-store-link-to-capture", "cache-store-link-to-notes", "cache-results-link",
                                    "cache-secret-planted", "cache-folder-open-to-others",
                                    "cache-folder-of-another-user", "cache-folder-link-to-another-user"],
    "2-5, 11 Kineto JSON past the reader's limits": [
        "kineto-deep-pg-config", "kineto-deep-device-properties", "kineto-deep-event-args",
        "kineto-header-long-integer",
        "kineto-event-long-integer", "kineto-header-gib-string", "kineto-huge-exponents",
        "kineto-gib-space-between-events", "kineto-gib-member-after-events"],
    "6 -o naming an input the run reads": ["output-is-config", "output-is-rule-file", "output-is-found-config"],
    "7 silently wrong": ["kineto-duplicate-ranks", "ingest-twice", "store-capture-twice", "sqlite-stringids-view"],
    "8 numeric options": ["compare-fail-on-regression-nan", "compare-fail-on-regression-inf", "config-param-nan",
                          "set-nan"],
    "9 exit 3 on input": ["nvtx-nested-20000", "nvtx-nested-200000", "nvtx-flat-200000", "non-utf8-names-in-folders",
                          "rules-query-dev-zero", "ray-cluster-stopped", "ray-cluster-killed",
                          "ray-cluster-killed-storing"],
    "10 --ray-address not Ray": ["ray-address-http-server", "ray-address-silent-listener"],
    "12 special files": ["rules-query-fifo", "rules-toml-fifo", "rules-cases-fifo", "config-fifo",
                         "config-found-fifo"],
    "13 terminal escapes": ["controls-compare-rules"],
    "14 compare's helper": ["compare-killed-helper-ends", "compare-sigterm-helper-cleans"],
    "15 smaller": ["stdout-closed-query", "stdout-closed-info", "stdout-closed-rules", "kineto-non-utf8-name",
                   "waivers-100000", "kineto-event-long-integer"],
}

#: The round-three cases whose runs are held to a 2 GB address space (RLIMIT_AS): the memory cases.
MEMORY_CASES = {"kineto-deep-pg-config", "kineto-deep-device-properties", "kineto-deep-event-args",
                "kineto-header-gib-string",
                "kineto-gib-space-between-events", "kineto-gib-member-after-events"}


def _params():
    return [pytest.param(case, id=case.id, marks=pytest.mark.slow) for case in corpus.CASES]


@pytest.fixture(scope="session")
def corpus_runs(request, tmp_path_factory):
    """Runs every selected corpus case once (in parallel where cores allow). NSIGHT_ADVISOR_CORPUS_JOBS sets the
    number of workers."""
    wanted = [item.callspec.params["case"] for item in request.session.items
              if getattr(item, "originalname", "") == "test_corpus_case" and hasattr(item, "callspec")]
    jobs = int(os.environ.get("NSIGHT_ADVISOR_CORPUS_JOBS") or max(1, (os.cpu_count() or 2) // 2))
    workdirs = {case.id: tmp_path_factory.mktemp(case.id) for case in wanted}

    def one(case):
        try:
            return corpus.run_case(case, workdirs[case.id])
        except corpus.Unavailable as exc:
            return exc
        finally:
            corpus._make_writable(workdirs[case.id])

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        results = dict(zip([c.id for c in wanted], pool.map(one, wanted)))
    return results


@pytest.mark.parametrize("case", _params())
def test_corpus_case(case, corpus_runs):
    """One malformed or hostile input: rejected cleanly (exit 2, one line) or analyzed with notes; never more."""
    run = corpus_runs[case.id]
    if isinstance(run, corpus.Unavailable):
        pytest.skip(str(run))
    details = "\n  ".join(run.problems)
    assert not run.problems, f"{case.id} ({case.what}): {run.outcome}: {run.message}\n  {details}"


@pytest.mark.slow
def test_robustness_doc_is_current(corpus_runs):
    """docs/robustness.md says what this run of the whole corpus saw (the test never writes it)."""
    runs = [r for r in corpus_runs.values() if isinstance(r, corpus.Run)]
    if not corpus.TRACES.exists() or {r.case.id for r in runs} != {c.id for c in corpus.CASES}:
        pytest.skip("the doc is checked only when one run has run every corpus case on the real traces")
    assert corpus.DOC.read_text(encoding="utf-8") == corpus.render_doc(corpus.ordered(runs), {}), (
        "docs/robustness.md is stale: run `python -m tools.gen_docs --robustness`")


def test_corpus_size_and_coverage():
    """At least 40 cases, unique ids, and every kind of input the issue lists is covered."""
    ids = [c.id for c in corpus.CASES]
    assert len(ids) >= 40
    assert len(ids) == len(set(ids))
    for kind, cases in REQUIRED_KINDS.items():
        assert set(cases) <= set(ids), f"{kind}: {set(cases) - set(ids)} missing from the corpus"
    assert {c.expect for c in corpus.CASES} <= {"rejected", "analyzed", "either", "interrupted"}
    assert {c.group for c in corpus.CASES} <= set(corpus.GROUPS), "a case's class is missing from corpus.GROUPS"


def test_memory_cases_run_under_a_2_gb_address_space(tmp_path):
    """Each memory case's runs get RLIMIT_AS = 2 GB (its builder says so; the runner applies it)."""
    by_id = {c.id: c for c in corpus.CASES}
    for case_id in sorted(MEMORY_CASES):
        assert getattr(by_id[case_id].build, "address_space_bytes", None) == 2 << 30, case_id
    setup = by_id["kineto-deep-pg-config"].build(tmp_path)  # and the builder puts it on the run
    assert setup.address_space_bytes == 2 << 30
    assert corpus._limit_address_space(2 << 30) is not None and corpus._limit_address_space(None) is None


def test_corpus_builders_are_deterministic(tmp_path):
    """The generator writes the same bytes twice (random bytes come from seeded generators)."""
    if not corpus.TRACES.exists():
        pytest.skip(f"real traces absent at {corpus.TRACES}")
    for case in corpus.CASES:
        if case.group not in ("sqlite", "ncu-rep", "csv"):
            continue
        digests = []
        for n in (1, 2):
            folder = tmp_path / f"{case.id}-{n}"
            folder.mkdir()
            try:
                setup = case.build(folder)
            except corpus.Unavailable:
                break
            finally:
                corpus._make_writable(folder)
            digests.append([corpus._digest(p) for p in setup.watched])
        if len(digests) == 2:
            assert digests[0] == digests[1], case.id


def test_html_scanner_catches_injection():
    """The HTML check itself: it flags an unescaped payload and passes the escaped one."""
    bad = corpus._HtmlScan()
    bad.feed('<html><body><td><script>alert("k")</script><img src=x onerror=alert(1)></td></body></html>')
    assert bad.problems
    good = corpus._HtmlScan()
    good.feed('<html><body><td>&lt;script&gt;alert("k")&lt;/script&gt;</td></body></html>')
    assert not good.problems
    assert '<script>alert("k")</script>' in "".join(good.text)
