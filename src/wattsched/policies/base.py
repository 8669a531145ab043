"""The policy contract.

A policy turns a :class:`~wattsched.model.snapshot.Snapshot` into a
:class:`~wattsched.model.plan.Plan`. It never acts and never reads a clock:
time comes in the snapshot. Whatever it wants to remember between calls lives
in the explicit ``state`` object the caller keeps (the simulator engine, or
the daemon's state store), created by :meth:`Policy.init_state`.
"""

from __future__ import annotations

from typing import Any, ClassVar, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

from wattsched.model.plan import Plan
from wattsched.model.snapshot import Snapshot


class NoParams(BaseModel):
    """A policy without parameters."""

    model_config = ConfigDict(extra="forbid", frozen=True)


@runtime_checkable
class Policy(Protocol):
    name: ClassVar[str]
    Params: ClassVar[type[BaseModel]]

    def init_state(self) -> dict[str, Any]: ...

    def decide(self, snapshot: Snapshot, state: dict[str, Any] | None = None) -> Plan: ...


class BasePolicy:
    """Optional base: stores typed parameters, gives ``get_params`` and ``repr``.

    The constructor only stores parameters (no I/O, no work), so a sweep can
    rebuild a policy anywhere from ``get_params()``.
    """

    name: ClassVar[str] = ""
    Params: ClassVar[type[BaseModel]] = NoParams
    wants_empty_queue_calls: ClassVar[bool] = False
    """Policies that manage nodes (caps, shutdown) set this to be called even when no job is pending."""

    def __init__(self, params: BaseModel | dict | None = None, **kwargs: Any):
        if params is None or isinstance(params, dict):
            params = self.Params(**{**(params or {}), **kwargs})
        elif kwargs:
            params = params.model_copy(update=kwargs)
        self.params = params

    def get_params(self) -> dict[str, Any]:
        return self.params.model_dump()

    def init_state(self) -> dict[str, Any]:
        return {}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"

    def decide(self, snapshot: Snapshot, state: dict[str, Any] | None = None) -> Plan:  # pragma: no cover
        raise NotImplementedError
