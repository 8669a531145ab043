"""The policy contract: what a snapshot holds, what the guard refuses, the one lookahead, policy state."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builders import SIMPLE_POWER, platform, snapshot
from wattsched.model.constraints import BudgetState, CapSchedule, CapStep, DemandResponseEvent, EnergyBudget
from wattsched.model.guard import guard_horizon_s, plan_problems
from wattsched.model.job import Job, PowerEstimate
from wattsched.model.plan import Plan, SetNodeCap, SetNodeFreq, Start
from wattsched.model.platform import Node, NodePowerModel, Platform
from wattsched.model.response import CpiResponse
from wattsched.model.state import NoState, PolicyState
from wattsched.policies import make_policy
from wattsched.policies.easy import EasyState
from wattsched.policies.power import PowerLedger

P = platform(4)
J1 = Job(1, 0.0, 100.0, 1)
J2 = Job(2, 0.0, 400.0, 1)


# ---------------------------------------------------------------- guard: values


def test_a_start_with_an_impossible_frequency_and_cap_is_refused():
    s = snapshot(P, [J1])
    problems = plan_problems(s, Plan([Start(1, (0,), freq_hz=9e9, cap_w=1.0)]))
    assert any("frequency 9000000000.0 Hz not available on node node0000" in p for p in problems)
    assert any("cap 1.0 W for node node0000 outside [50.0, 300.0] W" in p for p in problems)
    assert plan_problems(s, Plan([Start(1, (0,), freq_hz=1.5e9, cap_w=200.0)])) == []


def test_a_start_is_checked_against_the_range_of_each_of_its_nodes():
    small = NodePowerModel(idle_w=100.0, busy_w=300.0, cap_min_w=50.0, cap_max_w=150.0, freq_levels_hz=(1e9, 2e9))
    plat = Platform([Node(0, "a", power=SIMPLE_POWER), Node(1, "b", power=small)])
    s = snapshot(plat, [Job(1, 0.0, 10.0, 2)])
    problems = plan_problems(s, Plan([Start(1, (0, 1), cap_w=200.0)]))
    assert problems == ["Start of job 1: cap 200.0 W for node b outside [50.0, 150.0] W"]


@pytest.mark.parametrize("action", [SetNodeCap(0, 10.0), SetNodeFreq(0, 5e9)])
def test_node_settings_out_of_range_are_refused(action):
    assert plan_problems(snapshot(P), Plan([action])) != []


# ---------------------------------------------------------------- guard: cap ahead and budgets


def test_the_estimate_is_held_to_a_cap_coming_within_the_shortest_started_job():
    cap = CapSchedule([CapStep(50.0, 600.0)])  # one step: 600 W from t=50
    s = snapshot(P, [J1, J2], cap=cap)
    plan = Plan([Start(1, (0,))], power_estimate_w=700.0)
    assert guard_horizon_s(s, plan) == 100.0
    assert any("exceeds the cap 600 W coming within the next 100 s" in p for p in plan_problems(s, plan))
    # the same plan with no foresight, or a job that ends before the step, passes
    assert plan_problems(snapshot(P, [J1, J2], cap=cap, cap_lookahead_s=0.0), plan) == []
    short = Job(3, 0.0, 40.0, 1)
    assert plan_problems(snapshot(P, [short], cap=cap), Plan([Start(3, (0,))], power_estimate_w=700.0)) == []
    # without starts only the cap in force counts
    assert plan_problems(s, Plan([], power_estimate_w=700.0)) == []


def test_the_estimate_must_fit_the_energy_left_in_a_budget():
    budget = BudgetState(EnergyBudget(0.0, 1000.0, 100_000.0), consumed_j=60_000.0)
    s = snapshot(P, [J1], budgets=[budget])
    # 500 W held for the job's 100 s is 50 kJ: more than the 40 kJ left
    problems = plan_problems(s, Plan([Start(1, (0,))], power_estimate_w=500.0))
    assert any("more than the 4e+04 J left in the energy budget" in p for p in problems)
    assert plan_problems(s, Plan([Start(1, (0,))], power_estimate_w=350.0)) == []


# ---------------------------------------------------------------- the one lookahead


def test_a_one_step_schedule_is_seen_ahead():
    cap = CapSchedule([CapStep(100.0, 700.0)])
    assert cap.lowest_cap(0.0, 99.0) == math.inf
    assert cap.lowest_cap(0.0, 150.0) == 700.0
    assert cap.lowest_cap(0.0, 150.0, horizon_s=50.0) == math.inf
    assert cap.lowest_cap(0.0, np.array([99.0, 100.0, 100.5])).tolist() == [math.inf, math.inf, 700.0]


steps = st.lists(st.tuples(st.integers(0, 100), st.sampled_from([100.0, 300.0, 500.0, math.inf])), max_size=6)


@settings(max_examples=200, deadline=None)
@given(steps, st.integers(-10, 110), st.lists(st.integers(0, 120), min_size=1, max_size=8),
       st.sampled_from([0.0, 5.0, 30.0, math.inf]))
def test_the_scalar_lookahead_is_the_vector_one_of_length_one(raw, start, durations, horizon):
    cap = CapSchedule([CapStep(float(t), c) for t, c in dict(raw).items()])  # one step per time
    vector = cap.lowest_cap(float(start), np.array(durations, dtype=float), horizon)
    scalar = [cap.lowest_cap(float(start), float(d), horizon) for d in durations]
    assert vector.tolist() == scalar
    # and both agree with the definition: the lowest cap in force at any instant of the window
    for d, got in zip(durations, scalar, strict=True):
        stop = start + min(max(d, 1e-9), horizon) if horizon > 0 else start + 1e-12
        probes = [float(start)] + [s.start_s for s in cap.steps if start < s.start_s < stop]
        assert got == min(cap.cap_at(t) for t in probes)


def test_snapshot_lookahead_sees_no_further_than_its_horizon():
    cap = CapSchedule.window(50.0, 60.0, 500.0)
    assert snapshot(P, cap=cap).lowest_cap(100.0) == 500.0
    assert snapshot(P, cap=cap, cap_lookahead_s=40.0).lowest_cap(100.0) == math.inf
    # a later start sees less far past it: the horizon runs from now
    assert snapshot(P, cap=cap, cap_lookahead_s=55.0).lowest_cap(100.0, start_s=20.0) == 500.0
    assert snapshot(P, cap=cap, cap_lookahead_s=45.0).lowest_cap(100.0, start_s=20.0) == math.inf


# ---------------------------------------------------------------- heterogeneous platforms


def test_heterogeneous_platforms_use_each_nodes_model_not_the_first():
    cpu = NodePowerModel(idle_w=100.0, busy_w=300.0)
    gpu = NodePowerModel(idle_w=80.0, busy_w=900.0, gpu_tdp_w=250.0)
    plat = Platform([Node(0, "c0", group="cpu", power=cpu), Node(1, "c1", group="cpu", power=cpu),
                     Node(2, "g0", group="gpu", gpus=2, power=gpu)])
    assert not plat.homogeneous
    assert plat.groups == {"cpu": (0, 1), "gpu": (2,)}
    assert plat.reference_power == cpu and plat.min_idle_w == 80.0
    assert plat.max_busy_w() == 900.0 and plat.max_busy_w(2) == 900.0 + 500.0
    assert plat.idle_w_of((0, 2)) == 180.0
    # a job without a prediction is estimated at the most any node can draw
    s = snapshot(plat, [Job(1, 0.0, 10.0, 1, gpus_per_node=2)])
    assert s.estimate(s.pending[1]) == PowerEstimate(1400.0, 1400.0, 0.0)
    # the power check counts the increment against the lowest idle power (the largest increment)
    assert PowerLedger.from_snapshot(s, "mean").idle_w == 80.0


def test_response_models_are_a_typed_field_of_the_platform():
    plat = Platform([Node(0, "a")], response_classes={"io": CpiResponse(cpi=8.0)})
    s = snapshot(plat, [Job(1, 0.0, 10.0, 1, app_class="io"), Job(2, 0.0, 10.0, 1, app_class="x")])
    assert s.response_for(s.pending[1]) == CpiResponse(cpi=8.0)
    assert s.response_for(s.pending[2]) is None
    assert "cpu" in platform(1).response_classes  # the defaults


# ---------------------------------------------------------------- demand response and state


def test_demand_response_targets():
    e = DemandResponseEvent(notice_s=0.0, start_s=60.0, end_s=120.0, reduction_w=250.0)
    assert e.target_cap_w(1000.0) == 750.0
    with pytest.raises(ValueError, match="exactly one target"):
        DemandResponseEvent(0.0, 1.0, 2.0)
    with pytest.raises(ValueError, match=r"notice .* comes after the start"):
        DemandResponseEvent(5.0, 1.0, 2.0, cap_w=10.0)


def test_policy_state_round_trips_through_json_and_caches_are_not_persisted():
    class Budget(PolicyState):
        spent_j: float = 0.0

    s = Budget()
    s.spent_j += 12.5
    assert Budget.from_json(s.to_json()) == s
    with pytest.raises(ValueError):
        Budget.from_json('{"spent_j": 1, "other": 2}')
    for name in ("fcfs", "easy", "easy-pc", "knapsack"):
        state = make_policy(name).init_state()
        assert isinstance(state, PolicyState)
        assert type(state).from_json(state.to_json()) == state
    easy = make_policy("easy").init_state()
    assert isinstance(easy, EasyState) and easy.to_json() == "{}"
    assert isinstance(make_policy("fcfs").init_state(), NoState)


def test_a_reshape_is_refused_where_the_cluster_cannot_move_running_jobs():
    from wattsched.model.plan import Reshape

    run = Job(9, 0.0, 100.0, 1, malleable=True, min_nodes=1, max_nodes=2)
    plan = Plan([Reshape(9, (0, 1))])
    assert plan_problems(snapshot(P, running=[(run, 0.0, (0,))]), plan) == []
    assert plan_problems(snapshot(P, running=[(run, 0.0, (0,))], can_reshape=False), plan) == [
        "Reshape of job 9: this cluster cannot move a running job"]


# ---------------------------------------------------------------- the live snapshot's defaults


def test_the_daemons_snapshot_fills_the_contract_with_what_live_knows():
    from pathlib import Path

    from wattsched.daemon.slurm.parse import parse_nodes_json, parse_squeue_json
    from wattsched.daemon.slurm.records import ClusterState
    from wattsched.daemon.view import build_view

    live = Path(__file__).resolve().parents[1] / "fixtures" / "slurm" / "v0.0.38-live"
    jobs, _ = parse_squeue_json((live / "squeue.json").read_text())
    nodes, _ = parse_nodes_json((live / "sinfo.json").read_text())
    state = ClusterState(tuple(jobs), tuple(nodes), version="22.05.8", read_at=1795314600.0)
    schedule = CapSchedule.window(1795314600.0 + 60, 1795314600.0 + 600, 700.0)
    snap = build_view(state, partitions=frozenset(), holds={}, starts={}, power=SIMPLE_POWER,
                      cap_w=lambda _platform: schedule, estimator=None, epoch=1, include_adopted=False,
                      platform_cache={}).snapshot
    assert snap.running, "the capture has running jobs"
    for r in snap.running.values():
        elapsed = snap.now_s - r.start_s
        assert r.progress(snap.now_s) == pytest.approx(min(1.0, elapsed / r.job.walltime_s))
    assert snap.cap is schedule and snap.cap_w == math.inf and snap.lowest_cap(3600.0) == 700.0
    assert snap.can_reshape is False and snap.dr_events == () and snap.forecast is None
