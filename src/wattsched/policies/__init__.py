"""Policy registry.

Built-in policies are registered by short name and imported lazily, so that a
policy whose optional dependency is missing keeps its name and explains
itself instead of vanishing. Third-party policies register under the entry
point group ``wattsched.policies``; those are only looked at for names that
are not built in.
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from typing import Any

from pydantic import ValidationError

from wattsched.errors import ConfigError, PolicyError
from wattsched.policies.base import BasePolicy, Policy

_BUILTIN: dict[str, str] = {
    "fcfs": "wattsched.policies.fcfs:FcfsPolicy",
    "easy": "wattsched.policies.easy:EasyPolicy",
    "easy-pc": "wattsched.policies.easy_pc:EasyPcPolicy",
    "easy-saf": "wattsched.policies.easy_pc:EasySafPolicy",
    "knapsack": "wattsched.policies.knapsack:KnapsackPolicy",
}

ENTRY_POINT_GROUP = "wattsched.policies"


class UnavailablePolicy(PolicyError):
    """A known policy whose module cannot be imported (an optional dependency is missing)."""


def available() -> list[str]:
    """Names of every policy: built-in first, then plugins."""
    names = list(_BUILTIN)
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name not in names:
            names.append(ep.name)
    return names


def policy_class(name: str) -> type[Policy]:
    """Import and return the class registered as ``name``."""
    target = _BUILTIN.get(name)
    if target is None:
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            if ep.name == name:
                try:
                    return ep.load()
                except ImportError as exc:
                    raise UnavailablePolicy(f"policy {name!r} cannot be loaded: {exc}") from exc
        raise PolicyError(f"unknown policy {name!r}; available: {', '.join(available())}")
    module, _, attr = target.partition(":")
    try:
        return getattr(importlib.import_module(module), attr)
    except ImportError as exc:
        missing = getattr(exc, "name", None) or str(exc)
        raise UnavailablePolicy(f"policy {name!r} needs {missing}, which is not installed ({exc})") from exc


def make_policy(name: str, params: dict[str, Any] | None = None, *, source: str = "params") -> Policy:
    """Build policy ``name`` with ``params`` validated against its params model.

    Errors name the offending key as ``{source}.{key}``.
    """
    cls = policy_class(name)
    try:
        return cls(dict(params or {}))
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            key = ".".join(str(p) for p in err["loc"])
            lines.append(f"{source}.{key}: {err['msg']}")
        raise ConfigError(f"invalid parameters for policy {name!r}:\n  " + "\n  ".join(lines)) from None


__all__ = ["BasePolicy", "Policy", "UnavailablePolicy", "available", "make_policy", "policy_class"]
