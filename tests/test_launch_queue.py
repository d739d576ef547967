"""The launch queue per stream over time and its summary per device (schema/views/36_launch_queue.sql): idle with
nothing queued (launch-bound) told apart from idle with work queued, and a full queue blocking the host's launches.

The real-trace facts were read by hand from the export with sqlite3 (the SQL beside them); the full queue is a
synthetic store, since no shared capture fills a stream's queue, with its arithmetic written out."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from conftest import TRACES
from nsight_advisor.store.database import connect, insert_api_calls, insert_kernels


def _summary(con, capture_id: int = 1) -> list[dict]:
    cur = con.execute("select * from launch_queue_summary where capture_id = ? order by device_id", [capture_id])
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r)) for r in cur.fetchall()]


def test_cuda_perf_sandbox_idles_launch_bound_except_while_its_kernel_waits_in_the_queue():
    path = TRACES / "nsys" / "cuda_perf_sandbox.sqlite"
    if not path.exists():
        pytest.skip(f"real traces absent at {TRACES}")
    from nsight_advisor import workflow

    tmp = Path(tempfile.mkdtemp(prefix="na-launch-queue-"))
    try:
        con, ids = workflow.load([path], store_path=tmp / "s.duckdb", use_cache=False)
        # select 'K', start, end, correlationId from CUPTI_ACTIVITY_KIND_KERNEL union all
        #   select 'M', start, end, correlationId from CUPTI_ACTIVITY_KIND_MEMCPY order by 2;
        #   -> M 1139398153..1140074569 (121), M 1140380393..1142162249 (122), K 1143927944..1143966856 (126),
        #      M 1144088264..1144674728 (129)
        # select s.value, r.start, r.end, r.correlationId from CUPTI_ACTIVITY_KIND_RUNTIME r join StringIds s
        #   on s.id = r.nameId where r.correlationId in (121, 122, 126, 129);
        #   -> cudaMemcpy ..1139778766 (121), cudaMemcpy ..1140656922 (122), cudaLaunchKernel 1141768668..1142808730
        #      (126), cudaMemcpy ..1144790924 (129)
        # The copies' calls end after the copies start (synchronous copies): never queued. The kernel is queued from
        # its call's end 1142808730 to its start 1143927944: 1,119,214 ns, while the GPU idles. The three gaps:
        # 1140074569..1140380393 (305,824) and 1143966856..1144088264 (121,408) wait for a launch throughout; in
        # 1142162249..1143927944 (1,765,695) the GPU waits for the launch until 1142808730 (646,481), then with the
        # kernel queued. Idle 2,192,927 = launch-bound 305,824 + 646,481 + 121,408 = 1,073,713 + queued 1,119,214.
        rows = con.execute("select start_ns, end_ns, queued, state from launch_queue where capture_id = ? "
                           "and queued > 0", [ids[0]]).fetchall()
        assert rows == [(1142808730, 1143927944, 1, "queued")]
        s = _summary(con, ids[0])
        assert len(s) == 1 and s[0]["max_queued"] == 1
        assert s[0]["idle_ns"] == 2_192_927 and s[0]["launch_bound_ns"] == 1_073_713
        assert s[0]["queued_idle_ns"] == 1_119_214 and s[0]["full_ns"] == 0 and s[0]["blocked_launch_ns"] == 0
        con.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_a_full_queue_blocks_the_launches_made_while_it_is_full():
    # 1,500 launches on stream 7: call i from 10i to 10i + 5 ns; kernel i runs from 20,000 + 100i for 50 ns.
    # Queued after call i's end: i + 1 (no kernel starts before 20,000). Full (1,022) from call 1021's end, 10,215,
    # until kernel 478 starts at 67,800 and leaves 1,500 - 479 = 1,021: full_ns = 67,800 - 10,215 = 57,585.
    # Calls made while full: i = 1022 (starts 10,220) .. 1499: 478 calls of 5 ns = 2,390 ns blocked.
    # Idle: 1,499 gaps of 50 ns between kernels = 74,950 ns, each with the next kernel long queued: none
    # launch-bound.
    n = 1500
    con = connect(None)
    insert_kernels(con, [dict(capture_id=1, device_id=0, stream_id=7, pid=1, correlation_id=i + 1, name="k",
                              short_name="k", start_ns=20_000 + 100 * i, end_ns=20_050 + 100 * i, duration_ns=50)
                         for i in range(n)])
    insert_api_calls(con, [dict(capture_id=1, pid=1, tid=1, correlation_id=i + 1, name="cudaLaunchKernel",
                                base_name="cudaLaunchKernel", start_ns=10 * i, end_ns=10 * i + 5, duration_ns=5)
                           for i in range(n)])
    con.execute("insert into captures (capture_id, source_name, format, tool, tool_version, start_ns, end_ns, "
                "duration_ns) values (1, 'case', 'case', 'case', 'case', 0, 200000, 200000)")
    s = _summary(con)[0]
    assert s["max_queued"] == n
    assert s["full_ns"] == 67_800 - 10_215 and s["blocked_launch_ns"] == 478 * 5
    assert s["idle_ns"] == (n - 1) * 50 and s["launch_bound_ns"] == 0 and s["queued_idle_ns"] == (n - 1) * 50
    full = con.execute("select min(start_ns), max(end_ns) from launch_queue where state = 'full'").fetchone()
    assert full == (10_215, 67_800)
