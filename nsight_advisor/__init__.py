"""nsight-advisor: reads what NVIDIA's profilers captured and explains what slows a GPU program down.

Data flows one way: ``ingest`` fills the normalized DuckDB store (``schema``), the rule ``engine`` reads
only that store and produces findings, and ``report`` renders findings. The public API joins them::

    import nsight_advisor
    run = nsight_advisor.open("report.sqlite")      # an Analysis (nsight_advisor.api)
    run.findings(); run.accounting(); run.kernels(); run.query("select ...")

``cli`` is a thin shell over that API (docs/api.md).
"""

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # for type checkers and editors; at run time __getattr__ imports the API on first use
    from nsight_advisor.api import Analysis, open  # noqa: F401

from nsight_advisor.common.version import SCHEMA_VERSION, __version__  # noqa: F401 - the package's own

#: The public API (nsight_advisor.api), one name per CLI command besides ``open``/``Analysis``.
_API = ("open", "Analysis", "compare_paths", "comparison_report", "ingest", "describe", "query_text", "list_rules",
        "show_rule", "new_rule", "run_rule_tests", "lint_rules", "whatif", "whatif_text")

__all__ = [*_API, "__version__", "SCHEMA_VERSION"]


def __getattr__(name: str):
    # The API is imported on first use: `import nsight_advisor` stays cheap for the CLI and for workers.
    if name in _API:
        from nsight_advisor import api

        return getattr(api, name)
    raise AttributeError(f"module 'nsight_advisor' has no attribute {name!r}")
