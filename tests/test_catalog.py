"""The guide catalog: complete entries, stable ids, and every rule citing principles that exist."""

from __future__ import annotations

import re

import pytest

from nsight_advisor.catalog import get_principle, load_catalog
from nsight_advisor.engine.rules import load_rule, rule_folders
from nsight_advisor.common.resources import builtin_rules_dir
from tests.conftest import REPO

ID = re.compile(r"^[a-z0-9-]+(\.[a-z0-9-]+)+$")


def test_every_principle_is_complete():
    catalog = load_catalog()
    assert len(catalog) >= 30
    for pid, p in catalog.items():
        assert ID.match(pid), pid
        assert p.url.startswith("https://"), pid
        assert p.guide and p.title and len(p.summary) > 80, pid
        assert p.anchor_confidence in ("verified", "recalled", "inferred"), pid
        if p.anchors:
            assert p.url.endswith("#" + p.anchors[0]), f"{pid}: url must use the first anchor"


def test_ids_and_aliases_are_unique():
    catalog = load_catalog()
    aliases = [a for p in catalog.values() for a in p.aliases]
    assert len(aliases) == len(set(aliases))
    assert not set(aliases) & set(catalog)
    for alias in aliases:
        assert get_principle(alias) is not None


@pytest.mark.parametrize("pid", [
    "gpu-background.architecture", "gpu-background.architecture.tensor-cores",
    "gpu-background.execution-model.waves", "gpu-background.understanding-performance.arithmetic-intensity",
    "gpu-background.understanding-performance.latency-limited", "gpu-background.operation-categories.elementwise",
    "gpu-background.operation-categories.reduction", "gpu-background.operation-categories.dot-product",
    "matmul.tensor-core-requirements", "matmul.tile-quantization", "matmul.wave-quantization",
    "fully-connected.checklist", "convolution.channels", "memory-limited.checklist",
    "mixed-precision.training", "mixed-precision.tf32", "mixed-precision.fp8-hopper",
    "cuda-best-practices.pinned-memory", "cuda-best-practices.async-transfers",
    "cuda-programming.explicit-synchronization", "cuda-best-practices.occupancy",
    "cuda-best-practices.launch-configuration", "cuda-graphs.launch-overhead",
])
def test_catalog_covers_the_guides_the_rules_need(pid):
    assert get_principle(pid) is not None


def test_numbers_from_the_guides_are_carried():
    assert any("108" in n for n in get_principle("matmul.wave-quantization").numbers)
    assert any("300" in n for n in get_principle("gpu-background.execution-model.waves").numbers)
    assert any("138.9" in n for n in get_principle("gpu-background.understanding-performance.arithmetic-intensity").numbers)


def _all_rule_folders():
    folders = []
    if builtin_rules_dir().is_dir():
        folders += rule_folders(builtin_rules_dir())
    examples = REPO / "rules"
    folders += [f for f in examples.glob("example-*") if (f / "rule.toml").exists() and f not in folders]
    return folders


@pytest.mark.parametrize("folder", _all_rule_folders() or [None], ids=lambda f: f.name if f else "no-rules")
def test_every_rule_cites_existing_principles(folder):
    if folder is None:
        pytest.skip("no rules yet")
    rule = load_rule(folder)
    assert rule.principles, f"{rule.name} cites no principle"
    for pid in rule.principles:
        assert get_principle(pid) is not None, f"{rule.name} cites {pid!r}, which is not in the catalog"
