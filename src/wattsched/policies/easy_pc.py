"""EASY+PC: EASY backfilling that also respects a power cap (Carastan-Santos et al. 2024, Algorithm 1).

Every start and every backfill is checked against the cap with the shared
power verification (:mod:`wattsched.policies.power`) on predicted power. The
head job's reservation accounts for power as well as nodes: its shadow time is
the first time, walking the running jobs' expected ends and the cap schedule's
changes, at which both enough nodes and enough predicted power are available
for it. A job may backfill if it fits now (nodes and power) and either ends by
the shadow time or, running past it, leaves the head its nodes (extra nodes)
and its power (the ledger at the shadow time, with the head, still fits).

``easy-saf`` is the same with Smallest Area First order. With no cap in force
the policy is plain EASY.

Lookahead: with ``lookahead`` (default), a job is checked against the lowest
cap in force during its requested time, so jobs are not started into a capped
window (or a demand-response event) they would overshoot.
"""

from __future__ import annotations

import heapq
import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from wattsched.model.job import Job
from wattsched.model.plan import Plan, Reason, Start
from wattsched.model.snapshot import Snapshot
from wattsched.policies.base import BasePolicy
from wattsched.policies.easy import EasyPolicy, queue_order
from wattsched.policies.power import PowerLedger

Check = Literal["mean", "max", "gaussian_68", "gaussian_95", "gaussian_99"]


class EasyPcParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    check: Check = Field("gaussian_99", description="Power verification: mean, max or gaussian_68/95/99.")
    order: Literal["fcfs", "saf"] = Field("fcfs", description="Queue order: fcfs or saf (smallest area first).")
    lookahead: bool = Field(True, description="Check each job against the lowest cap during its requested time.")


class EasySafParams(EasyPcParams):
    order: Literal["fcfs", "saf"] = Field("saf", description="Queue order (saf for easy-saf).")


