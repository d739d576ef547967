"""The project's exception tree.

Every error a user can cause (a bad capture, a bad rule folder, a bad config value) is one of these.
The CLI turns them into one line on stderr and exit code 2; anything else is a bug (exit code 3).
"""


class NsightAdvisorError(Exception):
    """Base of every error nsight-advisor raises on purpose."""


class InputError(NsightAdvisorError):
    """A capture or store cannot be read: unknown format, truncated, missing tables, missing path."""


class RuleError(NsightAdvisorError):
    """A rule folder is invalid: bad TOML, unknown keys, undeclared parameters, broken SQL."""


class ConfigError(NsightAdvisorError):
    """A configuration file or ``--set`` value is invalid."""
