"""Property-based tests (hypothesis): the ncu CSV reader, config and ``--set`` parsing, and parameter binding
take arbitrary input and answer only with a result or the project's own error for that input."""

from __future__ import annotations

import csv
import io
import math
import sys
import tempfile
from pathlib import Path

import duckdb
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from nsight_advisor.common.errors import ConfigError, InputError, RuleError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ncu_csv = pytest.importorskip("nsight_advisor.ingest.ncu.csv_export", reason="ncu CSV reader not written yet")
config = pytest.importorskip("nsight_advisor.engine.config", reason="engine config not written yet")
runner = pytest.importorskip("nsight_advisor.engine.runner", reason="engine runner not written yet")
rules_mod = pytest.importorskip("nsight_advisor.engine.rules", reason="engine rules not written yet")

# database=None: no .hypothesis folder in the checkout; failures print their example instead
SETTINGS = settings(max_examples=60, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])

# ------------------------------------------------------------------------------------------------ ncu CSV reader

DETAILS_HEADER = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size",
                  "Grid Size", "Device", "CC", "Section Name", "Metric Name", "Metric Unit", "Metric Value"]
RAW_HEADER = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size",
              "Grid Size", "Device", "CC", "gpu__time_duration.sum", "dram__bytes.sum", "launch__grid_size"]
SUMMARY_HEADER = ["Process ID", "Process Name", "Host Name", "Kernel Name", "Device", "CC", "Section Name",
                  "Metric Name", "Metric Unit", "Minimum", "Maximum", "Average", "Invocations"]

# Cells that look like what ncu prints, and cells that are plainly hostile.
cell = st.one_of(
    st.text(max_size=30),
    st.sampled_from(["0", "1", "-1", "7.5", "n/a", "", "1,234", "1.234,5", "10,72", "(256, 1, 1)", "(2, 25, 1)",
                     "nsecond", "usecond", "Gbyte/second", "byte", "%", "1e999", "nan", "inf", "-inf",
                     "732000 (FFMA: 409600; FADD: 0)", "Duration", "DRAM Throughput", "gpu__time_duration.sum",
                     "GPU Speed Of Light Throughput", "<script>alert(1)</script>", "\x00", "\ufeff", "\"", "\r\n",
                     "Launch Settings", "Session Info", "ID", "Process ID", "99999999999999999999999"]),
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
)


@st.composite
def ncu_csv_text(draw) -> str:
    """CSV text shaped like ncu output: optional junk lines, a real header (or none), rows of random cells."""
    header = draw(st.sampled_from([DETAILS_HEADER, RAW_HEADER, SUMMARY_HEADER, None]))
    buf = io.StringIO()
    writer = csv.writer(buf, quoting=draw(st.sampled_from([csv.QUOTE_ALL, csv.QUOTE_MINIMAL])))
    for _ in range(draw(st.integers(0, 2))):
        buf.write(draw(st.text(max_size=40)) + "\n")
    if header is not None:
        writer.writerow(header)
    width = len(header) if header else draw(st.integers(1, 12))
    for _ in range(draw(st.integers(0, 8))):
        n = draw(st.integers(0, width + 2))
        writer.writerow([draw(cell) for _ in range(n)])
    text = buf.getvalue()
    if draw(st.booleans()):
        cut = draw(st.integers(0, len(text)))
        text = text[:cut]
    return text


class _Store:
    """One in-memory store for every example (creating the schema per example makes shrinking crawl)."""

    con = None
    next_id = 0

    @classmethod
    def get(cls):
        if cls.con is None:
            from nsight_advisor.store.database import connect

            cls.con = connect(None)
        cls.next_id += 1
        return cls.con, cls.next_id


