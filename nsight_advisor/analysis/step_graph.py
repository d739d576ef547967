"""The dependency graph of a capture's steps: what each operation waited for, from what the store holds.

An operation is a CUDA API call on a host thread or a GPU operation (kernel, copy, set). Its start waits for
(each an edge with a lag, ns):

* ``host``: the previous call on its thread to end, then the thread's own work between the two calls (the lag,
  kept as the host's work); a call nested in another waits for the outer call's start; at a **handoff** (a thread
  that went quiet while another thread of its process ran a burst of calls filling most of the quiet time, as the
  caller of PyTorch's ``backward()`` waits while the autograd engine's device thread runs the backward pass, a
  burst with quiet time of that thread either side, no third thread's call between the two) the burst's first call
  waits for the quiet thread's last call, and the quiet thread's next call for the burst's last
  call (:func:`_handoff_edges`);
* ``launch``: the call that launched it (correlation id) to start, then the launch latency;
* ``stream``: the previous operation on its stream to end;
* ``cross``: an operation on another stream of its device to end. Recorded event waits (``cudaStreamWaitEvent``)
  are not in the store with their streams, so this edge is inferred: a GPU operation that started later than its
  launch and its stream allowed, within :data:`CROSS_WINDOW_NS` of another stream's operation ending, waited for it.

Its end waits for its own duration, and in these cases for more:

* a **blocking call** (``*Synchronize``, a synchronous copy or set) waits for the GPU operation of its process that
  ended last before it returned, when it returned within :data:`RETURN_TOL_NS` of that end; so does a **stalled**
  call (:data:`STALLED_FACTOR`: a launch into a full queue, a copy into pageable memory), which without the wait
  takes the usual time of its name;
* a **collective kernel** waits for the last rank of its collective to arrive (collective_ranks: matched across
  ranks, clocks aligned): it ends its transfer time after the latest start of the ranks.

Of the edges into a start, the one that explains the recorded start with the least unexplained wait (its lag less
the capture's typical lag of that kind) is the **binding** edge: it keeps its recorded lag, so replaying the graph
unchanged gives back every recorded time exactly; the others get the typical lag (at most their recorded one), so
that when the binding one moves earlier they can take over. Times are on the job's clock
(collective_clock_offsets), so that the ranks of a job form one graph.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Sequence

import numpy as np

from nsight_advisor.analysis.group_quantile import group_quantile
from nsight_advisor.analysis.op_names import distinct_names, match_distinct, names_matching
from nsight_advisor.analysis.graph_rows import GraphRows, read_graph
from nsight_advisor.analysis.op_table import MISSING_LAST, OpTable, group_codes, runs_of

if TYPE_CHECKING:
    import duckdb

#: Operation kinds.
HOST, KERNEL, MEMCPY, MEMSET = 0, 1, 2, 3
KIND_NAMES = ("host", "kernel", "memcpy", "memset")
#: Edge kinds of the start slots, in slot order.
EDGE_KINDS = ("host", "launch", "stream", "cross")
#: A GPU operation that started within this long after another stream's operation on its device ended, while its
#: own launch and stream would have let it start earlier, waited for that operation (an inferred event wait), ns.
CROSS_WINDOW_NS = 10_000
#: ... when the wait it leaves unexplained otherwise is at least this long, ns.
CROSS_MIN_UNEXPLAINED_NS = 5_000
#: A thread quiet for at least this long between two CUDA calls may have handed its work to another thread, ns ...
HANDOFF_MIN_GAP_NS = 200_000
#: ... when one other thread of its process made a burst of calls that began after it went quiet, ended before it
#: resumed, spans at least this share of the quiet time (the handoffs either side of it take the rest) and has as
#: long a quiet time before and after it.
HANDOFF_COVER = 0.75
#: A blocking call that returned within this long after a GPU operation of its process ended waited for it, ns.
RETURN_TOL_NS = 50_000
#: The quantile of a capture's recorded launch and stream lags taken as the typical (unavoidable) lag.
TYPICAL_QUANTILE = 0.05
#: A blocking call's base name (cuda_api_calls.base_name).
BLOCKING_CALL = r"(?:Synchronize|^cuda(?:Memcpy|Memset)(?!.*Async)|^cu(?:Memcpy|Memset)(?!.*Async))"
#: Any other call also blocked on the GPU when it ran this many times as long as the usual call of its name (the
#: :data:`TYPICAL_QUANTILE` of their durations: on a GPU-bound trace most launches may stall), and at least
#: :data:`STALLED_MIN_NS`, and returned right after a GPU operation of its process ended: a launch waiting for room
#: in a full launch queue, an "asynchronous" copy from pageable memory, which returns once the copy is done.
STALLED_FACTOR = 10
STALLED_MIN_NS = 20_000
#: Calls that never stall on the GPU, however long they took: a query (``cudaEventQuery``, ``cudaStreamQuery``)
#: answers with the GPU's state at once and queues nothing; a slow one waited for a lock on the host, and a
#: faster GPU does not make it return sooner.
NEVER_STALLS = r"Query(?:_v\d+)?$"


@dataclass
class StepGraph:
    """The dependency graph of some captures' operations (see the module docstring); arrays indexed by op."""

    ops: OpTable  # capture_id, kind, pid, tid, device_id, stream_id, correlation_id, name, start_ns, end_ns, blocking
    pred: np.ndarray  # [n, 4] int64: the op each start slot waits for, -1 for none
    lag: np.ndarray  # [n, 4] int64: the lag of each slot, ns
    from_start: np.ndarray  # [n, 4] bool: the slot waits for its op's start (else its end)
    binding: np.ndarray  # [n] int8: the binding start slot, -1 when the start waits for nothing recorded
    own_ns: np.ndarray  # [n] int64: the end's own lag after the start (the duration, or less where the end waits)
    wait_pred: np.ndarray  # [n] int64: the op a blocking call's end waits for, -1 for none
    wait_lag: np.ndarray  # [n] int64
    group: np.ndarray  # [n] int64: collective group of a collective kernel, -1 for none
    group_lag: np.ndarray  # [n] int64: transfer time after the group's last arrival, ns
    also_waits: dict[int, list[int]] = field(default_factory=dict)  # a blocking call's waits on its other streams
    members: list[list[int]] = field(default_factory=list)  # the ops of each collective group
    offsets: dict[int, int] = field(default_factory=dict)  # capture -> clock offset added to its times, ns
    typical: dict[str, int] = field(default_factory=dict)
    t0: int = 0  # the graph's clock: a capture's time plus its offset, less t0 (ns)

    def clock(self, capture_id: int, t: int) -> int:
        """A time of ``capture_id``'s own clock on the graph's clock."""
        return int(t) + self.offsets.get(int(capture_id), 0) - self.t0

    @property
    def kinds(self) -> np.ndarray:
        """Each op's kind (HOST, KERNEL, MEMCPY, MEMSET) as an array."""
        if "_kinds" not in self.__dict__:
            self.__dict__["_kinds"] = self.ops["kind"]
        return self.__dict__["_kinds"]

    @property
    def special_end(self) -> np.ndarray:
        """Ops whose end waits for more than their own start (processed at their recorded end)."""
        return (self.wait_pred >= 0) | (self.group >= 0)

    def __len__(self) -> int:
        return len(self.ops)

    def name_matches(self, pattern: str, *, regex: bool = False, lower: bool = False) -> np.ndarray:
        """Each op's name (empty when it has none) containing ``pattern`` (analysis/op_names.py
        ``names_matching``), as a boolean array; the distinct names are found once per graph."""
        return match_distinct(*self.name_codes(), pattern, regex, lower)

    def name_in(self, names) -> np.ndarray:
        """Whether each op's name (missing: "") is one of ``names``, as a boolean array."""
        codes, distinct = self.name_codes()
        wanted = set(names)
        return np.asarray([t in wanted for t in distinct], bool)[codes]

    def name_codes(self) -> tuple[np.ndarray, list[str]]:
        """Each op's name as a code into the distinct names ("" last, for a missing name), made once per graph."""
        if "_names" not in self.__dict__:
            self.__dict__["_names"] = distinct_names(self.ops["name"])
        return self.__dict__["_names"]


