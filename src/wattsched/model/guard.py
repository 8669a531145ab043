"""The guard: a pure check every plan passes before it is applied, live and in simulation."""

from __future__ import annotations

import math

from wattsched.errors import PlanViolation
from wattsched.model.plan import Evict, Plan, PowerDown, PowerUp, Reshape, SetNodeCap, SetNodeFreq, Start
from wattsched.model.platform import NodeState
from wattsched.model.snapshot import Snapshot

IDLE = int(NodeState.IDLE)
CAP_TOLERANCE = 1e-6
"""Relative slack on the cap check, for floating-point sums."""


def plan_problems(snapshot: Snapshot, plan: Plan) -> list[str]:
    """Every reason ``plan`` cannot be applied to ``snapshot``; empty if it can.

    Checks: no node double-booked (within the plan or against running jobs),
    started jobs pending and given as many usable, powered-on nodes as they
    asked for (or a count in their moldable range), evicted and reshaped jobs
    running, each job touched once, node actions on valid nodes in valid states
    and within their hardware range, and, if the plan carries its own power
    estimate, that estimate within the cap in force.
    """
    problems: list[str] = []
    if not plan.actions and plan.power_estimate_w is None:
        return problems
    if _checked_fast_path(snapshot, plan):
        _check_power_estimate(snapshot, plan, problems)
        return problems
    nodes = snapshot.platform.nodes
    n_nodes = len(nodes)
    state = snapshot.node_state
    taken: set[int] = set()
    released: set[int] = set()
    touched: set[int] = set()
    pending, running = snapshot.pending, snapshot.running

    for action in plan.actions:
        kind = type(action)
        if kind is Start or kind is Reshape:
            jid = action.job_id
            if jid in touched:
                problems.append(f"job {jid} appears twice in the plan")
            touched.add(jid)
            if kind is Start:
                job = pending.get(jid)
                if job is None:
                    problems.append(f"Start of job {jid}, which is not pending")
                    continue
                own: set[int] = set()
            else:
                run = running.get(jid)
                if run is None:
                    problems.append(f"Reshape of job {jid}, which is not running")
                    continue
                job = run.job
                if not job.malleable:
                    problems.append(f"Reshape of job {jid}, which is not malleable")
                own = set(run.nodes)
            count = len(action.nodes)
            lo = job.min_nodes or job.nodes
            hi = job.max_nodes or job.nodes
            if not lo <= count <= hi:
                want = str(job.nodes) if lo == hi else f"{lo} to {hi}"
                problems.append(f"job {jid} needs {want} nodes, plan gives {count}")
            if len(set(action.nodes)) != count:
                problems.append(f"job {jid} is given the same node twice")
            for n in action.nodes:
                if not 0 <= n < n_nodes:
                    problems.append(f"job {jid} given node {n}, which does not exist")
                elif n in taken:
                    problems.append(f"node {nodes[n].name} double-booked in the plan (job {jid})")
                elif state[n] != IDLE and n not in own and n not in released:
                    problems.append(
                        f"job {jid} given node {nodes[n].name}, which is {NodeState(state[n]).name.lower()}"
                    )
                taken.add(n)
            if kind is Start and action.cap_w is not None and not action.cap_w > 0:
                problems.append(f"job {jid} started with an invalid cap {action.cap_w}")
        elif kind is Evict:
            jid = action.job_id
            if jid in touched:
                problems.append(f"job {jid} appears twice in the plan")
            touched.add(jid)
            run = running.get(jid)
            if run is None:
                problems.append(f"Evict of job {jid}, which is not running")
            else:
                released.update(run.nodes)
        elif kind is SetNodeCap or kind is SetNodeFreq:
            n = action.node
            if not 0 <= n < n_nodes:
                problems.append(f"{kind.__name__} on node {n}, which does not exist")
                continue
            pm = nodes[n].power
            if kind is SetNodeCap and action.cap_w is not None:
                if not (pm.cap_min_w <= action.cap_w <= pm.cap_max_w):
                    problems.append(
                        f"cap {action.cap_w} W for node {nodes[n].name} outside [{pm.cap_min_w}, {pm.cap_max_w}] W"
                    )
            if kind is SetNodeFreq and action.freq_hz is not None:
                if not pm.freq_levels_hz or not (pm.min_freq_hz <= action.freq_hz <= pm.max_freq_hz):
                    problems.append(f"frequency {action.freq_hz} Hz not available on node {nodes[n].name}")
        elif kind is PowerDown or kind is PowerUp:
            n = action.node
            if not 0 <= n < n_nodes:
                problems.append(f"{kind.__name__} on node {n}, which does not exist")
                continue
            want = NodeState.IDLE if kind is PowerDown else NodeState.OFF
            if state[n] != want or n in taken:
                problems.append(
                    f"{kind.__name__} on node {nodes[n].name}, which is {NodeState(state[n]).name.lower()}"
                    + (" and used by the plan" if n in taken else "")
                )
            taken.add(n)
        else:
            problems.append(f"unknown action {action!r}")

    _check_power_estimate(snapshot, plan, problems)
    return problems


def _check_power_estimate(snapshot: Snapshot, plan: Plan, problems: list[str]) -> None:
    if plan.power_estimate_w is not None:
        cap = snapshot.cap_w
        if math.isfinite(cap) and plan.power_estimate_w > cap * (1 + CAP_TOLERANCE):
            problems.append(
                f"plan's own power estimate {plan.power_estimate_w:.0f} W exceeds the cap {cap:.0f} W"
            )


def _plain_starts_ok(snapshot: Snapshot, plan: Plan) -> bool:
    """Fast path for the most common plan, a few Starts of rigid jobs on idle nodes.

    True only if the plan is certainly valid; anything unusual goes to the full
    check, which also words the problems.
    """
    pending = snapshot.pending
    state = snapshot.node_state
    used: set[int] = set()
    jobs: set[int] = set()
    total = 0
    for action in plan.actions:
        if type(action) is not Start or action.cap_w is not None or action.freq_hz is not None:
            return False
        job = pending.get(action.job_id)
        nodes = action.nodes
        if job is None or action.job_id in jobs or len(nodes) != job.nodes:
            return False
        jobs.add(action.job_id)
        for n in nodes:
            if n < 0 or state[n] != IDLE:  # an index past the end raises: caught below
                return False
        used.update(nodes)
        total += len(nodes)
    return len(used) == total


def _checked_fast_path(snapshot: Snapshot, plan: Plan) -> bool:
    try:
        return _plain_starts_ok(snapshot, plan)
    except IndexError:
        return False


def check_plan(snapshot: Snapshot, plan: Plan) -> None:
    """Raise :class:`~wattsched.errors.PlanViolation` if ``plan`` cannot be applied to ``snapshot``."""
    problems = plan_problems(snapshot, plan)
    if problems:
        raise PlanViolation(problems)