def _read_csv_text(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "fuzz.csv"
        path.write_bytes(data)
        con, capture_id = _Store.get()
        try:
            ncu_csv.ingest_ncu_csv(con, capture_id, path)
            # what was written must be readable back with the schema's types
            con.execute("select count(*) from ncu_kernels where capture_id = ?", [capture_id]).fetchone()
            con.execute("select count(*) from ncu_metrics where capture_id = ?", [capture_id]).fetchone()
        except InputError as exc:
            assert str(path) in str(exc) or path.name in str(exc), f"error does not name the file: {exc}"
            assert "\n" not in str(exc).strip(), f"error is more than one line: {exc!r}"


@SETTINGS
@given(ncu_csv_text())
# found by this test: a duration of 9.2e18 ns, whose sum fits no BIGINT, was a DuckDB conversion error
@example('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
         '"Device","CC","gpu__time_duration.sum","dram__bytes.sum","launch__grid_size"\r\n'
         '"0","","","","","","","","","","","9223372036854775296"\r\n')
def test_csv_reader_structured(text):
    """ncu-shaped CSV text: a result or InputError naming the file, never anything else."""
    _read_csv_text(text.encode("utf-8", "surrogatepass"))


@SETTINGS
@given(st.binary(max_size=2000))
def test_csv_reader_bytes(data):
    """Arbitrary bytes read as a CSV: a result or InputError naming the file."""
    _read_csv_text(data)


@SETTINGS
@given(st.text(max_size=60), st.booleans())
def test_parse_number_total(text, decimal_comma):
    """Any cell text gives a float or None, never an exception."""
    value = ncu_csv.parse_number(text, decimal_comma=decimal_comma)
    assert value is None or isinstance(value, float)


# ------------------------------------------------------------------------------------------------ config and --set

PARAM_TYPES = {"int": int, "float": float, "str": str, "bool": bool}

toml_scalar = st.one_of(st.text(max_size=20), st.integers(), st.floats(allow_nan=False), st.booleans())
toml_value = st.recursive(toml_scalar, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)), max_leaves=10)
config_table = st.dictionaries(
    st.one_of(st.sampled_from(["select", "ignore", "rules_dirs", "rule_time_limit_s", "rules", "waive"]), st.text(max_size=12)),
    toml_value, max_size=5)


@SETTINGS
@given(config_table)
def test_parse_config_total(data):
    """Any TOML-shaped table: a Config or ConfigError naming the file."""
    path = Path("/nonexistent/nsight-advisor.toml")
    try:
        cfg = config.parse_config(data, path)
    except ConfigError as exc:
        assert str(path) in str(exc)
        return
    assert all(isinstance(s, str) for s in cfg.select + cfg.ignore)
    assert cfg.rule_time_limit_s is None or cfg.rule_time_limit_s > 0


