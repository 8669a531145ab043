"""The reconciler of node settings: desired caps and frequencies against what the nodes hold.

The daemon's plans set node caps and CPU frequency ceilings; the state store keeps each node's *desired*
setting (the value, the job it came with and the setting before it). Every cycle the reconciler reads back
what each node holds through its actuator (:meth:`NodeReconciler.observe`), sets again what is pending or
has drifted, puts a node back to its earlier setting once the job that came with a setting has left
(:meth:`NodeReconciler.reconcile`), and fills the snapshot with the settings in force
(:meth:`NodeReconciler.fill`). Writes are idempotent and failures are data: an actuator answers with an
:class:`~wattsched.daemon.actuators.Outcome`, which is audited and counted, and the next cycle tries again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

from wattsched.config.daemon import DaemonConfig
from wattsched.daemon.actuators import NodeActuator, NodeSetting, Outcome, same_cap, same_freq
from wattsched.daemon.metrics import DaemonMetrics
from wattsched.daemon.slurm.records import SlurmJob, SlurmNode
from wattsched.daemon.store import AuditEntry, Desired, Store
from wattsched.daemon.view import ACTIVE, View

__all__ = ["NODE_ACTIONS", "NodeReconciler", "describe_setting"]

NODE_ACTIONS = {"cap": "set_cap", "freq": "set_freq"}

log = logging.getLogger("wattsched.daemon")


class NodeReconciler:
    """Node caps and frequencies: desired (from the plans, in the store) against observed (from the actuator)."""

    def __init__(self, store: Store, metrics: DaemonMetrics):
        self.store = store
        self.metrics = metrics
        self.config: DaemonConfig | None = None
        self.actuator: NodeActuator | None = None
        self.observed: dict[str, NodeSetting] = {}
        """What each managed node held when last read back, updated by the writes of this cycle."""
        self.changed_at: dict[str, float] = {}
        """Node -> when wattsched last changed what runs on it, or how, or a job on it ended (its readings settle
        after that)."""
        self._busy: set[str] = set()
        """The nodes that ran a job at the last cycle."""
        self.cycle_no = 0
        self.report = None
        """The cycle's report: failed writes are listed in it."""

    def configure(self, config: DaemonConfig, actuator: NodeActuator) -> None:
        self.config = config
        self.actuator = actuator

    def begin_cycle(self, cycle_no: int, report) -> None:
        self.cycle_no = cycle_no
        self.report = report

    def note_ended_jobs(self, jobs: Sequence[SlurmJob], now: float) -> None:
        """Nodes whose job ended settle too: for a while a rate over the query's window still shows the job's power
        there, and taken as measured it keeps the policy from an idle node (a head job waiting for power waits out
        the telemetry's lag, and jobs backfilled meanwhile can overtake it again and again).

        A job Slurm still lists as ended (``squeue --all`` keeps finished jobs for ``MinJobAge``) counts from its
        end time, across a restart too; a node that ran a job at the last cycle and runs none now, from now.
        """
        settle_s = self.config.telemetry.settle_s
        busy: set[str] = set()
        ended: dict[str, float] = {}
        for j in jobs:
            if j.state in ACTIVE:
                busy.update(j.nodes)
            elif j.state != "PENDING" and j.end_time is not None and j.end_time <= now:  # (a pending job's is a guess)
                for n in j.nodes:
                    ended[n] = max(ended.get(n, j.end_time), j.end_time)
        for n in self._busy - busy:
            ended.setdefault(n, now)
        for n, t in ended.items():
            if n not in busy and now - t < settle_s:
                self.changed_at[n] = max(self.changed_at.get(n, t), t)
        self._busy = busy

    def settled(self, measured: dict[str, float], now: float) -> dict[str, float]:
        """Measured node power without the nodes wattsched changed less than ``telemetry.settle_s`` ago (a new
        frequency or cap, an evicted job): their readings still show the power before the change (the query's rate
        window, scrape intervals), so their predicted power stands in until the telemetry catches up."""
        settle_s = self.config.telemetry.settle_s
        self.changed_at = {n: t for n, t in self.changed_at.items() if now - t < settle_s}
        return {n: w for n, w in measured.items() if n not in self.changed_at}

    def observe(self, nodes: Sequence[SlurmNode]) -> dict[str, NodeSetting]:
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
        self.observed = out
        return out

    def act(self, kind: str, node: SlurmNode, value: float | None, reason: str, now: float, *,
                  job_id: int | None = None, base: float | None = None) -> Outcome:
        """Set ``node``'s cap or frequency through the actuator: desired state, intent and audit row first.

        Without an actuator (``actuator.kind: none``) the setting is audited as
        ``skipped`` and counts as done (a start that asked for it goes ahead).
        """
        action = NODE_ACTIONS[kind]
        what = describe_setting(kind, value)
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
            setting = self.observed.get(node.name, NodeSetting())
            self.changed_at[node.name] = now
            if kind == "cap":
                self.observed[node.name] = dataclasses.replace(setting, cap_w=outcome.applied, has_cap=True)
            else:
                self.observed[node.name] = dataclasses.replace(setting, freq_hz=outcome.applied, has_freq=True)
        else:
            self.store.finish(intent, "failed", f"{what}, {reason}: {outcome.detail}")
            self.metrics.decisions.labels(action, "failed").inc()
            self.metrics.node_failures.labels(kind).inc()
            if self.report is not None:
                self.report.failed_actions.append(f"{action} {node.name}")
            log.warning("%s %s (%s) failed: %s", action, node.name, what, outcome.detail)
        return outcome

    def reconcile(self, running: Sequence[SlurmJob], nodes: Mapping[str, SlurmNode], observed: dict[str, NodeSetting],
                  report, now: float) -> None:
        """Re-apply desired node settings that are pending or that the nodes no longer hold (``running``: the
        managed jobs running, ``nodes``: the managed nodes by name)."""
        if self.config.dry_run:
            return
        desired = self.store.desired()
        if not desired:
            return
        on_node: dict[str, set[int]] = {}
        for job in running:
            for n in job.nodes:
                on_node.setdefault(n, set()).add(job.job_id)
        for jid, (planned, _at, _cycles) in self.store.starts().items():
            for n in planned:
                on_node.setdefault(n, set()).add(jid)
        for (name, kind), want in desired.items():
            node = nodes.get(name)
            if node is None:
                continue
            if want.job_id is not None and want.job_id not in on_node.get(name, ()):
                # the job that came with this setting is gone from the node: back to the setting before it
                self.act(kind, node, want.base, f"job {want.job_id} no longer runs here", now)
                report.reconciled.append(f"{NODE_ACTIONS[kind]} {name} back after job {want.job_id}")
                continue
            why = self.drift(kind, want, observed.get(name))
            if why is None:
                continue
            if want.state == "applied":
                self.metrics.node_drift.labels(kind).inc()
                log.warning("node %s: %s; setting it again", name, why)
            self.act(kind, node, want.value, why, now, job_id=want.job_id, base=want.base)
            report.reconciled.append(f"{NODE_ACTIONS[kind]} {name}")
        self.forget_lifted()

    def forget_lifted(self) -> None:
        """A lifted cap or restored frequency, once applied, is not enforced any more."""
        for (name, kind), want in self.store.desired().items():
            if want.value is None and want.state == "applied" and want.job_id is None:
                self.store.forget_desired(name, kind)

    @staticmethod
    def drift(kind: str, want: Desired, seen: NodeSetting | None) -> str | None:
        """Why ``want`` must be applied again, or ``None`` when the node holds it."""
        if want.state != "applied":
            return "not applied yet"
        if seen is None:
            return None
        same, readable, now = (same_cap, seen.has_cap, seen.cap_w) if kind == "cap" else (
            same_freq, seen.has_freq, seen.freq_hz)
        if not readable or same(now, want.applied):
            return None
        return (f"drifted: the node holds {describe_setting(kind, now)}, "
                f"wattsched set {describe_setting(kind, want.applied)}")

    def settings(self, names: Sequence[str], observed: dict[str, NodeSetting]
                 ) -> tuple[dict[int, float], dict[int, float]]:
        """The caps and frequencies in force on nodes ``names`` (by index): as read back, else as last applied."""
        desired = self.store.desired() if not self.config.dry_run else {}
        caps, freqs = {}, {}
        for i, name in enumerate(names):
            seen = self.observed.get(name) or observed.get(name)
            cap_want, freq_want = desired.get((name, "cap")), desired.get((name, "freq"))
            cap = seen.cap_w if seen is not None and seen.has_cap else (cap_want.applied if cap_want else None)
            freq = seen.freq_hz if seen is not None and seen.has_freq else (freq_want.applied if freq_want else None)
            if cap is not None:
                caps[i] = cap
            if freq is not None:
                freqs[i] = freq
        return caps, freqs

    def fill_desired(self, view: View) -> None:
        """The settings wattsched wants on the nodes, into the snapshot."""
        desired = self.store.desired() if not self.config.dry_run else {}
        index = {name: i for i, name in enumerate(view.node_names)}
        wanted = {kind: {index[n]: w.value for (n, k), w in desired.items() if k == kind and n in index
                         and w.value is not None} for kind in ("cap", "freq")}
        view.snapshot.desired_node_cap_w = wanted["cap"]
        view.snapshot.desired_node_freq_hz = wanted["freq"]

    # ------------------------------------------------------------------ demand response and energy budgets


def describe_setting(kind: str, value: float | None) -> str:
    """``180 W``, ``uncapped``, ``1.50 GHz`` or ``nominal frequency``."""
    if kind == "cap":
        return "uncapped" if value is None else f"{value:.0f} W"
    return "nominal frequency" if value is None else f"{value / 1e9:.2f} GHz"
