"""Node power caps through each node's BMC: ``ipmitool dcmi power`` over RMCP+ (``-I lanplus``).

:class:`IpmiCredentials` reads the BMC hosts and passwords from a file only its
owner can read; :class:`IpmiActuator` runs ``ipmitool`` (the one shell-out is
:meth:`IpmiActuator.run`) to set, activate, remove and read DCMI power limits and
to read the node's power. The commands are those of ipmitool 1.8.19
(REFERENCE-slurm-power.md §5.3)::

    ipmitool -I lanplus -H HOST -p PORT -U USER -E -C 3 dcmi power set_limit limit 250
    ipmitool -I lanplus -H HOST -p PORT -U USER -E -C 3 dcmi power activate
    ipmitool -I lanplus -H HOST -p PORT -U USER -E -C 3 dcmi power deactivate
    ipmitool -I lanplus -H HOST -p PORT -U USER -E -C 3 dcmi power get_limit
    ipmitool -I lanplus -H HOST -p PORT -U USER -E -C 3 dcmi power reading

Passwords
---------
A password is held in a :class:`Secret`, whose ``repr`` and ``str`` are stars. It
reaches ipmitool only through the environment variable ``IPMI_PASSWORD`` with
``-E`` (``man ipmitool``: "-E  The remote server password is specified by the
environment variable IPMI_PASSWORD or IPMITOOL_PASSWORD. The IPMITOOL_PASSWORD
takes precedence", so an inherited ``IPMITOOL_PASSWORD`` is removed). A command
line can be read by every user through ``/proc/PID/cmdline``, an environment only
by the same user. Commands, stdout and stderr put in an :class:`IpmiError` or a
log line are redacted all the same, and no message of this module (errors in the
credentials file included) quotes a password.

The credentials file
--------------------
A regular file owned by the user running wattsched, mode 0600 or 0400, in YAML
(``.yaml``/``.yml``, or a first line of the form ``key: value``)::

    username: admin            # defaults for every node
    password: "s3cret"         # quote passwords in YAML: 0123 would be read as a number
    port: 623                  # optional, default 623
    cipher_suite: 3            # optional, default 3 (ipmitool -C)
    interface: lanplus         # optional; lanplus is the only interface
    nodes:
      node001: {host: 10.1.0.1}
      node002: {host: 10.1.0.2, port: 6230, username: root, password: "other"}

or as ``key=value`` lines, the per-node keys written ``NODE.key`` (blank lines and
lines starting with ``#`` are skipped; the value is the rest of the line, so a
password may contain ``#`` or ``=``)::

    username=admin
    password=s3cret
    node001.host=10.1.0.1
    node002.host=10.1.0.2
    node002.port=6230
    node002.password=other
"""

from __future__ import annotations

import logging
import math
import numbers
import os
import re
import shlex
import stat
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from wattsched.errors import ConfigError, WattschedError

__all__ = [
    "DCMI_LIMIT_MAX_W", "BmcEndpoint", "InvalidPowerLimit", "IpmiActuator", "IpmiCredentials", "IpmiError",
    "PowerLimit", "PowerReading", "Secret", "check_watts", "parse_power_limit", "parse_power_reading",
    "redact",
]

log = logging.getLogger(__name__)

DCMI_LIMIT_MAX_W = 0xFFFF
"""The power limit of DCMI Set Power Limit is a 16-bit field in watts (ipmitool ``ipmi_dcmi.h``)."""

REDACTED = "********"

_NODE_KEYS = ("host", "username", "password", "port", "cipher_suite", "interface")
_DEFAULT_KEYS = ("username", "password", "port", "cipher_suite", "interface")
_INTERFACES = ("lanplus",)


