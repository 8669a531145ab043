"""The ledger filled from a live cluster: node states, jobs found running and measured power (the daemon's view).

The daemon builds its snapshot with the same ledger the simulator's engine
drives, so a job found running must be accounted exactly as the engine
accounts a job it started (power through the response models, units on
shared nodes), and measured power must replace the prediction where it was
read without losing a watt anywhere else.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wattsched.daemon.view import Expected
from wattsched.model.job import Job, Unit
from wattsched.model.ledger import Ledger
from wattsched.model.platform import Node, NodePowerModel, NodeState, Platform
from wattsched.model.response import LinearResponse
from wattsched.workload.records import TraceJob

PM = NodePowerModel(idle_w=100.0, busy_w=260.0, off_w=10.0, cap_min_w=100.0, cap_max_w=300.0,
                    freq_levels_hz=(1.0e9, 1.2e9, 1.5e9, 2.0e9))
IDLE, BUSY, OFF, DRAINED = (int(s) for s in (NodeState.IDLE, NodeState.BUSY, NodeState.OFF, NodeState.DRAINED))
RESPONSES = {"cpu": LinearResponse(f=1.0, floor=0.3), "mem": LinearResponse(f=0.3, floor=0.3)}


def plat(n: int = 4) -> Platform:
    return Platform([Node(i, f"n{i}", cores=16, power=PM) for i in range(n)], response_classes=RESPONSES)


def job(jid: int, nodes: int = 1, units: tuple = (), app_class: str = "cpu") -> Job:
    return Job(jid, 0.0, 1000.0, len(units) or nodes, app_class=app_class, units=units, distinct_nodes=False)


def started(ledger: Ledger, j: Job, nodes: tuple[int, ...], mean_w: float | None):
    """``j`` started the simulator's way: submitted, then started with its trace record."""
    ledger.submit(j)
    truth = TraceJob(j.id, 0.0, 1000.0, 1000.0, 16 * j.nodes, j.nodes, mean_w=mean_w, app_class=j.app_class,
                     units=j.units)
    return ledger.start(j.id, nodes, None, None, truth)


# (job, nodes, predicted per-node or per-unit power); node 3 is left free
JOBS = [
    (job(1, 2), (1, 0), 250.0),
    (job(2, units=(Unit(4), Unit(8)), app_class="mem"), (2, 2), 180.0),
    (job(3, units=(Unit(4),)), (2,), None),
]


@pytest.mark.parametrize("settings_", [{}, {"cap": {0: 150.0, 2: 200.0}}, {"freq": {1: 1.5e9, 2: 1.2e9}}])
def test_a_job_found_running_is_accounted_as_the_engine_accounts_a_job_it_started(settings_):
    engine, live = Ledger(plat()), Ledger(plat())
    for ledger in (engine, live):
        for i, cap in settings_.get("cap", {}).items():
            ledger.set_node_cap(i, cap)
        for i, freq in settings_.get("freq", {}).items():
            ledger.set_node_freq(i, freq)
    for j, nodes, mean_w in JOBS:
        started(engine, j, nodes, mean_w)
        assert live.observe_run(j, 0.0, nodes, Expected(1000.0, mean_w, 0)) is not None
    assert live.free == engine.free == [3]
    assert live.state == engine.state and live.node_free == engine.node_free
    assert live.power_w == pytest.approx(engine.power_w)
    for jid, r in engine.running.items():
        other = live.running[jid]
        assert (other.power_w, other.speed) == pytest.approx((r.power_w, r.speed))
        assert (other.cap_w, other.freq_hz, other.nodes) == (r.cap_w, r.freq_hz, r.nodes)
    if settings_:
        assert any(r.power_w < 250.0 * 2 for r in live.running.values())  # the settings did cut power


def test_a_job_found_running_keeps_its_own_start_and_expected_end():
    ledger = Ledger(plat())
    ledger.open(5000.0)
    ledger.observe_run(job(1), 4200.0, (0,), Expected(1000.0, 200.0, 0))
    r = ledger.running[1]
    assert (r.start_s, r.expected_end_s) == (4200.0, 5200.0)
    assert ledger.ends == [(5200.0, 1, 1)]


def test_a_whole_node_job_on_a_node_already_taken_is_left_out():
    ledger = Ledger(plat())
    ledger.observe_run(job(1), 0.0, (0,), Expected(1000.0, 200.0, 0))
    before = ledger.power_w
    assert ledger.observe_run(job(2, 2), 0.0, (1, 0), Expected(1000.0, 200.0, 0)) is None
    assert 2 not in ledger.running and ledger.power_w == before and ledger.state[1] == IDLE and 1 in ledger.free


