"""Greedy knapsack under a power cap (Carastan-Santos et al. 2024, §5.1, Algorithm 2).

Scheduling in a capped window is read as a 0/1 knapsack: the items are the
pending jobs, the capacity is the power cap, an item's weight ``w_j`` is the
job's predicted power and its profit ``v_j`` a quality-of-service value. The
knapsack is solved greedily: sort the queue by ``v_j / w_j``, descending, take
each job in turn and start it if there are enough nodes and predicted power
(the shared verify/update of :class:`~wattsched.policies.power.PowerLedger`),
and **stop at the first job that does not fit**, as the paper does. Stopping,
rather than skipping, keeps a job that has climbed to the top of the order
from being overtaken indefinitely by smaller ones. One exception: a job that
could not start under the cap even on an idle machine (too many nodes, or a
predicted increment above the cap's room) is skipped instead, with its own
reason; stopping at it would hold the whole queue for as long as the cap
lasts, forever under a constant cap. It runs once the cap is lifted.

Profits
-------
``wait``
    ``v_j = wait_j = now - submit_j``. A job submitted at ``now`` has profit 0,
    hence ratio 0 whatever its weight: it comes after every job that has
    waited at all (fresh jobs among themselves in submission order). This is
    the paper's formula, kept as is.
``stretch``
    ``v_j = (wait_j + p~_j) / p~_j`` (Eq. 9), ``p~_j`` the requested time
    (floored at :data:`MIN_REQUESTED_S` so that a zero request is defined).
    Short jobs rise faster, but every job's profit grows with its wait (an
    aging mechanism), so no job starves.

Weight
------
The job's predicted power *increment*: starting it on ``n`` idle nodes adds
``n × (predicted mean − idle_w)`` (``max`` instead of ``mean`` for the ``max``
check; the Gaussian checks use the mean, their standard-deviation term not
being additive). It is floored at :data:`WEIGHT_FLOOR_W` so the ratio is
defined for a job predicted at or below idle power.

Outside the capping window (no finite cap in force now) the policy is EASY
FCFS, as in Algorithm 2 line 3: it delegates to EASY+PC (Algorithm 1) with the
same check and lookahead, which is plain EASY when no cap is in force now or
later, and keeps jobs out of a coming window they would overshoot otherwise.

Lookahead: as in ``easy-pc``. Inside the window (``always``, the default, or
``window``) a job is checked against the lowest cap in force during its
requested time; outside it, ``always`` keeps out of a coming window the jobs
that would overshoot it and ``window`` holds no job (the paper's EASY FCFS).
"""

from __future__ import annotations

import dataclasses
import heapq
import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from wattsched.model.job import Job, PowerEstimate
from wattsched.model.plan import Plan, Reason, Start
from wattsched.model.snapshot import Snapshot
from wattsched.model.state import PolicyState
from wattsched.policies.base import BasePolicy, PolicyTags
from wattsched.policies.easy_pc import LOOKAHEAD_HELP, Check, EasyPcPolicy, EasyPcState, Lookahead, lookahead_mode
from wattsched.policies.power import PowerLedger

WEIGHT_FLOOR_W = 1e-3
"""Smallest weight (W): a job predicted at or below idle power still has a defined profit/weight ratio."""

MIN_REQUESTED_S = 1.0
"""Smallest requested time (s) used in the stretch profit, so that a zero request does not divide by zero."""


class KnapsackParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    profit: Literal["wait", "stretch"] = Field(
        "wait", description="Profit of a job: 'wait' (waiting time) or 'stretch' ((wait + requested) / requested)."
    )
    check: Check = Field("gaussian_99", description="Power verification: mean, max or gaussian_68/95/99.")
    lookahead: Lookahead = Field("always", description=LOOKAHEAD_HELP)

    _lookahead = field_validator("lookahead", mode="before")(lookahead_mode)


def profit(job: Job, now_s: float, kind: str) -> float:
    """Profit ``v_j`` of a pending job at ``now_s``: its wait, or its stretch (Eq. 9).

    >>> from wattsched.model.job import Job
    >>> job = Job(1, submit_s=100.0, walltime_s=50.0, nodes=1)
    >>> profit(job, 100.0, "wait"), profit(job, 200.0, "wait")
    (0.0, 100.0)
    >>> profit(job, 100.0, "stretch"), profit(job, 200.0, "stretch")
    (1.0, 3.0)
    """
    wait = max(0.0, now_s - job.submit_s)
    if kind == "stretch":
        requested = max(job.walltime_s, MIN_REQUESTED_S)
        return (wait + requested) / requested
    return wait


def weight(ledger: PowerLedger, est: PowerEstimate, nodes: int) -> float:
    """Weight ``w_j``: the predicted power increment of a job on ``nodes`` nodes under the ledger's check, floored.

    >>> from wattsched.model.job import PowerEstimate
    >>> est = PowerEstimate(250.0, 300.0, 10.0)
    >>> weight(PowerLedger("gaussian_99", base_w=400.0, idle_w=100.0), est, 2)  # 2 x (250 - 100)
    300.0
    >>> weight(PowerLedger("max", base_w=400.0, idle_w=100.0), est, 2)  # 2 x (300 - 100)
    400.0
    >>> weight(PowerLedger("mean", base_w=400.0, idle_w=100.0), PowerEstimate(90.0, 95.0), 1)  # below idle
    0.001
    """
    mean_w, max_w, _ = ledger.increment(est, nodes)
    return max(max_w if ledger.method == "max" else mean_w, WEIGHT_FLOOR_W)