class Secret:
    """A password: ``repr``, ``str`` and formatting show stars; :meth:`reveal` gives the value.

    >>> s = Secret("hunter2")
    >>> s, str(s), f"{s}", s.reveal()
    (Secret('********'), '********', '********', 'hunter2')
    """

    __slots__ = ("_value",)

    def __init__(self, value: str):
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return f"Secret({REDACTED!r})"

    def __str__(self) -> str:
        return REDACTED

    def __format__(self, spec: str) -> str:
        return format(REDACTED, spec)

    def __eq__(self, other) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash((Secret, self._value))

    def __bool__(self) -> bool:
        return bool(self._value)

    def __reduce__(self):  # no pickles holding the password
        raise TypeError("a Secret cannot be pickled")


def redact(text: str, secrets: Iterable[str | Secret]) -> str:
    """``text`` with every occurrence of each secret replaced by stars.

    >>> redact("login as admin/hunter2 failed", [Secret("hunter2")])
    'login as admin/******** failed'
    """
    for s in secrets:
        value = s.reveal() if isinstance(s, Secret) else s
        if value:
            text = text.replace(value, REDACTED)
    return text


def _redact_command(cmd: Sequence[str], secrets: Iterable[str | Secret]) -> list[str]:
    secrets = list(secrets)
    out = [redact(str(a), secrets) for a in cmd]
    for i, a in enumerate(out[:-1]):
        if a == "-P":  # never used here, but a password given with -P is never shown either
            out[i + 1] = REDACTED
    return out


# ---------------------------------------------------------------------- errors


class IpmiError(WattschedError):
    """An ipmitool command failed: non-zero exit, time-out, or output that could not be parsed.

    Carries ``node``, ``command`` (the argv, password redacted; ``None`` when nothing
    was run), ``returncode`` (``None`` when it did not exit), ``stdout`` and
    ``stderr`` (both redacted).
    """

    def __init__(
        self,
        node: str,
        message: str,
        command: Sequence[str] | None = None,
        returncode: int | None = None,
        stdout: str = "",
        stderr: str = "",
    ):
        self.node = node
        self.command = list(command) if command is not None else None
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        text = f"node {node}: {message}"
        if self.command is not None:
            text += f"; command: {shlex.join(self.command)}"
        if stderr.strip():
            text += f"; stderr: {_one_line(stderr)}"
        super().__init__(text)


class InvalidPowerLimit(IpmiError, ValueError):
    """A power limit DCMI cannot carry (not a finite number of watts in 1..65535); nothing was run."""


def _one_line(text: str, limit: int = 500) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def check_watts(watts: Any, node: str = "?") -> int:
    """The DCMI power limit for ``watts``: an integer in 1..65535, rounded down (a cap never exceeds the request).

    >>> check_watts(250), check_watts(249.9)
    (250, 249)
    >>> check_watts(float("nan"), "n1")
    Traceback (most recent call last):
    ...
    wattsched.daemon.ipmi.InvalidPowerLimit: node n1: power limit nan W is not a finite number
    """
    if isinstance(watts, bool) or not isinstance(watts, numbers.Real):
        raise InvalidPowerLimit(node, f"power limit {watts!r} is not a number of watts")
    if not math.isfinite(watts):
        raise InvalidPowerLimit(node, f"power limit {watts!r} W is not a finite number")
    limit = math.floor(watts)
    if limit < 1:
        raise InvalidPowerLimit(node, f"power limit {watts!r} W must be positive (at least 1 W)")
    if limit > DCMI_LIMIT_MAX_W:
        raise InvalidPowerLimit(
            node, f"power limit {watts!r} W is above {DCMI_LIMIT_MAX_W} W, the largest a DCMI limit can carry"
        )
    return int(limit)


# ---------------------------------------------------------------------- credentials


@dataclass(frozen=True)
class BmcEndpoint:
    """How to reach one node's BMC. The password is a :class:`Secret`."""

    node: str
    host: str
    username: str
    password: Secret = field(repr=False)
    port: int = 623
    cipher_suite: int = 3
    interface: str = "lanplus"


