"""DEC: the hybrid CP scheduler of Borghesi et al. 2018 (§4.3), on OR-Tools CP-SAT.

Two stages, repeated:

1. **Schedule** on a relaxed model. Each pending job is an interval of its
   requested length starting at an integer second from now. Resources are
   pooled (Eq. 1), time counted in steps of ``time_step_s``: one cumulative on the nodes (the jobs take whole nodes, so
   the pool is exact for them) and one on power, whose capacity is the cap
   (less ``cap_margin``) minus the power the machine draws with every node
   idle, each job asking its predicted increment over idle (the running jobs
   are fixed intervals until their expected ends). The objective is the
   weighted queue time (Eq. 2), ``Σ (max ewt / ewt_i)(s_i − q_i)``, with the
   expected waiting times of ``ls``'s queues. The search starts from the
   ``ls`` schedule (a hint, so a first solution is the heuristic's) with a
   time limit of ``time_limit_s`` doubled while no solution is found, up to
   ``max_time_limit_s``.
2. **Map** the jobs the schedule starts now, in their CP order, with the
   ``ls`` node rules and the exact power check (lookahead included). A job
   the mapping cannot place is fed back as ``start ≥ 1`` and the model solved
   again, at most ``map_rounds`` times; what is left is started by ``ls``'s
   walk over the jobs planned now.

Jobs of units (:mod:`wattsched.model.units`): when the instance has any, the
model adds Eq. 1's cumulatives on pooled cores, GPUs, MICs and memory (the
pooled nodes' sums); a job of units asks its units' resources and no whole
node, a whole-node job its nodes and the pool's average node per node. The
mapping places units on shared nodes (``ls``'s unit mapping).

Rolling horizon: only the first ``horizon_jobs`` jobs in ``ls`` order enter
the model (thousands of pending jobs would not fit in one cycle); the rest are
started now, in ``ls`` order, where they fit for their whole requested time
around the CP schedule (nodes and power of the pooled model, step by step).

Determinism: one search worker and a fixed ``seed``; the time limit is in
CP-SAT's *deterministic* time (about seconds of work) unless ``wall_clock``
is set, in which case a run that hits the limit may differ between runs. The
plan's head reason says when the solver hit its limit.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import logging
import math

from pydantic import ConfigDict, Field

from wattsched.errors import PolicyError
from wattsched.model.job import Job
from wattsched.model.plan import Plan
from wattsched.model.snapshot import Snapshot
from wattsched.model.state import PolicyState
from wattsched.model.units import capacity, totals
from wattsched.policies.base import BasePolicy, PolicyTags, ResponseParams
from wattsched.policies.power import PowerLedger
from wattsched.policies.prb import (
    LsParams,
    expected_wait_s,
    fits_alone,
    list_schedule,
    planning_cap_w,
    priority_order,
    start_in_order,
)

try:  # found here, imported at the first solve (with pandas, a quarter of a second): `wattsched policies` lists dec
    _FOUND = importlib.util.find_spec("ortools.sat.python.cp_model") is not None
except ImportError:
    _FOUND = False
if not _FOUND:  # pragma: no cover - the registry reports it as "dec needs ortools"
    raise ImportError("the 'dec' policy needs OR-Tools: pip install 'wattsched[cp]'")

log = logging.getLogger(__name__)

MAX_HORIZON_STEPS = 10_000_000
"""Most time steps of the schedule a decision keeps in memory (two 80 MB counters): a sanity bound."""

WEIGHT_SCALE = 100
"""Eq. 2's weights ``max ewt / ewt_i`` are real; the model takes them × this, rounded."""


class DecParams(LsParams):
    model_config = ConfigDict(extra="forbid", frozen=True)

    time_limit_s: float = Field(0.1, gt=0, description=(
        "First solver time limit (s; the paper's is 1 s); doubled while no solution is found."))
    max_time_limit_s: float = Field(10.0, gt=0, description="Largest solver time limit (s).")
    wall_clock: bool = Field(False, description="Limit wall-clock time instead of CP-SAT's deterministic time.")
    time_step_s: float = Field(60.0, ge=1.0, description="Time unit of the CP model (s): requested times round up "
                               "to it; at least 1 s (the model keeps two counters per step of its horizon).")
    horizon_jobs: int = Field(200, ge=1, description="Rolling horizon K: jobs (in ls order) in the CP model.")
    map_rounds: int = Field(3, ge=1, description="Schedule-and-map rounds (infeasible mappings fed back).")
    workers: int = Field(1, ge=1, description="CP-SAT search workers (1: deterministic).")
    seed: int = Field(0, description="CP-SAT random seed.")


