"""Many ranks as capture files: one PyTorch profiler rank replayed into N Kineto traces of one job.

The file-level twin of :mod:`synthetic_ranks` (same arithmetic, in the trace's microseconds): rank r arrives at
collective k ``late[r][k]`` late, one rank ``slow_us`` more; every NCCL kernel k ends when the last rank has
arrived plus the template's duration; each node of ``node_size`` ranks has its clock ``node_clock_us`` ahead of
the previous node's. What :mod:`synthetic_ranks` builds in a store, this writes as files, so that the ingest
itself (local worker processes or Ray tasks) is what runs on N ranks.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from synthetic_ranks import jitter


def _is_comm_kernel(event: dict) -> bool:
    return event.get("cat") == "kernel" and "nccl" in str(event.get("name", "")).lower()


def write_ranks(template: Path, folder: Path, n_ranks: int, *, slow_rank: int, slow_us: int = 3_000,
                jitter_max_us: int = 50, node_size: int = 8, node_clock_us: int = 2_500_000) -> list[Path]:
    """Write ``rank{r}.pt.trace.json.gz`` for r in 0..n_ranks-1 into ``folder``; returns their paths."""
    with gzip.open(template, "rt", encoding="utf-8") as fh:
        trace = json.load(fh)
    events = trace["traceEvents"]
    colls = sorted((e["ts"], e["ts"] + e["dur"]) for e in events if _is_comm_kernel(e))
    ends = [e for _s, e in colls]
    late = [[jitter(r, k, jitter_max_us) + (slow_us if r == slow_rank else 0) for k in range(len(colls))]
            for r in range(n_ranks)]
    worst = [max(late[r][k] for r in range(n_ranks)) for k in range(len(colls))]
    before = [sum(worst[:k]) for k in range(len(colls) + 1)]
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for r in range(n_ranks):
        clock = (r // node_size) * node_clock_us

        def shift(ts, r=r):
            for k, end in enumerate(ends):
                if ts < end:
                    return before[k] + late[r][k]
            return before[len(ends)]

        moved = []
        for e in events:
            if "ts" not in e:
                moved.append(e)
                continue
            ts = e["ts"]
            new = dict(e, ts=ts + shift(ts) + clock)
            if _is_comm_kernel(e):  # ends when the last rank has arrived
                k = next(i for i, end in enumerate(ends) if ts < end)
                new["dur"] = ends[k] + before[k] + worst[k] + clock - new["ts"]
            moved.append(new)
        out = dict(trace, traceEvents=moved,
                   distributedInfo=dict(trace.get("distributedInfo") or {}, rank=r, world_size=n_ranks))
        path = folder / f"rank{r}.pt.trace.json.gz"
        with gzip.open(path, "wt", encoding="utf-8", compresslevel=1) as fh:
            json.dump(out, fh)
        paths.append(path)
    return paths
