"""The daemon's own Prometheus metrics (``wattsched_`` prefix), on an injected registry."""

from __future__ import annotations

import math
from collections import Counter as Tally

from prometheus_client import CollectorRegistry, Counter, Enum, Gauge, Histogram, Info

from wattsched.model.platform import NodeState
from wattsched.model.reasons import REASON_KINDS, reason_kind


def _same_time(t: float) -> float:
    return t


class DaemonMetrics:
    """Every series the daemon exports. Pass a fresh ``CollectorRegistry`` in tests."""

    def __init__(self, registry: CollectorRegistry | None = None):
        r = self.registry = registry if registry is not None else CollectorRegistry()
        self.wall_time_of = _same_time
        """The wall-clock time of a daemon time: ``*_timestamp_seconds`` series are compared with Prometheus'
        ``time()``, so a backend whose clock runs ahead (the simulated cluster at ``--speed 600``) sets this
        (:meth:`~wattsched.daemon.simcluster.SimCluster.wall_time_of`)."""
        self.info = Info("wattsched", "wattsched build and configuration", registry=r)
        self.cycles = Counter("wattsched_cycles", "Control cycles run", registry=r)
        self.cycle_failures = Counter(
            "wattsched_cycle_failures", "Cycles that failed and were skipped", ["stage"], registry=r
        )
        for stage in ("observe", "decide"):  # series exist from the start (rate() and alerts need them)
            self.cycle_failures.labels(stage)
        self.cycle_duration = Histogram(
            "wattsched_cycle_duration_seconds", "Duration of a control cycle", registry=r,
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
        )
        self.last_cycle = Gauge(
            "wattsched_last_cycle_timestamp_seconds", "End of the last successful cycle (epoch)", registry=r
        )
        self.skipped_records = Counter(
            "wattsched_slurm_records_skipped", "Job and node records Slurm printed that could not be read and "
            "were left out (each is logged with its job id or node name)", registry=r,
        )
        self.dry_run = Gauge("wattsched_dry_run", "1 when the daemon only logs what it would do", registry=r)
        self.jobs = Gauge("wattsched_jobs", "Managed jobs by state as the daemon sees them", ["state"], registry=r)
        self.held_reasons = Gauge(
            "wattsched_held_jobs", "Jobs wattsched holds, by the kind of reason they wait", ["reason"], registry=r
        )
        for kind in REASON_KINDS:  # every series from the start, as for cycle failures
            self.held_reasons.labels(kind)
        self.nodes = Gauge("wattsched_nodes", "Managed nodes by state", ["state"], registry=r)
        self.decisions = Counter(
            "wattsched_decisions", "Actions decided, by action and outcome", ["action", "outcome"], registry=r
        )
        self.start_timeouts = Counter(
            "wattsched_start_timeouts", "Released jobs Slurm did not start in time (held again)", registry=r
        )
        self.start_mismatches = Counter(
            "wattsched_start_mismatches", "Jobs Slurm started on other nodes than planned", registry=r
        )
        self.plan_rejections = Counter(
            "wattsched_plan_rejections", "Plans the guard rejected (a policy bug)", registry=r
        )
        self.power = Gauge(
            "wattsched_platform_power_watts", "Platform power of the managed nodes", ["source"], registry=r
        )
        self.cap = Gauge("wattsched_power_cap_watts", "Power cap in force (+Inf when uncapped)", registry=r)
        self.telemetry_age = Gauge(
            "wattsched_telemetry_age_seconds", "Age of the newest node power sample used", registry=r
        )
        self.telemetry_stale = Gauge(
            "wattsched_telemetry_stale", "1 when telemetry is stale or unreachable (predictions used)", registry=r
        )
        self.node_power = Gauge("wattsched_node_power_watts", "Measured node power", ["node"], registry=r)
        self.node_cap = Gauge("wattsched_node_cap_watts", "Node power cap applied by wattsched", ["node"], registry=r)
        self.node_freq = Gauge(
            "wattsched_node_freq_hertz", "Maximum CPU frequency applied by wattsched", ["node"], registry=r
        )
        self.cap_ahead = Gauge(
            "wattsched_power_cap_ahead_watts",
            "Lowest power cap in force between now and a horizon (cap schedule, recurring windows, announced "
            "demand-response events; +Inf when uncapped)", ["horizon"], registry=r,
        )
        self.cap_next_change = Gauge(
            "wattsched_power_cap_next_change_timestamp_seconds",
            "When the power cap next changes (epoch; 0 when no change is scheduled)", registry=r,
        )
        self.dr_active = Gauge("wattsched_demand_response_active", "Demand-response events in force now",
                               registry=r)
        self.dr_announced = Gauge(
            "wattsched_demand_response_announced", "Demand-response events announced and not yet over", registry=r
        )
        self.dr_event_active = Gauge(
            "wattsched_dr_event_active", "1 while a demand-response event is in force (from config or a VTN)",
            registry=r,
        )
        self.dr_target = Gauge(
            "wattsched_dr_event_target_watts",
            "Effective platform power limit of the demand-response events in force (+Inf when none)", registry=r,
        )
        self.dr_baseline = Gauge(
            "wattsched_dr_event_baseline_watts",
            "Platform power when the event in force was first seen (the baseline of its reduction; 0 when none)",
            registry=r,
        )
        self.dr_reduction = Gauge(
            "wattsched_dr_measured_reduction_watts",
            "Baseline at notice minus measured platform power, while an event is in force (0 otherwise)", registry=r,
        )
        self.dr_deadline = Gauge(
            "wattsched_dr_event_deadline_timestamp_seconds",
            "When the reduction of the event in force must be met (start + demand_response.deadline_s; epoch; "
            "0 when none)", registry=r,
        )
        self.dr_missed = Gauge(
            "wattsched_dr_deadline_missed",
            "1 while measured power is above the event's target after its deadline", registry=r,
        )
        self.dr_misses = Counter(
            "wattsched_dr_deadline_misses",
            "Times measured power went above a demand-response event's target after its deadline",
            registry=r,
        )
        self.dr_events_received = Counter(
            "wattsched_dr_events_received", "Demand-response events received from a VTN (new or modified)",
            ["source"], registry=r,
        )
        self.dr_opt = Counter(
            "wattsched_dr_opt_decisions", "Opt-in and opt-out answers to VTN events", ["source", "decision"],
            registry=r,
        )
        self.dr_reports = Counter(
            "wattsched_dr_reports", "Reports of measured power sent to a VTN, by outcome", ["source", "outcome"],
            registry=r,
        )
        self.dr_vtn_failures = Counter(
            "wattsched_dr_vtn_failures", "Failed exchanges with a VTN (unreachable, refused, unreadable)", ["source"],
            registry=r,
        )
        self.dr_vtn_connected = Gauge(
            "wattsched_dr_vtn_connected", "1 when the last exchange with the VTN succeeded", ["source"], registry=r,
        )
        self.dr_vtn_last_contact = Gauge(
            "wattsched_dr_vtn_last_contact_timestamp_seconds",
            "When the last exchange with the VTN succeeded (wall clock, epoch; a VTN gone silent stops moving it)",
            ["source"], registry=r,
        )
        self.dr_target.set(math.inf)
        self.budget_consumed = Gauge(
            "wattsched_energy_budget_consumed_joules", "Energy used so far in an energy budget window in force",
            ["budget"], registry=r,
        )
        self.budget_remaining = Gauge(
            "wattsched_energy_budget_remaining_joules", "Energy left in an energy budget window in force",
            ["budget"], registry=r,
        )
        self.budget_total = Gauge(
            "wattsched_energy_budget_joules", "Energy allowed in an energy budget window in force", ["budget"],
            registry=r,
        )
        self.budget_available = Gauge(
            "wattsched_energy_budget_available_joules",
            "Energy the budget policy may spend now (C_ea: made available so far minus consumed)", ["budget"],
            registry=r,
        )
        self.budget_projected = Gauge(
            "wattsched_energy_budget_projected_joules",
            "Energy the window would use by its end at the current platform power", ["budget"], registry=r,
        )
        self.budget_source = Enum(
            "wattsched_energy_budget_source",
            "Where the last cycle's energy for the budgets came from: the nodes' RAPL counters, measured power × "
            "time, or estimated power × time (telemetry stale or missing for some node)",
            states=["counters", "power", "estimate"], registry=r,
        )
        self.node_drift = Counter(
            "wattsched_node_setting_drift",
            "Node caps or frequencies found changed behind wattsched's back (and set again)", ["kind"], registry=r,
        )
        self.node_failures = Counter(
            "wattsched_node_actuation_failures", "Node cap or frequency writes that failed", ["kind"], registry=r
        )
        for kind in ("cap", "freq"):
            self.node_drift.labels(kind)
            self.node_failures.labels(kind)
        self.forecast = Gauge(
            "wattsched_forecast_power_watts", "Forecast platform power at a horizon", ["horizon"], registry=r
        )
        self.slurm_errors = Counter(
            "wattsched_slurm_command_failures", "Slurm commands that failed", ["command"], registry=r
        )

    def set_jobs(self, counts: dict[str, int]) -> None:
        for state in ("held", "pending_unheld", "starting", "running", "held_by_others"):
            self.jobs.labels(state).set(counts.get(state, 0))

    def set_held_reasons(self, counts: dict[str, int]) -> None:
        """Held jobs by kind of reason, from counts by reason (its template or text; full text goes to the log).

        The label takes only the values of :data:`~wattsched.model.reasons.REASON_KINDS`, each exported
        every cycle (0 when no job waits for it), never a reason's text or numbers.
        """
        by_kind = dict.fromkeys(REASON_KINDS, 0)
        for reason, n in counts.items():
            by_kind[reason_kind(reason)] += n
        for kind, n in by_kind.items():
            self.held_reasons.labels(kind).set(n)

    def set_nodes(self, counts: dict[str, int]) -> None:
        self.nodes.clear()
        for state, n in counts.items():
            self.nodes.labels(state).set(n)

    def export_cycle(self, view, report, now: float, *, held_kinds, dr_events, budget_windows, policy_state,
                     measured) -> None:
        """Export what one daemon cycle saw and did."""
        m = self
        c = view.classified
        m.cycles.inc()
        m.cycle_duration.observe(report.duration_s)
        m.last_cycle.set(m.wall_time_of(now))
        m.set_jobs({
            "held": len(c.ours), "pending_unheld": len(c.adopt) - len(report.held), "starting": len(c.starting),
            "running": len(c.running), "held_by_others": len(c.others_held),
        })
        m.set_held_reasons(dict(held_kinds))
        m.set_nodes(dict(Tally(NodeState(s).name.lower() for s in view.snapshot.node_state)))
        snap = view.snapshot
        m.cap.set(snap.cap_w)
        from wattsched.telemetry.forecast import HORIZONS

        for label, seconds in HORIZONS.items():
            m.cap_ahead.labels(label).set(snap.cap.min_cap_between(now, now + seconds))
        nxt = snap.cap.next_change_after(now)
        m.cap_next_change.set(m.wall_time_of(nxt) if math.isfinite(nxt) else 0.0)
        m.dr_active.set(sum(1 for e in dr_events if e.event.start_s <= now < e.event.end_s))
        m.dr_announced.set(len(dr_events))
        for g in (m.budget_consumed, m.budget_remaining, m.budget_total, m.budget_available, m.budget_projected):
            g.clear()
        c_ea = getattr(policy_state, "c_ea_j", None)
        for w, b in zip(budget_windows, snap.budgets, strict=False):
            if w.start_s <= now < w.end_s:
                m.budget_consumed.labels(w.label).set(b.consumed_j)
                m.budget_remaining.labels(w.label).set(b.remaining_j)
                m.budget_total.labels(w.label).set(b.budget.energy_j)
                m.budget_projected.labels(w.label).set(b.consumed_j + snap.platform_power_w * (w.end_s - now))
                if c_ea is not None and getattr(policy_state, "window", None) is not None:
                    m.budget_available.labels(w.label).set(c_ea)
        if measured:
            m.power.labels("measured").set(snap.platform_power_w)
            for node, watts in measured.items():
                m.node_power.labels(node).set(watts)
        m.power.labels("predicted").set(view.predicted_power_w)
        fc = snap.forecast
        if fc is not None:
            from wattsched.telemetry.forecast import HORIZONS

            for label, value in fc.horizons(HORIZONS).items():
                m.forecast.labels(label).set(value)

def serve(metrics: DaemonMetrics, address: str, port: int):
    """Start the ``/metrics`` HTTP endpoint in a thread; returns the server (``shutdown()`` stops it)."""
    from prometheus_client import start_http_server

    server, _thread = start_http_server(port, addr=address, registry=metrics.registry)
    return server
