"""The daemon's power constraints over wall-clock time: cap schedules, recurring windows, energy budgets,
demand-response events. Pure functions of the config and the time; no I/O.

Recurring windows (``DAYS HH:MM-HH:MM``, parsed by :mod:`wattsched.model.recurrence`,
where the daemon config's validation reads them too) are laid out in the site's
time zone (``timezone`` in the daemon config). Windows follow the wall clock
across daylight-saving changes (:mod:`zoneinfo`).
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from zoneinfo import ZoneInfo

from wattsched.model.constraints import CapSchedule, CapStep, DemandResponseEvent, NoticedEvent
from wattsched.model.recurrence import Recurrence, parse_recurrence


def occurrences(rec: Recurrence, tz: ZoneInfo, t0_s: float, t1_s: float) -> list[tuple[float, float]]:
    """Windows ``(start_s, end_s)`` (epoch seconds) of ``rec`` that overlap ``[t0_s, t1_s)``, in order.

    >>> paris = ZoneInfo("Europe/Paris")
    >>> monday = dt.datetime(2026, 11, 23, tzinfo=paris).timestamp()
    >>> [(round((a - monday) / 3600, 2), round((b - monday) / 3600, 2))
    ...  for a, b in occurrences(parse_recurrence("weekdays 17:00-20:00"), paris, monday, monday + 86400 * 2)]
    [(17.0, 20.0), (41.0, 44.0)]
    """
    day0 = dt.datetime.fromtimestamp(t0_s, tz).date() - dt.timedelta(days=1)
    day1 = dt.datetime.fromtimestamp(t1_s, tz).date()
    out = []
    d = day0
    while d <= day1:
        if d.weekday() in rec.days:
            midnight = dt.datetime(d.year, d.month, d.day, tzinfo=tz)
            start = (midnight + dt.timedelta(minutes=rec.start_min)).timestamp()
            end_day = d if rec.end_min > rec.start_min else d + dt.timedelta(days=1)
            end_min = rec.end_min
            end_mid = dt.datetime(end_day.year, end_day.month, end_day.day, tzinfo=tz)
            end = (end_mid + dt.timedelta(minutes=end_min)).timestamp()
            if end > t0_s and start < t1_s:
                out.append((start, end))
        d += dt.timedelta(days=1)
    return out


def window_schedule(windows: Iterable[tuple[float, float, float, str]]) -> CapSchedule:
    """The schedule of possibly overlapping windows ``(start_s, end_s, cap_w, label)``: the lowest cap in force.

    >>> s = window_schedule([(0, 10, 500.0, "a"), (5, 20, 300.0, "b")])
    >>> [s.cap_at(t) for t in (0, 5, 10, 20)]
    [500.0, 300.0, 300.0, inf]
    """
    return lowest([CapSchedule.window(a, b, c, label) for a, b, c, label in windows])


def lowest(schedules: Sequence[CapSchedule]) -> CapSchedule:
    """The pointwise minimum of piecewise-constant schedules (labels of the step in force are kept).

    >>> a = CapSchedule([CapStep(0.0, 400.0, "base")])
    >>> b = CapSchedule.window(10.0, 20.0, 300.0, "peak")
    >>> s = lowest([a, b])
    >>> [(x.start_s, x.cap_w, x.label) for x in s.steps]
    [(0.0, 400.0, 'base'), (10.0, 300.0, 'peak'), (20.0, 400.0, 'base')]
    """
    schedules = [s for s in schedules if s.steps]
    if not schedules:
        return CapSchedule([])
    if len(schedules) == 1:
        return schedules[0]
    times = sorted({st.start_s for s in schedules for st in s.steps})
    steps: list[CapStep] = []
    for t in times:
        best = math.inf
        label = ""
        for s in schedules:
            c = s.cap_at(t)
            if c < best:
                best, label = c, _label_at(s, t)
        if steps and steps[-1].cap_w == best and steps[-1].label == label:
            continue
        steps.append(CapStep(t, best, label))
    return CapSchedule(steps)


def _label_at(s: CapSchedule, t: float) -> str:
    i = -1
    for k, st in enumerate(s.steps):
        if st.start_s <= t:
            i = k
    return s.steps[i].label if i >= 0 else ""


LOOKAHEAD_S = 7 * 86400.0
"""How far ahead recurring windows and budgets are laid out in each cycle's snapshot."""