class EasyPcPolicy(BasePolicy):
    """EASY with power-capping checks on predicted power. Registered as ``easy-pc``."""

    name = "easy-pc"
    Params = EasyPcParams

    def __init__(self, params=None, **kwargs):
        super().__init__(params, **kwargs)
        self._easy = EasyPolicy(order=self.params.order)

    def init_state(self) -> dict[str, Any]:
        return {}

    def decide(self, snapshot: Snapshot, state: dict[str, Any] | None = None) -> Plan:
        cap = snapshot.cap
        now = snapshot.now_s
        if cap.is_uncapped or (cap.cap_at(now) == math.inf and cap.next_change_after(now) == math.inf):
            return self._easy.decide(snapshot, state)
        return self._decide_capped(snapshot)

    def _cap_for(self, snapshot: Snapshot, start_s: float, job: Job) -> float:
        if self.params.lookahead:
            return snapshot.cap.min_cap_between(start_s, start_s + max(job.walltime_s, 1e-9))
        return snapshot.cap.cap_at(start_s)

    def _decide_capped(self, snapshot: Snapshot) -> Plan:
        p = self.params
        now = snapshot.now_s
        free = snapshot.free_nodes
        end = len(free)
        actions: list[Start] = []
        plan = Plan(actions)
        if not snapshot.pending:
            return plan
        ledger = PowerLedger.from_snapshot(snapshot, p.check)
        estimate = snapshot.estimate
        started: list[tuple[float, int, int, Job]] = []  # (expected end, nodes, id, job)
        head = None
        jobs = queue_order(snapshot, p.order)
        it = iter(jobs)
        for job in it:
            k = job.nodes
            est = estimate(job)
            if k <= end and ledger.fits(est, k, self._cap_for(snapshot, now, job)):
                actions.append(Start(job.id, tuple(free[end - k : end])))
                ledger.add(est, k)
                started.append((now + job.walltime_s, k, job.id, job))
                end -= k
                continue
            head = job
            break
        if head is None:
            self._estimate_plan(plan, ledger)
            return plan
        shadow, extra, at_shadow = self._shadow(snapshot, head, end, ledger, started)
        if end:
            index = snapshot.queue_index
            if p.order == "fcfs" and index is not None and len(snapshot.pending) > 48:
                candidates = self._candidates(snapshot, head, end, shadow, extra, ledger)
            else:
                candidates = it
            for job in candidates:
                k = job.nodes
                if k > end:
                    continue
                est = estimate(job)
                if not ledger.fits(est, k, self._cap_for(snapshot, now, job)):
                    continue
                if now + job.walltime_s <= shadow:
                    pass
                elif k <= extra and at_shadow is not None and at_shadow.fits(est, k, self._cap_at_shadow(
                        snapshot, shadow, head)):
                    extra -= k
                    at_shadow.add(est, k)
                else:
                    continue
                actions.append(Start(job.id, tuple(free[end - k : end])))
                ledger.add(est, k)
                end -= k
                if end == 0:
                    break
        plan.reasons[head.id] = Reason(_HEAD_REASON, head.nodes, len(free), p.check, shadow)
        plan.default_reason = "does not fit now (nodes or predicted power) without delaying the head job"
        self._estimate_plan(plan, ledger)
        return plan

    def _cap_at_shadow(self, snapshot: Snapshot, shadow: float, head: Job) -> float:
        return self._cap_for(snapshot, shadow, head)

    def _estimate_plan(self, plan: Plan, ledger: PowerLedger) -> None:
        if plan.actions:
            plan.power_estimate_w = ledger.value()

    def _candidates(self, snapshot: Snapshot, head: Job, end: int, shadow: float, extra: int,
                    ledger: PowerLedger) -> list[Job]:
        """Jobs after the head that could backfill, in queue order: from the queue index when there is one."""
        pending = snapshot.pending
        index = snapshot.queue_index
        # Necessary conditions only (a superset): the increment must fit the headroom under the cap in
        # force now; lookahead caps are lower, the Gaussian term only adds. The exact checks follow.
        room = ledger.headroom(snapshot.cap_w)
        mean_room = room if ledger.method != "max" else math.inf
        max_room = room if ledger.method == "max" else math.inf
        found = index.candidates(head.id, end, (shadow - snapshot.now_s) * (1 + 1e-12) + 1e-9, extra,
                                 power=(ledger.idle_w, mean_room, max_room))
        get = pending.get
        return [j for j in (get(int(i)) for i in index.ids[found].tolist()) if j is not None]

    def _shadow(self, snapshot: Snapshot, head: Job, free: int, ledger: PowerLedger,
                started: list[tuple[float, int, int, Job]]):
        """Earliest time the head has nodes and power; extra nodes then; the ledger then, head included."""
        now = snapshot.now_s
        at = ledger.copy()
        avail = free
        est_head = snapshot.estimate(head)
        running = snapshot.running
        ends = [(max(e, now), n, jid, None) for e, n, jid in snapshot.running_by_end()]
        events = list(heapq.merge(ends, sorted(started, key=lambda s: s[:3])))
        cap = snapshot.cap
        changes = []
        t = cap.next_change_after(now)
        while t != math.inf and len(changes) < 64:
            changes.append(t)
            t = cap.next_change_after(t)
        i = j = 0
        t = now
        while True:
            if avail >= head.nodes and at.fits(est_head, head.nodes, self._cap_for(snapshot, t, head)):
                at.add(est_head, head.nodes)
                return t, avail - head.nodes, at
            next_end = events[i][0] if i < len(events) else math.inf
            next_change = changes[j] if j < len(changes) else math.inf
            t = min(next_end, next_change)
            if t == math.inf:
                return math.inf, 0, None
            while i < len(events) and events[i][0] <= t:
                _, n, jid, job = events[i]
                job = job if job is not None else running[jid].job
                at.remove(snapshot.estimate(job), n)
                avail += n
                i += 1
            while j < len(changes) and changes[j] <= t:
                j += 1


class EasySafPolicy(EasyPcPolicy):
    """EASY+PC with Smallest Area First queue order. Registered as ``easy-saf``."""

    name = "easy-saf"
    Params = EasySafParams


_HEAD_REASON = ("head of queue: needs {} nodes ({} free) and predicted power under the cap ({} check); "
                "reserved at t={:.0f}s")
