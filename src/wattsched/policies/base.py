"""The policy contract.

A policy turns a :class:`~wattsched.model.snapshot.Snapshot` into a
:class:`~wattsched.model.plan.Plan`. It never acts and never reads a clock:
time comes in the snapshot. Whatever it wants to remember between calls lives
in the explicit ``state`` object the caller keeps (the simulator engine, or
the daemon's state store), created by :meth:`Policy.init_state`: an instance
of the policy's declared ``State`` model (a
:class:`~wattsched.model.state.PolicyState`), which round-trips through JSON.
"""

from __future__ import annotations

from typing import ClassVar, Protocol, runtime_checkable

from pydantic import BaseModel

from wattsched.model.plan import Plan
from wattsched.model.snapshot import Snapshot
from wattsched.model.state import NoState, PolicyState
from wattsched.plugins import NoParams, Parametrized

__all__ = ["BasePolicy", "NoParams", "NoState", "Policy", "PolicyState"]


@runtime_checkable
class Policy(Protocol):
    name: ClassVar[str]
    Params: ClassVar[type[BaseModel]]
    State: ClassVar[type[PolicyState]]
    wants_empty_queue_calls: ClassVar[bool]
    wants_end_table: ClassVar[bool]
    wants_forecast: ClassVar[bool]

    def init_state(self) -> PolicyState: ...

    def decide(self, snapshot: Snapshot, state: PolicyState | None = None) -> Plan: ...


class BasePolicy(Parametrized):
    """Optional base: stores typed parameters, gives ``get_params`` and ``repr``."""

    State: ClassVar[type[PolicyState]] = NoState
    """The policy's state model; :meth:`init_state` returns a fresh instance."""
    wants_empty_queue_calls: ClassVar[bool] = False
    """Policies that manage nodes (caps, shutdown) set this to be called even when no job is pending."""
    wants_end_table: ClassVar[bool] = False
    """Policies that walk running jobs' ends with their power set this to get ``snapshot.end_table`` in replay."""
    wants_forecast: ClassVar[bool] = False
    """Policies that read ``snapshot.forecast`` set this to have the simulator fill it (the daemon always does)."""

    def init_state(self) -> PolicyState:
        return self.State()

    def decide(self, snapshot: Snapshot, state: PolicyState | None = None) -> Plan:  # pragma: no cover
        raise NotImplementedError
