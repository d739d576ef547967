"""Backtraces of host calls in an nsys export: OS runtime calls (OSRT_API with OSRT_CALLCHAINS), CUDA API calls
(CUPTI_ACTIVITY_KIND_RUNTIME.callchainId with CUDA_CALLCHAINS) and CPU samples (COMPOSITE_EVENTS with
SAMPLING_CALLCHAINS, keyed by the sample's id), into ``host_calls`` and ``callchain_frames``.

Both are optional: a capture without them gets one ``capture_missing`` row naming the options that record them."""

from __future__ import annotations

from nsight_advisor.ingest.nsys.catalog import PID_OF, RUNTIME, TID_OF
from nsight_advisor.ingest.nsys.reader import ExportReader

OSRT = "OSRT_API"
OSRT_CALLCHAINS = "OSRT_CALLCHAINS"
CUDA_CALLCHAINS = "CUDA_CALLCHAINS"
SAMPLES = "COMPOSITE_EVENTS"
SAMPLING_CALLCHAINS = "SAMPLING_CALLCHAINS"
#: Exports with more CPU samples than this keep them out of the store: a long sampled run holds tens of millions
#: of frames, and the OS runtime and CUDA backtraces name the source on their own.
MAX_SAMPLES = 500_000
#: The options that record backtraces, for the capture_missing row of a capture without any.
BACKTRACE_OPTIONS = ("nsys profile --trace=osrt --sample=process-tree --backtrace=dwarf (OS runtime calls, CPU samples); "
                     "--cudabacktrace=all (CUDA API calls); --python-backtrace=cuda (Python)")


def read_callchains(reader: ExportReader) -> None:
    """Fill host_calls and callchain_frames from whichever backtrace tables the export holds."""
    found = 0
    if reader.cat.has(OSRT, "callchainId") and reader.cat.has(OSRT_CALLCHAINS, "stackDepth"):
        found += _read(reader, "osrt", OSRT, OSRT_CALLCHAINS)
    if reader.cat.has(RUNTIME, "callchainId") and reader.cat.has(CUDA_CALLCHAINS, "stackDepth"):
        found += _read(reader, "cuda", RUNTIME, CUDA_CALLCHAINS)
    if reader.cat.has(SAMPLES, "globalTid") and reader.cat.has(SAMPLING_CALLCHAINS, "stackDepth"):
        samples = reader.cat.count(SAMPLES) or 0
        if samples > MAX_SAMPLES:
            reader.note("host_calls", samples, f"CPU samples left out: over {MAX_SAMPLES:,} in {SAMPLES}")
        else:
            found += _read(reader, "sample", SAMPLES, SAMPLING_CALLCHAINS)
    if not found:
        reader.missing("backtraces", "no OSRT_CALLCHAINS or CUDA_CALLCHAINS rows: host calls were traced without "
                       "backtraces, so findings cannot name the source functions behind them", BACKTRACE_OPTIONS)


def _read(reader: ExportReader, source: str, calls: str, chains: str) -> int:
    """Copy the calls of ``calls`` that carry a backtrace and the frames of ``chains``; returns the calls copied."""
    c, f = "c", "f"
    if source == "sample":  # an instant, no name; its id is its backtrace's id
        name, end, chain, valid = "NULL", "c.start", "c.id", "c.start IS NOT NULL"
    else:
        name, end, chain, valid = "s.value", 'c."end"', "c.callchainId", reader.valid_rows(c)
    reader.sql(f"""
        INSERT INTO host_calls
        SELECT $cid, $source, {PID_OF.format(col='c.globalTid')}, {TID_OF.format(col='c.globalTid')}, {name},
               c.start, {end}, {end} - c.start, {chain}
        FROM {reader.table(calls)} c
        {"" if source == "sample" else f"LEFT JOIN {reader.strings()} s ON s.id = c.nameId"}
        WHERE {chain} IS NOT NULL AND c.globalTid IS NOT NULL AND {valid}""", {"cid": reader.cid, "source": source})
    unresolved = reader.col(chains, "unresolved", f, "NULL")
    reader.sql(f"""
        INSERT INTO callchain_frames
        SELECT $cid, $source, f.id, f.stackDepth, sym.value, md.value, coalesce({unresolved}, 0) <> 0
        FROM {reader.table(chains)} f
        LEFT JOIN {reader.strings()} sym ON sym.id = f.symbol
        LEFT JOIN {reader.strings()} md ON md.id = f.module""", {"cid": reader.cid, "source": source})
    return int(reader.sql("SELECT count(*) FROM host_calls WHERE capture_id = $cid AND source = $source",
                          {"cid": reader.cid, "source": source}).fetchone()[0])