def _steps(x: float, step_s: float) -> int:
    """Whole time steps covering ``x`` seconds, at least one.

    >>> _steps(61.0, 60.0), _steps(60.0, 60.0), _steps(0.0, 60.0)
    (2, 1, 1)
    """
    return max(1, math.ceil(x / step_s - 1e-9))


def _node_pool(snapshot: Snapshot) -> int:
    """Nodes the model pools: free now, or running a job (free at its end); off or drained ones are left out."""
    if not snapshot.node_free:
        return len(snapshot.free_nodes) + sum(len(r.nodes) for r in snapshot.running.values())
    return len(snapshot.free_nodes) + len({n for r in snapshot.running.values() for n in r.nodes})


def _pooled_nodes(snapshot: Snapshot) -> list[int]:
    """The nodes of :func:`_node_pool`."""
    return sorted({*snapshot.free_nodes, *(n for r in snapshot.running.values() for n in r.nodes)})


def _unit_demand(job: Job, per_node: tuple[int, int, int, int]) -> tuple[int, int, int, int, int]:
    """``(nodes, cores, gpus, mics, mem_mb)`` a job asks of the pooled model (Eq. 1).

    A job of units asks its units' resources and no whole node; a whole-node
    job its nodes and, of each resource, as many times a pooled node's
    average (``per_node``) as it has nodes.
    """
    if job.units:
        return (0, *totals(job.units))
    k = job.nodes
    return (k, *(k * x for x in per_node))


