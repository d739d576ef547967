"""Where the per-capture ingest of many captures runs: local worker processes (the default) or Ray tasks.

The choice is one small value threaded from the command line to :func:`nsight_advisor.store.parallel_ingest.ingest_many`;
the store it builds is the same either way (normalized tables merged in capture-id order).
"""

from __future__ import annotations

from dataclasses import dataclass

from nsight_advisor.common.errors import InputError

EXECUTORS = ("local", "ray")


@dataclass(frozen=True)
class Executor:
    """``kind``: ``local`` (worker processes on this machine) or ``ray`` (tasks on the Ray cluster at
    ``address``; None: the cluster this machine belongs to, else a local one started for the run);
    ``max_retries``: how often Ray reruns a task whose worker died."""

    kind: str = "local"
    address: str | None = None
    max_retries: int = 3


LOCAL = Executor()


def executor_from_options(kind: str | None, address: str | None = None) -> Executor:
    """The executor for ``--executor`` and ``--ray-address``; InputError when Ray is asked for but not installed."""
    if kind in (None, "local"):
        if address is not None:
            raise InputError("--ray-address needs --executor ray")
        return LOCAL
    if kind != "ray":
        raise InputError(f"--executor {kind}: expected one of {', '.join(EXECUTORS)}")
    try:
        import ray  # noqa: F401 - only whether it imports
    except ImportError:
        raise InputError("--executor ray: Ray is not installed; pip install 'nsight-advisor[ray]'") from None
    return Executor("ray", address)
