"""The act stage of a cycle: a guarded plan applied to Slurm and the nodes, each action under a write-ahead intent.

Every action is written to the state store as an *intent*, with its audit row, before it reaches Slurm or a
node, and completed with its outcome after, so a daemon killed in between checks on restart what Slurm and
the nodes actually did instead of acting twice (:meth:`PlanActions.act`). Starts are releases pinned to the
chosen nodes (``ReqNodeList``, and the chosen node count for a moldable job), checked in the next cycles
(:meth:`PlanActions.check_starts`); a ``Reshape`` shrinks a running malleable job (:meth:`PlanActions.shrink`);
node caps and frequencies go through the reconciler (:class:`~wattsched.daemon.reconciler.NodeReconciler`);
the reason each waiting job is held is recorded when it changes (:meth:`PlanActions.record_reasons`).
"""

from __future__ import annotations

import logging
import time
from collections import Counter as Tally
from typing import assert_never

from wattsched.config.daemon import DaemonConfig
from wattsched.daemon.actuators import NodeSetting, same_cap, same_freq
from wattsched.daemon.metrics import DaemonMetrics
from wattsched.daemon.reconciler import NODE_ACTIONS, NodeReconciler, describe_setting
from wattsched.daemon.slurm.backend import SlurmBackend, with_marker, without_marker
from wattsched.daemon.slurm.hostlist import compress
from wattsched.daemon.store import AuditEntry, Store
from wattsched.daemon.view import View
from wattsched.errors import SlurmCommandError, WattschedError
from wattsched.model.plan import Evict, PowerDown, PowerUp, Reason, Reshape, SetNodeCap, SetNodeFreq, Start

__all__ = ["PlanActions"]

log = logging.getLogger("wattsched.daemon")


