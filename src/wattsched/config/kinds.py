"""The kinds of config file ``wattsched check-config`` knows, in one static table.

Each kind names its model as ``"module:attribute"``, imported when asked for,
so telling a file's kind needs no import side effect:
``detect_config_kind("deploy/examples/wattsched.yaml")`` works in a fresh
interpreter.
"""

from __future__ import annotations

import importlib
import os
import typing

from pydantic import (
    BaseModel,
)

from wattsched.config.base import _label, _require_mapping, read_yaml
from wattsched.errors import ConfigError, located

__all__ = [
    "CONFIG_KINDS", "ConfigKind", "detect_config_kind",
]


class ConfigKind(typing.NamedTuple):
    """A kind of config file ``wattsched check-config`` knows: its model (``"module:attribute"``) and the keys
    that betray it."""

    target: str
    markers: tuple[str, ...]

    @property
    def model(self) -> type[BaseModel]:
        """The model class, imported now."""
        module, _, attr = self.target.partition(":")
        return getattr(importlib.import_module(module), attr)


CONFIG_KINDS: dict[str, ConfigKind] = {
    "simulation": ConfigKind("wattsched.config.sim:SimConfig", ("trace",)),
    "daemon": ConfigKind("wattsched.config.daemon:DaemonConfig", ("slurm", "gate", "poll_interval_s")),
    "sweep": ConfigKind("wattsched.sweep.spec:SweepConfig", ("axes", "grid")),
    "platform": ConfigKind("wattsched.config.platform:PlatformConfig", ("node_groups",)),
}
"""Kinds of config files by name, in the order ``check-config`` lists them."""


def detect_config_kind(path: str | os.PathLike) -> str:
    """Which kind of config a file is: its ``kind`` key if present, else guessed from its keys.

    Raises :class:`ConfigError` if the file cannot be read or its kind cannot be told.
    """
    label = _label(path)
    raw, lines = read_yaml(path, label=label)
    _require_mapping(raw, label)
    if "kind" in raw:
        kind = raw["kind"]
        if not isinstance(kind, str) or kind not in CONFIG_KINDS:
            raise ConfigError(located(
                label, lines.get(("kind",)), "kind",
                f"unknown kind {kind!r}; choose one of {', '.join(sorted(CONFIG_KINDS))}"
            ))
        return kind
    matches = [name for name, k in CONFIG_KINDS.items() if any(m in raw for m in k.markers)]
    if len(matches) == 1:
        return matches[0]
    hint = ", ".join(f"{name} (has {' or '.join(k.markers)})" for name, k in CONFIG_KINDS.items())
    what = "matches several kinds" if matches else "is not a known kind of config"
    raise ConfigError(f"{label}: this file {what}; add a 'kind:' key. Known kinds: {hint}")
