"""Iterations (nsight_advisor/analysis/iterations.py) on real captures, with counts checked by hand.

How the counts below were found, by reading the stores (`nsight-advisor query CAPTURE "..."`):

- nsys_ai_mfu_2gpu_before: a 300 ms window of a transformer running on two H100s, with PyTorch's emit_nvtx ranges
  but no step range (the repeating operator ranges, aten::to and the like, leave host time between them). Each
  block launches one GELU kernel, one 192x208 nvjet GEMM, three layer norms and two flash-attention forwards: on
  each GPU, 17 GELU and 17 GEMM launches, 51 layer norms and 34 flash-attention kernels, so 17 blocks.
- nsys_ai_mfu_2gpu_after: the same program and window length after the change: 15 GELU, 15 GEMM, 45 layer norms
  and 30 flash-attention kernels per GPU, so 15 blocks (each took about 19.1 ms against 16.8 ms before).
- pipit_cloverleaf_a100 (no NVTX): CloverLeaf computes its time step once per step with a reduction,
  par_reduce_kernel<calc_dt_kernel>, launched 10 times; the 3 other reductions are field_summary's. 10 steps.
- hta_ddp_v100_rank1: the PyTorch profiler recorded 5 steps, ProfilerStep#N ranges back to back.
"""

from __future__ import annotations

import json

import jsonschema
import pytest

from nsight_advisor import workflow
from nsight_advisor.analysis.iterations import _quantile
from nsight_advisor.report.json_report import json_schema
from conftest import TRACES

NSYS = TRACES / "nsys"


def _iterations(path, monkeypatch, tmp_path) -> dict | None:
    if not path.exists():
        pytest.skip(f"real traces not present at {TRACES}")
    monkeypatch.setenv("NSIGHT_ADVISOR_CACHE", str(tmp_path / "cache"))
    result = workflow.analyze([path], use_cache=False)
    doc = json.loads(json.dumps(result.to_dict()))
    assert doc["schema_version"] >= 3  # iterations arrived in version 3
    jsonschema.Draft202012Validator(json_schema()).validate(doc)
    return doc["captures"][0]["iterations"]


@pytest.mark.parametrize("name, count, source", [
    ("nsys_ai_mfu_2gpu_before.sqlite", 17, "kernel sequence"),
    ("nsys_ai_mfu_2gpu_after.sqlite", 15, "kernel sequence"),
    ("pipit_cloverleaf_a100.sqlite", 10, "kernel sequence"),
])
def test_iterations_of_nsys_captures_match_the_hand_count(name, count, source, monkeypatch, tmp_path):
    it = _iterations(NSYS / name, monkeypatch, tmp_path)
    assert it is not None and (it["count"], it["source"]) == (count, source)
    assert 0 < it["p10_ns"] <= it["median_ns"] <= it["p90_ns"]
    assert 0 <= it["warmup"] <= count // 2


def test_before_after_blocks_took_longer_after(monkeypatch, tmp_path):
    before = _iterations(NSYS / "nsys_ai_mfu_2gpu_before.sqlite", monkeypatch, tmp_path)
    after = _iterations(NSYS / "nsys_ai_mfu_2gpu_after.sqlite", monkeypatch, tmp_path)
    # the same 300 ms of window hold 17 blocks before and 15 after: each block is slower after
    assert 16_000_000 < before["median_ns"] < 17_500_000 < 18_500_000 < after["median_ns"] < 20_000_000


def test_profiler_steps_are_the_iterations_of_a_pytorch_trace(monkeypatch, tmp_path):
    it = _iterations(TRACES / "kineto" / "hta_ddp_v100_rank1.json.gz", monkeypatch, tmp_path)
    assert it["source"] == "NVTX range 'ProfilerStep'" and it["count"] == 5


def test_a_capture_without_repeating_work_has_no_iterations(monkeypatch, tmp_path):
    # fuser_h200_matmul: 19 kernels of a compile-and-run script, nothing repeats three times in order
    assert _iterations(NSYS / "fuser_h200_matmul.sqlite", monkeypatch, tmp_path) is None


def test_quantiles_interpolate_like_numpy():
    assert _quantile([10, 20, 30, 40], 0.5) == 25
    assert _quantile([10, 20, 30, 40], 0.1) == 13
    assert _quantile([7], 0.9) == 7


def test_iterations_of_several_captures_at_once_are_each_captures_own(tmp_path):
    """find_all_iterations asks for every capture in one query per kind: one store holding an NVTX-stepped trace,
    two kernel-sequence exports and one without iterations gives each capture what a store of it alone gives
    (the queries partition by capture; a mix-up would move one capture's steps or source to another)."""
    from nsight_advisor.analysis.iterations import find_all_iterations
    from nsight_advisor.analysis.steps import steps_of
    from nsight_advisor.store.database import connect
    from nsight_advisor.store.opening import ingest_to_store

    paths = [NSYS / "pipit_cloverleaf_a100.sqlite", TRACES / "kineto" / "hta_ddp_v100_rank1.json.gz",
             NSYS / "cutlass_benchmark.sqlite", NSYS / "nsys_ai_mfu_2gpu_after.sqlite"]
    if not all(p.exists() for p in paths):
        pytest.skip(f"real traces not present at {TRACES}")
    ingest_to_store(paths, tmp_path / "all.duckdb")
    alone = {}
    for i, p in enumerate(paths, start=1):
        ingest_to_store([p], tmp_path / f"{i}.duckdb")
        con = connect(tmp_path / f"{i}.duckdb", read_only=True)
        try:
            alone[i] = (find_all_iterations(con, [1])[1], steps_of(con, [1]).get(1))
        finally:
            con.close()
    con = connect(tmp_path / "all.duckdb", read_only=True)
    try:
        together = find_all_iterations(con, [1, 2, 3, 4])
        steps = steps_of(con, [1, 2, 3, 4])
    finally:
        con.close()
    assert {i: (together[i], steps.get(i)) for i in alone} == alone
    sources = {i: (it.source, len(it.spans)) if it else None for i, it in together.items()}
    assert sources == {1: ("kernel sequence", 10), 2: ("NVTX range 'ProfilerStep'", 5), 3: None,
                       4: ("kernel sequence", 15)}
