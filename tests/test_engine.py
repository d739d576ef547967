"""The rule engine: outcomes, impact, ranking, safety (sandbox, time limit, bounded rows), config, load errors."""

from __future__ import annotations

import json
import textwrap
import time
from pathlib import Path

import pytest

from nsight_advisor.engine.analyze import analyze_with_rules, finding_rank, run_analysis
from nsight_advisor.engine.rules import load_rule, load_rules, query_params
from nsight_advisor.common.errors import ConfigError, RuleError
from nsight_advisor.store.database import insert_kernels
from tests.conftest import TRACES

RULE_TOML = '''\
id = "{id}"
name = "{name}"
title = "Kernels longer than a budget"
category = "timeline"
severity = "{severity}"
status = "preview"
principles = ["gpu-background.understanding-performance.arithmetic-intensity"]
{requires}
[params.max_ms]
type = "float"
default = 1.0
unit = "ms"
why = "test budget"

[judgement]
column = "{column}"
op = ">"
param = "max_ms"

[finding]
group_by = "{group_by}"
impact_column = "impact_ns"
evidence_columns = {evidence}
evidence_limit = {limit}
{severity_by}
message = "{message}"
fix = "split {{top.kernel}}"

[docs]
what = "w"
why = "y"
fix = "f"
limits = "l"
'''

QUERY = """\
select k.short_name as kernel, count(*) as launches, max(k.duration_ns) / 1e6 as max_ms,
       cast(sum(greatest(k.duration_ns - $max_ms * 1e6, 0)) as bigint) as impact_ns
from kernels k
where k.capture_id = $capture_id
group by k.short_name
"""

REQUIRES_KERNELS = '\n[[requires]]\ntable = "kernels"\ncapture_option = "nsys profile --trace=cuda"\n'


def write_rule(root: Path, name: str, *, query: str = QUERY, rule_id: str = "NA951", severity: str = "warning",
               requires: str = REQUIRES_KERNELS, column: str = "max_ms", group_by: str = "",
               evidence: str = '["kernel", "launches", "max_ms", "impact_ns"]', limit: int = 20,
               severity_by: str = "", message: str = "{rows} kernel(s) over {threshold} ms: {top.kernel} "
               "at {observed:.2f} ms ({impact})", extra: str = "") -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "rule.toml").write_text(RULE_TOML.format(
        id=rule_id, name=name, severity=severity, requires=requires, column=column, group_by=group_by,
        evidence=evidence, limit=limit, severity_by=severity_by, message=message) + extra)
    (folder / "query.sql").write_text(query)
    return folder


def add_capture(con, capture_id: int = 1, duration_ns: int = 10_000_000, name: str = "t.sqlite") -> None:
    con.execute("insert into captures (capture_id, source_path, source_name, format, tool, tool_version, "
                "start_ns, end_ns, duration_ns) values (?, '/home/someone/t.sqlite', ?, 'nsys-sqlite', 'nsys', "
                "'2024.5', 0, ?, ?)", [capture_id, name, duration_ns, duration_ns])


def add_kernel(con, name: str, duration_ns: int, capture_id: int = 1, start_ns: int = 0) -> None:
    insert_kernels(con, [dict(capture_id=capture_id, device_id=0, name=name, short_name=name, start_ns=start_ns,
                              end_ns=start_ns + duration_ns, duration_ns=duration_ns)])


@pytest.fixture
def store(memory_store):
    add_capture(memory_store)
    add_kernel(memory_store, "stencil", 3_000_000)               # 2 ms over a 1 ms budget
    add_kernel(memory_store, "stencil", 500_000, start_ns=3_000_000)
    add_kernel(memory_store, "reduce", 1_500_000, start_ns=4_000_000)  # 0.5 ms over
    add_kernel(memory_store, "tiny", 1_000, start_ns=6_000_000)
    return memory_store


@pytest.fixture(autouse=True)
def _no_project_config(tmp_path, monkeypatch):
    # run_analysis reads ./nsight-advisor.toml; run every test from an empty folder.
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)


def run(con, rules_dir: Path, **kw):
    return run_analysis(con, [1], rules_dirs=[rules_dir], include_builtin=False, **kw)


# --- outcomes, impact, ranking ---------------------------------------------------------------------------

