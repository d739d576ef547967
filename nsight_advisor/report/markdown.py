"""``--format md``: GitHub-flavoured Markdown short enough for a pull-request comment (at most 65,536 characters).

When the full text would be longer, evidence tables shrink first, then findings lose their detail
sections, and the text says what it left out.
"""

from __future__ import annotations

import re
from typing import Any

from nsight_advisor.report.data import Limits, clip, fmt_ns, fmt_pct, prepare
from nsight_advisor.report.formatting import tool_version
from nsight_advisor.report.charts import unclaimed_idle_text
from nsight_advisor.report.graph_view import graph_candidates_markdown, graph_candidates_view
from nsight_advisor.report.job_view import job_entries
from nsight_advisor.report.shared_fix_view import shared_fix_text

MAX_CHARS = 65_536
SEVERITY_MARK = {"error": "🔴 error", "warning": "🟠 warning", "info": "🔵 info"}
# Escaping '[' and ']' is enough to stop links and images; '(' and ')' stay readable.
_SPECIAL = re.compile(r"([\\`*_\[\]<>#|~])")
_LEVELS = (
    Limits(findings=100, evidence_rows=10, evidence_columns=8, cell_chars=120, text_chars=1500),
    Limits(findings=100, evidence_rows=3, evidence_columns=6, cell_chars=80, text_chars=800),
    Limits(findings=100, evidence_rows=0, evidence_columns=0, cell_chars=60, text_chars=500),
)


def md_escape(text: Any) -> str:
    """``text`` safe as Markdown inline text: no markup, no raw HTML, one line."""
    s = "" if text is None else str(text)
    s = s.replace("&", "&amp;").replace("\r", " ").replace("\n", " ")
    s = _SPECIAL.sub(lambda m: "&lt;" if m.group(1) == "<" else "&gt;" if m.group(1) == ">" else "\\" + m.group(1), s)
    return s


def md_code(text: Any) -> str:
    """``text`` for inside a code span: backticks and line breaks removed (nothing else is markup there)."""
    return ("" if text is None else str(text)).replace("`", "'").replace("\r", " ").replace("\n", " ")


def render_markdown(result: Any) -> str:
    """The analysis as GitHub-flavoured Markdown of at most MAX_CHARS characters."""
    for i, limits in enumerate(_LEVELS):
        text = _render(prepare(result, limits), details=True, note=i > 0)
        if len(text) <= MAX_CHARS:
            return text
    r = prepare(result, _LEVELS[-1])
    text = _render(r, details=False, note=True)
    if len(text) <= MAX_CHARS:
        return text
    note = "\n\n> **Truncated**: this report was cut to fit 65,536 characters; `--format json` has everything.\n"
    cut = text[: MAX_CHARS - len(note)]
    cut = cut[: cut.rfind("\n")] if "\n" in cut else cut
    return cut + note


