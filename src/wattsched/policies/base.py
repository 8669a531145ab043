"""The policy contract.

A policy turns a :class:`~wattsched.model.snapshot.Snapshot` into a
:class:`~wattsched.model.plan.Plan`. It never acts and never reads a clock:
time comes in the snapshot. Whatever it wants to remember between calls lives
in the explicit ``state`` object the caller keeps (the simulator engine, or
the daemon's state store), created by :meth:`Policy.init_state`: an instance
of the policy's declared ``State`` model (a
:class:`~wattsched.model.state.PolicyState`), which round-trips through JSON.

What a policy needs from its caller (calls with an empty queue, the end
table, a forecast in replay, ticks, unit mapping of its own, a response
scenario for the replay) it declares in its tags: :meth:`BasePolicy.tags`
returns a frozen :class:`PolicyTags`, as scikit-learn's ``__sklearn_tags__``
returns its ``Tags``. The engine and the daemon read them through
:func:`policy_tags` and never probe a policy for attributes.
"""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, field_validator

from wattsched.errors import PolicyError
from wattsched.model.plan import Plan
from wattsched.model.snapshot import Snapshot
from wattsched.model.state import NoState, PolicyState
from wattsched.plugins import NoParams, Parametrized, declared_tags

if TYPE_CHECKING:
    from wattsched.model.response import ResponseScenario

__all__ = ["BasePolicy", "NoParams", "NoState", "Policy", "PolicyState", "PolicyTags", "ResponseParams",
           "policy_tags"]


@dataclass(frozen=True, slots=True)
class PolicyTags:
    """What a policy declares it needs from the engine and the daemon; every field defaults to "nothing".

    Parameters
    ----------
    wants_empty_queue_calls
        Call :meth:`~Policy.decide` even when no job is pending or running
        (policies that manage nodes: caps, frequencies, shutdown).
    wants_end_table
        Keep ``snapshot.end_table`` in replay: the running jobs' ends with
        their power, for power-aware reservations (the daemon's view always
        has one).
    wants_forecast
        Fill ``snapshot.forecast`` in replay too (the daemon always does),
        over the engine's default horizon.
    maps_units
        The policy maps jobs of units (shared nodes) onto nodes itself; a
        policy without it maps whole nodes and the simulator and the daemon
        pack its starts of such jobs.
    tick_period_s
        Call the policy at this period as well (monitoring stages, e.g. of an
        energy budget), in seconds; ``None``: only at events.
    tick_param
        The parameter that sets ``tick_period_s`` (``monitoring_period_s``),
        named by the errors about too many ticks.
    constraints
        The constraints the policy plans against, of ``"cap"`` (the cap
        schedule, with demand-response windows once noticed), ``"budgets"``
        (energy-budget windows) and ``"dr_events"`` (the events themselves);
        ``None``: undeclared. A run given a constraint its policy does not
        declare is warned about (the run goes on).
    ignores_power_steps
        The policy's decisions depend on no job's measured power, only on the
        queue, the nodes, the jobs' estimates and the time: in replay it is not
        called at a time when the only events were steps of jobs' power
        profiles (no submission, completion or control event), where it could
        decide nothing new. After a plan the guard rejected it is called at
        such times too: the guard's verdict moves with the energy an energy
        budget has left. ``False`` (the default) calls it after every event.
    starts_on_free_nodes
        The policy's only actions are starts of pending jobs, each on as many
        free nodes as the job asks (``job.nodes``): in replay it is not called
        after a batch of submissions and completions that leaves fewer nodes
        free than the smallest pending job asks, where it could start nothing.
        Control events still call it.
    response_scenario
        How jobs respond to a cap in replay (Borghesi et al. 2018, §5.1.1),
        as the policy's ``response`` parameter names it; ``None``: the
        platform's class models. Live, the hardware answers and it has no
        effect.

    >>> PolicyTags().maps_units, PolicyTags(tick_period_s=60.0).tick_period_s
    (False, 60.0)
    """

    wants_empty_queue_calls: bool = False
    wants_end_table: bool = False
    wants_forecast: bool = False
    maps_units: bool = False
    tick_period_s: float | None = None
    response_scenario: ResponseScenario | None = None
    tick_param: str | None = None
    constraints: frozenset[str] | None = None
    ignores_power_steps: bool = False
    starts_on_free_nodes: bool = False


