"""One way to assemble a run: :func:`build_run` turns a validated :class:`~wattsched.config.SimConfig` into a
:class:`Run` (machine, trace, power augmentation, constraints, policy, predictor, engine options).

``wattsched simulate``, every cell and slice of ``wattsched sweep``, ``wattsched predict evaluate`` and the
daemon's simulated cluster (``daemon --backend sim``, ``wattsched demo``) all assemble their runs here, so a
config is the same run whichever command it is given to:

- the machine is the config's ``platform`` or ``procs``, else the SWF header's ``MaxProcs`` (nodes of
  ``cores_per_node`` cores); a job table gives no size and needs one of the two (:func:`build_platform`);
  where it came from is said in every command's output (:attr:`Run.machine`);
- the trace is opened through the format registry (:mod:`wattsched.workload.open`), cleaned against that
  machine, checked (:mod:`wattsched.sim.checks`);
- a trace without power is augmented with the platform's reference node (its power model and cores), the
  config's ``augment`` block and ``seed``; on a platform with application models every job gets one of them;
- with a ``moldable`` block, jobs get a node range and a PASS application (:mod:`wattsched.workload.moldable`);
- the cap schedule, energy budgets and demand-response events are those of the config, in watts of this
  machine; the engine options (response scenario, walltime kills, ticks, limits) likewise.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wattsched.config import SimConfig, key_locator, locate
from wattsched.errors import ConfigError, TraceError
from wattsched.model.platform import Platform
from wattsched.workload.records import Workload

__all__ = ["PreparedTrace", "Run", "build_platform", "build_run", "machine_of", "prepare_trace", "run_checks",
           "run_response", "validate_plugins"]


# --------------------------------------------------------------------------- the machine


def build_platform(config: SimConfig) -> Platform:
    """The config's machine: its ``platform`` or ``procs``, else the SWF header's ``MaxProcs``."""
    if config.platform is not None or config.procs is not None:
        platform = config.build_platform()
        if config.naive_cpu_w is not None:
            try:
                platform = platform.naive(config.naive_cpu_w)
            except ValueError as exc:
                raise ConfigError(locate(config, "naive_cpu_w", str(exc))) from None
        return platform
    if config.naive_cpu_w is not None:
        raise ConfigError(locate(config, "naive_cpu_w", "needs an overprovisioned platform (platform key), such "
                                 "as intrepid-overprovisioned"))
    from wattsched.config.platform import platform_from_procs, too_many_nodes
    from wattsched.workload.open import format_of, machine_procs, trace_stem

    trace = config.trace
    if not Path(trace).exists():
        raise ConfigError(locate(config, "trace", f"no such file {str(trace)!r}"))
    if not format_of(trace).gives_machine:
        raise ConfigError(locate(config, "trace", "a job table gives no machine size; give the machine with "
                                 "--platform FILE|NAME or --procs N (config keys platform, procs)"))
    try:
        procs = machine_procs(trace)
    except TraceError as exc:
        raise ConfigError(str(exc)) from None
    if procs is None:
        raise ConfigError(f"{trace}: MaxProcs: the header gives no machine size; give the machine with --procs N "
                          "or --platform FILE|NAME")
    why = too_many_nodes(-(-procs // config.cores_per_node), config.max_nodes)
    if why:
        raise ConfigError(f"{trace}: MaxProcs: {why}")
    return platform_from_procs(procs, config.cores_per_node, name=trace_stem(trace), max_nodes=config.max_nodes)


def machine_of(config: SimConfig, platform: Platform) -> str:
    """Where the machine of a run came from, in a line: ``100 nodes × 1 core (SWF header MaxProcs 100)``."""
    groups: dict[tuple[str, int], int] = {}
    for node in platform.nodes:
        groups[(node.group, node.cores)] = groups.get((node.group, node.cores), 0) + 1
    if len(groups) == 1:
        cores = platform.nodes[0].cores
        size = f"{len(platform):,} nodes × {cores} core{'s' if cores != 1 else ''}"
    else:
        size = " + ".join(f"{n:,} {g} × {c} cores" for (g, c), n in groups.items())
    if config.platform is not None:
        origin = f"platform {config.platform}"
        if config.naive_cpu_w is not None:
            origin += f", naive strategy: every node at CPU {config.naive_cpu_w:g} W"
    elif config.procs is not None:
        origin = f"procs {config.procs:,}"
    else:
        origin = f"SWF header MaxProcs {platform.total_cores:,}"
    return f"{size} ({origin})"


# --------------------------------------------------------------------------- the trace


@dataclass
class PreparedTrace:
    """A config's trace, opened, cleaned, checked and (when it has no power) augmented."""

    source: Workload
    """The reader's own workload: it learns the time origin and counts what it cleaned as the stream is read."""
    workload: Workload
    """What the engine replays: ``source``, or its jobs with augmented power."""
    had_power: bool
    augmented: bool


