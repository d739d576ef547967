"""Rule folders: load ``rule.toml`` + ``query.sql`` (+ ``judge.py``) into a validated :class:`Rule`.

Validation happens at load time and is strict: unknown keys, missing keys and wrong types raise
:class:`~nsight_advisor.common.errors.RuleError` naming the file, the key and the fix. The format is described in
``docs/rule-format.md``.
"""

from __future__ import annotations

import importlib.util
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from nsight_advisor.engine.advice import CAPABILITIES, STACKS, FixClause
from nsight_advisor.engine.model import (COMM_CLAIMS, COPY_DIRECTIONS, HOST_CLAIMS, IDLE_CAUSES, IMPACT_PARTS,
                                         SEVERITIES)
from nsight_advisor.engine.toml_checked import (  # noqa: F401 - PARAM_TYPES, coerce_value: the format's API
    PARAM_TYPES, TomlTable, coerce_value, locate, read_toml,
)
from nsight_advisor.common.sql_params import SQL_SKIP, sub_outside_literals
from nsight_advisor.common.errors import RuleError
from nsight_advisor.common.regular_file import is_regular, read_regular_text
from nsight_advisor.schema.tables import table_names
from nsight_advisor.schema.views import analysis_view_names

CATEGORIES = ("launch", "occupancy", "memory", "compute", "precision", "sync", "transfer", "timeline", "communication")
STATUSES = ("preview", "stable")
OPS = ("<", "<=", ">", ">=", "==", "!=")
DOC_SECTIONS = ("what", "why", "fix", "limits")

ID_RE = re.compile(r"^[A-Z]{1,8}[0-9]{2,5}$")
NAME_RE = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")
IDENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

#: Rows one finding keeps as evidence at most, whatever a rule asks for.
MAX_EVIDENCE_LIMIT = 1000


@dataclass(frozen=True)
class Param:
    """One declared parameter: type, default, unit and why that number."""

    name: str
    type: str
    default: Any
    unit: str = ""
    why: str = ""

    def coerce(self, value: Any, where: str) -> Any:
        """``value`` checked against this param's type (ints are accepted for floats), or RuleError."""
        return coerce_value(value, self.type, where)


@dataclass(frozen=True)
class Requirement:
    """Data a rule needs: rows in a normalized table, an ncu metric, or an nsys GPU metric."""

    kind: str  # table | metric | gpu_metric
    value: str
    capture_option: str

    def describe(self) -> str:
        return {"table": f"rows in {self.value}", "metric": f"Nsight Compute metric {self.value}",
                "gpu_metric": f"GPU metric '{self.value}'"}[self.kind]


@dataclass(frozen=True)
class Judgement:
    """A row fires when ``row[column] <op> params[param]``."""

    column: str
    op: str
    param: str


@dataclass(frozen=True)
class FindingSpec:
    """How firing rows become findings: grouping, impact, evidence, severity, message and fix."""

    message: str
    fix: str  # the general text (the whole fix when rule.toml gives a plain string)
    impact_column: str = "impact_ns"
    group_by: str = ""
    order_by: str = ""
    evidence_columns: tuple[str, ...] = ()
    evidence_limit: int = 20
    severity_by_impact_pct: tuple[tuple[str, float], ...] = ()
    # Which part of a device's time partition the impact comes out of (docs/impact.md): kernel, copy, memset,
    # idle (with the idle causes it claims) or host (host-wide time, no device).
    impact_part: str = "kernel"
    impact_causes: tuple[str, ...] = ()
    # copy only: the copy directions (copy_exposure.direction) whose exposed time the rule claims; the what-if
    # hides those copies' exposed time (engine/finding_fixes.py). Without it a copy finding has no saving.
    impact_copies: tuple[str, ...] = ()
    # comm only: what the rule claims of communication, "exposed" (transfer with no compute beside it: the what-if
    # hides it) or "wait" (for a late rank: not replayed). Without it a comm finding has no saving.
    impact_comm: str = ""
    # host only: which calls' time the rule claims, "pageable-copies" (asynchronous copies of pageable memory: the
    # what-if makes them pinned). Without it a host finding has no saving.
    impact_host: str = ""
    # The column naming what an evidence row is about (a kernel name for kernel-part rules): findings of several
    # rules on the same subject combine instead of adding up. Default: the first evidence column.
    subject_column: str = ""
    # A query column that, when not NULL, sets the finding's severity (the rule's SQL decides it).
    severity_column: str = ""
    fix_variants: tuple[tuple[str, str], ...] = ()  # (stack, text) replacing the general text on that stack
    fix_clauses: tuple[FixClause, ...] = ()  # sentences shown only where the GPU and stack can use them


