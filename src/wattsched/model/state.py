"""Policy state: what a policy remembers between calls, as a typed object the caller keeps.

A policy declares its state model (``State``, a subclass of
:class:`PolicyState`); the simulator keeps one instance across calls, the
daemon persists it in its state store (:meth:`PolicyState.to_json` /
:meth:`PolicyState.from_json`) so that it survives a restart.
"""

from __future__ import annotations

from typing import Self

from pydantic import BaseModel, ConfigDict


class PolicyState(BaseModel):
    """Base of every policy's state model: validated on assignment, unknown keys refused, JSON round trip.

    >>> class Counter(PolicyState):
    ...     calls: int = 0
    >>> s = Counter()
    >>> s.calls += 1
    >>> Counter.from_json(s.to_json())
    Counter(calls=1)
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    def to_json(self) -> str:
        return self.model_dump_json()

    @classmethod
    def from_json(cls, text: str) -> Self:
        return cls.model_validate_json(text)


class NoState(PolicyState):
    """The state of a policy that remembers nothing."""