def test_findings_carry_impact_evidence_principles_and_message(store, tmp_path):
    write_rule(tmp_path / "r", "long-kernels")
    result = run(store, tmp_path / "r")
    (f,) = result.findings
    # stencil 2 ms + reduce 0.5 ms beyond 1 ms = 2.5 ms of the 6.001 ms analysis window (first kernel start to
    # last kernel end) on device 0, the only device that ran the kernels
    assert f.impact_ns == 2_500_000 and f.impact_pct == 41.66
    assert f.device_id == 0 and f.impact_basis == "analysis window"
    assert f.evidence_total_rows == 2
    assert [e["kernel"] for e in f.evidence] == ["stencil", "reduce"]
    assert list(f.evidence[0]) == ["kernel", "launches", "max_ms", "impact_ns"]
    assert f.message == "2 kernel(s) over 1.0 ms: stencil at 3.00 ms (2.5 ms)"
    assert f.fix == "split stencil"
    assert f.observed == 3.0 and f.threshold == 1.0
    assert f.principles[0].url.endswith("#understand-perf")
    assert [(o.rule_name, o.status) for o in result.outcomes] == [("long-kernels", "findings")]


def test_clean_and_skipped_outcomes(memory_store, tmp_path):
    write_rule(tmp_path / "r", "long-kernels")
    add_capture(memory_store)
    memory_store.execute("insert into capture_missing values (1, 'kernels', 'no CUPTI_ACTIVITY_KIND_KERNEL table', "
                         "'nsys profile --trace=cuda')")
    (o,) = run(memory_store, tmp_path / "r").outcomes
    assert o.status == "skipped"
    assert "no rows in kernels" in o.reason and "CUPTI_ACTIVITY_KIND_KERNEL" in o.reason
    assert o.capture_option == "nsys profile --trace=cuda"
    add_kernel(memory_store, "tiny", 1000)
    (o,) = run(memory_store, tmp_path / "r").outcomes
    assert o.status == "clean" and o.reason == ""


def test_group_by_makes_one_finding_per_group_ranked_by_impact(store, tmp_path):
    write_rule(tmp_path / "r", "long-kernels", group_by="kernel")
    findings = run(store, tmp_path / "r").findings
    assert [(f.evidence[0]["kernel"], f.impact_ns) for f in findings] == [("stencil", 2_000_000), ("reduce", 500_000)]


def test_findings_of_all_rules_are_ranked_by_impact(store, tmp_path):
    write_rule(tmp_path / "r", "small-impact", rule_id="NA951",
               query=QUERY.replace("as impact_ns", "/ 100 as impact_ns"))
    write_rule(tmp_path / "r", "big-impact", rule_id="NA952")
    names = [f.rule_name for f in run(store, tmp_path / "r").findings]
    assert names == ["big-impact", "small-impact"]


@pytest.mark.parametrize("duration_ns, expected", [(1_000_000_000, "info"), (100_000_000, "warning"),
                                                   (10_000_000, "error")])
def test_severity_follows_impact_pct(memory_store, tmp_path, duration_ns, expected):
    add_capture(memory_store, duration_ns=duration_ns)
    add_kernel(memory_store, "stencil", 3_000_000)  # 2 ms beyond the budget: 0.2%, 2%, 20% of the window
    add_kernel(memory_store, "tiny", 1_000, start_ns=duration_ns - 1_000)  # the window ends with the capture
    write_rule(tmp_path / "r", "long-kernels", severity="info",
               severity_by="severity_by_impact_pct = { warning = 1.0, error = 10.0 }")
    (f,) = run(memory_store, tmp_path / "r").findings
    assert f.severity == expected


def test_judge_py_decides_when_given(store, tmp_path):
    folder = write_rule(tmp_path / "r", "long-kernels")
    text = (folder / "rule.toml").read_text()
    start = text.index("[judgement]")
    (folder / "rule.toml").write_text(text[:start] + text[text.index("[finding]"):])
    (folder / "judge.py").write_text("def judge(row, params):\n    return row['kernel'] == 'reduce'\n")
    (f,) = run(store, tmp_path / "r").findings
    assert [e["kernel"] for e in f.evidence] == ["reduce"] and f.impact_ns == 500_000


