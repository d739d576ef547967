"""``analyze HEAD... --baseline BASE``: the usual report of HEAD with the comparison against BASE as a section.

BASE is analyzed with HEAD's settings (rules, config, ``--set``, window), so their findings match by fingerprint;
the comparison is :func:`nsight_advisor.compare.comparison.compare_results`, rendered into the report by
:func:`nsight_advisor.report.baseline_report.render_with_baseline`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence


def baseline_comparison(head_result, head_paths: Sequence[Path], base_paths: Sequence[Path], *,
                        use_cache: bool = True, progress: bool = False, head_store: Path | None = None,
                        **settings: Any) -> tuple[dict, Any]:
    """The comparison of BASE (analyzed here with ``settings``, the keyword arguments of
    :func:`nsight_advisor.workflow.analyze`; in the cache, never in HEAD's ``--store``) against HEAD's
    ``head_result`` (whose store is ``head_store`` when one was given); returns it and BASE's analysis."""
    from nsight_advisor import workflow
    from nsight_advisor.compare.comparison import compare_results, side_kernels, side_name, waive_kernels
    from nsight_advisor.compare.sides import expand
    from nsight_advisor.engine.config import find_config

    base_paths = expand(base_paths, "BASE")
    base_result = workflow.analyze(base_paths, use_cache=use_cache, progress=progress, **settings)
    base_durations, base_ncu = side_kernels(base_paths, progress=progress)
    head_durations, head_ncu = side_kernels(head_paths, store_path=head_store, progress=progress)
    comparison = compare_results(base_result, head_result, base_durations, head_durations,
                                 base_name=side_name(base_paths), head_name=side_name(head_paths), base_ncu=base_ncu,
                                 head_ncu=head_ncu)
    waive_kernels(comparison, find_config(settings.get("config_path")).waivers)
    return comparison, base_result