class DecPolicy(BasePolicy):
    """Hybrid CP scheduling and heuristic mapping under a power cap. Registered as ``dec``."""

    name = "dec"
    Params = DecParams

    def tags(self) -> PolicyTags:
        # jobs of units: mapped unit by unit onto shared nodes (see start_in_order)
        return dataclasses.replace(super().tags(), maps_units=True, constraints=frozenset({"cap"}))

    def decide(self, snapshot: Snapshot, state: PolicyState | None = None) -> Plan:
        p = self.params
        order = priority_order(snapshot, p)
        if not order:
            return Plan([])
        usable = snapshot.usable_node_count()
        pool = _node_pool(snapshot)
        model_jobs = [j for j in order[: p.horizon_jobs]
                      if (j.units or j.nodes <= pool) and fits_alone(snapshot, p, j, usable)]
        starts, note = self.solve(snapshot, model_jobs)
        later: set[int] = set()
        now_ids = {jid for jid, s in starts.items() if s == 0}
        for _ in range(p.map_rounds):
            plan = start_in_order(snapshot, p, [j for j in model_jobs if j.id in now_ids], "", only=now_ids)
            placed = {a.job_id for a in plan.actions}
            missed = now_ids - placed
            if not missed:
                break
            later |= missed
            starts, note = self.solve(snapshot, model_jobs, later)
            now_ids = {jid for jid, s in starts.items() if s == 0}
        # the rest of the queue, in ls order: started now where it fits around the CP schedule
        rest = [j for j in order if j.id not in starts]
        if rest:
            now_ids |= self._fit_now_around(snapshot, model_jobs, starts, rest)
        in_order = [j for j in order if j.id in now_ids]
        plan = start_in_order(snapshot, p, in_order, "scheduled later by the CP model (weighted queue time)",
                              only=now_ids)
        for j in rest:
            if j.id not in now_ids and not ((j.units or j.nodes <= pool) and fits_alone(snapshot, p, j, usable)):
                plan.reasons[j.id] = (f"needs {j.nodes} nodes and its predicted power under the cap even on an idle "
                                      f"machine ({pool} nodes on or busy); waits for the cap to rise")
        started = {a.job_id for a in plan.actions}
        head = next((j for j in order if j.id not in started and j.id not in plan.reasons), None)
        if head is not None and note:
            plan.reasons[head.id] = f"scheduled later by the CP model; {note}"
        return plan

    def _pooled(self, snapshot: Snapshot, jobs: list[Job]):
        """The pooled model's data: node pool, power room (None: uncapped), running jobs' steps and demands."""
        p = self.params
        now = snapshot.now_s
        ledger = PowerLedger.from_snapshot(snapshot, "mean")
        idle = ledger.idle_w
        running = []
        for end, n, jid in snapshot.running_by_end():
            est = snapshot.estimate(snapshot.running[jid].job)
            # a job past its expected end still holds its nodes now: it ends within the first step
            running.append((_steps(max(0.0, end - now), p.time_step_s), n, jid,
                            max(0, math.ceil((est.mean_w - idle) * n))))
        run_nodes = sum(r[1] for r in running)
        caps = [planning_cap_w(snapshot, p, j) for j in jobs]
        cap = min(caps) if caps else snapshot.cap_w
        room = None
        if cap != math.inf:
            # all nodes idle (the running ones included, their increments being their own intervals)
            room = max(math.floor(cap - (ledger.base_w + idle * run_nodes)), sum(r[3] for r in running))
        return _node_pool(snapshot), room, running, idle

    @staticmethod
    def _add_unit_resources(snapshot: Snapshot, m, jobs: list[Job], intervals: list, fixed_iv: list, running: list,
                            node_req: list[int]) -> None:
        """Eq. 1 over pooled cores, GPUs, MICs and memory, for instances with jobs of units.

        Capacities are the pooled nodes' sums; a job of units asks its units'
        resources and no whole node (``node_req`` is rewritten to 0 for it:
        its units may share partly used nodes); a whole-node job asks its
        nodes and, per node, the pool's average of each resource.
        """
        nodes = snapshot.platform.nodes
        pooled = _pooled_nodes(snapshot)
        caps = [0, 0, 0, 0]
        for n in pooled:
            for i, v in enumerate(capacity(nodes[n])):
                caps[i] += v
        count = max(1, len(pooled))
        per_node = tuple(c // count for c in caps)
        demands = [_unit_demand(j, per_node) for j in jobs]
        for i, d in enumerate(demands):
            node_req[i] = d[0]
        fixed = [_unit_demand(snapshot.running[r[2]].job, per_node) for r in running]
        for r_index in range(4):
            if caps[r_index] <= 0:
                continue  # a resource the pool does not have (memory unset): not constrained
            held = [d[r_index + 1] for d in fixed]
            # whole-node jobs count the pool's average node: running ones may hold more than the real sum
            m.add_cumulative(intervals + fixed_iv, [d[r_index + 1] for d in demands] + held,
                             max(caps[r_index], sum(held)))

    def _demand_w(self, snapshot: Snapshot, job: Job, idle: float) -> int:
        return max(0, math.ceil((snapshot.estimate(job).mean_w - idle) * job.nodes))

    def _fit_now_around(self, snapshot: Snapshot, model_jobs: list[Job], starts: dict[int, int],
                        rest: list[Job]) -> set[int]:
        """Jobs of ``rest`` that can start now without breaking the CP schedule at any step, in order."""
        import numpy as np

        step = self.params.time_step_s
        pool, room, running, idle = self._pooled(snapshot, rest)
        spans = [(0, r[0], r[1], r[3]) for r in running]
        spans += [(starts[j.id], starts[j.id] + _steps(j.walltime_s, step), j.nodes, self._demand_w(snapshot, j, idle))
                  for j in model_jobs if j.id in starts]
        longest = max((_steps(j.walltime_s, step) for j in rest), default=1)
        horizon = max([longest] + [b for _, b, _, _ in spans]) + 1
        if horizon > MAX_HORIZON_STEPS:  # bounded before it is allocated (two int64 counters per step)
            raise PolicyError(f"params.time_step_s: {step:g} s gives a schedule of {horizon:,} steps (the longest "
                              f"requested time is {longest:,} steps), more than the limit of {MAX_HORIZON_STEPS:,}; "
                              "use a coarser time_step_s (default 60) or fewer horizon_jobs")
        nodes_used = np.zeros(horizon, dtype=np.int64)
        power_used = np.zeros(horizon, dtype=np.int64)
        for a, b, n, w in spans:
            nodes_used[a:b] += n
            power_used[a:b] += w
        out = set()
        for j in rest:
            d = _steps(j.walltime_s, step)
            w = self._demand_w(snapshot, j, idle)
            if nodes_used[:d].max() + j.nodes > pool:
                continue
            if room is not None and power_used[:d].max() + w > room:
                continue
            nodes_used[:d] += j.nodes
            power_used[:d] += w
            out.add(j.id)
        return out

    def solve(self, snapshot: Snapshot, jobs: list[Job], later: set[int] = frozenset()) -> tuple[dict[int, int], str]:
        """Start offsets (in ``time_step_s`` steps from now) of ``jobs`` by the relaxed CP model, and a search note."""
        p = self.params
        if not jobs:
            return {}, ""
        warm = list_schedule(snapshot, p, jobs)
        if all(warm.get(j.id) == 0.0 for j in jobs if j.id not in later) and not later:
            return {j.id: 0 for j in jobs}, ""  # ls starts every job now: no weighted wait is lower
        from ortools.sat.python import cp_model

        pool, room, running, idle = self._pooled(snapshot, jobs)
        step = p.time_step_s
        m = cp_model.CpModel()
        durations = {j.id: _steps(j.walltime_s, step) for j in jobs}
        horizon = max((r[0] for r in running), default=0) + sum(durations.values())
        starts, intervals, node_req, power_req = {}, [], [], []
        for j in jobs:
            lo = 1 if j.id in later else 0
            s = m.new_int_var(lo, horizon, f"s{j.id}")
            starts[j.id] = s
            intervals.append(m.new_fixed_size_interval_var(s, durations[j.id], f"i{j.id}"))
            node_req.append(j.nodes)
            power_req.append(self._demand_w(snapshot, j, idle))
            if j.id in warm:
                m.add_hint(s, max(lo, math.ceil(warm[j.id] / step - 1e-9)))
        fixed_iv = [m.new_fixed_size_interval_var(0, r[0], f"r{r[2]}") for r in running]
        fixed_nodes = [r[1] for r in running]
        fixed_power = [r[3] for r in running]
        if snapshot.node_free or any(j.units for j in jobs) or any(r.job.units for r in snapshot.running.values()):
            self._add_unit_resources(snapshot, m, jobs, intervals, fixed_iv, running, node_req)
            fixed_nodes = [0 if snapshot.running[r[2]].job.units else r[1] for r in running]
        m.add_cumulative(intervals + fixed_iv, node_req + fixed_nodes, pool)
        if room is not None:
            m.add_cumulative(intervals + fixed_iv, power_req + fixed_power, room)
        ewt = {j.id: expected_wait_s(j, p) for j in jobs}
        top = max(ewt.values())
        m.minimize(sum(round(WEIGHT_SCALE * top / ewt[j.id]) * starts[j.id] for j in jobs))
        solver = cp_model.CpSolver()
        solver.parameters.num_search_workers = p.workers
        solver.parameters.random_seed = p.seed
        limit = p.time_limit_s
        while True:
            if p.wall_clock:
                solver.parameters.max_time_in_seconds = limit
            else:
                solver.parameters.max_deterministic_time = limit
            status = solver.solve(m)
            if status in (cp_model.OPTIMAL, cp_model.FEASIBLE) or limit >= p.max_time_limit_s:
                break
            limit = min(2 * limit, p.max_time_limit_s)
        if status == cp_model.OPTIMAL:
            return {jid: solver.value(s) for jid, s in starts.items()}, ""
        if status == cp_model.FEASIBLE:
            note = f"solver hit its {limit:g} s limit on {len(jobs)} jobs (best schedule found kept)"
            log.info("dec: %s", note)
            return {jid: solver.value(s) for jid, s in starts.items()}, note
        note = f"solver found no schedule within {limit:g} s on {len(jobs)} jobs; ls schedule used"
        log.warning("dec: %s", note)
        fallback = {}
        for jid in starts:
            at = warm.get(jid)
            if at is None:  # ls never placed it: keep it out of this cycle
                fallback[jid] = horizon
            else:
                fallback[jid] = max(1 if jid in later else 0, math.ceil(at / step - 1e-9))
        return fallback, note


class DecRaplParams(DecParams, ResponseParams):
    arrival_threshold_s: float = Field(
        120.0, gt=0, description="dec while jobs arrive more often than one per this many seconds, dynshare otherwise.")
    arrival_window_s: float = Field(1800.0, gt=0, description="Window (s) over which the arrival rate is measured.")
    headroom_w: float = Field(10.0, ge=0, description="dynshare: a node below its cap keeps its draw plus this (W).")


class DecRaplState(PolicyState):
    """The submit time of every job seen arriving in the last ``arrival_window_s`` (persisted live)."""

    arrivals: dict[int, float] = Field(default_factory=dict)


def arrivals_in_window(snapshot: Snapshot, state: DecRaplState | None, window_s: float) -> int:
    """Jobs submitted in the last ``window_s``: those ``state`` saw, whether still pending, running or ended.

    Every call records the pending and running jobs submitted in the window
    and forgets the arrivals older than it, so a job that arrived and ended
    between two calls still counts while it is in the window (the policy is
    called at every submission). Without a state, only the pending and running
    jobs are seen.

    >>> from wattsched.model.platform import Platform
    >>> from wattsched.model.job import Job
    >>> plat = Platform.homogeneous_cluster(2)
    >>> st = DecRaplState()
    >>> snap = Snapshot(100.0, plat, {1: Job(1, 90.0, 1, 60.0, 60.0)}, {}, [0, 1], [0, 0])
    >>> arrivals_in_window(snap, st, 1800.0)
    1
    >>> arrivals_in_window(Snapshot(200.0, plat, {}, {}, [0, 1], [0, 0]), st, 1800.0)  # job 1 ended: still counted
    1
    >>> arrivals_in_window(Snapshot(2000.0, plat, {}, {}, [0, 1], [0, 0]), st, 1800.0)  # out of the window
    0
    """
    since = snapshot.now_s - window_s
    seen = dict(state.arrivals) if state is not None else {}
    for j in snapshot.pending.values():
        if j.submit_s >= since:
            seen[j.id] = j.submit_s
    for r in snapshot.running.values():
        if r.job.submit_s >= since:
            seen[r.job.id] = r.job.submit_s
    seen = {jid: t for jid, t in seen.items() if t >= since}
    if state is not None:
        state.arrivals = seen
    return len(seen)


class DecRaplPolicy(BasePolicy):
    """``dec`` while jobs arrive fast, ``dynshare`` otherwise. Registered as ``dec+rapl``.

    Borghesi et al. 2018 (§5.3): the proactive dispatcher pays off when jobs
    queue up, node caps when the machine is lightly loaded. The arrival rate
    is the number of jobs submitted in the last ``arrival_window_s``, ended
    ones included (:func:`arrivals_in_window`, kept in the policy's state);
    above one job per ``arrival_threshold_s`` the decision is ``dec``'s and
    node caps set before are removed from the nodes as their jobs end (a job
    started under a cap keeps it); below it, ``dynshare``'s.
    """

    name = "dec+rapl"
    Params = DecRaplParams
    State = DecRaplState

    def tags(self) -> PolicyTags:
        return dataclasses.replace(super().tags(), wants_empty_queue_calls=True, constraints=frozenset({"cap"}))

    def decide(self, snapshot: Snapshot, state: PolicyState | None = None) -> Plan:
        from wattsched.model.plan import SetNodeCap
        from wattsched.policies.rapl import DynSharePolicy

        p = self.params
        arrived = arrivals_in_window(snapshot, state if isinstance(state, DecRaplState) else None,
                                     p.arrival_window_s)
        if arrived * p.arrival_threshold_s > p.arrival_window_s:
            dec_params = {k: v for k, v in p.model_dump().items() if k in DecParams.model_fields}
            plan = DecPolicy(**dec_params).decide(snapshot, None)
            # a node keeps its cap while a job started under it runs: lifting it would let that job's
            # draw jump above the budget dec plans against
            busy = {n for r in snapshot.running.values() for n in r.nodes}
            clear = [SetNodeCap(n, None) for n, c in snapshot.desired_node_cap_w.items()
                     if c is not None and n not in busy]
            plan.actions[:0] = clear
            return plan
        return DynSharePolicy(headroom_w=p.headroom_w).decide(snapshot, None)
