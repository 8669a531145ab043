"""Exception hierarchy. Every error wattsched raises derives from :class:`WattschedError`."""

from __future__ import annotations


class WattschedError(Exception):
    """Base class of every wattsched error."""


class ConfigError(WattschedError):
    """A configuration file or option is invalid. The message names the file and key."""


class TraceError(WattschedError):
    """A workload trace is malformed. The message names the file, line and field."""

    def __init__(self, path: str, line: int | None, message: str, field: str | None = None):
        self.path = path
        self.line = line
        self.field = field
        where = path if line is None else f"{path}:{line}"
        if field:
            where += f" (field {field})"
        super().__init__(f"{where}: {message}")


class PolicyError(WattschedError):
    """A policy produced an invalid plan or could not be built."""


class PlanViolation(PolicyError):
    """``check_plan`` rejected a plan. ``problems`` lists every violation found."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("plan rejected by the guard: " + "; ".join(problems))


class TelemetryError(WattschedError):
    """Power telemetry could not be read."""


class SlurmCommandError(WattschedError):
    """A Slurm command failed. Carries the command, exit code, stdout and stderr."""

    def __init__(self, cmd: list[str], returncode: int, stdout: str = "", stderr: str = ""):
        self.cmd = cmd
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        super().__init__(f"{' '.join(cmd)!r} exited with {returncode}: {stderr.strip() or stdout.strip()}")


class MissingDependencyError(WattschedError, ImportError):
    """An optional dependency needed for the requested operation is not installed.

    The one error for a missing extra: Parquet tables without pyarrow, a policy or
    predictor whose module needs a package that is not installed
    (:class:`~wattsched.policies.UnavailablePolicy` and
    :class:`~wattsched.predictors.UnavailablePredictor` derive from it). The
    message names the package and the extra to install.
    """
