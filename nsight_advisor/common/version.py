"""The tool's version and the normalized schema's version (re-exported at the package's top)."""

__version__ = "0.1.0"

#: Bumped whenever the normalized schema changes; cached stores of another version are rebuilt.
SCHEMA_VERSION = 9