def test_multi_capture_outcome_and_findings(store, tmp_path):
    add_capture(store, capture_id=2, name="second.sqlite")
    add_kernel(store, "other", 4_000_000, capture_id=2)
    write_rule(tmp_path / "r", "long-kernels")
    result = run_analysis(store, [1, 2], rules_dirs=[tmp_path / "r"], include_builtin=False)
    assert sorted(f.capture_id for f in result.findings) == [1, 2]
    assert [c["source_name"] for c in result.captures] == ["t.sqlite", "second.sqlite"]
    assert len(result.outcomes) == 1 and result.outcomes[0].findings == 2


def test_result_is_json_and_hides_paths(store, tmp_path):
    write_rule(tmp_path / "r", "long-kernels")
    d = run(store, tmp_path / "r").to_dict()
    text = json.dumps(d)
    assert "/home/someone" not in text and "source_path" not in text
    assert set(d) >= {"tool", "captures", "findings", "outcomes"}
    f = d["findings"][0]
    assert set(f) >= {"rule_id", "rule_name", "severity", "title", "message", "capture_id", "impact_ns",
                      "impact_pct", "evidence", "principles", "fix"}
    assert set(f["principles"][0]) == {"id", "title", "url"}
    assert set(d["outcomes"][0]) >= {"rule_id", "rule_name", "status", "reason"}
    assert d["tool"]["name"] == "nsight-advisor"


# --- one broken rule never stops the others --------------------------------------------------------------

@pytest.mark.parametrize("bad_sql", [
    "select nonexistent_column as max_ms, 0 as impact_ns from kernels",
    "selec broken from",
    "select 1 as max_ms from no_such_table",
    "select 'x' as kernel, 1 as launches, 5.0 as max_ms, 'not a number' as impact_ns",
])
def test_broken_sql_is_errored_and_every_other_rule_runs(store, tmp_path, bad_sql):
    write_rule(tmp_path / "r", "a-good", rule_id="NA951")
    write_rule(tmp_path / "r", "b-broken", rule_id="NA952", query=bad_sql)
    write_rule(tmp_path / "r", "c-good", rule_id="NA953")
    result = run(store, tmp_path / "r")
    status = {o.rule_name: o for o in result.outcomes}
    assert status["b-broken"].status == "errored" and status["b-broken"].reason
    assert status["a-good"].status == "findings" and status["c-good"].status == "findings"
    assert {f.rule_name for f in result.findings} == {"a-good", "c-good"}


def test_evidence_column_missing_at_run_time_is_errored(store, tmp_path):
    write_rule(tmp_path / "r", "long-kernels", evidence='["kernel", "nope"]')
    (o,) = run(store, tmp_path / "r").outcomes
    assert o.status == "errored" and "nope" in o.reason


def test_unknown_message_placeholder_is_errored(store, tmp_path):
    write_rule(tmp_path / "r", "long-kernels", message="{top.nope} {rows}")
    (o,) = run(store, tmp_path / "r").outcomes
    assert o.status == "errored" and "nope" in o.reason


# --- safety: no writes, no files, a time limit, bounded rows ---------------------------------------------

@pytest.mark.parametrize("sql", [
    "copy (select 1 as max_ms) to '{out}'",
    "attach '{out}' as other",
    "install httpfs",
    "load httpfs",
    "select * from read_csv('/etc/passwd')",
    "select content as kernel, 1 as launches, 5.0 as max_ms, 1 as impact_ns from read_text('/etc/hostname')",
    "select 'x' as kernel, 1 as launches, 5.0 as max_ms, 1 as impact_ns; copy kernels to '{out}'",
    "create table evil as select 1",
    "insert into kernel_rows (capture_id) values (1)",
    "select 'x' as kernel, 1 as launches, 5.0 as max_ms, 1 as impact_ns from glob('/etc/*')",
])
def test_rule_sql_cannot_write_or_reach_files(store, tmp_path, sql):
    out = tmp_path / "leak.csv"
    write_rule(tmp_path / "r", "evil", query=sql.format(out=out))
    write_rule(tmp_path / "r", "good", rule_id="NA952")
    result = run(store, tmp_path / "r")
    status = {o.rule_name: o.status for o in result.outcomes}
    assert status == {"evil": "errored", "good": "findings"}
    assert not out.exists()
    assert store.execute("select count(*) from kernels").fetchone()[0] == 4