def build_graph(con: duckdb.DuckDBPyConnection, capture_ids: Sequence[int],
                spans: dict[int, tuple[int, int]] | None = None) -> StepGraph:
    """The graph of ``capture_ids``' operations, each capture's limited to ``spans[capture_id]`` = (start, end) on
    its own clock (operations overlapping it) when given."""
    return graph_from(read_graph(con, capture_ids, spans))


def graph_from(rows: GraphRows) -> StepGraph:
    """The graph of what :func:`read_graph` read (its operations are moved to the graph's clock in place)."""
    ops, offsets = rows.ops, rows.offsets
    # RE2 (DuckDB's regular expressions) has no lookahead: the blocking calls are told here
    ops["blocking"] = (ops["kind"] == HOST) & names_matching(ops["name"], BLOCKING_CALL, regex=True)
    # times from the earliest op: float64 replays of epoch nanoseconds (1.7e18) would round to 256 ns
    t0 = int(ops["start_ns"].min()) if len(ops) else 0
    ops["start_ns"] -= t0
    ops["end_ns"] -= t0
    n = len(ops)
    graph = StepGraph(ops=ops, pred=np.full((n, 4), -1, np.int64), lag=np.zeros((n, 4), np.int64),
                      from_start=np.zeros((n, 4), bool), binding=np.full(n, -1, np.int8),
                      own_ns=(ops["end_ns"] - ops["start_ns"]).astype(np.int64),
                      wait_pred=np.full(n, -1, np.int64), wait_lag=np.zeros(n, np.int64),
                      group=np.full(n, -1, np.int64), group_lag=np.zeros(n, np.int64), offsets=offsets, t0=t0)
    if n:
        _host_edges(graph)
        _handoff_edges(graph)
        _launch_and_stream_edges(graph)
        _choose_binding(graph)
        _cross_edges(graph)
        _blocking_ends(graph)
        _collective_ends(graph, rows.collectives)
    return graph