@dataclass(frozen=True)
class IpmiCredentials:
    """The BMC of every node, read from a credentials file by :meth:`load`.

    ``endpoints`` maps node names to :class:`BmcEndpoint`; ``source`` names the file.
    """

    endpoints: Mapping[str, BmcEndpoint]
    source: str = "<memory>"

    def __repr__(self) -> str:
        return f"IpmiCredentials(source={self.source!r}, nodes={sorted(self.endpoints)!r})"

    @property
    def nodes(self) -> list[str]:
        return sorted(self.endpoints)

    def endpoint(self, node: str) -> BmcEndpoint:
        """The BMC of ``node``; a node missing from the file is a :class:`ConfigError`."""
        try:
            return self.endpoints[node]
        except KeyError:
            raise ConfigError(
                f"{self.source}: no BMC for node {node!r}: add `{node}.host=...` (or nodes: {{{node}: {{host: ...}}}})"
            ) from None

    def secrets(self) -> list[Secret]:
        return [e.password for e in self.endpoints.values()]

    @classmethod
    def load(cls, path: str | os.PathLike) -> IpmiCredentials:
        """Read a credentials file (YAML or ``key=value``, see the module docstring).

        The file must be a regular file owned by the running user with mode 0600
        or 0400; anything else is a :class:`ConfigError` naming the file and its
        mode or owner. Every problem in the content is reported at once, one per
        line, as ``FILE: key: message``; no message quotes a password.
        """
        label = str(path)
        text = _read_private_file(path, label)
        if _looks_like_yaml(path, text):
            raw, lines = _parse_yaml(text, label)
            return cls._build(raw, label, lines=lines)
        raw, problems = _parse_key_value(text)
        return cls._build(raw, label, key_value=True, problems=problems)

    @classmethod
    def from_mapping(cls, raw: Any, *, source: str = "<memory>") -> IpmiCredentials:
        """Build from the YAML layout (``username``, ``password``, ..., ``nodes: {NODE: {host: ...}}``).

        Unknown keys are reported by the mapping they are in, never quoted: a
        password written in the wrong place may be one.
        """
        return cls._build(raw, source)

    @classmethod
    def _build(
        cls,
        raw: Any,
        source: str,
        *,
        key_value: bool = False,
        problems: Sequence[str] = (),
        lines: Mapping[tuple, int] | None = None,
    ) -> IpmiCredentials:
        lines = lines or {}

        def unknown(path: tuple, valid: Sequence[str]) -> str:
            where = f"line {lines[path]}" if path in lines else (".".join(map(str, path[:-1])) or "top level")
            return f"{where}: unknown key (valid keys: {', '.join(valid)})"

        if not isinstance(raw, Mapping):
            raise ConfigError(f"{source}: expected a mapping of keys to values (username, password, nodes)")
        problems = list(problems)
        for key in raw:
            if key not in (*_DEFAULT_KEYS, "nodes"):
                problems.append(unknown((key,), (*_DEFAULT_KEYS, "nodes")))
        defaults: dict[str, Any] = {}
        bad_defaults = set()
        for key in _DEFAULT_KEYS:
            if key in raw:
                checked = _check_value(key, raw[key], key, problems)
                if checked is None:
                    bad_defaults.add(key)
                else:
                    defaults[key] = checked
        nodes = raw.get("nodes")
        if not nodes:
            problems.append("no nodes: give each node's BMC host (`NODE.host=...`, or nodes: {NODE: {host: ...}})")
            nodes = {}
        elif not isinstance(nodes, Mapping):
            problems.append("nodes: expected a mapping of node names to {host: ..., ...}")
            nodes = {}
        endpoints: dict[str, BmcEndpoint] = {}
        for node, entry in nodes.items():
            where = str(node) if key_value else f"nodes.{node}"
            if not isinstance(node, str) or not node or any(c.isspace() for c in node):
                problems.append(f"{where}: a node name must be a non-empty string without spaces")
                continue
            if not isinstance(entry, Mapping):
                problems.append(f"{where}: expected a mapping such as {{host: 10.1.0.1}}")
                continue
            values = dict(defaults)
            ok = True
            for key, value in entry.items():
                if key not in _NODE_KEYS:
                    problems.append(unknown(("nodes", node, key), _NODE_KEYS))
                    ok = False
                    continue
                checked = _check_value(key, value, f"{where}.{key}", problems)
                if checked is None:
                    ok = False
                else:
                    values[key] = checked
            for key in ("host", "username", "password"):
                if key not in values and key not in entry and key not in bad_defaults:
                    if key_value:
                        hint = f"`{node}.host=...`" if key == "host" else f"`{key}=...` or `{node}.{key}=...`"
                    else:
                        hint = f"nodes.{node}.host" if key == "host" else f"`{key}` or nodes.{node}.{key}"
                    problems.append(f"{where}.{key}: required key is missing: set {hint}")
                    ok = False
            if ok and not bad_defaults:
                endpoints[node] = BmcEndpoint(node=node, **values)
        if problems:
            # "line N: message" problems become FILE:N: message, the one error shape
            lines = [re.sub(r"^line (\d+): ", lambda m: f"{source}:{m.group(1)}: ", p) if p.startswith("line ")
                     else f"{source}: {p}" for p in dict.fromkeys(problems)]
            exc = ConfigError("\n".join(lines))
            exc.problems = lines
            raise exc
        return cls(endpoints=MappingProxyType(dict(sorted(endpoints.items()))), source=source)


