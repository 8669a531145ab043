"""EASY+PC (Carastan-Santos et al. 2024, Algorithm 1) as first written: one pass, no index, no end table.

The reference for :class:`wattsched.policies.easy_pc.EasyPcPolicy`, whose
backfilling works on the queue index's power increments (numpy filters, or
the compiled scan) and whose reservation walks the end table (cumulative
sums, a Python walk of the first rows, the compiled walk, or a proof that
the head never fits). Every job is checked here one by one with
:class:`~wattsched.policies.power.PowerLedger`, and the reservation walks the
running jobs' ends and the cap schedule's changes in time order.

:func:`decide` also gives the head's reason as it reads had the pass computed
the reservation it did not need (no job behind the head fitted the nodes and
power now): the reason shows the reservation only when the pass computed it,
and the fast path may compute it when its filters, necessary conditions with
slack, pass a job the exact checks then refuse.
"""

from __future__ import annotations

import math

from reference import easy_plain
from wattsched.model.job import Job
from wattsched.model.plan import Plan, Reason, Start
from wattsched.model.snapshot import Snapshot
from wattsched.policies.easy import queue_order
from wattsched.policies.easy_pc import _HEAD_REASON
from wattsched.policies.power import PowerLedger


class Params:
    def __init__(self, check: str = "gaussian_99", order: str = "fcfs", lookahead: str | bool = "always"):
        if isinstance(lookahead, bool):
            lookahead = "always" if lookahead else "off"
        self.check, self.order, self.lookahead = check, order, lookahead


def cap_for(snapshot: Snapshot, params: Params, start_s: float, job: Job) -> float:
    now_cap = snapshot.cap.cap_at(start_s)
    if params.lookahead == "off" or (params.lookahead == "window" and now_cap == math.inf):
        return now_cap
    return snapshot.lowest_cap(job.walltime_s, start_s)


def shadow(snapshot: Snapshot, params: Params, head: Job, free: int, ledger: PowerLedger,
           started: list[tuple[float, int, int, Job]]):
    """Earliest time the head has nodes and power; extra nodes then; the ledger then, head included."""
    now = snapshot.now_s
    cap = snapshot.cap
    est_head = snapshot.estimate(head)
    need = head.nodes
    at = ledger.copy()
    dm, dx, dv = at.increment(est_head, need)
    ends = sorted([*((r.expected_end_s, len(r.nodes), jid, r.job) for jid, r in snapshot.running.items()),
                   *started], key=lambda x: x[:3])
    changes = []
    t = cap.next_change_after(now)
    while t != math.inf and len(changes) < 64:
        changes.append(t)
        t = cap.next_change_after(t)
    idle = at.idle_w
    base, mean, mx, var = at.base_w, at.mean_w, at.max_w, at.var_w2
    avail = free
    i = j = 0
    t = now
    while True:
        if avail >= need:
            limit = cap_for(snapshot, params, t, head)
            if at.method == "max":
                value = base + mx + dx
            elif at.method == "mean":
                value = base + mean + dm
            else:
                value = base + mean + dm + at.k * math.sqrt(max(0.0, var + dv))
            if limit == math.inf or value <= limit * (1 + 1e-9):
                at.base_w, at.mean_w, at.max_w, at.var_w2 = base, mean, mx, max(0.0, var)
                at.add(est_head, need)
                return t, avail - need, at
        next_end = ends[i][0] if i < len(ends) else math.inf
        next_change = changes[j] if j < len(changes) else math.inf
        t = min(next_end, next_change)
        if t == math.inf:
            return math.inf, 0, None
        t = max(t, now)
        while i < len(ends) and ends[i][0] <= t:
            _, n, _, job = ends[i]
            est = snapshot.estimate(job)
            base += idle * n
            mean -= est.mean_w * n
            mx -= est.max_w * n
            var -= (est.std_w * n) ** 2
            avail += n
            i += 1
        while j < len(changes) and changes[j] <= t:
            j += 1


def decide(snapshot: Snapshot, params: Params) -> tuple[Plan, str | None]:
    """The plan, and the head's reason had the pass computed the reservation it did not need (else None)."""
    cap = snapshot.cap
    now = snapshot.now_s
    if cap.cap_at(now) == math.inf and (params.lookahead == "window" or cap.is_uncapped
                                        or cap.next_change_after(now) == math.inf):
        return easy_plain.decide(snapshot, params.order), None
    actions: list[Start] = []
    plan = Plan(actions)
    free = snapshot.free_nodes
    if not snapshot.pending:
        return plan, None
    ledger = PowerLedger.from_snapshot(snapshot, params.check)
    started: list[tuple[float, int, int, Job]] = []
    end = len(free)
    jobs = list(queue_order(snapshot, params.order))
    head = None
    rest: list[Job] = []
    for i, job in enumerate(jobs):
        k = job.nodes
        est = snapshot.estimate(job)
        if k <= end and ledger.fits(est, k, cap_for(snapshot, params, now, job)):
            actions.append(Start(job.id, tuple(free[end - k : end])))
            ledger.add(est, k)
            started.append((now + job.walltime_s, k, job.id, job))
            end -= k
            continue
        head, rest = job, jobs[i + 1 :]
        break
    if head is None:
        if actions:
            plan.power_estimate_w = ledger.value()
        return plan, None
    head_free = end
    res = None  # (shadow, ledger at the shadow, cap at the shadow), computed when first needed
    extra = 0
    for job in rest:
        if end == 0:
            break
        k = job.nodes
        if k > end:
            continue
        est = snapshot.estimate(job)
        if not ledger.fits(est, k, cap_for(snapshot, params, now, job)):
            continue
        if res is None:
            sh, extra, at = shadow(snapshot, params, head, head_free, ledger.copy(), started)
            res = (sh, at, cap_for(snapshot, params, sh, head) if sh != math.inf else math.inf)
        sh, at, cap_s = res
        if now + job.walltime_s <= sh:
            pass
        elif k <= extra and at is not None and at.fits(est, k, cap_s):
            extra -= k
            at.add(est, k)
        else:
            continue
        actions.append(Start(job.id, tuple(free[end - k : end])))
        ledger.add(est, k)
        end -= k
    needed = res is not None
    if res is None:  # what the reservation would be: the fast path may have computed it
        sh = shadow(snapshot, params, head, head_free, ledger.copy(), started)[0]
    else:
        sh = res[0]
    plan.reasons[head.id] = Reason(_HEAD_REASON, head.nodes, head_free, params.check,
                                   f"t={sh:.0f}s" if needed else "not needed this pass")
    plan.default_reason = "does not fit now (nodes or predicted power) without delaying the head job"
    if actions:
        plan.power_estimate_w = ledger.value()
    computed = None if needed else str(Reason(_HEAD_REASON, head.nodes, head_free, params.check, f"t={sh:.0f}s"))
    return plan, computed


class PlainEasyPcPolicy:
    """:func:`decide` as a policy the engine runs (it reads none of the snapshot's indexes)."""

    name = "easy-pc-plain"
    wants_end_table = False

    def __init__(self, **params):
        self.params = Params(**params)

    def init_state(self):
        return None

    def decide(self, snapshot: Snapshot, state=None) -> Plan:
        return decide(snapshot, self.params)[0]
