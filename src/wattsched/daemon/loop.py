"""The control loop: observe, predict, decide, guard, actuate, record.

One :meth:`Daemon.cycle` is one pass; :meth:`Daemon.run` repeats it every
``poll_interval_s`` until stopped. A failed cycle is logged, counted and skipped:
the loop goes on. Every action is written to the state store as an *intent*
before it reaches Slurm and marked done after, so a daemon killed in between
checks on restart what Slurm actually did instead of acting twice.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from collections import Counter as Tally
from dataclasses import dataclass, field
from pathlib import Path

from wattsched import __version__
from wattsched.config import _cap_in_watts, key_locator
from wattsched.daemon.config import DaemonConfig
from wattsched.daemon.metrics import DaemonMetrics
from wattsched.daemon.notify import Notifier
from wattsched.daemon.slurm.backend import SlurmBackend, with_marker, without_marker
from wattsched.daemon.slurm.hostlist import compress
from wattsched.daemon.store import AuditEntry, Store
from wattsched.daemon.view import View, build_view, is_our_hold, managed_platform
from wattsched.errors import PlanViolation, SlurmCommandError, WattschedError
from wattsched.model.guard import plan_problems
from wattsched.model.plan import Evict, PowerDown, PowerUp, Reason, SetNodeCap, SetNodeFreq, Start
from wattsched.model.platform import NodePowerModel, NodeState
from wattsched.policies import make_policy
from wattsched.predictors import make_predictor

log = logging.getLogger("wattsched.daemon")


@dataclass(slots=True)
class CycleReport:
    """What one cycle did (for tests, logs and ``STATUS=``)."""

    cycle: int
    started: list[int] = field(default_factory=list)
    held: list[int] = field(default_factory=list)
    rehold: list[int] = field(default_factory=list)
    evicted: list[int] = field(default_factory=list)
    node_actions: list[str] = field(default_factory=list)
    failed_actions: list[str] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)
    pending: int = 0
    running: int = 0
    duration_s: float = 0.0

    def summary(self) -> str:
        return (
            f"cycle {self.cycle}: {self.pending} queued, {self.running} running, started {len(self.started)}, "
            f"held {len(self.held) + len(self.rehold)}, evicted {len(self.evicted)}"
            + (f", {len(self.failed_actions)} actions failed" if self.failed_actions else "")
        )


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
        self.notifier = notifier if notifier is not None else Notifier()
        self.cycle_no = int(self.store.get("cycle", 0))
        self._reconciled = False
        self._platform_cache: dict = {}
        self._wake = threading.Event()
        self._stop_requested = False
        self._reload_requested = False
        self.config_path: Path | None = None
        self.last_view: View | None = None
        self._reasons: dict[int, str] = {}
        self._samples: dict[int, list[float]] = {}  # per-node watts of running jobs, one reading per cycle
        self._running: dict[int, object] = {}
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
        power = NodePowerModel(**config.node_power) if config.node_power else NodePowerModel()
        self.config = config
        self.policy = policy
        self.policy_state = policy.init_state()
        self.predictor = predictor
        self._predictor_ready = False
        self.power = power
        self.partitions = frozenset(config.partitions)
        from wattsched.daemon.power import Actuators, Telemetry

        self.telemetry = Telemetry(config.telemetry, self.metrics)
        self.actuators = Actuators(config.actuator, config.telemetry)
        self.metrics.dry_run.set(1 if config.dry_run else 0)
        self.metrics.info.info({
            "version": __version__, "policy": config.policy, "predictor": config.predictor or "none",
            "backend": getattr(self.backend, "name", "?"), "gate": config.gate,
        })

    def _cap_w(self, platform) -> float:
        return _cap_in_watts(self.config.cap_w, platform, "cap_w")

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
        cfg = self.config
        try:
            state = self.backend.read_state()
        except WattschedError as exc:
            exc.stage = "observe"
            raise
        if not cfg.dry_run:
            self._heartbeat(state.read_at)
        measured = self.telemetry.read([n for n in state.nodes
                                        if not self.partitions or self.partitions.intersection(n.partitions)])
        if not self._reconciled:
            self._reconcile(state)
            self._reconciled = True
        holds = self.store.holds()
        starts = self.store.starts()
        if not cfg.dry_run:  # holds the lua gate made at submission become the daemon's records too
            for job in state.jobs:
                if job.job_id not in holds and job.held and is_our_hold(job, holds):
                    self.store.add_hold(job.job_id, "gate", "held at submission", state.read_at)
            holds = self.store.holds()
        estimator = None
        if self.predictor is not None:
            platform = managed_platform(state, self.partitions, self.power, self._platform_cache)
            estimator = self._estimator(platform)
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
            platform_cache=self._platform_cache,
            measured=measured,
            settle_s=cfg.telemetry.settle_s,
        )
        self._measured = measured
        view.snapshot.forecast = self._forecast(view.snapshot, None)
        self.last_view = view
        c = view.classified
        audit: list[AuditEntry] = []
        now = state.read_at

        self._learn(state, view)
        # 1. Starts released earlier: confirm, or take back after too many cycles.
        self._check_starts(view, starts, audit, report, now)
        # 2. Pending jobs nobody holds (gate: daemon, or let through while the gate was open): hold them.
        for job in c.adopt:
            reason = "held on arrival" if cfg.gate == "daemon" else "submitted while the gate was open; held"
            if self._act("hold", job.job_id, reason, audit, now,
                         lambda j=job: self.backend.hold(j.job_id, with_marker(j.admin_comment))):
                self.store.add_hold(job.job_id, "daemon", reason, now)
                report.held.append(job.job_id)
        # 3. Decide on the queue of held jobs.
        snap = view.snapshot
        report.pending, report.running = len(snap.pending), len(snap.running)
        wanted = snap.pending or snap.running or getattr(self.policy, "wants_empty_queue_calls", False)
        plan = self.policy.decide(snap, self.policy_state) if wanted else None
        if plan is not None:
            problems = plan_problems(snap, plan)
            if problems:
                self.metrics.plan_rejections.inc()
                report.rejected = problems
                log.error("plan rejected by the guard, nothing applied: %s", PlanViolation(problems))
                audit.append(AuditEntry(now, self.cycle_no, "plan", cfg.policy, "; ".join(problems)[:2000],
                                        cfg.dry_run, "rejected"))
            else:
                self._apply(plan, view, audit, report, now)
            self._record_reasons(plan, view)
            if not report.rejected:
                view.snapshot.forecast = self._forecast(view.snapshot, plan)
        # 4. Record.
        self.store.audit(audit)
        self.store.put("cycle", self.cycle_no)
        report.duration_s = time.monotonic() - t0
        self._export(view, report, now)
        log.info("%s", report.summary())
        if report.started or report.evicted or report.node_actions:
            snap = view.snapshot
            log.info("cycle %d decided at %.0f W (measured on %d of %d nodes, predicted %.0f W), cap %.0f W",
                     self.cycle_no, snap.platform_power_w, len(measured), len(snap.platform),
                     view.predicted_power_w, snap.cap_w)
        return report

    def _learn(self, state, view: View) -> None:
        """Job power history: sample the per-node power Slurm reports for running jobs; record finished ones."""
        watts = {n.name: n.current_watts for n in state.nodes}
        running = {j.job_id: j for j in view.classified.running}
        for jid, job in running.items():
            readings = [watts.get(n) for n in job.nodes]
            if readings and all(w is not None for w in readings):
                self._samples.setdefault(jid, []).append(sum(readings) / len(readings))
        rows = []
        finished = {j.job_id: j for j in state.jobs}
        for jid, job in self._running.items():
            if jid in running:
                continue
            samples = self._samples.pop(jid, None)
            start = job.start_time or state.read_at
            end = (finished[jid].end_time if jid in finished and finished[jid].end_time else None) or state.read_at
            measured = self.telemetry.job_power(job.nodes, start, end) if job.nodes else None
            if measured is not None:  # telemetry over the job's whole run
                mean, mx, std = measured
                source = "prometheus"
            elif samples:  # Slurm's own node power readings, one per cycle
                mean = sum(samples) / len(samples)
                mx = max(samples)
                std = (sum((x - mean) ** 2 for x in samples) / len(samples)) ** 0.5
                source = "slurm"
            else:
                continue
            rows.append((jid, start, job.user, job.partition, max(job.node_count, 1), job.time_limit_s or 0.0,
                         job.submit_time or start, end, mean, mx, std, source))
        if rows:
            self.store.add_history(rows)
            if self.predictor is not None and self._predictor_ready:
                from wattsched.daemon.history import completed_jobs

                for c in completed_jobs(rows):
                    self.predictor.update(c)
        for jid in list(self._samples):
            if jid not in running:
                del self._samples[jid]
        self._running = running

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
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_text(f"{int(now)}\n")
            os.replace(tmp, path)
        except OSError as exc:
            log.warning("cannot write the heartbeat %s: %s (the lua gate stays open)", path, exc)

    def _act(self, action: str, target, reason: str, audit: list[AuditEntry], now: float, fn, args=None) -> bool:
        """Apply one action (unless dry-run) under a write-ahead intent; audit and count it."""
        if self.config.dry_run:
            audit.append(AuditEntry(now, self.cycle_no, action, str(target), reason, True, "dry-run"))
            self.metrics.decisions.labels(action, "dry-run").inc()
            return False
        intent = self.store.begin(action, str(target), args, now)
        try:
            fn()
        except WattschedError as exc:
            self.store.finish(intent, "failed")
            if isinstance(exc, SlurmCommandError):
                self.metrics.slurm_errors.labels(exc.cmd[0] if exc.cmd else "?").inc()
            self.metrics.decisions.labels(action, "failed").inc()
            if getattr(self, "_report", None) is not None:
                self._report.failed_actions.append(f"{action} {target}")
            audit.append(AuditEntry(now, self.cycle_no, action, str(target), f"{reason}: {exc}"[:2000], False,
                                    "failed"))
            log.warning("%s %s failed: %s", action, target, exc)
            return False
        self.store.finish(intent, "applied")
        self.metrics.decisions.labels(action, "applied").inc()
        audit.append(AuditEntry(now, self.cycle_no, action, str(target), reason, False, "applied"))
        return True

    def _check_starts(self, view: View, starts, audit, report, now) -> None:
        done, bump = [], []
        for jid, (planned, _released_at, cycles) in starts.items():
            job = view.slurm_jobs.get(jid)
            if job is None or job.state not in ("PENDING",):
                done.append(jid)
                if job is not None and job.nodes:
                    if set(job.nodes) == set(planned):
                        audit.append(AuditEntry(now, self.cycle_no, "started", str(jid), compress(job.nodes),
                                                False, "confirmed"))
                    else:
                        self.metrics.start_mismatches.inc()
                        audit.append(AuditEntry(now, self.cycle_no, "started", str(jid),
                                                f"planned {compress(planned)}, Slurm used {compress(job.nodes)}",
                                                False, "mismatch"))
                        log.warning("job %s started on %s, not on the planned %s", jid, ",".join(job.nodes),
                                    ",".join(planned))
                continue
            if job.held:  # someone held it after our release
                done.append(jid)
                continue
            if cycles + 1 >= self.config.start_timeout_cycles:
                reason = f"not started by Slurm within {self.config.start_timeout_cycles} cycles on {','.join(planned)}"
                self.metrics.start_timeouts.inc()
                log.warning("job %s %s: held again", jid, reason)
                if self._act("hold", jid, reason, audit, now,
                             lambda j=job: self.backend.hold(j.job_id, with_marker(j.admin_comment))):
                    self.store.add_hold(jid, "daemon", reason, now)
                    report.rehold.append(jid)
                done.append(jid)
            else:
                bump.append(jid)
        self.store.drop_starts(done)
        self.store.bump_starts(bump)
        # forget holds of jobs that are no longer held by us (but not the ones just held again)
        ours = {j.job_id for j in view.classified.ours} | set(report.rehold)
        stale = [j for j in self.store.holds() if j not in ours]
        self.store.drop_holds(stale)

    def _apply(self, plan, view: View, audit, report, now) -> None:
        names = view.node_names
        jobs = view.slurm_jobs
        cfg = self.config
        for action in plan.actions:
            kind = type(action)
            if kind is Start:
                nodes = [names[i] for i in action.nodes]
                job = jobs[action.job_id]
                reason = f"on {compress(nodes)}"
                if self._act("start", action.job_id, reason, audit, now,
                             lambda j=job, n=nodes: self.backend.release(j.job_id, n, without_marker(j.admin_comment)),
                             {"nodes": nodes}):
                    self.store.add_start(action.job_id, nodes, now)
                    self.store.drop_holds([action.job_id])
                    report.started.append(action.job_id)
                elif cfg.dry_run:
                    report.started.append(action.job_id)
            elif kind is Evict:
                job = jobs.get(action.job_id)
                requeue = action.requeue and cfg.evict == "requeue"
                if requeue and job is not None and not (job.requeue and job.batch):
                    why = "not requeueable (--no-requeue)" if not job.requeue else "not a batch job"
                    audit.append(AuditEntry(now, self.cycle_no, "requeue", str(action.job_id),
                                            f"{why}; left running", cfg.dry_run, "refused"))
                    self.metrics.decisions.labels("requeue", "refused").inc()
                    continue
                act = "requeue" if requeue else "cancel"
                fn = (lambda j=action.job_id: self.backend.requeue(j)) if requeue else (
                    lambda j=action.job_id: self.backend.cancel(j))
                if self._act(act, action.job_id, "evicted by the policy", audit, now, fn):
                    report.evicted.append(action.job_id)
            elif kind is PowerDown or kind is PowerUp:
                node = names[action.node]
                act = "power_down" if kind is PowerDown else "power_up"
                fn = (lambda n=node: self.backend.power_down(n)) if kind is PowerDown else (
                    lambda n=node: self.backend.power_up(n))
                if self._act(act, node, "decided by the policy", audit, now, fn):
                    report.node_actions.append(f"{act} {node}")
            elif kind is SetNodeCap or kind is SetNodeFreq:
                act = "set_cap" if kind is SetNodeCap else "set_freq"
                node = view.slurm_nodes[names[action.node]]
                if not self.actuators.enabled:
                    audit.append(AuditEntry(now, self.cycle_no, act, node.name,
                                            "no node actuator configured", cfg.dry_run, "skipped"))
                    self.metrics.decisions.labels(act, "skipped").inc()
                    continue
                value = action.cap_w if kind is SetNodeCap else action.freq_hz
                what = f"{value:.0f} W" if kind is SetNodeCap and value is not None else (
                    f"{value / 1e9:.2f} GHz" if value is not None else "nominal")
                fn = (lambda n=node, v=value: self.actuators.set_cap(n, v)) if kind is SetNodeCap else (
                    lambda n=node, v=value: self.actuators.set_freq(n, v))
                if self._act(act, node.name, f"{what}, decided by the policy", audit, now, fn):
                    gauge = self.metrics.node_cap if kind is SetNodeCap else self.metrics.node_freq
                    if value is None:
                        with contextlib.suppress(KeyError):
                            gauge.remove(node.name)
                    else:
                        gauge.labels(node.name).set(value)
                    report.node_actions.append(f"{act} {node.name} {what}")
            else:
                audit.append(AuditEntry(now, self.cycle_no, kind.__name__.lower(), "", "not supported live",
                                        cfg.dry_run, "skipped"))

    def _record_reasons(self, plan, view: View) -> None:
        started = {a.job_id for a in plan.actions if type(a) is Start}
        changed = {}
        kinds: Tally = Tally()
        for jid in view.snapshot.pending:
            if jid in started:
                continue
            r = plan.reasons.get(jid, plan.default_reason)
            kinds[r.template if isinstance(r, Reason) else str(r) or "waiting"] += 1
            text = str(r)
            if self._reasons.get(jid) != text:
                changed[jid] = text
        if changed:
            self.store.set_reasons(changed)
            self._reasons.update(changed)
            for jid, text in list(changed.items())[:20]:
                log.debug("job %s held: %s", jid, text)
        self._held_kinds = kinds

    def _export(self, view: View, report: CycleReport, now: float) -> None:
        m = self.metrics
        c = view.classified
        m.cycles.inc()
        m.cycle_duration.observe(report.duration_s)
        m.last_cycle.set(now)
        m.set_jobs({
            "held": len(c.ours), "pending_unheld": len(c.adopt) - len(report.held), "starting": len(c.starting),
            "running": len(c.running), "held_by_others": len(c.others_held),
        })
        m.set_held_reasons(dict(getattr(self, "_held_kinds", {})))
        m.set_nodes(dict(Tally(NodeState(s).name.lower() for s in view.snapshot.node_state)))
        snap = view.snapshot
        m.cap.set(snap.cap_w)
        measured = getattr(self, "_measured", {})
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

    # ------------------------------------------------------------------ start-up and stop

    def _reconcile(self, state) -> None:
        """After a restart: settle actions that were in flight when the daemon died."""
        jobs = {j.job_id: j for j in state.jobs}
        for intent in self.store.open_intents():
            job = jobs.get(int(intent.target)) if intent.target.isdigit() else None
            outcome = "unknown"
            if intent.action == "start":
                if job is None or job.state != "PENDING":
                    outcome = "applied"  # it ran (or ended) meanwhile
                elif job.held:
                    outcome = "not-applied"
                    self.store.add_hold(job.job_id, "daemon", "held again after a restart", intent.time)
                else:
                    outcome = "applied"
                    self.store.add_start(job.job_id, intent.args.get("nodes", []), intent.time)
            elif intent.action == "hold":
                if job is not None and job.held:
                    outcome = "applied"
                    self.store.add_hold(job.job_id, "daemon", "held on arrival", intent.time)
                else:
                    outcome = "not-applied"
            self.store.finish(intent.id, f"reconciled:{outcome}")
            log.info("in-flight %s of %s at the last stop: %s", intent.action, intent.target, outcome)
        self.store.prune_intents(time.time() - 7 * 86400)

    def release_all(self, reason: str = "daemon stopping") -> list[int]:
        """Release every job the daemon holds, without pinning (Slurm schedules them itself)."""
        state = self.backend.read_state()
        view = build_view(
            state, partitions=self.partitions, holds=self.store.holds(), starts=self.store.starts(),
            power=self.power, cap_w=self._cap_w, estimator=None, epoch=self.cycle_no, include_adopted=False,
            platform_cache=self._platform_cache,
        )
        released, audit, now = [], [], state.read_at
        for job in view.classified.ours:
            if self._act("release", job.job_id, reason, audit, now,
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
            self.apply_config(config)
        except Exception as exc:  # an invalid new config never stops the service
            log.error("SIGHUP: the new config is invalid, keeping the old one: %s", exc)
            return
        log.info("SIGHUP: config reloaded from %s (policy %s)", self.config_path, config.policy)

    def run(self, max_cycles: int | None = None) -> int:
        """Cycle until stopped (SIGTERM/SIGINT) or ``max_cycles``; returns the exit status."""
        self.notifier.ready(f"policy {self.config.policy}, {'dry-run' if self.config.dry_run else 'active'}")
        done = 0
        while True:
            start = time.monotonic()
            try:
                report = self.cycle()
                self.notifier.status(report.summary())
            except Exception as exc:  # one bad cycle never stops the service
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
