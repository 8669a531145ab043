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

Rolling horizon: only the first ``horizon_jobs`` jobs in ``ls`` order enter
the model (thousands of pending jobs would not fit in one cycle); the rest are
started now only where ``ls``, run around the CP schedule, places them now.

Determinism: one search worker and a fixed ``seed``; the time limit is in
CP-SAT's *deterministic* time (about seconds of work) unless ``wall_clock``
is set, in which case a run that hits the limit may differ between runs. The
plan's head reason says when the solver hit its limit.
"""

from __future__ import annotations

import logging
import math

from pydantic import ConfigDict, Field

from wattsched.model.job import Job
from wattsched.model.plan import Plan
from wattsched.model.snapshot import Snapshot
from wattsched.model.state import PolicyState
from wattsched.policies.base import BasePolicy
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

try:
    from ortools.sat.python import cp_model
except ImportError as exc:  # pragma: no cover - the registry reports it as "dec needs ortools"
    raise ImportError("the 'dec' policy needs OR-Tools: pip install 'wattsched[cp]'") from exc

log = logging.getLogger(__name__)

WEIGHT_SCALE = 100
"""Eq. 2's weights ``max ewt / ewt_i`` are real; the model takes them × this, rounded."""


class DecParams(LsParams):
    model_config = ConfigDict(extra="forbid", frozen=True)

    time_limit_s: float = Field(0.1, gt=0, description=(
        "First solver time limit (s; the paper's is 1 s); doubled while no solution is found."))
    max_time_limit_s: float = Field(10.0, gt=0, description="Largest solver time limit (s).")
    wall_clock: bool = Field(False, description="Limit wall-clock time instead of CP-SAT's deterministic time.")
    time_step_s: float = Field(60.0, gt=0, description="Time unit of the CP model (s): requested times round up to it.")
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
    return len(snapshot.free_nodes) + sum(len(r.nodes) for r in snapshot.running.values())


class DecPolicy(BasePolicy):
    """Hybrid CP scheduling and heuristic mapping under a power cap. Registered as ``dec``."""

    name = "dec"
    Params = DecParams

    def decide(self, snapshot: Snapshot, state: PolicyState | None = None) -> Plan:
        p = self.params
        order = priority_order(snapshot, p)
        if not order:
            return Plan([])
        usable = snapshot.usable_node_count()
        pool = _node_pool(snapshot)
        model_jobs = [j for j in order[: p.horizon_jobs] if j.nodes <= pool and fits_alone(snapshot, p, j, usable)]
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
        # the rest of the queue: ls run around the CP schedule, started where it places a job now
        rest = [j for j in order if j.id not in starts]
        if rest:
            around = list_schedule(snapshot, p, model_jobs + rest,
                                   fixed={j.id: float(starts[j.id]) for j in model_jobs if j.id in starts})
            now_ids |= {j.id for j in rest if around.get(j.id) == 0.0}
        in_order = [j for j in order if j.id in now_ids]
        plan = start_in_order(snapshot, p, in_order, "scheduled later by the CP model (weighted queue time)",
                              only=now_ids)
        for j in rest:
            if j.id not in now_ids and not (j.nodes <= pool and fits_alone(snapshot, p, j, usable)):
                plan.reasons[j.id] = (f"needs {j.nodes} nodes and its predicted power under the cap even on an idle "
                                      f"machine ({pool} nodes on or busy); waits for the cap to rise")
        started = {a.job_id for a in plan.actions}
        head = next((j for j in order if j.id not in started and j.id not in plan.reasons), None)
        if head is not None and note:
            plan.reasons[head.id] = f"scheduled later by the CP model; {note}"
        return plan

    def solve(self, snapshot: Snapshot, jobs: list[Job], later: set[int] = frozenset()) -> tuple[dict[int, int], str]:
        """Start offsets (in ``time_step_s`` steps from now) of ``jobs`` by the relaxed CP model, and a search note."""
        p = self.params
        if not jobs:
            return {}, ""
        now = snapshot.now_s
        warm = list_schedule(snapshot, p, jobs)
        if all(warm.get(j.id) == 0.0 for j in jobs if j.id not in later) and not later:
            return {j.id: 0 for j in jobs}, ""  # ls starts every job now: no weighted wait is lower
        ledger = PowerLedger.from_snapshot(snapshot, "mean")
        idle = ledger.idle_w
        running = [(max(0.0, end - now), n, jid) for end, n, jid in snapshot.running_by_end()]
        run_nodes = sum(n for _, n, _ in running)
        cap = min(planning_cap_w(snapshot, p, j) for j in jobs)
        m = cp_model.CpModel()
        step = p.time_step_s
        durations = {j.id: _steps(j.walltime_s, step) for j in jobs}
        # a job past its expected end still holds its nodes now: it ends within the first step
        rem = [(_steps(end, step), n, jid) for end, n, jid in running]
        horizon = max((r for r, _, _ in rem), default=0) + sum(durations.values())
        starts, intervals, node_req, power_req = {}, [], [], []
        for j in jobs:
            lo = 1 if j.id in later else 0
            s = m.new_int_var(lo, horizon, f"s{j.id}")
            starts[j.id] = s
            intervals.append(m.new_fixed_size_interval_var(s, durations[j.id], f"i{j.id}"))
            node_req.append(j.nodes)
            est = snapshot.estimate(j)
            power_req.append(max(0, math.ceil((est.mean_w - idle) * j.nodes)))
            if j.id in warm:
                m.add_hint(s, max(lo, math.ceil(warm[j.id] / step - 1e-9)))
        fixed_iv, fixed_nodes, fixed_power = [], [], []
        for r, n, jid in rem:
            fixed_iv.append(m.new_fixed_size_interval_var(0, r, f"r{jid}"))
            fixed_nodes.append(n)
            est = snapshot.estimate(snapshot.running[jid].job)
            fixed_power.append(max(0, math.ceil((est.mean_w - idle) * n)))
        m.add_cumulative(intervals + fixed_iv, node_req + fixed_nodes, _node_pool(snapshot))
        if cap != math.inf:
            # all nodes idle (the running ones included, their increments being their own intervals)
            room = cap - (ledger.base_w + idle * run_nodes)
            room = max(math.floor(room), sum(fixed_power))
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
        return {jid: (0 if warm.get(jid) == 0.0 and jid not in later else max(1, int(warm.get(jid, 1))))
                for jid in starts}, note