def test_a_slow_rule_is_stopped_at_the_time_limit(store, tmp_path):
    slow = ("select 'x' as kernel, count(*) as launches, 5.0 as max_ms, 1 as impact_ns "
            "from range(1000000000000) a where a.range % 7 = $capture_id")
    write_rule(tmp_path / "r", "slow", query=slow)
    write_rule(tmp_path / "r", "good", rule_id="NA952")
    started = time.monotonic()
    result = run(store, tmp_path / "r", time_limit_s=0.5)
    assert time.monotonic() - started < 20
    status = {o.rule_name: o for o in result.outcomes}
    assert status["slow"].status == "errored" and "time limit" in status["slow"].reason
    assert status["good"].status == "findings"


def test_millions_of_firing_rows_keep_evidence_bounded(store, tmp_path):
    # one name per row: rows tied on impact show in name order, and seven rows of one name would combine their
    # claims on that kernel (1 - (1 - s)^7), less than their sum
    many = ("select 'k' || r.range as kernel, 1 as launches, 5.0 as max_ms, 2 as impact_ns "
            "from range(1000000) r where $capture_id = 1")
    write_rule(tmp_path / "r", "many", query=many, limit=7)
    (f,) = run(store, tmp_path / "r").findings
    assert f.evidence_total_rows == 1_000_000
    assert len(f.evidence) == 7
    assert f.impact_ns == 2_000_000


# --- configuration ---------------------------------------------------------------------------------------

def test_set_override_changes_the_threshold(store, tmp_path):
    write_rule(tmp_path / "r", "long-kernels")
    (f,) = run(store, tmp_path / "r", overrides=["long-kernels.max_ms=2"]).findings
    assert f.threshold == 2.0 and f.impact_ns == 1_000_000
    assert run(store, tmp_path / "r", overrides=["NA951.max_ms=10"]).findings == []


@pytest.mark.parametrize("override, words", [
    ("long-kernels.max_ms=abc", ["long-kernels.max_ms=abc", "expected float", "'abc'"]),
    ("nope.max_ms=1", ["unknown rule 'nope'", "rules list"]),
    ("long-kernels.nope=1", ["no parameter 'nope'", "max_ms"]),
    ("long-kernels=1", ["RULE.PARAM=VALUE"]),
])
def test_bad_overrides_name_the_key_and_the_fix(store, tmp_path, override, words):
    write_rule(tmp_path / "r", "long-kernels")
    with pytest.raises(ConfigError) as exc:
        run(store, tmp_path / "r", overrides=[override])
    for word in words:
        assert word in str(exc.value)


def test_config_file_params_select_and_ignore(store, tmp_path):
    write_rule(tmp_path / "r", "long-kernels", rule_id="NA951")
    write_rule(tmp_path / "r", "other", rule_id="NA952")
    Path("nsight-advisor.toml").write_text(f'rules_dirs = ["{tmp_path / "r"}"]\nignore = ["other"]\n'
                                           '[rules.NA951]\nmax_ms = 2\n')
    result = run_analysis(store, [1], include_builtin=False)
    assert [o.rule_name for o in result.outcomes] == ["long-kernels"]
    assert result.findings[0].threshold == 2.0
    result = run_analysis(store, [1], include_builtin=False, select=["other"], ignore=())
    assert [o.rule_name for o in result.outcomes] == []  # selected, but the config ignores it
    Path("nsight-advisor.toml").write_text(f'rules_dirs = ["{tmp_path / "r"}"]\n')
    result = run_analysis(store, [1], include_builtin=False, select=["other"])
    assert [o.rule_name for o in result.outcomes] == ["other"]


def test_unknown_rules_in_select_or_ignore_are_config_errors(store, tmp_path):
    write_rule(tmp_path / "r", "long-kernels")
    with pytest.raises(ConfigError, match="--select: unknown rule 'NA999'"):
        run(store, tmp_path / "r", select=["NA999"])
    with pytest.raises(ConfigError, match="--ignore: unknown rule 'nope'"):
        run(store, tmp_path / "r", ignore=["nope"])
    Path("nsight-advisor.toml").write_text('ignore = ["typo"]\n')
    with pytest.raises(ConfigError, match="nsight-advisor.toml: key 'ignore': unknown rule 'typo'"):
        run(store, tmp_path / "r")


