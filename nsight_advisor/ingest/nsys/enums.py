"""Enum codes of Nsight Systems exports, for exports that carry no ``ENUM_*`` tables (nsys 2022.2 and older).

Newer exports store each enum as a table ``(id, name, label)``; these built-in copies hold the same rows
(taken from a 2022.4 export's tables) and are used only where the export has no table of that name.
Values follow CUPTI's enums, which have only grown, never been renumbered.
"""

from __future__ import annotations

#: enum table name -> ((id, symbol, label), ...)
BUILTIN_ENUMS: dict[str, tuple[tuple[int, str, str], ...]] = {
    "ENUM_CUDA_MEMCPY_OPER": (
        (0, "CUDA_MEMCPY_KIND_UNKNOWN", "Unknown"),
        (1, "CUDA_MEMCPY_KIND_HTOD", "Host-to-Device"),
        (2, "CUDA_MEMCPY_KIND_DTOH", "Device-to-Host"),
        (3, "CUDA_MEMCPY_KIND_HTOA", "Host-to-Array"),
        (4, "CUDA_MEMCPY_KIND_ATOH", "Array-to-Host"),
        (5, "CUDA_MEMCPY_KIND_ATOA", "Array-to-Array"),
        (6, "CUDA_MEMCPY_KIND_ATOD", "Array-to-Device"),
        (7, "CUDA_MEMCPY_KIND_DTOA", "Device-to-Array"),
        (8, "CUDA_MEMCPY_KIND_DTOD", "Device-to-Device"),
        (9, "CUDA_MEMCPY_KIND_HTOH", "Host-to-Host"),
        (10, "CUDA_MEMCPY_KIND_PTOP", "Peer-to-Peer"),
        (11, "CUDA_MEMCPY_KIND_UVM_HTOD", "Unified Host-to-Device"),
        (12, "CUDA_MEMCPY_KIND_UVM_DTOH", "Unified Device-to-Host"),
        (13, "CUDA_MEMCPY_KIND_UVM_DTOD", "Unified Device-to-Device"),
    ),
    "ENUM_CUDA_MEM_KIND": (
        (0, "CUDA_MEMOPR_MEMORY_KIND_PAGEABLE", "Pageable"),
        (1, "CUDA_MEMOPR_MEMORY_KIND_PINNED", "Pinned"),
        (2, "CUDA_MEMOPR_MEMORY_KIND_DEVICE", "Device"),
        (3, "CUDA_MEMOPR_MEMORY_KIND_ARRAY", "Array"),
        (4, "CUDA_MEMOPR_MEMORY_KIND_MANAGED", "Managed"),
        (5, "CUDA_MEMOPR_MEMORY_KIND_DEVICE_STATIC", "Device Static"),
        (6, "CUDA_MEMOPR_MEMORY_KIND_MANAGED_STATIC", "Managed Static"),
        (7, "CUDA_MEMOPR_MEMORY_KIND_UNKNOWN", "Unknown"),
    ),
    "ENUM_CUPTI_SYNC_TYPE": (
        (0, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_UNKNOWN", "Unknown"),
        (1, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE", "Event sync"),
        (2, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT", "Stream wait sync"),
        (3, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE", "Stream sync"),
        (4, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE", "Context sync"),
    ),
    "ENUM_CUDA_KERNEL_LAUNCH_TYPE": (
        (0, "CUDA_KERNEL_LAUNCH_TYPE_UNKNOWN", "Unknown"),
        (1, "CUDA_KERNEL_LAUNCH_TYPE_REGULAR", "Regular"),
        (2, "CUDA_KERNEL_LAUNCH_TYPE_COOPERATIVE_SINGLE_DEVICE", "Coop Single Device"),
        (3, "CUDA_KERNEL_LAUNCH_TYPE_COOPERATIVE_MULTI_DEVICE", "Coop Multi Device"),
    ),
    "ENUM_CUDA_UNIF_MEM_MIGRATION": (
        (0, "CUDA_UNIFIED_MEMORY_MIGRATION_CAUSE_UNKNOWN", "Unknown"),
        (1, "CUDA_UNIFIED_MEMORY_MIGRATION_CAUSE_USER", "User prefetch"),
        (2, "CUDA_UNIFIED_MEMORY_MIGRATION_CAUSE_COHERENCE", "Page fault"),
        (3, "CUDA_UNIFIED_MEMORY_MIGRATION_CAUSE_PREFETCH", "Speculative prefetch"),
        (4, "CUDA_UNIFIED_MEMORY_MIGRATION_CAUSE_EVICTION", "Eviction"),
        (5, "CUDA_UNIFIED_MEMORY_MIGRATION_CAUSE_ACCESS_COUNTERS", "Access counters"),
    ),
}

#: Other spellings of the same table in some exports (nsys 2022.x wrote "KRENEL").
ENUM_ALIASES: dict[str, tuple[str, ...]] = {
    "ENUM_CUDA_KERNEL_LAUNCH_TYPE": ("ENUM_CUDA_KRENEL_LAUNCH_TYPE",),
}

#: Symbol prefixes stripped to make the lowercase word labels of the normalized schema.
SYMBOL_PREFIXES: dict[str, str] = {
    "ENUM_CUDA_MEM_KIND": "CUDA_MEMOPR_MEMORY_KIND_",
    "ENUM_CUPTI_SYNC_TYPE": "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_",
    "ENUM_CUDA_KERNEL_LAUNCH_TYPE": "CUDA_KERNEL_LAUNCH_TYPE_",
    "ENUM_CUDA_UNIF_MEM_MIGRATION": "CUDA_UNIFIED_MEMORY_MIGRATION_CAUSE_",
}

#: NVTX_EVENTS.eventType codes (ENUM_NSYS_EVENT_TYPE; identical in every version seen).
NVTX_MARK = 34
NVTX_PUSH_POP = 59
NVTX_START_END = 60
NVTX_DOMAIN_CREATE = 75

#: CUPTI_ACTIVITY_KIND_RUNTIME.eventClass codes (ENUM_NSYS_EVENT_CLASS).
EVENT_CLASS_CUDA_RUNTIME = 0
EVENT_CLASS_CUDA_DRIVER = 1


def word_label(enum: str, symbol: str | None, label: str | None) -> str | None:
    """The normalized lowercase label of one enum value: its symbol without the enum's prefix.

    >>> word_label("ENUM_CUPTI_SYNC_TYPE", "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE", "Stream sync")
    'stream_synchronize'
    """
    prefix = SYMBOL_PREFIXES.get(enum)
    if symbol and prefix and symbol.startswith(prefix):
        return symbol[len(prefix):].lower()
    if label:
        return label.strip().lower().replace(" ", "_").replace("-", "_")
    return None
