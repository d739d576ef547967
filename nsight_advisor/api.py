"""The Python API: open captures into an :class:`Analysis` and read its findings, time accounting, kernels and any
SQL over the store as pandas DataFrames (or Arrow tables), write its reports, compare it with another.

The CLI is a shell over these calls (``analyze`` and ``compare`` go through here), so a notebook gets exactly
what the command line prints::

    import nsight_advisor
    run = nsight_advisor.open("report.sqlite")
    run.findings()                       # one row per finding, ranked
    run.query("select count(*) as n from kernels")

The analysis runs once, on first use, and is cached as ``analyze`` caches it (a second ``open`` of the same
unchanged capture reads the kept result). The store is opened read-only, one short-lived connection per call,
so a notebook may read a store while the CLI analyzes it too.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from nsight_advisor import workflow
from nsight_advisor.common.errors import InputError
from nsight_advisor.common.severity import SEVERITIES

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

    from nsight_advisor.engine.model import AnalysisResult

    Findings = pd.DataFrame  # a DataFrame whose ``_repr_html_`` is :func:`findings_html`

#: The columns of :meth:`Analysis.findings`, in order.
FINDING_COLUMNS = ("rule_id", "rule_name", "severity", "title", "message", "capture_id", "device_id", "impact_ns",
                   "impact_pct", "category", "observed", "threshold", "fix", "principles", "evidence")
#: At most this many findings in a notebook's HTML table (the DataFrame holds them all).
HTML_ROWS = 50


def open(*paths: str | Path, store: str | Path | None = None, use_cache: bool = True, rules_dirs: Sequence = (),
         config: str | Path | None = None, overrides: Sequence[str] = (), select: Sequence[str] = (),
         ignore: Sequence[str] = (), window: str | None = None, gpu: str | None = None,
         progress: bool = False, executor: str | None = None, ray_address: str | None = None) -> Analysis:
    """Open one or more captures (any format ``analyze`` reads), or one store (``.duckdb``), for analysis.

    ``store``: keep the trace store at this path instead of the cache. The other keywords are ``analyze``'s
    options: ``rules_dirs`` (``--rules-dir``), ``config`` (``--config``), ``overrides`` (``--set``, as
    ``"RULE.param=value"``), ``select``/``ignore`` (rule ids or names), ``window`` (``--window``), ``gpu``
    (``--gpu``), ``executor`` (``"local"``, the default, or ``"ray"``: where many captures are ingested) and
    ``ray_address`` (``--ray-address``). Nothing is read until a method needs it; a path that is not there raises
    InputError now.
    """
    from nsight_advisor.store.executors import executor_from_options

    if not paths:
        raise InputError("open: name at least one capture or store")
    given = [Path(p) for p in paths]
    for path in given:
        workflow.check_input_path(path)
    store_path = Path(store) if store is not None else None
    settings = dict(rules_dirs=tuple(Path(d) for d in rules_dirs), config_path=Path(config) if config else None,
                    overrides=tuple(overrides), select=tuple(select), ignore=tuple(ignore), window=window, gpu=gpu,
                    executor=executor_from_options(executor, ray_address))
    return Analysis(given, store_path, use_cache=use_cache, progress=progress, settings=settings)


class Analysis:
    """Captures opened for analysis (see :func:`open`). Every table comes back as a pandas DataFrame; the
    ``*_arrow`` twins return a pyarrow Table."""

    def __init__(self, paths: list[Path], store: Path | None, *, use_cache: bool, progress: bool,
                 settings: dict[str, Any]) -> None:
        self.paths, self.store, self.use_cache, self.progress = paths, store, use_cache, progress
        self.settings = settings
        self._result: AnalysisResult | None = None

    def __repr__(self) -> str:
        names = ", ".join(p.name for p in self.paths)
        state = f"{len(self._result.findings)} findings" if self._result is not None else "not yet analyzed"
        return f"<nsight_advisor.Analysis of {names}: {state}>"

    # --- the analysis ------------------------------------------------------------------------------------------
    @property
    def result(self) -> AnalysisResult:
        """The analysis (ingesting or reusing the cache, running every selected rule) as the engine returns it;
        ``result.to_dict()`` is ``analyze --format json``."""
        if self._result is None:
            self._result = workflow.analyze(self.paths, store_path=self.store, use_cache=self.use_cache,
                                            progress=self.progress, **self.settings)
        return self._result

    def findings(self) -> Findings:
        """One row per finding, ranked (severity, then the time it costs): :data:`FINDING_COLUMNS`; ``principles``
        holds the ids of the guide sections cited, ``evidence`` the rows that prove it (a list of dicts)."""
        import pandas as pd

        rows = []
        for f in self.result.findings:
            d = f.to_dict()
            d["principles"] = [p["id"] for p in d.get("principles", [])]
            rows.append({c: d.get(c) for c in FINDING_COLUMNS})
        frame = pd.DataFrame(rows, columns=list(FINDING_COLUMNS))
        frame["device_id"] = frame["device_id"].astype("Int64")  # NULL for host-wide findings
        return _findings_frame(frame)

    def findings_arrow(self) -> pa.Table:
        """:meth:`findings` as an Arrow table (evidence, observed and threshold as JSON text)."""
        return _arrow(self.findings(), json_columns=("evidence", "observed", "threshold"))

    def outcomes(self) -> pd.DataFrame:
        """One row per rule: ``status`` findings, clean, skipped or errored, and why."""
        import pandas as pd

        return pd.DataFrame([o.to_dict() for o in self.result.outcomes])

    def accounting(self) -> pd.DataFrame:
        """Each device's time partition over the analysis window (docs/impact.md): one row per capture and device,
        kernel/copy/memset/idle ns and idle ns by cause (``idle_<cause>_ns``); the parts add up to the window."""
        import pandas as pd

        rows = []
        for cap in self.result.captures:
            for part in cap.get("accounting") or []:
                row = {"capture_id": cap["capture_id"], "source_name": cap.get("source_name")}
                row.update({k: v for k, v in part.items() if k != "idle_by_cause"})
                row.update({f"idle_{cause.replace('-', '_')}_ns": ns
                            for cause, ns in (part.get("idle_by_cause") or {}).items()})
                rows.append(row)
        return pd.DataFrame(rows)

    def accounting_arrow(self) -> pa.Table:
        """:meth:`accounting` as an Arrow table."""
        return _arrow(self.accounting())

    def iterations(self) -> pd.DataFrame:
        """The repeating iterations found in each capture (NVTX steps or a repeating kernel sequence): count,
        median/p10/p90 ns, warm-up iterations left out, and what they were found from."""
        import pandas as pd

        rows = [{"capture_id": cap["capture_id"], "source_name": cap.get("source_name"), **cap["iterations"]}
                for cap in self.result.captures if cap.get("iterations")]
        return pd.DataFrame(rows)

    def kernels(self) -> pd.DataFrame:
        """Every kernel launch of the timeline (the store's ``kernels`` view: names, launch configuration,
        start/end/duration in ns)."""
        return self.query("select * from kernels order by capture_id, start_ns")

    def kernels_arrow(self) -> pa.Table:
        """:meth:`kernels` as an Arrow table."""
        return self.query_arrow("select * from kernels order by capture_id, start_ns")

    def query(self, sql: str) -> pd.DataFrame:
        """Run read-only SQL over the store (its tables and the analysis views, docs/analysis-views.md) as rules
        run theirs: no files, no ATTACH, no extensions. InputError with DuckDB's first line when it fails."""
        return self._query(sql, lambda rel: rel.df())

    def query_arrow(self, sql: str) -> pa.Table:
        """:meth:`query` as an Arrow table."""
        return self._query(sql, lambda rel: rel.arrow())

    def _query(self, sql: str, fetch):
        import duckdb

        from nsight_advisor.common.text import first_line

        con, _ids = workflow.load(self.paths, store_path=self.store, use_cache=self.use_cache,
                                  progress=self.progress)
        try:
            try:
                rel = workflow.store_sql(con, sql)
                if rel is None:
                    raise InputError("query: the SQL returns no rows (write a select)")
                out = fetch(rel)
            except (duckdb.Error, RuntimeError) as exc:
                # Ctrl-C lands in DuckDB as its own error (InterruptException, or a RuntimeError from the fetch):
                # the caller gets the KeyboardInterrupt it pressed for
                if isinstance(exc, getattr(duckdb, "InterruptException", ())) or "interrupt" in str(exc).lower():
                    raise KeyboardInterrupt from None
                if not isinstance(exc, duckdb.Error):
                    raise
                raise InputError(f"query failed: {first_line(exc)}") from exc
            if hasattr(out, "read_all"):  # an Arrow reader: read it while the connection is open
                out = out.read_all()
            return out
        finally:
            con.close()

    # --- outputs -----------------------------------------------------------------------------------------------
    def report(self, format: str = "html", path: str | Path | None = None) -> str:
        """The report as ``format`` (html, json, md or sarif). With ``path`` it is also written there (through a
        temporary file and a rename; ``"-"`` is stdout). Returns the report's text."""
        from nsight_advisor.report import render

        if format not in ("html", "json", "md", "sarif"):
            raise InputError(f"report: unknown format {format!r}; use html, json, md or sarif")
        if path is not None:
            workflow.refuse_inputs_as_output(Path(path), [*self.paths, *self._files_read()])
            workflow.write_report(self.result, format, Path(path))
        return render(self.result, format)

    def _files_read(self) -> list[Path]:
        """The configuration and rule files this analysis read (an output may not name them)."""
        from nsight_advisor.engine.run_inputs import files_read

        return files_read(config_path=self.settings.get("config_path"), rules_dirs=self.settings.get("rules_dirs", ()))

    def summary_line(self, where: str | Path | None = None) -> str:
        """One line: the findings counted by severity, the top one, and where the report went."""
        from nsight_advisor.common.text import printable

        findings = self.result.findings
        counts = {s: sum(1 for f in findings if f.severity == s) for s in reversed(SEVERITIES)}
        if findings:
            head = f"{len(findings)} finding{'s' if len(findings) != 1 else ''} (" + ", ".join(
                f"{n} {s}" for s, n in counts.items()) + ")"
            top = findings[0]
            head += f"; top: {top.severity} {top.rule_id} {top.rule_name}: {_clip(top.title, 160)}"
        else:
            head = "no findings"
        if where is not None:
            head += f"; report: {where}"
        return printable(head)

    def compare(self, other: Analysis) -> dict:
        """Compare this run (the base) with ``other`` (the head): comparability, time per iteration, partition,
        kernel and finding changes with their noise intervals, Nsight Compute metric deltas, this run's config
        ``regression`` waivers applied; the dict ``compare --format json`` prints."""
        from nsight_advisor.compare import comparison as cmp
        from nsight_advisor.engine.config import find_config

        if not isinstance(other, Analysis):
            raise TypeError("compare: pass another nsight_advisor.open(...) analysis")
        (base_durations, base_ncu), (head_durations, head_ncu) = self._kernel_data(), other._kernel_data()
        comparison = cmp.compare_results(self.result, other.result, base_durations, head_durations,
                                         base_name=cmp.side_name(self.paths), head_name=cmp.side_name(other.paths),
                                         base_ncu=base_ncu, head_ncu=head_ncu)
        cmp.waive_kernels(comparison, find_config(self.settings.get("config_path")).waivers)
        return comparison

    def compare_report(self, other: Analysis, format: str = "md", path: str | Path | None = None) -> str:
        """The comparison with ``other`` (:meth:`compare`) as ``format`` (md, json, html or sarif), written to
        ``path`` too when given. Returns the text."""
        text = comparison_report(self.compare(other), format, self, other)
        if path is not None:
            workflow.refuse_inputs_as_output(Path(path), [*self.paths, *other.paths, *self._files_read()])
            workflow.write_text_atomic(Path(path), text)
        return text

    def report_with_baseline(self, baseline: Sequence[str | Path], format: str = "html",
                             path: str | Path | None = None) -> str:
        """This run's report with its comparison against ``baseline`` (captures or directories of ranks, analyzed
        with this run's settings) as a section: ``analyze HEAD --baseline BASE``. Written to ``path`` too when
        given (``"-"`` is stdout). Returns the text."""
        from nsight_advisor.compare.baseline import baseline_comparison
        from nsight_advisor.report.baseline_report import render_with_baseline

        base_paths = [Path(p) for p in baseline]
        comparison, base_result = baseline_comparison(self.result, self.paths, base_paths, use_cache=self.use_cache,
                                                      progress=self.progress, head_store=self.store, **self.settings)
        text = render_with_baseline(self.result, comparison, base_result, format)
        if path is not None:
            workflow.write_text_atomic(Path(path), text)
        return text

    def _kernel_data(self) -> tuple[dict[str, list[int]], dict]:
        """Per-launch kernel durations and the Nsight Compute kernels' metrics, read from this run's store."""
        from nsight_advisor.compare import comparison as cmp

        self.result  # the analysis builds (or reuses) the store read below
        return cmp.side_kernels(self.paths, store_path=self.store, progress=self.progress)

    def _repr_html_(self) -> str:
        return self.findings()._repr_html_()