def _render(r: dict[str, Any], *, details: bool, note: bool) -> str:
    out: list[str] = []
    counts = r["severity_counts"]
    parts = [f"{counts[s]} {s}{'s' if counts[s] != 1 and s != 'info' else ''}" for s in ("error", "warning", "info")
             if counts[s]]
    total = r["findings_total"]
    out.append(f"## {md_escape(r['tool']['name'])}: {total} finding{'s' if total != 1 else ''}"
               + (f" ({', '.join(parts)})" if parts else ""))
    out.append("")
    summary_caps = {c.get("capture_id"): c for c in (r["summary"].get("captures") or [])}
    for c in r["captures"][:12]:
        s = {**c, **{k: v for k, v in summary_caps.get(c.get("capture_id"), {}).items() if v is not None}}
        facts = [f"{md_escape(s.get('tool'))} {md_escape(tool_version(s.get('tool_version')))}".strip()]
        gpus = s.get("gpus") or []
        if gpus:
            facts.append("; ".join(
                f"{str(g.get('count')) + '× ' if (g.get('count') or 1) > 1 else ''}{md_escape(clip(g.get('name') or 'unknown GPU', 60))}"
                + (f" ({g.get('sm_count')} SMs)" if g.get("sm_count") else "") for g in gpus[:4]))
        program = s.get("program") or {}
        if program.get("stack") and program.get("stack") != "unknown":
            facts.append(f"program: {md_escape(clip(program.get('stack'), 40))}")
        if s.get("wall_ns") or s.get("duration_ns"):
            facts.append(f"wall {fmt_ns(s.get('wall_ns') or s.get('duration_ns'))}")
        if s.get("gpu_busy_pct") is not None:
            facts.append(f"GPU busy {fmt_pct(s.get('gpu_busy_pct'), 0)}")
        name = md_escape(clip(s.get("source_name") or f"capture {s.get('capture_id')}", 120))
        out.append(f"- **{name}**: " + ", ".join(f for f in facts if f))
        out.extend(_partition_lines(c.get("accounting")))
        for note in s.get("ingest_notes") or []:  # what a range-profiler trace holds instead of a timeline
            if str(note.get("note") or "").startswith("CUPTI range-profiler"):
                out.append(f"  - {md_escape(clip(note.get('note'), 300))}")
        backtraces = next((m for m in s.get("missing") or [] if m.get("data") == "backtraces"), None)
        if backtraces:  # once per capture: no finding can name its source functions
            out.append(f"  - No backtraces recorded, so findings name no source functions: `{md_code(backtraces.get('capture_option'))}`")
    if len(r["captures"]) > 12:
        out.append(f"- … and {len(r['captures']) - 12} more captures")
    out.append("")
    job = job_entries(r, max_rows=10 if details else 4) if r.get("job_findings") else []
    out.extend(_combined(r["summary"].get("combined"), shared=not job))
    for ranks in (r["summary"].get("ranks") or [])[:4]:
        out.extend(_ranks(ranks))
    names = {c.get("capture_id"): clip(c.get("source_name") or "", 80) for c in r["captures"]}
    out.extend(graph_candidates_markdown(graph_candidates_view(r["summary"], names), md_escape))
    saved = bool(r.get("ranking"))  # the steps were replayed: what each fix saves, and the path's share
    if job:  # a job: each rule (and subject) once, its ranks inside; the per-rank findings stay in the JSON
        out.extend(_job(job, r, details))
    elif r["findings"]:
        if saved:
            out += [f"_{md_escape(r['ranking'])}_", ""]
        every = saved and any(f.get("saving_all_ranks") for f in r["findings"])  # a rule on several ranks or GPUs
        out.append("| severity | finding | impact | share |" + (" saving | on critical path |" if saved else "")
                   + (" saving, every rank |" if every else "") + " rule |")
        out.append("|---|---|--:|--:|" + ("--:|--:|" if saved else "") + ("--:|" if every else "") + "---|")
        for f in r["findings"]:
            where = f" (GPU {f['device_id']})" if isinstance(f.get("device_id"), int) else ""
            extra = f" {f['saving'] or '–'} | {f['critical_path'] or '–'} |" if saved else ""
            extra += f" {f.get('saving_all_ranks') or '–'} |" if every else ""
            out.append(f"| {SEVERITY_MARK[f['severity']]} | {md_escape(f['title'])}{where} | {f['impact'] or '–'} | "
                       f"{f['impact_pct_text'] or '–'} |{extra} `{md_code(f['rule_id'])}` {md_escape(f['rule_name'])} |")
        if r["findings_left_out"]:
            out.append("")
            out.append(f"_{r['findings_left_out']} more findings with smaller impact left out; `--format json` lists them all._")
    else:
        out.append("No rule found a problem.")
    out.append("")
    if job:
        pass
    elif details:
        for f in r["findings"]:
            out.extend(_finding(f))
    elif r["findings"]:
        out.append("_Finding details left out to fit a pull-request comment; see the HTML or JSON report._")
        out.append("")
    oc = r["outcome_counts"]
    out.append(f"### Rule outcomes: {oc['findings']} with findings, {oc['clean']} clean, {oc['skipped']} skipped, "
               f"{oc['errored']} errored")
    out.append("")
    for o in r["outcomes"]:
        if o["status"] in ("skipped", "errored"):
            line = f"- **{o['status']}** `{md_code(o['rule_id'])}` {md_escape(o['rule_name'])}: {md_escape(clip(o['reason'], 300))}"
            if o["capture_option"]:
                line += f" (capture with `{md_code(o['capture_option'])}`)"
            out.append(line)
    if note:
        out.append("")
        out.append("_Evidence tables were shortened to fit a pull-request comment (65,536 characters); "
                   "`--format json` has every row._")
    return "\n".join(out).rstrip() + "\n"


def _ranks(job: Any) -> list[str]:
    """A distributed job in a few lines: who arrives last, who waits longest, the clock correction applied."""
    ranks = [r for r in (job.get("ranks") or []) if isinstance(r, dict)] if isinstance(job, dict) else []
    if not ranks:
        return []
    last = max(ranks, key=lambda r: (r.get("times_last") or 0, -(r.get("rank") or 0)))
    waiter = max(ranks, key=lambda r: (r.get("wait_ns") or 0, -(r.get("rank") or 0)))
    clock = job.get("clock") or {}
    out = [f"### {len(ranks)} ranks ({md_escape(clip(job.get('job'), 60))}): "
           f"{int(job.get('matched_collectives') or 0)} collectives matched", ""]
    out.append(f"- Arrives last most often: rank {last.get('rank')} ({last.get('times_last')} of "
               f"{last.get('collectives')} collectives)")
    out.append(f"- Waits longest for late ranks: rank {waiter.get('rank')}, {fmt_ns(waiter.get('wait_ns'))} in all")
    if clock.get("corrected_captures"):
        out.append(f"- Clocks aligned on the collectives' ends: {clock['corrected_captures']} capture(s) corrected, "
                   f"by up to {fmt_ns(clock.get('max_correction_ns'))}")
    out.append("")
    return out