@dataclass
class Rule:
    """A loaded, validated rule folder."""

    id: str
    name: str
    title: str
    category: str
    severity: str
    status: str
    principles: tuple[str, ...]
    requires: tuple[Requirement, ...]
    params: dict[str, Param]
    judgement: Judgement | None
    finding: FindingSpec
    docs: dict[str, str]
    query: str
    folder: Path
    judge: Callable[[dict, dict], bool] | None = None
    builtin: bool = False
    param_values: dict[str, Any] = field(default_factory=dict)

    @property
    def rule_toml(self) -> Path:
        return self.folder / "rule.toml"

    @property
    def query_path(self) -> Path:
        return self.folder / "query.sql"

    @property
    def cases_path(self) -> Path:
        return self.folder / "cases.toml"

    def values(self) -> dict[str, Any]:
        """Every param's value: defaults, then config and --set overrides."""
        out = {name: p.default for name, p in self.params.items()}
        out.update(self.param_values)
        return out

    def with_params(self, overrides: dict[str, Any]) -> "Rule":
        """A copy whose params are overridden by ``overrides`` (already coerced)."""
        clone = Rule(**{k: getattr(self, k) for k in self.__dataclass_fields__})
        clone.param_values = {**self.param_values, **overrides}
        return clone


# --- loading ---------------------------------------------------------------------------------------------

_TOP_KEYS = ("id", "name", "title", "category", "severity", "status", "principles", "requires", "params",
             "judgement", "finding", "docs")