def _host_edges(g: StepGraph) -> None:
    """Slot 0: each call after the previous top-level call of its thread; a nested call after its outer call's
    start."""
    ops = g.ops
    host = np.flatnonzero(ops["kind"] == HOST)
    if not len(host):
        return
    cid, pid, tid = ops["capture_id"][host], ops.ints("pid", MISSING_LAST)[host], ops.ints("tid", MISSING_LAST)[host]
    # by thread, then start, the longer of two calls starting together first (the outer one)
    order = np.lexsort((-ops["end_ns"][host], ops["start_ns"][host], tid, pid, cid))
    idx = host[order]
    start, end = ops["start_ns"][idx], ops["end_ns"][idx]
    new_thread = runs_of(cid[order], pid[order], tid[order])
    # the latest end so far on the thread, before this call: a call starting before it is nested
    prev_end_l, prev_top_l = [0] * len(idx), [-1] * len(idx)
    running, top = -(2 ** 62), -1
    for k, (s, e, fresh) in enumerate(zip(start.tolist(), end.tolist(), new_thread.tolist())):  # one pass
        if fresh:
            running, top = -(2 ** 62), -1
        prev_end_l[k], prev_top_l[k] = running, top
        if s >= running:
            top = k
        running = max(running, e)
    prev_end, prev_top = np.asarray(prev_end_l, np.int64), np.asarray(prev_top_l, np.int64)
    nested = (start < prev_end) & (prev_top >= 0)
    # a top-level call's predecessor is the previous top-level call: prev_top of a top-level call
    has = prev_top >= 0
    pos = prev_top[has]
    g.pred[idx[has], 0] = idx[pos]
    g.from_start[idx[has], 0] = nested[has]
    ref = np.where(nested[has], start[pos], end[pos])
    g.lag[idx[has], 0] = start[has] - ref