def prepare_trace(config: SimConfig, platform: Platform, *, notes: list[str] | None = None) -> PreparedTrace:
    """Open ``config.trace`` against ``platform``, check it and augment its power as every run does.

    The jobs stay a stream (a large trace is read as the run goes); the augmentation sets the reader's own
    jobs' power rather than copying them.
    """
    from wattsched.sim.checks import checked_workload, preflight
    from wattsched.workload.open import open_trace

    notes = [*(notes or ()), *preflight(config, platform)]
    if not Path(config.trace).exists():
        raise ConfigError(locate(config, "trace", f"no such file {str(config.trace)!r}"))
    source = open_trace(config.trace, cores_per_node=max(1, platform.nodes[0].cores), machine_nodes=len(platform),
                        machine_procs=platform.total_cores, default_walltime=config.default_walltime,
                        skip_bad_lines=config.skip_bad_lines)
    source = checked_workload(config, source, notes)
    had_power = source.has_power
    params = augment_params_of(config, platform)
    if had_power or params is None:
        return PreparedTrace(source, _moldable(config, source), had_power, False)
    from wattsched.workload.augment import augment_workload, reference_cores

    workload = augment_workload(source, platform.reference_power, params, config.seed, in_place=True,
                                cores_per_node=reference_cores(platform))
    return PreparedTrace(source, _moldable(config, workload), had_power, True)


def _moldable(config: SimConfig, workload: Workload) -> Workload:
    """``workload`` with the config's ``moldable`` rule applied (the same object without one)."""
    if config.moldable is None:
        return workload
    from wattsched.workload.moldable import moldable_workload

    return moldable_workload(workload, config.moldable, config.seed, in_place=True)


def augment_params_of(config: SimConfig, platform: Platform):
    """The run's :class:`~wattsched.workload.augment.AugmentParams`, or None when augmentation is off.

    On a platform with application models jobs get one of them, unless the block gives ``class_probs``.
    """
    from wattsched.sim.checks import augment_error
    from wattsched.workload.augment import AugmentParams

    spec = dict(config.augment)
    if not spec.pop("enabled", True):
        return None
    if "class_probs" not in spec:
        from wattsched.appmodels import app_class_probs

        probs = app_class_probs(platform.response_classes)
        if probs:
            spec["class_probs"] = probs
    try:
        return AugmentParams(**spec)
    except Exception as exc:  # pydantic ValidationError
        raise augment_error(config, exc) from None


# --------------------------------------------------------------------------- the run


@dataclass
class Run:
    """Everything a replay needs, assembled from one config; :meth:`engine` makes its engine."""

    config: SimConfig
    platform: Platform
    machine: str
    trace: PreparedTrace | None
    jobs: Any
    """What the engine replays: the prepared trace's workload, or jobs the caller prepared."""
    cap: Any
    budgets: list
    dr_events: list
    policy: Any
    predictor: Any
    options: Any
    info: dict = field(default_factory=dict)

    def engine(self, *, jobs=None, policy=None, **overrides):
        """The engine of this run; ``jobs``, ``policy`` and engine keyword arguments replace the run's own."""
        from wattsched.sim.engine import Engine

        kwargs = dict(cap=self.cap, budgets=self.budgets, options=self.options, seed=self.config.seed,
                      predictor=self.predictor, dr_events=self.dr_events)
        kwargs.update(overrides)
        return Engine(self.platform, self.jobs if jobs is None else jobs, self.policy if policy is None else policy,
                      **kwargs)


