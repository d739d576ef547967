"""What the rule engine produces and the reports consume: findings, outcomes, one analysis result.

``AnalysisResult.to_dict()`` is the JSON contract of ``analyze --format json`` (DESIGN.md): reports,
CI and bots read exactly this shape.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import asdict, dataclass, field
from typing import Any

# the partition's vocabulary, re-exported
from nsight_advisor.analysis.accounting import (  # noqa: F401
    COMM_CLAIMS, COPY_DIRECTIONS, HOST_CLAIMS, IDLE_CAUSES, IMPACT_PARTS)
from nsight_advisor.common.severity import SEVERITIES, severity_rank  # noqa: F401 - re-exported for the engine

OUTCOME_STATUSES = ("findings", "clean", "skipped", "errored")
#: What impact_pct is a share of.
IMPACT_BASES = ("analysis window", "capture", "profiled kernel time")
#: Version of the JSON report's shape (docs/reports.md has its changelog).
REPORT_SCHEMA_VERSION = 13


@dataclass
class PrincipleRef:
    """A guide principle a finding cites (from the guide catalog)."""

    id: str
    title: str
    url: str


@dataclass
class Finding:
    """One problem found in one capture, with its evidence, cost and fix."""

    rule_id: str
    rule_name: str
    severity: str
    title: str
    message: str
    capture_id: int
    impact_ns: int
    impact_pct: float
    evidence: list[dict[str, Any]] = field(default_factory=list)
    evidence_columns: list[str] = field(default_factory=list)
    evidence_total_rows: int = 0
    principles: list[PrincipleRef] = field(default_factory=list)
    fix: str = ""
    category: str = ""
    observed: Any = None
    threshold: Any = None
    # The GPU whose time the impact comes out of; None for a host-wide finding (docs/impact.md).
    device_id: int | None = None
    # What impact_pct is a share of: the device's analysis window, the whole capture (host-wide findings), or
    # the summed profiled kernel time (a Nsight Compute report alone).
    impact_basis: str = "analysis window"
    # The rule's own estimate before findings on the same time were reconciled; impact_ns <= claimed_ns.
    claimed_ns: int = 0
    # The [[waive]] entry matching this finding (engine/waivers.py): status active (kept out of --fail-on) or
    # expired (reported, no longer applied); None when none matches.
    waiver: dict[str, Any] | None = None
    # Where in the program the impact lies: [{path, share_pct, impact_ns}], NVTX paths with the largest shares,
    # then '(other)' and '(no NVTX range)'; empty when the capture has no NVTX ranges or the operations behind the
    # finding cannot be told (nsight_advisor.engine.regions).
    regions: list[dict[str, Any]] = field(default_factory=list)
    # The program functions behind a host-side finding: [{symbol, module, count}], the innermost program frames of
    # the backtraces recorded inside its API calls, most frequent first; empty without backtraces
    # (nsight_advisor.engine.source_frames).
    source_frames: list[dict[str, Any]] = field(default_factory=list)
    # What the step would save with this finding's fix applied, from replaying the capture's step dependency graph
    # (nsight_advisor.engine.whatif); None where the capture has no steps or the fix is not modeled (then left out
    # of the JSON). Claimed time (impact_ns) is not saved time where work overlaps: docs/impact.md.
    saving_ns: int | None = None
    # The share of the critical path of the capture's steps that this finding's operations hold (the kernels,
    # host work or waits its fix changes), percent (nsight_advisor.engine.path_share); None where the capture has no
    # steps or the fix is not modeled (set even where the replays' bound left saving_ns None).
    critical_path_pct: float | None = None
    # What the steps would save with this rule's fix applied at once wherever it fires on the same subject in the
    # replayed captures: every rank or GPU of a job, each with its own finding (nsight_advisor.engine.whatif). Where
    # ranks wait for each other at collectives, one rank's fix alone may save nothing while all of them together
    # save much; None where the rule fires on one rank or GPU only, its fix is not modeled, or the replays' bound was
    # reached (then left out of the JSON). Replayed before the findings one by one, so a large job keeps it.
    saving_all_ranks_ns: int | None = None
    # The other findings of the capture whose fixes change some of the same operations (kernels, gaps, waits), as
    # [{rule_id, rule_name, saving_ns, fingerprint}]: their savings need not add up
    # (nsight_advisor.engine.shared_fixes). Only findings with a saving take part; empty elsewhere (then left out of
    # the JSON).
    shares_fix_with: list[dict[str, Any]] = field(default_factory=list)
    # What the steps would save with the fixes of this finding and of those in ``shares_fix_with`` applied at once
    # (replayed as ``whatif --fix A --fix B`` does); None where it shares its fix with none (left out of the JSON).
    saving_together_ns: int | None = None
    # Engine bookkeeping between running a rule and reconciling impacts; never serialized.
    internal: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def waived(self) -> bool:
        """True when an unexpired waiver accepts this finding (it stays out of ``--fail-on``)."""
        return bool(self.waiver) and self.waiver.get("status") == "active"

    def to_dict(self) -> dict[str, Any]:
        from nsight_advisor.engine.fingerprint import fingerprint

        # field by field without ``internal`` (the rule, the capture, the top row), copied as plainly as the JSON
        # needs: asdict deep-copied ``internal`` only to drop it (2.3 s of the 8 DLRM ranks' 96 findings), and its
        # generic walk was still a tenth of their analyze, called once per report written
        out = {f.name: _plain_copy(getattr(self, f.name)) for f in _FINDING_FIELDS}
        for key in ("saving_ns", "critical_path_pct", "saving_all_ranks_ns", "saving_together_ns"):
            if out.get(key) is None:
                out.pop(key, None)
        if not out.get("shares_fix_with"):
            out.pop("shares_fix_with", None)
        out["fingerprint"] = fingerprint(out)  # derived, never stored: rule, device and subject
        return out


_FINDING_FIELDS = tuple(f for f in dataclasses.fields(Finding) if f.name != "internal")


def _plain_copy(value: Any) -> Any:
    """``value`` copied as :func:`dataclasses.asdict` copies a field (dataclasses to dicts; lists, tuples and dicts
    rebuilt; anything else deep-copied), with the immutable scalars of evidence rows passed through as they are."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, list):
        return [_plain_copy(v) for v in value]
    if isinstance(value, dict):
        return type(value)((_plain_copy(k), _plain_copy(v)) for k, v in value.items())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return asdict(value)
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a named tuple, rebuilt as asdict does
        return type(value)(*[_plain_copy(v) for v in value])
    if isinstance(value, tuple):
        return type(value)(_plain_copy(v) for v in value)
    return copy.deepcopy(value)


