"""nsight-advisor: reads what NVIDIA's profilers captured and explains what slows a GPU program down.

Data flows one way: ``ingest`` fills the normalized DuckDB store (``schema``), the rule ``engine`` reads
only that store and produces findings, and ``report`` renders findings. ``cli`` is a thin shell over
these functions, so everything it does can be called from a notebook too.
"""

__version__ = "0.1.0"

#: Bumped whenever the normalized schema changes; cached stores of another version are rebuilt.
SCHEMA_VERSION = 6