def _handoff_edges(g: StepGraph) -> None:
    """Slot 0 across threads at a handoff (module docstring): the burst's first call waits for the quiet thread's
    last call before it, the quiet thread's next call for the burst's last call, each after the host work between
    them. Top-level calls only; of several threads that qualify, the one whose burst spans the most of the gap."""
    ops = g.ops
    top = np.flatnonzero((g.kinds == HOST) & ~g.from_start[:, 0])
    if not len(top):
        return
    starts, ends = ops["start_ns"], ops["end_ns"]
    tid_of, tids = ops.ints("tid", -1), ops.ints("tid", MISSING_LAST)[top]
    process = group_codes(ops["capture_id"][top], ops.ints("pid", MISSING_LAST)[top])
    for p in range(int(process.max()) + 1):
        calls, p_tids = top[process == p], tids[process == p]
        p_ops = calls[np.argsort(starts[calls], kind="stable")]
        threads = [c[np.argsort(starts[c], kind="stable")] for c in (calls[p_tids == t] for t in np.unique(p_tids))]
        if len(threads) < 2:
            continue
        p_start = starts[p_ops]
        for t, mine in enumerate(threads):  # vectorized over the thread's gaps, a loop over the other threads
            k = np.flatnonzero(starts[mine[1:]] - ends[mine[:-1]] >= HANDOFF_MIN_GAP_NS)
            if not len(k):
                continue
            lo, hi = ends[mine[k]], starts[mine[k + 1]]
            best = np.full(len(k), -1, np.int64)
            first, last = np.full(len(k), -1, np.int64), np.full(len(k), -1, np.int64)
            for u, theirs in enumerate(threads):
                if u == t:
                    continue
                s_u, e_u = starts[theirs], ends[theirs]
                a = np.searchsorted(s_u, lo, "right")  # the first call after the thread went quiet
                z = np.searchsorted(e_u, hi, "right")  # past the last call ended by its resumption
                ok = z > a
                a_, z_ = np.minimum(a, len(theirs) - 1), np.maximum(z - 1, 0)
                # an island: the other thread quiet as long before its burst and after it (a thread that makes
                # calls all along is doing its own work)
                before = s_u[a_] - np.where(a > 0, e_u[np.maximum(a - 1, 0)], -(2 ** 62))
                after = np.where(z < len(theirs), s_u[np.minimum(z, len(theirs) - 1)], 2 ** 62) - e_u[z_]
                span = e_u[z_] - s_u[a_]
                ok &= (np.minimum(before, after) >= HANDOFF_MIN_GAP_NS) & (span >= HANDOFF_COVER * (hi - lo))
                ok &= span > best
                best = np.where(ok, span, best)
                first, last = np.where(ok, theirs[a_], first), np.where(ok, theirs[z_], last)
            has = best >= 0
            # a direct handoff: no third thread's call starts in either window (the NCCL watchdog's queries,
            # quiet for long and as likely to hold a burst within its quiet time, pass control to nobody)
            for n in np.flatnonzero(has):
                for w_lo, w_hi in ((ends[mine[k[n]]], starts[first[n]]), (ends[last[n]], starts[mine[k[n] + 1]])):
                    between = p_ops[np.searchsorted(p_start, w_lo, "left"):np.searchsorted(p_start, w_hi, "right")]
                    if np.isin(tid_of[between], [tid_of[mine[0]], tid_of[first[n]]], invert=True).any():
                        has[n] = False
            for op, pred in ((first[has], mine[k][has]), (mine[k + 1][has], last[has])):
                g.pred[op, 0], g.from_start[op, 0], g.lag[op, 0] = pred, False, starts[op] - ends[pred]


