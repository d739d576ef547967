"""A finding's stable identity across runs: its rule, its device and its subject, never the numbers in its message.

The same function serves ``compare`` (matching BASE's findings to HEAD's), ``analyze``'s SARIF
``partialFingerprints`` (so code scanning keeps one alert per problem from run to run) and waivers.
"""

from __future__ import annotations

import hashlib
from typing import Any

#: Leading evidence columns that can name a finding's subject (a kernel, an API, a cause).
SUBJECT_COLUMNS = 3
#: The ``partialFingerprints`` key of every SARIF result we write (bump the version if the recipe changes).
FINGERPRINT_KEY = "nsightAdvisorSubject/v1"


def _as_dict(finding: Any) -> dict:
    return finding if isinstance(finding, dict) else finding.to_dict()


def finding_subject(finding: Any) -> list[str]:
    """What a finding is about: the leading text values of its top evidence row (a kernel, an API, a cause),
    up to :data:`SUBJECT_COLUMNS`, stopping at the first number (counts, times and ids change between runs).

    ``finding``: a :class:`~nsight_advisor.engine.model.Finding` or its ``to_dict()``.
    """
    f = _as_dict(finding)
    rows = f.get("evidence") or []
    if not rows:
        return []
    subject = []
    for col in (f.get("evidence_columns") or list(rows[0]))[:SUBJECT_COLUMNS]:
        value = rows[0].get(col)
        if not isinstance(value, str):
            break
        subject.append(value)
    return subject


def fingerprint(finding: Any) -> str:
    """16 hex digits of the SHA-256 of the rule id, the device (``host`` when none) and the subject."""
    f = _as_dict(finding)
    device = f.get("device_id")
    text = "\x1f".join([str(f["rule_id"]), "host" if device is None else str(device), *finding_subject(f)])
    return hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()[:16]
