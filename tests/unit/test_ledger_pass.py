"""Jobs of a PASS application on an overprovisioned platform: run times and power worked out by hand.

LeanMD (Table IV of Sarood et al. 2014, A 128, σ 0.5, T1 69,423.7 s in the packaged file) asked 20 nodes and ran
3,600 s in its trace. Downey's model (Eq. 9, n <= A): t(n) = (T1 − T1σ/2A)/n + T1σ/2A, so t(20) = 3,599.9985 s and
t(10) = 7,064.4038 s: on 10 nodes at full CPU power it takes 3,600 · t(10)/t(20) = 7,064.4068 s. At a node cap of
95 W the CPU gets 95 − 38 − 18 = 39 W; the CPU power model 1.65 f³ + 7.74 f + 13.5 gives f = 1.87941 GHz there,
1.46353 at p_l = 30 W and 2.31824 at p_h = 52 W, so K = β f_l / ((1 − β)(f_h − f_l)) = 1.14154 and the slowdown
g = 1 + K (f_h/f − 1) = 1.26654: 8,947.3510 s. Each node draws base 38 W + memory 18 W + its CPU power.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builders import platform as simple_platform
from wattsched.config.platform import load_platform
from wattsched.model.job import Job
from wattsched.model.ledger import Ledger
from wattsched.model.platform import Platform
from wattsched.scalingmodels import packaged_pass_models
from wattsched.workload.records import TraceJob

T10 = 7064.4068  # leanmd, asked 20 nodes for 3,600 s, on 10 nodes at p_h
T10_39W = 8947.3510  # the same at a CPU cap of 39 W (node cap 95 W)
TESTBED = load_platform("sarood-testbed")
MODELS = packaged_pass_models()


def submit(ledger: Ledger, jid: int, nodes: int = 20, *, app: str = "leanmd", runtime_s: float = 3600.0,
           mean_w: float | None = 100.0) -> TraceJob:
    ledger.submit(Job(jid, 0.0, 1e6, nodes, min_nodes=max(1, nodes // 4), max_nodes=nodes, app=app))
    return TraceJob(jid, 0.0, runtime_s, 1e6, 6 * nodes, nodes, mean_w=mean_w, min_nodes=max(1, nodes // 4),
                    max_nodes=nodes, extra={"app": app} if app else {})


def duration(run) -> float:
    return run.work_left_s / run.speed


def test_on_its_requested_nodes_at_full_power_a_job_runs_its_trace_time_at_base_mem_and_p_h():
    ledger = Ledger(TESTBED, pass_models=MODELS)
    run = ledger.start(1, tuple(range(20)), None, None, submit(ledger, 1))
    assert run.speed == 1.0 and duration(run) == 3600.0
    assert run.node_power_w == 38.0 + 18.0 + 52.0  # uncapped: the CPU draws leanmd's p_h, 52 W
    assert run.power_w == 20 * 108.0  # the trace's mean_w (100 W) is not what a PASS job draws
    assert ledger.power_w == pytest.approx(20 * 108.0 + 18 * 69.5)


def test_on_fewer_nodes_it_takes_downeys_ratio_longer():
    ledger = Ledger(TESTBED, pass_models=MODELS)
    run = ledger.start(1, tuple(range(10)), None, None, submit(ledger, 1))
    assert duration(run) == pytest.approx(T10, abs=1e-3)
    assert run.power_w == 10 * 108.0


def test_a_capped_job_takes_longer_still_and_draws_base_mem_and_its_cpu_cap():
    ledger = Ledger(TESTBED, pass_models=MODELS)
    run = ledger.start(1, tuple(range(10)), 95.0, None, submit(ledger, 1))
    assert duration(run) == pytest.approx(T10_39W, abs=1e-3)
    assert run.node_power_w == 95.0 and run.power_w == 950.0
    ledger.end(run)
    assert ledger.node_cap_w == {}  # the Start's cap leaves with the job


def test_a_cap_above_p_h_neither_speeds_the_job_up_nor_raises_its_power():
    ledger = Ledger(TESTBED, pass_models=MODELS)
    run = ledger.start(1, tuple(range(10)), 116.0, None, submit(ledger, 1))  # CPU 60 W > p_h 52 W
    assert duration(run) == pytest.approx(T10, abs=1e-3) and run.node_power_w == 108.0


def test_a_cap_set_while_it_runs_re_rates_it_and_the_slowest_node_sets_the_pace():
    ledger = Ledger(TESTBED, pass_models=MODELS)
    run = ledger.start(1, tuple(range(10)), None, None, submit(ledger, 1))
    ledger.advance(1000.0)
    ledger.set_node_cap(3, 95.0)  # one node capped at CPU 39 W: the job goes at that node's pace
    assert ledger.rerated == [run]
    assert run.work_left_s == pytest.approx(3600.0 * (1 - 1000.0 / T10))
    assert 1000.0 + duration(run) == pytest.approx(1000.0 + T10_39W * (1 - 1000.0 / T10), abs=1e-3)
    assert run.power_w == 9 * 108.0 + 95.0  # each node draws its own CPU power
    ledger.set_node_cap(3, None)
    assert duration(run) == pytest.approx(T10 - 1000.0, abs=1e-3)


def test_a_reshaped_job_changes_speed_by_pass_not_by_linear_speedup():
    ledger = Ledger(TESTBED, pass_models=MODELS)
    run = ledger.start(1, tuple(range(10)), None, None, submit(ledger, 1))
    ledger.advance(1000.0)
    ledger.reshape(run, tuple(range(20)))
    assert run.work_left_s == pytest.approx(3600.0 * (1 - 1000.0 / T10))  # work unchanged
    assert run.speed == 1.0 and run.power_w == 20 * 108.0


def test_every_packaged_app_draws_its_own_p_h_uncapped():
    ledger = Ledger(TESTBED, pass_models=MODELS)
    for jid, app in enumerate(sorted(MODELS), 1):
        run = ledger.start(jid, (jid,), None, None, submit(ledger, jid, 1, app=app, runtime_s=50.0))
        assert run.node_power_w == 56.0 + MODELS[app].p_h and run.speed == 1.0


def test_a_platform_without_cpu_levels_times_no_job_by_pass():
    ledger = Ledger(simple_platform(20), pass_models=MODELS)
    assert ledger.pass_models == {}
    run = ledger.start(1, tuple(range(10)), None, None, submit(ledger, 1))
    assert run.pass_model is None and run.speed == 1.0 and run.power_w == 10 * 100.0 and duration(run) == 3600.0


def _plain(platform: Platform) -> Platform:
    """``platform`` without its PASS data (the same nodes and response classes)."""
    return Platform(platform.nodes, platform.name, platform.response_classes, platform.source)


def _state(run, ledger):
    return (run.speed, run.power_w, run.node_power_w, run.work_left_s, run.work_done_s, run.energy_j,
            ledger.power_w, ledger.energy_j, run.view)


@settings(max_examples=150, deadline=None)
@given(nodes=st.integers(1, 38), runtime=st.floats(0.0, 1e5), mean_w=st.one_of(st.none(), st.floats(70.0, 116.0)),
       start_cap=st.one_of(st.none(), st.floats(86.0, 116.0)), later_cap=st.one_of(st.none(), st.floats(86.0, 116.0)),
       at=st.floats(0.0, 1e5), plain_platform_with_app=st.booleans())
def test_a_job_without_an_app_or_without_pass_data_is_untouched(nodes, runtime, mean_w, start_cap, later_cap, at,
                                                                plain_platform_with_app):
    """The same job, capped the same way, runs and draws exactly as before PASS: the ledger without models is the
    reference (a job with no app on the testbed; a job with an app on the testbed stripped of its PASS data)."""
    app = "lulesh" if plain_platform_with_app else ""
    platform = _plain(TESTBED) if plain_platform_with_app else TESTBED
    states = []
    for models in (MODELS, None):
        ledger = Ledger(platform, pass_models=models)
        truth = submit(ledger, 1, nodes, app=app, runtime_s=runtime, mean_w=mean_w)
        run = ledger.start(1, tuple(range(nodes)), start_cap, None, truth)
        assert run.pass_model is None
        ledger.advance(at)
        ledger.set_node_cap(0, later_cap)
        ledger.advance(at * 1.5)
        ledger.settle(run)
        states.append(_state(run, ledger))
    assert states[0] == states[1]


def test_a_job_larger_than_the_testbed_runs_a_larger_problem_and_still_scales():
    """LeanMD asked 3,800 nodes on Intrepid (the packaged A describes 38 nodes, so its A is 128 · 3,800/38 =
    12,800): on 1,900 nodes, Eq. 9 with tail σ/2A = 1.953125e-5 gives t(1900)/t(3800) = 5.458368e-4 / 2.826840e-4,
    so 3,600 s become 6,951.27 s. With A left at 128 both counts are past 2A − 1 = 255 and the job would take
    3,600 s on either: PARM's node-count choice would cost nothing."""
    intrepid = load_platform("intrepid-overprovisioned")
    assert MODELS["leanmd"].ref_nodes == 38
    ledger = Ledger(intrepid, pass_models=MODELS)
    whole = ledger.start(1, tuple(range(3800)), None, None, submit(ledger, 1, 3800))
    half = ledger.start(2, tuple(range(3800, 5700)), None, None, submit(ledger, 2, 3800))
    assert whole.pass_model.A == 12800.0 and duration(whole) == 3600.0
    assert duration(half) == pytest.approx(6951.27, abs=0.01)
    small = ledger.start(3, tuple(range(5700, 5720)), None, None, submit(ledger, 3, 20))
    assert small.pass_model is MODELS["leanmd"]  # at or below 38 nodes: the packaged model itself
