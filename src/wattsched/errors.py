"""Exception hierarchy. Every error wattsched raises derives from :class:`WattschedError`.

Every message that points at a file has one shape, ``FILE:LINE: KEY: message``
(:func:`located`; the line is left out only when it is unknown, the key when
the whole file or line is at fault). A problem with a command-line option reads
``--option: message``; the CLI prints every error after one ``wattsched: error:``
prefix.
"""

from __future__ import annotations

import os


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


class MissingDependencyError(WattschedError, ImportError):
    """An optional dependency needed for the requested operation is not installed.

    The one error for a missing extra: Parquet tables without pyarrow, a policy or
    predictor whose module needs a package that is not installed
    (:class:`~wattsched.policies.UnavailablePolicy` and
    :class:`~wattsched.predictors.UnavailablePredictor` derive from it). The
    message names the package and the extra to install.
    """


class OutputError(WattschedError):
    """An output file cannot be written: a value that does not fit its column, for instance."""


def damaged_database(path, what: object) -> str:
    """The message for an SQLite file that SQLite cannot read: ``FILE: the SQLite database is damaged (...)``.

    >>> damaged_database("st/state.db", "database disk image is malformed")
    'st/state.db: the SQLite database is damaged (database disk image is malformed); move it away or restore a copy'
    """
    return located(str(path), None, None, f"the SQLite database is damaged ({what}); move it away or restore a copy")


def damage_of(exc: BaseException) -> str | None:
    """What SQLite found damaged, if ``exc`` says the file is corrupt (not merely foreign or locked)."""
    import sqlite3

    text = str(exc)
    return text if isinstance(exc, sqlite3.DatabaseError) and "malformed" in text else None


def sqlite_damage(db) -> str | None:
    """SQLite's own integrity check (``PRAGMA quick_check``) of connection ``db``: None if sound, else one line."""
    import sqlite3

    try:
        rows = db.execute("PRAGMA quick_check(3)").fetchall()
    except sqlite3.DatabaseError as exc:  # not a database at all is a foreign file, not a damaged one
        return damage_of(exc)
    lines = [line for r in rows if r[0] != "ok" for line in str(r[0]).splitlines() if not line.startswith("***")]
    return "; ".join(lines[:2]) + ("; ..." if len(lines) > 2 else "") if lines else None


def describe(exc: BaseException) -> str | None:
    """The one-line ``FILE: what is wrong`` message of an error a command ends with, or None for a bug.

    The CLI's one error boundary: wattsched's own errors, and the classes of
    errors that bad input raises from inside libraries (a damaged SQLite file,
    undecodable text, an operating-system error, a parser's ValueError, memory
    exhausted by an input's size), are reported as one line; anything else is
    a bug and keeps its traceback.

    >>> describe(FileNotFoundError(2, "No such file or directory", "t.swf"))
    't.swf: No such file or directory'
    >>> describe(UnicodeDecodeError("utf-8", b"\\xff", 0, 1, "invalid start byte"))
    'not UTF-8 text: byte 0xff at offset 0 (invalid start byte); save the file as UTF-8'
    >>> describe(KeyError("x")) is None
    True
    """
    import sqlite3

    if isinstance(exc, WattschedError):
        return str(exc)
    source = getattr(exc, "filename", None)
    if isinstance(exc, sqlite3.DatabaseError):
        if isinstance(exc, sqlite3.OperationalError) and "malformed" not in str(exc):
            return located(source, None, None, f"SQLite: {exc}")
        if source is None:
            return f"an SQLite database is damaged ({exc}); move it away or restore a copy"
        return damaged_database(source, exc)
    if isinstance(exc, UnicodeDecodeError):
        bad = exc.object[exc.start:exc.start + 1].hex()
        return located(source, None, None, f"not {exc.encoding.upper()} text: byte 0x{bad} at offset {exc.start} "
                       f"({exc.reason}); save the file as UTF-8")
    if isinstance(exc, OSError):
        if exc.filename is not None and exc.strerror:
            what = f"{exc.filename}: {exc.strerror}"
            return what if exc.filename2 is None else f"{what} ({exc.filename2})"
        return str(exc) or type(exc).__name__
    if isinstance(exc, MemoryError):
        return located(source, None, None, f"not enough memory ({exc or 'MemoryError'}); give a smaller input "
                       "or a coarser parameter")
    if isinstance(exc, ValueError):  # a parser's complaint about its input (hostlists, addresses, parameters)
        return located(source, None, None, str(exc) or type(exc).__name__)
    return None


def read_config_text(path: str | os.PathLike, label: str | None = None) -> str:
    """The UTF-8 text of an input file, or :class:`ConfigError` ``FILE: cannot read: why`` / ``FILE: not UTF-8 ...``.

    ``label`` names the file in the message (default: ``path``).
    """
    label = str(path) if label is None else label
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as exc:
        raise ConfigError(f"{label}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{label}: {describe(exc)}") from None
