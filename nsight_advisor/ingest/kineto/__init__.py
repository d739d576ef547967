"""PyTorch profiler (Kineto) traces: stream a ``.json``/``.json.gz`` trace's events, with a bounded read of its
header, into the normalized tables."""
