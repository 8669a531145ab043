"""Simple (Bodas et al. 2014, as Borghesi et al. 2018 implement it) and DynShare (Ellsworth et al.): node caps.

Reactive power capping: jobs start by EASY backfilling, ignoring power, and
the platform budget is enforced on the nodes instead.

``simple`` gives each job its power when it starts, from what the budget has
left at that moment ("decides the power available to each node of the system
depending on the current power consumption and power budget", Borghesi §2):
the budget less the platform's current draw (idle nodes at idle power, busy
nodes at their job's measured power) and less what the same decision gave the
jobs started before. A job gets its predicted power if that is left, else the
rest split over its nodes, never less than ``response_floor_w`` of dynamic
power per node (the paper's 1 W floor), as node caps within each node's
hardware range. Power is not shared afterwards: a job keeps the cap it started
with, and the power an ending job frees goes to the jobs that start next. With
``allocation: even`` the budget is instead split evenly over all nodes as
static caps (the earlier reading). When no cap is in force the node caps are
removed. A node cap slows the job on that node through its response model (in
replay; live the cap goes to the node's agent or BMC through the node
actuators and is reconciled every cycle). Only nodes whose desired cap
differs are set, so a plan never repeats a setting already asked for.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Literal

from pydantic import ConfigDict, Field

from wattsched.model.plan import Plan, SetNodeCap
from wattsched.model.snapshot import Snapshot
from wattsched.model.state import PolicyState
from wattsched.model.units import unit_dynamic_w
from wattsched.policies.base import BasePolicy, PolicyTags, ResponseParams
from wattsched.policies.easy import EasyPolicy


class SimpleParams(ResponseParams):
    model_config = ConfigDict(extra="forbid", frozen=True)

    order: Literal["fcfs", "saf"] = Field("fcfs", description="EASY queue order: fcfs or saf.")
    allocation: Literal["at_start", "even"] = Field("at_start", description=(
        "at_start: each starting job gets its predicted power from what the budget has left then (at least "
        "response_floor_w per node), kept while it runs (Bodas et al.); even: the budget split evenly over all "
        "nodes as static caps."))


def even_node_caps(snapshot: Snapshot) -> dict[int, float | None]:
    """The cap of every node: the cap in force now split evenly and clamped to each node's range (None: uncapped).

    >>> from wattsched.model.constraints import CapSchedule
    >>> from wattsched.model.platform import NodePowerModel, Platform
    >>> plat = Platform.homogeneous_cluster(4, power=NodePowerModel(idle_w=100, busy_w=300, cap_min_w=120,
    ...                                                                cap_max_w=300))
    >>> snap = Snapshot(0.0, plat, {}, {}, [0, 1, 2, 3], [0] * 4, cap=CapSchedule.constant(800.0))
    >>> even_node_caps(snap)
    {0: 200.0, 1: 200.0, 2: 200.0, 3: 200.0}
    """
    cap = snapshot.cap_w
    nodes = snapshot.platform.nodes
    if cap == math.inf:
        return {node.index: None for node in nodes}
    share = cap / len(nodes)
    return {node.index: min(node.power.cap_max_w, max(node.power.cap_min_w, share)) for node in nodes}


class SimplePolicy(BasePolicy):
    """EASY for the jobs, the budget split evenly as static node caps. Registered as ``simple``."""

    name = "simple"
    Params = SimpleParams

    def tags(self) -> PolicyTags:
        return replace(super().tags(), wants_empty_queue_calls=True, constraints=frozenset({"cap"}))

    def __init__(self, params=None, **kwargs):
        super().__init__(params, **kwargs)
        self._easy = EasyPolicy(order=self.params.order)

    def decide(self, snapshot: Snapshot, state: PolicyState | None = None) -> Plan:
        plan = self._easy.decide(snapshot, None)
        desired = snapshot.desired_node_cap_w
        if self.params.allocation == "even" or snapshot.cap_w == math.inf:
            targets = even_node_caps(snapshot)
        else:
            targets = start_node_caps(snapshot, plan, self.params.response_floor_w)
        caps = [SetNodeCap(node, cap) for node, cap in targets.items() if desired.get(node) != cap]
        if caps:
            plan.actions[:0] = caps
        return plan


def node_draw_w(snapshot: Snapshot) -> dict[int, float]:
    """Each node's power now: its running job's measured power per node (units: idle plus theirs), else idle."""
    nodes = snapshot.platform.nodes
    draw = {i: node.power.idle_w for i, node in enumerate(nodes)}
    for r in snapshot.running.values():
        if r.job.units:  # shared nodes: each unit adds its dynamic power to its node's idle power
            for n, dyn in unit_dynamic_w(snapshot.platform, r):
                draw[n] += dyn
            continue
        per_node = r.power_w / len(r.nodes) if r.nodes else 0.0
        for n in r.nodes:
            draw[n] = per_node
    return draw


def start_node_caps(snapshot: Snapshot, plan: Plan, floor_w: float) -> dict[int, float]:
    """``simple``'s caps for the nodes of the jobs ``plan`` starts: each job its power from what is left now.

    What is left is the cap in force less the platform's current draw
    (:func:`node_draw_w`) less what the jobs started before in the same plan
    were given. A job gets its predicted dynamic power per node
    (``snapshot.estimate``, above each node's idle power) if that much is
    left, else what is left split over its nodes, never below ``floor_w`` per
    node; each cap is the node's draw now plus that, clamped to the node's
    hardware range. Nodes not starting a job keep their caps.

    >>> from wattsched.model.constraints import CapSchedule
    >>> from wattsched.model.job import Job, PowerEstimate
    >>> from wattsched.model.plan import Plan, Start
    >>> from wattsched.model.platform import NodePowerModel, Platform
    >>> plat = Platform.homogeneous_cluster(4, power=NodePowerModel(idle_w=100, busy_w=300, cap_min_w=101,
    ...                                                                cap_max_w=300))
    >>> a, b = Job(1, 0.0, 2, 600.0, 600.0), Job(2, 0.0, 2, 600.0, 600.0)
    >>> snap = Snapshot(0.0, plat, {1: a, 2: b}, {}, [0, 1, 2, 3], [0] * 4, cap=CapSchedule.constant(700.0),
    ...                 estimates={1: PowerEstimate(200.0, 200.0), 2: PowerEstimate(200.0, 200.0)})
    >>> start_node_caps(snap, Plan([Start(1, (0, 1)), Start(2, (2, 3))]), 1.0)
    {0: 200.0, 1: 200.0, 2: 150.0, 3: 150.0}

    300 W are left above the four idle nodes' 400 W: job 1 gets the 100 W a node it asks for, job 2 the last
    100 W, 50 W a node.
    """
    cap = snapshot.cap_w
    nodes = snapshot.platform.nodes
    draw = node_draw_w(snapshot)
    left = cap - sum(draw.values())
    out: dict[int, float] = {}
    for start in plan.starts():
        job = snapshot.pending.get(start.job_id)
        if job is None or not start.nodes:
            continue
        n_nodes = len(start.nodes)
        est = snapshot.estimate(job).mean_w
        if job.units:
            want = est * len(job.units) / n_nodes  # per unit: its share of a node, taken as dynamic
        else:
            want = sum(max(0.0, est - nodes[n].power.idle_w) for n in start.nodes) / n_nodes
        per_node = max(floor_w, min(want, max(0.0, left) / n_nodes))
        left -= per_node * n_nodes
        for n in start.nodes:
            pm = nodes[n].power
            out[n] = min(pm.cap_max_w, max(pm.cap_min_w, draw[n] + per_node))
            draw[n] += per_node
    return out


class DynShareParams(ResponseParams):
    model_config = ConfigDict(extra="forbid", frozen=True)

    order: Literal["fcfs", "saf"] = Field("fcfs", description="EASY queue order: fcfs or saf.")
    admission: bool = Field(
        False, description="Admit jobs by bf under admission_factor × the cap's dynamic part (§5.2 of Borghesi).")
    admission_factor: float = Field(
        3.0, gt=0, description="Budget of the admission stage: idle power + this × (cap − idle power).")
    headroom_w: float = Field(10.0, ge=0, description="A node below its cap keeps its draw plus this (W).")
    at_cap_tolerance: float = Field(0.02, ge=0, lt=1, description="A node within this fraction of its cap is at it.")


class DynSharePolicy(BasePolicy):
    """EASY (or bf admission), the budget shared among nodes by their draw. Registered as ``dynshare``."""

    name = "dynshare"
    Params = DynShareParams

    def tags(self) -> PolicyTags:
        # the admission stage is bf: its reservation walks the end table
        return replace(super().tags(), wants_empty_queue_calls=True, wants_end_table=True,
                       constraints=frozenset({"cap"}))

    def __init__(self, params=None, **kwargs):
        super().__init__(params, **kwargs)
        self._easy = EasyPolicy(order=self.params.order)

    def decide(self, snapshot: Snapshot, state: PolicyState | None = None) -> Plan:
        p = self.params
        cap = snapshot.cap_w
        if p.admission and cap != math.inf:
            from wattsched.model.constraints import CapSchedule
            from wattsched.policies.bf import BfPolicy

            # the paper's budgets count dynamic power only: the factor multiplies the cap above idle
            idle_w = snapshot.platform.idle_power_w
            admit_w = idle_w + p.admission_factor * max(cap - idle_w, 0.0)
            loose = replace(snapshot, cap=CapSchedule.constant(admit_w))  # the same jobs: the same indexes
            plan = BfPolicy(order=p.order).decide(loose, None)
            plan.power_estimate_w = None  # the node caps, not the admission budget, hold the platform to the cap
        else:
            plan = self._easy.decide(snapshot, None)
        desired = snapshot.desired_node_cap_w
        targets = shared_node_caps(snapshot, {n for a in plan.starts() for n in a.nodes}, p.headroom_w,
                                   p.at_cap_tolerance)
        caps = [SetNodeCap(node, c) for node, c in targets.items() if not _same_cap(desired.get(node), c)]
        if caps:
            plan.actions[:0] = caps
        return plan


def _same_cap(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return abs(a - b) < 1.0


def shared_node_caps(snapshot: Snapshot, starting: set[int], headroom_w: float,
                     tolerance: float) -> dict[int, float | None]:
    """DynShare's node caps: nodes below their cap keep their draw plus ``headroom_w``; nodes at it share the rest.

    A node whose measured power does not show its last change yet
    (``snapshot.unsettled_nodes``) keeps its cap: its draw is a prediction
    until then, and acting on it would undo the change it has not shown. A
    node below its cap keeps the cap it has while that is within
    ``headroom_w / 2`` of its draw plus ``headroom_w``: measured power moves a
    little from one decision to the next (live), and a cap is not set again
    for that.

    A node's draw is its running job's measured power per node, else its idle
    power. A node's allocation is the cap the plans so far gave it
    (``desired_node_cap_w``); nodes without one get the even split
    (:func:`even_node_caps`). A limit the node holds that no plan set (live,
    the hardware's default RAPL limit) is not an allocation: it does not add
    up to the budget. Nodes a job is starting on count as at their cap. Caps
    are clamped to each node's hardware range; the caps of the nodes at their
    cap are lowered evenly if the budget is overdrawn.
    """
    even = even_node_caps(snapshot)
    cap = snapshot.cap_w
    if cap == math.inf:
        return even
    nodes = snapshot.platform.nodes
    current = {i: snapshot.desired_node_cap_w.get(i) for i in range(len(nodes))}
    if all(c is None for c in current.values()):
        return even
    draw = node_draw_w(snapshot)
    out: dict[int, float] = {}
    takers = []
    held = []  # measured power does not show their last change yet: judged next time
    for i, node in enumerate(nodes):
        c = current[i] if current[i] is not None else even[i]
        if i in snapshot.unsettled_nodes and i not in starting:
            held.append((i, c))
        elif i not in starting and draw[i] < c * (1 - tolerance):
            if current[i] is not None and abs(current[i] - (draw[i] + headroom_w)) <= headroom_w / 2:
                out[i] = current[i]  # its draw moved by less than half the headroom: keep the cap it has
            else:
                out[i] = min(node.power.cap_max_w, max(node.power.cap_min_w, draw[i] + headroom_w))
        else:
            takers.append((i, c))
    left = cap - sum(out.values()) - sum(c for _, c in takers) - sum(c for _, c in held)
    if left < 0:  # overdrawn (a lower budget): the held nodes give their part too
        takers += held
    else:
        out.update(held)
    if takers:
        share = left / len(takers)
        for i, c in takers:
            pm = nodes[i].power
            out[i] = min(pm.cap_max_w, max(pm.cap_min_w, c + share))
    return out
