"""The guard: a pure check every plan passes before it is applied, live and in simulation."""

from __future__ import annotations

import math
from typing import assert_never

from wattsched.errors import PlanViolation
from wattsched.model.plan import Evict, Plan, PowerDown, PowerUp, Reshape, SetNodeCap, SetNodeFreq, Start
from wattsched.model.platform import Node, NodeState
from wattsched.model.snapshot import Snapshot
from wattsched.model.units import capacity, fits, format_units, minus, plus

IDLE = int(NodeState.IDLE)
CAP_TOLERANCE = 1e-6
"""Relative slack on the cap check, for floating-point sums."""


def plan_problems(snapshot: Snapshot, plan: Plan) -> list[str]:
    """Every reason ``plan`` cannot be applied to ``snapshot``; empty if it can.

    Checks: no node double-booked (within the plan or against running jobs),
    started jobs pending and given as many usable, powered-on nodes as they
    asked for (or a count in their moldable range), evicted and reshaped jobs
    running, each job touched once, node actions on valid nodes in valid states,
    every cap and frequency (of a Start, a SetNodeCap, a SetNodeFreq) within
    the hardware range of each node it applies to, and, if the plan carries
    its own power estimate, that estimate within the lowest cap over the
    guard horizon (:func:`guard_horizon_s`) and, held that long, within the
    energy left in every budget window in force.

    A job of units (``Job.units``) is given one node per unit, a node may
    repeat (not for a job with ``distinct_nodes``), and each node must be idle or partly used by units
    (``snapshot.node_free``) with room for every unit the plan puts there;
    such a Start carries no cap or frequency (its nodes are shared: set them
    with SetNodeCap/SetNodeFreq), and the job cannot be reshaped.
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
    node_free = dict(snapshot.node_free)  # free capacity of partly used nodes, as the plan goes
    unit_nodes: set[int] = set()  # nodes given to units by the plan

    for action in plan.actions:
        match action:
            case Start() | Reshape():
                jid = action.job_id
                if jid in touched:
                    problems.append(f"job {jid} appears twice in the plan")
                touched.add(jid)
                what = type(action).__name__
                if isinstance(action, Start):
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
                    if not snapshot.can_reshape:
                        problems.append(f"Reshape of job {jid}: this cluster cannot move a running job")
                    if job.units:
                        problems.append(f"Reshape of job {jid}, a job of units")
                        continue
                if job.units:
                    _check_units(snapshot, action, job, state, taken, released, node_free, unit_nodes, problems)
                    continue
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
                    elif n in taken or n in unit_nodes:
                        problems.append(f"node {nodes[n].name} double-booked in the plan (job {jid})")
                    elif state[n] != IDLE and n not in own and n not in released:
                        problems.append(
                            f"job {jid} given node {nodes[n].name}, which is {NodeState(state[n]).name.lower()}"
                        )
                    taken.add(n)
                if isinstance(action, Start):
                    for n in action.nodes:
                        if 0 <= n < n_nodes:
                            _check_node_values(nodes[n], action.cap_w, action.freq_hz, f"{what} of job {jid}: ",
                                               problems)
                else:  # the nodes a shrink gives up are free for the actions after it
                    given_up = own.difference(action.nodes)
                    released.update(given_up)
                    taken.difference_update(given_up)
            case Evict():
                jid = action.job_id
                if jid in touched:
                    problems.append(f"job {jid} appears twice in the plan")
                touched.add(jid)
                run = running.get(jid)
                if run is None:
                    problems.append(f"Evict of job {jid}, which is not running")
                elif run.job.units:
                    for u, n in zip(run.job.units, run.nodes, strict=False):
                        if n in node_free:
                            node_free[n] = plus(node_free[n], u)
                            if node_free[n] == capacity(nodes[n]):  # no unit left: the node is free
                                del node_free[n]
                                released.add(n)
                else:
                    released.update(run.nodes)
            case SetNodeCap() | SetNodeFreq():
                n = action.node
                what = type(action).__name__
                if not 0 <= n < n_nodes:
                    problems.append(f"{what} on node {n}, which does not exist")
                    continue
                if isinstance(action, SetNodeCap):
                    _check_node_values(nodes[n], action.cap_w, None, f"{what}: ", problems)
                else:
                    _check_node_values(nodes[n], None, action.freq_hz, f"{what}: ", problems)
            case PowerDown() | PowerUp():
                n = action.node
                what = type(action).__name__
                if not 0 <= n < n_nodes:
                    problems.append(f"{what} on node {n}, which does not exist")
                    continue
                want = NodeState.IDLE if isinstance(action, PowerDown) else NodeState.OFF
                if state[n] != want or n in taken or n in unit_nodes:
                    problems.append(
                        f"{what} on node {nodes[n].name}, which is {NodeState(state[n]).name.lower()}"
                        + (" and used by the plan" if n in taken else "")
                    )
                taken.add(n)
            case _:
                assert_never(action)

    if snapshot.reshape_shrink_only:
        _check_shrink_only(snapshot, plan, problems)
    _check_power_estimate(snapshot, plan, problems)
    return problems


def _check_shrink_only(snapshot: Snapshot, plan: Plan, problems: list[str]) -> None:
    """Where the source can only shrink a running job (``snapshot.reshape_shrink_only``, a live Slurm), each
    ``Reshape`` must keep a non-empty subset of the job's nodes that includes its first node (Slurm's batch
    host, which a shrink cannot remove)."""
    names = snapshot.platform.nodes
    for action in plan.actions:
        if type(action) is not Reshape:
            continue
        run = snapshot.running.get(action.job_id)
        if run is None or run.job.units:
            continue  # worded by plan_problems
        jid = action.job_id
        own = set(run.nodes)
        added = [n for n in action.nodes if n not in own]
        if added:
            what = ", ".join(names[n].name if 0 <= n < len(names) else str(n) for n in added[:5])
            problems.append(f"Reshape of job {jid} adds {what}: this cluster can only shrink a running job "
                            f"(Slurm cannot give it nodes it does not hold)")
        elif run.nodes and action.nodes and run.nodes[0] not in action.nodes:
            problems.append(f"Reshape of job {jid} drops its first node {names[run.nodes[0]].name}, the batch host "
                            "Slurm keeps when it shrinks a job")


def _check_units(snapshot: Snapshot, action: Start, job, state, taken: set[int], released: set[int],
                 node_free: dict, unit_nodes: set[int], problems: list[str]) -> None:
    """The checks of a Start of a job of units; commits its capacity to ``node_free`` when it is valid."""
    jid = job.id
    nodes = snapshot.platform.nodes
    n_nodes = len(nodes)
    if len(action.nodes) != len(job.units):
        problems.append(f"job {jid} has {len(job.units)} units, plan gives {len(action.nodes)} nodes")
        return
    if action.cap_w is not None or action.freq_hz is not None:
        problems.append(f"Start of job {jid}, a job of units, with a cap or frequency: its nodes may be shared "
                        "(set them with SetNodeCap/SetNodeFreq)")
    left: dict[int, tuple[int, int, int, int]] = {}
    ok = True
    for i, (u, n) in enumerate(zip(job.units, action.nodes, strict=True)):
        if not 0 <= n < n_nodes:
            problems.append(f"job {jid} given node {n}, which does not exist")
            ok = False
            continue
        if n in taken:
            problems.append(f"node {nodes[n].name} double-booked in the plan (job {jid})")
            ok = False
            continue
        cap = left.get(n)
        if cap is not None and job.distinct_nodes:
            problems.append(f"job {jid} given node {nodes[n].name} for two of its units; each of its units needs "
                            "a node of its own (Slurm lays the job out by node)")
            ok = False
            continue
        if cap is None:
            cap = node_free.get(n)
            if cap is None:
                if state[n] != IDLE and n not in released:
                    problems.append(f"job {jid} given node {nodes[n].name}, which is "
                                    f"{NodeState(state[n]).name.lower()}")
                    ok = False
                    continue
                cap = capacity(nodes[n])
        if not fits(cap, u, nodes[n].mem_mb > 0):
            problems.append(f"job {jid}: unit {i} ({format_units((u,))}) does not fit on node {nodes[n].name} "
                            f"(free: {cap[0]} cores, {cap[1]} GPUs, {cap[2]} MICs, {cap[3]} MB)")
            ok = False
            continue
        left[n] = minus(cap, u)
    if ok:
        node_free.update(left)
        unit_nodes.update(left)


def _check_node_values(node: Node, cap_w: float | None, freq_hz: float | None, prefix: str,
                       problems: list[str]) -> None:
    """Range checks of a cap and a frequency for one node (``None``: not set, always valid)."""
    pm = node.power
    if cap_w is not None and not (pm.cap_min_w <= cap_w <= pm.cap_max_w):
        problems.append(f"{prefix}cap {cap_w} W for node {node.name} outside [{pm.cap_min_w}, {pm.cap_max_w}] W")
    if freq_hz is not None and (not pm.freq_levels_hz or not (pm.min_freq_hz <= freq_hz <= pm.max_freq_hz)):
        problems.append(f"{prefix}frequency {freq_hz} Hz not available on node {node.name}"
                        + (f" (range [{pm.min_freq_hz}, {pm.max_freq_hz}] Hz)" if pm.freq_levels_hz else ""))


def guard_horizon_s(snapshot: Snapshot, plan: Plan) -> float:
    """How far ahead the guard holds a plan's power estimate to the cap schedule.

    The plan's starts are taken to run at least their requested time (the
    shortest of them bounds the horizon: the estimate is the power with all of
    them running), and no further than the snapshot's ``cap_lookahead_s``. A
    plan without starts is checked against the cap in force now.
    """
    shortest = math.inf
    pending = snapshot.pending
    for a in plan.actions:
        if isinstance(a, Start):
            job = pending.get(a.job_id)
            if job is not None and job.walltime_s < shortest:
                shortest = job.walltime_s
    if shortest == math.inf:
        return 0.0
    return max(0.0, min(shortest, snapshot.cap_lookahead_s))


def _check_power_estimate(snapshot: Snapshot, plan: Plan, problems: list[str]) -> None:
    estimate = plan.power_estimate_w
    if estimate is None:
        return
    now = snapshot.now_s
    horizon = guard_horizon_s(snapshot, plan)
    cap = snapshot.cap.lowest_cap(now, horizon, horizon) if horizon > 0 else snapshot.cap_w
    if math.isfinite(cap) and estimate > cap * (1 + CAP_TOLERANCE):
        if horizon > 0 and cap < snapshot.cap_w:
            problems.append(f"plan's own power estimate {estimate:.0f} W exceeds the cap {cap:.0f} W "
                            f"coming within the next {horizon:.0f} s (its starts' shortest requested time)")
        else:
            problems.append(f"plan's own power estimate {estimate:.0f} W exceeds the cap {cap:.0f} W")
    for b in snapshot.budgets:
        # The plan's power, held until the shortest start ends or the window closes, must fit the energy left.
        held_s = min(horizon, b.budget.end_s - now)
        if held_s > 0 and estimate * held_s > max(b.remaining_j, 0.0) * (1 + CAP_TOLERANCE):
            problems.append(f"plan's own power estimate {estimate:.0f} W for {held_s:.0f} s needs "
                            f"{estimate * held_s:.3g} J, more than the {max(b.remaining_j, 0.0):.3g} J left "
                            f"in the energy budget ending at t={b.budget.end_s:.0f}")


def _plain_starts_ok(snapshot: Snapshot, plan: Plan) -> bool:
    """Fast path for the most common plan, a few Starts of rigid jobs on idle nodes.

    True only if the plan is certainly valid; anything unusual goes to the full
    check, which also words the problems.
    """
    pending = snapshot.pending
    state = snapshot.node_state
    actions = plan.actions
    if len(actions) == 1:  # most plans: one Start, no sets needed
        action = actions[0]
        if type(action) is not Start or action.cap_w is not None or action.freq_hz is not None:
            return False
        job = pending.get(action.job_id)
        nodes = action.nodes
        k = len(nodes)
        if job is None or k != job.nodes or job.units:
            return False
        for n in nodes:
            if n < 0:
                return False
            s = state[n]  # an index past the end raises: caught below
            if s != IDLE:
                return False
        return k == 1 or len(set(nodes)) == k
    used: set[int] = set()
    jobs: set[int] = set()
    total = 0
    for action in plan.actions:
        if type(action) is not Start or action.cap_w is not None or action.freq_hz is not None:
            return False
        job = pending.get(action.job_id)
        nodes = action.nodes
        if job is None or action.job_id in jobs or len(nodes) != job.nodes or job.units:
            return False
        jobs.add(action.job_id)
        for n in nodes:
            if n < 0:
                return False
            s = state[n]  # an index past the end raises: caught below
            if s != IDLE:
                return False
        used.update(nodes)
        total += len(nodes)
    return len(used) == total


def _checked_fast_path(snapshot: Snapshot, plan: Plan) -> bool:
    try:
        return _plain_starts_ok(snapshot, plan)
    except (IndexError, TypeError, OverflowError):  # a node or state that is not an index: the full check says so
        return False


def check_plan(snapshot: Snapshot, plan: Plan) -> None:
    """Raise :class:`~wattsched.errors.PlanViolation` if ``plan`` cannot be applied to ``snapshot``."""
    problems = plan_problems(snapshot, plan)
    if problems:
        raise PlanViolation(problems)