def _launch_and_stream_edges(g: StepGraph) -> None:
    ops = g.ops
    kind, linked = ops["kind"], ops.present("correlation_id")
    gpu = np.flatnonzero(kind != HOST)
    if not len(gpu):  # host calls alone: nothing launched in the span
        return
    # slot 1: the launching call (same capture, process and correlation id; the first such call)
    host = np.flatnonzero((kind == HOST) & linked)
    launched = gpu[linked[gpu]]
    both = np.r_[host, launched]
    key = group_codes(ops["capture_id"][both], ops.ints("pid", MISSING_LAST)[both], ops.ints("correlation_id")[both])
    first_call = np.full(int(key.max(initial=-1)) + 1, -1, np.int64)
    keys, first = np.unique(key[:len(host)], return_index=True)
    first_call[keys] = host[first]
    call = first_call[key[len(host):]]
    op, call = launched[call >= 0], call[call >= 0]
    starts, ends = ops["start_ns"], ops["end_ns"]
    g.pred[op, 1] = call
    g.from_start[op, 1] = True
    g.lag[op, 1] = starts[op] - starts[call]
    # slot 2: the previous operation on the stream
    stream = [ops[c][gpu] if c == "capture_id" else ops.ints(c, MISSING_LAST)[gpu]
              for c in ("capture_id", "device_id", "stream_id")]
    idx = gpu[order := np.lexsort((ends[gpu], starts[gpu], *stream[::-1]))]
    same = ~runs_of(*(k[order] for k in stream))
    cur, prev = idx[same], idx[np.r_[same[1:], False]]
    g.pred[cur, 2] = prev
    g.lag[cur, 2] = starts[cur] - ends[prev]


def _typical(values: np.ndarray) -> int:
    values = values[values >= 0]
    return int(np.quantile(values, TYPICAL_QUANTILE)) if len(values) else 0


def _choose_binding(g: StepGraph) -> None:
    """The binding start slot of every op; non-binding slots get the typical lag (at most their own)."""
    typical = np.zeros(4, np.int64)
    for slot, kind in ((1, "launch"), (2, "stream")):
        typical[slot] = _typical(g.lag[g.pred[:, slot] >= 0, slot])
        g.typical[kind] = int(typical[slot])
    excess = np.where(g.pred >= 0, g.lag - typical[None, :], np.iinfo(np.int64).max)
    excess[:, 0] = np.where(g.pred[:, 0] >= 0, 0, np.iinfo(np.int64).max)  # a host call: its thread's order
    best = np.argmin(excess, axis=1)
    has = g.pred[np.arange(len(g)), best] >= 0
    g.binding[:] = np.where(has, best, -1)
    _relax_non_binding(g, typical)


def _relax_non_binding(g: StepGraph, typical: np.ndarray) -> None:
    for slot in (1, 2, 3):
        loose = (g.pred[:, slot] >= 0) & (g.binding != slot)
        g.lag[loose, slot] = np.minimum(g.lag[loose, slot], typical[slot])


def _last_at_or_before(keys: np.ndarray, times: np.ndarray, qkeys: np.ndarray, qtimes: np.ndarray) -> np.ndarray:
    """For each query, the position in (keys, times) (sorted by key, then time) of the last row with the same key
    and time <= the query's, or -1. Linear after the sort: keys and times are folded into one sorted integer."""
    if not len(keys):
        return np.full(len(qkeys), -1, np.int64)
    uniq = np.unique(keys)
    lo = min(int(times.min()), int(qtimes.min()) if len(qtimes) else 0)
    span = max(int(times.max()), int(qtimes.max()) if len(qtimes) else 0) - lo + 2
    dense = np.searchsorted(uniq, keys)
    qdense = np.searchsorted(uniq, qkeys)
    known = (qdense < len(uniq)) & (uniq[np.minimum(qdense, len(uniq) - 1)] == qkeys)
    folded = dense * span + (times - lo)
    pos = np.searchsorted(folded, qdense * span + (qtimes - lo), "right") - 1
    ok = known & (pos >= 0)
    ok &= dense[np.maximum(pos, 0)] == qdense
    return np.where(ok, pos, -1)


