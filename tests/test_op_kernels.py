"""Which PyTorch operator launched which GPU work (the op_kernels view, schema/views/34_op_kernels.sql), and the
operators and DataLoader ranges host_activity names from it (framework-sync, dataloader), on the real traces.

The facts below were read by hand from the trace's JSON with Python (the expression beside each), not from our
store: ``ev = [e for e in json.load(gzip.open(PATH))["traceEvents"] if e.get("ph") == "X"]``."""

from __future__ import annotations

import functools
import shutil
import tempfile
from pathlib import Path

import pytest

from conftest import TRACES

DLRM0 = "kineto/dlrm_8rank/worker0_step_12.1694128201545.pt.trace.json.gz"
_TMP: list[Path] = []  # the module's store folder, made when a test first needs one (a run that selects none of
# this module's tests, with -k, leaves no folder behind)


def _tmp() -> Path:
    if not _TMP:
        _TMP.append(Path(tempfile.mkdtemp(prefix="na-op-kernels-")))
    return _TMP[0]


def teardown_module(_module) -> None:
    for folder in _TMP:
        shutil.rmtree(folder, ignore_errors=True)


@functools.lru_cache(maxsize=None)
def _store(name: str):
    from nsight_advisor import workflow

    path = TRACES / name
    if not path.exists():
        pytest.skip(f"real traces absent at {TRACES}")
    con, ids = workflow.load([path], store_path=_tmp() / (Path(name).name + ".duckdb"), use_cache=False)
    return con, ids[0]


def _query(name: str, sql: str, params: list | None = None) -> list[dict]:
    con, cid = _store(name)
    cur = con.execute(sql, [cid, *(params or [])])
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r)) for r in cur.fetchall()]


def test_every_gpu_operation_of_dlrm_rank0_has_its_operator():
    # sum(1 for e in ev if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"))          -> 261
    rows = _query(DLRM0, "select * from op_kernels where capture_id = ?")
    assert len(rows) == 261 == len({r["correlation_id"] for r in rows})
    # the launching call always starts inside its operator
    assert all(r["op_start_ns"] <= r["call_start_ns"] < r["op_end_ns"] for r in rows)


def test_the_innermost_operator_holding_the_launch_is_named_with_the_launch_delay():
    # k = [e for e in ev if e.get("cat") == "kernel"][0]: gemmSN_TN_kernel at ts 1694128201428473, correlation
    # 40875; its runtime event: cudaLaunchKernel at ts 1694128201428460, dur 12; the cpu_ops on its tid holding
    # that ts: 2, the innermost aten::addmm; launch delay 1694128201428473 - (1694128201428460 + 12) = 1 us
    r = _query(DLRM0, "select * from op_kernels where capture_id = ? and correlation_id = 40875")[0]
    assert r["op_name"] == "aten::addmm" and r["op_depth"] == 1 and r["call"] == "cudaLaunchKernel"
    assert r["kernel"].startswith("void gemmSN_TN_kernel<float, 128, 16, 2, 4, 8, 9, false")
    assert r["start_ns"] == 1694128201428473000 and r["launch_delay_ns"] == 1000


def test_a_copy_to_the_host_belongs_to_aten_copy_inside_aten_to():
    # the first "Memcpy DtoH (Device -> Pageable)", correlation 41096, at ts 1694128201429088: its
    # cudaMemcpyAsync (ts 1694128201429073, dur 23) sits in aten::to > aten::_to_copy > aten::copy_
    # (aten::copy_ at ts 1694128201429070, dur 32)
    r = _query(DLRM0, "select * from op_kernels where capture_id = ? and correlation_id = 41096")[0]
    assert r["op_name"] == "aten::copy_" and r["op_depth"] == 2 and r["op"] == "memcpy"
    assert r["direction"] == "Device-to-Host" and r["op_start_ns"] == 1694128201429070000
    assert r["launch_delay_ns"] == 1694128201429088000 - 1694128201429096000


def test_an_operator_waiting_for_the_gpu_names_the_gap_framework_sync():
    # the GPU idles from 1694128201429063 (us) until that DtoH copy starts at 1694128201429088 (25 us); aten::copy_
    # (1694128201429070 .. 1694128201429102) covers 1694128201429088 - 1694128201429070 = 18 us of it: 72%
    r = _query(DLRM0, "select * from host_activity where capture_id = ? and start_ns = 1694128201429063000")[0]
    assert r["end_ns"] == 1694128201429088000
    assert r["framework_sync_ns"] == 18000 and r["activity"] == "framework-sync"
    assert r["top_sync_operator"] == "aten::copy_" and r["detail"] == "framework-sync covers 72%, most in aten::copy_ 72%"


def test_the_dataloader_fetch_before_the_first_kernel_is_named_dataloader():
    # [e for e in ev if e["name"].startswith("enumerate(DataLoader)")]: one user_annotation on tid 59811,
    # ts 1694128201426842, dur 1101 us: before the window's first GPU operation
    r = _query(DLRM0, "select * from host_activity where capture_id = ? and cause = 'before-window'")[0]
    assert r["tid"] == 59811 and r["dataloader_ns"] == 1_101_000 and r["activity"] == "dataloader"
    assert r["top_dataloader"] == "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
    assert r["coverage"] >= 0.5


def test_nsys_exports_have_no_operators():
    path = "nsys/pipit_cloverleaf_a100.sqlite"
    assert _query(path, "select count(*) as n from op_kernels where capture_id = ?")[0]["n"] == 0
