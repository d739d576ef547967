"""Many ranks from one real capture: a replay of one PyTorch profiler rank into N ranks of one job, in a store.

Every rank replays the template's events (rank 0 of the DLRM set: 8 NCCL kernels among 245). Each rank arrives
at each collective a little late (a deterministic jitter under ``jitter_max_ns``), one rank (``slow_rank``) much
later (``slow_ns`` more at every collective), and a collective ends on every rank when the last rank has arrived
plus the template's duration, so the job shifts by the latest arrival after each collective. Ranks sit on nodes of
``node_size``; each node's clock is ``node_clock_ns`` ahead of the previous node's, as captures written on
different hosts are. Arithmetic per rank r and collective k (template start s_k, end e_k, all ns):

    late[r][k]   = jitter(r, k) + (slow_ns if r == slow_rank else 0)
    shift_before = sum over j < k of max_r late[r][j]      (the job's delay before collective k)
    an event of rank r that starts before e_k (and after e_{k-1}) moves by shift_before + late[r][k]
    NCCL kernel k of rank r: starts s_k + shift_before + late[r][k], ends e_k + shift_before + max_r late[r][k]
    every time of rank r then moves by clock(r) = (r // node_size) * node_clock_ns
"""

from __future__ import annotations

from pathlib import Path

#: Tables a Kineto capture fills, with the time columns that move (start first; end keeps its duration).
_TIMED = {"api_call_rows": ("start_ns", "end_ns"), "cpu_ops": ("start_ns", "end_ns"), "kernel_rows": ("start_ns", "end_ns"),
          "kernel_occupancy": ("start_ns", None), "memcpys": ("start_ns", "end_ns"), "memsets": ("start_ns", "end_ns"),
          "nvtx_rows": ("start_ns", "end_ns")}
_PLAIN = ("gpus", "kernel_names", "api_names", "nvtx_domains", "capture_missing")


def jitter(rank: int, k: int, jitter_max_ns: int) -> int:
    """A deterministic arrival jitter in [0, jitter_max_ns)."""
    return (rank * 7919 + k * 104729) % jitter_max_ns


def replay(con, template_id: int, n_ranks: int, *, slow_rank: int, slow_ns: int = 3_000_000,
           jitter_max_ns: int = 50_000, node_size: int = 8, node_clock_ns: int = 2_500_000_000) -> dict[int, int]:
    """Add ``n_ranks`` ranks replayed from capture ``template_id`` to the store behind ``con``, then remove the
    template. Returns rank -> capture id."""
    colls = con.execute("select start_ns, end_ns from collective_ops where capture_id = ? order by start_ns",
                        [template_id]).fetchall()
    ends = [e for _s, e in colls]
    late = [[jitter(r, k, jitter_max_ns) + (slow_ns if r == slow_rank else 0) for k in range(len(colls))]
            for r in range(n_ranks)]
    worst = [max(late[r][k] for r in range(n_ranks)) for k in range(len(colls))]
    before = [sum(worst[:k]) for k in range(len(colls) + 1)]
    comm_ids = [i for (i,) in con.execute(
        "select name_id from kernel_names where capture_id = ? and na_comm_kernel(name)", [template_id]).fetchall()]
    first_id = con.execute("select max(capture_id) + 1 from captures").fetchone()[0]
    ids = {}
    for r in range(n_ranks):
        cid = first_id + r
        ids[r] = cid
        clock = (r // node_size) * node_clock_ns
        # the shift of an event by the segment its start falls in
        cases = " ".join(f"when {{t}} < {e} then {before[k] + late[r][k]}" for k, e in enumerate(ends))
        shift = f"(case {cases} else {before[len(ends)]} end + {clock})"
        for table, (start, end) in _TIMED.items():
            cols = [c for (c,) in con.execute(
                "select column_name from information_schema.columns where table_name = ? order by ordinal_position",
                [table]).fetchall()]
            moved = {"capture_id": str(cid), start: f"{start} + {shift.format(t=start)}"}
            if end:
                moved[end] = f"{end} + {shift.format(t=start)}"
            if table == "kernel_rows" and comm_ids:
                # a collective ends when the last rank has arrived: extend this rank's kernel to that end
                ends_case = " ".join(f"when start_ns < {e} then {e + before[k] + worst[k] + clock}"
                                     for k, e in enumerate(ends))
                comm = f"coalesce(short_name_id, name_id) in ({', '.join(map(str, comm_ids))})"
                moved["end_ns"] = f"case when {comm} then (case {ends_case} else end_ns end) else {moved['end_ns']} end"
                moved["duration_ns"] = f"({moved['end_ns']}) - ({moved['start_ns']})"
            select = ", ".join(moved.get(c, c) for c in cols)
            con.execute(f"insert into {table} select {select} from {table} where capture_id = {int(template_id)}")
        for table in _PLAIN:
            cols = [c for (c,) in con.execute(
                "select column_name from information_schema.columns where table_name = ? order by ordinal_position",
                [table]).fetchall()]
            select = ", ".join(str(cid) if c == "capture_id" else c for c in cols)
            con.execute(f"insert into {table} select {select} from {table} where capture_id = {int(template_id)}")
        con.execute(f"""insert into captures select * replace ({cid} as capture_id,
                            'rank{r}.pt.trace.json' as source_name, source_path || '#rank{r}' as source_path,
                            start_ns + {clock} as start_ns, end_ns + {before[len(ends)] + clock} as end_ns,
                            duration_ns + {before[len(ends)]} as duration_ns)
                        from captures where capture_id = {int(template_id)}""")
        con.execute(f"""insert into capture_distributed select * replace ({cid} as capture_id, {r} as rank,
                            {n_ranks} as world_size) from capture_distributed where capture_id = {int(template_id)}""")
    tables = [t for (t,) in con.execute("""select table_name from information_schema.columns
                                           where column_name = 'capture_id' and table_schema = 'main'
                                           and table_name in (select table_name from information_schema.tables
                                                              where table_type = 'BASE TABLE')""").fetchall()]
    for table in tables:
        con.execute(f"delete from {table} where capture_id = {int(template_id)}")
    return ids


def build_store(template: Path, store: Path, n_ranks: int, *, slow_rank: int, **kw) -> dict[int, int]:
    """A store at ``store`` holding ``n_ranks`` ranks replayed from the capture file ``template``."""
    from nsight_advisor import workflow
    from nsight_advisor.store.database import connect

    workflow.ingest_to_store([template], store)
    con = connect(store)
    try:
        return replay(con, 1, n_ranks, slow_rank=slow_rank, **kw)
    finally:
        con.close()
