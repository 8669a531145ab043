"""Engine semantics of the policy contract: job-scoped settings, demand-response notice, state, forecast, progress."""

from __future__ import annotations

import dataclasses
import math

import pytest

from builders import platform, tj
from wattsched.model.constraints import CapSchedule, CapStep, DemandResponseEvent
from wattsched.model.plan import Plan, SetNodeCap, SetNodeFreq, Start
from wattsched.model.state import PolicyState
from wattsched.policies import make_policy
from wattsched.policies.base import BasePolicy
from wattsched.predictors import make_predictor
from wattsched.sim.engine import Engine, EngineOptions


class Recorder(BasePolicy):
    """FCFS that plays scripted actions at given times and records what each snapshot showed."""

    name = "recorder"

    class State(PolicyState):
        calls: int = 0

    def __init__(self, script=None, wants_forecast=False):
        super().__init__()
        self.script = script or {}
        self.wants_forecast = wants_forecast
        self.seen: list[dict] = []

    def tags(self):
        return dataclasses.replace(super().tags(), wants_empty_queue_calls=True, wants_forecast=self.wants_forecast)

    def decide(self, snapshot, state=None):
        assert isinstance(state, Recorder.State)
        state.calls += 1
        self.seen.append({
            "t": snapshot.now_s, "calls": state.calls, "cap": dict(snapshot.node_cap_w),
            "freq": dict(snapshot.node_freq_hz), "desired_cap": dict(snapshot.desired_node_cap_w),
            "dr": list(snapshot.dr_events), "cap_w": snapshot.cap_w, "lookahead": snapshot.lowest_cap(1e6),
            "forecast": snapshot.forecast,
            "running": {j: (r.cap_w, r.freq_hz, r.progress(snapshot.now_s)) for j, r in snapshot.running.items()},
        })
        actions = list(self.script.get(snapshot.now_s, []))
        if not actions:
            free = list(snapshot.free_nodes)
            for job in snapshot.pending.values():
                if job.nodes > len(free):
                    break
                actions.append(Start(job.id, tuple(free[-job.nodes:])))
                del free[-job.nodes:]
        return Plan(actions)


TICKS = EngineOptions(tick_s=1.0)


def at(policy, t):
    return next(s for s in policy.seen if s["t"] == t)


def test_a_job_end_pops_only_its_own_cap_and_frequency_never_the_nodes_setting():
    # node 0 capped at 200 W by the policy at t=0; job 1 starts on it at t=5 with its own 150 W and 1 GHz
    script = {0.0: [SetNodeCap(0, 200.0)], 5.0: [Start(1, (0,), cap_w=150.0, freq_hz=1e9)]}
    pol = Recorder(script)
    Engine(platform(2), [tj(9, 0.0, 1.0, walltime=1.0), tj(1, 5.0, 10.0, walltime=100.0), tj(2, 40.0, 1.0)],
           pol, options=TICKS).run()
    assert at(pol, 0.0)["cap"] == {}  # the snapshot shows the state before the plan
    assert at(pol, 5.0)["cap"] == {0: 200.0}
    during = next(s for s in pol.seen if s["t"] > 5.0 and 1 in s["running"])
    assert during["cap"] == {0: 150.0} and during["freq"] == {0: 1e9}
    assert during["desired_cap"] == during["cap"]
    cap_w, freq_hz, progress = during["running"][1]
    assert (cap_w, freq_hz) == (150.0, 1e9) and 0 < progress < 1
    # job 1 ended: the job's own settings are gone, the node's 200 W cap stays
    assert at(pol, 40.0)["cap"] == {0: 200.0} and at(pol, 40.0)["freq"] == {}


def test_a_node_setting_lower_than_the_jobs_wins_and_outlives_it():
    script = {0.0: [Start(1, (0,), cap_w=250.0)], 1.0: [SetNodeCap(0, 100.0), SetNodeFreq(1, 1e9)]}
    pol = Recorder(script)
    Engine(platform(2), [tj(1, 0.0, 5.0, walltime=50.0), tj(2, 1.0, 0.5, walltime=0.5), tj(3, 100.0, 1.0)],
           pol, options=TICKS).run()
    after = next(s for s in pol.seen if s["t"] > 1.0 and 1 in s["running"])
    assert after["cap"][0] == 100.0
    assert at(pol, 100.0)["cap"] == {0: 100.0} and at(pol, 100.0)["freq"] == {1: 1e9}