class PlanActions:
    """Applies plans: Slurm actions (hold, release pinned, shrink, requeue or cancel, power down and up) and node
    settings."""

    def __init__(self, store: Store, metrics: DaemonMetrics, backend: SlurmBackend, nodes: NodeReconciler):
        self.store = store
        self.metrics = metrics
        self.backend = backend
        self.nodes = nodes
        self.config: DaemonConfig | None = None
        self.cycle_no = 0
        self.report = None
        self.reasons: dict[int, str] = {}
        """Why each waiting job is held, as last recorded."""
        self.held_kinds: Tally = Tally()
        """Waiting jobs by kind of reason, this cycle."""

    def configure(self, config: DaemonConfig) -> None:
        self.config = config

    def begin_cycle(self, cycle_no: int, report) -> None:
        self.cycle_no = cycle_no
        self.report = report

    def act(self, action: str, target, reason: str, audit: list[AuditEntry], now: float, fn, args=None) -> bool:
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
            if self.report is not None:
                self.report.failed_actions.append(f"{action} {target}")
            log.warning("%s %s failed: %s", action, target, exc)
            return False
        self.store.finish(intent, "applied")
        self.metrics.decisions.labels(action, "applied").inc()
        return True

    def check_starts(self, view: View, starts, audit, report, now) -> None:
        done, bump = [], []
        for jid, (planned, _released_at, cycles) in starts.items():
            job = view.slurm_jobs.get(jid)
            if job is None and jid in view.skipped_jobs:
                continue  # printed but unreadable this cycle: not gone, checked again when readable
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
                if self.act("hold", jid, reason, audit, now,
                             lambda j=job: self.backend.hold(j.job_id, with_marker(j.admin_comment))):
                    self.store.add_hold(jid, "daemon", reason, now)
                    report.rehold.append(jid)
                done.append(jid)
            else:
                bump.append(jid)
        self.store.drop_starts(done)
        self.store.bump_starts(bump)
        # forget holds of jobs that are no longer held by us (but not the ones just held again, nor those whose
        # record could not be read this cycle: they are still held in Slurm, and still ours)
        ours = {j.job_id for j in view.classified.ours} | set(report.rehold) | view.skipped_jobs
        stale = [j for j in self.store.holds() if j not in ours]
        self.store.drop_holds(stale)

    def apply(self, plan, view: View, audit, report, now) -> None:
        names = view.node_names
        jobs = view.slurm_jobs
        cfg = self.config
        for action in plan.actions:
            match action:
                case Start():
                    self.start(action, view, audit, report, now)
                case Evict():
                    job = jobs.get(action.job_id)
                    requeue = action.requeue and cfg.evict == "requeue"
                    if job is not None and job.state == "PENDING" and not job.held:
                        # released but not started by Slurm yet (a requeued job's begin time, say): evicting it
                        # is taking the start back, not a requeue Slurm would refuse
                        reason = "start taken back before Slurm ran it: " + str(
                            plan.reasons.get(action.job_id) or "evicted by the policy")
                        if self.act("hold", action.job_id, reason[:2000], audit, now,
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
                    if self.act(act, action.job_id, why[:2000], audit, now, fn):
                        report.evicted.append(action.job_id)
                        for n in (job.nodes if job is not None else ()):
                            self.nodes.changed_at[n] = now
                        if requeue and job is not None:
                            # requeued, the job is pending again: held, so that the policy decides its restart
                            reason = "evicted; waits for the policy"
                            if self.act("hold", action.job_id, reason, audit, now,
                                         lambda j=job: self.backend.hold(j.job_id, with_marker(j.admin_comment))):
                                self.store.add_hold(action.job_id, "daemon", reason, now)
                case PowerDown(node=i):
                    node = names[i]
                    if self.act("power_down", node, "decided by the policy", audit, now,
                                 lambda n=node: self.backend.power_down(n)):
                        report.node_actions.append(f"power_down {node}")
                case PowerUp(node=i):
                    node = names[i]
                    if self.act("power_up", node, "decided by the policy", audit, now,
                                 lambda n=node: self.backend.power_up(n)):
                        report.node_actions.append(f"power_up {node}")
                case SetNodeCap(node=i, cap_w=value):
                    node = view.slurm_nodes[names[i]]
                    if self.nodes.act("cap", node, value, "decided by the policy", now).ok:
                        report.node_actions.append(f"set_cap {node.name} {describe_setting('cap', value)}")
                case SetNodeFreq(node=i, freq_hz=value):
                    node = view.slurm_nodes[names[i]]
                    if self.nodes.act("freq", node, value, "decided by the policy", now).ok:
                        report.node_actions.append(f"set_freq {node.name} {describe_setting('freq', value)}")
                case Reshape():
                    self.shrink(action, view, audit, report, now)
                case _:
                    assert_never(action)

    def start(self, action: Start, view: View, audit, report, now) -> None:
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
                outcome = self.nodes.act(kind, view.slurm_nodes[name], value, f"for job {action.job_id}", now,
                                         job_id=action.job_id, base=base)
                if not outcome.ok:
                    why = f"{NODE_ACTIONS[kind]} on {name} failed ({outcome.detail}); job left held"
                    audit.append(AuditEntry(now, self.cycle_no, "start", str(action.job_id), why[:2000],
                                            self.config.dry_run, "refused"))
                    self.metrics.decisions.labels("start", "refused").inc()
                    return
        hosts = list(dict.fromkeys(nodes))  # a job of tasks may have several units on one node
        reason = f"on {compress(hosts)}" + "".join(
            f", {describe_setting(k, v)}" for k, v in (("cap", action.cap_w), ("freq", action.freq_hz))
            if v is not None)
        policy_job = view.snapshot.pending.get(action.job_id)
        count = None
        if policy_job is not None and policy_job.max_nodes and not policy_job.units:
            # a moldable job (--nodes=MIN-MAX): its node count set to the one chosen, in the same update as its
            # nodes, so that Slurm runs it on exactly those
            count = len(hosts)
            reason += f" ({count} of {policy_job.min_nodes}-{policy_job.max_nodes} nodes)"

        def release(j=job, n=hosts, k=count):
            if k is None:
                self.backend.release(j.job_id, n, without_marker(j.admin_comment))
            else:
                self.backend.release(j.job_id, n, without_marker(j.admin_comment), node_count=k)

        if self.act("start", action.job_id, reason, audit, now, release, {"nodes": nodes}):
            self.store.add_start(action.job_id, nodes, now)
            self.store.drop_holds([action.job_id])
            report.started.append(action.job_id)
        elif self.config.dry_run:
            report.started.append(action.job_id)

    def shrink(self, action: Reshape, view: View, audit, report, now) -> None:
        """Shrink a running malleable job to the plan's nodes (the guard has checked they are a subset of its own
        that keeps its first node); nothing to do when Slurm already shows the job on exactly those nodes (a
        shrink applied before a restart, say)."""
        jid = action.job_id
        job = view.slurm_jobs.get(jid)
        nodes = [view.node_names[i] for i in action.nodes]
        if job is None or job.state != "RUNNING":
            audit.append(AuditEntry(now, self.cycle_no, "shrink", str(jid),
                                    "not running in Slurm (released, not started yet, or ended)",
                                    self.config.dry_run, "refused"))
            self.metrics.decisions.labels("shrink", "refused").inc()
            return
        if set(job.nodes) == set(nodes):
            audit.append(AuditEntry(now, self.cycle_no, "shrink", str(jid), f"already on {compress(nodes)}",
                                    self.config.dry_run, "unchanged"))
            self.metrics.decisions.labels("shrink", "unchanged").inc()
            return
        dropped = [n for n in job.nodes if n not in set(nodes)]
        reason = f"to {compress(nodes)} from {compress(list(job.nodes))}"
        if self.act("shrink", jid, reason, audit, now, lambda n=nodes: self.backend.shrink(jid, n),
                    {"nodes": nodes}):
            report.node_actions.append(f"shrink {jid} {compress(nodes)}")
            for n in dropped:
                self.nodes.changed_at[n] = now

    def record_reasons(self, plan, view: View) -> None:
        started = {a.job_id for a in plan.actions if type(a) is Start}
        changed = {}
        kinds: Tally = Tally()
        for jid in view.snapshot.pending:
            if jid in started:
                continue
            r = plan.reasons.get(jid, plan.default_reason)
            kinds[r.template if isinstance(r, Reason) else str(r) or "waiting"] += 1
            text = str(r)
            if self.reasons.get(jid) != text:
                changed[jid] = text
        if changed:
            self.store.set_reasons(changed)
            self.reasons.update(changed)
            for jid, text in list(changed.items())[:20]:
                log.debug("job %s held: %s", jid, text)
        self.held_kinds = kinds

    def settle_in_flight(self, state, observed: dict[str, NodeSetting]) -> None:
        """After a restart: settle the actions that were in flight when the daemon died (their open intents),
        from what Slurm and the nodes show now."""
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
            elif intent.action == "shrink":
                # applied when Slurm shows the job on the nodes it was to keep: the plan that asked is not
                # applied again (a new plan decides afresh, and its shrink to the same nodes is "unchanged")
                want = set(intent.args.get("nodes", []))
                if job is None or job.state != "RUNNING":
                    outcome = "unknown"
                else:
                    outcome = "applied" if set(job.nodes) == want else "not-applied"
            elif intent.action == "hold":
                if job is not None and job.held:
                    outcome = "applied"
                    self.store.add_hold(job.job_id, "daemon", "held on arrival", intent.time)
                else:
                    outcome = "not-applied"
            self.store.finish(intent.id, f"reconciled:{outcome}")
            log.info("in-flight %s of %s at the last stop: %s", intent.action, intent.target, outcome)
        self.store.prune_intents(time.time() - 7 * 86400)
