"""Test-harness kernels: verification and reference code that runs beside the kernels under test.

Benchmarks and tests check a kernel against a simple reference implementation (CUTLASS's ``ReferenceGemm_kernel``,
a ``verify_result`` or ``check_*`` kernel, a naive ``*_reference``). Such a kernel is often the slowest in the
capture, by design, and advice about it is advice nobody will act on. A finding whose top kernel (the first
evidence row, the one its message names) is harness code is kept, marked with a note, and ranked after the findings
on the product's kernels.
"""

from __future__ import annotations

import re
from typing import Iterable

# Matched on the kernel's short and full name, case-insensitively: "reference" anywhere (ReferenceGemm_kernel,
# gemm_reference), "verif" (verify, verification), "check" as a word part at a name boundary (check_result,
# checkKernel, but not "checkpoint"), "golden" (golden-model comparisons).
HARNESS_NAME = re.compile(r"reference|verif|(?:^|[^a-z])check(?!point)|golden", re.IGNORECASE)

NOTE = "its top kernel is test-harness code (verification or reference, by name): ranked after the product's kernels"


def is_harness(name: str | None) -> bool:
    """Whether a kernel name reads as verification or reference code."""
    return bool(name) and bool(HARNESS_NAME.search(str(name)))


def _kernel_names(row: dict) -> list[str]:
    return [str(row[k]) for k in ("short_name", "name", "kernel", "kernel_name") if row.get(k)]


def mark_harness(findings: Iterable) -> None:
    """Flag findings whose top evidence row names a harness kernel; their message gains a note."""
    for f in findings:
        names = _kernel_names(f.evidence[0]) if f.evidence else []
        if names and any(is_harness(n) for n in names):
            f.internal["harness"] = True
            if NOTE not in f.message:
                f.message = f"{f.message} ({NOTE})"


def harness_rank(f) -> int:
    """0 for a finding on the product's kernels (or on none), 1 for one whose top kernel is harness code."""
    return 1 if f.internal.get("harness") else 0