def test_a_demand_response_event_is_seen_from_its_notice_on_with_a_cap_from_the_baseline():
    # two jobs keep both nodes busy (300 W each on SIMPLE_POWER: 600 W); notice at t=20 of a 200 W cut over [60, 90)
    event = DemandResponseEvent(notice_s=20.0, start_s=60.0, end_s=90.0, reduction_w=200.0)
    pol = Recorder()
    engine = Engine(platform(2), [tj(1, 0.0, 200.0), tj(2, 0.0, 200.0), tj(3, 10.0, 1.0), tj(4, 70.0, 1.0),
                                  tj(5, 95.0, 1.0)], pol, dr_events=[event])
    result = engine.run()
    assert at(pol, 10.0)["dr"] == [] and at(pol, 10.0)["lookahead"] == math.inf  # no foresight before notice
    noticed = at(pol, 20.0)
    assert [e.event for e in noticed["dr"]] == [event]
    assert noticed["dr"][0].baseline_w == 600.0 and noticed["dr"][0].cap_w == 400.0
    assert noticed["cap_w"] == math.inf and noticed["lookahead"] == 400.0
    assert at(pol, 60.0)["cap_w"] == 400.0 and at(pol, 70.0)["cap_w"] == 400.0
    assert at(pol, 95.0)["dr"] == [] and at(pol, 95.0)["cap_w"] == math.inf
    tl = result.timeline
    inside = [c for t, c in zip(tl["t_s"], tl["cap_w"], strict=True) if 60.0 <= t < 90.0]
    assert inside and set(inside) == {400.0}


def test_the_engine_keeps_the_typed_state_and_fills_the_forecast_when_asked():
    pol = Recorder(wants_forecast=True)
    Engine(platform(2), [tj(1, 0.0, 100.0), tj(2, 50.0, 10.0)], pol).run()
    assert [s["calls"] for s in pol.seen] == list(range(1, len(pol.seen) + 1))
    fc = at(pol, 50.0)["forecast"]
    assert fc is not None and fc.now_s == 50.0
    assert fc.at(50.0) == pytest.approx(300.0 + 100.0)  # job 1 busy, node 1 idle (the snapshot before the start)
    assert fc.at(150.0) == pytest.approx(200.0)  # job 1 runs to its walltime (t=100), then both idle


def test_easy_pc_with_a_one_step_schedule_keeps_a_long_job_out_of_the_window():
    # 700 W from t=100 on: with check=max (300 W a busy node) a 3-node job (3 x 200 W more than idle) started at
    # t=0 would run into the window at 4 x 100 + 3 x 200 = 1000 W. Main ignored a one-entry schedule before t=100.
    cap = CapSchedule([CapStep(100.0, 700.0)])
    jobs = [tj(1, 0.0, 150.0, nodes=3), tj(2, 0.0, 50.0, nodes=1)]
    r = Engine(platform(4), jobs, make_policy("easy-pc", {"check": "max"}), cap=cap,
               predictor=make_predictor("naive")).run()
    starts = dict(zip(r.jobs["id"].tolist(), r.jobs["start_s"].tolist(), strict=True))
    assert starts[2] == 0.0
    assert math.isnan(starts[1]) or starts[1] >= 100.0
    tl = r.timeline
    over = [p - c for p, c in zip(tl["power_w"], tl["cap_w"], strict=True) if p > c]
    assert over == []


def test_on_a_heterogeneous_platform_the_forecast_gives_the_engines_platform_power():
    from wattsched.model.platform import Node, NodePowerModel, Platform

    cpu = NodePowerModel(off_w=5.0, idle_w=100.0, busy_w=300.0)
    gpu = NodePowerModel(off_w=20.0, idle_w=250.0, busy_w=900.0, gpu_tdp_w=300.0)
    plat = Platform([Node(i, f"c{i}", group="cpu", power=cpu) for i in range(3)]
                    + [Node(3 + i, f"g{i}", group="gpu", gpus=2, power=gpu) for i in range(2)])
    pol = Recorder(wants_forecast=True)
    engine = Engine(plat, [tj(1, 0.0, 100.0, nodes=2), tj(2, 10.0, 100.0, nodes=2, gpus_per_node=2),
                           tj(3, 20.0, 50.0, nodes=1)], pol)
    engine.run()
    # At t=20, before job 3 starts: job 1 on cpu nodes 1 and 0 (2 x 300 W), job 2 on cpu node 2 (300 W) and
    # gpu node 3 (900 W + 2 GPUs x 300 W), gpu node 4 idle (250 W, not the first node's 100 W).
    fc = at(pol, 20.0)["forecast"]
    assert at(pol, 20.0)["running"].keys() == {1, 2}
    assert fc.measured_w == pytest.approx(600.0 + 300.0 + 1500.0 + 250.0)  # the engine's platform power
    assert fc.levels[0] == pytest.approx(fc.measured_w)  # the forecast's own model of it, node by node