def test_pyproject_section_is_read(store, tmp_path):
    write_rule(tmp_path / "r", "long-kernels")
    Path("pyproject.toml").write_text(f'[project]\nname = "x"\n[tool.nsight-advisor]\nrules_dirs = ["{tmp_path / "r"}"]\n'
                                      '[tool.nsight-advisor.rules.long-kernels]\nmax_ms = 2.0\n')
    (f,) = run_analysis(store, [1], include_builtin=False).findings
    assert f.threshold == 2.0


@pytest.mark.parametrize("text, words", [
    ("selct = []\n", ["selct", "unknown key"]),
    ("select = \"NA101\"\n", ["select", "list of strings"]),
    ("[rules.long-kernels]\nmax_ms = \"fast\"\n", ["rules.long-kernels.max_ms", "expected float", "remove the quotes"]),
    ("[rules.nope]\nx = 1\n", ["rules.nope", "unknown rule"]),
    ("select = [\n", ["invalid TOML"]),
])
def test_bad_config_names_the_file_key_and_fix(store, tmp_path, text, words):
    write_rule(tmp_path / "r", "long-kernels")
    Path("nsight-advisor.toml").write_text(text)
    with pytest.raises(ConfigError) as exc:
        run(store, tmp_path / "r")
    assert "nsight-advisor.toml" in str(exc.value)
    for word in words:
        assert word in str(exc.value)


# --- load-time validation --------------------------------------------------------------------------------

def test_a_bad_default_names_its_line(tmp_path):
    # the line is found only when the default is wrong (rules.py passes locate() as a function: every load of every
    # rule's parameters read its file again for it)
    folder = write_rule(tmp_path / "r", "long-kernels")
    text = (folder / "rule.toml").read_text().replace("default = 1.0", 'default = "1.0"')
    (folder / "rule.toml").write_text(text)
    line = text.splitlines().index('default = "1.0"') + 1
    with pytest.raises(RuleError, match=rf"rule\.toml:{line}: key 'params\.max_ms\.default': expected float"):
        load_rule(folder)


@pytest.mark.parametrize("edit, words", [
    (lambda t: t + "\nsevrity = 'error'\n", ["sevrity", "unknown key"]),
    (lambda t: t.replace('severity = "warning"', 'severity = "fatal"'), ["severity", "'fatal'", "info, warning, error"]),
    (lambda t: t.replace("default = 1.0", 'default = "1.0"'), ["params.max_ms.default", "expected float", "remove the quotes"]),
    (lambda t: t.replace("evidence_limit = 20", "evidence_limit = '20'"), ["finding.evidence_limit", "integer"]),
    (lambda t: t.replace('param = "max_ms"', 'param = "min_ms"'), ["judgement.param", "min_ms", "[params.min_ms]"]),
    (lambda t: t.replace('name = "long-kernels"', 'name = "short-kernels"'), ["name", "folder name"]),
    (lambda t: t.replace('what = "w"\n', ""), ["docs.what", "missing"]),
    (lambda t: t.replace('id = "NA951"', 'id = "rule-1"'), ["'id'", "rule code"]),
    (lambda t: t.replace('table = "kernels"', 'table = "kernel"'), ["requires[0].table", "not a normalized table"]),
    (lambda t: t.replace("[judgement]", "[judgment]"), ["judgement", "missing"]),
    (lambda t: t.replace('title = "Kernels', 'title = "Kernels\n'), ["invalid TOML"]),
    (lambda t: t.replace("evidence_limit = 20", 'evidence_limit = 20\nimpact_part = "copy"\nimpact_copies = ["h2h"]'),
     ["finding.impact_copies", "'h2h' is not a copy direction", "h2d, d2h, other"]),
    (lambda t: t.replace("evidence_limit = 20", 'evidence_limit = 20\nimpact_copies = ["h2d"]'),
     ["finding.impact_copies", "only for impact_part = 'copy'"]),
    (lambda t: t.replace("evidence_limit = 20", 'evidence_limit = 20\nimpact_part = "comm"\nimpact_comm = "all"'),
     ["finding.impact_comm", "'all' is not one of exposed, wait"]),
    (lambda t: t.replace("evidence_limit = 20", 'evidence_limit = 20\nimpact_comm = "exposed"'),
     ["finding.impact_comm", "only for impact_part = 'comm'"]),
    (lambda t: t.replace("evidence_limit = 20", 'evidence_limit = 20\nimpact_part = "host"\nimpact_host = "all"'),
     ["finding.impact_host", "'all' is not one of pageable-copies"]),
    (lambda t: t.replace("evidence_limit = 20", 'evidence_limit = 20\nimpact_host = "pageable-copies"'),
     ["finding.impact_host", "only for impact_part = 'host'"]),
])
def test_load_errors_name_the_file_the_key_and_the_fix(tmp_path, edit, words):
    folder = write_rule(tmp_path / "r", "long-kernels")
    (folder / "rule.toml").write_text(edit((folder / "rule.toml").read_text()))
    with pytest.raises(RuleError) as exc:
        load_rule(folder)
    assert str(folder / "rule.toml") in str(exc.value)
    for word in words:
        assert word in str(exc.value), str(exc.value)