def load_rule(folder: Path, *, builtin: bool = False) -> Rule:
    """Load and validate one rule folder."""
    folder = Path(folder)
    path = folder / "rule.toml"
    top = TomlTable(read_toml(path), path)

    rule_id = top.get("id", str, fix='add a stable code such as id = "NA901"')
    if not ID_RE.match(rule_id):
        raise top.fail("id", f"{rule_id!r} is not a rule code", 'use capital letters then digits, e.g. "NA901"')
    name = top.get("name", str, fix=f'add name = "{folder.name}"')
    if not NAME_RE.match(name):
        raise top.fail("name", f"{name!r} is not a rule name", "use lowercase words joined by '-', e.g. small-grid")
    if name != folder.name:
        raise top.fail("name", f"{name!r} differs from the folder name {folder.name!r}",
                       "rename the folder or the rule so they match")
    title = top.get("title", str)
    category = top.choice("category", CATEGORIES)
    severity = top.choice("severity", SEVERITIES)
    status = top.choice("status", STATUSES, required=False, default="preview")
    principles = tuple(top.str_list("principles", required=True))
    if not principles:
        raise top.fail("principles", "empty", "cite at least one id from nsight_advisor/catalog/principles.toml")

    requires = tuple(_load_requires(top.get("requires", list, required=False, default=[]), path))
    params = _load_params(top.get("params", dict, required=False, default={}), path)

    query_path = folder / "query.sql"
    try:
        query = read_regular_text(query_path, RuleError)
    except FileNotFoundError:
        raise RuleError(f"{query_path}: missing; write the rule's SELECT there (docs/rule-format.md)") from None
    except UnicodeDecodeError as exc:
        raise RuleError(f"{query_path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    if not query.strip():
        raise RuleError(f"{query_path}: empty; write the rule's SELECT there")

    judge = LazyJudge(folder / "judge.py") if (folder / "judge.py").exists() else None
    judgement_raw = top.get("judgement", dict, required=judge is None,
                            fix="add [judgement] column/op/param, or a judge.py with judge(row, params)")
    judgement = _load_judgement(judgement_raw, path, params) if judgement_raw is not None else None

    finding = _load_finding(top.get("finding", dict), path)
    docs = _load_docs(top.get("docs", dict, fix="add a [docs] table with what, why, fix and limits"), path)
    top.reject_unknown()

    return Rule(id=rule_id, name=name, title=title, category=category, severity=severity, status=status,
                principles=principles, requires=requires, params=params, judgement=judgement, finding=finding,
                docs=docs, query=query, folder=folder, judge=judge, builtin=builtin)


def _load_requires(items: list, path: Path) -> list[Requirement]:
    out = []
    for i, raw in enumerate(items):
        if not isinstance(raw, dict):
            raise RuleError(f"{path}: key 'requires[{i}]': expected a table; write [[requires]] table = \"kernels\"")
        t = TomlTable(raw, path, f"requires[{i}].")
        kinds = [k for k in ("table", "metric", "gpu_metric") if k in raw]
        if len(kinds) != 1:
            raise t.fail("table", "needs exactly one of table, metric or gpu_metric",
                         'write table = "kernels" (or metric = "...", gpu_metric = "...")')
        kind = kinds[0]
        value = t.get(kind, str)
        if kind == "table" and value not in table_names() and value not in analysis_view_names():
            raise t.fail("table", f"{value!r} is not a normalized table or analysis view",
                         f"use one of: {', '.join([*table_names(), *analysis_view_names()])}")
        option = t.get("capture_option", str, fix='add capture_option = "nsys profile --trace=cuda" (what records it)')
        t.reject_unknown()
        out.append(Requirement(kind, value, option))
    return out


def _load_params(raw: dict, path: Path) -> dict[str, Param]:
    out = {}
    for name, spec in raw.items():
        if not IDENT_RE.match(name) or name == "capture_id":
            raise RuleError(f"{path}: key 'params.{name}': not a usable parameter name; "
                            "use letters, digits and '_' (capture_id is reserved)")
        if not isinstance(spec, dict):
            raise RuleError(f"{path}: key 'params.{name}': expected a table; write [params.{name}] with type, "
                            "default, unit and why")
        t = TomlTable(spec, path, f"params.{name}.")
        type_name = t.choice("type", tuple(PARAM_TYPES))
        t.seen.add("default")
        if "default" not in spec:
            raise t.fail("default", "missing", f"add default = ... (a {type_name})")
        default = coerce_value(spec["default"], type_name,
                               lambda: f"{locate(path, f'params.{name}.', 'default')}: key 'params.{name}.default'")
        unit = t.get("unit", str, required=False, default="")
        why = t.get("why", str, fix="say why that number, with its source (e.g. a guide section)")
        t.reject_unknown()
        out[name] = Param(name, type_name, default, unit, why)
    return out


def _load_judgement(raw: dict, path: Path, params: dict[str, Param]) -> Judgement:
    t = TomlTable(raw, path, "judgement.")
    column = t.get("column", str, fix="name the query column holding the observed value")
    op = t.choice("op", OPS)
    param = t.get("param", str, fix="name the [params] entry holding the threshold")
    t.reject_unknown()
    if param not in params:
        raise t.fail("param", f"{param!r} is not declared under [params]", f"add [params.{param}]")
    return Judgement(column, op, param)


def _load_finding(raw: dict, path: Path) -> FindingSpec:
    t = TomlTable(raw, path, "finding.")
    message = t.get("message", str, fix="write the finding's message, e.g. '{rows} kernel(s) ... ({observed} < {threshold})'")
    fix_raw = t.get("fix", (str, dict), fix="write what to change, in one or two sentences")
    fix, variants, clauses = (fix_raw, (), ()) if isinstance(fix_raw, str) else _load_fix(fix_raw, path)
    impact_column = t.get("impact_column", str, required=False, default="impact_ns")
    group_by = t.get("group_by", str, required=False, default="")
    order_by = t.get("order_by", str, required=False, default="") or impact_column
    evidence = tuple(t.str_list("evidence_columns", required=True))
    if not evidence:
        raise t.fail("evidence_columns", "empty", "list the query columns that prove the finding")
    limit = t.get("evidence_limit", int, required=False, default=20)
    if not 1 <= limit <= MAX_EVIDENCE_LIMIT:
        raise t.fail("evidence_limit", f"{limit} is out of range", f"use 1..{MAX_EVIDENCE_LIMIT}")
    sev_raw = t.get("severity_by_impact_pct", dict, required=False, default={})
    levels = []
    for level, pct in sev_raw.items():
        if level not in SEVERITIES:
            raise t.fail("severity_by_impact_pct", f"{level!r} is not a severity", f"use {', '.join(SEVERITIES)}")
        if isinstance(pct, bool) or not isinstance(pct, (int, float)):
            raise t.fail("severity_by_impact_pct", f"threshold for {level} is not a number",
                         "write e.g. { warning = 1.0, error = 10.0 }")
        levels.append((level, float(pct)))
    part = t.choice("impact_part", IMPACT_PARTS, required=False, default="kernel")
    causes = tuple(t.str_list("impact_causes", required=False))
    unknown = [c for c in causes if c not in IDLE_CAUSES]
    if unknown:
        raise t.fail("impact_causes", f"{unknown[0]!r} is not an idle cause", f"use {', '.join(IDLE_CAUSES)}")
    if part == "idle" and not causes:
        raise t.fail("impact_causes", "missing for impact_part = 'idle'",
                     'name the idle causes the impact comes from, e.g. impact_causes = ["sync"]')
    if causes and part != "idle":
        raise t.fail("impact_causes", "only for impact_part = 'idle'", "remove it, or set impact_part = 'idle'")
    copies = tuple(t.str_list("impact_copies", required=False))
    unknown = [c for c in copies if c not in COPY_DIRECTIONS]
    if unknown:
        raise t.fail("impact_copies", f"{unknown[0]!r} is not a copy direction", f"use {', '.join(COPY_DIRECTIONS)}")
    if copies and part != "copy":
        raise t.fail("impact_copies", "only for impact_part = 'copy'", "remove it, or set impact_part = 'copy'")
    comm = t.get("impact_comm", str, required=False, default="")
    if comm and comm not in COMM_CLAIMS:
        raise t.fail("impact_comm", f"{comm!r} is not one of {', '.join(COMM_CLAIMS)}", "use one of those")
    if comm and part != "comm":
        raise t.fail("impact_comm", "only for impact_part = 'comm'", "remove it, or set impact_part = 'comm'")
    host = t.get("impact_host", str, required=False, default="")
    if host and host not in HOST_CLAIMS:
        raise t.fail("impact_host", f"{host!r} is not one of {', '.join(HOST_CLAIMS)}", "use one of those")
    if host and part != "host":
        raise t.fail("impact_host", "only for impact_part = 'host'", "remove it, or set impact_part = 'host'")
    subject = t.get("subject_column", str, required=False, default="") or evidence[0]
    severity_column = t.get("severity_column", str, required=False, default="")
    t.reject_unknown()
    return FindingSpec(message=message, fix=fix, impact_column=impact_column, group_by=group_by,
                       order_by=order_by, evidence_columns=evidence, evidence_limit=limit,
                       severity_by_impact_pct=tuple(levels), impact_part=part, impact_causes=causes,
                       impact_copies=copies, impact_comm=comm, impact_host=host,
                       subject_column=subject, severity_column=severity_column, fix_variants=variants,
                       fix_clauses=clauses)


def _load_fix(raw: dict, path: Path) -> tuple[str, tuple[tuple[str, str], ...], tuple[FixClause, ...]]:
    """``[finding.fix]``: text (general), variants (per stack) and clauses (per capability and stack)."""
    t = TomlTable(raw, path, "finding.fix.")
    text = t.get("text", str, fix="write the general fix, shown when no variant fits the capture's stack")
    variants_raw = t.get("variants", dict, required=False, default={})
    variants = []
    for stack, value in variants_raw.items():
        if stack not in STACKS:
            raise t.fail("variants", f"{stack!r} is not a stack", f"use one of: {', '.join(STACKS)}")
        if not isinstance(value, str):
            raise t.fail("variants", f"the {stack} variant is not a string", "write the variant's text in quotes")
        variants.append((stack, value))
    clauses = []
    for i, item in enumerate(t.get("clauses", list, required=False, default=[])):
        if not isinstance(item, dict):
            raise t.fail("clauses", f"item {i} is not a table", 'write [[finding.fix.clauses]] text = "..."')
        c = TomlTable(item, path, f"finding.fix.clauses[{i}].")
        ctext = c.get("text", str, fix="write the clause's sentence")
        needs = c.str_list("needs", required=False)
        stacks = c.str_list("stacks", required=False)
        c.reject_unknown()
        for need in needs:
            if need not in CAPABILITIES:
                raise c.fail("needs", f"{need!r} is not a GPU capability", f"use one of: {', '.join(CAPABILITIES)}")
        for stack in stacks:
            if stack not in STACKS:
                raise c.fail("stacks", f"{stack!r} is not a stack", f"use one of: {', '.join(STACKS)}")
        if not needs and not stacks:
            raise c.fail("needs", "a clause needs a capability or a stack", "add needs = [...] or stacks = [...], "
                         "or move the sentence into text")
        clauses.append(FixClause(ctext, tuple(needs), tuple(stacks)))
    t.reject_unknown()
    return text, tuple(variants), tuple(clauses)


def _load_docs(raw: dict, path: Path) -> dict[str, str]:
    t = TomlTable(raw, path, "docs.")
    docs = {s: t.get(s, str, fix=f"add docs.{s} (sections: what, why, fix, limits)") for s in DOC_SECTIONS}
    t.reject_unknown()
    return docs


class LazyJudge:
    """A rule's ``judge.py``, imported on the first call only: listing rules, or loading a rule that is not
    selected, runs none of a rule folder's Python."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._judge: Callable[[dict, dict], bool] | None = None

    def __call__(self, row: dict, params: dict) -> bool:
        if self._judge is None:
            self._judge = _load_judge(self.path)
        return self._judge(row, params)

    def __repr__(self) -> str:
        return f"LazyJudge({str(self.path)!r})"


def _load_judge(path: Path) -> Callable[[dict, dict], bool]:
    if not is_regular(path):  # importing a FIFO blocks forever, a device never ends
        raise RuleError(f"{path}: not a regular file (a pipe, socket or device); judge.py must be a Python file")
    spec = importlib.util.spec_from_file_location(f"nsight_advisor_judge_{abs(hash(str(path)))}", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # a user's file: report any failure as a rule error
        raise RuleError(f"{path}: cannot be imported ({type(exc).__name__}: {exc})") from None
    judge = getattr(module, "judge", None)
    if not callable(judge):
        raise RuleError(f"{path}: defines no judge(row, params) function; add one returning True when the row fires")
    return judge


def rule_folders(directory: Path) -> list[Path]:
    """The rule folders in ``directory`` (or ``directory`` itself when it is one), sorted by name."""
    directory = Path(directory)
    if (directory / "rule.toml").exists():  # a FIFO or folder there is refused by load_rule, not skipped
        return [directory]
    if not directory.is_dir():
        what = "is a file, not a rules folder" if directory.exists() else "no such rules folder"
        raise RuleError(f"{directory}: {what}; pass a folder of rule folders (each with rule.toml)")
    return sorted(p for p in directory.iterdir() if p.is_dir() and (p / "rule.toml").exists())


def load_rules(rules_dirs: Iterable[Path] = (), *, include_builtin: bool = True) -> list[Rule]:
    """Built-in rules (unless ``include_builtin`` is false) and every rule in ``rules_dirs``, ids unique."""
    from nsight_advisor.common.resources import builtin_rules_dir

    rules: list[Rule] = []
    if include_builtin and builtin_rules_dir().is_dir():
        rules += [_load_kept(f, builtin=True) for f in rule_folders(builtin_rules_dir())]
    for directory in rules_dirs:
        rules += [_load_kept(f) for f in rule_folders(Path(directory))]
    check_unique(rules)
    return rules


#: Rules loaded in this process, by folder: an analysis loads them twice (which tables to load, then the run),
#: and parsing the TOML of every rule took 0.1 s each time. A changed file loads its rule again.
_KEPT: dict[tuple[Path, bool], tuple[tuple, Rule]] = {}


def _load_kept(folder: Path, *, builtin: bool = False) -> Rule:
    """:func:`load_rule`, reusing this process's earlier load of an unchanged folder (rules are not mutated:
    ``with_params`` copies)."""
    key = (Path(folder).resolve(), builtin)
    try:
        stamp = tuple(sorted((f.name, s.st_mtime_ns, s.st_size) for f in key[0].iterdir() if f.is_file()
                             for s in [f.stat()]))
    except OSError:
        return load_rule(folder, builtin=builtin)
    kept = _KEPT.get(key)
    if kept is not None and kept[0] == stamp:
        return kept[1]
    rule = load_rule(folder, builtin=builtin)
    _KEPT[key] = (stamp, rule)
    return rule


def check_unique(rules: list[Rule]) -> None:
    """RuleError when two rules share an id or a name."""
    seen_id: dict[str, Rule] = {}
    seen_name: dict[str, Rule] = {}
    for rule in rules:
        for key, seen, what in ((rule.id, seen_id, "id"), (rule.name, seen_name, "name")):
            other = seen.get(key)
            if other is not None and other.folder.resolve() != rule.folder.resolve():
                raise RuleError(f"{rule.rule_toml}: key '{what}': {key!r} is already used by {other.rule_toml}; "
                                f"give this rule another {what}")
            seen[key] = rule


def find_rule(rules: list[Rule], key: str) -> Rule | None:
    """The rule whose id (case-insensitive) or name is ``key``."""
    for rule in rules:
        if rule.id.lower() == key.lower() or rule.name == key:
            return rule
    return None


_SQL_PARAM = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")


def replace_param(sql: str, name: str, text: str) -> str:
    """``sql`` with each ``$name`` outside comments, strings and quoted identifiers replaced by ``text``."""
    # a function, not the text itself: re.sub would read backslashes in the text as escapes
    return sub_outside_literals(re.compile(rf"\${re.escape(name)}(?![A-Za-z0-9_])"), lambda _m: text, sql)


def query_params(sql: str) -> list[str]:
    """Names of the ``$params`` a query uses (comments, strings and quoted identifiers ignored), in order."""
    stripped = SQL_SKIP.sub(" ", sql)
    seen: list[str] = []
    for m in _SQL_PARAM.finditer(stripped):
        if m.group(1) not in seen:
            seen.append(m.group(1))
    return seen
