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

from wattsched.model.constraints import CapSchedule, CapStep, DemandResponseEvent, EnergyBudget, NoticedEvent
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
            midnight = dt.datetime(d.year, d.month, d.day)
            start = wall_instant(midnight + dt.timedelta(minutes=rec.start_min), tz)
            end_day = midnight if rec.end_min > rec.start_min else midnight + dt.timedelta(days=1)
            end = wall_instant(end_day + dt.timedelta(minutes=rec.end_min), tz)
            if end > start and end > t0_s and start < t1_s:  # a window wholly inside a skipped hour is none
                out.append((start, end))
        d += dt.timedelta(days=1)
    return out


def wall_instant(wall: dt.datetime, tz: ZoneInfo) -> float:
    """Epoch seconds of the naive wall-clock time ``wall`` in ``tz``.

    A time that occurs twice (clocks set back) is its first occurrence; a time that does not exist (clocks
    set forward) is the instant of the change, so a window over the gap keeps the part that exists:
    ``daily 02:30-03:30`` in Paris on 2027-03-28 is 03:00-03:30 CEST.

    >>> paris = ZoneInfo("Europe/Paris")
    >>> t = wall_instant(dt.datetime(2027, 3, 28, 2, 30), paris)
    >>> dt.datetime.fromtimestamp(t, paris).isoformat()
    '2027-03-28T03:00:00+02:00'
    """
    a = wall.replace(tzinfo=tz, fold=0).timestamp()
    b = wall.replace(tzinfo=tz, fold=1).timestamp()
    if a <= b:
        return a
    # in the gap: fold=0 reads it with the offset before the change (later instant), fold=1 with the offset
    # after it; the change lies between, at the first instant with the later offset
    after = dt.datetime.fromtimestamp(a, tz).utcoffset()
    lo, hi = math.floor(b), math.ceil(a)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if dt.datetime.fromtimestamp(mid, tz).utcoffset() == after:
            hi = mid
        else:
            lo = mid
    return float(hi)


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
        self._warned: set[str] = set()

    def warnings(self, platform) -> list[str]:
        """Constraints of the config the managed nodes cannot honour: an energy budget below their idle energy
        over its window, a demand-response target below their idle power or at or above their maximum."""
        from wattsched.sim.checks import budget_notes, dr_event_notes

        budgets = []
        for b in self.config.energy_budgets:
            length_s = (parse_recurrence(b.every).length_min * 60.0 if b.every is not None
                        else b.end_s - b.start_s)
            budgets.append(EnergyBudget(0.0, length_s, b.energy_j))
        events = []
        for e in self.config.demand_response.events:
            cap = None if e.cap_w is None else self._cap(e.cap_w, platform)
            events.append(DemandResponseEvent(0.0, 1.0, 2.0, cap_w=cap, reduction_w=e.reduction_w))
        dr_notes = [n.replace("demand_response[", "demand_response.events[", 1)
                    for n in dr_event_notes(events, platform)]
        return [*budget_notes(budgets, platform), *dr_notes]

    def new_warnings(self, platform) -> list[str]:
        """:meth:`warnings` not returned before (the managed nodes, hence the floor, can change while running)."""
        fresh = [w for w in self.warnings(platform) if w not in self._warned]
        self._warned.update(fresh)
        return fresh

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
