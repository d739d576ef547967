"""Turn Kineto trace events into rows of the store's tables, in batches (the hot loop of the Kineto ingest).

:class:`EventRows` reads the events one at a time (:meth:`EventRows.consume`) and hands full batches to a sink as
``(table, column names, rows)``; nothing grows with the trace's length but the kernel-name ids. Which events
it reads (``cat``, and ``ph`` ``X`` for complete events):

* ``kernel`` -> kernels (and kernel_occupancy; collectives when the kernel carries NCCL arguments)
* ``cuda_runtime`` / ``cuda_driver`` -> api_calls
* ``gpu_memcpy`` / ``gpu_memset`` -> memcpys / memsets (kind and memory kinds parsed from the name)
* ``cuda_sync`` -> syncs
* ``user_annotation`` / ``gpu_user_annotation``, and ``ProfilerStep#N`` -> nvtx_ranges (domain per kind)
* ``cpu_op`` -> cpu_ops; a ``record_param_comms`` operator also -> collectives

GPU-side events carry the device as ``pid`` and the stream as ``tid``; their host process and thread come from
the API call with the same correlation id, joined after the stream (see :mod:`.kineto`).
"""

from __future__ import annotations

import decimal
import json
import re
from collections import Counter
from decimal import Decimal
from typing import Callable, Iterable

from nsight_advisor.common.errors import InputError
from nsight_advisor.ingest.kineto.json_events import to_ns
from nsight_advisor.ingest.kernel_names import short_kernel_name
from nsight_advisor.ingest.kineto.ranges import CATEGORY, ProfilerRanges

#: Rows per batch handed to the sink.
BATCH_ROWS = 50_000

#: Longest name (kernel, API, operator, annotation) the ingest accepts, in characters. The longest demangled
#: kernel names seen are a few thousand characters; anything near this is not a name.
MAX_NAME_CHARS = 1 << 20

#: NVTX domain ids of the annotation kinds (0 is the unnamed domain); their names go into nvtx_domains.
DOMAINS = {"user_annotation": 1, "gpu_user_annotation": 2, "ProfilerStep": 3}

#: Columns of each staged or stored batch, in row order.
COLUMNS: dict[str, tuple[str, ...]] = {
    "kernels": ("device_id", "context_id", "stream_id", "correlation_id", "start_ns", "end_ns", "name_id",
                "short_name_id", "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z",
                "registers_per_thread", "shared_mem_bytes", "blocks_per_sm", "warps_per_sm", "occupancy_pct"),
    "api_calls": ("pid", "tid", "correlation_id", "name_id", "kind", "start_ns", "end_ns"),
    "memcpys": ("device_id", "context_id", "stream_id", "correlation_id", "start_ns", "end_ns", "bytes",
                "direction", "src_kind", "dst_kind"),
    "memsets": ("device_id", "context_id", "stream_id", "correlation_id", "start_ns", "end_ns", "bytes", "mem_kind"),
    "syncs": ("device_id", "context_id", "stream_id", "correlation_id", "sync_type", "start_ns", "end_ns",
              "event_id"),
    "annotations": ("domain_id", "pid", "tid", "device_id", "stream_id", "text", "start_ns", "end_ns"),
    "cpu_ops": ("pid", "tid", "name", "start_ns", "end_ns", "external_id", "sequence_number", "fwd_thread_id"),
    "collectives": ("source", "pid", "tid", "device_id", "start_ns", "end_ns", "collective", "dtype",
                    "in_msg_nelems", "out_msg_nelems", "in_msg_bytes", "out_msg_bytes", "group_size",
                    "group_ranks", "process_group", "external_id", "correlation_id"),
}

_NUMBER = frozenset((int, Decimal))  # what ts and dur may be: the parser's whole and fractional numbers
_K = Decimal(1000)  # microseconds -> ns; a Decimal factor spares converting 1000 on every multiplication
_EMPTY: dict = {}
_NO_DIMS = (None, None, None)

