"""Checks of a simulation's inputs before and while it runs: what no run could do, refused or warned about.

:func:`preflight` runs before the trace is read: a ``tick_s`` that would give more than
``max_ticks`` ticks over an SWF trace is refused; a cap below the platform's idle power
(no job could ever start under it) is warned about on the log and kept as a note of the
run. :func:`checked_workload` makes the workload's stream refuse to end without a single
job (an empty or header-only file, or every job cleaned away). The ``augment`` block is
validated here too, every problem located in the config file.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator
from pathlib import Path

from wattsched.config import SimConfig, locate
from wattsched.errors import ConfigError, TraceError
from wattsched.model.platform import Platform
from wattsched.workload.records import TraceJob, Workload

__all__ = ["augment_error", "augment_params", "cap_warnings", "check_not_empty", "check_policy_ticks", "check_ticks",
           "checked_workload", "constraint_notes", "preflight", "submission_span_s"]

log = logging.getLogger("wattsched.sim.run")


def preflight(config: SimConfig, platform: Platform | None) -> list[str]:
    """Refuse an unbounded tick count; return (and log) warnings about the config's caps."""
    check_ticks(config)
    if platform is None or (config.cap_w is None and config.cap_schedule is None):
        return []
    notes = cap_warnings(config.build_cap_schedule(platform), platform)
    for note in notes:
        log.warning("%s", note)
    return notes


def checked_workload(config: SimConfig, workload: Workload, notes: list[str]) -> Workload:
    """``workload`` with ``notes`` added and a stream that raises :class:`TraceError` if it ends with no job."""
    workload.notes.extend(notes)
    workload.jobs = _refuse_empty(workload.jobs, config, workload)
    return workload


def _refuse_empty(jobs, config: SimConfig, workload: Workload) -> Iterator[TraceJob]:
    any_job = False
    for job in jobs:
        any_job = True
        yield job
    if not any_job:
        check_not_empty(config, workload)


_CAP_WINDOWS_NOTED = 20  # a long schedule file: its first windows are enough to tell


def cap_warnings(cap, platform: Platform) -> list[str]:
    """Warnings about caps no schedule can honour: below the platform's idle power, nothing can run."""
    idle_w = sum(n.power.idle_w for n in platform.nodes)
    low = sorted({s.cap_w for s in cap.steps if s.cap_w < idle_w})
    if not low:
        return []
    return [f"the cap of {low[0]:,.0f} W is below the platform's idle power ({idle_w:,.0f} W for {len(platform):,} "
            "nodes): no job can start while it holds (did you mean a percentage, such as '60%'?)"]


def check_ticks(config: SimConfig) -> None:
    """Refuse a ``tick_s`` that would give more than ``max_ticks`` ticks over an SWF trace's submissions."""
    from wattsched.workload.open import is_swf

    if config.tick_s is None or not is_swf(config.trace) or not Path(config.trace).exists():
        return
    from wattsched.workload.swf import submit_span_s

    span = submit_span_s(config.trace)
    ticks = span / config.tick_s
    if ticks > config.max_ticks:
        raise ConfigError(locate(
            config, "tick_s",
            f"a tick of {config.tick_s:g} s over the trace's {span / 86400:,.1f} days of submissions gives at least "
            f"{ticks:,.0f} ticks, above the limit of {config.max_ticks:,}; use a longer tick or raise the limit "
            "(--max-ticks N, config key max_ticks)"))


def submission_span_s(config: SimConfig) -> float | None:
    """Seconds from the first to the last submission of the config's trace (SWF only, read cheaply), or None."""
    from wattsched.workload.open import is_swf

    if not is_swf(config.trace) or not Path(config.trace).exists():
        return None
    from wattsched.workload.swf import submit_span_s

    try:
        return submit_span_s(config.trace)
    except (OSError, TraceError, UnicodeDecodeError):
        return None  # the reader reports it properly


