"""The control loop: observe, snapshot, decide, guard, act, record.

One :meth:`Daemon.cycle` is one pass; :meth:`Daemon.run` repeats it every
``poll_interval_s`` until stopped. A failed cycle is logged, counted and skipped:
the loop goes on. The daemon is three parts around one cycle, in the spirit of a
pure scheduler beside its reconciler:

- the cycle (this module): Slurm's state and telemetry in, the snapshot built
  (:mod:`wattsched.daemon.view`), the policy's plan checked by the guard and
  applied by :class:`~wattsched.daemon.actions.PlanActions`, every action under
  a write-ahead intent, so a daemon killed in between checks on restart what
  Slurm and the nodes actually did instead of acting twice;
- the reconciler of node settings (:class:`~wattsched.daemon.reconciler.NodeReconciler`):
  desired caps and frequencies against what the nodes hold, set again when they
  differ;
- the grid and budget inputs (:class:`~wattsched.daemon.inputs.GridInputs`):
  demand-response events (configured, OpenADR 2.0b and 3.0) and energy budgets,
  filled into every snapshot.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from pathlib import Path

from wattsched import __version__
from wattsched.config import key_locator
from wattsched.config.daemon import DaemonConfig
from wattsched.daemon import policystate
from wattsched.daemon.actions import PlanActions
from wattsched.daemon.actuators import make_actuator
from wattsched.daemon.files import UnsafeDirError, ensure_dir, write_atomic
from wattsched.daemon.grid.events import OptRule
from wattsched.daemon.grid.hub import GridHub
from wattsched.daemon.history import PowerHistory
from wattsched.daemon.inputs import GridInputs
from wattsched.daemon.metrics import DaemonMetrics
from wattsched.daemon.notify import Notifier
from wattsched.daemon.reconciler import NodeReconciler
from wattsched.daemon.schedule import LiveConstraints
from wattsched.daemon.shadow import CycleObservation, ShadowRecorder, job_events
from wattsched.daemon.slurm.backend import SlurmBackend, with_marker, without_marker
from wattsched.daemon.status import CycleReport, status_record
from wattsched.daemon.store import AuditEntry, Store, StoreError
from wattsched.daemon.view import (
    ClassRule,
    PowerModels,
    View,
    build_view,
    classify,
    is_our_hold,
    managed_nodes,
    managed_platform,
)
from wattsched.errors import (
    PlanViolation,
    WattschedError,
    damage_of,
    damaged_database,
)
from wattsched.model.constraints import CapSchedule
from wattsched.model.guard import plan_problems
from wattsched.model.platform import NodePowerModel
from wattsched.model.units import pack_starts
from wattsched.policies import make_policy
from wattsched.policies.base import policy_tags
from wattsched.predictors import make_predictor

log = logging.getLogger("wattsched.daemon")


class Daemon:
    """The live daemon on one backend.

    Parameters
    ----------
    config
        Validated :class:`DaemonConfig`.
    backend
        The way to Slurm (:class:`~wattsched.daemon.slurm.cli.SlurmCLI`, pyslurm, or the simulated cluster).
    store
        The state store; opened from ``config.state_dir`` if not given.
    metrics
        Metrics on an injected registry; a fresh one if not given.
    """

    def __init__(
        self,
        config: DaemonConfig,
        backend: SlurmBackend,
        store: Store | None = None,
        metrics: DaemonMetrics | None = None,
        notifier: Notifier | None = None,
    ):
        self.backend = backend
        self.store = store if store is not None else Store(Path(config.state_dir) / "state.db")
        self.metrics = metrics if metrics is not None else DaemonMetrics()
        self.metrics.wall_time_of = backend.wall_time_of  # the simulated cluster's clock runs ahead of the wall's
        self.notifier = notifier if notifier is not None else Notifier()
        self.cycle_no = int(self.store.get("cycle", 0))
        self._reconciled = False
        self._platform_cache: dict = {}
        self._job_cache: dict = {}  # queued Slurm job -> the policy's job, while the backend reuses its record
        self._wake = threading.Event()
        self._stop_requested = False
        self._reload_requested = False
        self.config_path: Path | None = None
        self.last_view: View | None = None
        self._report: CycleReport | None = None
        self._now = time.time()
        self.policy_state = None
        self.grid: GridHub | None = None
        self.nodes = NodeReconciler(self.store, self.metrics)
        """The reconciler of node caps and frequencies (desired against observed)."""
        self.inputs = GridInputs(self.store, self.metrics)
        """Demand-response events and energy budgets."""
        self.actions = PlanActions(self.store, self.metrics, backend, self.nodes)
        """The act stage: plans applied to Slurm and the nodes under write-ahead intents."""
        self.history: PowerHistory | None = None
        self.shadow: ShadowRecorder | None = None
        """The shadow record (``shadow`` or ``shadow_record``): what each cycle observed, for ``shadow replay``."""
        self.apply_config(config)

    # ------------------------------------------------------------------ configuration

    def apply_config(self, config: DaemonConfig) -> None:
        """Build policy and predictor from ``config`` (raises ConfigError/PolicyError without changing anything)."""
        policy = make_policy(config.policy, config.params, source=key_locator(config, "params"),
                             name_source=key_locator(config, "policy")())
        predictor = None
        if config.predictor:
            predictor = make_predictor(config.predictor, config.predictor_params,
                                       source=key_locator(config, "predictor_params"),
                                       name_source=key_locator(config, "predictor")())
        if config.platform is not None:
            from wattsched.config.platform import load_platform_config

            power = PowerModels.from_platform_config(load_platform_config(config.platform)[0])
        else:
            power = PowerModels.uniform(config.node_power.to_model() if config.node_power else NodePowerModel())
        from wattsched.daemon.power import Telemetry

        over = power.overprovisioning
        actuator = make_actuator(config.actuator, config.telemetry, dry_run=config.dry_run, backend=self.backend,
                                 platform_offset_w=over["base_w"] + over["mem_w"] if "base_w" in over else 0.0)
        previous = getattr(self, "config", None)
        same_policy = previous is not None and previous.policy == config.policy and previous.params == config.params
        self.config = config
        self.policy = policy
        if same_policy and self.policy_state is not None:
            pass  # a reload that keeps the policy keeps its state
        elif previous is not None:
            log.info("policy changed from %s %s to %s %s: starting fresh policy state", previous.policy,
                     previous.params, config.policy, config.params)
            self.policy_state = policy.init_state()
        else:
            self.policy_state = policystate.restore(self.store, policy, config.policy, config.params)
        self.predictor = predictor
        self._predictor_ready = False
        self.power = power
        self._platform_cache = {}
        self._job_cache = {}
        self.classes = ClassRule.from_config(config)  # a reload brings the new rule (the jobs are built again)
        self.partitions = frozenset(config.partitions)
        self.constraints = LiveConstraints(config)
        self.telemetry = Telemetry(config.telemetry, self.metrics)
        if self.history is None:
            self.history = PowerHistory(self.store, self.telemetry)
        self.history.telemetry = self.telemetry
        self.actions.configure(config)
        self.actuator = actuator
        self.nodes.configure(config, actuator)
        opt = config.demand_response.opt
        rule = OptRule(opt.min_notice_s, opt.max_duration_s, opt.below_idle)
        if self.grid is None:
            self.grid = GridHub(rule, self.metrics)
            self.grid.restore(self.store.get("dr_grid_events", []) or [])
        else:  # a reload keeps the events received; the new rule decides the next ones
            self.grid.rule = rule
        self.inputs.configure(config, self.constraints, self.grid)
        recording = config.shadow or config.shadow_record
        if recording and self.shadow is None:
            self.shadow = ShadowRecorder(self.store.db, self.store.path)
        elif not recording:
            self.shadow = None
        self.metrics.dry_run.set(1 if config.dry_run else 0)
        self.metrics.info.info({
            "version": __version__, "policy": config.policy, "predictor": config.predictor or "none",
            "backend": self.backend.name, "gate": config.gate,
        })

    def _cap_w(self, platform) -> CapSchedule:
        """The cap schedule before demand response (``cap_w``, or ``cap_schedule`` with recurring windows)."""
        return self.constraints.schedule(platform, self._now)

    def _estimator(self, platform):
        if self.predictor is None:
            return None
        if not self._predictor_ready:
            from wattsched.daemon.history import completed_jobs

            self.predictor.setup(platform)
            self.predictor.fit(completed_jobs(self.store.history()))
            self._predictor_ready = True
        return self.predictor.predict

    # ------------------------------------------------------------------ one cycle

    def cycle(self) -> CycleReport:
        """Observe, decide, guard, act, record. Raises on failure to observe (the caller counts it)."""
        t0 = time.monotonic()
        self.cycle_no += 1
        report = self._report = CycleReport(self.cycle_no)
        self.actions.begin_cycle(self.cycle_no, report)
        cfg = self.config
        try:
            state = self.backend.read_state()
        except WattschedError as exc:
            exc.stage = "observe"
            raise
        if state.skipped_records:
            self.metrics.skipped_records.inc(state.skipped_records)
        if not cfg.dry_run:
            self._heartbeat(state.read_at)
        self._now = state.read_at
        nodes = managed_nodes(state, self.partitions)
        raw_measured = self.telemetry.read(nodes)
        self.nodes.note_ended_jobs(state.jobs, state.read_at)
        measured = self.nodes.settled(raw_measured, state.read_at)
        observed = self.nodes.observe(nodes)
        if not self._reconciled:
            self.actions.settle_in_flight(state, observed)
            self._reconciled = True
        holds = self.store.holds()
        starts = self.store.starts()
        if not cfg.dry_run:  # holds the lua gate made at submission become the daemon's records too
            gated = False
            for job in state.jobs:
                if job.held and job.job_id not in holds and is_our_hold(job, holds):
                    self.store.add_hold(job.job_id, "gate", "held at submission", state.read_at)
                    gated = True
            if gated:
                holds = self.store.holds()
        estimator = None
        if self.predictor is not None:
            platform = managed_platform(state, self.partitions, self.power, self._platform_cache)
            estimator = self._estimator(platform)
        now = state.read_at
        c = classify(state, self.partitions, holds, starts, cfg.gate == "lua")
        # node settings: desired against observed first, so that the snapshot has those in force
        self.nodes.begin_cycle(self.cycle_no, report)
        self.nodes.reconcile(c.running, {n.name: n for n in nodes}, observed, report, now)
        caps, freqs = self.nodes.settings([n.name for n in nodes], observed)
        view = build_view(
            state,
            partitions=self.partitions,
            holds=holds,
            starts=starts,
            power=self.power,
            cap_w=self._cap_w,
            estimator=estimator,
            epoch=self.cycle_no,
            include_adopted=cfg.dry_run,
            take_user_holds=cfg.gate == "lua",
            platform_cache=self._platform_cache,
            job_cache=self._job_cache,
            measured=measured,
            settle_s=cfg.telemetry.settle_s,
            default_class=self.classes,
            indexes=False,  # built below, once the grid's and the budgets' inputs are in
            classified=c,
            node_cap_w=caps,
            node_freq_hz=freqs,
            reshape=self.backend.reshape,
        )
        self._measured = measured
        changed = self.nodes.changed_at
        view.snapshot.unsettled_nodes = frozenset(i for i, n in enumerate(view.node_names) if n in changed)
        audit: list[AuditEntry] = []
        for note in self.constraints.new_warnings(view.snapshot.platform):  # budgets, events it cannot honour
            log.warning("%s", note)
        # the grid's and the budgets' inputs, into the snapshot
        self.inputs.begin_cycle(self.cycle_no, raw_measured, measured)
        self.nodes.fill_desired(view)
        self.inputs.fill_demand_response(view, now)
        self.inputs.verify_demand_response(view, now, audit)
        self.inputs.fill_budgets(view, now, self.nodes.observed)
        # The indexes the simulator keeps, over the jobs as patched above: the policy's code path is the replay's.
        view.snapshot.build_indexes(policy_tags(self.policy).wants_end_table)
        view.snapshot.forecast = self._forecast(view.snapshot, None)
        self.last_view = view
        if self.shadow is not None:
            self._record_shadow(state, nodes, raw_measured, view, now)

        self._learn(state, view)
        # 1. Starts released earlier: confirm, or take back after too many cycles.
        self.actions.check_starts(view, starts, audit, report, now)
        # 2. Pending jobs nobody holds (gate: daemon, or let through while the gate was open) or their
        #    users hold (moved in, or held by hand): hold them as ours.
        for job in c.adopt:
            if job.held:
                reason = "held by its user in a managed partition; the hold is wattsched's now"
            elif cfg.gate == "daemon":
                reason = "held on arrival"
            else:
                reason = "submitted while the gate was open; held"
            if self.actions.act("hold", job.job_id, reason, audit, now,
                                lambda j=job: self.backend.hold(j.job_id, with_marker(j.admin_comment))):
                self.store.add_hold(job.job_id, "daemon", reason, now)
                report.held.append(job.job_id)
        # 3. Decide on the queue of held jobs.
        snap = view.snapshot
        report.pending, report.running = len(snap.pending), len(snap.running)
        tags = policy_tags(self.policy)
        wanted = snap.pending or snap.running or tags.wants_empty_queue_calls
        plan = self.policy.decide(snap, self.policy_state) if wanted else None
        if plan is not None and snap.pending and not tags.maps_units:
            plan = pack_starts(snap, plan)  # jobs of units a whole-node policy started, packed as in replay
        if plan is not None:
            policystate.save(self.store, cfg.policy, cfg.params, self.policy_state)
            problems = plan_problems(snap, plan)
            if problems:
                self.metrics.plan_rejections.inc()
                report.rejected = problems
                log.error("plan rejected by the guard, nothing applied: %s", PlanViolation(problems))
                audit.append(AuditEntry(now, self.cycle_no, "plan", cfg.policy, "; ".join(problems)[:2000],
                                        cfg.dry_run, "rejected"))
            else:
                self.actions.apply(plan, view, audit, report, now)
            self.actions.record_reasons(plan, view)
            if not report.rejected:
                view.snapshot.forecast = self._forecast(view.snapshot, plan)
        # 4. Record.
        audit.extend(AuditEntry(n.time_s, self.cycle_no, n.action, n.target, n.reason, cfg.dry_run, n.outcome)
                     for n in self.grid.drain())
        self.store.audit(audit)
        self.store.put("cycle", self.cycle_no)
        report.duration_s = time.monotonic() - t0
        self.metrics.export_cycle(view, report, now, held_kinds=self.actions.held_kinds,
                                  dr_events=self.inputs.dr_events, budget_windows=self.inputs.budget_windows,
                                  policy_state=self.policy_state, measured=measured)
        self.store.put("status", status_record(self, view, report, now, measured))
        log.info("%s", report.summary())
        if report.started or report.evicted or report.node_actions or report.reconciled:
            snap = view.snapshot
            log.info("cycle %d decided at %.0f W (measured on %d of %d nodes, predicted %.0f W), cap %.0f W",
                     self.cycle_no, snap.platform_power_w, len(measured), len(snap.platform),
                     view.predicted_power_w, snap.cap_w)
        return report

    def _record_shadow(self, state, nodes, measured: dict[str, float], view: View, now: float) -> None:
        """This cycle's observation into the shadow record, in one transaction with its job events."""
        snap = view.snapshot
        parts = self.partitions
        jobs = [j for j in state.jobs if not parts or parts.intersection(j.partition.split(","))]
        events = job_events(self.shadow.last, jobs, now, state.skipped_jobs, since=self.shadow.since(now))
        dr = tuple((e.event.label, e.event.start_s, e.event.end_s, e.cap_w) for e in snap.dr_events
                   if e.event.start_s <= now < e.event.end_s)
        states = {n.name: "+".join((n.state, *sorted(n.flags))) for n in nodes}
        obs = CycleObservation(now, states, measured, {n.name: n.cpus for n in nodes}, snap.platform_power_w,
                               snap.cap_w, dr)
        self.shadow.record(self.cycle_no, obs, events, self.config.shadow_retention_s)

    def _learn(self, state, view: View) -> None:
        """Job power history: finished jobs with their measured power to the store, and to the predictor."""
        rows = self.history.learn(state, view)
        if rows and self.predictor is not None and self._predictor_ready:
            from wattsched.daemon.history import completed_jobs

            for c in completed_jobs(rows):
                self.predictor.update(c)

    def _forecast(self, snapshot, plan):
        from wattsched.telemetry.forecast import forecast

        try:
            return forecast(snapshot, plan, horizon_s=self.config.forecast.horizon_s,
                            step_s=self.config.forecast.step_s)
        except Exception as exc:  # the forecast informs; it never stops a cycle
            log.warning("forecast failed: %s", exc)
            return None

    def _heartbeat(self, now: float) -> None:
        path = self.config.heartbeat_path
        try:
            ensure_dir(path.parent, 0o755, what="heartbeat directory")
            # readable by slurmctld's SlurmUser (the gate), writable by the daemon only; a bare time
            write_atomic(path, f"{int(now)}\n", 0o644, what="heartbeat directory")
        except (OSError, UnsafeDirError) as exc:
            log.warning("cannot write the heartbeat %s: %s (the lua gate stays open)", path, exc)

    # ------------------------------------------------------------------ node caps and frequencies

    # ------------------------------------------------------------------ start-up and stop


    def release_all(self, reason: str = "daemon stopping") -> list[int]:
        """Release every job the daemon holds, without pinning (Slurm schedules them itself)."""
        state = self.backend.read_state()
        self._now = state.read_at
        view = build_view(
            state, partitions=self.partitions, holds=self.store.holds(), starts=self.store.starts(),
            power=self.power, cap_w=self._cap_w, estimator=None, epoch=self.cycle_no, include_adopted=False,
            platform_cache=self._platform_cache, indexes=False,  # nothing is decided on it
        )
        released, audit, now = [], [], state.read_at
        for job in view.classified.ours:
            if self.actions.act("release", job.job_id, reason, audit, now,
                                lambda j=job: self.backend.release(j.job_id, (), without_marker(j.admin_comment))):
                released.append(job.job_id)
        self.store.drop_holds(released)
        self.store.audit(audit)
        return released

    # ------------------------------------------------------------------ the service loop

    def request_stop(self, *_args) -> None:
        self._stop_requested = True
        self._wake.set()

    def request_reload(self, *_args) -> None:
        self._reload_requested = True
        self._wake.set()

    def install_signal_handlers(self) -> None:
        signal.signal(signal.SIGTERM, self.request_stop)
        signal.signal(signal.SIGINT, self.request_stop)
        signal.signal(signal.SIGHUP, self.request_reload)

    def _reload(self) -> None:
        from wattsched.config import load_config

        self._reload_requested = False
        if self.config_path is None:
            log.warning("SIGHUP: no config file to reload")
            return
        try:
            config = load_config(self.config_path, DaemonConfig, env=os.environ)
            if config.slurm != self.config.slurm or config.state_dir != self.config.state_dir:
                log.warning("SIGHUP: changes to slurm and state_dir take effect at the next restart")
            old_dr, new_dr = self.config.demand_response, config.demand_response
            if (old_dr.openadr2, old_dr.openadr3) != (new_dr.openadr2, new_dr.openadr3):
                log.warning("SIGHUP: changes to demand_response.openadr2 and openadr3 take effect at the next "
                            "restart (the VENs keep their connection)")
            self.apply_config(config)
        except Exception as exc:  # an invalid new config never stops the service
            log.error("SIGHUP: the new config is invalid, keeping the old one: %s", exc)
            return
        log.info("SIGHUP: config reloaded from %s (policy %s)", self.config_path, config.policy)

    def run(self, max_cycles: int | None = None) -> int:
        """Cycle until stopped (SIGTERM/SIGINT) or ``max_cycles``; returns the exit status."""
        self.inputs.start_grid()
        self.notifier.ready(f"policy {self.config.policy}, {'dry-run' if self.config.dry_run else 'active'}")
        done = 0
        while True:
            start = time.monotonic()
            try:
                report = self.cycle()
                self.notifier.status(report.summary())
            except Exception as exc:  # one bad cycle never stops the service
                if damage_of(exc) is not None:  # but a damaged store stops it: nothing could be recorded
                    raise StoreError(damaged_database(self.store.path, exc)) from exc
                self.metrics.cycle_failures.labels(getattr(exc, "stage", "decide")).inc()
                log.error("cycle %d failed: %s", self.cycle_no, exc, exc_info=not isinstance(exc, WattschedError))
                self.notifier.status(f"cycle {self.cycle_no} failed: {exc}"[:200])
            self.notifier.watchdog()
            done += 1
            if max_cycles is not None and done >= max_cycles:
                break
            if not self._sleep(start):
                break
        return self.stop()

    def _sleep(self, start: float) -> bool:
        """Wait for the next cycle, pinging the watchdog; False when asked to stop."""
        deadline = start + self.config.poll_interval_s
        step = self.notifier.watchdog_s / 2 if self.notifier.watchdog_s else None
        while True:
            if self._stop_requested:
                return False
            if self._reload_requested:
                self._reload()
                continue
            left = deadline - time.monotonic()
            if left <= 0:
                return True
            if self._wake.wait(min(left, step) if step else left):
                self._wake.clear()
                continue
            self.notifier.watchdog()

    def stop(self) -> int:
        self.notifier.stopping()
        self.inputs.stop_grid()
        if not self.config.dry_run:
            # the lua gate stops holding new jobs at once rather than when the heartbeat goes stale
            self.config.heartbeat_path.unlink(missing_ok=True)
        if self.config.on_stop == "release" and not self.config.dry_run:
            try:
                released = self.release_all()
                log.info("stopping: released %d held jobs", len(released))
            except WattschedError as exc:
                log.error("stopping: could not release held jobs: %s", exc)
                return 1
        else:
            log.info("stopping: held jobs kept (on_stop: %s)", self.config.on_stop)
        return 0