def _cross_edges(g: StepGraph) -> None:
    """Slot 3: an inferred wait for another stream's operation (see the module docstring)."""
    ops = g.ops
    gpu = np.flatnonzero(ops["kind"] != HOST)
    if not len(gpu):
        return
    starts, ends = ops["start_ns"], ops["end_ns"]
    streams = ops.ints("stream_id")
    rows = np.arange(len(g))
    bind = np.maximum(g.binding, 0)
    typical = np.array([0, g.typical.get("launch", 0), g.typical.get("stream", 0), 0])
    unexplained = np.where(g.binding >= 0, g.lag[rows, bind] - typical[bind], CROSS_MIN_UNEXPLAINED_NS)
    dk = ops["capture_id"].astype(np.int64) * 1_000_003 + ops.ints("device_id")
    cand = gpu[(unexplained[gpu] >= CROSS_MIN_UNEXPLAINED_NS) & (g.binding[gpu] != 0)]
    if not len(cand):
        return
    order = gpu[np.lexsort((ends[gpu], dk[gpu]))]
    pos = _last_at_or_before(dk[order], ends[order], dk[cand], starts[cand])
    found = np.full(len(cand), -1, np.int64)
    for back in range(4):  # the latest end on another stream among the last few ends before the start
        p = pos - back
        valid = (found < 0) & (pos >= 0) & (p >= 0)
        j = order[np.maximum(p, 0)]
        valid &= dk[j] == dk[cand]
        hit = valid & (streams[j] != streams[cand]) & (j != cand)
        found = np.where(hit, j, found)
    j = found
    wait = starts[cand] - ends[np.maximum(j, 0)]
    ok = (j >= 0) & (wait >= 0) & (wait <= CROSS_WINDOW_NS) & (wait < unexplained[cand])
    c, j, wait = cand[ok], j[ok], wait[ok]
    g.pred[c, 3], g.lag[c, 3], g.binding[c] = j, wait, 3
    for slot, kind in ((1, "launch"), (2, "stream")):
        has = g.pred[c, slot] >= 0
        g.lag[c[has], slot] = np.minimum(g.lag[c[has], slot], g.typical.get(kind, 0))


def _blocking_ends(g: StepGraph) -> None:
    """A blocking call's end waits for the GPU operation of its process that ended last before it returned; so
    does a stalled call (:data:`STALLED_FACTOR`): a launch into a full queue or a copy from pageable memory, which
    without the wait takes the usual time of its name. (On a GPU-bound PyTorch trace, v100_rank0, 742 of the
    4,350 launches and 238 of the 1,600 asynchronous copies stalled, 228 ms in all: with their durations kept, a
    faster kernel saved nothing; docs/impact.md.)"""
    ops = g.ops
    host = ops["kind"] == HOST
    calls, gpu = np.flatnonzero(host), np.flatnonzero(~host)
    if not len(calls) or not len(gpu):
        return
    starts, ends = ops["start_ns"], ops["end_ns"]
    took = ends[calls] - starts[calls]
    group = group_codes(ops["capture_id"][calls], g.name_codes()[0][calls])  # by capture and name
    typical = group_quantile(group, took, TYPICAL_QUANTILE)
    blocking = ops["blocking"][calls]
    stalled = ~blocking & (took >= STALLED_MIN_NS) & (took >= STALLED_FACTOR * typical)
    if stalled.any():
        slow = np.flatnonzero(stalled)
        polls = names_matching(ops["name"][calls[slow]], NEVER_STALLS, regex=True)
        stalled[slow[polls]] = False
    calls, typical, blocking = calls[blocking | stalled], typical[blocking | stalled], blocking[blocking | stalled]
    if not len(calls):
        return
    pkey = ops["capture_id"].astype(np.int64) * 4_294_967_311 + ops.ints("pid")
    order = gpu[np.lexsort((ends[gpu], pkey[gpu]))]
    pos = _last_at_or_before(pkey[order], ends[order], pkey[calls], ends[calls])
    j = np.where(pos >= 0, order[np.maximum(pos, 0)], -1)
    w = ends[calls] - ends[np.maximum(j, 0)]
    ok = (j >= 0) & (ends[np.maximum(j, 0)] > starts[calls]) & (w >= 0) & (w <= RETURN_TOL_NS)
    c, j, w, typical, blocking = calls[ok], j[ok], w[ok], typical[ok], blocking[ok]
    g.wait_pred[c], g.wait_lag[c] = j, w
    # without the wait, a blocking call would take about its return latency, a stalled one its usual time
    alone = np.where(blocking, np.maximum(w, 1_000), np.maximum(np.rint(typical), 1_000)).astype(np.int64)
    g.own_ns[c] = np.minimum(ends[c] - starts[c], alone)
    _other_streams(g, c[blocking], pkey, starts, ends)


