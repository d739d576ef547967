"""Findings whose fixes change the same operations, and what their fixes would save applied together.

Each finding's ``saving_ns`` replays its fix alone. Two findings on the same kernels (a grid of one block and a block
of one thread; tensor cores unused and a tail wave) each take their own estimate off those kernels, so their
savings do not add up: on ``nsu_v100_openacc`` small-grid saves 20.6 s and block-size 20.2 s of a 20.9 s window.
:func:`attach_shared_fixes` finds, per capture, the groups of findings whose fixes change at least one operation in
common (connected: A shares with B and B with C puts all three in one group), replays each group's fixes at once,
as ``nsight-advisor whatif --fix A --fix B`` does (the kernels' scales multiplied, the waits dropped together), and
gives every member ``shares_fix_with`` (the others: rule, fingerprint, saving alone) and ``saving_together_ns``. Only
findings whose fix alone saves something take part: a group needs two of them to be worth a replay.
docs/impact.md, "Findings on the same operations".
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import numpy as np

if TYPE_CHECKING:
    from nsight_advisor.engine.model import Finding


def fix_groups(findings: list[Finding], changes: dict[int, dict[str, tuple]]) -> list[list[Finding]]:
    """The groups of two or more ``findings`` of one capture whose changes (kept sparse: per key, the indexes of
    the operations they alter and their scales) alter an operation in common, each in the findings' order; the
    groups in the order of their first member."""
    ops = {id(f): np.unique(np.concatenate([at for at, _scale in changes[id(f)].values()] or [np.empty(0, int)]))
           for f in findings}
    parent = list(range(len(findings)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, a in enumerate(findings):
        for j in range(i + 1, len(findings)):
            b = findings[j]
            if a.capture_id == b.capture_id and root(i) != root(j) \
                    and np.intersect1d(ops[id(a)], ops[id(b)], assume_unique=True).size:
                parent[root(j)] = root(i)
    groups: dict[int, list[Finding]] = {}
    for i, f in enumerate(findings):
        groups.setdefault(root(i), []).append(f)
    return [members for members in groups.values() if len(members) > 1]


def attach_shared_fixes(findings: list[Finding], changes: dict[int, dict[str, tuple]],
                        saving_of: Callable[[list[Finding]], int | None]) -> int:
    """Set ``shares_fix_with`` and ``saving_together_ns`` on the members of each group (:func:`fix_groups`) of the
    ``findings`` whose fix saves something. ``saving_of(members)``: what the steps save with all their fixes at
    once, None where the replays' bound leaves it out (the group then stays unmarked). Returns the groups
    replayed."""
    from nsight_advisor.engine.fingerprint import fingerprint

    saving = [f for f in findings if id(f) in changes and (f.saving_ns or 0) > 0]
    replayed = 0
    for members in fix_groups(saving, changes):
        together = saving_of(members)
        if together is None:
            continue
        replayed += 1
        names = [{"rule_id": f.rule_id, "rule_name": f.rule_name, "saving_ns": f.saving_ns,
                  "fingerprint": fingerprint(f)} for f in members]
        for f, me in zip(members, names):
            f.shares_fix_with = [other for other in names if other is not me]
            f.saving_together_ns = together
    return replayed


__all__ = ["fix_groups", "attach_shared_fixes"]
