"""Greedy knapsack (Algorithm 2): profit/weight order, stop at the first misfit, EASY outside the window."""

from __future__ import annotations

import random

import pytest

from builders import platform, snapshot, tj
from wattsched.model.constraints import CapSchedule
from wattsched.model.guard import plan_problems
from wattsched.model.job import Job, PowerEstimate
from wattsched.policies import make_policy
from wattsched.predictors import make_predictor
from wattsched.sim.engine import Engine, EngineOptions

# SIMPLE_POWER: idle 100 W, busy 300 W per node. Without a predictor a job is estimated at 300 W per node.


def run(jobs, policy, predictor=None, n=4, cap=None, options=None):
    return Engine(platform(n), jobs, policy, cap=cap, predictor=predictor, options=options).run()


NO_FORESIGHT = EngineOptions(cap_lookahead_s=0.0)
"""A site that announces no cap change ahead: the guard holds plans to the cap in force only."""


def starts(result):
    return dict(zip(result.jobs["id"].tolist(), result.jobs["start_s"].tolist()))


def capped(pending, watts, now=100.0, cap=None, n=4, running=(), other_w=None):
    """An ``n``-node machine at ``now`` under a constant ``cap`` (default: room for 250 W above idle).

    ``other_w`` is the measured power of all but the running jobs (default: ``n`` idle nodes).
    """
    plat = platform(n)
    est = {j.id: PowerEstimate(w, w, 0.0) for j, w in zip(pending, watts)}
    cap = CapSchedule.constant(n * 100.0 + 250.0 if cap is None else cap)
    other_w = n * 100.0 if other_w is None else other_w
    return snapshot(plat, pending, running, now=now, cap=cap, estimates=est, platform_power_w=other_w)


def started(plan):
    return [a.job_id for a in plan.starts()]


def test_order_is_profit_over_weight_not_submission():
    # job 1 waited longer but draws 200 W above idle; job 2 waited half as long for 50 W: 50/50 > 100/200
    jobs = [Job(1, 0.0, 100.0, 1), Job(2, 50.0, 100.0, 1)]
    snap = capped(jobs, [300.0, 150.0], cap=400.0 + 200.0)
    policy = make_policy("knapsack", {"profit": "wait", "check": "mean"})
    assert [j.id for j in policy.order(snap)] == [2, 1]
    plan = policy.decide(snap, policy.init_state())
    assert started(plan) == [2]  # 50 W in, then 200 more would exceed the 200 W room: stop
    assert plan.power_estimate_w == pytest.approx(450.0)
    fcfs = make_policy("easy-pc", {"check": "mean"}).decide(snap)
    assert started(fcfs) == [1]


def test_a_long_waiting_low_power_job_goes_before_a_fresh_high_power_one():
    jobs = [Job(1, 0.0, 100.0, 1), Job(2, 99.0, 100.0, 1)]
    snap = capped(jobs, [150.0, 300.0])
    assert [j.id for j in make_policy("knapsack").order(snap)] == [1, 2]


def test_fresh_jobs_have_zero_wait_profit_and_come_last_in_submission_order():
    # the paper's v_j = wait_j: at now == submit the ratio is 0, whatever the weight
    jobs = [Job(3, 100.0, 10.0, 1), Job(1, 100.0, 10.0, 1), Job(2, 40.0, 10.0, 1)]
    snap = capped(jobs, [150.0, 110.0, 300.0], now=100.0)
    assert [j.id for j in make_policy("knapsack").order(snap)] == [2, 1, 3]


@pytest.mark.parametrize("why", ["power", "nodes"])
def test_stops_at_the_first_job_that_does_not_fit(why):
    # max check, room for 250 W. Order: 1 (100 s / 100 W), 2, 3 (10 s / 50 W); 3 would fit after 2.
    # power: 2 waited 150 s for 200 W (0.75) and 100 + 200 > 250; nodes: 2 waited 80 s for 4 x 25 W (0.8),
    # its power fits but it needs 4 nodes and 3 are free once 1 runs.
    if why == "power":
        two, watts = Job(2, -50.0, 100.0, 1), 300.0
    else:
        two, watts = Job(2, 20.0, 100.0, 4), 125.0
    jobs = sorted([Job(1, 0.0, 100.0, 1), two, Job(3, 90.0, 100.0, 1)], key=lambda j: j.submit_s)
    snap = capped(jobs, [{1: 200.0, 2: watts, 3: 150.0}[j.id] for j in jobs])
    policy = make_policy("knapsack", {"check": "max"})
    assert [j.id for j in policy.order(snap)] == [1, 2, 3]
    plan = policy.decide(snap, policy.init_state())
    assert started(plan) == [1]
    assert "does not fit now" in plan.reason_for(2)
    assert "stops" in plan.reason_for(3)
    assert plan_problems(snap, plan) == []
    # EASY+PC would backfill job 3
    assert 3 in started(make_policy("easy-pc", {"check": "max"}).decide(snap))


