"""``dynshare`` on what a live snapshot holds: node limits observed on the hardware beside the caps it set."""

from __future__ import annotations

from builders import platform, snapshot
from wattsched.model.constraints import CapSchedule
from wattsched.model.guard import plan_problems
from wattsched.model.job import Job, PowerEstimate
from wattsched.model.plan import SetNodeCap
from wattsched.policies import make_policy


def _live(observed_w: float):
    light, heavy = Job(1, 0.0, 600.0, 1), Job(2, 0.0, 600.0, 1)
    snap = snapshot(platform(4), [], [(light, 0.0, (0,)), (heavy, 0.0, (1,))], cap=CapSchedule.constant(800.0),
                    estimates={1: PowerEstimate(300.0, 300.0), 2: PowerEstimate(300.0, 300.0)},
                    platform_power_w=800.0, jobs_power_w=600.0)
    # every node holds the hardware's default limit, which no plan set
    snap.node_cap_w = {n: observed_w for n in range(4)}
    return snap


def test_dynshare_starts_from_the_even_split_whatever_limits_the_hardware_holds():
    for observed in (450.0, 150.0):
        snap = _live(observed)
        plan = make_policy("dynshare").decide(snap)
        assert plan.actions == [SetNodeCap(n, 200.0) for n in range(4)], observed
        assert plan_problems(snap, plan) == []


def test_dynshare_shares_from_the_caps_it_set_not_from_what_the_nodes_report():
    from dataclasses import replace

    snap = _live(450.0)
    snap.running = {1: replace(snap.running[1], power_w=120.0), 2: replace(snap.running[2], power_w=200.0)}
    snap.desired_node_cap_w = {n: 200.0 for n in range(4)}
    # node 0 still reports the 450 W it held before its cap was applied (an actuation pending)
    caps = {a.node: a.cap_w for a in make_policy("dynshare", {"headroom_w": 10.0}).decide(snap).actions
            if type(a) is SetNodeCap}
    assert caps == {0: 130.0, 1: 300.0, 2: 110.0, 3: 110.0}
