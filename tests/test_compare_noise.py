"""A CI gate that never fails on noise: real captures compared with copies whose every kernel duration was jittered
by a uniform +-8% (``../shared/tools/stretch_nsys.py --noise 8``, several seeds) give no significant kernel and
exit 0 under ``--fail-on-regression 3``; kernels with too few launches are said to be; and a real change hidden in
the same noise is still found with its size."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import TRACES
from test_compare import CLOVERLEAF, _cli, _compare_json, _most_launched, stretch_kernel

STRETCH = TRACES.parent / "tools" / "stretch_nsys.py"
#: The real pair's BASE (no kernel under 4 launches) and two captures with few-launch kernels: the H100 run has 10
#: configurations launched twice and 23 launched 4 to 9 times, CloverLeaf 16 launched once.
NOISY = ["nsys_ai_mfu_2gpu_before.sqlite", "nsys_ai_h100_2gpu_1s.sqlite", "pipit_cloverleaf_a100.sqlite"]
SEEDS = (1, 2, 3)


def _jitter(src: Path, dst: Path, seed: int, *extra: str) -> Path:
    """``stretch_nsys.py`` writes its copy to ``dst`` (in pytest's temporary folder; the trace is never touched)."""
    subprocess.run([sys.executable, str(STRETCH), str(src), str(dst), *extra, "--seed", str(seed)], check=True,
                   capture_output=True, timeout=120)
    return dst


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    """One folder (and so one analysis cache) for the module: each BASE is analyzed once, not once per seed."""
    return tmp_path_factory.mktemp("noise")


def _need(*paths: Path) -> None:
    for p in paths:
        if not p.exists():
            pytest.skip(f"real traces or tools absent at {p}")


@pytest.mark.parametrize("capture", NOISY)
def test_jittered_copy_is_never_significant(capture: str, work: Path) -> None:
    base = TRACES / "nsys" / capture
    _need(base, STRETCH)
    for seed in SEEDS:
        head = _jitter(base, work / f"{base.stem}-noise-{seed}.sqlite", seed, "--noise", "8")
        data, proc = _compare_json(base, head, work, "--fail-on-regression", "3")
        assert proc.returncode == 0, (seed, data["gate"])
        assert data["gate"] == {"threshold_pct": 3.0, "tripped": False, "tripped_by": []}
        loud = [(k["short_name"], k["median_change_pct"], k["q_value"]) for k in data["kernels"] if k["significant"]]
        assert not loud, (seed, loud)
        assert data["kernel_counts"]["slower"] == data["kernel_counts"]["faster"] == 0
        assert not data["verdict"]["significant"], data["verdict"]["text"]
        # the noise is there: medians moved, some by more than the 2% floor, only not beyond the noise
        assert max(abs(k["median_change_pct"]) for k in data["kernels"]) >= 2.0
        stats = data["statistics"]
        few = [k for k in data["kernels"] if min(k["base"]["launches"], k["head"]["launches"]) < 4]
        assert all(k["status"] == "too few" and k["q_value"] is None for k in few)
        assert stats["kernels_tested"] == len(data["kernels"]) - len(few) > 0
        assert stats["min_launches"] == 4 and stats["fdr_q"] == 0.05


def test_two_launches_a_side_are_too_few_to_tell(work: Path) -> None:
    base = TRACES / "nsys" / "nsys_ai_h100_2gpu_1s.sqlite"
    _need(base, STRETCH)
    head = _jitter(base, work / "h100-noise.sqlite", 1, "--noise", "8")
    data, _ = _compare_json(base, head, work)
    twice = [k for k in data["kernels"] if k["base"]["launches"] == k["head"]["launches"] == 2]
    assert len(twice) == 10
    for k in twice:
        assert k["status"] == "too few" and not k["significant"] and k["ci_low_pct"] is None, k
        assert k["note"] == "too few launches to tell (2 and 2; the rank test needs at least 4 a side to reach 5%)"
        assert k["median_change_pct"] is not None  # the change is shown, only not judged
    md = _cli("compare", str(base), str(head), cwd=work).stdout
    tested = data["statistics"]["kernels_tested"]
    assert f"{tested} kernels tested; false discovery rate controlled at 5%" in md
    assert "10 too few" in md.split("### Kernels", 1)[1].splitlines()[1]


def test_stretched_kernel_found_through_the_noise(work: Path) -> None:
    _need(CLOVERLEAF, STRETCH)
    sid, name = _most_launched(CLOVERLEAF)
    stretched = work / "stretched.sqlite"
    stretch_kernel(CLOVERLEAF, stretched, sid, 1.3)
    for seed in SEEDS[:2]:
        head = _jitter(stretched, work / f"stretched-noise-{seed}.sqlite", seed, "--noise", "8")
        data, _ = _compare_json(CLOVERLEAF, head, work)
        found = [k for k in data["kernels"] if k["significant"]]
        assert [k["name"].rsplit(" <<<", 1)[0] for k in found] == [name], [k["short_name"] for k in found]
        (k,) = found
        assert k["status"] == "slower" and abs(k["median_change_pct"] - 30.0) <= 2.0, k
        assert k["q_value"] < 0.05 and k["ci_low_pct"] > 0
