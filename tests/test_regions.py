"""findings[].regions (nsight_advisor/engine/regions.py) on the real captures with NVTX ranges.

Every finding whose operations lie on a timeline with NVTX ranges splits its impact over NVTX paths, '(other)' and
'(no NVTX range)': the shares sum to 100 and the parts to the finding's impact. A capture without NVTX ranges
leaves every list empty. The paths themselves come from nvtx_op_paths, the view that tests/test_nvtx_projection.py
checks against an independent computation through nvtx_gpu_projection.
"""

from __future__ import annotations

import json

import jsonschema
import pytest

from nsight_advisor import workflow
from nsight_advisor.engine.regions import NO_RANGE, OTHER, TOP_PATHS
from nsight_advisor.report.json_report import json_schema
from nsight_advisor.store.database import connect
from conftest import TRACES

#: Captures with push/pop NVTX ranges (PyTorch profiler traces: record_function ranges and profiler steps), and
#: findings of the default rules on them.
NVTX_EXPORTS = ["nsys/nsys_ai_mfu_2gpu_before.sqlite", "nsys/nsys_ai_mfu_2gpu_after.sqlite",
                "nsys/nsys_ai_h100_2gpu_1s.sqlite", "nsys/fuser_h200_matmul.sqlite", "nsys/memfusion.sqlite",
                "kineto/hta_ddp_v100_rank1.json.gz", "kineto/v100_rank0.pt.trace.json.gz"]


def _analyze(name: str, monkeypatch, tmp_path) -> dict:
    path = TRACES / name
    if not path.exists():
        pytest.skip(f"real traces not present at {TRACES}")
    monkeypatch.setenv("NSIGHT_ADVISOR_CACHE", str(tmp_path / "cache"))
    doc = json.loads(json.dumps(workflow.analyze([path], use_cache=False).to_dict()))
    jsonschema.Draft202012Validator(json_schema()).validate(doc)
    return doc


def _store(name: str, tmp_path):
    path = tmp_path / "direct.duckdb"
    workflow.ingest_to_store([TRACES / name], path)
    return path


@pytest.mark.parametrize("name", NVTX_EXPORTS)
def test_region_shares_sum_to_100(name, monkeypatch, tmp_path):
    doc = _analyze(name, monkeypatch, tmp_path)
    attributed = [f for f in doc["findings"] if f["regions"]]
    assert attributed, f"no finding of {name} was placed in NVTX regions"
    for f in attributed:
        regions = f["regions"]
        assert sum(r["share_pct"] for r in regions) == pytest.approx(100.0, abs=0.01), (f["rule_name"], regions)
        assert abs(sum(r["impact_ns"] for r in regions) - f["impact_ns"]) <= len(regions), (f["rule_name"], regions)
        paths = [r["path"] for r in regions]
        assert len(set(paths)) == len(paths)
        named = [r for r in regions if r["path"] not in (OTHER, NO_RANGE)]
        assert len(named) <= TOP_PATHS
        assert [r["share_pct"] for r in named] == sorted((r["share_pct"] for r in named), reverse=True)
        assert (OTHER in paths) == (len(named) == TOP_PATHS and paths.index(OTHER) == TOP_PATHS)
    # host-wide findings have no device time to place
    assert all(not f["regions"] for f in doc["findings"] if f["device_id"] is None)
    # the capture's breakdown: every GPU operation in the window, once
    paths = doc["captures"][0]["nvtx_paths"]
    assert paths and sum(p["share_pct"] for p in paths) == pytest.approx(100.0, abs=0.01)
    assert len({p["path"] for p in paths}) == len(paths)
    acct = doc["captures"][0]["accounting"]
    start, end = min(a["window_start_ns"] for a in acct), max(a["window_end_ns"] for a in acct)
    con = connect(_store(name, tmp_path))
    try:
        ops, total = con.execute("""
            select count(*), sum(duration_ns) from (
                select start_ns, end_ns, duration_ns from kernel_rows union all
                select start_ns, end_ns, duration_ns from memcpys union all
                select start_ns, end_ns, duration_ns from memsets)
            where end_ns > ? and start_ns < ?""", [start, end]).fetchone()
    finally:
        con.close()
    assert (sum(p["ops"] for p in paths), sum(p["gpu_ns"] for p in paths)) == (ops, total)


def test_mfu_before_memory_bound_kernels_lie_in_operator_ranges(monkeypatch, tmp_path):
    # PyTorch's emit_nvtx ranges name the operators: the elementwise kernels that memory-bound-kernel names are
    # launched from aten::mul, aten::add and the dtype casts (aten::to/aten::_to_copy/aten::copy_)
    doc = _analyze("nsys/nsys_ai_mfu_2gpu_before.sqlite", monkeypatch, tmp_path)
    found = [f for f in doc["findings"] if f["rule_name"] == "memory-bound-kernel"]
    assert found
    for f in found:
        top = {r["path"] for r in f["regions"][:3]}
        assert top == {"aten::mul", "aten::add", "aten::to/aten::_to_copy/aten::copy_"}


def test_profiler_trace_regions_name_its_record_function_ranges(monkeypatch, tmp_path):
    # hta_ddp: DDP's gradient all-reduce (record_function 'nccl:all_reduce') holds the most GPU time; its NCCL
    # kernels are communication, not small grids, so small-grid's kernels lie in the training step instead
    doc = _analyze("kineto/hta_ddp_v100_rank1.json.gz", monkeypatch, tmp_path)
    assert doc["captures"][0]["nvtx_paths"][0]["path"] == "user_annotation:nccl:all_reduce"
    [small] = [f for f in doc["findings"] if f["rule_name"] == "small-grid"]
    assert small["regions"][0]["path"] == "ProfilerStep:ProfilerStep"
    assert all("nccl" not in r["path"] for r in small["regions"])


def test_capture_without_nvtx_has_no_regions(monkeypatch, tmp_path):
    doc = _analyze("nsys/pipit_cloverleaf_a100.sqlite", monkeypatch, tmp_path)
    assert doc["findings"]
    assert all(f["regions"] == [] for f in doc["findings"])