def _partition_lines(accounting: Any, limit: int = 4) -> list[str]:
    """One line per device: its analysis window as kernel / comm / copy / memset / idle by cause (docs/impact.md)."""
    lines = []
    for a in (accounting or [])[:limit]:
        window = float(a.get("window_end_ns", 0)) - float(a.get("window_start_ns", 0))
        if window <= 0:
            continue
        parts = [(label, a.get(f"{label}_ns") or 0) for label in ("kernel", "comm", "copy", "memset")]
        parts += [(f"idle {cause}", ns) for cause, ns in sorted((a.get("idle_by_cause") or {}).items(),
                                                                 key=lambda kv: -kv[1])]
        shown = ", ".join(f"{label} {fmt_pct(100.0 * ns / window)}" for label, ns in parts if ns)
        device = "host" if a.get("device_id") is None else f"GPU {a.get('device_id')}"
        unclaimed = unclaimed_idle_text(a)
        lines.append(f"  - {device}, window {fmt_ns(window)}: {shown}" + (f"; **{unclaimed}**" if unclaimed else ""))
    return lines


def _combined(c: Any, shared: bool = True) -> list[str]:
    """The view across captures (slowest capture, findings several captures share unless ``shared`` is false: a
    job's grouped findings say it); nothing for one capture."""
    if not isinstance(c, dict) or not c.get("captures"):
        return []
    count = c.get("capture_count") or len(c["captures"])
    names = {x.get("capture_id"): md_escape(clip(x.get("source_name") or f"capture {x.get('capture_id')}", 80))
             for x in c["captures"]}
    out = [f"### Across {count} captures", ""]
    slow = c.get("slowest") or {}
    if slow:
        line = f"- Slowest: **{names.get(slow.get('capture_id'), '?')}**, wall {fmt_ns(slow.get('wall_ns'))}"
        if slow.get("behind_fastest_ns"):
            line += (f", {fmt_ns(slow['behind_fastest_ns'])} ({fmt_pct(slow.get('behind_fastest_pct'), 0)}) "
                     "behind the fastest")
        out.append(line)
    busy = c.get("least_busy") or {}
    if busy.get("gpu_busy_pct") is not None:
        out.append(f"- GPUs least busy: **{names.get(busy.get('capture_id'), '?')}** "
                   f"({fmt_pct(busy['gpu_busy_pct'], 0)} busy)")
    shared = [m for m in c.get("findings") or [] if len(m.get("capture_ids") or []) > 1][:20] if shared else []
    if shared:
        out += ["", "| finding in several captures | captures | impact, total | worst in |", "|---|--:|--:|---|"]
        for m in shared:
            out.append(f"| {md_escape(clip(m.get('title'), 200))} (`{md_code(m.get('rule_id'))}`) "
                       f"| {len(m['capture_ids'])} of {count} | {fmt_ns(m.get('impact_ns_total'))} "
                       f"| {names.get(m.get('worst_capture_id'), '')} |")
    out.append("")
    return out