@dataclass(frozen=True, slots=True)
class BudgetWindow:
    """One window of an energy budget: ``key`` names it in the state store and in metrics."""

    key: str
    start_s: float
    end_s: float
    energy_j: float
    label: str


class LiveConstraints:
    """The cap schedule, energy budget windows and demand-response events of a daemon config at a time.

    Parameters
    ----------
    config
        The :class:`~wattsched.config.daemon.DaemonConfig`.
    """

    def __init__(self, config):
        self.config = config
        self.zone = config.zone

    def _cap(self, value, platform) -> float:
        from wattsched.config.caps import _cap_in_watts

        return _cap_in_watts(value, platform, "cap_schedule")

    def base_schedule(self, platform, now_s: float, lookahead_s: float = LOOKAHEAD_S) -> CapSchedule:
        """``cap_w`` or ``cap_schedule`` (fixed entries and recurring windows), without demand response."""
        cfg = self.config
        if cfg.cap_schedule is None:
            return CapSchedule.constant(None if cfg.cap_w is None else self._cap(cfg.cap_w, platform))
        from wattsched.config import cap_schedule_from_entries

        fixed = [e for e in cfg.cap_schedule if e.every is None]
        parts = [cap_schedule_from_entries(fixed, platform, "cap_schedule")] if fixed else []
        windows = []
        for e in cfg.cap_schedule:
            if e.every is None:
                continue
            cap = self._cap(e.cap_w, platform)
            label = e.label or e.every
            for a, b in occurrences(parse_recurrence(e.every), self.zone, now_s - 86400.0, now_s + lookahead_s):
                windows.append((a, b, cap, label))
        if windows:
            parts.append(window_schedule(windows))
        return lowest(parts)

    def noticed(self, platform, now_s: float, baselines: dict[str, float],
                power_w: float) -> list[NoticedEvent]:
        """Announced events with their target cap; ``baselines`` (platform power when each was first seen,
        kept by the caller across restarts) gains an entry for each new event, at ``power_w``."""
        out = []
        for i, e in enumerate(self.config.demand_response.events):
            if not (e.visible_from_s <= now_s < e.end_s):
                continue
            key = f"{i}:{e.start_s:.0f}"
            baseline = baselines.setdefault(key, power_w)
            cap = None if e.cap_w is None else self._cap(e.cap_w, platform)
            event = DemandResponseEvent(e.visible_from_s, e.start_s, e.end_s, cap_w=cap, reduction_w=e.reduction_w,
                                        label=e.label or "demand response")
            out.append(NoticedEvent(event, baseline, event.target_cap_w(baseline)))
        return out

    def schedule(self, platform, now_s: float) -> CapSchedule:
        """The cap schedule before demand response: ``cap_w`` or ``cap_schedule``, recurring windows laid out."""
        return self.base_schedule(platform, now_s)

    def budget_windows(self, t0_s: float, t1_s: float) -> list[BudgetWindow]:
        """Budget windows overlapping ``[t0_s, t1_s)``."""
        out = []
        for i, b in enumerate(self.config.energy_budgets):
            if b.every is None:
                spans = [(b.start_s, b.end_s)] if b.end_s > t0_s and b.start_s < t1_s else []
            else:
                spans = occurrences(parse_recurrence(b.every), self.zone, t0_s, t1_s)
            for a, z in spans:
                out.append(BudgetWindow(f"{i}:{a:.0f}-{z:.0f}", a, z, b.energy_j, b.label or b.every or f"budget {i}"))
        return out
