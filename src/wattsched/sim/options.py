"""How the engine replays a workload (:class:`EngineOptions`)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from wattsched.model.job import Job
from wattsched.model.response import ResponseModel, ResponseScenario


@dataclass(frozen=True)
class SchedPasses:
    """Slurm's main scheduling passes, which a job's start waits for (``EngineOptions.sched_passes``).

    Slurm's controller does not start a job the moment it could run: a
    submission, a job's end or a release (``scontrol release``) only asks for
    a pass of its main scheduler, which its background loop (one iteration a
    ``tick_s``) runs once at least ``interval_s`` (``batch_sched_delay`` of
    ``SchedulerParameters``, 3 s by default) have passed since the previous
    pass. Every submission and end asks for a pass; a start the policy decides
    asks for one ``release_lag_s`` after the decision (the daemon's poll before
    it releases the job; 0 where the policy stands for Slurm's own scheduler)
    and happens at the first pass from then on. The job holds its nodes, at
    their idle power, from the decision to that pass; its recorded start is
    the pass. Ticks count from the run's first event.
    """

    interval_s: float = 3.0
    tick_s: float = 1.0
    release_lag_s: float = 0.0

    def __post_init__(self):
        for name in ("interval_s", "tick_s", "release_lag_s"):
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0 or (value == 0 and name == "tick_s"):
                raise ValueError(f"sched_passes.{name}: {value!r} is not a duration of "
                                 f"{'more than' if name == 'tick_s' else 'at least'} 0 s")


@dataclass
class EngineOptions:
    """How the engine replays a workload.

    Attributes
    ----------
    kill_at_walltime
        Kill a job at its requested time, as Slurm does (default); otherwise
        let it run to its real end.
    tick_s
        Period of monitoring ticks (the policy is called at each), or ``None``:
        then the ``tick_period_s`` of the policy's tags, if any (the
        energy-budget policies' monitoring stages).
    strict
        A plan the guard rejects raises :class:`~wattsched.errors.PlanViolation`
        (tests, default); otherwise it is dropped and counted.
    time_limit_s
        Stop the run at this simulated time.
    progress
        Show a progress bar when the run takes more than two seconds.
    max_ticks
        Stop with a :class:`~wattsched.errors.ConfigError` when a run reaches
        this many ticks (a bound on time and timeline rows), or ``None``.
    sched_passes
        Start jobs only at Slurm's main scheduling passes (:class:`SchedPasses`),
        or ``None``: at once (default).
    """

    kill_at_walltime: bool = True
    tick_s: float | None = None
    strict: bool = True
    time_limit_s: float | None = None
    progress: bool = False
    cap_lookahead_s: float = math.inf
    """How far ahead policies see the cap schedule, and the guard holds plans to it (see ``Snapshot``)."""
    forecast_horizon_s: float | None = None
    """Fill ``snapshot.forecast`` over this horizon at every call (also done for policies tagged ``wants_forecast``)."""
    forecast_step_s: float = 300.0
    reshape_overhead: Callable[[Job, int, int], float] | None = None
    response_classes: Mapping[str, ResponseModel] | None = None
    """Response model per application class; default: the platform's (:attr:`Platform.response_classes`)."""
    max_ticks: int | None = None
    response: ResponseScenario | None = None
    """Per-job response scenario (Borghesi et al. 2018, §5.1.1); default: the ``response_scenario`` of the
    policy's tags if it declares one, else each job's class model from ``response_classes``."""
    sched_passes: SchedPasses | None = None


def run_scenario(options: EngineOptions, declared: ResponseScenario | None, seed: int) -> ResponseScenario | None:
    """The run's per-job response scenario: the options', else the one the policy's tags declare (``declared``,
    its per-job draws fixed by the run's ``seed``); None for the class models."""
    given = options.response
    if given is None and declared is not None:
        given = dataclasses.replace(declared, seed=seed)
    if given is not None and given.kind == "classes":
        return None  # the class models, exactly as without a scenario
    return given


def forecast_horizon(options: EngineOptions, wants_forecast: bool) -> float | None:
    """How far ahead the snapshot's forecast looks at every call: the options' horizon, else two hours for a
    policy that wants a forecast, else None (no forecast)."""
    if options.forecast_horizon_s is None and wants_forecast:
        return 7200.0
    return options.forecast_horizon_s