def _read_private_file(path: str | os.PathLike, label: str) -> str:
    # Open first, then check what was opened (fstat): no window between the check and the read.
    # O_NONBLOCK: opening a FIFO must not hang before it is refused as "not a regular file".
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise ConfigError(f"{label}: no such file (the IPMI credentials file)") from None
    except OSError as exc:
        raise ConfigError(f"{label}: cannot open the IPMI credentials file: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ConfigError(
                f"{label}: not a regular file ({_file_kind(st.st_mode)}); the IPMI credentials must be a regular "
                "file of mode 0600 owned by the user running wattsched"
            )
        mode = stat.S_IMODE(st.st_mode)
        euid = os.geteuid()
        if st.st_uid != euid:
            raise ConfigError(
                f"{label}: owned by uid {st.st_uid}, not by the user running wattsched (uid {euid}); the IPMI "
                f"credentials file (mode {mode:04o}) must belong to that user: chown it and chmod 600 it"
            )
        if mode not in (0o600, 0o400):
            raise ConfigError(
                f"{label}: mode {mode:04o} is not allowed for the IPMI credentials file: it must be 0600 or 0400 "
                f"(readable by its owner only); run `chmod 600 {label}`"
            )
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    except OSError as exc:
        raise ConfigError(f"{label}: cannot read the IPMI credentials file: {exc.strerror}") from None
    finally:
        os.close(fd)
    try:
        return b"".join(chunks).decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{label}: not UTF-8 text") from None


def _file_kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "not a regular file"  # pragma: no cover


def _significant_lines(text: str):
    for n, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            yield n, stripped


def _looks_like_yaml(path: str | os.PathLike, text: str) -> bool:
    suffix = Path(path).suffix.lower()
    if suffix in (".yaml", ".yml"):
        return True
    for _, line in _significant_lines(text):
        eq, colon = line.find("="), line.find(":")
        return not (eq >= 0 and (colon < 0 or eq < colon))
    return False


def _parse_yaml(text: str, label: str) -> tuple[Any, dict[tuple, int]]:
    """The data of a YAML file and the line of each top-level and per-node key."""
    import yaml

    loader = yaml.SafeLoader(text)
    try:
        root = loader.get_single_node()
        data = loader.construct_document(root) if root is not None else None
    except yaml.MarkedYAMLError as exc:
        # exc's own text quotes the offending line, which may hold a password: give the position only
        mark = exc.problem_mark or exc.context_mark
        where = (f"{label}:{mark.line + 1}: invalid YAML (column {mark.column + 1})" if mark
                 else f"{label}: invalid YAML")
        raise ConfigError(f"{where}: {exc.problem or exc.context}") from None
    except yaml.YAMLError:
        raise ConfigError(f"{label}: invalid YAML") from None
    finally:
        loader.dispose()
    lines: dict[tuple, int] = {}

    def pairs(node):
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode):
                    yield key.value, key.start_mark.line + 1, value

    for key, line, value in pairs(root):
        lines[(key,)] = line
        if key == "nodes":
            for node, _, entry in pairs(value):
                for field_, fline, _ in pairs(entry):
                    lines[("nodes", node, field_)] = fline
    return data, lines


