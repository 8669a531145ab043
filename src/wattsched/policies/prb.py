"""LS: priority-rule list scheduling under a power cap (Borghesi et al. 2018, §4.2).

Jobs are ordered by the expected waiting time of their queue (shorter first),
ties broken by their *demand*, requested resources times requested time
(nodes × walltime here, jobs taking whole nodes), then by submission. At each
decision the policy walks that order and starts every job for which there are
enough free nodes and enough predicted power under the cap (the shared verify
and update of :class:`~wattsched.policies.power.PowerLedger`); a job that does
not fit is postponed and the walk goes on, as the paper's PRB does at every
time event. There is no reservation: this is a list scheduler, not backfilling.

Nodes are taken by the paper's two criteria: the most energy-efficient first
(lowest busy power, which on a heterogeneous platform is the lowest-frequency
or GPU-less group), then, among equals, the most loaded; with whole-node jobs
every free node has the same (zero) load, so ties go to the lowest index.
A job of units (:mod:`wattsched.model.units`) is mapped unit by unit, first
fit over the free and partly used nodes in that order, so units pack onto
loaded nodes; its demand is its units' cores (over a node's cores) times its
requested time.

:func:`list_schedule` runs the same rules forward over the running jobs'
expected ends to give every pending job a planned start; ``dec``
(:mod:`wattsched.policies.cp`) starts its search from that schedule.

``cap_margin`` (§5.3) plans against ``cap × (1 − cap_margin)``, a guard
against under-predicted job power.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field

from wattsched.model.job import Job
from wattsched.model.plan import Plan, Reason, Start
from wattsched.model.snapshot import Snapshot
from wattsched.model.state import PolicyState
from wattsched.model.units import Room, UnitsText, fits_empty, job_cores, loaded_first, max_cores, place, take
from wattsched.policies.base import BasePolicy, PolicyTags
from wattsched.policies.easy_pc import Check
from wattsched.policies.power import PowerLedger


class LsParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    queue_ewt_s: dict[str, float] = Field(
        {},
        description="Expected waiting time (s) of each queue (Slurm partition); lower means higher priority.")
    default_ewt_s: float = Field(3600.0, gt=0, description="Expected waiting time (s) of a queue not listed.")
    check: Check = Field("mean", description="Power verification: mean, max or gaussian_68/95/99.")
    cap_margin: float = Field(0.0, ge=0, lt=1,
                              description="Plan against cap × (1 − cap_margin) (§5.3: 0.01 covers under-prediction).")
    lookahead: bool = Field(True, description="Check each job against the lowest cap during its requested time.")


def expected_wait_s(job: Job, params: LsParams) -> float:
    """The expected waiting time of the job's queue (its partition).

    >>> expected_wait_s(Job(1, 0.0, 60.0, 1, partition="debug"), LsParams(queue_ewt_s={"debug": 600.0}))
    600.0
    >>> expected_wait_s(Job(1, 0.0, 60.0, 1), LsParams())
    3600.0
    """
    ewt = params.queue_ewt_s.get(job.partition)
    return params.default_ewt_s if ewt is None else ewt


def priority_key(job: Job, params: LsParams, cores_per_node: int = 1) -> tuple[float, float, float, int]:
    """LS order: expected wait of the queue, then demand (nodes × requested time), then submission.

    A job of units counts its units' cores in nodes of ``cores_per_node`` cores.
    """
    if job.units:
        demand = job_cores(job) / max(1, cores_per_node)
    else:
        demand = job.nodes
    return (expected_wait_s(job, params), demand * job.walltime_s, job.submit_s, job.id)


def priority_order(snapshot: Snapshot, params: LsParams) -> list[Job]:
    """Pending jobs in LS priority order."""
    cores = max_cores(snapshot.platform)
    return sorted(snapshot.pending.values(), key=lambda j: priority_key(j, params, cores))


def node_order(snapshot: Snapshot, nodes: Sequence[int]) -> list[int]:
    """Free nodes, the most energy-efficient (lowest busy power) first, then by index."""
    plat = snapshot.platform.nodes
    return sorted(nodes, key=lambda i: (plat[i].power.busy_w, i))


def planning_cap_w(snapshot: Snapshot, params: LsParams, job: Job, start_s: float | None = None) -> float:
    """The cap a job is planned against: lowest over its requested time (lookahead), less the margin."""
    if params.lookahead:
        cap = snapshot.lowest_cap(job.walltime_s, start_s)
    else:
        cap = snapshot.cap.cap_at(snapshot.now_s if start_s is None else start_s)
    return cap * (1.0 - params.cap_margin) if cap != math.inf else cap


def fits_alone(snapshot: Snapshot, params: LsParams, job: Job, usable: int) -> bool:
    """Whether the job could ever start under the cap in force now: on an empty machine, nodes and power."""
    if job.units:
        if not fits_empty(snapshot.platform, job):
            return False
    elif job.nodes > usable:
        return False
    cap = planning_cap_w(snapshot, params, job)
    if cap == math.inf:
        return True
    idle = snapshot.platform.min_idle_w
    ledger = PowerLedger(params.check, snapshot.platform.idle_power_w, idle)
    return ledger.fits(snapshot.estimate(job), job.nodes, cap)


def list_schedule(snapshot: Snapshot, params: LsParams, jobs: Sequence[Job],
                  fixed: Mapping[int, float] | None = None) -> dict[int, float]:
    """Planned start (s from now) of each of ``jobs``, by the LS rules run forward in time.

    Time advances over the running jobs' expected ends and the planned jobs'
    ends (their requested times); at each event every job not yet placed is
    tried in ``jobs`` order. Jobs in ``fixed`` are placed at the given offset
    before the others (``dec`` uses it to fill the gaps around its own
    schedule). A job that never fits (more nodes than are usable, or more
    power than the cap leaves on an empty machine) gets no entry. The cap used
    is the one in force now (a planning horizon, not a promise).
    """
    now = snapshot.now_s
    ledger = PowerLedger.from_snapshot(snapshot, params.check)
    usable = snapshot.usable_node_count()
    free = len(snapshot.free_nodes)
    events: list[tuple[float, int, int, object]] = []  # (time from now, nodes, tiebreak, estimate)
    for seq, (end, n, jid) in enumerate(snapshot.running_by_end()):
        heapq.heappush(events, (max(0.0, end - now), n, -1 - seq, snapshot.estimate(snapshot.running[jid].job)))
    cap = {j.id: planning_cap_w(snapshot, params, j) for j in jobs}
    todo = [j for j in jobs if fits_alone(snapshot, params, j, usable)]
    out: dict[int, float] = {}
    t = 0.0
    fixed = dict(fixed or {})
    pending_fixed = sorted(((s, j) for j in todo if (s := fixed.get(j.id)) is not None), key=lambda x: x[0])
    todo = [j for j in todo if j.id not in fixed]
    fi = 0
    while True:
        while fi < len(pending_fixed) and pending_fixed[fi][0] <= t:
            job = pending_fixed[fi][1]
            est = snapshot.estimate(job)
            out[job.id] = t
            ledger.add(est, job.nodes)
            free -= job.nodes
            heapq.heappush(events, (t + job.walltime_s, job.nodes, job.id, est))
            fi += 1
        rest = []
        for job in todo:
            est = snapshot.estimate(job)
            if job.nodes <= free and ledger.fits(est, job.nodes, cap[job.id]):
                out[job.id] = t
                ledger.add(est, job.nodes)
                free -= job.nodes
                heapq.heappush(events, (t + job.walltime_s, job.nodes, job.id, est))
            else:
                rest.append(job)
        todo = rest
        if not todo and fi == len(pending_fixed):
            return out
        nxt = events[0][0] if events else math.inf
        if fi < len(pending_fixed):
            nxt = min(nxt, pending_fixed[fi][0])
        if nxt == math.inf:
            return out
        t = max(t, nxt)
        while events and events[0][0] <= t:
            _, n, _, est = heapq.heappop(events)
            ledger.remove(est, n)
            free += n


class LsPolicy(BasePolicy):
    """Priority-rule list scheduling with power as a resource. Registered as ``ls``."""

    name = "ls"
    Params = LsParams

    def tags(self) -> PolicyTags:
        # jobs of units: mapped unit by unit onto shared nodes (see start_in_order)
        return dataclasses.replace(super().tags(), maps_units=True)

    def decide(self, snapshot: Snapshot, state: PolicyState | None = None) -> Plan:
        return start_in_order(snapshot, self.params, priority_order(snapshot, self.params),
                              "postponed: not enough free nodes or predicted power under the cap now")


def start_in_order(snapshot: Snapshot, params: LsParams, order: Sequence[Job], reason: str,
                   only: set[int] | None = None) -> Plan:
    """Start, in ``order``, every job that fits now (nodes and predicted power); skip the others.

    With ``only``, jobs outside it are skipped (``dec`` starts only the jobs its schedule puts now).
    """
    ledger = PowerLedger.from_snapshot(snapshot, params.check)
    free = node_order(snapshot, snapshot.free_nodes)
    usable = snapshot.usable_node_count()
    plan = Plan([], default_reason=reason)
    shared = dict(snapshot.node_free)  # partly used nodes' free capacity, as units are placed
    candidates: list[int] | None = None  # nodes for units, in ls order
    room: Room | None = None  # what the candidates have free
    for job in order:
        if only is not None and job.id not in only:
            continue
        k = job.nodes
        est = snapshot.estimate(job)
        if job.units:
            k = len(job.units)
            if not ledger.fits(est, k, planning_cap_w(snapshot, params, job)):
                if not fits_alone(snapshot, params, job, usable):
                    plan.reasons[job.id] = Reason("its units fit no node, or its predicted power does not fit "
                                                  "under the cap even on an idle machine; waits for the cap to rise")
                continue
            if candidates is None:  # the order changes only when a job is placed
                candidates = loaded_first(snapshot.platform, [*shared, *free], shared)
                room = Room(snapshot.platform, candidates, shared)
            placed = (place(job.units, candidates, snapshot.platform, shared, job.distinct_nodes)
                      if room.may_fit(job.units) else None)
            if placed is None:
                if not fits_alone(snapshot, params, job, usable):
                    plan.reasons[job.id] = Reason("its units ({}) do not fit on the usable nodes even when "
                                                  "they are empty", UnitsText(job.units))
                continue
            for n in set(placed) - shared.keys():
                free.remove(n)
            take(shared, snapshot.platform, job.units, placed)
            candidates = None
            plan.actions.append(Start(job.id, placed))
            ledger.add(est, k)
            continue
        if k <= len(free) and ledger.fits(est, k, planning_cap_w(snapshot, params, job)):
            plan.actions.append(Start(job.id, tuple(free[:k])))
            del free[:k]
            candidates = None  # those nodes are no longer free for units
            ledger.add(est, k)
        elif not fits_alone(snapshot, params, job, usable):
            plan.reasons[job.id] = (f"needs {k} nodes and its predicted power under the cap even on an idle "
                                    f"machine ({usable} usable nodes); waits for the cap to rise")
    if plan.actions:
        plan.power_estimate_w = ledger.value()
    return plan