def test_stretch_favours_short_jobs():
    # same submission, same power, room for one: wait ties go to the lower id, stretch to the short job
    jobs = [Job(1, 0.0, 1000.0, 1), Job(2, 0.0, 10.0, 1)]
    snap = capped(jobs, [300.0, 300.0])
    assert started(make_policy("knapsack", {"profit": "wait"}).decide(snap)) == [1]
    assert started(make_policy("knapsack", {"profit": "stretch"}).decide(snap)) == [2]


def test_stretch_with_a_zero_request_is_defined():
    jobs = [Job(1, 0.0, 0.0, 1), Job(2, 0.0, 10.0, 1)]
    snap = capped(jobs, [300.0, 300.0])
    assert started(make_policy("knapsack", {"profit": "stretch"}).decide(snap)) == [1]


def test_lookahead_checks_the_lowest_cap_during_the_requested_time():
    # cap 650 W now, 450 W from t=150: the 100 s job (ends t=200) only fits without lookahead
    plat = platform(4)
    cap = CapSchedule([*CapSchedule.constant(650.0).steps, *CapSchedule.window(150.0, 300.0, 450.0).steps[:1]])
    snap = snapshot(plat, [Job(1, 0.0, 100.0, 1)], now=100.0, cap=cap, platform_power_w=400.0)
    assert started(make_policy("knapsack").decide(snap)) == []
    assert started(make_policy("knapsack", {"lookahead": False}).decide(snap)) == [1]


def random_trace(seed, n_jobs=120):
    rng = random.Random(seed)
    jobs, t = [], 0.0
    for i in range(n_jobs):
        t += rng.expovariate(1 / 15)
        runtime = rng.uniform(1, 200)
        jobs.append(tj(i + 1, t, runtime, nodes=rng.randint(1, 5), walltime=runtime * rng.uniform(1, 3)))
    return jobs


@pytest.mark.parametrize("profit", ["wait", "stretch"])
@pytest.mark.parametrize("seed", range(3))
def test_outside_the_window_it_is_easy(profit, seed):
    jobs = random_trace(seed)
    easy = starts(run(jobs, make_policy("easy"), n=6))
    policy = make_policy("knapsack", {"profit": profit})
    assert starts(run(jobs, policy, make_predictor("history"), n=6)) == easy
    # a window that ended before the first submission
    ended = CapSchedule.window(0.0, 1.0, 700.0)
    assert jobs[0].submit_s > 1.0
    assert starts(run(jobs, policy, make_predictor("history"), n=6, cap=ended)) == easy


def test_after_the_window_decisions_are_easys():
    jobs = [Job(i, float(i), 50.0 * i, 1 + i % 3) for i in range(1, 12)]
    running = [(Job(100, 0.0, 500.0, 2), 0.0, (0, 1))]
    plat = platform(6)
    snap = snapshot(plat, jobs, running, now=300.0, cap=CapSchedule.window(0.0, 200.0, 700.0), platform_power_w=1000.0)
    easy = make_policy("easy").decide(snap)
    plan = make_policy("knapsack", {"profit": "stretch"}).decide(snap)
    assert plan.actions == easy.actions and plan.actions


@pytest.mark.parametrize("check", ["mean", "max", "gaussian_68", "gaussian_95", "gaussian_99"])
@pytest.mark.parametrize("profit", ["wait", "stretch"])
def test_plans_pass_the_guard_with_their_own_power_estimate(check, profit):
    rng = random.Random(3)
    jobs = []
    t = 0.0
    for i in range(300):
        t += rng.expovariate(1 / 10)
        mean = rng.uniform(120, 290)
        jobs.append(tj(i + 1, t, rng.uniform(1, 300), nodes=rng.randint(1, 4), walltime=400.0, user=f"u{i % 7}",
                       mean_w=mean, max_w=min(300.0, mean * 1.1), std_w=mean * 0.05))
    cap = CapSchedule.window(0.0, 2000.0, 8 * 100 + 4 * 200.0)
    policy = make_policy("knapsack", {"check": check, "profit": profit})
    # strict engine: the guard checks every plan's power estimate against the cap
    r = run(jobs, policy, make_predictor("history"), n=8, cap=cap)
    assert set(r.jobs["state"]) == {"COMPLETED"}
    start = r.jobs["start_s"]
    assert ((start > 0) & (start < 2000)).sum() > 10  # the knapsack did run jobs inside the window