def _parse_key_value(text: str) -> tuple[dict[str, Any], list[str]]:
    """The YAML layout of a ``key=value`` file, and the problems of its lines."""
    raw: dict[str, Any] = {}
    nodes: dict[str, dict[str, str]] = {}
    seen: dict[str, int] = {}
    problems = []
    for n, line in _significant_lines(text):
        key, sep, value = line.partition("=")
        key = key.strip()
        if not sep or not key:
            problems.append(f"line {n}: expected key=value")  # the line itself may hold a password
            continue
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        node, dot, name = key.rpartition(".")
        # An unknown key is not quoted: it may be the start of a password written on a line of its own.
        if not dot and name not in _DEFAULT_KEYS:
            problems.append(f"line {n}: unknown key (valid keys: {', '.join(_DEFAULT_KEYS)}, "
                            f"and per node NODE.{', NODE.'.join(_NODE_KEYS)})")
            continue
        if dot and (not node or name not in _NODE_KEYS or any(c.isspace() for c in node)):
            problems.append(f"line {n}: unknown per-node key (valid keys: NODE.{', NODE.'.join(_NODE_KEYS)})")
            continue
        if key in seen:
            problems.append(f"line {n}: {key}: duplicate key (first at line {seen[key]})")
            continue
        seen[key] = n
        if dot:
            nodes.setdefault(node, {})[name] = value
        else:
            raw[name] = value
    raw["nodes"] = nodes
    return raw, problems


def _check_value(key: str, value: Any, where: str, problems: list[str]) -> Any:
    """The checked value of one field, or ``None`` after appending a problem. Never quotes a password."""
    if key == "password":
        if not isinstance(value, str):
            problems.append(f"{where}: must be a string: quote it in YAML (an unquoted number loses leading zeros)")
            return None
        if not value:
            problems.append(f"{where}: empty password")
            return None
        if "\0" in value or "\n" in value:
            problems.append(f"{where}: a password cannot contain a NUL or a line break")
            return None
        return Secret(value)
    if key in ("host", "username"):
        if not isinstance(value, str) or not value.strip():
            problems.append(f"{where}: expected a non-empty string")
            return None
        value = value.strip()
        if value.startswith("-") or any(c.isspace() or c == "\0" for c in value):
            problems.append(f"{where}: {value!r} cannot start with '-' or contain spaces")
            return None
        return value
    if key in ("port", "cipher_suite"):
        lo, hi = (1, 65535) if key == "port" else (0, 17)
        number = value
        if isinstance(value, str) and re.fullmatch(r"\s*\d+\s*", value):
            number = int(value)
        if isinstance(number, bool) or not isinstance(number, int) or not lo <= number <= hi:
            problems.append(f"{where}: expected an integer from {lo} to {hi}, got {value!r}")
            return None
        return number
    if key == "interface":
        if value not in _INTERFACES:
            problems.append(f"{where}: only lanplus (RMCP+, IPMI 2.0) is supported, got {value!r}")
            return None
        return value
    raise AssertionError(key)  # pragma: no cover


# ---------------------------------------------------------------------- output parsers


@dataclass(frozen=True)
class PowerReading:
    """``ipmitool dcmi power reading``: watts now, and min/max/average over the sampling period if printed."""

    watts: int
    min_w: int | None = None
    max_w: int | None = None
    avg_w: int | None = None
    active: bool | None = None


@dataclass(frozen=True)
class PowerLimit:
    """``ipmitool dcmi power get_limit``: the configured limit and whether it is active."""

    limit_w: int
    active: bool
    exception_action: str | None = None
    correction_ms: int | None = None
    sample_s: int | None = None