@runtime_checkable
class Policy(Protocol):
    name: ClassVar[str]
    Params: ClassVar[type[BaseModel]]
    State: ClassVar[type[PolicyState]]

    def tags(self) -> PolicyTags: ...

    def init_state(self) -> PolicyState: ...

    def decide(self, snapshot: Snapshot, state: PolicyState | None = None) -> Plan: ...


def policy_tags(policy: Any) -> PolicyTags:
    """The tags ``policy`` declares through its ``tags()``; a policy without that method has the defaults.

    A plugin registered by entry point that derives from :class:`BasePolicy`
    declares its tags by overriding :meth:`BasePolicy.tags`; one that only
    follows the protocol without ``tags()`` gets ``PolicyTags()``.

    >>> policy_tags(object())
    PolicyTags(wants_empty_queue_calls=False, wants_end_table=False, wants_forecast=False, \
maps_units=False, tick_period_s=None, response_scenario=None, tick_param=None, constraints=None, \
ignores_power_steps=False, starts_on_free_nodes=False)
    """
    return declared_tags(policy, PolicyTags, PolicyError, "policy")


_CLASS_TAGS = ("wants_empty_queue_calls", "wants_end_table", "wants_forecast", "maps_units")
"""Tags that older plugins set as class attributes (``wants_end_table = True``): still read, with a warning."""


class BasePolicy(Parametrized):
    """Optional base: stores typed parameters, gives ``get_params``, ``repr`` and default :meth:`tags`."""

    State: ClassVar[type[PolicyState]] = NoState
    """The policy's state model; :meth:`init_state` returns a fresh instance."""
    _class_tags: ClassVar[dict[str, bool]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        old = {k: v for k in _CLASS_TAGS if isinstance(v := cls.__dict__.get(k), bool)}
        if old:
            attrs = ", ".join(f"{k} = {v}" for k, v in old.items())
            warnings.warn(
                f"{cls.__qualname__}: capabilities as class attributes ({attrs}) are deprecated; override tags() "
                f"instead: return dataclasses.replace(super().tags(), {attrs.replace(' = ', '=')})",
                FutureWarning, stacklevel=2)
            cls._class_tags = {**cls._class_tags, **old}

    def tags(self) -> PolicyTags:
        """What this policy needs from its caller (:class:`PolicyTags`).

        Subclasses override it and change what differs from their parent's,
        as scikit-learn's ``__sklearn_tags__`` does::

            def tags(self):
                return dataclasses.replace(super().tags(), wants_empty_queue_calls=True)

        The base declares nothing but the ``response`` parameter's scenario,
        if the policy's parameters have one (:class:`ResponseParams`).
        """
        tags = PolicyTags(response_scenario=self.response_scenario)
        return dataclasses.replace(tags, **self._class_tags) if self._class_tags else tags

    def init_state(self) -> PolicyState:
        return self.State()

    @property
    def response_scenario(self):
        """The per-job response scenario the policy's ``response`` parameter asks for, or ``None``.

        The replay engine takes it from the tags (:attr:`PolicyTags.response_scenario`):
        how a job responds to a cap is a property of the job, which the
        simulator must be told; live, the hardware answers and the parameter
        has no effect. Only parameters deriving from :class:`ResponseParams`
        have one.
        """
        params = self.params
        if not isinstance(params, ResponseParams) or params.response is None:
            return None
        from wattsched.model.response import ResponseScenario

        return ResponseScenario.parse(params.response, floor_w=params.response_floor_w,
                                      reading=params.response_reading)

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
        "(Eq. 4, CPI drawn per class), or a factor F in [0, 1] (D' = D·(1 + F·(1/M − 1)), see response_reading). "
        "Default: the platform's class models."))
    response_reading: Literal["interpolated", "clamped"] = Field("interpolated", description=(
        "Replay only, with response F or mixed: interpolated, D' = D·(1 + F·(1/M − 1)) (no slowdown at F = 0, "
        "D/M at F = 1); or clamped, the literal D' = max(1, F/M)·D (docs/policies.md)."))
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