# CUPTI copy kinds as Kineto names them ("Memcpy HtoD (Pageable -> Device)"), labelled as nsys stats labels them.
_COPY_KINDS = {
    "HtoD": "Host-to-Device", "DtoH": "Device-to-Host", "HtoA": "Host-to-Array", "AtoH": "Array-to-Host",
    "AtoA": "Array-to-Array", "AtoD": "Array-to-Device", "DtoA": "Device-to-Array", "DtoD": "Device-to-Device",
    "HtoH": "Host-to-Host", "PtoP": "Peer-to-Peer",
}
_MEMCPY_NAME = re.compile(r"Memcpy\s+(\w+)\s*(?:\(([^)]*?)\s*->\s*([^)]*?)\))?\s*$")
_MEMSET_NAME = re.compile(r"Memset\s*(?:\(([^)]*)\))?\s*$")

# Kineto's cuda_sync_kind strings -> the syncs table's labels.
_SYNC_KINDS = {"Event Sync": "event_synchronize", "Stream Wait Event": "stream_wait_event",
               "Stream Sync": "stream_synchronize", "Context Sync": "context_synchronize"}

# Bytes per element of the dtype names record_param_comms writes (c10 ScalarType names).
_DTYPE_BYTES = {"Byte": 1, "Char": 1, "Bool": 1, "Float8_e4m3fn": 1, "Float8_e5m2": 1, "Float8_e4m3fnuz": 1,
                "Float8_e5m2fnuz": 1, "Short": 2, "Half": 2, "BFloat16": 2, "Int": 4, "Float": 4,
                "ComplexHalf": 4, "Long": 8, "Double": 8, "ComplexFloat": 8, "ComplexDouble": 16,
                "UInt16": 2, "UInt32": 4, "UInt64": 8}


def _mem_kind(text: str | None) -> str | None:
    """Kineto's memory kind ("Pageable", "Device Static") as the store labels it ("pageable", "device_static")."""
    return text.strip().lower().replace(" ", "_") if text else None