def compare_paths(base: Sequence[str | Path], head: Sequence[str | Path], *, use_cache: bool = True,
                  progress: bool = False, config: str | Path | None = None) -> tuple[dict, tuple]:
    """``compare``: analyze each side (one or more captures, or directories of ranks) and compare them; returns
    the comparison and both sides' analyses (AnalysisResult), which :func:`comparison_report` renders. HEAD is
    analyzed in a second process while BASE is analyzed here, when the cache is on and two cores are usable."""
    from nsight_advisor.compare import comparison as cmp
    from nsight_advisor.compare.sides import expand

    return cmp.compare_paths(expand([Path(p) for p in base], "BASE"), expand([Path(p) for p in head], "HEAD"),
                             use_cache=use_cache, progress=progress,
                             config_path=Path(config) if config is not None else None)


def comparison_report(comparison: dict, format: str, base: Any, head: Any) -> str:
    """``comparison`` (from :meth:`Analysis.compare` or :func:`compare_paths`) rendered as md, json, html or sarif;
    ``base`` and ``head`` are the two analyses (Analysis or AnalysisResult)."""
    from nsight_advisor.report.compare_report import render_comparison

    if format not in ("md", "json", "html", "sarif"):
        raise InputError(f"compare: unknown format {format!r}; use md, json, html or sarif")
    sides = tuple(side.result if isinstance(side, Analysis) else side for side in (base, head))
    return render_comparison(comparison, format, sides)