@dataclass
class Outcome:
    """What happened to one rule on one analysis: findings, clean, skipped or errored."""

    rule_id: str
    rule_name: str
    status: str
    reason: str = ""
    capture_option: str = ""
    findings: int = 0
    elapsed_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class AnalysisResult:
    """Everything one ``analyze`` produced; ``to_dict`` is the JSON contract."""

    tool: dict[str, Any]
    captures: list[dict[str, Any]]
    findings: list[Finding]
    outcomes: list[Outcome]
    # Facts for the report header and charts (GPU busy %, top kernels, categories); filled by the engine
    # from the store so that templates do no analysis.
    summary: dict[str, Any] = field(default_factory=dict)
    # Every configured [[waive]] entry, its status and how many findings it matched.
    waivers: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        out = {
            "schema_version": REPORT_SCHEMA_VERSION,
            "tool": self.tool,
            "captures": self.captures,
            "findings": [f.to_dict() for f in self.findings],
            "outcomes": [o.to_dict() for o in self.outcomes],
            "summary": self.summary,
            "waivers": self.waivers,
        }
        if len(self.captures) > 1:  # a job: the same findings grouped per rule and subject, ranks inside
            from nsight_advisor.engine.job_findings import job_findings

            out["job_findings"] = job_findings(self)
        return out

    def max_severity(self) -> str | None:
        """The highest severity among the findings, or None when there are none."""
        if not self.findings:
            return None
        return max((f.severity for f in self.findings), key=severity_rank)


def result_from_dict(doc: dict[str, Any]) -> AnalysisResult:
    """The inverse of :meth:`AnalysisResult.to_dict` (how a kept result comes back from the result cache)."""
    return AnalysisResult(
        tool=doc["tool"], captures=doc["captures"],
        findings=[_finding(f) for f in doc["findings"]],
        outcomes=[_build(Outcome, o) for o in doc["outcomes"]],
        summary=doc.get("summary") or {}, waivers=doc.get("waivers") or [],
    )


def _finding(doc: dict[str, Any]) -> Finding:
    finding = _build(Finding, doc)
    finding.principles = [_build(PrincipleRef, p) for p in doc.get("principles") or []]
    return finding


def _build(cls, doc: dict[str, Any]):
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in doc.items() if k in names})
