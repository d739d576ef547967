"""What a paced program's idle findings say: the wait between frames claims nothing, and the finding says so.

The pacing itself (period, regularity, headroom) is a fact of the capture: :mod:`nsight_advisor.analysis.pacing`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nsight_advisor.analysis.pacing import Pacing
    from nsight_advisor.engine.model import Finding

#: Idle causes that a paced program's wait between frames takes: the host's own work or sleep, and the
#: synchronization that ends a frame (the GPU runs dry, then waits for the next one). One-time costs (startup, jit,
#: allocation), launch latency and synchronous copies stay as they are.
PACED_CAUSES = ("host", "sync", "unknown")


def _is_pace_wait(f: Finding) -> bool:
    return f.internal.get("part") == "idle" and bool(set(PACED_CAUSES) & set(f.internal.get("causes") or ()))


def mark_paced(findings: list[Finding], pacing: dict[int, Pacing | None]) -> None:
    """Before impacts are settled: the idle findings of a paced capture whose causes a pace wait takes
    (:data:`PACED_CAUSES`) claim nothing."""
    for f in findings:
        if pacing.get(f.capture_id) is not None and _is_pace_wait(f):
            f.claimed_ns = 0
            f.internal["claims"] = []
            f.internal["paced"] = True


def reword_paced(findings: list[Finding], pacing: dict[int, Pacing | None]) -> None:
    """After impacts are settled: those findings say that the program is paced, and what headroom it leaves."""
    for f in findings:
        paced = pacing.get(f.capture_id)
        if paced is None or not f.internal.get("paced"):
            continue
        f.message = (f"The program is {paced.sentence()} (onsets of {paced.frames} iterations vary by "
                     f"{100 * paced.onset_cv:.1f}%): the GPU idles waiting for the program's pace, which no change on "
                     f"the GPU side recovers. What the rule saw: {f.message}")
        f.fix = ("Nothing to recover on the GPU: work arrives at a fixed period (a frame, camera or request loop). "
                 f"The {paced.headroom_ns / 1e6:.1f} ms of headroom per frame can take more work per frame (a larger "
                 "model, higher resolution, more requests batched together) or a smaller GPU; to finish sooner, "
                 "raise the pace on the host side.")