_READING = re.compile(r"Instantaneous power reading:\s*(\d+)\s*Watts")
_MIN = re.compile(r"Minimum during sampling period:\s*(\d+)\s*Watts")
_MAX = re.compile(r"Maximum during sampling period:\s*(\d+)\s*Watts")
_AVG = re.compile(r"Average power reading over sample period:\s*(\d+)\s*Watts")
_READING_STATE = re.compile(r"Power reading state is:\s*(activated|deactivated)")
_LIMIT_STATE = re.compile(r"Current Limit State:\s*(Power Limit Active|No Active Power Limit)")
_LIMIT = re.compile(r"Power Limit:\s*(\d+)\s*Watts")
_ACTION = re.compile(r"Exception actions:[ \t]*(.+?)[ \t]*$", re.MULTILINE)
_CORRECTION = re.compile(r"Correction time:\s*(\d+)\s*milliseconds")
_SAMPLE = re.compile(r"Sampling period:\s*(\d+)\s*seconds")


def _int(pattern: re.Pattern, text: str) -> int | None:
    m = pattern.search(text)
    return int(m.group(1)) if m else None


def parse_power_reading(text: str) -> PowerReading:
    """Parse ``dcmi power reading``; ``ValueError`` if there is no instantaneous reading.

    >>> parse_power_reading("    Instantaneous power reading:      250 Watts\\n").watts
    250
    """
    watts = _int(_READING, text)
    if watts is None:
        raise ValueError("no 'Instantaneous power reading: N Watts' line")
    state = _READING_STATE.search(text)
    return PowerReading(
        watts=watts, min_w=_int(_MIN, text), max_w=_int(_MAX, text), avg_w=_int(_AVG, text),
        active=(state.group(1) == "activated") if state else None,
    )


def parse_power_limit(text: str) -> PowerLimit:
    """Parse ``dcmi power get_limit``; ``ValueError`` without the limit state and the limit.

    >>> parse_power_limit("Current Limit State: Power Limit Active\\nPower Limit:  250 Watts\\n")
    PowerLimit(limit_w=250, active=True, exception_action=None, correction_ms=None, sample_s=None)
    """
    state = _LIMIT_STATE.search(text)
    limit = _int(_LIMIT, text)
    if state is None or limit is None:
        raise ValueError("no 'Current Limit State: ...' and 'Power Limit: N Watts' lines")
    action = _ACTION.search(text)
    return PowerLimit(
        limit_w=limit, active=state.group(1) == "Power Limit Active",
        exception_action=action.group(1) if action else None,
        correction_ms=_int(_CORRECTION, text), sample_s=_int(_SAMPLE, text),
    )


# ---------------------------------------------------------------------- the actuator