def regression_gate(comparison: dict, threshold_pct: float | None) -> dict:
    """``compare --fail-on-regression PCT``'s decision on a comparison: ``threshold_pct``, ``tripped`` and
    ``tripped_by`` (the run and the kernels that tripped it; :mod:`nsight_advisor.compare.gate`)."""
    from nsight_advisor.compare.gate import regression_gate as gate

    return gate(comparison, threshold_pct)


def worst_regression_pct(comparison: dict) -> float | None:
    """The largest significant slowdown of a comparison in percent (the headline's or a kernel's median), or None.
    Not what ``--fail-on-regression`` judges since comparison schema 3: that is :func:`regression_gate`."""
    from nsight_advisor.compare import comparison as cmp

    return cmp.worst_regression_pct(comparison)


# --- the other commands: what `ingest`, `info`, `query` and `rules` do -----------------------------------------------
def ingest(*paths: str | Path, store: str | Path, progress: bool = False, executor: str | None = None,
           ray_address: str | None = None) -> list[int]:
    """``ingest``: put captures into the DuckDB store at ``store`` (created, or extended atomically), many at once
    on ``executor`` (``"local"`` worker processes, the default, or ``"ray"`` tasks at ``ray_address``); returns
    the capture ids they got."""
    from nsight_advisor.store.executors import executor_from_options

    if not paths:
        raise InputError("ingest: name at least one capture")
    return workflow.ingest_to_store([Path(p) for p in paths], Path(store), progress=progress,
                                    executor=executor_from_options(executor, ray_address))


