"""The cluster ledger's typed operations, driven directly (no engine, no clock but :meth:`Ledger.advance`)."""

from __future__ import annotations

import pytest

from wattsched.model.job import Job, PowerEstimate, Unit
from wattsched.model.ledger import Ledger
from wattsched.model.platform import Node, NodePowerModel, NodeState, Platform
from wattsched.model.response import LinearResponse
from wattsched.workload.records import TraceJob

PM = NodePowerModel(idle_w=100.0, busy_w=260.0, cap_min_w=100.0, cap_max_w=300.0)
IDLE, BUSY = int(NodeState.IDLE), int(NodeState.BUSY)


def plat(n: int = 2) -> Platform:
    return Platform([Node(i, f"n{i}", cores=16, power=PM) for i in range(n)])


def submit(ledger: Ledger, jid: int, nodes: int = 1, *, mean_w: float = 250.0, runtime_s: float = 100.0,
           units: tuple = (), app_class: str = "") -> TraceJob:
    """Submit a job to ``ledger``; returns its trace record (the truth a start needs)."""
    ledger.submit(Job(jid, 0.0, 1000.0, nodes, app_class=app_class, units=units))
    return TraceJob(jid, 0.0, runtime_s, 1000.0, 16 * nodes, nodes, mean_w=mean_w, app_class=app_class,
                    units=units)


def test_a_job_of_units_ended_gives_its_capacity_back_to_the_shared_node():
    ledger = Ledger(plat(2))
    a = submit(ledger, 1, units=(Unit(8),))
    b = submit(ledger, 2, units=(Unit(8),))
    run_a = ledger.start(1, (0,), None, None, a)
    run_b = ledger.start(2, (0,), None, None, b)
    assert ledger.node_free[0][0] == 0  # both units on node 0: its 16 cores taken
    assert ledger.state[0] == BUSY and 0 not in ledger.free and ledger.free == [1]
    assert ledger.node_runs[0] == [run_a, run_b]
    ledger.end(run_a)
    assert ledger.node_free[0][0] == 8 and ledger.state[0] == BUSY and ledger.free == [1]
    assert 1 not in ledger.runs and 2 in ledger.runs
    ledger.end(run_b)
    assert ledger.node_free == {} and ledger.node_runs == {}
    assert ledger.state[0] == IDLE and ledger.free == [1, 0]
    assert ledger.power_w == 200.0 and ledger.running == {} and ledger.ends == []
    assert ledger.running_est == [0.0, 0.0, 0.0]


def test_energy_is_integrated_exactly_between_two_advances():
    ledger = Ledger(plat(2))
    ledger.open(100.0)
    truth = submit(ledger, 1, mean_w=250.0)
    run = ledger.start(1, (0,), None, None, truth)
    assert ledger.power_w == 350.0  # node 0 at the job's 250 W, node 1 idle at 100 W
    ledger.advance(110.0)
    assert ledger.energy_j == 3500.0
    ledger.end(run)
    assert run.energy_j == 2500.0 and run.work_done_s == 10.0
    assert ledger.power_w == 200.0
    ledger.advance(130.0)
    assert ledger.energy_j == 3500.0 + 200.0 * 20.0
    ledger.advance(120.0)  # the books never go back
    assert ledger.energy_j == 7500.0 and ledger.now == 130.0
    ledger.close()
    assert ledger.state_energy_j[BUSY] == 2500.0
    assert ledger.state_energy_j[IDLE] == 100.0 * 10.0 + 200.0 * 20.0
    assert ledger.state_node_s[BUSY] == 10.0 and ledger.state_node_s[IDLE] == 10.0 + 2 * 20.0


@pytest.mark.parametrize(("f", "speed"), [(1.0, 0.5), (0.5, 1.0)])
def test_a_cap_change_re_rates_a_running_job_through_its_response_model(f, speed):
    ledger = Ledger(plat(2), responses={"cpu": LinearResponse(f=f)})
    truth = submit(ledger, 1, mean_w=250.0, runtime_s=100.0, app_class="cpu")
    run = ledger.start(1, (0,), None, None, truth)
    assert run.speed == 1.0 and run.power_w == 250.0
    ledger.advance(50.0)
    ledger.set_node_cap(0, 125.0)  # half the job's nominal power: Borghesi's D' = max(D, F·D/M), M = 0.5
    assert ledger.rerated == [run]
    assert ledger.node_cap_w == {0: 125.0}
    assert run.power_w == 125.0 and run.speed == speed
    assert run.work_left_s == 50.0  # settled at the change: the rest runs at the new speed
    assert ledger.running[1].power_w == 125.0 and ledger.running[1].cap_w == 125.0
    assert ledger.power_w == 125.0 + 100.0
    ledger.rerated.clear()
    ledger.advance(60.0)
    ledger.set_node_cap(0, None)
    assert ledger.rerated == [run] and ledger.node_cap_w == {}
    assert run.power_w == 250.0 and run.speed == 1.0
    assert run.work_left_s == 50.0 - 10.0 * speed
    assert run.energy_j == 250.0 * 50.0 + 125.0 * 10.0


def test_eviction_wastes_the_attempt_energy_and_requeues_the_job():
    ledger = Ledger(plat(2), estimate=lambda job: PowerEstimate(240.0, 260.0, 10.0))
    truth = submit(ledger, 1, nodes=2, mean_w=250.0)
    run = ledger.start(1, (1, 0), None, None, truth)
    assert ledger.pending == {} and ledger.running_est == [480.0, 520.0, 400.0]
    ledger.advance(40.0)
    job = ledger.evict(run)
    acc = ledger.accounts[1]
    assert acc.evictions == 1
    assert acc.wasted_j == 2 * 250.0 * 40.0 and acc.energy_j == acc.wasted_j
    assert acc.wasted_node_s == 2 * 40.0
    assert ledger.runs == {} and ledger.running == {} and ledger.ends == []
    assert ledger.free == [1, 0] and ledger.power_w == 200.0
    assert ledger.running_est == [0.0, 0.0, 0.0]
    ledger.requeue(job)
    assert list(ledger.pending) == [1]
    assert ledger.energy_j == 500.0 * 40.0  # the energy was drawn all the same


def test_a_start_takes_its_nodes_off_the_free_list_and_keeps_the_end_indexes():
    ledger = Ledger(plat(4), end_table=True)
    t1 = submit(ledger, 1, nodes=2)
    t2 = submit(ledger, 2, nodes=1)
    ledger.advance(5.0)
    ledger.start(2, (0,), None, None, t2)
    ledger.start(1, (2, 1), None, None, t1)
    assert ledger.free == [3]
    assert ledger.ends == [(1005.0, 1, 2), (1005.0, 2, 1)]  # expected ends: start + requested time
    assert ledger.end_table.view()[:, 0].tolist() == [1005.0, 1005.0]
    assert len(ledger.qindex) == 0 and ledger.pending == {}
