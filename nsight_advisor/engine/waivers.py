"""Waivers: accepted findings, listed in the config file, kept out of ``--fail-on`` and ``--fail-on-regression``.

```toml
[[waive]]
rule = "NA401"                  # a rule id or name; "regression" waives a kernel's slowdown in `compare`
subject = "ncclKernel_*"        # the finding's subject (or one of its parts), its fingerprint, or a glob of either
reason = "NCCL waits are the collective's, tracked in #1234"
expires = 2027-03-31            # the last day it applies (a TOML date or "YYYY-MM-DD")
```

A waived finding is still reported, marked "waived (reason)" in every format (SARIF: a ``suppressions`` entry of
kind ``external`` with the reason as its justification). After its last day a waiver no longer applies: the finding
counts again and the reports say that its waiver expired. Whether a waiver has expired is decided when the config
is read, and is part of the config's identity, so a kept analysis result is never reused across an expiry.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, Iterable

from nsight_advisor.engine.fingerprint import finding_subject, fingerprint
from nsight_advisor.common.errors import ConfigError

#: The pseudo rule of a waiver that accepts a kernel's slowdown in ``compare`` (its subject: the kernel's name).
REGRESSION_RULE = "regression"
_FIELDS = ("rule", "subject", "reason", "expires")


@dataclass(frozen=True)
class Waiver:
    """One ``[[waive]]`` entry; ``expired`` as of the day the config was read."""

    rule: str
    subject: str
    reason: str
    expires: dt.date
    expired: bool

    def public(self, findings: int | None = None) -> dict[str, Any]:
        """The waiver as the reports show it."""
        out = {"rule": self.rule, "subject": self.subject, "reason": self.reason,
               "expires": self.expires.isoformat(), "status": "expired" if self.expired else "active"}
        if findings is not None:
            out["findings"] = findings
        return out


def today_utc() -> dt.date:
    """The day against which expiry dates are judged (UTC, so a CI fleet agrees)."""
    return dt.datetime.now(dt.timezone.utc).date()


def parse_waivers(entries: Any, path: Path, prefix: str = "", today: dt.date | None = None) -> list[Waiver]:
    """Validate the ``waive`` array of tables read from ``path``; ConfigError naming the entry and the fix."""
    today = today or today_utc()
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ConfigError(f"{path}: key '{prefix}waive': expected [[waive]] tables with rule, subject, reason and "
                          f"expires")
    out = []
    for i, entry in enumerate(entries, 1):
        where = f"{path}: [[{prefix}waive]] entry {i}"
        unknown = sorted(set(entry) - set(_FIELDS))
        if unknown:
            raise ConfigError(f"{where}: unknown key '{unknown[0]}'; use {', '.join(_FIELDS)}")
        for key in ("rule", "subject", "reason"):
            if not isinstance(entry.get(key), str) or not entry[key].strip():
                raise ConfigError(f"{where}: key '{key}': expected a non-empty string")
        expires = entry.get("expires")
        if isinstance(expires, str):
            try:
                expires = dt.date.fromisoformat(expires.strip())
            except ValueError:
                expires = None
        if isinstance(expires, dt.datetime):
            expires = expires.date()
        if not isinstance(expires, dt.date):
            raise ConfigError(f"{where}: key 'expires': expected a date YYYY-MM-DD (the last day the waiver "
                              f"applies), got {entry.get('expires')!r}")
        out.append(Waiver(rule=entry["rule"].strip(), subject=entry["subject"].strip(),
                          reason=entry["reason"].strip(), expires=expires, expired=expires < today))
    return out


def check_rules(waivers: Iterable[Waiver], rules: list, source: str) -> None:
    """ConfigError when a waiver names a rule that is not loaded (a typo would silently waive nothing)."""
    from nsight_advisor.engine.rules import find_rule

    for w in waivers:
        if w.rule != REGRESSION_RULE and find_rule(rules, w.rule) is None:
            raise ConfigError(f"{source}: [[waive]] rule {w.rule!r}: unknown rule; `nsight-advisor rules list` "
                              f"shows ids and names (or \"{REGRESSION_RULE}\" for a kernel's slowdown in compare)")


def subject_matches(pattern: str, texts: Iterable[str]) -> bool:
    """True when ``pattern`` (exact text or a glob: ``*``, ``?``, ``[...]``) matches one of ``texts``.

    A pattern whose only wildcard is ``*`` (the usual kind) is matched by plain string search: compiling each of
    100,000 waivers' globs to a regular expression (fnmatch, whose cache holds 32,768) took minutes."""
    if "?" in pattern or "[" in pattern:
        return any(t == pattern or fnmatchcase(t, pattern) for t in texts)
    return any(_star_match(t, pattern) for t in texts)


def _star_match(text: str, pattern: str) -> bool:
    """``fnmatchcase(text, pattern)`` for a pattern with no wildcard but ``*``."""
    parts = pattern.split("*")
    if len(parts) == 1:
        return text == pattern
    head, tail = parts[0], parts[-1]
    if len(text) < len(head) + len(tail) or not text.startswith(head) or not text.endswith(tail):
        return False
    pos, end = len(head), len(text) - len(tail)
    for middle in parts[1:-1]:
        found = text.find(middle, pos, end)
        if found < 0:
            return False
        pos = found + len(middle)
    return True


def _finding_texts(f: dict) -> list[str]:
    subject = finding_subject(f)
    return [fingerprint(f), ", ".join(subject), *subject]


def waiver_for(finding: dict, waivers: Iterable[Waiver]) -> Waiver | None:
    """The waiver that applies to ``finding`` (a Finding's ``to_dict()``): the first unexpired one matching its
    rule (id or name) and subject, else the first expired one (reported, not applied), else None."""
    keys = {str(finding.get("rule_id") or "").casefold(), str(finding.get("rule_name") or "").casefold()}
    texts = _finding_texts(finding)  # once per finding, not once per waiver
    matching = [w for w in waivers if w.rule.casefold() in keys and subject_matches(w.subject, texts)]
    return next((w for w in matching if not w.expired), matching[0] if matching else None)


def apply_waivers(result, waivers: list[Waiver]) -> None:
    """Mark ``result``'s findings (an AnalysisResult) with the waiver that matches each, and list every configured
    waiver with the number of findings it matched in ``result.waivers``."""
    counts = {w: 0 for w in waivers}
    for f in result.findings:
        # no waivers, nothing to match: a finding's plain copy and fingerprint are not made (3,041 at 256 ranks)
        w = waiver_for(f.to_dict(), waivers) if waivers else None
        f.waiver = w.public() if w is not None else None
        if w is not None:
            counts[w] += 1
    result.waivers = [w.public(counts[w]) for w in waivers]


def is_waived(finding: Any) -> bool:
    """True when an unexpired waiver applies to ``finding`` (a Finding or a dict)."""
    w = finding.get("waiver") if isinstance(finding, dict) else getattr(finding, "waiver", None)
    return bool(w) and w.get("status") == "active"