def test_load_errors_give_the_line(tmp_path):
    folder = write_rule(tmp_path / "r", "long-kernels")
    edit = (folder / "rule.toml").read_text().replace('op = ">"', 'op = "=>"')
    (folder / "rule.toml").write_text(edit)
    line = edit.splitlines().index('op = "=>"') + 1
    with pytest.raises(RuleError, match=rf"rule.toml:{line}: key 'judgement.op': '=>' is not one of"):
        load_rule(folder)


def test_missing_query_and_duplicate_ids_are_load_errors(tmp_path):
    folder = write_rule(tmp_path / "r", "a-rule")
    write_rule(tmp_path / "r", "b-rule")  # same id NA951
    with pytest.raises(RuleError, match="already used"):
        load_rules([tmp_path / "r"], include_builtin=False)
    (folder / "query.sql").unlink()
    with pytest.raises(RuleError, match="query.sql: missing"):
        load_rule(folder)


def test_query_params_ignore_comments_and_strings():
    sql = "-- $nope\nselect '$not' as \"$x\", $a /* $b */ from t where c = $capture_id and d > $a"
    assert query_params(sql) == ["a", "capture_id"]


# --- the real capture: built-in rules plus a broken one --------------------------------------------------

@pytest.fixture(scope="module")
def pipit_store(tmp_path_factory):
    capture = TRACES / "nsys" / "pipit_cloverleaf_a100.sqlite"
    if not capture.exists():
        pytest.skip(f"real capture absent at {capture}")
    from nsight_advisor.workflow import ingest_to_store

    path = tmp_path_factory.mktemp("pipit") / "pipit.duckdb"
    ingest_to_store([capture], path)
    return path


@pytest.mark.slow
def test_real_capture_broken_rule_errored_builtin_rules_still_run(pipit_store, tmp_path):
    from nsight_advisor.store.database import connect

    write_rule(tmp_path / "r", "broken-sql", rule_id="NA990", query="select nope from kernels")
    write_rule(tmp_path / "r", "long-kernels", rule_id="NA991")
    con = connect(pipit_store, read_only=True)
    try:
        result = run_analysis(con, [1], rules_dirs=[tmp_path / "r"])
    finally:
        con.close()
    status = {o.rule_name: o.status for o in result.outcomes}
    builtin = [r.name for r in load_rules([], include_builtin=True)]
    assert status["broken-sql"] == "errored"
    assert status["long-kernels"] == "findings"
    assert set(builtin) <= set(status)
    assert all(status[name] in ("findings", "clean", "skipped", "errored") for name in builtin)
    ours = next(f for f in result.findings if f.rule_name == "long-kernels")
    assert [e["kernel"] for e in ours.evidence] == ["par_ranged2d_kernel", "par_reduce_kernel"]
    assert ours.impact_ns == 40_357_150
    assert result.findings == sorted(result.findings, key=finding_rank)  # severity first, then impact
    json.dumps(result.to_dict())