class IpmiActuator:
    """Sets, removes and reads DCMI power limits with ``ipmitool``.

    Parameters
    ----------
    credentials
        The nodes' BMCs (:meth:`IpmiCredentials.load`).
    ipmitool
        The ipmitool executable (looked up on ``PATH`` unless a path).
    timeout_s
        Time limit of one ipmitool run. ipmitool alone gives up on a silent BMC
        only after about 20 s (lanplus retries), so this bounds it.
    run
        Runs a command like :func:`subprocess.run` (injected in tests).
    """

    def __init__(
        self,
        credentials: IpmiCredentials,
        ipmitool: str = "ipmitool",
        timeout_s: float = 10,
        *,
        run: Callable[..., subprocess.CompletedProcess] = subprocess.run,
    ):
        self.credentials = credentials
        self.ipmitool = ipmitool
        self.timeout_s = timeout_s
        self._run = run

    def __repr__(self) -> str:
        return f"IpmiActuator({self.credentials!r}, ipmitool={self.ipmitool!r}, timeout_s={self.timeout_s!r})"

    # ------------------------------------------------------------------ actions

    def set_limit(self, node: str, watts: float) -> int:
        """Set ``node``'s power limit to ``watts`` (rounded down) and activate it; return the limit set.

        An invalid limit raises :class:`InvalidPowerLimit` before anything runs.
        """
        limit = check_watts(watts, node)
        out = self.run(node, ["power", "set_limit", "limit", str(limit)])
        # ipmitool 1.8.19 prints the limit read back after setting it; a BMC that kept another value is a failure
        shown = _int(_LIMIT, out)
        if shown is not None and shown != limit:
            cmd = self.command(node, ["power", "set_limit", "limit", str(limit)])
            raise IpmiError(node, f"the BMC kept a power limit of {shown} W after set_limit {limit}",
                            _redact_command(cmd, self.credentials.secrets()), 0, out)
        self.run(node, ["power", "activate"])
        log.info("node %s: DCMI power limit %d W set and activated", node, limit)
        return limit

    def remove_limit(self, node: str) -> None:
        """Deactivate ``node``'s power limit (the limit value stays stored in the BMC)."""
        self.run(node, ["power", "deactivate"])
        log.info("node %s: DCMI power limit deactivated", node)

    def reading(self, node: str) -> PowerReading:
        """``node``'s power now (``dcmi power reading``)."""
        return self._parsed(node, ["power", "reading"], parse_power_reading)

    def get_limit(self, node: str) -> PowerLimit:
        """``node``'s configured power limit and whether it is active (``dcmi power get_limit``)."""
        return self._parsed(node, ["power", "get_limit"], parse_power_limit)

    # ------------------------------------------------------------------ running

    def command(self, node: str, dcmi_args: Sequence[str]) -> list[str]:
        """The argv that runs ``ipmitool ... dcmi DCMI_ARGS`` against ``node``'s BMC (it holds no password)."""
        e = self.credentials.endpoint(node)
        return [self.ipmitool, "-I", e.interface, "-H", e.host, "-p", str(e.port), "-U", e.username, "-E",
                "-C", str(e.cipher_suite), "dcmi", *dcmi_args]

    def run(self, node: str, dcmi_args: Sequence[str]) -> str:
        """Run one ipmitool DCMI command for ``node``; return stdout or raise :class:`IpmiError`.

        This is the module's only shell-out. The password goes in ``IPMI_PASSWORD``.
        """
        e = self.credentials.endpoint(node)
        cmd = self.command(node, dcmi_args)
        shown = _redact_command(cmd, [e.password])
        env = {k: v for k, v in os.environ.items() if k not in ("IPMITOOL_PASSWORD", "IPMI_PASSWORD")}
        env["IPMI_PASSWORD"] = e.password.reveal()
        log.debug("node %s: %s", node, shlex.join(shown))
        try:
            proc = self._run(cmd, env=env, capture_output=True, text=True, timeout=self.timeout_s, check=False)
        except subprocess.TimeoutExpired as exc:
            raise IpmiError(
                node, f"ipmitool timed out after {self.timeout_s:g} s (is the BMC {e.host}:{e.port} reachable?)",
                shown, None, self._clean(node, _text(exc.stdout)), self._clean(node, _text(exc.stderr)),
            ) from None
        except OSError as exc:
            raise IpmiError(node, f"cannot run {self.ipmitool}: {exc.strerror} (is ipmitool installed?)",
                            shown) from None
        stdout, stderr = self._clean(node, proc.stdout), self._clean(node, proc.stderr)
        if proc.returncode != 0:
            raise IpmiError(node, f"ipmitool exited with {proc.returncode}", shown, proc.returncode, stdout, stderr)
        return stdout

    def _parsed(self, node: str, dcmi_args: Sequence[str], parse):
        out = self.run(node, dcmi_args)
        try:
            return parse(out)
        except ValueError as exc:
            shown = _redact_command(self.command(node, dcmi_args), self.credentials.secrets())
            raise IpmiError(node, f"unexpected ipmitool output: {exc}: {_one_line(out, 300)!r}", shown, 0,
                            out) from None

    def _clean(self, node: str, text: str) -> str:
        return redact(text or "", [self.credentials.endpoint(node).password])


def _text(value) -> str:
    if value is None:
        return ""
    return value.decode(errors="replace") if isinstance(value, bytes) else value
