"""The self-contained HTML report: one file, inline CSS/SVG, a hashed inline script, a strict CSP.

The page loads nothing from anywhere: the Content-Security-Policy allows only our own inline style and
script (by hash) and ``data:`` images, so even a name that slipped through escaping could not load or
run anything.
"""

from __future__ import annotations

import base64
import hashlib
from functools import lru_cache
from typing import Any

import jinja2

from nsight_advisor.report import charts, rank_chart
from nsight_advisor.report.job_view import heat_strip, job_entries
from nsight_advisor.report.data import (
    HTML_LIMITS, HTML_MAX_BYTES, HTML_TIGHT_LIMITS, Limits, clip, fmt_ns, fmt_pct, prepare,
)
from nsight_advisor.report.formatting import tool_version
from nsight_advisor.common.resources import templates_dir

MAX_CAPTURES_SHOWN = 12
MAX_JOBS_SHOWN = 4
MAX_UTILIZATION_CHARTS = 4
GLANCE_ROWS = 6
TOP_KERNEL_ROWS = 8
ROOF_LABELS = 8
OPEN_EVIDENCE = 3
BAR_COLORS = {"error": "#b42318", "warning": "#d98a00", "info": "#1f5fa8"}


class _Environment(jinja2.Environment):
    """Jinja's environment, with ``x.name`` on a plain dict looked up as the key first.

    The report's data is dicts, and Jinja's ``getattr`` tries the attribute first: for a dict that fails and raises,
    then the key is looked up. The template reads about 30,000 such names for the 8 DLRM ranks: 20 ms of a 80 ms
    render. A dict has no attribute but its methods, so for any other name the result is the same."""

    def getattr(self, obj: Any, attribute: str) -> Any:
        if type(obj) is dict and attribute not in _DICT_ATTRIBUTES:
            try:
                return obj[attribute]
            except KeyError:
                pass  # Jinja's own lookup makes the undefined value
        return super().getattr(obj, attribute)


_DICT_ATTRIBUTES = frozenset(dir(dict))


@lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    return _Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        bytecode_cache=_bytecode_cache(),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=False,
        lstrip_blocks=False,
    )


def _bytecode_cache() -> jinja2.BytecodeCache | None:
    """The templates compiled once, in the cache's support folder: compiling them took 0.25 s of every run.
    Jinja checks each against its source, so an edited template is compiled again."""
    from nsight_advisor.common.run_folder import support_dir

    folder = support_dir() / "templates"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return _AllTemplatesCache(str(folder))


class _AllTemplatesCache(jinja2.FileSystemBytecodeCache):
    """The bytecode cache that, when it stores a template just compiled (a new machine, or an edited template),
    compiles and stores the others too: a job's report and a comparison use templates a single capture's report
    does not, and until a run had needed them each run of those compiled them again (0.05 s of the 8 DLRM ranks'
    cold analyze after a single capture's first run had made the support folder)."""

    _filling = False

    def set_bucket(self, bucket: jinja2.bccache.Bucket) -> None:
        super().set_bucket(bucket)
        if self._filling:
            return
        self._filling = True
        try:
            env = bucket.environment
            for name in env.list_templates(extensions=["j2"]):
                env.get_template(name)  # from this cache when stored, else compiled and stored
        except (OSError, jinja2.TemplateError):
            pass  # a template that cannot be compiled fails where it is used, not here
        finally:
            self._filling = False


def _asset(name: str) -> str:
    return (templates_dir() / name).read_text(encoding="utf-8")


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode() + "'"


def content_security_policy(css: str, script: str) -> str:
    """The page's CSP: nothing from the network, only our own inline style and script (pinned by hash)."""
    return (f"default-src 'none'; style-src {_sha256(css)}; script-src {_sha256(script)}; img-src data:; "
            "font-src 'none'; connect-src 'none'; media-src 'none'; object-src 'none'; frame-src 'none'; "
            "worker-src 'none'; manifest-src 'none'; base-uri 'none'; form-action 'none'")


def render_html(result: Any) -> str:
    """The HTML report of ``result``; re-rendered with tighter limits if it would exceed the size budget."""
    text = _render(result, HTML_LIMITS)
    if len(text.encode("utf-8")) > HTML_MAX_BYTES:
        text = _render(result, HTML_TIGHT_LIMITS)
    return text


