"""Golden outputs: ``analyze``'s JSON and Markdown for three real captures (an nsys export, an Nsight Compute
report, a PyTorch profiler trace) match tests/golden/, run-to-run noise (rule timings, the tool's version)
normalized away. A change in what the tool says shows up here as a diff to review.

To accept a change: review the diff this test prints, then run ``python -m tools.golden --update`` and commit
tests/golden/."""

from __future__ import annotations

import json

import pytest

from conftest import TRACES, trace_param
from tools import golden


@pytest.mark.parametrize("capture", trace_param([TRACES / c for c in golden.CAPTURES]))
def test_outputs_match_the_golden_files(capture):
    if not capture.exists():
        pytest.skip(f"real traces not present at {TRACES}")
    name = str(capture.relative_to(TRACES))
    diffs = golden.differences(name)
    assert not diffs, ("\n\n".join(diffs) + f"\n\nthe output of {name} changed: if the change is intended, run "
                       f"`{golden.COMMAND}` and commit tests/golden/")


def test_normalization_removes_only_run_to_run_noise():
    """Timings and the version go; every finding, number and name stays."""
    data = {"tool": {"name": "nsight-advisor", "version": "9.9"}, "findings": [{"rule_id": "NA101", "impact_ns": 5}],
            "outcomes": [{"rule_id": "NA101", "status": "findings", "elapsed_s": 0.0123}]}
    normalized = golden.normalize_json(data)
    assert normalized["tool"]["version"] == "VERSION" and normalized["outcomes"][0]["elapsed_s"] == 0
    assert normalized["findings"] == data["findings"] and data["outcomes"][0]["elapsed_s"] == 0.0123
    kept = json.loads(golden.golden_path(golden.CAPTURES[0], "json").read_text(encoding="utf-8"))
    assert kept["findings"] and all(o["elapsed_s"] == 0 for o in kept["outcomes"])