def check_policy_ticks(config: SimConfig, policy, span_s: float | None) -> None:
    """Refuse a policy monitoring period that gives more than ``max_ticks`` ticks over the trace's submissions.

    Only without ``tick_s`` (which then sets the period, checked by :func:`check_ticks`); the message names the
    policy parameter that sets the period (``--param monitoring_period_s``), not ``tick_s``.
    """
    from wattsched.policies.base import policy_tags

    tags = policy_tags(policy)
    param = tags.tick_param
    if config.tick_s is not None or param is None or tags.tick_period_s is None or span_s is None \
            or config.max_ticks is None:
        return
    period = float(tags.tick_period_s)
    ticks = span_s / period if period > 0 else math.inf
    if ticks > config.max_ticks:
        raise ConfigError(locate(
            config, ("params", param),
            f"a monitoring period of {period:g} s over the trace's {span_s / 86400:,.1f} days of submissions "
            f"gives at least {ticks:,.0f} ticks, above the limit of {config.max_ticks:,}; use a longer period "
            f"(--param {param}=SECONDS) or raise the limit (--max-ticks N, config key max_ticks)"))


def constraint_notes(config: SimConfig, platform: Platform, policy, *, cap, budgets, dr_events,
                     span_s: float | None, level: int = logging.WARNING) -> list[str]:
    """Warnings (logged, and returned as notes of the run) about constraints the run cannot honour as given.

    ``span_s`` is the trace's submission span (times run from 0 at the first submission), None when unknown.
    ``level`` is the log level: a sweep's cells log at INFO, as a sweep crosses policies with constraints on
    purpose (a power-unaware baseline on a caps axis); their notes are kept all the same.
    """
    notes = [*ignored_constraints(config, policy, cap=cap, budgets=budgets, dr_events=dr_events),
             *budget_notes(budgets, platform),
             *dr_event_notes(dr_events, platform),
             *outside_trace_notes(budgets, dr_events, span_s, cap)]
    for note in notes:
        if note not in _LOGGED:  # a sweep builds many runs in one process: each warning once (still in each run)
            if len(_LOGGED) < 10_000:
                _LOGGED.add(note)
            log.log(level, "%s", note)
    return notes


_LOGGED: set[str] = set()


def ignored_constraints(config: SimConfig, policy, *, cap, budgets, dr_events) -> list[str]:
    """The constraints given to a run whose policy declares it does not plan against them."""
    from wattsched.policies.base import policy_tags

    uses = policy_tags(policy).constraints
    if uses is None:  # undeclared (a third-party policy): nothing to say
        return []
    name = getattr(policy, "name", type(policy).__name__)
    given = []
    if budgets and "budgets" not in uses:
        given.append(("energy budget", "energy_budgets", "energy-bud, reduce-pc, powercap-easy or easy-shutdown"))
    if dr_events and not uses & {"cap", "dr_events"}:
        given.append(("demand-response event", "demand_response", "dr, or any cap-aware policy such as easy-pc"))
    if cap is not None and not cap.is_uncapped and "cap" not in uses:
        key = "cap_w"
        if config is not None and config.cap_w is None and config.cap_schedule is None:  # the platform's budget
            key = "the platform's budget_w"
        given.append(("power cap", key, "a cap-aware policy such as easy-pc, or parm on an overprovisioned platform"))
    return [f"policy {name} ignores the {what} of this run ({key}): no decision respects it (the outputs still "
            f"measure the run against it); for one that does, use {hint}" for what, key, hint in given]


def budget_notes(budgets, platform: Platform) -> list[str]:
    """Energy budgets below the idle energy of the platform over their window (they cannot be kept)."""
    idle_w = platform.idle_power_w
    notes = []
    for i, b in enumerate(budgets):
        floor_j = idle_w * (b.end_s - b.start_s)
        if b.energy_j < floor_j:
            notes.append(
                f"energy_budgets[{i}]: the budget of {b.energy_j:,.4g} J is below the platform's idle energy over "
                f"its window ({idle_w:,.0f} W x {b.end_s - b.start_s:,.0f} s = {floor_j:,.4g} J): it will be "
                "exceeded even with every job held")
    return notes


def dr_event_notes(dr_events, platform: Platform) -> list[str]:
    """Demand-response targets no schedule can meet (below idle) or that ask for nothing (at or above maximum)."""
    idle_w, max_w = platform.idle_power_w, platform.max_power_w
    notes = []
    for i, e in enumerate(dr_events):
        where = f"demand_response[{i}]"
        if e.cap_w is not None:
            if e.cap_w < idle_w:
                notes.append(f"{where}: the target of {e.cap_w:,.0f} W is below the platform's idle power "
                             f"({idle_w:,.0f} W): no job can start during the event and it cannot be met")
            elif e.cap_w >= max_w:
                notes.append(f"{where}: the target of {e.cap_w:,.0f} W is at or above the platform's maximum "
                             f"power ({max_w:,.0f} W): the event asks for nothing")
        elif e.reduction_w is not None:
            if e.reduction_w >= max_w:
                notes.append(f"{where}: the reduction of {e.reduction_w:,.0f} W is at or above the platform's "
                             f"maximum power ({max_w:,.0f} W): the target falls to 1 W, below the idle power "
                             f"({idle_w:,.0f} W), and cannot be met")
            elif max_w - e.reduction_w < idle_w:
                notes.append(f"{where}: a reduction of {e.reduction_w:,.0f} W from at most {max_w:,.0f} W leaves "
                             f"a target below the platform's idle power ({idle_w:,.0f} W): it cannot be met")
    return notes


