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

from pydantic import BaseModel, ConfigDict, Field, field_validator

from wattsched.model.plan import Plan
from wattsched.model.snapshot import Snapshot
from wattsched.model.state import NoState, PolicyState
from wattsched.plugins import NoParams, Parametrized

__all__ = ["BasePolicy", "NoParams", "NoState", "Policy", "PolicyState", "ResponseParams"]


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
    """Policies that walk running jobs' ends with their power set this to get ``snapshot.end_table`` (in replay
    and live alike; a snapshot without one gets it built when the policy asks, at a cost at every call)."""
    wants_forecast: ClassVar[bool] = False
    """Policies that read ``snapshot.forecast`` set this to have the simulator fill it (the daemon always does)."""

    def init_state(self) -> PolicyState:
        return self.State()

    @property
    def response_scenario(self):
        """The per-job response scenario the policy's ``response`` parameter asks for, or ``None``.

        Only the replay engine reads it: how a job responds to a cap is a
        property of the job, which the simulator must be told; live, the
        hardware answers and the parameter has no effect.
        """
        spec = getattr(self.params, "response", None)
        if spec is None:
            return None
        from wattsched.model.response import ResponseScenario

        return ResponseScenario.parse(spec, floor_w=getattr(self.params, "response_floor_w", 1.0))

    def decide(self, snapshot: Snapshot, state: PolicyState | None = None) -> Plan:  # pragma: no cover
        raise NotImplementedError


class ResponseParams(BaseModel):
    """Parameters of the policies that lower node power (Borghesi et al. 2018's reactive family).

    ``response`` picks the scenario of §5.1.1 the replay slows jobs by
    (:class:`~wattsched.model.response.ResponseScenario`): ``mixed``, ``cpi``
    or a factor ``F`` in [0, 1]; unset, each job's class model from the
    platform. It names a run of the paper such as *DynShare_mixed*.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    response: str | None = Field(None, description=(
        "Replay only: how capped jobs slow down (Borghesi §5.1.1): mixed (F drawn per application class), cpi "
        "(Eq. 4, CPI drawn per class), or a factor F in [0, 1] (D' = F·D/M). Default: the platform's class models."))
    response_floor_w: float = Field(1.0, ge=0, description=(
        "Replay only, with response: the least dynamic power (W) a job keeps on a node under a cap."))

    @field_validator("response")
    @classmethod
    def _known_response(cls, value: str | None) -> str | None:
        if value is None:
            return None
        from wattsched.model.response import ResponseScenario

        ResponseScenario.parse(value)
        return value
