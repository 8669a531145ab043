"""The policy contract.

A policy turns a :class:`~wattsched.model.snapshot.Snapshot` into a
:class:`~wattsched.model.plan.Plan`. It never acts and never reads a clock:
time comes in the snapshot. Whatever it wants to remember between calls lives
in the explicit ``state`` object the caller keeps (the simulator engine, or
the daemon's state store), created by :meth:`Policy.init_state`.
"""

from __future__ import annotations

from typing import Any, ClassVar, Protocol, runtime_checkable

from pydantic import BaseModel

from wattsched.model.plan import Plan
from wattsched.model.snapshot import Snapshot
from wattsched.plugins import NoParams, Parametrized

__all__ = ["BasePolicy", "NoParams", "Policy"]


@runtime_checkable
class Policy(Protocol):
    name: ClassVar[str]
    Params: ClassVar[type[BaseModel]]

    def init_state(self) -> dict[str, Any]: ...

    def decide(self, snapshot: Snapshot, state: dict[str, Any] | None = None) -> Plan: ...


class BasePolicy(Parametrized):
    """Optional base: stores typed parameters, gives ``get_params`` and ``repr``."""

    wants_empty_queue_calls: ClassVar[bool] = False
    """Policies that manage nodes (caps, shutdown) set this to be called even when no job is pending."""

    def init_state(self) -> dict[str, Any]:
        return {}

    def decide(self, snapshot: Snapshot, state: dict[str, Any] | None = None) -> Plan:  # pragma: no cover
        raise NotImplementedError