def _job(job: list[dict[str, Any]], r: dict[str, Any], details: bool) -> list[str]:
    """The job's findings ranked, each rule (and subject) once; per entry a table of the ranks it touches."""
    saved = any(e.get("saving") for e in job)
    out = ["| severity | finding | ranks | worst rank | spread (min / median / max) | total |"
           + (" saving, all ranks |" if saved else "") + " rule |",
           "|---|---|--:|---|--:|--:|" + ("--:|" if saved else "") + "---|"]
    for e in job:
        subject = f" · {md_escape(e['subject'])}" if e["subject"] else ""
        out.append(f"| {SEVERITY_MARK.get(e['severity'], e['severity'])} | {md_escape(e['title'])}{subject} "
                   f"| {e['ranks']} | {e['worst']}: {e['worst_impact']} | {e['spread']} | {e['total']} "
                   + (f"| {e.get('saving') or '–'} " if saved else "")
                   + f"| `{md_code(e['rule_id'])}` {md_escape(e['rule_name'])} |")
    left = len(r.get("job_findings") or []) - len(job)
    if left > 0:
        out += ["", f"_{left} more entries left out; `--format json` lists them all._"]
    out += ["", f"_{r['findings_total']} per-rank findings grouped into {len(r.get('job_findings') or [])} entries; "
            "each is in `findings[]` of `--format json`, and in the HTML report._", ""]
    if not details:
        return out
    cards = {f["n"]: f for f in r["findings"]}
    for e in job:
        out.append(f"### {e['n']}. {SEVERITY_MARK.get(e['severity'], e['severity'])}: {md_escape(e['title'])}")
        out.append("")
        worst = cards.get(e["card"])
        if worst is not None:  # the entry's highest-ranked finding speaks for it: its message, fix and why
            out.append(f"Worst at {e['worst']}: {md_escape(worst['message'])}")
            if worst["fix"]:
                out += ["", f"**Fix:** {md_escape(worst['fix'])}"]
        out += ["", f"<details><summary>{e['ranks']} ranks</summary>", "",
                "| rank | capture | impact | share |", "|---|---|--:|--:|"]
        for row in e["rows"]:
            out.append(f"| {row['rank']} | {md_escape(row['source'])} | {row['impact']} | {row['share']} |")
        if e["rows_left_out"]:
            out += ["", f"_{e['rows_left_out']} more ranks left out._"]
        out += ["", "</details>", ""]
        rule = md_code(e["rule_id"])
        out += [f"Rule `{rule}` {md_escape(e['rule_name'])}: silence with `--ignore {rule}`", ""]
    return out


def _finding(f: dict[str, Any]) -> list[str]:
    out = [f"### {f['n']}. {SEVERITY_MARK[f['severity']]}: {md_escape(f['title'])}", ""]
    if f.get("waiver"):
        out += [f"*{md_escape(f['waiver'])}*", ""]
    impact = ""
    if f["impact"]:
        impact = f" Costs **{f['impact']}**" + (f" ({f['impact_pct_text']} of {f['pct_basis']})." if f["impact_pct_text"] else ".")
    if f.get("saving"):
        impact += f" Fixed, the steps would be **{f['saving']}** shorter (replayed)."
        if f.get("saving_shared"):
            impact += (" That is more than it costs: other findings share the time it claims, and each costs its "
                       "share, while its fix alone takes off its own estimate.")
    if f.get("shared_fix"):
        impact += shared_fix_text(f["shared_fix"], md_escape)
    if f.get("critical_path"):
        impact += f" Its operations hold {f['critical_path']} of the steps' critical path."
    if f.get("saving_all_ranks"):
        impact += f" Fixed on every rank or GPU it fires on, the steps would be **{f['saving_all_ranks']}** shorter."
    message = md_escape(f["message"])
    if message and impact and not message.endswith((".", "!", "?", ")")):
        message += "."
    out.append(message + impact)
    if f["regions"]:
        out.append("")
        out.append("**Where:** " + ", ".join(f"{md_escape(r['path'])} {r['share']}" for r in f["regions"][:3]))
    if f.get("source"):
        out.append("")
        out.append("**Source:** " + ", ".join(f"{md_escape(s['symbol'])} ({md_escape(s['module'])}, {s['count']})"
                                            for s in f["source"]))
    if f["observed"] or f["threshold"]:
        out.append("")
        out.append(f"Observed **{md_escape(f['observed'] or '–')}** against threshold **{md_escape(f['threshold'] or '–')}**.")
    if f["fix"]:
        out.append("")
        out.append(f"**Fix:** {md_escape(f['fix'])}")
    e = f["evidence"]
    if e["columns"] and e["rows"]:
        out.append("")
        out.append(f"<details><summary>Evidence: {len(e['rows'])} of {e['total_rows']} rows</summary>")
        out.append("")
        out.append("| " + " | ".join(md_escape(c) for c in e["columns"]) + " |")
        out.append("|" + "|".join("--:" if num else "---" for num in e["numeric"]) + "|")
        for row in e["rows"]:
            out.append("| " + " | ".join(md_escape(c) for c in row) + " |")
        if e["rows_left_out"]:
            out.append("")
            out.append(f"_{e['rows_left_out']} more rows left out._")
        out.append("")
        out.append("</details>")
    why = []
    for p in f["principles"]:
        label = md_escape(p["title"])
        why.append(f"[{label}]({p['url'].replace('(', '%28').replace(')', '%29')})" if p["url"] else label)
    out.append("")
    line = ""
    if why:
        line = "**Why:** " + "; ".join(why) + " · "
    rule = md_code(f["rule_id"])
    line += (f"Rule `{rule}` {md_escape(f['rule_name'])}: silence with `--ignore {rule}`, tune with "
             f"`--set {md_code(f['rule_name'] or f['rule_id'])}.PARAM=VALUE`")
    out.append(line)
    out.append("")
    return out
