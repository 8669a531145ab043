"""What the grid and the budget say: demand-response events and energy budgets, as inputs of a cycle.

Demand-response events come from the daemon config (files, recurring windows) and from the utility through
OpenADR 2.0b or 3.0 VENs (:mod:`wattsched.daemon.grid`); each is taken into the snapshot's cap schedule with
its baseline (the platform power when it was first seen, kept in the state store so that a restart keeps the
same target), and verified against measured power past its deadline. Energy budgets integrate platform
power (the nodes' energy counters when every node has them, else the measured or predicted power between
two cycles) into their windows, kept in the store; the snapshot gets the windows in force and those ahead.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence

from wattsched.config import key_locator
from wattsched.config.daemon import DaemonConfig
from wattsched.daemon.actuators import NodeSetting
from wattsched.daemon.clock import local_time
from wattsched.daemon.grid.hub import GridHub
from wattsched.daemon.metrics import DaemonMetrics
from wattsched.daemon.schedule import LOOKAHEAD_S, LiveConstraints
from wattsched.daemon.store import AuditEntry, Store
from wattsched.daemon.view import View
from wattsched.errors import ConfigError
from wattsched.model.constraints import BudgetState, EnergyBudget, NoticedEvent

__all__ = ["GridInputs"]

log = logging.getLogger("wattsched.daemon")


class GridInputs:
    """Demand-response events (configured and from the grid) and energy budgets, filled into each snapshot."""

    def __init__(self, store: Store, metrics: DaemonMetrics):
        self.store = store
        self.metrics = metrics
        self.config: DaemonConfig | None = None
        self.constraints: LiveConstraints | None = None
        self.grid: GridHub | None = None
        self.vens: list = []
        self.dr_events: list[NoticedEvent] = []
        self.dr_verdicts: dict[str, str] = {}
        self.budget_windows: list = []
        self.last_counters: dict | None = None
        self.raw_measured: dict[str, float] = {}
        """Node power as telemetry read it this cycle."""
        self.measured: dict[str, float] = {}
        """Node power as the policy takes it (nodes changed a moment ago left out)."""
        self.cycle_no = 0

    def configure(self, config: DaemonConfig, constraints: LiveConstraints, grid: GridHub) -> None:
        self.config = config
        self.constraints = constraints
        self.grid = grid

    def begin_cycle(self, cycle_no: int, raw_measured: dict[str, float], measured: dict[str, float]) -> None:
        self.cycle_no = cycle_no
        self.raw_measured = raw_measured or {}
        self.measured = measured or {}

    def fill_demand_response(self, view: View, now: float) -> None:
        """Announced events into the snapshot and its cap schedule; a reduction counts from the platform power
        when the event was first seen (kept in the store, so a restart keeps the same target)."""
        snap = view.snapshot
        baselines = dict(self.store.get("dr_baselines", {}) or {})
        known_before = set(baselines)
        events = self.constraints.noticed(snap.platform, now, baselines, snap.platform_power_w)
        for key in set(baselines) - known_before:
            log.info("demand-response event %s announced: baseline %.0f W", key, baselines[key])
        grid = self.grid.events(now)
        saved = self.grid.saved(now)
        if saved != (self.store.get("dr_grid_events", []) or []):
            self.store.put("dr_grid_events", saved)
        for g in grid:
            known = g.event.key in baselines
            baseline = baselines.setdefault(g.event.key, g.baseline_w)
            event = g.event.to_event(baseline)
            events.append(NoticedEvent(event, baseline, event.target_cap_w(baseline)))
            if not known:
                log.info("demand-response event %s from the grid taken part in: %s", g.event.key,
                         g.event.describe(baseline))
        if set(baselines) != known_before:
            self.store.put("dr_baselines", baselines)
        cap = snap.cap
        for e in events:
            cap = cap.with_limit(e.event.start_s, e.event.end_s, e.cap_w, e.event.label)
        snap.cap = cap
        snap.dr_events = events
        self.dr_events = events
        measured_w, _unmeasured = self.measured_platform_w(view)
        self.grid.observe(power_w=snap.platform_power_w, idle_w=snap.platform.idle_power_w, measured_w=measured_w)

    def measured_platform_w(self, view: View) -> tuple[float | None, list[int]]:
        """Platform power as telemetry reads it this cycle (the nodes just changed too, whose readings the policy
        sets aside for a while), predicted power for nodes without data; None when nothing is measured. Also the
        nodes without data."""
        raw = self.raw_measured
        unmeasured = [i for i, n in enumerate(view.node_names) if n not in raw]
        if not raw or len(unmeasured) == len(view.node_names):
            return None, unmeasured
        watts = sum(raw[n] for n in view.node_names if n in raw)
        return watts + (self.predicted_nodes_w(view, unmeasured) if unmeasured else 0.0), unmeasured

    def verify_demand_response(self, view: View, now: float, audit: list[AuditEntry]) -> None:
        """Past an event's deadline (start + ``demand_response.deadline_s``), compare measured platform power
        with its target: a miss is logged, audited, counted and exported (it drives the
        ``WattschedDemandResponseMissed`` alert); meeting it again is audited too."""
        cfg = self.config.demand_response
        m = self.metrics
        active = [e for e in self.dr_events if e.event.start_s <= now < e.event.end_s]
        m.dr_event_active.set(1 if active else 0)
        if not active:
            m.dr_target.set(math.inf)
            for g in (m.dr_baseline, m.dr_reduction, m.dr_deadline, m.dr_missed):
                g.set(0)
            return
        strictest = min(active, key=lambda e: e.cap_w)
        measured_w, unmeasured = self.measured_platform_w(view)
        m.dr_target.set(strictest.cap_w)
        m.dr_baseline.set(strictest.baseline_w)
        m.dr_deadline.set(m.wall_time_of(strictest.event.start_s + cfg.deadline_s))
        m.dr_reduction.set(0.0 if measured_w is None else strictest.baseline_w - measured_w)
        missed_now = False
        for e in active:
            key = f"{e.event.label} at {local_time(e.event.start_s)}"
            if now < e.event.start_s + cfg.deadline_s:
                continue
            if measured_w is None:
                verdict, why = "unverified", "no measured power (telemetry.source is none or stale)"
            else:
                coverage = f"measured on {len(view.node_names) - len(unmeasured)} of {len(view.node_names)} nodes"
                over = measured_w - e.cap_w
                if over > cfg.tolerance_w:
                    verdict = "missed"
                    missed_now = True
                    why = (f"platform power {measured_w:.0f} W above the limit {e.cap_w:.0f} W by "
                           f"{over:.0f} W, {now - e.event.start_s:.0f} s after the start ({coverage})")
                else:
                    verdict = "met"
                    why = (f"platform power {measured_w:.0f} W within the limit {e.cap_w:.0f} W, "
                           f"reduction {e.baseline_w - measured_w:.0f} W from {e.baseline_w:.0f} W "
                           f"({coverage})")
            if self.dr_verdicts.get(key) == verdict:
                continue
            self.dr_verdicts[key] = verdict
            audit.append(AuditEntry(now, self.cycle_no, "dr_verify", key, why[:2000], self.config.dry_run, verdict))
            if verdict == "missed":
                m.dr_misses.inc()
                log.warning("demand-response event %s missed its target: %s", key, why)
            else:
                log.info("demand-response event %s %s: %s", key, verdict, why)
        m.dr_missed.set(1 if missed_now else 0)

    @staticmethod
    def predicted_nodes_w(view: View, nodes: list[int]) -> float:
        """Predicted power of some nodes: their share of the running jobs' power, idle power elsewhere."""
        snap = view.snapshot
        busy: dict[int, float] = {}
        for r in snap.running.values():
            for i in r.nodes:
                busy[i] = r.power_w / max(len(r.nodes), 1)
        return sum(busy.get(i, snap.platform.nodes[i].power.idle_w) for i in nodes)

    def fill_budgets(self, view: View, now: float, observed: dict[str, NodeSetting]) -> None:
        """Integrate platform power into the budget windows (kept in the store); put them in the snapshot."""
        if not self.config.energy_budgets:
            return
        snap = view.snapshot
        saved = self.store.get("energy", {}) or {}
        last_s, last_w = saved.get("last_s"), saved.get("last_w")
        consumed: dict[str, float] = dict(saved.get("consumed", {}))
        counters = {name: observed[name].counters for name in view.node_names
                    if name in observed and observed[name].counters}
        # Measured when telemetry had fresh data for every managed node; else (stale, down, or nodes without
        # data) the platform power is partly or wholly the estimate, and so is the energy counted from it.
        measured = bool(view.node_names) and all(n in self.measured for n in view.node_names)
        if last_s is not None and last_w is not None and now > last_s:
            # the nodes' energy counters when every node has them in both cycles; else the power between two
            # cycles taken as the level of the first (a daemon down meanwhile counts its gap at its last level)
            energy_j = _counted_energy_j(self.last_counters, counters, view.node_names)
            if energy_j is not None:
                self.metrics.budget_source.state("counters")
            else:
                energy_j = last_w * (now - last_s)
                self.metrics.budget_source.state("power" if saved.get("last_measured", True) else "estimate")
            for w in self.constraints.budget_windows(last_s, now):
                overlap = min(now, w.end_s) - max(last_s, w.start_s)
                if overlap > 0:
                    consumed[w.key] = consumed.get(w.key, 0.0) + energy_j * overlap / (now - last_s)
        self.last_counters = counters
        windows = self.constraints.budget_windows(now, now + 1e-3)  # in force now
        live = {w.key for w in windows}
        consumed = {k: v for k, v in consumed.items() if k in live}
        self.store.put("energy", {"last_s": now, "last_w": snap.platform_power_w, "last_measured": measured,
                                  "consumed": consumed})
        snap.budgets = [BudgetState(EnergyBudget(w.start_s, w.end_s, w.energy_j), consumed.get(w.key, 0.0))
                        for w in windows]
        ahead = self.constraints.budget_windows(now, now + LOOKAHEAD_S)
        snap.upcoming_budgets = sorted((EnergyBudget(w.start_s, w.end_s, w.energy_j) for w in ahead
                                        if w.start_s > now), key=lambda b: b.start_s)
        self.budget_windows = windows

    def start_grid(self) -> None:
        """Start the VENs of ``demand_response.openadr2`` and ``openadr3`` in their threads (once)."""
        if self.vens:
            return
        dr = self.config.demand_response
        try:
            if dr.openadr2 is not None:
                from wattsched.daemon.grid.openadr2 import OpenADR2Ven

                self.vens.append(OpenADR2Ven(dr.openadr2, self.grid))
            if dr.openadr3 is not None:
                from wattsched.daemon.grid.openadr3 import OpenADR3Ven

                self.vens.append(OpenADR3Ven(dr.openadr3, self.grid))
        except ConfigError as exc:
            key = "openadr2" if dr.openadr2 is not None and not self.vens else "openadr3"
            raise ConfigError(f"{key_locator(self.config, 'demand_response')((key,))}: {exc}") from None
        for ven in self.vens:
            ven.start()
            log.info("demand response: %s VEN started for %s", ven.source, ven.config.vtn_url)

    def stop_grid(self) -> None:
        for ven in self.vens:
            ven.stop()
        self.vens = []


def _counted_energy_j(before: dict | None, after: dict, names: Sequence[str]) -> float | None:
    """Energy of the nodes ``names`` between two readings of their RAPL counters, or None if any is missing.

    >>> _counted_energy_j({"a": ((900, 1000),)}, {"a": ((100, 1000),)}, ["a"])
    0.0002
    """
    if not before or not names:
        return None
    from wattsched.agent.sysfs import energy_delta_uj

    total_uj = 0
    for name in names:
        a, b = before.get(name), after.get(name)
        if not a or not b or len(a) != len(b):
            return None
        total_uj += sum(energy_delta_uj(e1, e2, r) for (e1, _), (e2, r) in zip(a, b, strict=True))
    return total_uj / 1e6