@SETTINGS
@given(st.text(max_size=300))
def test_config_file_total(text):
    """Any text as nsight-advisor.toml: a Config or ConfigError naming the file."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "nsight-advisor.toml"
        path.write_text(text, encoding="utf-8", errors="surrogatepass") if _encodable(text) else path.write_bytes(b"\xff")
        try:
            config.find_config(path)
        except ConfigError as exc:
            assert str(path) in str(exc)


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


@SETTINGS
@given(st.text(max_size=80))
def test_parse_override_total(text):
    """Any --set text: (rule, param, value) strings or ConfigError."""
    try:
        rule_key, param, value = config.parse_override(text)
    except ConfigError as exc:
        assert "--set" in str(exc)
        return
    assert rule_key and param and isinstance(value, str)


@SETTINGS
@given(st.one_of(st.text(max_size=40), st.integers().map(str), st.floats().map(repr),
                 st.sampled_from(["1e999", "nan", "-0", "0x10", "1_000", "true", "no", " 7 ", "١٢", "9" * 5000])),
       st.sampled_from(sorted(PARAM_TYPES)))
def test_parse_text_value_typed(text, type_name):
    """A --set value: a value of the declared type, or ConfigError."""
    try:
        value = config.parse_text_value(text, type_name, "--set probe.p=" + text)
    except ConfigError:
        return
    assert type(value) is PARAM_TYPES[type_name]


# ------------------------------------------------------------------------------------------------ parameter binding

_RULE_TOML = '''id = "NA991"
name = "binding-probe"
title = "Binding probe"
category = "timeline"
severity = "info"
status = "preview"
principles = ["gpu-background.execution-model.waves"]

[params.p_str]
type = "str"
default = "x"
unit = "text"
why = "Bound as text."

[params.p_int]
type = "int"
default = 1
unit = "count"
why = "Bound as an integer."

[params.p_float]
type = "float"
default = 1.0
unit = "ns"
why = "Bound as a float."

[params.p_bool]
type = "bool"
default = true
unit = "flag"
why = "Bound as a boolean."

[judgement]
column = "f"
op = ">="
param = "p_float"

[finding]
impact_column = "impact_ns"
evidence_columns = ["s", "i", "f", "b"]
message = "{rows} row(s)"
fix = "None."

[docs]
what = "Echoes its parameters."
why = "To test binding."
fix = "None."
limits = "A test rule."
'''

# '$p_str' inside a string literal and a comment must stay text, never be bound
_QUERY = ("select $p_str as s, $p_int as i, $p_float as f, $p_bool as b, 0 as impact_ns, "
          "'$p_str; drop table kernels' as literal -- $p_int\n")


@pytest.fixture(scope="module")
def binding_rule(tmp_path_factory):
    folder = tmp_path_factory.mktemp("rules") / "binding-probe"
    folder.mkdir()
    (folder / "rule.toml").write_text(_RULE_TOML)
    (folder / "query.sql").write_text(_QUERY)
    (folder / "cases.toml").write_text("")
    return rules_mod.load_rule(folder)


hostile_text = st.one_of(st.text(max_size=60), st.sampled_from([
    "'; drop table kernels; --", "$p_int", "' || (select 1) || '", "\x00", "\\", "%s", "{0}", "?", "$1",
    "attach '/tmp/x.db' as x", "<script>alert(1)</script>"]))


@SETTINGS
@given(s=hostile_text, i=st.integers(min_value=-(2**63), max_value=2**63 - 1), f=st.floats(), b=st.booleans())
def test_binding_never_changes_sql(binding_rule, s, i, f, b):
    """Bound values come back exactly as given; the SQL text is never changed; only RuleError escapes."""
    rule = binding_rule.with_params({"p_str": s, "p_int": i, "p_float": f, "p_bool": b})
    sql_before = rule.query
    params = runner.bind_params(rule, rule.query, capture_id=1)
    assert {"p_str", "p_int", "p_float", "p_bool"} <= set(params) <= {"p_str", "p_int", "p_float", "p_bool", "capture_id"}
    con = duckdb.connect()
    try:
        con.execute("create table kernels (x int)")
        try:
            columns, rows = runner.run_limited(con, runner.check_single_select(con, rule.query), params, 10.0, 5)
        except runner.RuleRunError:
            return  # a value DuckDB cannot take (e.g. a NUL in text) makes the rule errored, not the process crash
        assert rule.query == sql_before
        row = dict(zip(columns, rows[0]))
        assert row["s"] == s and row["i"] == i and row["b"] == b
        assert row["f"] == f or (math.isnan(f) and math.isnan(row["f"]))
        assert row["literal"] == "$p_str; drop table kernels"
        assert con.execute("select count(*) from kernels").fetchone()[0] == 0  # the table is still there
    finally:
        con.close()


@SETTINGS
@given(param=st.sampled_from(["p_str", "p_int", "p_float", "p_bool", "nope", ""]), value=hostile_text)
def test_set_then_bind(binding_rule, param, value):
    """--set with arbitrary text: ConfigError/RuleError, or a rule whose bound value has the declared type."""
    try:
        (rule,) = config.apply_params([binding_rule], config.Config(), [f"binding-probe.{param}={value}"])
        params = runner.bind_params(rule, rule.query, capture_id=1)
    except (ConfigError, RuleError):
        return
    declared = binding_rule.params[param].type
    assert type(params[param]) is PARAM_TYPES[declared]
    assert rule.query == binding_rule.query


@SETTINGS
@given(st.dictionaries(st.sampled_from(["p_str", "p_int", "p_float", "p_bool", "other"]), toml_scalar, max_size=4))
def test_config_params_typed(binding_rule, values):
    """[rules.NAME] values from a config file: coerced to the declared type, or ConfigError."""
    cfg = config.Config(params={"binding-probe": values}, source="nsight-advisor.toml")
    try:
        (rule,) = config.apply_params([binding_rule], cfg, [])
    except (ConfigError, RuleError):
        return
    for name, value in rule.values().items():
        assert type(value) is PARAM_TYPES[binding_rule.params[name].type], (name, value)


def test_toml_parser_is_stdlib():
    """Config files are parsed by tomllib (no eval of anything a file says)."""
    assert config.tomllib is tomllib
