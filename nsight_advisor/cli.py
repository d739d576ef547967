"""The command line: a thin click shell over the library (ingest → engine → report).

Exit codes: 0 done (and no finding at or above --fail-on), 1 findings at or above --fail-on,
2 bad input or usage (one line on stderr, no traceback), 3 internal error (a bug: details are
written to a file whose path is printed).
"""

from __future__ import annotations

import contextlib
import gc
import math
import os
import sys
from pathlib import Path

# numpy's OpenBLAS starts a thread per core that spins after start-up (0.1 CPU-second per command, perf); the
# command line does no linear algebra. Set before anything imports numpy; a value the user set wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import click  # noqa: E402

from nsight_advisor.common.version import __version__  # noqa: E402
from nsight_advisor.common.errors import NsightAdvisorError  # noqa: E402
from nsight_advisor.cli_messages import disk_full, escape_args, one_line, user_path, write_crash_report  # noqa: E402

EXIT_OK, EXIT_FINDINGS, EXIT_BAD_INPUT, EXIT_INTERNAL = 0, 1, 2, 3

_EXIT_CODES_HELP = (
    "\b\nExit codes:\n  0  done (no finding at or above --fail-on)\n  1  findings at or above --fail-on\n"
    "  2  bad input or usage (one line on stderr)\n  3  internal error (please report it; details are written to a file)"
)


#: Python's cycle collector runs every 700 new objects by default: 170 collections, 40 to 50 ms of a 2.3 s analysis
#: of the 8 DLRM ranks, for objects that live to the end of the run; a run frees its garbage by reference counts.
#: At this threshold, 15 collections and 15 ms (docs/performance.md, "Sixteenth pass").
GC_THRESHOLD = (20_000, 20, 20)


class _Group(click.Group):
    """A click group that turns errors into exit codes instead of tracebacks."""

    def main(self, *args, **kwargs):  # noqa: D102 - click API
        previous = _stop_on_signals()
        collector = gc.get_threshold()
        gc.set_threshold(*GC_THRESHOLD)
        try:
            self._main(*args, **kwargs)
        finally:  # a caller embedding the CLI (tests) gets its own signal handlers and collector back
            gc.set_threshold(*collector)
            _restore_signals(previous)

    def _main(self, *args, **kwargs):
        kwargs.setdefault("standalone_mode", False)
        try:
            rv = super().main(*args, **kwargs)
        except click.exceptions.Exit as exc:
            sys.exit(exc.exit_code)
        except click.exceptions.Abort as exc:
            if isinstance(exc.__cause__, KeyboardInterrupt):  # click wraps a signal that lands in Python code
                click.echo("nsight-advisor: interrupted", err=True)
                sys.exit(143 if isinstance(exc.__cause__, _Terminated) else 130)
            click.echo("nsight-advisor: aborted", err=True)
            sys.exit(EXIT_BAD_INPUT)
        except click.UsageError as exc:
            click.echo(f"nsight-advisor: {exc.format_message()}", err=True)
            sys.exit(EXIT_BAD_INPUT)
        except click.ClickException as exc:
            click.echo(f"nsight-advisor: {exc.format_message()}", err=True)
            sys.exit(EXIT_BAD_INPUT)
        except NsightAdvisorError as exc:
            click.echo(f"nsight-advisor: {one_line(escape_args(str(exc)))}", err=True)
            sys.exit(EXIT_BAD_INPUT)
        except KeyboardInterrupt as exc:
            click.echo("nsight-advisor: interrupted", err=True)
            sys.exit(143 if isinstance(exc, _Terminated) else 130)
        except BrokenPipeError:
            sys.exit(EXIT_OK)
        except OSError as exc:
            full = disk_full(exc)
            if full is not None:
                click.echo(f"nsight-advisor: {one_line(escape_args(full))}", err=True)
                sys.exit(EXIT_BAD_INPUT)
            if exc.filename is None:
                _internal_error(exc)
            # The file system refused (a file where a folder must be, no space, no permission): the user's to fix.
            problem = exc.strerror or type(exc).__name__
            if isinstance(exc, (FileExistsError, NotADirectoryError)):
                problem = "a file of that name is in the way of a folder"
            where = user_path(os.fsdecode(exc.filename))
            click.echo(f"nsight-advisor: {one_line(escape_args(f'{where}: {problem}'))}", err=True)
            sys.exit(EXIT_BAD_INPUT)
        except Exception as exc:  # a bug: keep the details, show one line
            if _is_interrupt(exc):
                click.echo("nsight-advisor: interrupted", err=True)
                sys.exit(143 if 15 in _signals_seen else 130)  # 15: SIGTERM
            full = disk_full(exc)
            if full is not None:
                click.echo(f"nsight-advisor: {one_line(escape_args(full))}", err=True)
                sys.exit(EXIT_BAD_INPUT)
            _internal_error(exc)
        sys.exit(rv if isinstance(rv, int) else EXIT_OK)


