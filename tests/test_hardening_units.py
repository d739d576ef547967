"""Fast checks of the mechanisms behind the hardening of bad input and process lifecycle (the corpus runs them end to end through the CLI)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from nsight_advisor.common import run_folder
from nsight_advisor import workflow
from nsight_advisor.common.control_chars import strip_controls
from nsight_advisor.engine.message_format import MAX_WIDTH, MessageFormatter
from nsight_advisor.common.errors import InputError


class _Top:
    def __init__(self, row):
        self._row = row

    def __getattr__(self, name):
        if name.startswith("_") or name not in self._row:
            raise AttributeError(name)
        return self._row[name]


def _fmt(template: str) -> str:
    return MessageFormatter().vformat(template, (), {"rows": 3, "threshold": None, "top": _Top({"name": "k"})})


def test_message_formatter_allows_names_and_top_columns_only():
    assert _fmt("{rows} rows, worst {top.name}, threshold {threshold}") == "3 rows, worst k, threshold n/a"
    for template in ("{top.__init__.__globals__}", "{rows.real}", "{rows[0]}", "{0}", "{top._row}"):
        with pytest.raises((KeyError, AttributeError)):
            _fmt(template)
    with pytest.raises(ValueError):
        _fmt(f"{{rows:>{MAX_WIDTH + 1}}}")
    assert _fmt(f"{{rows:>{MAX_WIDTH}}}") == " " * (MAX_WIDTH - 1) + "3"


def test_strip_controls_keeps_tabs_and_newlines():
    assert strip_controls("a\x1b]0;t\x07b\x1b[2J\tc\n\x9bd\u202ee\r") == "a]0;tb[2J\tc\nde"


def test_outputs_resolving_to_an_input_are_refused(tmp_path):
    capture = tmp_path / "cap.sqlite"
    capture.write_bytes(b"data")
    (tmp_path / "link.json").symlink_to(capture)
    os.link(capture, tmp_path / "hard.json")
    for output in (capture, tmp_path / "link.json", tmp_path / "hard.json", tmp_path / "sub" / ".." / "cap.sqlite"):
        (tmp_path / "sub").mkdir(exist_ok=True)
        with pytest.raises(InputError, match="is an input"):
            workflow.refuse_inputs_as_output(output, [capture])
    workflow.refuse_inputs_as_output(tmp_path / "new.json", [capture])
    workflow.refuse_inputs_as_output(Path("-"), [capture])
    assert capture.read_bytes() == b"data"


def test_a_fifo_given_as_output_stays_a_fifo(tmp_path):
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    reader = subprocess.Popen([sys.executable, "-c", f"print(open({str(fifo)!r}).read(), end='')"],
                              stdout=subprocess.PIPE, text=True)
    workflow.write_text_atomic(fifo, "report\n")
    assert reader.communicate(timeout=30)[0] == "report\n"
    assert fifo.is_fifo()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.fifo"]


def test_a_long_output_name_gets_a_short_temporary_name(tmp_path):
    target = tmp_path / ("r" * 250)
    workflow.write_text_atomic(target, "x")
    assert target.read_text() == "x"
    assert sorted(p.name for p in tmp_path.iterdir()) == [target.name]


def test_run_folders_of_dead_processes_are_reclaimed(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    left = tmp_path / f"{run_folder.PREFIX}{int(dead.stdout)}-abc123"
    (left / "ingest-x").mkdir(parents=True)
    (left / "ingest-x" / "capture-2.duckdb").write_bytes(b"half a store")
    alive = tmp_path / f"{run_folder.PREFIX}{os.getppid()}-def456"
    alive.mkdir()
    mine = run_folder.run_folder(tmp_path)
    try:
        assert not left.exists() and alive.exists() and mine.is_dir()
    finally:
        run_folder.release(mine)
    assert not mine.exists()


class _FakeRay:
    """Just enough of Ray's API for ingest_with_ray: ``get`` raises ``outcome``; records what was cancelled."""

    def __init__(self, outcome):
        import types

        class RayError(Exception):
            pass

        class RayTaskError(RayError):
            pass

        self.exceptions = types.SimpleNamespace(
            RayError=RayError, RayTaskError=RayTaskError, WorkerCrashedError=type("WorkerCrashedError", (RayError,), {}),
            NodeDiedError=type("NodeDiedError", (RayError,), {}), ObjectLostError=type("ObjectLostError", (RayError,), {}))
        self.outcome, self.cancelled = outcome, []

    def is_initialized(self):
        return True  # a notebook's own cluster: nothing to join or shut down

    def cluster_resources(self):
        return {"CPU": 2}

    def remote(self, **_options):
        return lambda fn: type("Task", (), {"remote": staticmethod(lambda *args: ("ref", args[0]))})

    def get(self, ref):
        raise self.outcome

    def cancel(self, ref):
        self.cancelled.append(ref)


@pytest.mark.parametrize("failure, cancels", [("bad capture", True), ("cluster stopped", False),
                                               ("node died", False)])
def test_ray_pending_tasks_are_cancelled_on_a_bad_capture_but_not_on_a_failed_cluster(monkeypatch, tmp_path, failure,
                                                                                       cancels):
    # A cancel racing the reply of a task that a dead raylet had already failed made Ray 2.40's driver abort itself
    # (exit 1, no line: "Tried to complete task that was not pending"), 1 run in 12 of the corpus's
    # ray-cluster-killed-storing; on a failed cluster the disconnect ends the tasks anyway.
    from nsight_advisor.common.errors import NsightAdvisorError
    from nsight_advisor.store import ray_ingest
    from nsight_advisor.store.executors import Executor

    fake = _FakeRay(None)
    if failure == "bad capture":  # the task's answer for a capture it cannot read: its one-line reason
        fake.get = lambda ref: "capture.json: not a PyTorch trace"
    else:  # what Ray raises when the cluster goes away, or the node running the task is lost
        fake.outcome = (fake.exceptions.RayError("the cluster went away") if failure == "cluster stopped"
                        else fake.exceptions.NodeDiedError("node lost"))
    monkeypatch.setitem(sys.modules, "ray", fake)
    paths = []
    for i in range(4):
        paths.append(tmp_path / f"rank{i}.json")
        paths[-1].write_text("{}")
    with pytest.raises(NsightAdvisorError):
        ray_ingest.ingest_with_ray(None, list(enumerate(paths, 1)), Executor(kind="ray", address="10.0.0.1:6379"))
    assert bool(fake.cancelled) is cancels, fake.cancelled
