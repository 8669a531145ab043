"""The power forecast on hand-built snapshots (SIMPLE_POWER: off 10 W, idle 100 W, busy 300 W)."""

import math

import pytest

from builders import platform, snapshot
from wattsched.model.job import Job, PowerEstimate
from wattsched.model.plan import Evict, Plan, PowerDown, PowerUp, SetNodeCap, Start
from wattsched.model.platform import NodeState
from wattsched.telemetry.forecast import HORIZONS, forecast


def job(id, nodes=2, walltime=600.0):
    return Job(id=id, submit_s=0.0, walltime_s=walltime, nodes=nodes)


def test_idle_platform_is_flat_and_sampled_every_step():
    f = forecast(snapshot(platform(4)), horizon_s=7200, step_s=300)
    assert f.times == tuple(float(300 * k) for k in range(25))
    assert f.watts == (400.0,) * 25
    assert f.peak() == 400.0


def test_running_job_power_drops_after_its_expected_end():
    snap = snapshot(platform(4), running=[(job(1), 0.0, (0, 1))])
    f = forecast(snap, horizon_s=1800, step_s=300)
    # 2 nodes at 300 W + 2 idle at 100 W until t=600, then all idle
    assert f.watts == (800.0, 800.0, 400.0, 400.0, 400.0, 400.0, 400.0)
    assert f.at(599.0) == 800.0
    assert f.at(600.0) == 400.0
    assert f.at(1800.0) == 400.0
    assert f.peak() == 800.0


def test_running_job_uses_the_predicted_estimate_or_its_power():
    snap = snapshot(platform(4), running=[(job(1), 0.0, (0, 1))], estimates={1: PowerEstimate(250.0, 280.0, 5.0)})
    assert forecast(snap, horizon_s=600, step_s=300).watts[0] == 2 * 250.0 + 2 * 100.0
    snap = snapshot(platform(4), running=[(job(1), 0.0, (0, 1))])
    snap.running[1] = type(snap.running[1])(job(1), 0.0, (0, 1), 600.0, power_w=440.0)
    assert forecast(snap, horizon_s=600, step_s=300).watts[0] == 440.0 + 200.0


def test_job_past_its_expected_end_counts_as_ending_now():
    snap = snapshot(platform(2), running=[(job(1, nodes=1), 0.0, (0,))], now=1000.0)
    f = forecast(snap, horizon_s=600, step_s=300)
    assert f.times == (1000.0, 1300.0, 1600.0)
    assert f.watts == (200.0, 200.0, 200.0)


def test_planned_starts_add_for_their_walltime():
    pending = [job(2, nodes=2, walltime=1800.0), job(3, nodes=1, walltime=300.0)]
    snap = snapshot(platform(4), pending=pending, running=[(job(1, nodes=1), 0.0, (0,))], now=0.0)
    plan = Plan([Start(2, (1, 2)), Start(3, (3,))])
    f = forecast(snap, plan, horizon_s=3600, step_s=600)
    # t=0: 4 busy nodes; job 3 ends at 300, job 1 at 600, job 2 at 1800
    assert f.at(0) == 1200.0
    assert f.at(300) == 1000.0
    assert f.at(600) == 800.0
    assert f.at(1800) == 400.0
    assert f.watts == (1200.0, 800.0, 800.0, 400.0, 400.0, 400.0, 400.0)
    assert forecast(snap, None, horizon_s=3600, step_s=600).at(0) == 600.0  # without the plan


def test_planned_start_uses_the_estimate_and_its_cap():
    snap = snapshot(platform(2), pending=[job(2, nodes=1)], estimates={2: PowerEstimate(220.0, 260.0)})
    assert forecast(snap, Plan([Start(2, (0,))]), horizon_s=600, step_s=300).at(0) == 220.0 + 100.0
    assert forecast(snap, Plan([Start(2, (0,), cap_w=150.0)]), horizon_s=600, step_s=300).at(0) == 150.0 + 100.0
    assert forecast(snap, Plan([Start(2, (0,)), SetNodeCap(0, 180.0)]), horizon_s=600, step_s=300).at(0) == 280.0


def test_off_and_switching_nodes_count_their_state_power():
    snap = snapshot(platform(4))
    snap.node_state[3] = int(NodeState.OFF)
    snap.node_state[2] = int(NodeState.SWITCHING_ON)  # 150 W for 20 s, then idle
    f = forecast(snap, horizon_s=600, step_s=300)
    assert f.at(0) == 100.0 + 100.0 + 150.0 + 10.0
    assert f.at(20) == 100.0 + 100.0 + 100.0 + 10.0
    assert f.watts == (360.0, 310.0, 310.0)


def test_power_down_and_up_actions():
    snap = snapshot(platform(2))
    snap.node_state[1] = int(NodeState.OFF)
    f = forecast(snap, Plan([PowerDown(0), PowerUp(1)]), horizon_s=600, step_s=300)
    assert f.at(0) == 120.0 + 150.0  # switching off, switching on
    assert f.at(5) == 10.0 + 150.0
    assert f.at(20) == 10.0 + 100.0


def test_evicted_job_power_stops_now():
    snap = snapshot(platform(2), running=[(job(1), 0.0, (0, 1))])
    assert forecast(snap, Plan([Evict(1)]), horizon_s=600, step_s=300).at(0) == 200.0


def test_measured_power_is_the_first_point():
    snap = snapshot(platform(4), running=[(job(1), 0.0, (0, 1))], platform_power_w=950.0)
    f = forecast(snap, horizon_s=1200, step_s=300)
    assert f.watts[0] == 950.0
    assert f.at(0) == 950.0
    assert f.at(1) == 800.0
    assert f.peak() == 950.0


def test_horizons_for_metrics():
    snap = snapshot(platform(4), running=[(job(1, walltime=1200.0), 0.0, (0, 1))])
    f = forecast(snap, horizon_s=7200, step_s=300)
    assert f.horizons(HORIZONS) == {"15m": 800.0, "30m": 400.0, "1h": 400.0, "2h": 400.0}
    assert f.horizons({"now": 0, "10m": 600}) == {"now": 800.0, "10m": 800.0}
    with pytest.raises(ValueError, match="outside the forecast"):
        f.horizons({"3h": 10800})


def test_horizon_not_a_multiple_of_step_ends_at_the_horizon():
    f = forecast(snapshot(platform(1)), horizon_s=1000, step_s=300)
    assert f.times == (0.0, 300.0, 600.0, 900.0, 1000.0)


@pytest.mark.parametrize(
    "horizon, step, match",
    [
        (0, 300, "horizon_s must be a positive"),
        (-60, 30, "horizon_s must be a positive"),
        (math.inf, 300, "horizon_s must be a positive"),
        (7200, 0, "step_s must be a positive"),
        (7200, math.nan, "step_s must be a positive"),
        (600, 900, r"step_s \(900\) must not exceed horizon_s \(600\)"),
        (86400 * 365, 1, "more than 10000"),
    ],
)
def test_horizon_and_step_validation(horizon, step, match):
    with pytest.raises(ValueError, match=match):
        forecast(snapshot(platform(1)), horizon_s=horizon, step_s=step)


def test_forecast_leaves_the_snapshot_unchanged():
    snap = snapshot(platform(3), pending=[job(2, nodes=1)], running=[(job(1), 0.0, (0, 1))])
    before = (dict(snap.pending), dict(snap.running), list(snap.free_nodes), list(snap.node_state))
    forecast(snap, Plan([Start(2, (2,))]))
    assert before == (dict(snap.pending), dict(snap.running), list(snap.free_nodes), list(snap.node_state))
