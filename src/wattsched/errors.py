"""Exception hierarchy. Every error wattsched raises derives from :class:`WattschedError`.

Every message that points at a file has one shape, ``FILE:LINE: KEY: message``
(:func:`located`; the line is left out only when it is unknown, the key when
the whole file or line is at fault). A problem with a command-line option reads
``--option: message``; the CLI prints every error after one ``wattsched: error:``
prefix.
"""

from __future__ import annotations


def located(source: str | None, line: int | None = None, key: str | None = None, message: str = "") -> str:
    """One error line: ``FILE:LINE: KEY: message``, leaving out the parts that are unknown.

    >>> located("sim.yaml", 4, "cap_w", "must be positive")
    'sim.yaml:4: cap_w: must be positive'
    >>> located("t.swf", None, None, "no such file")
    't.swf: no such file'
    >>> located("--seed", None, None, "too large")
    '--seed: too large'
    """
    where = source or ""
    if line is not None and where:
        where = f"{where}:{line}"
    parts = [p for p in (where, key) if p]
    return ": ".join([*parts, message])


class WattschedError(Exception):
    """Base class of every wattsched error."""


class ConfigError(WattschedError):
    """A configuration file or option is invalid. The message names the file, line and key (or the option)."""


class OptionError(ConfigError):
    """A command-line option is invalid: ``--option: message``."""

    def __init__(self, option: str, message: str):
        self.option = option
        super().__init__(f"{option}: {message}")


class TraceError(WattschedError):
    """A workload trace is malformed. The message names the file, line and field: ``FILE:LINE: FIELD: message``."""

    def __init__(self, path: str, line: int | None, message: str, field: str | None = None):
        self.path = path
        self.line = line
        self.field = field
        super().__init__(located(path, line, field, message))


class PolicyError(WattschedError):
    """A policy produced an invalid plan or could not be built."""


class PlanViolation(PolicyError):
    """``check_plan`` rejected a plan. ``problems`` lists every violation found."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("plan rejected by the guard: " + "; ".join(problems))


class PredictorError(WattschedError):
    """A predictor could not be built (unknown name, missing dependency)."""


class TelemetryError(WattschedError):
    """Power telemetry could not be read."""


class ActuationError(WattschedError):
    """A node actuator refused or could not apply a setting."""


class StateError(WattschedError):
    """The daemon's state store cannot be read (corrupt, unknown schema)."""


class RunDirError(WattschedError):
    """A run directory is incomplete or inconsistent."""


class SlurmCommandError(WattschedError):
    """A Slurm command failed. Carries the command, exit code, stdout and stderr."""

    def __init__(self, cmd: list[str], returncode: int, stdout: str = "", stderr: str = ""):
        self.cmd = cmd
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        super().__init__(f"{' '.join(cmd)!r} exited with {returncode}: {stderr.strip() or stdout.strip()}")
