"""Display strings for where findings lie in the program: each finding's NVTX regions, and each capture's GPU time
by NVTX path with the findings that concern each path (the engine computed both: nsight_advisor.engine.regions)."""

from __future__ import annotations

from typing import Any, Mapping

from nsight_advisor.report.formatting import clip, fmt_ns, fmt_pct

#: Regions shown per finding; the JSON has them all.
FINDING_REGIONS = 6
#: Paths shown per capture in the HTML breakdown.
BREAKDOWN_ROWS = 15
PATH_CHARS = 200


def finding_regions(finding: Mapping[str, Any]) -> list[dict[str, str]]:
    """A finding's regions as the report shows them: path, share of its impact, and that impact."""
    out = []
    for region in list(finding.get("regions") or [])[:FINDING_REGIONS]:
        if not isinstance(region, Mapping):
            continue
        out.append({"path": clip(region.get("path"), PATH_CHARS), "full_path": clip(region.get("path"), 2000),
                    "share": fmt_pct(region.get("share_pct"), 0), "impact": fmt_ns(region.get("impact_ns"))})
    return out


def where_line(finding: Mapping[str, Any], limit: int = 3) -> str:
    """'path 41%, path 20%, (other) 39%': the largest regions of a finding, for one line of text."""
    regions = finding.get("regions") or []
    return ", ".join(f"{r['path']} {r['share']}" for r in regions[:limit])


def nvtx_breakdown(captures: list[Mapping[str, Any]], findings: list[Mapping[str, Any]],
                   names: Mapping[Any, str]) -> list[dict[str, Any]]:
    """Per capture with NVTX ranges: its GPU time by path, and under each path the shown findings with a share there."""
    out = []
    for cap in captures:
        paths = [p for p in (cap.get("nvtx_paths") or []) if isinstance(p, Mapping)]
        if not paths:
            continue
        cid = cap.get("capture_id")
        rows = []
        for p in paths[:BREAKDOWN_ROWS + 2]:
            path = p.get("path")
            concern = [{"n": f["n"], "anchor": f["anchor"], "title": f["title"], "share": r["share"]}
                       for f in findings if f.get("capture_id") == cid
                       for r in f.get("regions") or [] if r["full_path"] == clip(path, 2000)]
            rows.append({"path": clip(path, PATH_CHARS), "full_path": clip(path, 2000), "gpu": fmt_ns(p.get("gpu_ns")),
                         "share": fmt_pct(p.get("share_pct")), "ops": f"{int(p.get('ops') or 0):,}",
                         "findings": concern})
        out.append({"capture": names.get(cid, ""), "rows": rows})
    return out