class KnapsackPolicy(BasePolicy):
    """Greedy knapsack by profit/weight inside the capping window, EASY outside. Registered as ``knapsack``.

    Parameters
    ----------
    profit
        ``wait`` (Knapsack Wait.) or ``stretch`` (Knapsack Stretch, Eq. 9).
    check
        Power verification of :class:`~wattsched.policies.power.PowerLedger`.
    lookahead
        ``always`` (default), ``window`` or ``off``: see :class:`~wattsched.policies.easy_pc.EasyPcParams`.
    """

    name = "knapsack"

    def tags(self) -> PolicyTags:
        return dataclasses.replace(super().tags(), wants_end_table=True, constraints=frozenset({"cap"}))
    State = EasyPcState  # outside a capped window it is easy-pc, with easy-pc's memo
    Params = KnapsackParams

    def __init__(self, params=None, **kwargs):
        super().__init__(params, **kwargs)
        p = self.params
        self._outside = EasyPcPolicy(check=p.check, order="fcfs", lookahead=p.lookahead)

    def decide(self, snapshot: Snapshot, state: PolicyState | None = None) -> Plan:
        if snapshot.cap_w == math.inf:
            return self._outside.decide(snapshot, state)
        return self._decide_capped(snapshot)

    def _cap_for(self, snapshot: Snapshot, job: Job) -> float:
        # called inside the window only (a cap in force now): window and always agree there
        if self.params.lookahead == "off":
            return snapshot.cap_w
        return snapshot.lowest_cap(job.walltime_s)

    def order(self, snapshot: Snapshot) -> list[Job]:
        """Pending jobs by profit/weight, descending; ties by submission time, then id."""
        ledger = PowerLedger.from_snapshot(snapshot, self.params.check)
        return [snapshot.pending[jid] for _, _, jid in sorted(self._keys(snapshot, ledger))]

    def _keys(self, snapshot: Snapshot, ledger: PowerLedger) -> list[tuple[float, float, int]]:
        now = snapshot.now_s
        kind = self.params.profit
        estimate = snapshot.estimate
        return [(-profit(j, now, kind) / weight(ledger, estimate(j), j.nodes), j.submit_s, j.id)
                for j in snapshot.pending.values()]

    def _decide_capped(self, snapshot: Snapshot) -> Plan:
        actions: list[Start] = []
        plan = Plan(actions)
        pending = snapshot.pending
        if not pending:
            return plan
        check = self.params.check
        ledger = PowerLedger.from_snapshot(snapshot, check)
        free = snapshot.free_nodes
        end = len(free)
        # Usually few jobs start per call: a heap costs O(n + k log n), a full sort O(n log n).
        heap = self._keys(snapshot, ledger)
        heapq.heapify(heap)
        empty = None
        while heap:
            job = pending[heapq.heappop(heap)[2]]
            k = job.nodes
            est = snapshot.estimate(job)
            cap_w = self._cap_for(snapshot, job)
            if k <= end and ledger.fits(est, k, cap_w):
                actions.append(Start(job.id, tuple(free[end - k : end])))
                ledger.add(est, k)
                end -= k
                continue
            if empty is None:
                empty = self._empty_machine(snapshot, ledger)
            if k > empty[0] or not empty[1].fits(est, k, cap_w):
                # Stopping here would hold the whole queue for as long as this cap lasts (forever under a
                # constant cap) for a job that cannot start even once every running job has ended.
                plan.reasons[job.id] = Reason(_NEVER_REASON, k, empty[0], check, cap_w)
                continue
            plan.reasons[job.id] = Reason(_FIRST_REASON, k, end, check, cap_w)
            plan.default_reason = _DEFAULT_REASON
            break
        if actions:
            plan.power_estimate_w = ledger.value()
        return plan

    @staticmethod
    def _empty_machine(snapshot: Snapshot, ledger: PowerLedger) -> tuple[int, PowerLedger]:
        """Usable nodes, and the ledger once every running job has ended (their nodes back to idle)."""
        busy = sum(len(r.nodes) for r in snapshot.running.values())
        empty = PowerLedger(ledger.method, snapshot.other_power_w() + ledger.idle_w * busy, ledger.idle_w)
        return snapshot.usable_node_count(), empty


_FIRST_REASON = ("highest profit/weight job that does not fit now: needs {} nodes ({} free) and predicted power "
                 "under the cap ({} check, cap {:.0f} W); the greedy knapsack stops here")
_NEVER_REASON = ("cannot start under the cap in force even on an idle machine: needs {} nodes ({} usable) and "
                 "predicted power under the cap ({} check, cap {:.0f} W); skipped until the cap changes")
_DEFAULT_REASON = "behind a higher profit/weight job that does not fit now (the greedy knapsack stops at it)"
