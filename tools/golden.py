"""Golden outputs: ``analyze``'s JSON and Markdown for three real captures, kept under tests/golden/ and reviewed as
diffs when they change.

    python -m tools.golden            # exit 1 naming the outputs that differ from tests/golden/ (with a diff)
    python -m tools.golden --update   # rewrite tests/golden/ from the current code

One capture per kind of input: an Nsight Systems export (two GPUs, a training step), an Nsight Compute report and
a PyTorch profiler trace, all from ../shared/traces. What changes from run to run is normalized away: each rule's
``elapsed_s`` (0) and the tool's version (``VERSION``); nothing else in these outputs depends on the machine, the
path or the clock.
"""

from __future__ import annotations

import difflib
import json
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TRACES = REPO.parent / "shared" / "traces"
GOLDEN = REPO / "tests" / "golden"
COMMAND = "python -m tools.golden --update"
CAPTURES = ("nsys/nsys_ai_mfu_2gpu_before.sqlite", "ncu/cuda_mlp_inference.ncu-rep", "kineto/alexnet_trace.json.gz")


def normalize_json(data: dict) -> dict:
    """``analyze --format json``'s object without what changes between identical runs."""
    data = json.loads(json.dumps(data))
    data.get("tool", {})["version"] = "VERSION"
    for outcome in data.get("outcomes", []):
        outcome["elapsed_s"] = 0
    return data


def outputs(capture: Path) -> dict[str, str]:
    """The normalized JSON and the Markdown report of one capture, analyzed afresh (a private cache)."""
    import nsight_advisor
    from nsight_advisor import __version__

    with tempfile.TemporaryDirectory(prefix="nsa-golden-") as cache:
        saved = os.environ.get("NSIGHT_ADVISOR_CACHE")
        os.environ["NSIGHT_ADVISOR_CACHE"] = cache
        try:
            run = nsight_advisor.open(capture, use_cache=False)
            data = normalize_json(json.loads(run.report("json")))
            markdown = run.report("md").replace(__version__, "VERSION")
        finally:
            if saved is None:
                os.environ.pop("NSIGHT_ADVISOR_CACHE", None)
            else:
                os.environ["NSIGHT_ADVISOR_CACHE"] = saved
    return {"json": json.dumps(data, indent=2, ensure_ascii=False, sort_keys=True) + "\n", "md": markdown}


def golden_path(capture: str, fmt: str) -> Path:
    return GOLDEN / f"{Path(capture).name}.{fmt}"


def differences(capture: str) -> list[str]:
    """A unified diff per output of ``capture`` that differs from its golden file (empty when all match)."""
    out = []
    for fmt, text in outputs(TRACES / capture).items():
        path = golden_path(capture, fmt)
        kept = path.read_text(encoding="utf-8") if path.is_file() else ""
        if kept != text:
            diff = difflib.unified_diff(kept.splitlines(), text.splitlines(), f"{path.name} (kept)",
                                        f"{path.name} (now)", lineterm="", n=2)
            out.append("\n".join(list(diff)[:80]))
    return out


def main(argv: list[str]) -> int:
    if not TRACES.exists():
        print(f"the real traces are not at {TRACES}", file=sys.stderr)
        return 2
    if "--update" in argv:
        GOLDEN.mkdir(parents=True, exist_ok=True)
        for capture in CAPTURES:
            for fmt, text in outputs(TRACES / capture).items():
                path = golden_path(capture, fmt)
                if not path.is_file() or path.read_text(encoding="utf-8") != text:
                    path.write_text(text, encoding="utf-8")
                    print(f"wrote {path.relative_to(REPO)}")
        return 0
    diffs = [d for capture in CAPTURES for d in differences(capture)]
    for diff in diffs:
        print(diff)
    if diffs:
        print(f"golden outputs differ; review the diff, then run `{COMMAND}` and commit tests/golden/")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