class _Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Python next runs so that ``finally`` blocks and atexit still clean up."""


_signals_seen: list[int] = []


def _stop_on_signals() -> dict:
    """SIGTERM ends the run like Ctrl-C (exit 143): cleanup runs, temporary files go (see run_folder). Both
    signals are remembered, because DuckDB turns one that arrives mid-query into an error of its own."""
    import signal

    def stop(signum, frame):
        _signals_seen.append(signum)
        raise _Terminated if signum == signal.SIGTERM else KeyboardInterrupt

    previous = {}
    with contextlib.suppress(ValueError, OSError):  # not the main thread (a caller embedding the CLI)
        for signum, default in ((signal.SIGTERM, signal.SIG_DFL), (signal.SIGINT, signal.default_int_handler)):
            if signal.getsignal(signum) is default:  # a handler the caller installed (or SIG_IGN) is kept
                previous[signum] = signal.signal(signum, stop)
    return previous


def _restore_signals(previous: dict) -> None:
    import signal

    with contextlib.suppress(ValueError, OSError):
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _is_interrupt(exc: BaseException) -> bool:
    """DuckDB turns Ctrl-C during a query into its own error (InterruptException, or a RuntimeError 'Query
    interrupted'): after a signal, that is the user's interrupt, not a bug."""
    duckdb = sys.modules.get("duckdb")
    interrupt = getattr(duckdb, "InterruptException", None) if duckdb is not None else None
    if interrupt is not None and isinstance(exc, interrupt):
        return True
    return bool(_signals_seen) and "interrupt" in str(exc).lower()


def _out(text: str) -> None:
    """A command's output on stdout, through the one terminal-safe writer (workflow.write_stdout): control
    characters shown as escapes, a closed stdout an error (exit 2)."""
    from nsight_advisor.workflow import write_stdout

    write_stdout(text)


def _internal_error(exc: BaseException) -> None:
    details = write_crash_report(exc)
    click.echo(
        f"nsight-advisor: internal error ({type(exc).__name__}: {one_line(str(exc))}); "
        f"please report it with the details in {details}",
        err=True,
    )
    sys.exit(EXIT_INTERNAL)


@click.group(cls=_Group, epilog=_EXIT_CODES_HELP, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="nsight-advisor")
def main() -> None:
    """Explain what slows a GPU program down, from Nsight Systems and Nsight Compute captures and PyTorch
    profiler (Kineto) traces (.json, .json.gz).

    \b
    Examples:
      nsight-advisor analyze report.sqlite -o report.html
      nsight-advisor analyze report.sqlite --format json --fail-on warning
      nsight-advisor analyze rank0.pt.trace.json.gz rank1.pt.trace.json.gz -o report.html
      nsight-advisor info profile.ncu-rep
      nsight-advisor query report.sqlite "select name, count(*) from kernels group by 1"
    """


def _progress_enabled(quiet: bool) -> bool:
    return not quiet and sys.stderr.isatty()


@main.command(epilog=_EXIT_CODES_HELP)
@click.argument("captures", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Path(path_type=Path), help="Write the report here (default: stdout).")
@click.option("--format", "fmt", type=click.Choice(["html", "json", "md", "sarif"]), default=None,
              help="Report format (default: from the -o suffix, else html).")
@click.option("--fail-on", type=click.Choice(["info", "warning", "error"]), default=None,
              help="Exit 1 when a finding reaches this severity.")
@click.option("--rules-dir", "rules_dirs", multiple=True, type=click.Path(path_type=Path),
              help="Extra folder of rule folders (repeatable).")
@click.option("--config", "config_path", type=click.Path(path_type=Path),
              help="nsight-advisor.toml (default: ./nsight-advisor.toml or [tool.nsight-advisor] in ./pyproject.toml).")
@click.option("--set", "overrides", multiple=True, metavar="RULE.PARAM=VALUE", help="Override a rule parameter.")
@click.option("--select", "select", multiple=True, help="Run only these rules (id or name; repeatable).")
@click.option("--ignore", "ignore", multiple=True, help="Do not run these rules (id or name; repeatable).")
@click.option("--store", "store_path", type=click.Path(path_type=Path),
              help="Trace store to build, or reuse when it holds exactly these captures unchanged (default: the "
                   "cache, $NSIGHT_ADVISOR_CACHE, else $XDG_CACHE_HOME/nsight-advisor, else ~/.cache/nsight-advisor).")
@click.option("--no-cache", is_flag=True, help="Ingest afresh even when the cache (or --store) already holds the captures.")
@click.option("--window", metavar="START:END|NVTX|all", default=None,
              help="Analysis window: seconds from the capture's start (either end may be left out, e.g. 2.5:), or "
                   "the name of an NVTX range (from its first start to its last end), or 'all' (the first to the "
                   "last GPU operation). Default: the steady state (from the first iteration after the warm-up to "
                   "the last GPU operation) where iterations are found, else all.")
@click.option("--executor", type=click.Choice(["local", "ray"]), default=None,
              help="Where many captures are ingested: local worker processes (default) or Ray tasks.")
@click.option("--ray-address", metavar="ADDR", default=None,
              help="The Ray cluster for --executor ray (default: the one running on this machine, else a local one started for the run).")
@click.option("--gpu", "gpu_model", metavar="MODEL", default=None,
              help="GPU model for captures that do not name their GPU (e.g. 'H100 SXM', 'A100 80GB SXM4', 'V100 "
                   "SXM2'); fills only what the capture leaves unknown. Also [gpu] model in the config.")
@click.option("--baseline", "baseline", multiple=True, type=click.Path(path_type=Path),
              help="Compare with this run (a capture or a directory of them; repeatable): the report gains a "
                   "section with what `compare BASELINE CAPTURES` says.")
@click.option("-q", "--quiet", is_flag=True, help="No progress output.")
def analyze(captures, output, fmt, fail_on, rules_dirs, config_path, overrides, select, ignore, store_path,
            no_cache, window, gpu_model, baseline, executor, ray_address, quiet):
    """Analyze captures and write a report of ranked findings.

    CAPTURES: Nsight Systems exports (.sqlite) or reports (.nsys-rep), Nsight Compute reports (.ncu-rep) or CSV
    exports, PyTorch profiler (Kineto) traces (.json, .json.gz); told apart by their content.

    \b
    Examples:
      nsight-advisor analyze report.sqlite -o report.html
      nsight-advisor analyze rank0.sqlite rank1.sqlite --format md -o advice.md
      nsight-advisor analyze worker*.pt.trace.json.gz -o ranks.html
      nsight-advisor analyze profile.ncu-rep --format sarif -o advice.sarif --fail-on error
      nsight-advisor analyze report.sqlite --set small-grid.min_blocks_per_sm=2 --ignore NA105
      nsight-advisor analyze report.sqlite --window 2.5:8 --gpu "H100 SXM"
      nsight-advisor analyze rank*.pt.trace.json.gz --executor ray --ray-address head-node:6379
    """
    from nsight_advisor import api

    # small PyTorch traces parse in a forked child while the imports below run (a --store may hold them already)
    with api.parsing_early(captures if store_path is None and executor != "ray" else ()):
        return _analyze(captures, output, fmt, fail_on, rules_dirs, config_path, overrides, select, ignore,
                        store_path, no_cache, window, gpu_model, baseline, executor, ray_address, quiet)


def _analyze(captures, output, fmt, fail_on, rules_dirs, config_path, overrides, select, ignore, store_path,
             no_cache, window, gpu_model, baseline, executor, ray_address, quiet) -> int:
    from nsight_advisor import api, workflow

    fmt = fmt or workflow.format_from_suffix(output)
    workflow.refuse_inputs_as_output(output, [*captures, store_path, *baseline,
                                              *workflow.files_read(config_path=config_path, rules_dirs=rules_dirs)])
    run = api.open(
        *captures,
        store=store_path,
        use_cache=not no_cache,
        rules_dirs=rules_dirs,
        config=config_path,
        overrides=overrides,
        select=select,
        ignore=ignore,
        window=window,
        gpu=gpu_model,
        progress=_progress_enabled(quiet),
        executor=executor,
        ray_address=ray_address,
    )
    result = run.result
    workflow.refuse_if_nothing_profiled(result)
    if baseline:
        run.report_with_baseline(baseline, fmt, output if output is not None else "-")
    else:
        workflow.write_report(result, fmt, output)
    if output is not None and str(output) != "-" and Path(output).is_file():  # not a pipe or /dev/stdout
        _out(run.summary_line(output))
    if fail_on is not None and workflow.reaches(result, fail_on):
        return EXIT_FINDINGS
    return EXIT_OK


def _finite(param: click.Parameter, value: float | None) -> float | None:
    """A number option's value, refused when nan or infinite (nan compares false: the gate would never close)."""
    if value is not None and not math.isfinite(value):
        raise click.BadParameter(f"expected a finite number, got {value!r}", param=param)
    return value


_COMPARE_EXIT_HELP = (
    "\b\nExit codes:\n  0  done (--fail-on-regression not tripped)\n"
    "  1  --fail-on-regression tripped: a significant slowdown of the run, or of a kernel costing PCT% of it\n  2  bad input or usage (one line on stderr)\n"
    "  3  internal error (please report it; details are written to a file)"
)


@main.command(epilog=_COMPARE_EXIT_HELP)
# str, not Path: Path("") is ".", and an empty argument must be refused, not compared as the current folder
@click.argument("sides", nargs=-1, metavar="BASE HEAD", type=click.Path())
@click.option("--base", "base", multiple=True, type=click.Path(),
              help="A BASE capture or a directory of them (repeatable; instead of the two arguments).")
@click.option("--head", "head", multiple=True, type=click.Path(),
              help="A HEAD capture or a directory of them (repeatable).")
@click.option("-o", "--output", type=click.Path(path_type=Path), help="Write the comparison here (default: stdout).")
@click.option("--format", "fmt", type=click.Choice(["md", "json", "sarif", "html"]), default=None,
              help="Output format (default: from the -o suffix, .json, .sarif or .html, else md).")
@click.option("--fail-on-regression", "fail_pct", type=click.FloatRange(min=0), metavar="PCT", default=None,
              callback=lambda _ctx, param, value: _finite(param, value),
              help="Exit 1 when the run is significantly slower by at least PCT percent, or a significantly slower "
                   "kernel costs at least PCT percent of the run's time (the JSON's gate says which).")
@click.option("--no-cache", is_flag=True, help="Ingest afresh even when the cache already holds the captures.")
@click.option("--config", "config_path", type=click.Path(path_type=Path),
              help="Config file (default: ./nsight-advisor.toml, else [tool.nsight-advisor] in ./pyproject.toml).")
@click.option("-q", "--quiet", is_flag=True, help="No progress output.")
def compare(sides, base, head, output, fmt, fail_pct, no_cache, config_path, quiet):
    """Compare two runs: what got slower or faster, whether it is outside the noise, and which findings changed.

    SIDES: BASE HEAD, each a capture (any format `analyze` reads), a store (.duckdb) or a directory of captures
    (the ranks of a run); or give each side with repeated --base and --head.

    \b
    Examples:
      nsight-advisor compare before.sqlite after.sqlite -o compare.md
      nsight-advisor compare before.sqlite after.sqlite --format json --fail-on-regression 5
      nsight-advisor compare --base main/rank0.sqlite --base main/rank1.sqlite --head pr/ -o compare.html
    """
    from nsight_advisor import api
    from nsight_advisor import workflow
    from nsight_advisor.compare.sides import resolve_sides

    base, head = resolve_sides(sides, base, head)
    suffix = output.suffix.lower() if output is not None else ""
    fmt = fmt or {".json": "json", ".sarif": "sarif", ".html": "html", ".htm": "html"}.get(suffix, "md")
    workflow.refuse_inputs_as_output(output, [*base, *head, *workflow.files_read(config_path=config_path)])
    comparison, results = api.compare_paths(base, head, use_cache=not no_cache, progress=_progress_enabled(quiet),
                                            config=config_path)
    comparison["gate"] = api.regression_gate(comparison, fail_pct)
    text = api.comparison_report(comparison, fmt, *results)
    workflow.write_text_atomic(output if output is not None else Path("-"), text)
    return EXIT_FINDINGS if comparison["gate"]["tripped"] else EXIT_OK


@main.command()
@click.argument("captures", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--store", "store_path", required=True, type=click.Path(path_type=Path),
              help="DuckDB store to create or add to.")
@click.option("--executor", type=click.Choice(["local", "ray"]), default=None,
              help="Where many captures are ingested: local worker processes (default) or Ray tasks.")
@click.option("--ray-address", metavar="ADDR", default=None,
              help="The Ray cluster for --executor ray (default: the one running on this machine, else a local one started for the run).")
@click.option("-q", "--quiet", is_flag=True, help="No progress output.")
def ingest(captures, store_path, executor, ray_address, quiet):
    """Ingest captures into a DuckDB trace store (created or extended atomically).

    \b
    Example:
      nsight-advisor ingest rank0.sqlite rank1.sqlite --store run.duckdb
    """
    from nsight_advisor import api

    with api.parsing_early(captures if executor != "ray" else ()):  # as analyze's
        ids = api.ingest(*captures, store=store_path, progress=_progress_enabled(quiet), executor=executor,
                         ray_address=ray_address)
    _out(f"ingested {len(ids)} capture(s) into {store_path} (capture_id {', '.join(map(str, ids))})")


@main.command()
@click.argument("capture", type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
def info(capture, fmt):
    """Describe a capture: tool and version, GPUs, duration, rows per table, what is missing.

    \b
    Example:
      nsight-advisor info report.sqlite
    """
    from nsight_advisor import api

    _out(api.describe(capture, fmt))


@main.command()
@click.argument("captures", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--kernel", metavar="NAME", help="Kernels named NAME exactly, else containing NAME (with --speedup).")
@click.option("--speedup", type=click.FloatRange(min=0, min_open=True), metavar="F",
              help="How many times faster those kernels run (1.3: 30% more work per second).")
@click.option("--fix", "fixes", multiple=True, metavar="RULE",
              help="Apply the fix of every finding of RULE (name or id), as its saving models it; repeatable: "
                   "the fixes together.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
@click.option("--no-cache", is_flag=True, help="Ingest afresh even when the cache already holds the captures.")
def whatif(captures, kernel, speedup, fixes, fmt, no_cache):
    """Predict the step time after a change: some kernels faster, some findings fixed, or both; the steps'
    dependency graph replayed with it (several ranks of a job together meet at their collectives).

    \b
    Examples:
      nsight-advisor whatif report.sqlite --kernel gemm --speedup 1.3 --format json
      nsight-advisor whatif report.sqlite --fix sync-stall --fix h2d-transfer-volume
    """
    import json

    from nsight_advisor import api

    answer = api.whatif(*captures, kernel=kernel, speedup=speedup, fixes=fixes, use_cache=not no_cache)
    click.echo(json.dumps(answer, indent=2) if fmt == "json" else api.whatif_text(answer))


@main.command()
@click.argument("source", type=click.Path(path_type=Path))
@click.argument("sql")
@click.option("--format", "fmt", type=click.Choice(["table", "csv", "json"]), default="table")
def query(source, sql, fmt):
    """Run read-only SQL over a store or a capture (ingested on the fly).

    \b
    Example:
      nsight-advisor query report.sqlite "select name, sum(duration_ns) from kernels group by 1 order by 2 desc"
    """
    from nsight_advisor import api

    _out(api.query_text(source, sql, fmt))


@main.group()
def rules() -> None:
    """List, show, scaffold, test and lint rules."""


@rules.command("list")
@click.option("--rules-dir", "rules_dirs", multiple=True, type=click.Path(path_type=Path))
def rules_list(rules_dirs):
    """One line per rule: id, name, category, status."""
    from nsight_advisor import api

    _out(api.list_rules(rules_dirs))


@rules.command("show")
@click.argument("rule")
@click.option("--rules-dir", "rules_dirs", multiple=True, type=click.Path(path_type=Path))
def rules_show(rule, rules_dirs):
    """Docs, parameters (defaults, units) and cited principles of one rule."""
    from nsight_advisor import api

    _out(api.show_rule(rule, rules_dirs))


@rules.command("new")
@click.argument("name")
@click.option("--dir", "directory", type=click.Path(path_type=Path), default=Path("."),
              help="Folder to create the rule folder in.")
def rules_new(name, directory):
    """Scaffold a rule folder that passes lint and whose example case passes."""
    from nsight_advisor import api

    _out(api.new_rule(name, directory))


@rules.command("test")
@click.argument("directory", required=False, type=click.Path(path_type=Path))
def rules_test(directory):
    """Run every rule's cases.toml (built-in rules when no folder is given)."""
    from nsight_advisor import api

    text, ok = api.run_rule_tests(directory)
    _out(text)
    return EXIT_OK if ok else EXIT_FINDINGS


@rules.command("lint")
@click.argument("directory", required=False, type=click.Path(path_type=Path))
def rules_lint(directory):
    """Check rule folders: ids, params, SQL against the schema, evidence columns, docs, cases."""
    from nsight_advisor import api

    text, ok = api.lint_rules(directory)
    _out(text)
    return EXIT_OK if ok else EXIT_FINDINGS


def run() -> None:
    """The ``nsight-advisor`` program (and ``python -m nsight_advisor``): :func:`main`, then the process ends
    without tearing the interpreter down where the command finished (common/process_exit.py)."""
    from nsight_advisor.common.process_exit import exit_now

    try:
        main()
    except SystemExit as exc:
        exit_now(exc.code)
    exit_now(EXIT_OK)


if __name__ == "__main__":
    run()