def _other_streams(g: StepGraph, calls: np.ndarray, pkey: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> None:
    """A blocking call also waits for the last operation that ended during it on each other stream of its process
    (a device synchronization waits for every stream; the latest end is the one that set its return)."""
    ops = g.ops
    gpu = np.flatnonzero(ops["kind"] != HOST)
    keys = group_codes(ops["capture_id"][gpu], ops.ints("device_id", MISSING_LAST)[gpu],
                       ops.ints("stream_id", MISSING_LAST)[gpu], appearance=True)
    if keys.max(initial=0) > 256:  # a capture of hundreds of streams: the binding wait alone
        return
    for k in np.unique(keys):
        members = gpu[keys == k]
        members = members[np.argsort(ends[members], kind="stable")]
        mine = calls[pkey[calls] == pkey[members[0]]]
        if not len(mine):
            continue
        pos = np.searchsorted(ends[members], ends[mine], "right") - 1
        ok = pos >= 0
        j = members[np.maximum(pos, 0)]
        ok &= (ends[j] > starts[mine]) & (j != g.wait_pred[mine])
        for call, op in zip(mine[ok].tolist(), j[ok].tolist()):
            g.also_waits.setdefault(call, []).append(op)


def _collective_ends(g: StepGraph, rows: list[tuple]) -> None:
    """A collective kernel ends its transfer time after the last rank of its collective arrives (``rows``: the
    captures' collective_ranks, as :func:`read_graph` reads them)."""
    if not rows:
        return
    ops = g.ops
    kern = np.flatnonzero(ops["kind"] == KERNEL)
    at = {(c, d, s): i for i, c, d, s in zip(kern.tolist(), ops["capture_id"][kern].tolist(),
                                             ops.ints("device_id")[kern].tolist(), ops["start_ns"][kern].tolist())}
    groups: dict[tuple, list[int]] = {}
    for cid, dev, start, _end, job, pg, coll, index in rows:
        i = at.get((int(cid), int(dev), g.clock(cid, start)))
        if i is not None:
            groups.setdefault((job, pg, coll, index), []).append(i)
    starts, ends = ops["start_ns"], ops["end_ns"]
    for members in groups.values():
        if len(members) < 2:
            continue
        last = max(starts[m] for m in members)
        gid = len(g.members)
        g.members.append(members)
        for m in members:
            transfer = ends[m] - last
            if transfer < 0:  # clocks the alignment could not reconcile: this rank keeps its own duration
                continue
            g.group[m], g.group_lag[m] = gid, transfer
            g.own_ns[m] = min(int(ends[m] - starts[m]), int(transfer))
