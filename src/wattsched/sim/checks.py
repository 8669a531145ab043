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
from collections.abc import Iterator
from pathlib import Path

from wattsched.config import SimConfig, locate
from wattsched.errors import ConfigError, TraceError
from wattsched.model.platform import Platform
from wattsched.workload.records import TraceJob, Workload

__all__ = ["augment_error", "augment_params", "cap_warnings", "check_not_empty", "check_ticks", "checked_workload",
           "preflight"]

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
