"""The control inputs of a run over time: the cap schedule and the demand-response events noticed, the energy
budgets, the monitoring ticks.

:class:`Controls` keeps what the engine's control events change and what the policy's snapshot shows of
them: the cap schedule (a demand-response event, once noticed, adds its window to it), the events noticed
and still in force, the budget windows open with the energy drawn since each began, the upcoming ones. The
engine keeps the events on its heap and calls these when they come due. Pure: no clock of its own.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from wattsched.errors import ConfigError
from wattsched.model.constraints import BudgetState, CapSchedule, DemandResponseEvent, EnergyBudget, NoticedEvent
from wattsched.policies.base import PolicyTags
from wattsched.sim.options import EngineOptions


class Controls:
    """A run's cap schedule (default: uncapped), energy budgets and demand-response events, and its ticks.

    Monitoring ticks come every ``options.tick_s``, or else at the ``tick_period_s`` of the policy's tags
    (its monitoring stages); ``tick_s`` is 0 when neither asks for them.
    """

    def __init__(self, cap: CapSchedule | None, budgets: Iterable[EnergyBudget],
                 dr_events: Iterable[DemandResponseEvent], options: EngineOptions, tags: PolicyTags):
        self.cap = cap or CapSchedule()
        self.budgets = list(budgets)
        self.dr_events = sorted(dr_events, key=lambda e: (e.notice_s, e.start_s))
        self.noticed: list[NoticedEvent] = []
        self._start_energy: dict[int, float] = {}
        self.tick_s = options.tick_s or tags.tick_period_s
        self.ticks = 0
        self._fixed_tick = bool(options.tick_s)
        self._tick_param = tags.tick_param
        self._max_ticks = options.max_ticks
        self._tick_until = max((b.end_s for b in self.budgets), default=-math.inf)

    # ------------------------------------------------------------ demand response
    def notice(self, i: int, baseline_w: float, now: float) -> list[float]:
        """Demand-response event ``i`` is announced at ``now`` with the platform drawing ``baseline_w``: its window
        joins the cap schedule. Returns the times after ``now`` at which the cap changes (its window's edges)."""
        event = self.dr_events[i]
        cap_w = event.target_cap_w(baseline_w)
        self.noticed.append(NoticedEvent(event, baseline_w, cap_w))
        self.cap = self.cap.with_limit(event.start_s, event.end_s, cap_w, event.label)
        return [t for t in (event.start_s, event.end_s) if t > now]

    def notices_in_force(self, t: float) -> list[NoticedEvent]:
        """The events noticed whose window has not ended at ``t``."""
        return [e for e in self.noticed if e.event.end_s > t]

    # ------------------------------------------------------------ energy budgets
    def budget_edge(self, i: int, t: float, energy_j: float) -> None:
        """Budget window ``i`` starts or ends at ``t``; the platform has drawn ``energy_j`` since the run began."""
        if t == self.budgets[i].start_s:
            self._start_energy[i] = energy_j

    def budget_states(self, now: float, energy_j: float) -> list[BudgetState]:
        """The budget windows open at ``now``, each with the energy drawn since it began."""
        out = []
        for i, b in enumerate(self.budgets):
            if b.start_s <= now < b.end_s:
                out.append(BudgetState(b, energy_j - self._start_energy.get(i, energy_j)))
        return out

    def upcoming_budgets(self, now: float) -> list[EnergyBudget]:
        """The budget windows not begun at ``now``, earliest first."""
        return sorted((b for b in self.budgets if b.start_s > now), key=lambda b: b.start_s)

    # ------------------------------------------------------------ monitoring ticks
    def tick(self, t: float, active: bool, waiting: bool) -> bool:
        """A monitoring tick at ``t``; whether the next one is due, given whether jobs are still to come or
        running (``active``) and whether some wait (``waiting``).

        A policy's own monitoring stages go on for a waiting queue only while a budget window lasts: a job
        that can never start would otherwise keep the run going for ever. Raises :class:`ConfigError` past
        ``max_ticks`` ticks.
        """
        self.ticks += 1
        if self._max_ticks is not None and self.ticks > self._max_ticks:
            # the period is tick_s, or the policy's own (named by its parameter)
            param = None if self._fixed_tick else self._tick_param
            key, fix = ("tick_s", "a longer tick") if param is None else (
                f"params.{param}", f"a longer period (--param {param}=SECONDS)")
            raise ConfigError(
                f"{key}: the run reached {self._max_ticks:,} ticks of {self.tick_s:g} s at "
                f"t = {t:,.0f} s; use {fix} or raise the limit (--max-ticks, config "
                "key max_ticks)")
        return active or (waiting and (self._fixed_tick or t < self._tick_until))