def parsing_early(paths: Sequence[str | Path]):
    """A context within which the small PyTorch traces at ``paths`` are parsed by a child forked on entry, while
    this process imports and prepares; their ingest within it takes the parse (ingest/kineto/early_parse.py)."""
    from nsight_advisor.ingest.kineto.early_parse import parsing_early as early

    return early(paths)


def describe(path: str | Path, format: str = "text") -> str:
    """``info``: a capture's tool and version, GPUs, duration, rows per table and what it lacks, as text or JSON
    (never its environment tables)."""
    return workflow.info(Path(path), format)


def query_text(source: str | Path, sql: str, format: str = "table") -> str:
    """``query``: read-only SQL over a store or a capture (ingested on the fly) as a table, CSV or JSON text;
    :meth:`Analysis.query` gives the rows as a DataFrame."""
    return workflow.query(Path(source), sql, format)


def whatif(*paths: str | Path, kernel: str | None = None, speedup: float | None = None, fixes: Sequence[str] = (),
           store: str | Path | None = None, use_cache: bool = True, rules_dirs: Sequence = (),
           config_path: str | Path | None = None) -> dict[str, Any]:
    """``whatif``: replay the captures' steps (their dependency graph, docs/impact.md) with a change: the kernels
    named ``kernel`` (exactly, else containing it) ``speedup`` times faster, and the fix of every finding of each
    rule in ``fixes`` (names or ids; the captures are analyzed for them, with ``rules_dirs`` and ``config_path``
    as ``analyze`` takes them), all at once. Returns ``median_iteration_ns`` (the captures' own),
    ``predicted_median_iteration_ns``, per capture every step before and after and the critical path of its
    median step. InputError when the captures have no steps, nothing matches or no fix is modeled."""
    from nsight_advisor.engine.fix_request import findings_of_rules
    from nsight_advisor.engine.whatif import whatif as replay_whatif

    if not paths:
        raise InputError("whatif: name at least one capture or store")
    if (kernel is None) != (speedup is None):
        raise InputError("whatif: --kernel and --speedup go together (which kernels, how many times faster)")
    given = [workflow.check_input_path(Path(p)) for p in paths]
    con, ids = workflow.load(given, store_path=Path(store) if store is not None else None, use_cache=use_cache)
    try:
        names = dict(con.execute("select capture_id, source_name from captures").fetchall())
        try:
            found = findings_of_rules(con, ids, fixes, rules_dirs=[Path(d) for d in rules_dirs],
                                      config_path=Path(config_path) if config_path is not None else None)
            return replay_whatif(con, ids, kernel=kernel, speedup=None if speedup is None else float(speedup),
                                 fixes=found, names=names)
        except ValueError as exc:
            raise InputError(f"whatif: {exc}") from None
    finally:
        con.close()


