"""Turn Kineto trace events into rows of the store's tables, in batches (the hot loop of the Kineto ingest).

:class:`EventRows` takes events one at a time (:meth:`EventRows.add`) and hands full batches to a sink as
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

import json
import re
from collections import Counter
from decimal import Decimal
from typing import Callable

from nsight_advisor.errors import InputError
from nsight_advisor.ingest.kineto_json import to_ns
from nsight_advisor.ingest.ncu_store import short_kernel_name

#: Rows per batch handed to the sink.
BATCH_ROWS = 100_000

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
    "api_calls": ("pid", "tid", "correlation_id", "name", "kind", "start_ns", "end_ns"),
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

    def __init__(self, sink: Callable[[str, tuple[str, ...], list[tuple]], None]) -> None:
        self.sink = sink
        self.rows: dict[str, list[tuple]] = {table: [] for table in COLUMNS}
        self.kernel_names: dict[str, int] = {}  # name -> name_id (demangled and short names alike)
        self.categories: Counter = Counter()  # events per cat (ph X), read or not
        self.rounded = 0  # timestamps with a fraction finer than 1 ns
        self.dropped: Counter = Counter()  # table -> rows dropped for a negative duration
        self.events = 0
        self._copy_names: dict[str, tuple] = {}
        self._short: dict[int, int] = {}  # name_id -> short name's name_id
        self._handlers = {
            "kernel": self._kernel, "cuda_runtime": self._api, "cuda_driver": self._api,
            "gpu_memcpy": self._memcpy, "gpu_memset": self._memset, "cuda_sync": self._sync,
            "user_annotation": self._annotation, "gpu_user_annotation": self._annotation, "cpu_op": self._cpu_op,
        }

    # -- the loop -------------------------------------------------------------------------------------------
    def add(self, event) -> None:
        """Read one element of ``traceEvents``."""
        self.events += 1
        if type(event) is not dict:
            raise InputError(f"traceEvents[{self.events - 1}] is not an object")
        if event.get("ph") != "X":
            return  # flows, instants, metadata: not read
        cat = event.get("cat")
        self.categories[cat] += 1
        handler = self._handlers.get(cat)
        if handler is None:
            return
        try:
            handler(event, cat)
        except (KeyError, ValueError, TypeError, AttributeError) as exc:
            raise InputError(f"traceEvents[{self.events - 1}] (cat {cat}): {_reason(exc)}") from None

    def finish(self) -> None:
        """Hand over the last, partly filled batches."""
        for table in COLUMNS:
            self._flush(table)

    def _push(self, table: str, row: tuple) -> None:
        rows = self.rows[table]
        rows.append(row)
        if len(rows) >= BATCH_ROWS:
            self._flush(table)

    def _flush(self, table: str) -> None:
        rows = self.rows[table]
        if rows:
            self.rows[table] = []
            self.sink(table, COLUMNS[table], rows)

    # -- fields ---------------------------------------------------------------------------------------------
    def _span(self, event) -> tuple[int, int]:
        start = self._ns(event["ts"], "ts")
        return start, start + self._ns(event["dur"], "dur")

    def _ns(self, value, what: str) -> int:
        """Microseconds as written -> integer ns, from the digits (see kineto_json.to_ns); counts rounded ones."""
        kind = type(value)
        if kind is int:
            return value * 1000
        if kind is Decimal:
            scaled = value.scaleb(3)
            whole = int(scaled)
            if whole == scaled:
                return whole
            self.rounded += 1
            return int(scaled.to_integral_value())
        return to_ns(value, what)  # raises ValueError naming the field

    def _name(self, event) -> str:
        name = event["name"]
        if type(name) is not str:
            raise ValueError(f"name is {type(name).__name__}, not text")
        if len(name) > MAX_NAME_CHARS:
            raise ValueError(f"a name of {len(name):,} characters (more than {MAX_NAME_CHARS:,}): not a name")
        return name

    def _name_id(self, name: str) -> int:
        found = self.kernel_names.get(name)
        if found is None:
            found = self.kernel_names[name] = len(self.kernel_names) + 1
        return found

    # -- categories -----------------------------------------------------------------------------------------
    def _kernel(self, event, cat) -> None:
        start, end = self._span(event)
        if end < start:
            self.dropped["kernels"] += 1
            return
        name = self._name(event)
        name_id = self._name_id(name)
        short_id = self._short.get(name_id)
        if short_id is None:
            short_id = self._short[name_id] = self._name_id(short_kernel_name(name) or name)
        args = event.get("args") or {}
        grid = _dims(args.get("grid"))
        block = _dims(args.get("block"))
        self._push("kernels", (
            _int(args.get("device")), _int(args.get("context")), _int(args.get("stream")),
            _int(args.get("correlation")), start, end, name_id, short_id, *grid, *block,
            _int(args.get("registers per thread")), _int(args.get("shared memory")),
            _float(args.get("blocks per SM")), _float(args.get("warps per SM")),
            _float(args.get("est. achieved occupancy %")),
        ))
        if "Collective name" in args:
            self._collective("kernel", args, None, None, _int(args.get("device")), start, end,
                             _int(args.get("correlation")))

    def _api(self, event, cat) -> None:
        start, end = self._span(event)
        if end < start:
            self.dropped["api_calls"] += 1
            return
        args = event.get("args") or {}
        self._push("api_calls", (_int(event.get("pid")), _int(event.get("tid")), _int(args.get("correlation")),
                                 self._name(event), "driver" if cat == "cuda_driver" else "runtime", start, end))

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

    def _memcpy(self, event, cat) -> None:
        start, end = self._span(event)
        if end < start:
            self.dropped["memcpys"] += 1
            return
        args, ids = self._gpu_fields(event)
        direction, src, dst = self._copy_kind(self._name(event))
        self._push("memcpys", (*ids, start, end, _int(args.get("bytes")), direction, src, dst))

    def _memset(self, event, cat) -> None:
        start, end = self._span(event)
        if end < start:
            self.dropped["memsets"] += 1
            return
        args, ids = self._gpu_fields(event)
        _direction, kind, _dst = self._copy_kind(self._name(event))
        self._push("memsets", (*ids, start, end, _int(args.get("bytes")), kind))

    def _sync(self, event, cat) -> None:
        start, end = self._span(event)
        if end < start:
            self.dropped["syncs"] += 1
            return
        args, ids = self._gpu_fields(event)
        kind = _SYNC_KINDS.get(args.get("cuda_sync_kind") or self._name(event), "unknown")
        self._push("syncs", (*ids, kind, start, end, _int(args.get("wait_on_cuda_event_id"))))

    def _annotation(self, event, cat) -> None:
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

    def _cpu_op(self, event, cat) -> None:
        start, end = self._span(event)
        if end < start:
            self.dropped["cpu_ops"] += 1
            return
        name = self._name(event)
        if name.startswith("ProfilerStep#"):  # some PyTorch versions write the step as an operator
            self._annotation(event, "user_annotation")
        args = event.get("args") or {}
        pid, tid = _int(event.get("pid")), _int(event.get("tid"))
        self._push("cpu_ops", (pid, tid, name, start, end, _int(args.get("External id")),
                               _int(args.get("Sequence number")), _int(args.get("Fwd thread id"))))
        if name == "record_param_comms" and "Collective name" in args:
            self._collective("record_param_comms", args, pid, tid, None, start, end, None)

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


def _reason(exc: BaseException) -> str:
    if isinstance(exc, KeyError):
        return f"no {exc.args[0]!r} field; not a complete PyTorch profiler trace"
    return str(exc)


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
    raise ValueError(f"a number field is {type(value).__name__}: {str(value)[:40]!r}")


def _float(value) -> float | None:
    if value is None:
        return None
    if type(value) in (int, bool) or hasattr(value, "is_finite"):
        return float(value)
    raise ValueError(f"a number field is {type(value).__name__}: {str(value)[:40]!r}")


def _text(value) -> str | None:
    if value is None:
        return None
    text = str(value)
    if len(text) > MAX_NAME_CHARS:
        raise ValueError(f"a text field of {len(text):,} characters (more than {MAX_NAME_CHARS:,})")
    return text


def _dims(value) -> tuple:
    if isinstance(value, list) and len(value) == 3:
        return tuple(_int(v) for v in value)
    if value is None:
        return (None, None, None)
    raise ValueError(f"grid/block is {str(value)[:40]!r}, not [x, y, z]")


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