def _capture_view(cap: dict[str, Any]) -> dict[str, Any]:
    ncu = not cap.get("kernel_count") and cap.get("ncu_kernel_count")
    gpus = cap.get("gpus") or []
    return {
        "name": clip(cap.get("source_name") or f"capture {cap.get('capture_id')}", 160),
        "tool": clip(cap.get("tool"), 20),
        "tool_version": clip(tool_version(cap.get("tool_version")), 40),
        "format": clip(cap.get("format"), 30),
        "wall": fmt_ns(cap["wall_ns"]) if cap.get("wall_ns") and not ncu else "",
        "busy_pct": fmt_pct(cap.get("gpu_busy_pct"), 0) if cap.get("gpu_busy_pct") is not None else "",
        "active_devices": int(cap.get("active_devices") or 0),
        "kernels": f"{int(cap.get('ncu_kernel_count') if ncu else cap.get('kernel_count') or 0):,}"
        if (cap.get("kernel_count") or cap.get("ncu_kernel_count")) else "",
        "kernels_label": "kernels profiled" if ncu else "kernel launches",
        "kernel_time": fmt_ns(cap.get("kernel_time_ns")) if cap.get("kernel_time_ns") else "",
        "gpu_count": int(cap.get("gpu_count") or len(gpus)),
        "gpus": [{"name": clip(g.get("name") or "unknown GPU", 80), "sm_count": g.get("sm_count"),
                  "compute_capability": clip(g.get("compute_capability"), 10), "count": int(g.get("count") or 1)}
                 for g in gpus[:6]],
        "gpus_left_out": max(0, len(gpus) - 6),
        "program": _program_view(cap),
        "missing": [{"data": clip(m.get("data"), 100), "capture_option": clip(m.get("capture_option"), 160)}
                    for m in (cap.get("missing") or [])[:12]],
        "missing_total": len(cap.get("missing") or []),
        "notes": [{"data": clip(n.get("data"), 100), "rows": n.get("rows"), "note": clip(n.get("note"), 300)}
                  for n in (cap.get("ingest_notes") or [])[:12]],
        "gpu_notes": [clip(n, 300) for n in (cap.get("gpu_notes") or [])[:4]],
        "partition": charts.partition_bars(cap.get("accounting")),
    }


_STACK_LABELS = {"pytorch": "PyTorch", "jax": "JAX/XLA", "tensorflow": "TensorFlow", "tensorrt": "TensorRT",
                 "openacc-openmp": "OpenACC/OpenMP offload", "cuda-fortran": "CUDA Fortran", "julia": "Julia (CUDA.jl)",
                 "cupy-numba": "CuPy/Numba", "triton": "Triton", "cuda-cpp": "CUDA C/C++"}


def _program_view(cap: dict[str, Any]) -> dict[str, Any] | None:
    """The program's stack (with its evidence) and what its GPUs' tensor cores take, for the header."""
    program = cap.get("program") or {}
    stack = program.get("stack")
    if not stack:
        return None
    precisions = [p for p in (program.get("tensor_core_precisions") or []) if isinstance(p, str)]
    dram = program.get("dram_peak_bytes_per_s")
    dram_text = f"{dram / 1e9:,.0f} GB/s" if isinstance(dram, (int, float)) and dram > 0 else ""
    return {"stack": clip(_STACK_LABELS.get(stack, stack), 60), "evidence": clip(program.get("evidence"), 300),
            "tensor_cores": clip(", ".join(p or "none" for p in precisions), 120), "dram": dram_text}


def _captures(r: dict[str, Any]) -> list[dict[str, Any]]:
    """Header captures: the summary's facts where present, else the contract's capture rows."""
    by_id: dict[Any, dict[str, Any]] = {}
    for c in r["captures"]:
        by_id[c.get("capture_id")] = dict(c)
    for c in (r["summary"].get("captures") or []):
        by_id.setdefault(c.get("capture_id"), {}).update({k: v for k, v in c.items() if v is not None})
    return list(by_id.values())


def _combined_view(combined: Any) -> dict[str, Any] | None:
    """Display strings for the view across captures (``summary["combined"]``); None for a single capture."""
    if not isinstance(combined, dict) or not combined.get("captures"):
        return None
    count = combined.get("capture_count") or len(combined["captures"])
    names = {c.get("capture_id"): clip(c.get("source_name") or f"capture {c.get('capture_id')}", 80)
             for c in combined["captures"]}
    slow = combined.get("slowest") or {}
    busy = combined.get("least_busy") or {}
    shared = [m for m in combined.get("findings") or [] if len(m.get("capture_ids") or []) > 1][:20]
    return {
        "count": count,
        "slowest": names.get(slow.get("capture_id")) if slow else None,
        "slowest_wall": fmt_ns(slow.get("wall_ns")),
        "behind": fmt_ns(slow.get("behind_fastest_ns")) if slow.get("behind_fastest_ns") else None,
        "behind_pct": fmt_pct(slow.get("behind_fastest_pct"), 0),
        "least_busy": names.get(busy.get("capture_id")) if busy.get("gpu_busy_pct") is not None else None,
        "least_busy_pct": fmt_pct(busy.get("gpu_busy_pct"), 0),
        "shared": [{"title": clip(m.get("title"), 200), "rule": f"{m.get('rule_id')} {m.get('rule_name')}",
                    "captures": f"{len(m['capture_ids'])} of {count}", "impact": fmt_ns(m.get("impact_ns_total")),
                    "worst": names.get(m.get("worst_capture_id"), "")} for m in shared],
    }


