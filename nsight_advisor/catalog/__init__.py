"""The guide catalog: the NVIDIA guide principles that rules cite, loaded from ``principles.toml``.

Each principle has a stable dotted id (``gpu-background.execution-model.waves``), the guide and section it
comes from, a URL with the section's anchor, our own summary and the key numbers.
"""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass, field
from importlib import resources

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

_FIELDS = {"id", "aliases", "guide", "section", "title", "url", "anchors", "anchor_confidence", "summary", "numbers"}


@dataclass(frozen=True)
class Principle:
    """One cited section of a guide."""

    id: str
    guide: str
    section: str
    title: str
    url: str
    summary: str
    anchors: tuple[str, ...] = field(default_factory=tuple)
    anchor_confidence: str = "inferred"
    numbers: tuple[str, ...] = field(default_factory=tuple)
    aliases: tuple[str, ...] = field(default_factory=tuple)

    @property
    def link_text(self) -> str:
        """'§3 GPU Execution Model' (section number when the guide numbers it, then the title)."""
        return f"{self.section} {self.title}".strip()

    def to_dict(self) -> dict:
        """Plain JSON-ready dict."""
        return {
            "id": self.id, "guide": self.guide, "section": self.section, "title": self.title, "url": self.url,
            "anchors": list(self.anchors), "anchor_confidence": self.anchor_confidence, "summary": self.summary,
            "numbers": list(self.numbers),
        }


def _parse(data: dict, source: str) -> dict[str, Principle]:
    out: dict[str, Principle] = {}
    for i, raw in enumerate(data.get("principle", [])):
        unknown = set(raw) - _FIELDS
        if unknown:
            raise ValueError(f"{source}: principle #{i + 1}: unknown key(s) {sorted(unknown)}")
        pid = raw["id"]
        if pid in out:
            raise ValueError(f"{source}: duplicate principle id {pid!r}")
        out[pid] = Principle(
            id=pid, guide=raw["guide"], section=raw.get("section", ""), title=raw["title"], url=raw["url"],
            summary=" ".join(raw["summary"].split()), anchors=tuple(raw.get("anchors", ())),
            anchor_confidence=raw.get("anchor_confidence", "inferred"), numbers=tuple(raw.get("numbers", ())),
            aliases=tuple(raw.get("aliases", ())),
        )
    return out


@functools.lru_cache(maxsize=1)
def load_catalog() -> dict[str, Principle]:
    """Every principle of the shipped catalog, by id (in file order)."""
    text = (resources.files("nsight_advisor.catalog") / "principles.toml").read_text(encoding="utf-8")
    return _parse(tomllib.loads(text), "principles.toml")


@functools.lru_cache(maxsize=1)
def _aliases() -> dict[str, Principle]:
    return {alias: p for p in load_catalog().values() for alias in p.aliases}


def get_principle(principle_id: str) -> Principle | None:
    """The principle with this id (or one of its aliases), or None."""
    return load_catalog().get(principle_id) or _aliases().get(principle_id)


def principle_ids() -> list[str]:
    """Every principle id, in catalog order."""
    return list(load_catalog())


__all__ = ["Principle", "load_catalog", "get_principle", "principle_ids"]