def build_run(config: SimConfig, *, platform: Platform | None = None, jobs=None, cap=None, predictor=None,
              progress: bool = False, before_trace=None) -> Run:
    """Assemble the run of ``config``.

    ``platform``, ``jobs``, ``cap`` and ``predictor`` replace what the config would give, for callers that
    keep them between runs (a sweep's worker keeps a trace's prepared jobs and a slice's primed predictor)
    or derive them (a sweep's caps axis); everything else comes from the config. ``before_trace`` is called
    after the config's plugins and constraints are validated and before the trace is opened (``simulate``
    checks its output directory there).
    """
    from wattsched.config.platform import response_classes_of
    from wattsched.policies import make_policy
    from wattsched.sim.engine import EngineOptions
    from wattsched.sim.options import SchedPasses

    if platform is None:
        platform = build_platform(config)
    policy = make_policy(config.policy, config.params, source=key_locator(config, "params"),
                         name_source=key_locator(config, "policy")())
    validate_plugins(config)
    if cap is None:
        cap = config.build_cap_schedule(platform)
    budgets = config.build_energy_budgets()
    dr_events = config.build_dr_events(platform)
    notes = run_checks(config, platform, policy, cap=cap, budgets=budgets, dr_events=dr_events,
                       whole_trace=jobs is None)
    if before_trace is not None:
        before_trace()
    trace = None
    if jobs is None:
        trace = prepare_trace(config, platform, notes=notes)
        jobs = trace.workload
    options = EngineOptions(
        response=run_response(config, policy),
        kill_at_walltime=config.kill_at_walltime,
        tick_s=config.tick_s,
        strict=False,
        time_limit_s=config.time_limit_s,
        progress=progress,
        response_classes=response_classes_of(platform),
        max_ticks=config.max_ticks,
        sched_passes=None if config.sched_passes is None else SchedPasses(**config.sched_passes.model_dump()),
    )
    if predictor is None and config.predictor is not None:
        from wattsched.predictors import make_predictor

        predictor = make_predictor(config.predictor, config.predictor_params,
                                   source=key_locator(config, "predictor_params"))
        from wattsched.predictors.base import predictor_tags

        if predictor_tags(predictor).takes_clock:  # lets retraining predictors report their cost per retraining
            import time

            predictor.set_clock(time.perf_counter)
    run = Run(config, platform, machine_of(config, platform), trace, jobs, cap, budgets, dr_events, policy,
              predictor, options)
    run.info["machine"] = run.machine
    if notes:
        run.info["notes"] = notes
    return run


def run_checks(config: SimConfig, platform: Platform, policy, *, cap, budgets, dr_events,
               whole_trace: bool = True) -> list[str]:
    """Refuse a policy monitoring period with too many ticks; warn about constraints the run cannot honour.

    The trace's submission span is read (cheaply, SWF only) when a check needs it and the run replays the
    whole trace (``whole_trace``; a sweep's slice has its own times, and the engine bounds its ticks); a
    sweep's cells log their warnings at INFO.
    """
    import logging

    from wattsched.policies.base import policy_tags
    from wattsched.sim.checks import cap_windows, check_policy_ticks, constraint_notes, submission_span_s

    needs_span = whole_trace and (budgets or dr_events or cap_windows(cap) or (
        config.tick_s is None and policy_tags(policy).tick_param))
    span_s = submission_span_s(config) if needs_span else None
    check_policy_ticks(config, policy, span_s)
    return constraint_notes(config, platform, policy, cap=cap, budgets=budgets, dr_events=dr_events, span_s=span_s,
                            level=logging.WARNING if whole_trace else logging.INFO)


def run_response(config: SimConfig, policy):
    """The run's response scenario: the config's ``response``, else the policy's ``response`` parameter, else None.

    Both given and different is an error naming the config key, so a run
    never slows jobs by a scenario other than the one its outputs name.
    """
    from wattsched.model.response import ResponseScenario
    from wattsched.policies.base import policy_tags

    own = policy_tags(policy).response_scenario
    if config.response is None:
        return None if own is None else dataclasses.replace(own, seed=config.seed)
    try:
        scenario = ResponseScenario.parse(config.response, seed=config.seed,
                                          floor_w=own.floor_w if own is not None else 1.0,
                                          reading=own.reading if own is not None else "interpolated")
    except ValueError as exc:
        raise ConfigError(locate(config, "response", str(exc))) from None
    if own is not None and (own.kind, own.f) != (scenario.kind, scenario.f):
        raise ConfigError(locate(config, "response", f"{config.response!r} differs from the policy's response "
                                 f"parameter {own.label()!r}; give one of them"))
    return scenario


def validate_plugins(config: SimConfig) -> None:
    """Fail before any work if the predictor, its parameters or the baseline policy are invalid."""
    from wattsched.policies import make_policy
    from wattsched.predictors import make_predictor

    if config.predictor is not None:
        make_predictor(config.predictor, config.predictor_params, source=key_locator(config, "predictor_params"),
                       name_source=key_locator(config, "predictor")())
    if config.baseline is not None:
        make_policy(config.baseline, source=key_locator(config, "baseline"),
                    name_source=key_locator(config, "baseline")())
    if config.augment:
        from wattsched.sim.checks import augment_params

        augment_params(config)