def test_measured_power_replaces_the_prediction_where_it_was_read():
    ledger = Ledger(plat())
    for j, nodes, mean_w in JOBS:
        ledger.observe_run(j, 0.0, nodes, Expected(1000.0, mean_w, 0))
    ledger.observe_state(3, OFF)
    # node 2 shares jobs 2 (two units predicted 80 W above idle each) and 3 (4 cores of 16 at the default power:
    # a quarter of the 160 W between idle and busy, 40 W)
    ledger.observe_power({0: 240.0, 2: 400.0, 3: 12.0})
    # job 1: node 0 measured, node 1 as predicted
    assert ledger.running[1].power_w == pytest.approx(240.0 + 250.0)
    # node 2: 300 W above idle, split 80:80:40 among the units; the idle 100 W by cores (4+8 of 16, 4 of 16)
    assert ledger.running[2].power_w == pytest.approx(100.0 * 12 / 16 + 300.0 * 160 / 200)
    assert ledger.running[3].power_w == pytest.approx(100.0 * 4 / 16 + 300.0 * 40 / 200)
    assert ledger.power_w == pytest.approx(240.0 + 250.0 + 400.0 + 12.0)  # node 3 off, read at 12 W


def test_a_shared_node_read_below_idle_gives_its_units_their_idle_share_alone():
    ledger = Ledger(plat())
    ledger.observe_run(job(2, units=(Unit(8),)), 0.0, (0,), Expected(1000.0, 180.0, 0))
    ledger.observe_power({0: 90.0})
    assert ledger.running[2].power_w == pytest.approx(50.0)  # half the cores: half the idle 100 W, nothing above
    assert ledger.power_w == pytest.approx(100.0 + 3 * 100.0)


def test_a_node_running_jobs_reported_drained_keeps_their_power():
    ledger = Ledger(plat())
    ledger.observe_run(job(1), 0.0, (0,), Expected(1000.0, 250.0, 0))
    ledger.observe_state(0, DRAINED)
    ledger.observe_state(1, DRAINED)
    assert ledger.state[:2] == [DRAINED, DRAINED] and ledger.free == [3, 2]
    assert ledger.running[1].power_w == 250.0 and ledger.power_w == pytest.approx(250.0 + 3 * 100.0)


def test_units_of_another_partition_take_their_part_of_a_node():
    ledger = Ledger(plat())
    ledger.observe_units(3, (Unit(6),))
    assert ledger.state[3] == BUSY and 3 not in ledger.free and ledger.node_free[3][0] == 10
    ledger.observe_run(job(4, units=(Unit(10),)), 0.0, (3,), Expected(1000.0, 200.0, 0))
    assert ledger.node_free[3][0] == 0 and ledger.running[4].power_w == pytest.approx(100.0 * 10 / 16 + 100.0)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.sampled_from([None, 140.0, 220.0, 300.0]),
                          st.integers(1, 16), st.booleans()), min_size=1, max_size=8),
       st.dictionaries(st.integers(0, 5), st.floats(0.0, 600.0, allow_nan=False), max_size=6),
       st.dictionaries(st.integers(0, 5), st.sampled_from([120.0, 180.0]), max_size=3))
def test_measured_power_is_kept_whole_and_the_rest_stays_predicted(specs, measured, caps):
    """Property: after the measured power is applied, the platform draws what was read on every node read (a
    shared node never below idle) and what was predicted on every other one; the jobs' power sums to that
    minus the power of the nodes without jobs and the idle share of free cores."""
    ledger = Ledger(plat(6))
    for i, cap in caps.items():
        ledger.set_node_cap(i, cap)
    for jid, (node, mean_w, cores, shared) in enumerate(specs, start=1):
        j = job(jid, units=(Unit(cores),)) if shared else job(jid)
        ledger.observe_run(j, 0.0, (node,), Expected(1000.0, mean_w, 0))
    predicted = ledger.node_power_w()
    ledger.observe_power(measured)
    want = 0.0
    for n, p in enumerate(predicted):
        if n not in measured:
            want += p
        elif n in ledger.node_runs:
            want += max(measured[n], PM.idle_w)
        else:
            want += measured[n]
    assert ledger.power_w == pytest.approx(want)
    idle_of_free_cores = sum(PM.idle_w * ledger.node_free[n][0] / 16 for n in ledger.node_runs)
    others = sum(measured.get(n, predicted[n]) for n in range(6) if ledger.state[n] != BUSY)
    assert sum(r.power_w for r in ledger.running.values()) == pytest.approx(ledger.power_w - others
                                                                             - idle_of_free_cores)