def whatif_text(answer: dict[str, Any]) -> str:
    """:func:`whatif`'s answer as text for a terminal."""
    from nsight_advisor.report.whatif_text import render_whatif

    return render_whatif(answer)


def list_rules(rules_dirs: Sequence[str | Path] = ()) -> str:
    """``rules list``: one line per rule (built-in and ``rules_dirs``): id, name, category, status."""
    from nsight_advisor.authoring import commands as authoring

    return authoring.list_rules(tuple(Path(d) for d in rules_dirs))


def show_rule(rule: str, rules_dirs: Sequence[str | Path] = ()) -> str:
    """``rules show``: one rule's docs, parameters (defaults, units) and cited principles."""
    from nsight_advisor.authoring import commands as authoring

    return authoring.show_rule(rule, tuple(Path(d) for d in rules_dirs))


def new_rule(name: str, directory: str | Path = ".") -> str:
    """``rules new``: scaffold a rule folder under ``directory`` that passes lint and whose example case passes."""
    from nsight_advisor.authoring import commands as authoring

    return authoring.new_rule(name, Path(directory))


def run_rule_tests(directory: str | Path | None = None) -> tuple[str, bool]:
    """``rules test``: run every rule's cases (the built-in rules when ``directory`` is None); the report and
    whether all passed."""
    from nsight_advisor.authoring import commands as authoring

    return authoring.test_rules(Path(directory) if directory is not None else None)


