"""Platform power over the next hours, from a snapshot and the plan decided on it. Pure: no I/O.

Each node draws, at each instant, the power of the job on it (running jobs
until their expected end, the plan's starts from now for their walltime) or
else the power of its state: idle when on, ``off_w`` when off, the switching
power while it switches (then idle or off). Running jobs draw their
``power_w`` (the source's figure for the whole job) or, when it is unknown,
the snapshot's estimate × nodes; started jobs draw ``snapshot.estimate(job)``
per node, under the node cap when one is set. Jobs are assumed to run to their
walltime, so the forecast is an upper bound on how long power stays up.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import assert_never

from wattsched.model.plan import Evict, Plan, PowerDown, PowerUp, Reshape, SetNodeCap, SetNodeFreq, Start
from wattsched.model.platform import NodeState
from wattsched.model.snapshot import Snapshot

MAX_POINTS = 10_000

HORIZONS: dict[str, float] = {"15m": 900, "30m": 1800, "1h": 3600, "2h": 7200}
"""The horizons the daemon exports as ``wattsched_forecast_power_watts{horizon}``."""


@dataclass(frozen=True, slots=True)
class Forecast:
    """Predicted platform power.

    ``times``/``watts`` sample it every step from ``now`` to ``now + horizon``
    (absolute times, as the snapshot's ``now_s``); ``breaks``/``levels`` hold
    the exact step function (``levels[i]`` from ``breaks[i]`` until the next
    break), which :meth:`at` and :meth:`peak` use, so a short burst between
    two steps is not lost. ``measured_w`` replaces the model at ``now`` when
    the snapshot had a measurement.
    """

    times: tuple[float, ...]
    watts: tuple[float, ...]
    breaks: tuple[float, ...]
    levels: tuple[float, ...]
    measured_w: float | None = None

    @property
    def now_s(self) -> float:
        return self.times[0]

    @property
    def end_s(self) -> float:
        return self.times[-1]

    def at(self, t: float) -> float:
        """Power at absolute time ``t`` within the horizon."""
        if not self.now_s <= t <= self.end_s:
            raise ValueError(f"t={t} is outside the forecast [{self.now_s}, {self.end_s}]")
        if t == self.now_s and self.measured_w is not None:
            return self.measured_w
        return self.levels[bisect.bisect_right(self.breaks, t) - 1]

    def peak(self) -> float:
        """Highest power over the horizon (the measured value at ``now`` included)."""
        top = max(self.levels)
        return max(top, self.measured_w) if self.measured_w is not None else top

    def horizons(self, labels: Mapping[str, float] = HORIZONS) -> dict[str, float]:
        """Power at ``now + seconds`` for each label, e.g. ``{"15m": 900, "1h": 3600}``."""
        return {label: self.at(self.now_s + s) for label, s in labels.items()}


def _check(horizon_s: float, step_s: float) -> None:
    if not (isinstance(horizon_s, int | float) and math.isfinite(horizon_s) and horizon_s > 0):
        raise ValueError(f"horizon_s must be a positive number of seconds, got {horizon_s!r}")
    if not (isinstance(step_s, int | float) and math.isfinite(step_s) and step_s > 0):
        raise ValueError(f"step_s must be a positive number of seconds, got {step_s!r}")
    if step_s > horizon_s:
        raise ValueError(f"step_s ({step_s}) must not exceed horizon_s ({horizon_s})")
    if horizon_s / step_s > MAX_POINTS:
        raise ValueError(
            f"horizon_s / step_s gives {math.ceil(horizon_s / step_s)} points, more than {MAX_POINTS}; "
            f"use step_s >= {horizon_s / MAX_POINTS:g}"
        )


def forecast(snapshot: Snapshot, plan: Plan | None = None, horizon_s: float = 7200, step_s: float = 300) -> Forecast:
    """Forecast platform power from ``snapshot.now_s`` to ``now_s + horizon_s``, sampled every ``step_s``.

    Raises
    ------
    ValueError
        ``horizon_s`` or ``step_s`` is not a positive finite number, the step
        is longer than the horizon, or there would be more than
        :data:`MAX_POINTS` points.
    """
    _check(horizon_s, step_s)
    now = snapshot.now_s
    end = now + horizon_s
    nodes = snapshot.platform.nodes
    actions = plan.actions if plan is not None else ()
    evicted: set[int] = set()
    caps = dict(snapshot.node_cap_w)
    starts: list[Start] = []
    downs: set[int] = set()
    ups: set[int] = set()
    for a in actions:
        match a:
            case Start():
                starts.append(a)
            case Evict():
                evicted.add(a.job_id)
            case SetNodeCap():
                if a.cap_w is None:
                    caps.pop(a.node, None)
                else:
                    caps[a.node] = a.cap_w
            case PowerDown():
                downs.add(a.node)
            case PowerUp():
                ups.add(a.node)
            case SetNodeFreq() | Reshape():
                pass  # a frequency lowers power by the job's response model, not modelled here; reshape keeps power
            case _:
                assert_never(a)

    # Changes of power as (time, delta) events; the level at now is their sum up to now.
    events: list[tuple[float, float]] = []
    busy_until: dict[int, float] = {}  # node -> end of the job that occupies it

    def occupy(node: int, start: float, stop: float, watts: float) -> None:
        if stop <= start:
            return
        cap = caps.get(node)
        if cap is not None:
            watts = min(watts, cap)
        events.append((start, watts))
        events.append((stop, -watts))
        busy_until[node] = max(busy_until.get(node, start), stop)

    for jid, r in snapshot.running.items():
        if jid in evicted or not r.nodes:
            continue
        n = len(r.nodes)
        per_node = r.power_w / n if r.power_w > 0 else snapshot.estimate(r.job).mean_w
        stop = max(r.expected_end_s, now)  # a job past its expected end is taken as ending now
        for i in r.nodes:
            occupy(i, now, stop, per_node)
    for a in starts:
        job = snapshot.pending.get(a.job_id)
        if job is None:
            continue
        per_node = snapshot.estimate(job).mean_w
        if a.cap_w is not None:
            per_node = min(per_node, a.cap_w)
        for i in a.nodes:
            occupy(i, now, now + job.walltime_s, per_node)

    for i, node in enumerate(nodes):
        p = node.power
        state = snapshot.node_state[i] if i < len(snapshot.node_state) else NodeState.IDLE
        # Baseline: what the node draws when no job runs on it, as (from, watts) pieces.
        if state == NodeState.OFF and i not in ups:
            pieces = [(now, p.off_w)]
        elif state == NodeState.SWITCHING_ON or (state == NodeState.OFF and i in ups):
            pieces = [(now, p.switch_on_w), (now + p.switch_on_s, p.idle_w)]
        elif state == NodeState.SWITCHING_OFF or i in downs:
            pieces = [(now, p.switch_off_w), (now + p.switch_off_s, p.off_w)]
        else:
            pieces = [(now, p.idle_w)]
        # The baseline counts only when the node carries no job: jobs here start now and hold
        # the node until busy_until, so the baseline is masked over [now, busy_until).
        masked_until = busy_until.get(i, now)
        for k, (start, watts) in enumerate(pieces):
            stop = pieces[k + 1][0] if k + 1 < len(pieces) else math.inf
            start = max(start, masked_until)
            if stop > start:
                events.append((start, watts))
                if math.isfinite(stop):
                    events.append((stop, -watts))

    events.sort()
    breaks: list[float] = [now]
    levels: list[float] = [0.0]
    level = 0.0
    for t, delta in events:
        level += delta
        if t <= now:
            levels[0] = level
        elif t > end:
            break
        elif t == breaks[-1]:
            levels[-1] = level
        else:
            breaks.append(t)
            levels.append(level)
    # Rounding of the +/- deltas must not leave -1e-13 W after everything ends.
    levels = [0.0 if abs(x) < 1e-9 else x for x in levels]

    count = math.floor(horizon_s / step_s + 1e-9)
    times = [now + k * step_s for k in range(count + 1)]
    if end - times[-1] > 1e-9:
        times.append(end)
    watts = [levels[bisect.bisect_right(breaks, t) - 1] for t in times]
    measured = snapshot.platform_power_w if snapshot.platform_power_w > 0 else None
    if measured is not None:
        watts[0] = measured
    return Forecast(tuple(times), tuple(watts), tuple(breaks), tuple(levels), measured)