def test_stretch_does_not_starve_a_wide_long_job():
    # 4 nodes, a cap for three busy nodes, forever. Every 10 s three 1-node 10 s jobs arrive (on top of a
    # backlog of three), so short jobs are always pending until t=3000. A 3-node 100 s job arrives at t=5.
    stream = [tj(i + 2, 10.0 * (i // 3), 10.0, nodes=1) for i in range(3 * 300 + 3)]
    big = tj(1, 5.0, 100.0, nodes=3)
    jobs = sorted([big, *stream], key=lambda j: (j.submit_s, j.id))
    cap = CapSchedule.constant(4 * 100 + 3 * 200.0)
    last_submit = stream[-1].submit_s
    # Smallest Area First never makes it the head while a short job waits: it runs once the stream is over.
    saf = starts(run(jobs, make_policy("easy-saf", {"check": "max"}), cap=cap))
    assert saf[1] >= last_submit
    # Its stretch ages faster than that of the short jobs, whose waits stay bounded: it reaches the top of the
    # order, the knapsack stops at it until it fits, and it runs long before the stream ends.
    r = run(jobs, make_policy("knapsack", {"profit": "stretch", "check": "max"}), cap=cap)
    assert set(r.jobs["state"]) == {"COMPLETED"}
    assert starts(r)[1] < last_submit / 10
    assert (r.jobs["start_s"] - r.jobs["submit_s"]).max() < 300


@pytest.mark.parametrize("profit", ["wait", "stretch"])
def test_every_job_of_an_overloaded_trace_runs(profit):
    # 6 nodes, a cap for three busy ones that never ends, arrivals far beyond what it lets the machine serve
    rng = random.Random(11)
    jobs, t = [], 0.0
    for i in range(200):
        t += rng.expovariate(1 / 5)
        runtime = rng.uniform(1, 60)
        jobs.append(tj(i + 1, t, runtime, nodes=rng.randint(1, 3), walltime=runtime * rng.uniform(1, 4)))
    cap = CapSchedule.constant(6 * 100 + 3 * 200.0)
    r = run(jobs, make_policy("knapsack", {"profit": profit}), n=6, cap=cap)
    assert set(r.jobs["state"]) == {"COMPLETED"}
    assert len(r.jobs["id"]) == len(jobs)
    assert (r.jobs["start_s"] - r.jobs["submit_s"]).max() > 100  # it was overloaded


@pytest.mark.parametrize("why", ["power", "nodes"])
def test_a_job_that_cannot_start_under_the_cap_even_on_an_idle_machine_does_not_hold_the_queue(why):
    # job 1 is first in the order but needs 3 busy nodes (600 W) under a cap with room for 250 W,
    # or more nodes than the machine has; stopping at it would block job 2 for as long as the cap lasts
    jobs = [Job(1, 0.0, 100.0, 3 if why == "power" else 5), Job(2, 50.0, 100.0, 1)]
    running = [(Job(9, 0.0, 500.0, 1), 0.0, (3,))]  # predicted at 300 W
    snap = capped(jobs, [300.0, 300.0], running=running, other_w=300.0, cap=300.0 + 300.0 + 250.0)
    plan = make_policy("knapsack").decide(snap)
    assert started(plan) == [2]
    assert "even on an idle machine" in plan.reason_for(1)
    assert plan_problems(snap, plan) == []


def test_a_job_too_big_for_the_window_runs_when_it_ends():
    jobs = [tj(1, 0.0, 50.0, nodes=3), tj(2, 1.0, 50.0, nodes=1), tj(3, 2.0, 50.0, nodes=1)]
    cap = CapSchedule.window(0.0, 500.0, 4 * 100 + 250.0)
    s = starts(run(jobs, make_policy("knapsack", {"check": "max", "lookahead": False}), cap=cap, options=NO_FORESIGHT))
    assert s[2] == 1.0 and s[3] == 51.0 and s[1] == 500.0
