"""Simple (Bodas et al. 2014, as Borghesi et al. 2018 implement it): the budget split evenly as static node caps.

Reactive power capping: jobs start by EASY backfilling, ignoring power, and
the platform budget is enforced on the nodes instead. While a finite cap is
in force, every powered node gets the cap ``cap / nodes`` (the cap divided
among all the platform's nodes, clamped to each node's hardware range
``[cap_min_w, cap_max_w]``); when no cap is in force the node caps are
removed. A node cap slows the job on that node through its response model
(in replay; live the cap goes to the node's agent or BMC through the node
actuators and is reconciled every cycle). Only nodes whose desired cap
differs are set, so a plan never repeats a setting already asked for.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from wattsched.model.plan import Plan, SetNodeCap
from wattsched.model.snapshot import Snapshot
from wattsched.model.state import PolicyState
from wattsched.policies.base import BasePolicy
from wattsched.policies.easy import EasyPolicy


class SimpleParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    order: Literal["fcfs", "saf"] = Field("fcfs", description="EASY queue order: fcfs or saf.")


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
    wants_empty_queue_calls = True

    def __init__(self, params=None, **kwargs):
        super().__init__(params, **kwargs)
        self._easy = EasyPolicy(order=self.params.order)

    def decide(self, snapshot: Snapshot, state: PolicyState | None = None) -> Plan:
        plan = self._easy.decide(snapshot, None)
        desired = snapshot.desired_node_cap_w
        caps = [SetNodeCap(node, cap) for node, cap in even_node_caps(snapshot).items() if desired.get(node) != cap]
        if caps:
            plan.actions[:0] = caps
        return plan
