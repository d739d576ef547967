"""User configuration: ``nsight-advisor.toml`` or ``[tool.nsight-advisor]`` in ``pyproject.toml``, and ``--set``.

```toml
select = ["NA101", "small-grid"]      # run only these (ids or names); empty = all
ignore = ["NA105"]                    # never run these
rules_dirs = ["perf-rules"]           # extra rule folders, relative to this file
rule_time_limit_s = 60                # a rule query running longer is stopped and the rule is errored

[gpu]                                 # for captures that do not name their GPU (--gpu wins)
model = "H100 SXM"                    # a model of the built-in table: `nsight-advisor analyze --help` lists them

[rules.small-grid]                    # a rule's id or name
min_blocks_per_sm = 2                 # a declared param, with the param's type

[[waive]]                             # an accepted finding: nsight_advisor.engine.waivers
rule = "NA401"
subject = "ncclKernel_*"
reason = "tracked in #1234"
expires = 2027-03-31
```

Every mistake is a :class:`~nsight_advisor.common.errors.ConfigError` naming the file or option, the key and the fix.
"""

from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

from nsight_advisor.engine.rules import Rule, find_rule
from nsight_advisor.engine.waivers import Waiver, parse_waivers
from nsight_advisor.common.errors import ConfigError, RuleError
from nsight_advisor.common.regular_file import read_regular_text

CONFIG_FILE = "nsight-advisor.toml"
_KEYS = ("select", "ignore", "rules_dirs", "rule_time_limit_s", "rules", "gpu", "waive")


@dataclass
class Config:
    """The settings of one analysis, merged from the config file and the command line."""

    select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    rules_dirs: list[Path] = field(default_factory=list)
    rule_time_limit_s: float | None = None
    params: dict[str, dict[str, Any]] = field(default_factory=dict)  # rule key -> param -> value
    gpu: str | None = None  # [gpu] model: facts for GPUs the capture does not describe
    waivers: list[Waiver] = field(default_factory=list)  # [[waive]]: accepted findings
    source: str = "defaults"


def find_config(config_path: Path | None, cwd: Path | None = None) -> Config:
    """Read ``config_path``, else ``./nsight-advisor.toml``, else ``[tool.nsight-advisor]`` of ``./pyproject.toml``."""
    cwd = Path.cwd() if cwd is None else Path(cwd)
    if config_path is not None:
        path = Path(config_path)
        if path.is_dir():
            raise ConfigError(f"{path}: is a directory, expected a config file (nsight-advisor.toml or "
                              f"pyproject.toml)")
        if not path.exists():
            raise ConfigError(f"{path}: no such config file")
        data = _read(path)
        if path.name == "pyproject.toml":
            data = data.get("tool", {}).get("nsight-advisor", {})
        return parse_config(data, path)
    local = cwd / CONFIG_FILE
    if local.exists():  # a FIFO or device there is refused by name (read_regular_text), not skipped silently
        return parse_config(_read(local), local)
    pyproject = cwd / "pyproject.toml"
    if pyproject.is_file():
        section = _read(pyproject).get("tool", {}).get("nsight-advisor")
        if section is not None:
            return parse_config(section, pyproject, prefix="tool.nsight-advisor.")
    return Config()


#: Parsed config files by (path, size, mtime): a run reads its config several times (analysis, result key, outputs),
#: and one of 100,000 waivers takes seconds to parse. Callers only read the tables.
_PARSED: dict[tuple, dict] = {}


def _read(path: Path) -> dict:
    try:
        st = os.stat(path)
        key = (os.path.abspath(path), st.st_size, st.st_mtime_ns, st.st_ino)
    except OSError:
        key = None
    if key is not None and key in _PARSED:
        return _PARSED[key]
    data = _parse(path)
    if key is not None:
        _PARSED.clear()  # one file kept: the run's config
        _PARSED[key] = data
    return data


def _parse(path: Path) -> dict:
    try:
        return tomllib.loads(read_regular_text(path, ConfigError))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot be read ({exc})") from None


