"""Every file a run reads besides its captures: the configuration (with its waivers) and the rule folders' files.

``-o`` may name none of them (:func:`nsight_advisor.workflow.refuse_inputs_as_output` is given this list with
the captures): a report written over ``nsight-advisor.toml`` or a rule's ``query.sql`` would destroy an input
as surely as one written over the capture.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from nsight_advisor.common.file_walk import walk_files

#: Files looked at under one rule folder before the walk stops (a rule folder holds a handful).
MAX_RULE_FILES = 100_000


def files_read(*, config_path: Path | None = None, rules_dirs: Iterable[Path] = (),
               cwd: Path | None = None) -> list[Path]:
    """The configuration file the run reads (``config_path``, else ./nsight-advisor.toml and ./pyproject.toml where
    they exist) and every file under the rule folders (``rules_dirs`` and the config's ``rules_dirs``)."""
    from nsight_advisor.engine.config import CONFIG_FILE, find_config
    from nsight_advisor.common.errors import NsightAdvisorError

    cwd = Path.cwd() if cwd is None else Path(cwd)
    configs = [Path(config_path)] if config_path is not None else [cwd / CONFIG_FILE, cwd / "pyproject.toml"]
    out = [p for p in configs if p.is_file()]
    folders = [Path(d) for d in rules_dirs]
    try:
        folders += [Path(d) for d in find_config(config_path, cwd).rules_dirs]
    except NsightAdvisorError:
        pass  # a bad config stops the run later, with its own message; nothing is written before that
    for folder in folders:
        out += _files_under(folder)
    return out


def _files_under(folder: Path) -> list[Path]:
    """Regular files under ``folder``, each real folder walked once (a symlink cycle ends), at most MAX_RULE_FILES."""
    return [Path(e.path) for e in walk_files(folder, regular_only=True, limit=MAX_RULE_FILES)]
