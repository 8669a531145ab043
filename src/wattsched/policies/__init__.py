"""Policy registry.

Built-in policies are registered by short name and imported lazily, so that a
policy whose optional dependency is missing keeps its name and explains
itself instead of vanishing. Third-party policies register under the entry
point group ``wattsched.policies``; those are only looked at for names that
are not built in.
"""

from __future__ import annotations

from typing import Any

from wattsched.errors import MissingDependencyError, PolicyError
from wattsched.plugins import Registry
from wattsched.policies.base import BasePolicy, Policy

_BUILTIN: dict[str, str] = {
    "fcfs": "wattsched.policies.fcfs:FcfsPolicy",
    "easy": "wattsched.policies.easy:EasyPolicy",
    "easy-pc": "wattsched.policies.easy_pc:EasyPcPolicy",
    "easy-saf": "wattsched.policies.easy_pc:EasySafPolicy",
    "knapsack": "wattsched.policies.knapsack:KnapsackPolicy",
    "energy-bud": "wattsched.policies.budget:BudgetPolicy",
    "reduce-pc": "wattsched.policies.budget:ReducePcPolicy",
    "powercap-easy": "wattsched.policies.budget:PowercapEasyPolicy",
    "easy-shutdown": "wattsched.policies.budget:EasyShutdownPolicy",
    "dr": "wattsched.policies.dr:DrPolicy",
    "dr-easy-pc": "wattsched.policies.dr:DrEasyPcPolicy",
    "performance": "wattsched.policies.dr:PerformancePolicy",
    "powersave": "wattsched.policies.dr:PowersavePolicy",
    "ls": "wattsched.policies.prb:LsPolicy",
    "dec": "wattsched.policies.cp:DecPolicy",
    "bf": "wattsched.policies.bf:BfPolicy",
    "simple": "wattsched.policies.rapl:SimplePolicy",
    "dvfs": "wattsched.policies.dvfs:DvfsPolicy",
    "dynshare": "wattsched.policies.rapl:DynSharePolicy",
    "dec+rapl": "wattsched.policies.cp:DecRaplPolicy",
    "parm": "wattsched.policies.parm:ParmPolicy",
}

ENTRY_POINT_GROUP = "wattsched.policies"


class UnavailablePolicy(PolicyError, MissingDependencyError):
    """A known policy whose module cannot be imported (an optional dependency is missing)."""


REGISTRY = Registry("policy", _BUILTIN, ENTRY_POINT_GROUP, UnavailablePolicy)


def available() -> list[str]:
    """Names of every policy: built-in first, then plugins."""
    return REGISTRY.available()


def policy_class(name: str) -> type[Policy]:
    """Import and return the class registered as ``name``."""
    return REGISTRY.load(name)


def make_policy(name: str, params: dict[str, Any] | None = None, *, source="params",
                name_source: str | None = None) -> Policy:
    """Build policy ``name`` with ``params`` validated against its params model.

    Errors name the offending key as ``{source}.{key}``.
    """
    return REGISTRY.make(name, params, source=source, name_source=name_source)


__all__ = ["BasePolicy", "Policy", "UnavailablePolicy", "available", "make_policy", "policy_class"]