class EventRows:
    """Collects the rows of one trace's events and hands each full batch to ``sink(table, columns, rows)``."""

    def __init__(self, sink: Callable[[str, tuple[str, ...], list[tuple]], None], *, cpu_ops: bool = True) -> None:
        """``cpu_ops``: keep the operators' rows (False: count them and their span only, for a deferred table)."""
        self.sink = sink
        self.keep_cpu_ops = cpu_ops
        self.cpu_op_count = 0
        self.cpu_op_span: list[int] = []  # [first start, last end] of the operators, when not kept
        self.rows: dict[str, list[tuple]] = {table: [] for table in COLUMNS}
        self.kernel_names: dict[str, int] = {}  # name -> name_id (demangled and short names alike)
        self.api_names: dict[str, int] = {}  # CUDA call name -> name_id (api_names; its calls refer to it)
        self.dropped: Counter = Counter()  # table -> rows dropped for a negative duration
        self.events = 0
        self._copy_names: dict[str, tuple] = {}
        self._short: dict[int, int] = {}  # name_id -> short name's name_id
        self.profiler_ranges = ProfilerRanges()  # CUPTI range-profiler mode (ingest.kineto_ranges)
        self._handlers = {
            CATEGORY: self.profiler_ranges.add,
            "kernel": self._kernel, "cuda_runtime": self._runtime, "cuda_driver": self._driver,
            "gpu_memcpy": self._memcpy, "gpu_memset": self._memset, "cuda_sync": self._sync,
            "user_annotation": self._user_annotation, "gpu_user_annotation": self._gpu_annotation,
            "cpu_op": self._cpu_op,
        }

    def parsed_state(self) -> dict:
        """The parse's counts and names once it is over, without its sink and handlers (bound to this object and
        its sink's): what a forked child hands back of a parse it ran (ingest/kineto/parallel_parse.py)."""
        return {k: v for k, v in vars(self).items() if k not in ("sink", "_handlers")}

    @classmethod
    def restored(cls, state: dict) -> "EventRows":
        """The EventRows of a parse that ran elsewhere (:meth:`parsed_state`): its counts and names, read from now
        on; it parses nothing more."""
        rows = cls.__new__(cls)
        vars(rows).update(state)
        return rows

    # -- the loop -------------------------------------------------------------------------------------------
    def consume(self, events: Iterable) -> None:
        """Read every element of ``traceEvents``; InputError names the first event that cannot be read."""
        handlers = self._handlers
        index = -1
        try:
            with decimal.localcontext() as ctx:
                ctx.prec = 60  # ts * 1000 stays exact for any ts Kineto writes (19 digits today)
                for index, event in enumerate(events):  # noqa: B007 - the index names a bad event
                    get = event.get
                    if get("ph") == "X":  # flows, instants, metadata: not read
                        handler = handlers.get(get("cat"))
                        if handler is not None:
                            handler(event, get)
        except (KeyError, ValueError, TypeError, AttributeError, IndexError) as exc:
            if index < 0:
                raise
            if type(event) is not dict:
                raise InputError(f"traceEvents[{index}] is not an object") from None
            args = event.get("args")
            reason = (f"args is {_json_kind(args)}, not an object" if args is not None and type(args) is not dict
                      else _reason(exc))
            raise InputError(f"traceEvents[{index}] (cat {str(event.get('cat'))[:40]}): {reason}") from None
        self.events = index + 1
        for table in COLUMNS:
            self._flush(table)

    def _flush(self, table: str) -> None:
        rows = self.rows[table]
        if rows:
            self.rows[table] = []
            self.sink(table, COLUMNS[table], rows)

    # -- fields ---------------------------------------------------------------------------------------------
    def _name_id(self, name: str) -> int:
        found = self.kernel_names.get(name)
        if found is None:
            found = self.kernel_names[name] = len(self.kernel_names) + 1
        return found

    # -- categories: each appends one row (a tuple in COLUMNS order); Arrow checks the types per batch ---------
    def _kernel(self, event, get) -> None:
        ts, dur, name = event["ts"], event["dur"], event["name"]
        if type(ts) not in _NUMBER or type(dur) not in _NUMBER or type(name) is not str:
            return self._odd(event, "kernels")
        start = int(ts * _K)
        end = start + int(dur * _K)
        if end < start:
            return self._odd(event, "kernels")
        name_id = self.kernel_names.get(name)
        short_id = self._short.get(name_id) if name_id is not None else None
        if short_id is None:
            _check_name(name)
            name_id = self._name_id(name)
            short_id = self._short[name_id] = self._name_id(short_kernel_name(name) or name)
        args = get("args") or _EMPTY
        aget = args.get
        grid, block = aget("grid") or _NO_DIMS, aget("block") or _NO_DIMS
        if len(grid) != 3 or len(block) != 3:
            raise ValueError(f"grid/block is {str(grid)[:40]!r}/{str(block)[:40]!r}, not [x, y, z]")
        rows = self.rows["kernels"]
        rows.append((aget("device"), aget("context"), aget("stream"), aget("correlation"), start,
                     end, name_id, short_id, grid[0], grid[1], grid[2], block[0], block[1],
                     block[2], aget("registers per thread"), aget("shared memory"), aget("blocks per SM"),
                     aget("warps per SM"), aget("est. achieved occupancy %")))
        if len(rows) >= BATCH_ROWS:
            self._flush("kernels")
        if "Collective name" in args:
            self._collective("kernel", args, None, None, _int(aget("device")), start, end,
                             _int(aget("correlation")))

    def _runtime(self, event, get) -> None:
        self._api(event, get, "runtime")

    def _driver(self, event, get) -> None:
        self._api(event, get, "driver")

    def _api(self, event, get, kind: str) -> None:
        ts, dur, name = event["ts"], event["dur"], event["name"]
        if type(ts) not in _NUMBER or type(dur) not in _NUMBER or type(name) is not str:
            return self._odd(event, "api_calls")
        start = int(ts * _K)
        end = start + int(dur * _K)
        if end < start:
            return self._odd(event, "api_calls")
        name_id = self.api_names.get(name)
        if name_id is None:  # a new name: checked once, as a kernel's is
            name_id = self.api_names[_check_name(name)] = len(self.api_names) + 1
        rows = self.rows["api_calls"]
        rows.append((get("pid"), get("tid"), (get("args") or _EMPTY).get("correlation"), name_id,
                     kind, start, end))
        if len(rows) >= BATCH_ROWS:
            self._flush("api_calls")

    def _cpu_op(self, event, get) -> None:
        ts, dur, name = event["ts"], event["dur"], event["name"]
        if type(ts) not in _NUMBER or type(dur) not in _NUMBER or type(name) is not str:
            return self._odd(event, "cpu_ops")
        start = int(ts * _K)
        end = start + int(dur * _K)
        if end < start:
            return self._odd(event, "cpu_ops")
        self.cpu_op_count += 1
        if self.keep_cpu_ops:
            aget = (get("args") or _EMPTY).get
            rows = self.rows["cpu_ops"]
            rows.append((get("pid"), get("tid"), name, start, end, aget("External id"), aget("Sequence number"),
                         aget("Fwd thread id")))
            if len(rows) >= BATCH_ROWS:
                self._flush("cpu_ops")
        elif self.cpu_op_span:
            span = self.cpu_op_span
            if start < span[0]:
                span[0] = start
            if end > span[1]:
                span[1] = end
        else:
            self.cpu_op_span = [start, end]
        if name[:1] in "Pr":  # the rare operators that mean more than an operator
            if name.startswith("ProfilerStep#"):  # some PyTorch versions write the step as an operator
                self._annotation(event, get, "user_annotation")
            elif name == "record_param_comms" and "Collective name" in (get("args") or _EMPTY):
                self._collective("record_param_comms", get("args"), _int(get("pid")), _int(get("tid")), None,
                                 start, end, None)

    def _odd(self, event, table: str) -> None:
        """An event the fast path did not take: raise for what is wrong with it, or count a negative duration."""
        start, end = self._span(event)
        _check_name(event["name"])
        if end < start:
            self.dropped[table] += 1
            return
        raise AssertionError("the fast path takes every valid event")  # pragma: no cover

    def _span(self, event) -> tuple[int, int]:
        start = to_ns(event["ts"], "ts")
        return start, start + to_ns(event["dur"], "dur")

    def _push(self, table: str, row: tuple) -> None:
        rows = self.rows[table]
        rows.append(row)
        if len(rows) >= BATCH_ROWS:
            self._flush(table)

    def _name(self, event) -> str:
        return _check_name(event["name"])

    def _copy_kind(self, name: str) -> tuple:
        found = self._copy_names.get(name)
        if found is None:
            m = _MEMCPY_NAME.match(name)
            if m:
                found = (_COPY_KINDS.get(m.group(1), m.group(1)), _mem_kind(m.group(2)), _mem_kind(m.group(3)))
            else:
                m = _MEMSET_NAME.match(name)
                found = (None, _mem_kind(m.group(1)) if m else None, None)
            self._copy_names[name] = found
        return found

    def _gpu_fields(self, event) -> tuple:
        args = event.get("args") or {}
        return args, (_int(args.get("device")), _int(args.get("context")), _int(args.get("stream")),
                      _int(args.get("correlation")))

    def _memcpy(self, event, get) -> None:
        start, end = self._span(event)
        if end < start:
            self.dropped["memcpys"] += 1
            return
        args, ids = self._gpu_fields(event)
        direction, src, dst = self._copy_kind(self._name(event))
        self._push("memcpys", (*ids, start, end, _int(args.get("bytes")), direction, src, dst))

    def _memset(self, event, get) -> None:
        start, end = self._span(event)
        if end < start:
            self.dropped["memsets"] += 1
            return
        args, ids = self._gpu_fields(event)
        _direction, kind, _dst = self._copy_kind(self._name(event))
        self._push("memsets", (*ids, start, end, _int(args.get("bytes")), kind))

    def _sync(self, event, get) -> None:
        start, end = self._span(event)
        if end < start:
            self.dropped["syncs"] += 1
            return
        args, ids = self._gpu_fields(event)
        kind = _SYNC_KINDS.get(args.get("cuda_sync_kind") or self._name(event), "unknown")
        self._push("syncs", (*ids, kind, start, end, _int(args.get("wait_on_cuda_event_id"))))

    def _user_annotation(self, event, get) -> None:
        self._annotation(event, get, "user_annotation")

    def _gpu_annotation(self, event, get) -> None:
        self._annotation(event, get, "gpu_user_annotation")

    def _annotation(self, event, get, cat) -> None:
        start, end = self._span(event)
        if end < start:
            self.dropped["nvtx_ranges"] += 1
            return
        name = self._name(event)
        if cat == "gpu_user_annotation":
            # On the GPU timeline: pid is the device, tid the stream; the host process is joined later.
            args = event.get("args") or {}
            self._push("annotations", (DOMAINS[cat], None, None, _int(args.get("device", event.get("pid"))),
                                       _int(event.get("tid")), name, start, end))
            return
        domain = DOMAINS["ProfilerStep"] if name.startswith("ProfilerStep#") else DOMAINS[cat]
        self._push("annotations", (domain, _int(event.get("pid")), _int(event.get("tid")), None, None, name,
                                   start, end))

    def _collective(self, source, args, pid, tid, device, start, end, correlation) -> None:
        dtype = args.get("dtype")
        dtype = dtype if isinstance(dtype, str) else None
        size = _DTYPE_BYTES.get(dtype)
        in_n, out_n = _int(args.get("In msg nelems")), _int(args.get("Out msg nelems"))
        in_b = _int(args.get("In msg size"))
        out_b = _int(args.get("Out msg size"))
        if in_b is None and in_n is not None and size:
            in_b = in_n * size
        if out_b is None and out_n is not None and size:
            out_b = out_n * size
        group = args.get("Process Group Name")
        desc = args.get("Process Group Description")
        group = f"{group} ({desc})" if group is not None and desc else group
        self._push("collectives", (
            source, pid, tid, device, start, end, _text(args.get("Collective name")), dtype, in_n, out_n, in_b,
            out_b, _int(args.get("Group size")), _ranks(args.get("Process Group Ranks")), _text(group),
            _int(args.get("External id")), correlation,
        ))


