"""Borghesi et al. 2018 as the paper states it: the response to a power cut, Simple's allocation, DEC+RAPL's switch.

Numbers are worked out by hand: ``D' = D · (1 + F · (1/M − 1))`` (the default reading of §5.1.1),
``D' = max(1, F/M) · D`` (``clamped``), on nodes of idle 100 W and busy 300 W (200 W of dynamic power).
"""

from __future__ import annotations

import pytest

from builders import platform, snapshot, tj
from wattsched.model.constraints import CapSchedule
from wattsched.model.job import Job
from wattsched.model.plan import SetNodeCap
from wattsched.model.response import LinearResponse, ResponseScenario
from wattsched.policies import make_policy
from wattsched.policies.cp import DecRaplState, arrivals_in_window
from wattsched.sim.engine import Engine


@pytest.mark.parametrize(("f", "m", "interpolated", "clamped"), [
    (0.0, 0.5, 1.0, 1.0),       # F = 0: the ideal case, no slowdown whatever the cut
    (0.0, 0.1, 1.0, 1.0),
    (1.0, 0.5, 2.0, 2.0),       # F = 1: proportional, D / M
    (1.0, 0.25, 4.0, 4.0),
    (0.25, 0.5, 1.25, 1.0),     # 1 + 0.25 · (2 − 1); clamped: 0.25 / 0.5 < 1, no slowdown
    (0.25, 0.2, 2.0, 1.25),     # 1 + 0.25 · (5 − 1) = 2; clamped 0.25 / 0.2
    (0.25, 0.1, 3.25, 2.5),     # 1 + 0.25 · 9; clamped 0.25 / 0.1
    (0.25, 1.0, 1.0, 1.0),      # no cut, no slowdown in either reading
])
def test_linear_response_readings_by_hand(f, m, interpolated, clamped):
    assert LinearResponse(f=f, reading="interpolated").under_power_ratio(m) == (m, pytest.approx(interpolated))
    assert LinearResponse(f=f, reading="clamped").under_power_ratio(m) == (m, pytest.approx(clamped))


def test_interpolated_reading_is_eq_4_with_f_one_over_cpi():
    from wattsched.model.response import CpiResponse

    for cpi in (1.0, 2.0, 5.0):
        for m in (0.2, 0.5, 0.9):
            assert (LinearResponse(f=1 / cpi, reading="interpolated").under_power_ratio(m)[1]
                    == pytest.approx(CpiResponse(cpi=cpi).under_power_ratio(m)[1]))


def test_the_paper_scenarios_default_to_the_interpolated_reading_and_keep_the_clamped_one_as_an_option():
    assert ResponseScenario.parse("0.25").for_job(1, "cpu").under_power_ratio(0.5)[1] == pytest.approx(1.25)
    clamped = ResponseScenario.parse("0.25", reading="clamped")
    assert clamped.for_job(1, "cpu").under_power_ratio(0.5)[1] == pytest.approx(1.0)
    assert clamped.label() == "F=0.25, clamped"
    assert make_policy("dynshare", {"response": "mixed"}).response_scenario.reading == "interpolated"
    assert make_policy("dynshare", {"response": "mixed", "response_reading": "clamped"}).response_scenario.reading \
        == "clamped"
    with pytest.raises(ValueError, match="unknown reading 'x'"):
        LinearResponse(f=0.5, reading="x")


def _simple_run(allocation: str, f: str = "1"):
    # two nodes; the budget leaves 200 W above idle, one job's dynamic power; both jobs arrive at t = 0
    jobs = [tj(i, 0.0, 1000.0, walltime=1e7, mean_w=300.0, max_w=300.0, app_class="cpu") for i in (1, 2)]
    policy = make_policy("simple", {"response": f, "allocation": allocation})
    return Engine(platform(2), jobs, policy, cap=CapSchedule.constant(400.0)).run()


def test_simple_without_a_node_floor_penalizes_the_job_that_started_second():
    result = _simple_run("at_start")
    run = dict(zip(result.jobs["id"].tolist(), result.jobs["runtime_s"].tolist(), strict=True))
    # job 1 gets its 200 W; job 2 is left the paper's 1 W of 200 W: M = 1/200, F = 1: 200 × slower
    assert run[1] == pytest.approx(1000.0)
    assert run[2] == pytest.approx(200 * 1000.0)
    # the platform stays within the budget but for job 2's 1 W floor (no invented 150 W per node)
    assert float(result.timeline["power_w"].max()) <= 400.0 + 1.0 + 1e-6
    # with the even split both jobs get 100 W of their 200 W: M = 0.5, F = 1: twice as long
    even = _simple_run("even")
    assert even.jobs["runtime_s"].tolist() == pytest.approx([2000.0, 2000.0])


def test_dec_rapl_switch_counts_arrivals_including_jobs_that_ended():
    plat = platform(4)
    state = DecRaplState()
    six = [Job(i, 100.0 + i, 60.0, 1) for i in range(1, 7)]
    assert arrivals_in_window(snapshot(plat, six, now=110.0), state, 600.0) == 6
    # the six jobs ended: nothing is pending or running, but they arrived in the window
    assert arrivals_in_window(snapshot(plat, [], now=300.0), state, 600.0) == 6
    assert arrivals_in_window(snapshot(plat, [], now=703.5), state, 600.0) == 3  # 104..106 are still in it
    assert arrivals_in_window(snapshot(plat, [], now=800.0), state, 600.0) == 0
    assert state.arrivals == {}
    assert DecRaplState.from_json(DecRaplState(arrivals={3: 5.0}).to_json()).arrivals == {3: 5.0}


def test_dec_rapl_runs_dec_after_a_burst_of_arrivals_that_already_ended():
    pytest.importorskip("ortools", reason="dec needs OR-Tools")
    plat = platform(4)
    params = {"arrival_window_s": 600.0, "arrival_threshold_s": 100.0}  # dec above 6 arrivals in 10 min
    policy = make_policy("dec+rapl", params)
    state = policy.init_state()
    seven = [Job(i, 100.0 + i, 60.0, 1) for i in range(1, 8)]
    policy.decide(snapshot(plat, seven, now=110.0, cap=CapSchedule.constant(1000.0)), state)

    def empty(now):
        snap = snapshot(plat, [], now=now, cap=CapSchedule.constant(1000.0))
        snap.desired_node_cap_w = {n: 250.0 for n in range(4)}
        return snap

    # the burst ended: dec's branch (caps removed from the idle nodes), where counting the queue gave dynshare's
    assert policy.decide(empty(300.0), state).actions == [SetNodeCap(n, None) for n in range(4)]
    # out of the window: dynshare's (idle nodes keep their draw plus the headroom)
    assert policy.decide(empty(900.0), state).actions == [SetNodeCap(n, 110.0) for n in range(4)]
