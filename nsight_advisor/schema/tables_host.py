"""Host calls that carry a backtrace, and the frames of those backtraces (nsys OSRT_CALLCHAINS and
CUDA_CALLCHAINS). Both stay empty when the capture recorded no backtraces: ``capture_missing`` then says which
``nsys profile`` option records them."""

from __future__ import annotations

from nsight_advisor.schema.columns import CAPTURE_ID, TIMES, Table, cols

#: Where a backtrace comes from: an OS runtime call (OSRT_API), a CUDA API call (CUPTI_ACTIVITY_KIND_RUNTIME) or a
#: CPU sample (COMPOSITE_EVENTS).
CALLCHAIN_SOURCES = "ENUM('osrt', 'cuda', 'sample')"

HOST_TABLES: tuple[Table, ...] = (
    Table(
        "host_calls",
        "Host calls and CPU samples recorded with a backtrace: OS runtime calls (OSRT_API, `nsys profile "
        "--trace=osrt --backtrace=dwarf`), CUDA API calls (`--cudabacktrace`) and CPU samples (`--sample`), one "
        "row each; the frames in callchain_frames.",
        cols(
            CAPTURE_ID,
            ("source", CALLCHAIN_SOURCES, "osrt (an OS runtime call), cuda (a CUDA API call) or sample (a CPU sample)."),
            ("pid", "BIGINT", "Process id, decoded from globalTid."),
            ("tid", "BIGINT", "Thread id, decoded from globalTid."),
            ("name", "VARCHAR", "Function called, as recorded (ioctl, cudaMemcpy_v3020); NULL for a sample."),
            *TIMES,  # a sample is an instant: end_ns = start_ns
            ("callchain_id", "BIGINT", "The call's backtrace: callchain_frames rows with this id and source."),
        ),
    ),
    Table(
        "callchain_frames",
        "The frames of each backtrace in host_calls, innermost first.",
        cols(
            CAPTURE_ID,
            ("source", CALLCHAIN_SOURCES, "osrt (OSRT_CALLCHAINS), cuda (CUDA_CALLCHAINS) or sample (SAMPLING_CALLCHAINS): ids are per source."),
            ("callchain_id", "BIGINT", "Backtrace id (host_calls.callchain_id)."),
            ("depth", "INTEGER", "Position in the backtrace: 0 is the innermost frame (the function called)."),
            ("symbol", "VARCHAR", "Function of the frame, demangled as recorded; a hex address when unresolved."),
            ("module", "VARCHAR", "Binary or shared library the frame lies in, as a path."),
            ("unresolved", "BOOLEAN", "True when the profiler could not resolve the symbol."),
        ),
    ),
)

__all__ = ["HOST_TABLES", "CALLCHAIN_SOURCES"]
