"""Power constraints: a piecewise-constant cap schedule and energy-budget windows.

Capped windows and demand-response events are both expressed as cap schedule
steps, so a policy only ever looks at one schedule.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CapStep:
    """From ``start_s`` on (until the next step) the platform may draw ``cap_w``; ``inf`` = uncapped."""

    start_s: float
    cap_w: float
    label: str = ""


class CapSchedule:
    """Piecewise-constant platform power cap.

    >>> s = CapSchedule.window(100.0, 200.0, 5000.0)
    >>> s.cap_at(50.0), s.cap_at(100.0), s.cap_at(199.0), s.cap_at(200.0)
    (inf, 5000.0, 5000.0, inf)
    >>> s.next_change_after(100.0)
    200.0
    """

    def __init__(self, steps: list[CapStep] | None = None):
        steps = sorted(steps or [], key=lambda s: s.start_s)
        for s in steps:
            if not (s.cap_w > 0 or math.isinf(s.cap_w)):
                raise ValueError(f"cap at t={s.start_s} must be positive, got {s.cap_w}")
        self.steps = steps
        self._starts = [s.start_s for s in steps]

    @classmethod
    def constant(cls, cap_w: float | None) -> CapSchedule:
        if cap_w is None:
            return cls([])
        return cls([CapStep(-math.inf, float(cap_w), "constant")])

    @classmethod
    def window(cls, start_s: float, end_s: float, cap_w: float, label: str = "window") -> CapSchedule:
        if end_s <= start_s:
            raise ValueError(f"cap window ends ({end_s}) before it starts ({start_s})")
        return cls([CapStep(start_s, float(cap_w), label), CapStep(end_s, math.inf, "")])

    @property
    def is_uncapped(self) -> bool:
        return all(math.isinf(s.cap_w) for s in self.steps)

    def cap_at(self, t: float) -> float:
        i = bisect.bisect_right(self._starts, t) - 1
        return self.steps[i].cap_w if i >= 0 else math.inf

    def next_change_after(self, t: float) -> float:
        i = bisect.bisect_right(self._starts, t)
        return self._starts[i] if i < len(self._starts) else math.inf

    def min_cap_between(self, t0: float, t1: float) -> float:
        """Lowest cap in force at any time in ``[t0, t1)``: what a job running then must respect."""
        cap = self.cap_at(t0)
        i = bisect.bisect_right(self._starts, t0)
        while i < len(self._starts) and self._starts[i] < t1:
            cap = min(cap, self.steps[i].cap_w)
            i += 1
        return cap

    def change_times(self) -> list[float]:
        return [t for t in self._starts if math.isfinite(t)]

    def shifted(self, offset_s: float) -> CapSchedule:
        return CapSchedule([CapStep(s.start_s + offset_s, s.cap_w, s.label) for s in self.steps])


@dataclass(frozen=True, slots=True)
class EnergyBudget:
    """At most ``energy_j`` may be consumed between ``start_s`` and ``end_s``."""

    start_s: float
    end_s: float
    energy_j: float

    def __post_init__(self):
        if self.end_s <= self.start_s:
            raise ValueError(f"energy budget window ends ({self.end_s}) before it starts ({self.start_s})")
        if self.energy_j <= 0:
            raise ValueError(f"energy budget must be positive, got {self.energy_j}")


@dataclass(frozen=True, slots=True)
class BudgetState:
    """Where a budget window stands at the snapshot's time."""

    budget: EnergyBudget
    consumed_j: float

    @property
    def remaining_j(self) -> float:
        return self.budget.energy_j - self.consumed_j
