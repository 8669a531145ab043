"""The control loop: observe, predict, decide, guard, actuate, record.

One :meth:`Daemon.cycle` is one pass; :meth:`Daemon.run` repeats it every
``poll_interval_s`` until stopped. A failed cycle is logged, counted and skipped:
the loop goes on. Every action is written to the state store as an *intent*,
with its audit row, before it reaches Slurm or a node and completed with its
outcome after, so a daemon killed in between checks on restart what Slurm and
the nodes actually did instead of acting twice, and its audit says what was
attempted.

Node caps and frequencies are reconciled every cycle: the desired setting of
each node (from the plans that set it, kept in the state store) is compared
with what the node's actuator reads back, and a node that differs is set again
(idempotently); failures are audited and counted. The policy sees the settings
read back in its next snapshot (``node_cap_w``, ``node_freq_hz``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import os
import signal
import threading
import time
from collections import Counter as Tally
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import assert_never

from wattsched import __version__
from wattsched.config import key_locator
from wattsched.config.daemon import DaemonConfig
from wattsched.daemon import policystate
from wattsched.daemon.actuators import NodeSetting, Outcome, make_actuator, same_cap, same_freq
from wattsched.daemon.files import UnsafeDirError, ensure_dir, write_atomic
from wattsched.daemon.grid.events import OptRule
from wattsched.daemon.grid.hub import GridHub
from wattsched.daemon.metrics import DaemonMetrics
from wattsched.daemon.notify import Notifier
from wattsched.daemon.schedule import LOOKAHEAD_S, LiveConstraints
from wattsched.daemon.slurm.backend import SlurmBackend, with_marker, without_marker
from wattsched.daemon.slurm.hostlist import compress
from wattsched.daemon.slurm.records import SlurmNode
from wattsched.daemon.store import AuditEntry, Desired, Store
from wattsched.daemon.view import PowerModels, View, build_view, is_our_hold, managed_nodes, managed_platform
from wattsched.errors import ConfigError, PlanViolation, SlurmCommandError, WattschedError
from wattsched.model.constraints import BudgetState, CapSchedule, EnergyBudget, NoticedEvent
from wattsched.model.guard import plan_problems
from wattsched.model.plan import Evict, PowerDown, PowerUp, Reason, Reshape, SetNodeCap, SetNodeFreq, Start
from wattsched.model.platform import NodePowerModel, NodeState
from wattsched.model.response import LinearResponse
from wattsched.model.units import pack_starts
from wattsched.policies import make_policy
from wattsched.policies.base import policy_tags
from wattsched.predictors import make_predictor

NODE_ACTIONS = {"cap": "set_cap", "freq": "set_freq"}

_CPU_BOUND = LinearResponse(f=1.0, floor=0.3)
"""Response of a job whose class the platform does not know: CPU-bound, as the simulator takes it."""

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
    reconciled: list[str] = field(default_factory=list)
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
        self._observed: dict[str, NodeSetting] = {}
        self._report: CycleReport | None = None
        self._now = time.time()
        self.policy_state = None
        self.grid: GridHub | None = None
        self._grid_vens: list = []
        self._changed_at: dict[str, float] = {}  # node -> when wattsched last changed what runs on it, or how
        self._dr_verdicts: dict[str, str] = {}
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

        actuator = make_actuator(config.actuator, config.telemetry, dry_run=config.dry_run, backend=self.backend)
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
        self.partitions = frozenset(config.partitions)
        self.constraints = LiveConstraints(config)
        self.telemetry = Telemetry(config.telemetry, self.metrics)
        self.actuator = actuator
        opt = config.demand_response.opt
        rule = OptRule(opt.min_notice_s, opt.max_duration_s, opt.below_idle)
        if self.grid is None:
            self.grid = GridHub(rule, self.metrics)
            self.grid.restore(self.store.get("dr_grid_events", []) or [])
        else:  # a reload keeps the events received; the new rule decides the next ones
            self.grid.rule = rule
        self.metrics.dry_run.set(1 if config.dry_run else 0)
        self.metrics.info.info({
            "version": __version__, "policy": config.policy, "predictor": config.predictor or "none",
            "backend": getattr(self.backend, "name", "?"), "gate": config.gate,
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
        self._raw_measured = self.telemetry.read(nodes)
        measured = self._settled(self._raw_measured, state.read_at)
        observed = self._observe(nodes)
        if not self._reconciled:
            self._reconcile(state, observed)
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
            take_user_holds=cfg.gate == "lua",
            platform_cache=self._platform_cache,
            measured=measured,
            settle_s=cfg.telemetry.settle_s,
            default_class=cfg.job_class,
        )
        self._measured = measured
        view.snapshot.unsettled_nodes = frozenset(i for i, n in enumerate(view.node_names) if n in self._changed_at)
        c = view.classified
        audit: list[AuditEntry] = []
        now = state.read_at
        self._reconcile_nodes(view, observed, report, now)
        self._fill_node_settings(view, observed)
        self._fill_demand_response(view, now)
        self._verify_demand_response(view, now, audit)
        self._fill_budgets(view, now)
        view.snapshot.forecast = self._forecast(view.snapshot, None)
        self.last_view = view

        self._learn(state, view)
        # 1. Starts released earlier: confirm, or take back after too many cycles.
        self._check_starts(view, starts, audit, report, now)
        # 2. Pending jobs nobody holds (gate: daemon, or let through while the gate was open) or their
        #    users hold (moved in, or held by hand): hold them as ours.
        for job in c.adopt:
            if job.held:
                reason = "held by its user in a managed partition; the hold is wattsched's now"
            elif cfg.gate == "daemon":
                reason = "held on arrival"
            else:
                reason = "submitted while the gate was open; held"
            if self._act("hold", job.job_id, reason, audit, now,
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
                self._apply(plan, view, audit, report, now)
            self._record_reasons(plan, view)
            if not report.rejected:
                view.snapshot.forecast = self._forecast(view.snapshot, plan)
        # 4. Record.
        audit.extend(AuditEntry(n.time_s, self.cycle_no, n.action, n.target, n.reason, cfg.dry_run, n.outcome)
                     for n in self.grid.drain())
        self.store.audit(audit)
        self.store.put("cycle", self.cycle_no)
        report.duration_s = time.monotonic() - t0
        self._export(view, report, now)
        log.info("%s", report.summary())
        if report.started or report.evicted or report.node_actions or report.reconciled:
            snap = view.snapshot
            log.info("cycle %d decided at %.0f W (measured on %d of %d nodes, predicted %.0f W), cap %.0f W",
                     self.cycle_no, snap.platform_power_w, len(measured), len(snap.platform),
                     view.predicted_power_w, snap.cap_w)
        return report

    def _learn(self, state, view: View) -> None:
        """Job power history: sample the per-node power Slurm reports for running jobs; record finished ones."""
        watts = {n.name: n.current_watts for n in state.nodes}
        running = {j.job_id: j for j in view.classified.running}
        jobs_on = Tally(n for j in state.jobs if j.state in ("RUNNING", "SUSPENDED", "COMPLETING") for n in j.nodes)
        for jid, job in running.items():
            if job.shared and any(jobs_on[n] > 1 for n in job.nodes):
                continue  # a node's power is a job's own (a unit's, alone on its node) only while nothing shares it
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
            # a job that may have shared its nodes learns only from the cycles it ran alone on them
            measured = self.telemetry.job_power(job.nodes, start, end) if job.nodes and not job.shared else None
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
            ensure_dir(path.parent, 0o755, what="heartbeat directory")
            # readable by slurmctld's SlurmUser (the gate), writable by the daemon only; a bare time
            write_atomic(path, f"{int(now)}\n", 0o644, what="heartbeat directory")
        except (OSError, UnsafeDirError) as exc:
            log.warning("cannot write the heartbeat %s: %s (the lua gate stays open)", path, exc)

    def _act(self, action: str, target, reason: str, audit: list[AuditEntry], now: float, fn, args=None) -> bool:
        """Apply one Slurm action (unless dry-run) under a write-ahead intent and its audit row; count it."""
        if self.config.dry_run:
            audit.append(AuditEntry(now, self.cycle_no, action, str(target), reason, True, "dry-run"))
            self.metrics.decisions.labels(action, "dry-run").inc()
            return False
        intent = self.store.begin_audited(AuditEntry(now, self.cycle_no, action, str(target), reason, False,
                                                     "pending"), args)
        try:
            fn()
        except WattschedError as exc:
            self.store.finish(intent, "failed", f"{reason}: {exc}")
            if isinstance(exc, SlurmCommandError):
                self.metrics.slurm_errors.labels(exc.cmd[0] if exc.cmd else "?").inc()
            self.metrics.decisions.labels(action, "failed").inc()
            if getattr(self, "_report", None) is not None:
                self._report.failed_actions.append(f"{action} {target}")
            log.warning("%s %s failed: %s", action, target, exc)
            return False
        self.store.finish(intent, "applied")
        self.metrics.decisions.labels(action, "applied").inc()
        return True

    # ------------------------------------------------------------------ node caps and frequencies

    def _settled(self, measured: dict[str, float], now: float) -> dict[str, float]:
        """Measured node power without the nodes wattsched changed less than ``telemetry.settle_s`` ago (a new
        frequency or cap, an evicted job): their readings still show the power before the change (the query's rate
        window, scrape intervals), so their predicted power stands in until the telemetry catches up."""
        settle_s = self.config.telemetry.settle_s
        self._changed_at = {n: t for n, t in self._changed_at.items() if now - t < settle_s}
        return {n: w for n, w in measured.items() if n not in self._changed_at}

    def _observe(self, nodes: Sequence[SlurmNode]) -> dict[str, NodeSetting]:
        """Every managed node's cap and frequency as its actuator reads them (in parallel)."""
        if self.config.actuator.kind == "none" or not nodes:
            return {}
        with ThreadPoolExecutor(max_workers=min(16, len(nodes))) as pool:
            settings = list(pool.map(self.actuator.observe, nodes))
        out = {}
        for node, setting in zip(nodes, settings, strict=True):
            if setting.error and not (setting.has_cap or setting.has_freq):
                log.debug("cannot read node settings of %s: %s", node.name, setting.error)
            out[node.name] = setting
        self._observed = out
        return out

    def _node_act(self, kind: str, node: SlurmNode, value: float | None, reason: str, now: float, *,
                  job_id: int | None = None, base: float | None = None) -> Outcome:
        """Set ``node``'s cap or frequency through the actuator: desired state, intent and audit row first.

        Without an actuator (``actuator.kind: none``) the setting is audited as
        ``skipped`` and counts as done (a start that asked for it goes ahead).
        """
        action = NODE_ACTIONS[kind]
        what = _describe(kind, value)
        if self.config.dry_run:
            self.store.audit([AuditEntry(now, self.cycle_no, action, node.name, f"{what}, {reason}", True,
                                         "dry-run")])
            self.metrics.decisions.labels(action, "dry-run").inc()
            return Outcome(True, "dry-run", value)
        if self.config.actuator.kind == "none":  # nothing to apply it with: audited, never retried
            self.store.audit([AuditEntry(now, self.cycle_no, action, node.name,
                                         f"{what}, {reason}: no node actuator configured (actuator.kind: none)",
                                         False, "skipped")])
            self.metrics.decisions.labels(action, "skipped").inc()
            return Outcome(True, "skipped: no node actuator configured", value)
        self.store.want(node.name, kind, value, now, job_id=job_id, base=base)
        intent = self.store.begin_audited(
            AuditEntry(now, self.cycle_no, action, node.name, f"{what}, {reason}", False, "pending"),
            {"kind": kind, "value": value})
        setter = self.actuator.set_cap if kind == "cap" else self.actuator.set_freq
        outcome = setter(node, value, f"wattsched-{intent}")
        if outcome.ok:
            self.store.applied(node.name, kind, outcome.applied)
            self.store.finish(intent, "applied", f"{what}, {reason} ({outcome.detail})")
            self.metrics.decisions.labels(action, "applied").inc()
            gauge = self.metrics.node_cap if kind == "cap" else self.metrics.node_freq
            if value is None:
                with contextlib.suppress(KeyError):
                    gauge.remove(node.name)
            else:
                gauge.labels(node.name).set(value)
            setting = self._observed.get(node.name, NodeSetting())
            self._changed_at[node.name] = now
            if kind == "cap":
                self._observed[node.name] = dataclasses.replace(setting, cap_w=outcome.applied, has_cap=True)
            else:
                self._observed[node.name] = dataclasses.replace(setting, freq_hz=outcome.applied, has_freq=True)
        else:
            self.store.finish(intent, "failed", f"{what}, {reason}: {outcome.detail}")
            self.metrics.decisions.labels(action, "failed").inc()
            self.metrics.node_failures.labels(kind).inc()
            if self._report is not None:
                self._report.failed_actions.append(f"{action} {node.name}")
            log.warning("%s %s (%s) failed: %s", action, node.name, what, outcome.detail)
        return outcome

    def _reconcile_nodes(self, view: View, observed: dict[str, NodeSetting], report: CycleReport,
                         now: float) -> None:
        """Re-apply desired node settings that are pending or that the nodes no longer hold."""
        if self.config.dry_run:
            return
        desired = self.store.desired()
        if not desired:
            return
        on_node: dict[str, set[int]] = {}
        for job in view.classified.running:
            for n in job.nodes:
                on_node.setdefault(n, set()).add(job.job_id)
        for jid, (planned, _at, _cycles) in self.store.starts().items():
            for n in planned:
                on_node.setdefault(n, set()).add(jid)
        for (name, kind), want in desired.items():
            node = view.slurm_nodes.get(name)
            if node is None:
                continue
            if want.job_id is not None and want.job_id not in on_node.get(name, ()):
                # the job that came with this setting is gone from the node: back to the setting before it
                self._node_act(kind, node, want.base, f"job {want.job_id} no longer runs here", now)
                report.reconciled.append(f"{NODE_ACTIONS[kind]} {name} back after job {want.job_id}")
                continue
            why = self._drift(kind, want, observed.get(name))
            if why is None:
                continue
            if want.state == "applied":
                self.metrics.node_drift.labels(kind).inc()
                log.warning("node %s: %s; setting it again", name, why)
            self._node_act(kind, node, want.value, why, now, job_id=want.job_id, base=want.base)
            report.reconciled.append(f"{NODE_ACTIONS[kind]} {name}")
        self._forget_lifted()

    def _forget_lifted(self) -> None:
        """A lifted cap or restored frequency, once applied, is not enforced any more."""
        for (name, kind), want in self.store.desired().items():
            if want.value is None and want.state == "applied" and want.job_id is None:
                self.store.forget_desired(name, kind)

    @staticmethod
    def _drift(kind: str, want: Desired, seen: NodeSetting | None) -> str | None:
        """Why ``want`` must be applied again, or ``None`` when the node holds it."""
        if want.state != "applied":
            return "not applied yet"
        if seen is None:
            return None
        same, readable, now = (same_cap, seen.has_cap, seen.cap_w) if kind == "cap" else (
            same_freq, seen.has_freq, seen.freq_hz)
        if not readable or same(now, want.applied):
            return None
        return f"drifted: the node holds {_describe(kind, now)}, wattsched set {_describe(kind, want.applied)}"

    def _fill_node_settings(self, view: View, observed: dict[str, NodeSetting]) -> None:
        """The snapshot's node caps and frequencies: as read back from the nodes, else as last applied."""
        desired = self.store.desired() if not self.config.dry_run else {}
        caps, freqs = {}, {}
        for i, name in enumerate(view.node_names):
            seen = self._observed.get(name) or observed.get(name)
            cap_want, freq_want = desired.get((name, "cap")), desired.get((name, "freq"))
            cap = seen.cap_w if seen is not None and seen.has_cap else (cap_want.applied if cap_want else None)
            freq = seen.freq_hz if seen is not None and seen.has_freq else (freq_want.applied if freq_want else None)
            if cap is not None:
                caps[i] = cap
            if freq is not None:
                freqs[i] = freq
        view.snapshot.node_cap_w = caps
        view.snapshot.node_freq_hz = freqs
        # a running job's cap and frequency: the lowest in force on its nodes
        running = dict(view.snapshot.running)
        measured = getattr(self, "_measured", None) or {}
        snap = view.snapshot
        for jid, r in running.items():
            job_caps = [caps[i] for i in r.nodes if i in caps]
            job_freqs = [freqs[i] for i in r.nodes if i in freqs]
            if job_caps or job_freqs:
                power_w = r.power_w
                fmax = snap.platform.nodes[r.nodes[0]].power.max_freq_hz
                resp = snap.response_for(r.job) or _CPU_BOUND
                if job_freqs and fmax and not any(view.node_names[i] in measured for i in r.nodes):
                    # predicted, not measured: the job's power at the frequency in force (its response model)
                    power_w = r.power_w * resp.at_frequency_ratio(min(job_freqs) / fmax)[0]
                    snap.platform_power_w += power_w - r.power_w
                    view.predicted_power_w += power_w - r.power_w
                    if snap.jobs_power_w is not None:
                        snap.jobs_power_w += power_w - r.power_w
                running[jid] = dataclasses.replace(r, cap_w=min(job_caps) if job_caps else None,
                                                   freq_hz=min(job_freqs) if job_freqs else None, power_w=power_w)
        view.snapshot.running = running
        index = {name: i for i, name in enumerate(view.node_names)}
        wanted = {kind: {index[n]: w.value for (n, k), w in desired.items() if k == kind and n in index
                         and w.value is not None} for kind in ("cap", "freq")}
        view.snapshot.desired_node_cap_w = wanted["cap"]
        view.snapshot.desired_node_freq_hz = wanted["freq"]

    # ------------------------------------------------------------------ demand response and energy budgets

    def _fill_demand_response(self, view: View, now: float) -> None:
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
        self._dr_events = events
        measured_w, _unmeasured = self._measured_platform_w(view)
        self.grid.observe(power_w=snap.platform_power_w, idle_w=snap.platform.idle_power_w, measured_w=measured_w)

    def _measured_platform_w(self, view: View) -> tuple[float | None, list[int]]:
        """Platform power as telemetry reads it this cycle (the nodes just changed too, whose readings the policy
        sets aside for a while), predicted power for nodes without data; None when nothing is measured. Also the
        nodes without data."""
        raw = getattr(self, "_raw_measured", None) or {}
        unmeasured = [i for i, n in enumerate(view.node_names) if n not in raw]
        if not raw or len(unmeasured) == len(view.node_names):
            return None, unmeasured
        watts = sum(raw[n] for n in view.node_names if n in raw)
        return watts + (self._predicted_nodes_w(view, unmeasured) if unmeasured else 0.0), unmeasured

    def _verify_demand_response(self, view: View, now: float, audit: list[AuditEntry]) -> None:
        """Past an event's deadline (start + ``demand_response.deadline_s``), compare measured platform power
        with its target: a miss is logged, audited, counted and exported (it drives the
        ``WattschedDemandResponseMissed`` alert); meeting it again is audited too."""
        cfg = self.config.demand_response
        m = self.metrics
        active = [e for e in self._dr_events if e.event.start_s <= now < e.event.end_s]
        m.dr_event_active.set(1 if active else 0)
        if not active:
            m.dr_target.set(math.inf)
            for g in (m.dr_baseline, m.dr_reduction, m.dr_deadline, m.dr_missed):
                g.set(0)
            return
        strictest = min(active, key=lambda e: e.cap_w)
        measured_w, unmeasured = self._measured_platform_w(view)
        m.dr_target.set(strictest.cap_w)
        m.dr_baseline.set(strictest.baseline_w)
        m.dr_deadline.set(strictest.event.start_s + cfg.deadline_s)
        m.dr_reduction.set(0.0 if measured_w is None else strictest.baseline_w - measured_w)
        missed_now = False
        for e in active:
            key = f"{e.event.label} at {e.event.start_s:.0f}"
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
            if self._dr_verdicts.get(key) == verdict:
                continue
            self._dr_verdicts[key] = verdict
            audit.append(AuditEntry(now, self.cycle_no, "dr_verify", key, why[:2000], self.config.dry_run, verdict))
            if verdict == "missed":
                m.dr_misses.inc()
                log.warning("demand-response event %s missed its target: %s", key, why)
            else:
                log.info("demand-response event %s %s: %s", key, verdict, why)
        m.dr_missed.set(1 if missed_now else 0)

    @staticmethod
    def _predicted_nodes_w(view: View, nodes: list[int]) -> float:
        """Predicted power of some nodes: their share of the running jobs' power, idle power elsewhere."""
        snap = view.snapshot
        busy: dict[int, float] = {}
        for r in snap.running.values():
            for i in r.nodes:
                busy[i] = r.power_w / max(len(r.nodes), 1)
        return sum(busy.get(i, snap.platform.nodes[i].power.idle_w) for i in nodes)

    def _fill_budgets(self, view: View, now: float) -> None:
        """Integrate platform power into the budget windows (kept in the store); put them in the snapshot."""
        if not self.config.energy_budgets:
            return
        snap = view.snapshot
        saved = self.store.get("energy", {}) or {}
        last_s, last_w = saved.get("last_s"), saved.get("last_w")
        consumed: dict[str, float] = dict(saved.get("consumed", {}))
        counters = {name: self._observed[name].counters for name in view.node_names
                    if name in self._observed and self._observed[name].counters}
        # Measured when telemetry had fresh data for every managed node; else (stale, down, or nodes without
        # data) the platform power is partly or wholly the estimate, and so is the energy counted from it.
        measured = bool(view.node_names) and all(n in self._measured for n in view.node_names)
        if last_s is not None and last_w is not None and now > last_s:
            # the nodes' energy counters when every node has them in both cycles; else the power between two
            # cycles taken as the level of the first (a daemon down meanwhile counts its gap at its last level)
            energy_j = _counted_energy_j(getattr(self, "_last_counters", None), counters, view.node_names)
            if energy_j is not None:
                self.metrics.budget_source.state("counters")
            else:
                energy_j = last_w * (now - last_s)
                self.metrics.budget_source.state("power" if saved.get("last_measured", True) else "estimate")
            for w in self.constraints.budget_windows(last_s, now):
                overlap = min(now, w.end_s) - max(last_s, w.start_s)
                if overlap > 0:
                    consumed[w.key] = consumed.get(w.key, 0.0) + energy_j * overlap / (now - last_s)
        self._last_counters = counters
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
        self._budget_windows = windows

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
            match action:
                case Start():
                    self._start(action, view, audit, report, now)
                case Evict():
                    job = jobs.get(action.job_id)
                    requeue = action.requeue and cfg.evict == "requeue"
                    if job is not None and job.state == "PENDING" and not job.held:
                        # released but not started by Slurm yet (a requeued job's begin time, say): evicting it
                        # is taking the start back, not a requeue Slurm would refuse
                        reason = "start taken back before Slurm ran it: " + str(
                            plan.reasons.get(action.job_id) or "evicted by the policy")
                        if self._act("hold", action.job_id, reason[:2000], audit, now,
                                     lambda j=job: self.backend.hold(j.job_id, with_marker(j.admin_comment))):
                            self.store.drop_starts([action.job_id])
                            self.store.add_hold(action.job_id, "daemon", "start taken back", now)
                            report.rehold.append(action.job_id)
                        continue
                    if requeue and job is not None and not (job.requeue and job.batch):
                        why = "not requeueable (--no-requeue)" if not job.requeue else "not a batch job"
                        audit.append(AuditEntry(now, self.cycle_no, "requeue", str(action.job_id),
                                                f"{why}; left running", cfg.dry_run, "refused"))
                        self.metrics.decisions.labels("requeue", "refused").inc()
                        continue
                    act = "requeue" if requeue else "cancel"
                    fn = (lambda j=action.job_id: self.backend.requeue(j)) if requeue else (
                        lambda j=action.job_id: self.backend.cancel(j))
                    why = plan.reasons.get(action.job_id)
                    why = "evicted by the policy" + (f": {why}" if why else "")
                    if self._act(act, action.job_id, why[:2000], audit, now, fn):
                        report.evicted.append(action.job_id)
                        for n in (job.nodes if job is not None else ()):
                            self._changed_at[n] = now
                        if requeue and job is not None:
                            # requeued, the job is pending again: held, so that the policy decides its restart
                            reason = "evicted; waits for the policy"
                            if self._act("hold", action.job_id, reason, audit, now,
                                         lambda j=job: self.backend.hold(j.job_id, with_marker(j.admin_comment))):
                                self.store.add_hold(action.job_id, "daemon", reason, now)
                case PowerDown(node=i):
                    node = names[i]
                    if self._act("power_down", node, "decided by the policy", audit, now,
                                 lambda n=node: self.backend.power_down(n)):
                        report.node_actions.append(f"power_down {node}")
                case PowerUp(node=i):
                    node = names[i]
                    if self._act("power_up", node, "decided by the policy", audit, now,
                                 lambda n=node: self.backend.power_up(n)):
                        report.node_actions.append(f"power_up {node}")
                case SetNodeCap(node=i, cap_w=value):
                    node = view.slurm_nodes[names[i]]
                    if self._node_act("cap", node, value, "decided by the policy", now).ok:
                        report.node_actions.append(f"set_cap {node.name} {_describe('cap', value)}")
                case SetNodeFreq(node=i, freq_hz=value):
                    node = view.slurm_nodes[names[i]]
                    if self._node_act("freq", node, value, "decided by the policy", now).ok:
                        report.node_actions.append(f"set_freq {node.name} {_describe('freq', value)}")
                case Reshape():
                    audit.append(AuditEntry(now, self.cycle_no, "reshape", str(action.job_id),
                                            "malleable jobs are simulator only: Slurm cannot move a running job",
                                            cfg.dry_run, "refused"))
                    self.metrics.decisions.labels("reshape", "refused").inc()
                case _:
                    assert_never(action)

    def _start(self, action: Start, view: View, audit, report, now) -> None:
        """Apply a start's node cap and frequency to its nodes, then pin and release the job."""
        nodes = [view.node_names[i] for i in action.nodes]
        job = view.slurm_jobs[action.job_id]
        desired = self.store.desired()
        for kind, value in (("cap", action.cap_w), ("freq", action.freq_hz)):
            if value is None:
                continue
            for name in nodes:
                before = desired.get((name, kind))
                base = before.value if before is not None and before.job_id is None else (
                    before.base if before is not None else None)
                outcome = self._node_act(kind, view.slurm_nodes[name], value, f"for job {action.job_id}", now,
                                         job_id=action.job_id, base=base)
                if not outcome.ok:
                    why = f"{NODE_ACTIONS[kind]} on {name} failed ({outcome.detail}); job left held"
                    audit.append(AuditEntry(now, self.cycle_no, "start", str(action.job_id), why[:2000],
                                            self.config.dry_run, "refused"))
                    self.metrics.decisions.labels("start", "refused").inc()
                    return
        hosts = list(dict.fromkeys(nodes))  # a job of tasks may have several units on one node
        reason = f"on {compress(hosts)}" + "".join(
            f", {_describe(k, v)}" for k, v in (("cap", action.cap_w), ("freq", action.freq_hz)) if v is not None)
        if self._act("start", action.job_id, reason, audit, now,
                     lambda j=job, n=hosts: self.backend.release(j.job_id, n, without_marker(j.admin_comment)),
                     {"nodes": nodes}):
            self.store.add_start(action.job_id, nodes, now)
            self.store.drop_holds([action.job_id])
            report.started.append(action.job_id)
        elif self.config.dry_run:
            report.started.append(action.job_id)

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
        from wattsched.telemetry.forecast import HORIZONS

        for label, seconds in HORIZONS.items():
            m.cap_ahead.labels(label).set(snap.cap.min_cap_between(now, now + seconds))
        nxt = snap.cap.next_change_after(now)
        m.cap_next_change.set(nxt if math.isfinite(nxt) else 0.0)
        m.dr_active.set(sum(1 for e in getattr(self, "_dr_events", ()) if e.event.start_s <= now < e.event.end_s))
        m.dr_announced.set(len(getattr(self, "_dr_events", ())))
        for g in (m.budget_consumed, m.budget_remaining, m.budget_total, m.budget_available, m.budget_projected):
            g.clear()
        c_ea = getattr(self.policy_state, "c_ea_j", None)
        for w, b in zip(getattr(self, "_budget_windows", ()), snap.budgets, strict=False):
            if w.start_s <= now < w.end_s:
                m.budget_consumed.labels(w.label).set(b.consumed_j)
                m.budget_remaining.labels(w.label).set(b.remaining_j)
                m.budget_total.labels(w.label).set(b.budget.energy_j)
                m.budget_projected.labels(w.label).set(b.consumed_j + snap.platform_power_w * (w.end_s - now))
                if c_ea is not None and getattr(self.policy_state, "window", None) is not None:
                    m.budget_available.labels(w.label).set(c_ea)
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

    def _reconcile(self, state, observed: dict[str, NodeSetting]) -> None:
        """After a restart: settle actions that were in flight when the daemon died."""
        jobs = {j.job_id: j for j in state.jobs}
        for intent in self.store.open_intents():
            job = jobs.get(int(intent.target)) if intent.target.isdigit() else None
            outcome = "unknown"
            if intent.action in ("set_cap", "set_freq"):
                kind = intent.args.get("kind", "cap" if intent.action == "set_cap" else "freq")
                value = intent.args.get("value")
                seen = observed.get(intent.target)
                readable = seen is not None and (seen.has_cap if kind == "cap" else seen.has_freq)
                if readable:
                    now_value = seen.cap_w if kind == "cap" else seen.freq_hz
                    same = same_cap if kind == "cap" else same_freq
                    want = self.store.desired().get((intent.target, kind))
                    if same(now_value, value):
                        outcome = "applied"
                        if want is not None and want.state == "pending" and (
                                want.value == value or same(want.value, value)):
                            self.store.applied(intent.target, kind, now_value)
                    else:
                        outcome = "not-applied"  # still desired: set again in this cycle
            elif intent.action == "start":
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
        self._now = state.read_at
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
        self.start_grid()
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

    def start_grid(self) -> None:
        """Start the VENs of ``demand_response.openadr2`` and ``openadr3`` in their threads (once)."""
        if self._grid_vens:
            return
        dr = self.config.demand_response
        try:
            if dr.openadr2 is not None:
                from wattsched.daemon.grid.openadr2 import OpenADR2Ven

                self._grid_vens.append(OpenADR2Ven(dr.openadr2, self.grid))
            if dr.openadr3 is not None:
                from wattsched.daemon.grid.openadr3 import OpenADR3Ven

                self._grid_vens.append(OpenADR3Ven(dr.openadr3, self.grid))
        except ConfigError as exc:
            key = "openadr2" if dr.openadr2 is not None and not self._grid_vens else "openadr3"
            raise ConfigError(f"{key_locator(self.config, 'demand_response')((key,))}: {exc}") from None
        for ven in self._grid_vens:
            ven.start()
            log.info("demand response: %s VEN started for %s", ven.source, ven.config.vtn_url)

    def stop_grid(self) -> None:
        for ven in self._grid_vens:
            ven.stop()
        self._grid_vens = []

    def stop(self) -> int:
        self.notifier.stopping()
        self.stop_grid()
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


def _describe(kind: str, value: float | None) -> str:
    """``180 W``, ``uncapped``, ``1.50 GHz`` or ``nominal frequency``."""
    if kind == "cap":
        return "uncapped" if value is None else f"{value:.0f} W"
    return "nominal frequency" if value is None else f"{value / 1e9:.2f} GHz"