def lint_rules(directory: str | Path | None = None) -> tuple[str, bool]:
    """``rules lint``: check rule folders (ids, params, SQL against the schema, evidence, docs, cases); the report
    and whether it found nothing."""
    from nsight_advisor.authoring import commands as authoring

    return authoring.lint_rules(Path(directory) if directory is not None else None)


_FINDINGS_CLASS = None


def _findings_frame(frame: pd.DataFrame) -> Findings:
    """``frame`` as :class:`Findings` (the class is made on first use: pandas is imported only when asked for)."""
    global _FINDINGS_CLASS
    if _FINDINGS_CLASS is None:
        import pandas as pd

        class Findings(pd.DataFrame):
            """The findings as a DataFrame; in Jupyter an HTML table with every capture string escaped."""

            @property
            def _constructor(self):
                return Findings

            def _repr_html_(self) -> str:
                return findings_html(self)

        _FINDINGS_CLASS = Findings
    return _FINDINGS_CLASS(frame)


def findings_html(frame: pd.DataFrame) -> str:
    """The findings of ``frame`` as an HTML table (at most :data:`HTML_ROWS` rows), every value escaped."""
    from nsight_advisor.common.text import format_duration_ns

    cols = [c for c in ("severity", "rule_id", "rule_name", "title", "impact_ns", "impact_pct", "capture_id",
                        "device_id") if c in frame.columns]
    if frame.empty:
        return "<p>no findings</p>"
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = []
    for row in frame.head(HTML_ROWS).to_dict("records"):
        cells = []
        for c in cols:
            value = row.get(c)
            if value is None or (isinstance(value, float) and value != value):
                text = ""
            elif c == "impact_ns":
                text = format_duration_ns(value)
            elif c == "impact_pct":
                text = f"{float(value):.1f}%"
            else:
                text = str(value)
            cells.append(f"<td>{html.escape(_clip(text, 300))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    more = len(frame) - HTML_ROWS
    foot = f"<p>{more} more findings not shown</p>" if more > 0 else ""
    return (f'<table class="nsight-advisor-findings"><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(body)}</tbody></table>{foot}")


def _clip(text: Any, limit: int) -> str:
    s = "" if text is None else str(text)
    return s if len(s) <= limit else s[: limit - 1] + "…"


def _arrow(frame: pd.DataFrame, json_columns: Sequence[str] = ()) -> pa.Table:
    import pandas as pd
    import pyarrow as pa

    from nsight_advisor.common.json_values import jsonable

    frame = frame.copy()
    for column in json_columns:
        if column in frame:
            frame[column] = [json.dumps(jsonable(v)) for v in frame[column]]
    return pa.Table.from_pandas(pd.DataFrame(frame), preserve_index=False)