def parse_config(data: dict, path: Path, prefix: str = "") -> Config:
    """Validate a config table read from ``path``."""
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: key '{prefix.rstrip('.')}': expected a table")
    for key in data:
        if key not in _KEYS:
            raise ConfigError(f"{path}: key '{prefix}{key}': unknown key; use one of {', '.join(_KEYS)}")

    def str_list(key: str) -> list[str]:
        value = data.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{path}: key '{prefix}{key}': expected a list of strings, e.g. {key} = [\"NA101\"]")
        return value

    limit = data.get("rule_time_limit_s")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, (int, float))
                              or not math.isfinite(limit) or limit <= 0):
        raise ConfigError(f"{path}: key '{prefix}rule_time_limit_s': expected a positive, finite number of "
                          f"seconds, got {limit!r}")
    rules = data.get("rules", {})
    if not isinstance(rules, dict) or not all(isinstance(v, dict) for v in rules.values()):
        raise ConfigError(f"{path}: key '{prefix}rules': expected tables such as [rules.small-grid]")
    gpu = data.get("gpu", {})
    if not isinstance(gpu, dict) or set(gpu) - {"model"} or not isinstance(gpu.get("model", ""), str):
        raise ConfigError(f"{path}: key '{prefix}gpu': expected a table with one key, model = \"H100 SXM\"")
    return Config(select=str_list("select"), ignore=str_list("ignore"), gpu=gpu.get("model") or None,
                  rules_dirs=[(path.parent / d) for d in str_list("rules_dirs")],
                  rule_time_limit_s=float(limit) if limit is not None else None,
                  params={k: dict(v) for k, v in rules.items()}, source=str(path),
                  waivers=parse_waivers(data.get("waive", []), path, prefix))


def parse_override(text: str) -> tuple[str, str, str]:
    """Split ``RULE.PARAM=VALUE``; ConfigError when it does not have that shape."""
    key, sep, value = text.partition("=")
    rule_key, dot, param = key.strip().rpartition(".")
    if not sep or not dot or not rule_key or not param:
        raise ConfigError(f"--set {text!r}: expected RULE.PARAM=VALUE, e.g. --set small-grid.min_blocks_per_sm=2")
    return rule_key.strip(), param.strip(), value.strip()


def parse_text_value(text: str, type_name: str, where: str) -> Any:
    """A ``--set`` value parsed to the param's type."""
    try:
        if type_name == "int":
            return int(text)
        if type_name == "float":
            value = float(text)
            if not math.isfinite(value):  # a nan threshold compares false: the rule would go silent
                raise ConfigError(f"{where}: expected a finite number, got {text!r}")
            return value
    except ValueError:
        raise ConfigError(f"{where}: expected {type_name}, got {text!r}; write a number") from None
    if type_name == "bool":
        lowered = text.lower()
        if lowered in ("true", "1", "yes", "on"):
            return True
        if lowered in ("false", "0", "no", "off"):
            return False
        raise ConfigError(f"{where}: expected true or false, got {text!r}")
    return text


def apply_params(rules: list[Rule], config: Config, overrides: Iterable[str]) -> list[Rule]:
    """Rules with params from the config file, then from ``--set``, validated against each rule's [params]."""
    per_rule: dict[str, dict[str, Any]] = {}
    for key, values in config.params.items():
        rule = _lookup(rules, key, f"{config.source}: key 'rules.{key}'")
        for param, value in values.items():
            where = f"{config.source}: key 'rules.{key}.{param}'"
            declared = _param(rule, param, where)
            try:
                per_rule.setdefault(rule.id, {})[param] = declared.coerce(value, where)
            except RuleError as exc:
                raise ConfigError(str(exc)) from None
    for text in overrides:
        rule_key, param, raw = parse_override(text)
        where = f"--set {text}"
        rule = _lookup(rules, rule_key, where)
        declared = _param(rule, param, where)
        per_rule.setdefault(rule.id, {})[param] = parse_text_value(raw, declared.type, where)
    return [r.with_params(per_rule[r.id]) if r.id in per_rule else r for r in rules]


def _lookup(rules: list[Rule], key: str, where: str) -> Rule:
    rule = find_rule(rules, key)
    if rule is None:
        raise ConfigError(f"{where}: unknown rule {key!r}; `nsight-advisor rules list` shows ids and names")
    return rule


def _param(rule: Rule, param: str, where: str):
    if param not in rule.params:
        names = ", ".join(rule.params) or "none"
        raise ConfigError(f"{where}: rule {rule.name} has no parameter {param!r} (its parameters: {names})")
    return rule.params[param]


def select_rules(rules: list[Rule], config: Config, select: Iterable[str] = (), ignore: Iterable[str] = ()) -> list[Rule]:
    """The rules to run: ``select`` (command line, else config; empty = all) minus ``ignore`` (both)."""
    select_from = "--select" if select else f"{config.source}: key 'select'"
    select = list(select) or config.select
    for key in select:
        _lookup(rules, key, select_from)
    for key in ignore:
        _lookup(rules, key, "--ignore")
    for key in config.ignore:
        _lookup(rules, key, f"{config.source}: key 'ignore'")
    ignore = list(ignore) + config.ignore
    chosen = rules
    if select:
        wanted = {find_rule(rules, k).id for k in select}
        chosen = [r for r in chosen if r.id in wanted]
    dropped = {find_rule(rules, k).id for k in ignore}
    return [r for r in chosen if r.id not in dropped]