def _check_name(name) -> str:
    if type(name) is not str:
        raise ValueError(f"name is {_json_kind(name)}, not text")
    if len(name) > MAX_NAME_CHARS:
        raise ValueError(f"a name of {len(name):,} characters (more than {MAX_NAME_CHARS:,}): not a name")
    return name


def _json_kind(value) -> str:
    """What a JSON value is, in the trace's terms (the parser's Python types, such as Decimal, mean nothing to the
    reader of an error)."""
    if value is None:
        return "null"
    if type(value) is bool:
        return "true" if value else "false"
    if type(value) in (int, float, Decimal, str):
        # a text quoted, its control characters escaped
        kind, text = ("text", repr(value)) if type(value) is str else ("number", str(value))
        return f"the {kind} {text if len(text) <= 40 else text[:37] + '...'}"
    return {list: "a list", dict: "an object"}.get(type(value), "a value of no JSON type")


def _reason(exc: BaseException) -> str:
    if isinstance(exc, KeyError):
        return f"no {exc.args[0]!r} field; not a complete PyTorch profiler trace"
    if isinstance(exc, (AttributeError, IndexError)):
        return f"a field of the wrong shape ({str(exc)[:80]})"
    return str(exc)[:200]


def _int(value) -> int | None:
    """An integer field; None when absent. Text, lists and objects where a number belongs are errors."""
    if value is None:
        return None
    kind = type(value)
    if kind is int:
        return value if -(1 << 63) <= value < (1 << 63) else None
    if kind is bool:
        return int(value)
    if hasattr(value, "is_finite"):  # a Decimal: a number written with a fraction
        return int(value)
    raise ValueError(f"a number field is {_json_kind(value)}")


def _text(value) -> str | None:
    if value is None:
        return None
    text = str(value)
    if len(text) > MAX_NAME_CHARS:
        raise ValueError(f"a text field of {len(text):,} characters (more than {MAX_NAME_CHARS:,})")
    return text


def _ranks(value) -> list[int] | None:
    """``Process Group Ranks`` as a list of ints: written as a list, or as text like "[0, 1]"."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    if isinstance(value, list) and all(type(v) is int for v in value):
        return value
    return None


__all__ = ["EventRows", "COLUMNS", "DOMAINS", "BATCH_ROWS", "MAX_NAME_CHARS"]
