"""The executor seam without Ray: the per-capture function, the task body, the options (tests/test_ray_executor.py
runs the same work on a local Ray cluster)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO
from nsight_advisor.store.capture_tables import ingest_capture_tables, merge_capture_tables
from nsight_advisor.common.errors import InputError
from nsight_advisor.store.executors import LOCAL, executor_from_options
from nsight_advisor.ingest import ingest_capture
from nsight_advisor.store.ray_ingest import capture_task
from nsight_advisor.schema import TABLES
from nsight_advisor.store.database import connect


@pytest.fixture
def rank_files(dlrm_ranks) -> list[Path]:
    return dlrm_ranks


def _contents(con) -> dict[str, list]:
    return {t.name: con.execute(f"select * exclude (ingested_at) from {t.name} order by all" if t.name == "captures"
                                else f"select * from {t.name} order by all").fetchall()
            for t in TABLES if t.stored}


def test_tables_merged_from_arrow_equal_a_direct_ingest(rank_files):
    direct, merged = connect(None), connect(None)
    for cid, path in ((3, rank_files[2]), (4, rank_files[5])):
        ingest_capture(direct, cid, path)
        tables = ingest_capture_tables(cid, path, defer=())
        assert {name for name, table in tables.items() if table.num_rows} >= {"captures", "kernel_rows", "cpu_ops"}
        merge_capture_tables(merged, tables)
    want, got = _contents(direct), _contents(merged)
    assert sum(len(rows) for rows in want.values()) > 2000
    assert got == want


def test_the_capture_function_leaves_no_file_behind(rank_files, tmp_path):
    ingest_capture_tables(1, rank_files[0], work_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_a_bad_capture_is_one_line_from_the_task_and_an_input_error_from_the_function(tmp_path):
    bad = tmp_path / "rank3.pt.trace.json"
    bad.write_text('{"traceEvents": [')
    with pytest.raises(InputError, match="rank3.pt.trace.json"):
        ingest_capture_tables(1, bad)
    reason = capture_task(1, str(bad), (), bad.stat().st_size)
    assert isinstance(reason, str) and "rank3.pt.trace.json" in reason and "\n" not in reason


def test_a_worker_seeing_another_file_size_refuses_it(rank_files):
    size = rank_files[0].stat().st_size
    with pytest.raises(InputError, match=f"{size} bytes on this worker, {size + 1} where the run started"):
        ingest_capture_tables(1, rank_files[0], expected_size=size + 1)


def test_executor_options():
    assert executor_from_options(None) == LOCAL and executor_from_options("local") == LOCAL
    with pytest.raises(InputError, match="--ray-address needs --executor ray"):
        executor_from_options("local", "10.0.0.1:6379")


def test_executor_ray_without_ray_installed_is_one_line_and_exit_2(rank_files, tmp_path):
    # `import ray` fails as it does where the extra is not installed
    code = "import sys; sys.modules['ray'] = None; from nsight_advisor.cli import main; main()"
    proc = subprocess.run([sys.executable, "-c", code, "analyze", str(rank_files[0]), "--executor", "ray",
                           "--format", "json", "-o", str(tmp_path / "out.json")],
                          capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("nsight-advisor: --executor ray: Ray is not installed; "
                                   "pip install 'nsight-advisor[ray]'")
    assert not (tmp_path / "out.json").exists()


def test_a_task_whose_worker_died_more_often_than_retried_is_one_line():
    from nsight_advisor.store import ray_ingest
    from nsight_advisor.common.errors import NsightAdvisorError

    class FakeRay:  # what ray.get raises once Ray has given up on a task
        class exceptions:
            WorkerCrashedError = type("WorkerCrashedError", (Exception,), {})
            NodeDiedError = type("NodeDiedError", (Exception,), {})
            ObjectLostError = type("ObjectLostError", (Exception,), {})

        @staticmethod
        def get(ref):
            raise FakeRay.exceptions.WorkerCrashedError("worker died\nwith details")

    with pytest.raises(NsightAdvisorError) as caught:
        ray_ingest._get(FakeRay, object(), Path("/x/rank5.json"), retries=3)
    assert str(caught.value) == ("/x/rank5.json: the Ray worker ingesting it died 4 times (WorkerCrashedError); "
                                 "see the cluster's logs")


class _FakeRayTaskError(Exception):
    """What ray.get raises for a task's error: the task's traceback as text and the error it holds."""

    def __init__(self, traceback_str: str, cause: BaseException):
        super().__init__(traceback_str)
        self.traceback_str, self.cause = traceback_str, cause


class _FakeRayError(Exception):
    pass


class _FakeLocalRayletDiedError(_FakeRayError):
    pass


def _fake_ray(error: BaseException):
    class FakeRay:
        class exceptions:
            WorkerCrashedError = type("WorkerCrashedError", (Exception,), {})
            NodeDiedError = type("NodeDiedError", (Exception,), {})
            ObjectLostError = type("ObjectLostError", (Exception,), {})
            RayTaskError = _FakeRayTaskError
            RayError = _FakeRayError

        @staticmethod
        def get(ref):
            raise error

    return FakeRay


def test_a_cluster_stopped_under_a_running_task_is_one_line_naming_capture_and_cluster():
    """Ray raises inside the task's worker when its raylet is gone (storing the result: OSError: Broken pipe) and
    hands that back as the task's error: the cluster failed, not our code. The driver may see the raylet's death
    first instead (another timing of the same stop). The corpus cases ray-cluster-stopped-* stop a real cluster."""
    from nsight_advisor.store import ray_ingest
    from nsight_advisor.common.errors import NsightAdvisorError

    inside_ray = _FakeRayTaskError('\x1b[36mray::capture_task()\x1b[39m (pid=7, ip=10.0.0.1)\n  File '
                                   '"python/ray/includes/common.pxi", line 89, in ray._raylet.check_status\n'
                                   'OSError: Broken pipe', OSError("Broken pipe"))
    with pytest.raises(NsightAdvisorError) as caught:
        ray_ingest._get(_fake_ray(inside_ray), object(), Path("/x/rank5.json"), 3, "10.0.0.1:6379")
    assert str(caught.value) == ("/x/rank5.json: the Ray cluster at 10.0.0.1:6379 stopped or failed while ingesting "
                                 "it (OSError: Broken pipe); see the cluster's logs")
    died = _FakeLocalRayletDiedError("The task's local raylet died. Check raylet.out for more information.")
    with pytest.raises(NsightAdvisorError) as caught:
        ray_ingest._get(_fake_ray(died), object(), Path("/x/rank5.json"), 3, "10.0.0.1:6379")
    assert str(caught.value) == ("/x/rank5.json: the Ray cluster at 10.0.0.1:6379 stopped or failed while ingesting "
                                 "it (_FakeLocalRayletDiedError: The task's local raylet died. Check raylet.out for "
                                 "more information.); see the cluster's logs")


def test_an_error_of_our_own_task_on_ray_stays_a_bug():
    from nsight_advisor.store import ray_ingest

    ours = _FakeRayTaskError('ray::capture_task()\n  File "/site-packages/nsight_advisor/ingest/kineto/trace.py", '
                             'line 9, in read\nKeyError: \'ts\'', KeyError("ts"))
    with pytest.raises(_FakeRayTaskError):
        ray_ingest._get(_fake_ray(ours), object(), Path("/x/rank5.json"), 3, None)
