"""Power constraints: a piecewise-constant cap schedule, energy-budget windows, demand-response events.

Capped windows and demand-response events both end up as cap schedule steps,
so a policy can decide on one schedule (:attr:`Snapshot.cap`); the events
themselves are in the snapshot too (:attr:`Snapshot.dr_events`), from their
notice time on. :meth:`CapSchedule.lowest_cap` is the one lookahead every
policy uses.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, overload

import numpy as np

if TYPE_CHECKING:  # numpy.typing costs 40 ms at import
    import numpy.typing as npt

LOOKAHEAD_MIN_S = 1e-9
"""A job is taken to run at least this long when looking ahead (a zero walltime still sees the cap in force)."""


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
        self._np: tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]] | None = None

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
        """Lowest cap in force at any time in ``[t0, t1)``: ``lowest_cap(t0, t1 - t0)``."""
        return self.lowest_cap(t0, t1 - t0)

    @overload
    def lowest_cap(self, start_s: float, duration_s: float, horizon_s: float = ...) -> float: ...

    @overload
    def lowest_cap(self, start_s: float, duration_s: npt.ArrayLike,
                   horizon_s: float = ...) -> npt.NDArray[np.float64]: ...

    def lowest_cap(self, start_s, duration_s, horizon_s=math.inf):
        """Lowest cap in force at any time in ``[start_s, start_s + duration_s)``: the lookahead.

        Vectorised over ``duration_s`` (an array gives an array, a number a
        float: the scalar case is the array case of length 1). A duration is
        taken as at least :data:`LOOKAHEAD_MIN_S`. Changes at or after
        ``start_s + horizon_s`` are not seen (a schedule known only that far
        ahead); ``horizon_s=0`` gives the cap in force at ``start_s``.

        >>> s = CapSchedule([CapStep(100.0, 700.0)])   # one step: 700 W from t=100
        >>> s.lowest_cap(0.0, 50.0), s.lowest_cap(0.0, 150.0), s.lowest_cap(0.0, 150.0, horizon_s=60.0)
        (inf, 700.0, inf)
        >>> s.lowest_cap(0.0, [50.0, 100.0, 101.0]).tolist()
        [inf, inf, 700.0]
        """
        starts = self._starts
        first = bisect.bisect_right(starts, start_s)
        now_cap = self.steps[first - 1].cap_w if first else math.inf
        finite_horizon = math.isfinite(horizon_s)
        if type(duration_s) is float or np.ndim(duration_s) == 0:  # (np.ndim costs more than this walk)
            # The length-1 case, without numpy's overhead: a walk over the changes in the window.
            d = max(float(duration_s), LOOKAHEAD_MIN_S)  # type: ignore[arg-type]
            stop = start_s + (min(d, max(horizon_s, 0.0)) if finite_horizon else d)
            cap, i, steps = now_cap, first, self.steps
            while i < len(starts) and starts[i] < stop:
                if steps[i].cap_w < cap:
                    cap = steps[i].cap_w
                i += 1
            return cap
        d = np.maximum(np.asarray(duration_s, dtype=np.float64), LOOKAHEAD_MIN_S)
        if first >= len(starts) or horizon_s <= 0:
            return np.full(d.shape, now_cap)
        stop = start_s + (np.minimum(d, horizon_s) if finite_horizon else d)
        all_starts, all_caps = self._arrays()
        lowest = np.minimum.accumulate(np.minimum(all_caps[first:], now_cap))
        # changes strictly before the end of the run are in force during it
        k = np.searchsorted(all_starts[first:], stop, side="left")
        return np.where(k > 0, lowest[np.maximum(k - 1, 0)], now_cap)

    def _arrays(self) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        arrays = self._np
        if arrays is None:
            arrays = self._np = (np.array(self._starts, dtype=np.float64),
                                 np.array([s.cap_w for s in self.steps], dtype=np.float64))
        return arrays

    def with_limit(self, start_s: float, end_s: float, cap_w: float, label: str = "") -> CapSchedule:
        """This schedule with the cap at most ``cap_w`` over ``[start_s, end_s)`` (a window, e.g. a DR event).

        >>> s = CapSchedule.constant(1000.0).with_limit(10.0, 20.0, 600.0, "dr")
        >>> s.cap_at(5.0), s.cap_at(10.0), s.cap_at(20.0)
        (1000.0, 600.0, 1000.0)
        >>> CapSchedule.window(0.0, 15.0, 500.0).with_limit(10.0, 20.0, 600.0).cap_at(12.0)
        500.0
        """
        if not end_s > start_s:
            raise ValueError(f"cap limit ends ({end_s}) before it starts ({start_s})")
        steps: list[CapStep] = []
        for t in sorted({*self._starts, start_s, end_s}):
            i = bisect.bisect_right(self._starts, t) - 1
            base, base_label = (self.steps[i].cap_w, self.steps[i].label) if i >= 0 else (math.inf, "")
            step = CapStep(t, cap_w, label) if start_s <= t < end_s and cap_w < base else CapStep(t, base, base_label)
            if steps and steps[-1].cap_w == step.cap_w:
                continue
            if not steps and math.isinf(step.cap_w):
                continue  # uncapped until the first real step: no step needed
            steps.append(step)
        return CapSchedule(steps)

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


@dataclass(frozen=True, slots=True)
class DemandResponseEvent:
    """A request from the grid to hold platform power down over ``[start_s, end_s)``.

    The target is either an absolute cap (``cap_w``) or a reduction
    (``reduction_w``) relative to the baseline: the platform power at the
    notice time. A policy sees an event only from ``notice_s`` on (in replay
    as live), and from then on the snapshot's cap schedule includes its window.

    >>> e = DemandResponseEvent(notice_s=0.0, start_s=600.0, end_s=1200.0, reduction_w=300.0)
    >>> e.target_cap_w(baseline_w=1000.0)
    700.0
    >>> DemandResponseEvent(0.0, 10.0, 20.0, cap_w=500.0).target_cap_w(baseline_w=1000.0)
    500.0
    """

    notice_s: float
    start_s: float
    end_s: float
    cap_w: float | None = None
    reduction_w: float | None = None
    label: str = "demand response"

    def __post_init__(self) -> None:
        if not self.end_s > self.start_s:
            raise ValueError(f"demand-response event ends ({self.end_s}) before it starts ({self.start_s})")
        if self.notice_s > self.start_s:
            raise ValueError(f"demand-response notice ({self.notice_s}) comes after the start ({self.start_s})")
        if (self.cap_w is None) == (self.reduction_w is None):
            raise ValueError("a demand-response event needs exactly one target: cap_w or reduction_w")
        if self.cap_w is not None and not self.cap_w > 0:
            raise ValueError(f"demand-response cap must be positive, got {self.cap_w}")
        if self.reduction_w is not None and not self.reduction_w > 0:
            raise ValueError(f"demand-response reduction must be positive, got {self.reduction_w}")

    def target_cap_w(self, baseline_w: float) -> float:
        """The cap over the window, given the platform power at notice time (kept above 1 W)."""
        if self.cap_w is not None:
            return self.cap_w
        assert self.reduction_w is not None
        return max(baseline_w - self.reduction_w, 1.0)


@dataclass(frozen=True, slots=True)
class NoticedEvent:
    """A demand-response event as a policy sees it: the event and the cap it resolved to at notice time."""

    event: DemandResponseEvent
    baseline_w: float
    cap_w: float
