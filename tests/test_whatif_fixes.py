"""``whatif --fix RULE``: the findings' fixes replayed on the engineer's request (engine/whatif.py, api.whatif).

The answer must be the report's: one rule's fix gives the saving ``analyze`` puts on its finding, and a rule fixed on
both GPUs of a capture whose GPUs run processes of their own gives the findings' ``saving_all_ranks_ns``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from nsight_advisor import api
from nsight_advisor.common.errors import InputError

REPO = Path(__file__).resolve().parent.parent
TRACES = REPO.parent / "shared" / "traces"


def _capture(name: str) -> Path:
    path = TRACES / "nsys" / name
    if not path.exists():
        pytest.skip(f"real traces not present at {TRACES} (CI has ../shared/traces beside the checkout)")
    return path


def _total(answer: dict) -> int:
    return sum(c["saving_ns"] for c in answer["captures"])


def test_one_rules_fix_saves_what_the_report_says(tmp_path):
    capture = _capture("pipit_cloverleaf_a100.sqlite")
    store = tmp_path / "s.duckdb"
    result = api.open(capture, store=store).result
    finding = next(f for f in result.findings if f.rule_name == "sync-memcpy")
    assert finding.saving_ns > 5_000_000  # the staged copies (docs/impact.md): 8.5 ms
    answer = api.whatif(capture, fixes=["sync-memcpy"], store=store)
    assert _total(answer) == finding.saving_ns
    assert answer["change"] == {"fixes": [{"rule": "sync-memcpy", "rule_id": finding.rule_id, "findings": 1,
                                           "replayed": 1}]}
    assert answer["predicted_median_iteration_ns"] < answer["median_iteration_ns"]
    # with a kernel made faster too: both in the change, and the step shorter than with either alone
    both = api.whatif(capture, fixes=["sync-memcpy"], kernel="par_ranged2d_kernel", speedup=2.0, store=store)
    kernel = api.whatif(capture, kernel="par_ranged2d_kernel", speedup=2.0, store=store)
    assert set(both["change"]) == {"kernel", "speedup", "kernel_names", "launches", "fixes"}
    assert _total(both) > max(_total(kernel), _total(answer))


def test_a_rule_on_both_gpus_saves_what_fixing_it_everywhere_saves(tmp_path):
    capture = _capture("nsys_ai_mfu_2gpu_after.sqlite")
    store = tmp_path / "s.duckdb"
    result = api.open(capture, store=store).result
    idle = [f for f in result.findings if f.rule_name == "gpu-idle-gap"]
    assert len(idle) == 2 and len({f.saving_all_ranks_ns for f in idle}) == 1
    answer = api.whatif(capture, fixes=["gpu-idle-gap", idle[0].rule_id], store=store)  # named twice: once
    assert _total(answer) == idle[0].saving_all_ranks_ns > sum(f.saving_ns for f in idle)
    assert answer["change"]["fixes"] == [{"rule": "gpu-idle-gap", "rule_id": idle[0].rule_id, "findings": 2,
                                          "replayed": 2}]
    text = api.whatif_text(answer)
    assert text.startswith("what if the 2 findings of gpu-idle-gap were fixed") and "GPU 1" in text


@pytest.mark.parametrize("kwargs, said", [
    ({}, "name a change"),
    ({"kernel": "gemm"}, "--kernel and --speedup go together"),
    ({"speedup": 2.0}, "--kernel and --speedup go together"),
    ({"fixes": ["no-such-rule"]}, "--fix no-such-rule: no such rule"),
    ({"fixes": ["low-tensor-core-use"]}, "the rule found nothing in these captures"),
    # what makes a late rank late is its own work: no fix to replay (docs/impact.md, section 4)
    ({"fixes": ["collective-straggler"]}, "collective-straggler: the replay does not model its fix"),
])
def test_a_change_that_cannot_be_replayed_says_why(tmp_path, kwargs, said):
    capture = _capture("nsys_ai_mfu_2gpu_after.sqlite")
    with pytest.raises(InputError, match=said):
        api.whatif(capture, store=tmp_path / "s.duckdb", **kwargs)


def test_the_command_line(tmp_path):
    capture = str(_capture("pipit_cloverleaf_a100.sqlite"))
    env = {**os.environ, "PYTHONPATH": str(REPO), "NSIGHT_ADVISOR_CACHE": str(tmp_path / "cache")}

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "nsight_advisor", "whatif", capture, *args], env=env,
                              capture_output=True, text=True, timeout=300, cwd=tmp_path)

    done = cli("--fix", "sync-memcpy", "--fix", "sync-stall")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("what if the 1 finding of sync-memcpy were fixed, and the 1 finding of sync-stall "
                                  "were fixed\nmedian step: 32.469 ms -> ")
    bad = cli("--kernel", "par")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert bad.stderr.strip().count("\n") == 0 and "--kernel and --speedup go together" in bad.stderr
