"""The tables an ingest may leave out when the caller says nothing will read them (recorded in ``capture_deferred``).

``cpu_ops`` exists in PyTorch profiler traces only (an nsys export has nothing to defer there).
"""

DEFERRABLE = ("nvtx_ranges", "gpu_metrics", "cpu_ops")
