"""``whatif --fix RULE``: the findings' fixes replayed on the engineer's request (engine/whatif.py, api.whatif).

The answer must be the report's: one rule's fix gives the saving ``analyze`` puts on its finding, and a rule fixed on
both GPUs of a capture whose GPUs run processes of their own gives the findings' ``saving_all_ranks_ns``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
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


def test_asynchronous_copies_of_pageable_memory_made_pinned(memory_store):
    """pageable-memcpy's fix (impact_host = "pageable-copies"): four cudaMemcpyAsync calls from pageable memory,
    40 µs each while the driver stages the copy, 1 µs apart, each copy (20 µs) 1 µs after its call returned; then a
    kernel launch, the kernel after the last copy (185-235 µs) and a synchronization to 237 µs."""
    from types import SimpleNamespace

    from test_critical_path import _call, _kernel, _warm_up, us

    from nsight_advisor.analysis.critical_path import map_steps
    from nsight_advisor.analysis.replay import replay
    from nsight_advisor.analysis.step_graph import build_graph
    from nsight_advisor.engine.finding_fixes import fix_of

    con = memory_store
    _warm_up(con)
    for k in range(4):
        _call(con, 1, k + 1, "cudaMemcpyAsync", 41 * k, 41 * k + 40)
        con.execute("insert into memcpys (capture_id, device_id, stream_id, pid, correlation_id, start_ns, end_ns, "
                    "duration_ns, bytes, direction, src_kind, dst_kind) values (1, 0, 7, 1, ?, ?, ?, ?, 1048576, "
                    "'Host-to-Device', ?, 'device')",
                    [k + 1, us(41 * k + 41), us(41 * k + 61), us(20), "pageable"])
    _call(con, 1, 5, "cudaLaunchKernel", 164, 169)
    _kernel(con, 1, 5, "k", 7, 185, 235)
    _call(con, 1, 6, "cudaDeviceSynchronize", 170, 237)
    g = build_graph(con, [1])
    finding = SimpleNamespace(capture_id=1, device_id=None, internal={"part": "host", "host": "pageable-copies"})
    change = fix_of(con, g, finding, {})
    after = replay(g, **change)
    # made pinned, each call takes a launch's time (5 µs, the capture's typical launch latency): calls at 0, 6, 12
    # and 18 µs; each copy starts as its launch and stream allow: 5-25, 27-47, 49-69, 71-91; the launch at 24, the
    # kernel 1 µs after the last copy (its recorded stream lag) at 92-142 and the synchronization returns 2 µs after
    # it, at 144 µs instead of 237
    copies = np.flatnonzero(g.ops["kind"] == 2)
    assert sorted(after[0][copies].tolist()) == [us(t) - g.t0 for t in (5, 27, 49, 71)]
    span = [(-g.t0, us(237) - g.t0)]
    assert map_steps(g, 1, span, replay(g))[0] - map_steps(g, 1, span, after)[0] == us(237 - 144)
    # a copy from pinned memory already: its call is left as it is (a new graph: what a fix reads of the store is
    # read once per graph)
    con.execute("update memcpys set src_kind = 'pinned' where correlation_id = 4")
    g = build_graph(con, [1])
    calls = np.flatnonzero(g.ops["name"] == "cudaMemcpyAsync")
    calls = calls[np.argsort(g.ops["correlation_id"][calls])]
    assert (fix_of(con, g, finding, {})["own_scale"][calls] < 1).tolist() == [True, True, True, False]
    # a rule without the key is not replayed
    assert fix_of(con, g, SimpleNamespace(capture_id=1, device_id=None, internal={"part": "host"}), {}) is None


def test_an_idle_findings_gaps_are_its_longest_until_they_hold_its_impact(memory_store):
    """finding_gaps against its definition, on gaps with many equal lengths: in the order longest first (ties: the
    earlier first) a gap is held while the gaps before it sum to less than the finding's impact; of those, the ones
    the graph's span meets."""
    from types import SimpleNamespace

    import pandas as pd

    from nsight_advisor.analysis.op_table import OpTable
    from nsight_advisor.engine.finding_fixes import finding_gaps

    con = memory_store
    rng = np.random.default_rng(7)
    starts = np.sort(rng.choice(10_000_000, 3000, replace=False)) * 10
    lengths = rng.choice([0, 5, 7, 7, 12, 40, 40, 40, 300], len(starts)) * 10
    causes = rng.choice(["launch", "sync", "host"], len(starts))
    devices = rng.choice([0, 1], len(starts))
    gaps_frame = pd.DataFrame({"capture_id": 1, "device_id": devices, "start_ns": starts,
                               "end_ns": starts + lengths, "cause": causes, "position": "between"})
    con.register("gaps_frame", gaps_frame)
    con.execute("create temp table gpu_idle_gaps as select * from gaps_frame")
    span = (int(starts[300]), int(starts[2500]))
    g = SimpleNamespace(ops=OpTable({"capture_id": np.array([1, 1]), "device_id": np.array([0.0, 0.0]),
                                     "start_ns": np.array(span), "end_ns": np.array(span)}),
                        clock=lambda capture_id, t: t)
    total = {(d, c): int(lengths[(devices == d) & (causes == c)].sum()) for d in (0, 1) for c in ("launch", "sync")}
    findings = []
    for k, (device, chosen, share) in enumerate([(0, ["launch"], 0.5), (1, ["launch", "sync"], 0.31), (0, ["sync"], 1.0),
                                                 (1, ["sync"], 0.0001), (0, ["launch"], 2.0)]):
        impact = int(sum(total[(device, c)] for c in chosen) * share) + k  # + k: not on a sum of whole lengths
        findings.append(SimpleNamespace(capture_id=1, device_id=device, impact_ns=impact,
                                        internal={"causes": chosen}))
    got = finding_gaps(con, g, findings)
    split = 0
    for f in findings:
        mine = (devices == f.device_id) & np.isin(causes, f.internal["causes"])
        order = sorted(np.flatnonzero(mine), key=lambda i: (-lengths[i], starts[i]))
        held, before = [], 0
        for i in order:
            if before < f.impact_ns:
                held.append(i)
            before += lengths[i]
        want = sorted((int(starts[i]), int(starts[i] + lengths[i]), str(causes[i])) for i in held
                      if starts[i] + lengths[i] >= span[0] and starts[i] <= span[1])
        assert [tuple(x) for x in got.get(id(f), [])] == want
        # a length whose gaps are held only in part (the running sum reaches the impact among them)
        split += len({lengths[i] for i in held} & {lengths[i] for i in order[len(held):]})
    assert split >= 3 and sum(len(v) for v in got.values()) > 500


def test_fixes_kept_sparse_combine_as_the_dense_changes_do():
    """A job keeps every finding's change for its fixes on all ranks at once, as the ops each alters
    (engine/whatif.py ``_sparse``): combined, they equal the dense changes combined, to the bit."""
    from nsight_advisor.engine.fix_replays import combine_sparse, sparse
    from nsight_advisor.engine.whatif import combine_changes

    rng = np.random.default_rng(7)
    n = 2_000
    changes = []
    for _ in range(6):
        scale = np.where(rng.random(n) < 0.1, rng.uniform(0.1, 0.99, n), 1.0)
        change = {"own_scale": scale, "drop_wait": rng.random(n) < 0.05}
        if rng.random() < 0.5:
            change["host_lag_scale"] = np.where(rng.random(n) < 0.2, rng.uniform(0.0, 0.9, n), 1.0)
        changes.append(change)
    dense = combine_changes(changes)
    kept = combine_sparse([sparse(c) for c in changes], n)
    assert dense.keys() == kept.keys()
    for key in dense:
        assert dense[key].dtype == kept[key].dtype
        np.testing.assert_array_equal(dense[key], kept[key], err_msg=key)
    assert (kept["own_scale"] < 1).sum() > 500 and kept["drop_wait"].sum() > 200
