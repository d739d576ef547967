"""How every report format marks a waived finding (the waiver dicts come from the engine's to_dict)."""

from __future__ import annotations


def waiver_text(waiver: dict | None) -> str:
    """How a report marks a finding: "waived (reason)", or that its waiver expired; "" without one."""
    if not waiver:
        return ""
    if waiver.get("status") == "active":
        return f"waived ({waiver.get('reason')}) until {waiver.get('expires')}"
    return f"waiver expired on {waiver.get('expires')} ({waiver.get('reason')}): it no longer applies"