def _render(result: Any, limits: Limits) -> str:
    from nsight_advisor.report.graph_view import graph_candidates_view
    from nsight_advisor.report.regions_view import nvtx_breakdown

    r = prepare(result, limits)
    css, script = _asset("report.css"), _asset("report.js")
    caps = _captures(r)
    names = {c.get("capture_id"): clip(c.get("source_name") or "", 80) for c in caps}
    capture_views = [_capture_view(c) for c in caps[:MAX_CAPTURES_SHOWN]]
    multi = len(caps) > 1

    top_pct = max((f["impact_pct"] for f in r["findings"]), default=0.0) or 1.0
    for f in r["findings"]:
        f["bar_w"] = round(max(2.0, 70.0 * f["impact_pct"] / max(top_pct, 1e-9)), 1) if f["impact_pct"] else 0

    summary = r["summary"]
    util = []
    for s in (summary.get("utilization") or [])[:MAX_UTILIZATION_CHARTS]:
        chart = charts.utilization_area(s)
        if chart:
            util.append({"name": names.get(s.get("capture_id"), ""), "chart": chart})
    top_kernels = []
    all_top = summary.get("top_kernels") or []
    for k in all_top[:TOP_KERNEL_ROWS]:
        top_kernels.append({
            "capture": names.get(k.get("capture_id"), ""),
            "name": clip(k.get("name"), 110), "full_name": clip(k.get("name"), 1000),
            "launches": f"{int(k.get('launches') or 0):,}", "total": fmt_ns(k.get("total_ns")),
            "avg": fmt_ns(k.get("avg_ns")), "pct": fmt_pct(k.get("pct_of_kernel_time")),
        })

    total = r["findings_total"]
    if total:
        top = r["findings"][0]
        headline = f"{total} finding{'s' if total != 1 else ''}"
        if r["ranking"] and top["saving"]:  # ranked by what the fixes save: the first saves the most
            headline += f"; first: {top['title']} (saves {top['saving']} of the {top['impact'] or '0'} it claims)"
        elif top["impact"]:
            headline += f"; the costliest: {top['title']} ({top['impact']}"
            headline += f", {top['impact_pct_text']} of {top['pct_basis']})" if top["impact_pct_text"] else ")"
        else:
            headline += f"; first: {top['title']}"
    else:
        ran = r["outcome_counts"]["clean"]
        headline = f"No findings: {ran} rule{'s' if ran != 1 else ''} found nothing to fix"
        if r["outcome_counts"]["skipped"]:
            headline += f", {r['outcome_counts']['skipped']} could not run on this data"
    headline = clip(headline, 300)
    cap_label = ", ".join(v["name"] for v in capture_views[:3]) or "no capture"
    title = clip(f"{r['tool']['name']}: {total} finding{'s' if total != 1 else ''} · {cap_label}", 200)

    job = job_entries(r) if r.get("job_findings") else []
    if job:  # a job opens with its grouped findings: the headline names the costliest entry, not one rank's
        top = job[0]
        headline = clip(f"{total} findings in {len(caps)} captures, {len(r['job_findings'])} across the ranks; "
                        f"the costliest: {top['title']} ({top['total']} over {top['ranks']} ranks)", 300)
    template = _environment().get_template("report.html.j2")
    return template.render(
        job=job, job_left_out=max(0, len(r.get("job_findings") or []) - len(job)),
        job_count=len(caps), strip=heat_strip(caps, summary) if job else None,
        combined=_combined_view(summary.get("combined")),
        ranks=[v for v in map(rank_chart.rank_view, (summary.get("ranks") or [])[:MAX_JOBS_SHOWN]) if v],
        nvtx_breakdown=nvtx_breakdown(r["captures"], r["findings"], names),
        graph_candidates=graph_candidates_view(summary, names),
        r=r, css=css, script=script, csp=content_security_policy(css, script), title=title, headline=headline,
        captures=capture_views, captures_left_out=max(0, len(caps) - MAX_CAPTURES_SHOWN),
        header_captures=capture_views[:4], header_captures_left_out=max(0, len(capture_views) - 4),
        multi_capture=multi, glance_rows=GLANCE_ROWS, open_evidence=OPEN_EVIDENCE, bar_colors=BAR_COLORS,
        categories=charts.category_bars(summary.get("categories") or []),
        utilization=util, utilization_left_out=max(0, len(summary.get("utilization") or []) - MAX_UTILIZATION_CHARTS),
        summary_errors=[clip(e, 300) for e in (summary.get("errors") or [])[:5]],
        roof=charts.roofline(summary.get("roofline")), roof_labels=ROOF_LABELS, top_kernels=top_kernels,
        top_kernels_left_out=max(0, len(all_top) - len(top_kernels)),
        top_kernels_note=("Profiled kernels by measured duration (Nsight Compute replays each kernel, so these are not "
                          "a timeline)." if not any(c.get("kernel_count") for c in caps) else
                          "Kernels grouped by name; share of all kernel time."),
    )