def cap_windows(cap) -> list[tuple[float, float, float]]:
    """``(start_s, end_s, cap_w)`` of each stretch of a cap schedule with a finite cap that starts at a time
    (a constant cap, in force from the start, is none)."""
    if cap is None:
        return []
    steps = cap.steps
    out = []
    for k, s in enumerate(steps):
        end = steps[k + 1].start_s if k + 1 < len(steps) else math.inf
        if math.isfinite(s.cap_w) and math.isfinite(s.start_s) and end > s.start_s:
            out.append((s.start_s, end, s.cap_w))
    return out


def outside_trace_notes(budgets, dr_events, span_s: float | None, cap=None) -> list[str]:
    """Budget windows, demand-response events and cap-schedule windows wholly before the first or after the
    last submission."""
    if span_s is None:
        return []
    windows = [(f"energy_budgets[{i}]", "budget window", b.start_s, b.end_s) for i, b in enumerate(budgets)]
    windows += [(f"demand_response[{i}]", "event", min(e.notice_s, e.start_s), e.end_s)
                for i, e in enumerate(dr_events)]
    notes = []
    for start, end, cap_w in cap_windows(cap)[:_CAP_WINDOWS_NOTED]:
        what = f"cap_schedule: the window of the cap of {cap_w:,.0f} W ({start:,.4g} s to {end:,.4g} s)"
        if start > span_s:  # (schedules start at 0 or later: config.caps refuses negative times)
            notes.append(f"{what} starts after the trace's last submission (t = {span_s:,.0f} s): it caps at most "
                         "the jobs still running then; times count from the first submission")
    for where, what, start, end in windows:
        if end <= 0:
            notes.append(f"{where}: the {what} ({start:,.0f} s to {end:,.0f} s) ends before the trace's first "
                         f"submission (t = 0): the clock starts at {start:,.0f} s, which stretches the run and "
                         "lowers its utilization; times count from the first submission")
        elif start > span_s:
            notes.append(f"{where}: the {what} ({start:,.4g} s to {end:,.4g} s) starts after the trace's last "
                         f"submission (t = {span_s:,.0f} s): the run may be stretched to its end; times count "
                         "from the first submission")
    return notes


def check_not_empty(config: SimConfig, workload: Workload) -> None:
    """Refuse a workload that gave no job at all (an empty or header-only file, or every job cleaned away)."""
    report = workload.report
    if report.kept:
        return
    if report.read == 0:
        raise TraceError(str(config.trace), None, "no jobs: the file is empty or has only its header")
    dropped = ", ".join(f"{k}: {v:,}" for k, v in report.dropped.items()) or f"{report.skipped_lines:,} lines skipped"
    raise TraceError(str(config.trace), None, f"none of its {report.read:,} jobs is left after cleaning ({dropped}); "
                                              "nothing to simulate")


def augment_params(config: SimConfig):
    """The validated ``augment`` block of ``config`` (without its ``enabled`` switch)."""
    from wattsched.workload.augment import AugmentParams

    spec = {k: v for k, v in config.augment.items() if k != "enabled"}
    try:
        return AugmentParams(**spec)
    except Exception as exc:  # pydantic ValidationError
        raise augment_error(config, exc) from None


def augment_error(config: SimConfig, exc: Exception) -> ConfigError:
    """A config error for each problem of an invalid ``augment`` block, located in the file."""
    from pydantic import ValidationError

    from wattsched.config import error_items
    from wattsched.workload.augment import AugmentParams

    if not isinstance(exc, ValidationError):
        return ConfigError(locate(config, "augment", str(exc)))
    raw = {k: v for k, v in config.augment.items() if k != "enabled"}
    return ConfigError("\n".join(locate(config, ("augment", *loc), msg)
                                 for loc, msg in error_items(exc, raw, AugmentParams)))
