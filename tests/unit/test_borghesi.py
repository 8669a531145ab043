"""ls, dec and bf (Borghesi et al. 2018) on hand-built snapshots, decisions checked by hand or by enumeration."""

from __future__ import annotations

import dataclasses
import itertools

import pytest

from builders import platform, snapshot
from wattsched.model.constraints import CapSchedule
from wattsched.model.guard import plan_problems
from wattsched.model.job import Job, PowerEstimate
from wattsched.policies import make_policy
from wattsched.policies.bf import BfPolicy
from wattsched.policies.easy_pc import EasyPcPolicy
from wattsched.policies.prb import LsParams, list_schedule, priority_order

pytest.importorskip("ortools", reason="dec needs OR-Tools (pip install 'wattsched[cp]')")

STEP = 60.0


def _snap(n_nodes, jobs, power, cap_w=None, running=(), now=0.0):
    plat = platform(n_nodes)
    busy = sum(len(nodes) for _, _, nodes in running)
    est = {j.id: PowerEstimate(power[j.id], power[j.id]) for j in jobs}
    for job, _, _ in running:
        est[job.id] = PowerEstimate(power[job.id], power[job.id])
    # measured: idle nodes at 100 W, running jobs at their predicted power
    jobs_w = sum(power[j.id] * len(nodes) for j, _, nodes in running)
    return snapshot(plat, list(jobs), list(running), now=now, cap=CapSchedule.constant(cap_w), estimates=est,
                    platform_power_w=100.0 * (n_nodes - busy) + jobs_w, jobs_power_w=jobs_w)


def test_ls_orders_by_expected_wait_then_demand_and_skips_what_does_not_fit():
    jobs = [
        Job(1, 0.0, 600.0, 2, partition="batch"),   # demand 1200, long queue
        Job(2, 5.0, 600.0, 1, partition="debug"),   # short queue: first
        Job(3, 9.0, 60.0, 3, partition="batch"),    # demand 180: first of batch, but 3 nodes do not fit after job 2
        Job(4, 10.0, 120.0, 1, partition="batch"),  # demand 120: first of batch
    ]
    params = {"queue_ewt_s": {"debug": 600.0, "batch": 7200.0}}
    snap = _snap(3, jobs, {j.id: 300.0 for j in jobs})
    ls = make_policy("ls", params)
    assert [j.id for j in priority_order(snap, ls.params)] == [2, 4, 3, 1]
    plan = ls.decide(snap)
    # 2 takes node 0, 4 node 1, 3 (3 nodes) is skipped, 1 (2 nodes) does not fit the one node left
    assert [(a.job_id, a.nodes) for a in plan.starts()] == [(2, (0,)), (4, (1,))]
    assert plan_problems(snap, plan) == []


def test_ls_checks_power_as_a_resource_with_a_margin():
    jobs = [Job(1, 0.0, 600.0, 1), Job(2, 1.0, 600.0, 1), Job(3, 2.0, 600.0, 1)]
    power = {1: 300.0, 2: 300.0, 3: 150.0}
    # 3 idle nodes = 300 W; cap 650: job 1 adds 200 (500), job 2 would add 200 (700 > 650), job 3 adds 50 (550)
    snap = _snap(3, jobs, power, cap_w=650.0)
    plan = make_policy("ls").decide(snap)
    assert [a.job_id for a in plan.starts()] == [1, 3]
    assert plan.power_estimate_w == pytest.approx(550.0)
    # cap 540: job 1 fits (500), then job 3 does not (550)
    assert [a.job_id for a in make_policy("ls").decide(_snap(3, jobs, power, cap_w=540.0)).starts()] == [1]
    # with a 10 % margin it plans against 486 W: job 1 (500) is postponed, job 3 (350) starts
    plan = make_policy("ls", {"cap_margin": 0.1}).decide(_snap(3, jobs, power, cap_w=540.0))
    assert [a.job_id for a in plan.starts()] == [3]


def test_ls_schedule_runs_forward_over_running_ends():
    running = [(Job(9, 0.0, 300.0, 2), 0.0, (0, 1))]
    jobs = [Job(1, 0.0, 120.0, 2), Job(2, 1.0, 60.0, 1)]
    snap = _snap(3, jobs, {1: 300.0, 2: 300.0, 9: 300.0}, running=running, now=100.0)
    starts = list_schedule(snap, LsParams(), priority_order(snap, LsParams()))
    # job 2 (demand 60) on the free node now; job 1 when job 9 ends at 300 (200 s from now)
    assert starts == {2: 0.0, 1: 200.0}


def _objective(jobs, starts, weights):
    return sum(weights[j.id] * starts[j.id] for j in jobs)


def _enumerate_optimum(jobs, steps, nodes, room_w, inc_w, weights):
    """Brute force over start steps: the least weighted start sum of the pooled model (nodes and power)."""
    horizon = sum(steps.values())
    best = None
    for combo in itertools.product(range(horizon + 1), repeat=len(jobs)):
        ok = True
        for t in range(horizon + max(steps.values())):
            active = [j for j, s in zip(jobs, combo) if s <= t < s + steps[j.id]]
            if sum(j.nodes for j in active) > nodes or sum(inc_w[j.id] for j in active) > room_w:
                ok = False
                break
        if ok:
            value = sum(weights[j.id] * s for j, s in zip(jobs, combo))
            best = value if best is None else min(best, value)
    return best


def test_dec_finds_the_optimum_known_by_enumeration_and_beats_ls():
    # 2 nodes (100 W idle each), cap 700 W: 500 W of room over idle. Increments: 200 W a node at 300 W,
    # 300 W for job 5 (400 W). Queues: debug (ewt 600 s) weighs 6, batch (3600 s) weighs 1.
    jobs = [
        Job(1, 0.0, 180.0, 1, partition="batch"),
        Job(2, 0.0, 120.0, 2, partition="batch"),
        Job(3, 0.0, 300.0, 1, partition="batch"),
        Job(4, 0.0, 60.0, 1, partition="debug"),
        Job(5, 0.0, 120.0, 1, partition="batch"),
    ]
    power = {1: 300.0, 2: 300.0, 3: 300.0, 4: 300.0, 5: 400.0}
    params = {"queue_ewt_s": {"debug": 600.0, "batch": 3600.0}, "time_step_s": STEP, "max_time_limit_s": 20.0}
    snap = _snap(2, jobs, power, cap_w=700.0)
    dec = make_policy("dec", params)
    weights = {j.id: 6 if j.partition == "debug" else 1 for j in jobs}
    steps = {j.id: int(j.walltime_s // STEP) for j in jobs}
    inc = {j.id: (power[j.id] - 100.0) * j.nodes for j in jobs}
    best = _enumerate_optimum(jobs, steps, 2, 500.0, inc, weights)
    starts, note = dec.solve(snap, priority_order(snap, dec.params))
    assert note == ""  # proven optimal
    assert _objective(jobs, starts, weights) == best
    ls_starts = list_schedule(snap, dec.params, priority_order(snap, dec.params))
    ls_value = _objective(jobs, {k: int(v // STEP) for k, v in ls_starts.items()}, weights)
    assert best < ls_value  # the instance is one where the list schedule is not optimal
    plan = dec.decide(snap)
    assert sorted(a.job_id for a in plan.starts()) == sorted(j for j, s in starts.items() if s == 0)
    assert plan_problems(snap, plan) == []
    # deterministic: the same decisions again
    assert make_policy("dec", params).decide(_snap(2, jobs, power, cap_w=700.0)).actions == plan.actions


def test_dec_rolling_horizon_starts_the_rest_only_where_ls_fits_them_around_the_schedule():
    jobs = [Job(i, float(i), 600.0, 1) for i in range(1, 7)]
    snap = _snap(4, jobs, {j.id: 300.0 for j in jobs})
    plan = make_policy("dec", {"horizon_jobs": 2}).decide(snap)
    # two jobs in the model start now; ls places two more of the rest on the two nodes left
    assert [a.job_id for a in plan.starts()] == [1, 2, 3, 4]
    assert len({n for a in plan.starts() for n in a.nodes}) == 4


def test_dec_never_starts_a_job_that_cannot_fit_the_cap_and_says_why():
    jobs = [Job(1, 0.0, 600.0, 3), Job(2, 1.0, 600.0, 1)]
    snap = _snap(3, jobs, {1: 300.0, 2: 300.0}, cap_w=600.0)  # job 1 needs 900 W with the idle ones
    plan = make_policy("dec").decide(snap)
    assert [a.job_id for a in plan.starts()] == [2]
    assert "even on an idle machine" in plan.reason_for(1)


def test_bf_is_easy_pc_with_the_mean_check():
    assert issubclass(BfPolicy, EasyPcPolicy)
    assert make_policy("bf").params.check == "mean"
    jobs = [Job(1, 0.0, 600.0, 2), Job(2, 1.0, 100.0, 1), Job(3, 2.0, 900.0, 1)]
    snap = _snap(3, jobs, {1: 300.0, 2: 300.0, 3: 300.0, 9: 300.0},
                 running=[(Job(9, 0.0, 300.0, 2), 0.0, (0, 1))], cap_w=10_000.0)
    # head job 1 waits for job 9 (ends at 300); job 2 backfills (ends at 100), job 3 would delay the head
    assert [a.job_id for a in make_policy("bf").decide(snap).starts()] == [2]
    assert (make_policy("bf").decide(snap).actions
            == make_policy("easy-pc", {"check": "mean"}).decide(snap).actions)


def test_simple_gives_each_starting_job_its_power_from_what_the_budget_has_left():
    from wattsched.model.plan import SetNodeCap

    jobs = [Job(1, 0.0, 600.0, 2), Job(2, 1.0, 600.0, 1)]
    # four idle nodes draw 400 W: 400 W are left under 800 W; job 1 asks 2 × 200 W of dynamic power and gets
    # it all, job 2 gets nothing but the 1 W floor: its node is capped 1 W above idle, below no invented floor
    snap = _snap(4, jobs, {1: 300.0, 2: 300.0}, cap_w=800.0)
    plan = make_policy("simple").decide(snap)
    starts = {a.job_id: a.nodes for a in plan.starts()}
    assert list(starts) == [1, 2]  # power is left to the node caps
    caps = {a.node: a.cap_w for a in plan.actions if type(a) is SetNodeCap}
    assert caps == {**{n: 300.0 for n in starts[1]}, starts[2][0]: 101.0}
    assert plan_problems(snap, plan) == []
    # 600 W: the 200 W left are split over job 1's nodes, job 2 again at the floor
    plan = make_policy("simple").decide(_snap(4, jobs, {1: 300.0, 2: 300.0}, cap_w=600.0))
    caps = {a.node: a.cap_w for a in plan.actions if type(a) is SetNodeCap}
    assert sorted(caps.values()) == [101.0, 200.0, 200.0]
    # a running job's measured power counts: job 9 draws 2 × 250 W, two idle nodes 200 W, 800 W leave 100 W
    snap = _snap(4, [Job(2, 1.0, 600.0, 1)], {2: 300.0, 9: 250.0}, running=[(Job(9, 0.0, 900.0, 2), 0.0, (0, 1))],
                 cap_w=800.0)
    snap.running[9] = dataclasses.replace(snap.running[9], power_w=500.0)
    plan = make_policy("simple").decide(snap)
    assert [a for a in plan.actions if type(a) is SetNodeCap] == [SetNodeCap(plan.starts()[0].nodes[0], 200.0)]
    # already asked for: nothing repeated; no job starting: no cap changes
    snap = _snap(4, [], {}, cap_w=800.0)
    snap.desired_node_cap_w = {n: 200.0 for n in range(4)}
    assert make_policy("simple").decide(snap).actions == []
    # no cap in force: the caps set before are removed
    snap = _snap(4, [], {})
    snap.desired_node_cap_w = {n: 200.0 for n in range(4)}
    assert make_policy("simple").decide(snap).actions == [SetNodeCap(n, None) for n in range(4)]


def test_simple_with_even_allocation_splits_the_cap_evenly_as_node_caps():
    from wattsched.model.plan import SetNodeCap

    jobs = [Job(1, 0.0, 600.0, 2), Job(2, 1.0, 600.0, 1)]
    snap = _snap(4, jobs, {1: 300.0, 2: 300.0}, cap_w=800.0)
    plan = make_policy("simple", {"allocation": "even"}).decide(snap)
    caps = [a for a in plan.actions if type(a) is SetNodeCap]
    assert caps == [SetNodeCap(n, 200.0) for n in range(4)]  # 800 W over 4 nodes
    assert [a.job_id for a in plan.starts()] == [1, 2]
    # a cap below the hardware range is clamped to it (50 W)
    snap = _snap(4, [], {}, cap_w=100.0)
    assert make_policy("simple", {"allocation": "even"}).decide(snap).actions == [SetNodeCap(n, 50.0)
                                                                                 for n in range(4)]


def test_dvfs_starts_the_blocked_head_at_a_lower_frequency_within_the_slowdown_threshold():
    from wattsched.model.response import LinearResponse

    jobs = [Job(1, 0.0, 600.0, 2, app_class="cpu")]
    snap = _snap(3, jobs, {1: 300.0}, cap_w=550.0)
    snap.platform = snap.platform.with_response_classes({"cpu": LinearResponse(f=1.0)})
    # at 2 GHz the job adds 2 x (300 - 100) = 400 W to 300 W of idle nodes: 700 > 550. At 1 GHz
    # (ratio 0.5) its nodes draw 150 W: 300 + 2 x 50 = 400 W fits, and it runs 1 / 0.5 = 2 times longer
    plan = make_policy("dvfs").decide(snap)
    assert [(a.job_id, a.freq_hz) for a in plan.starts()] == [(1, 1.0e9)]
    assert plan.power_estimate_w == pytest.approx(400.0)
    assert plan_problems(snap, plan) == []
    # a slowdown of 2 is over a threshold of 1.5: the job waits
    assert make_policy("dvfs", {"max_slowdown": 1.5}).decide(snap).starts() == []
    # a class without a response model is never slowed
    other = _snap(3, [Job(1, 0.0, 600.0, 2, app_class="memory")], {1: 300.0}, cap_w=550.0)
    other.platform = snap.platform
    assert make_policy("dvfs").decide(other).starts() == []


def test_dvfs_under_a_response_scenario_predicts_the_slowed_power_on_the_dynamic_power():
    from wattsched.model.response import LinearResponse

    jobs = [Job(1, 0.0, 600.0, 2, app_class="cpu")]
    snap = _snap(3, jobs, {1: 300.0}, cap_w=450.0)
    snap.platform = snap.platform.with_response_classes({"cpu": LinearResponse(f=1.0)})
    # the class model on the whole node power: 150 W a node at 1 GHz, 300 + 2 x 50 = 400 W <= 450 W
    assert [(a.job_id, a.freq_hz) for a in make_policy("dvfs").decide(snap).starts()] == [(1, 1.0e9)]
    # the paper's scenario F = 1 as the replay applies it: half the *dynamic* power, 100 + 0.5 x 200 = 200 W
    # a node, 300 + 2 x 100 = 500 W > 450 W: the job waits
    assert make_policy("dvfs", {"response": "1"}).decide(snap).starts() == []
    snap.cap = CapSchedule.constant(520.0)
    plan = make_policy("dvfs", {"response": "1"}).decide(snap)
    assert [(a.job_id, a.freq_hz) for a in plan.starts()] == [(1, 1.0e9)]
    assert plan.power_estimate_w == pytest.approx(500.0)


def test_dec_falls_back_to_the_ls_schedule_when_the_solver_finds_nothing_in_time():
    jobs = [Job(1, 0.0, 180.0, 1), Job(2, 0.0, 120.0, 2), Job(3, 0.0, 300.0, 1)]
    snap = _snap(2, jobs, {1: 300.0, 2: 300.0, 3: 300.0})
    dec = make_policy("dec", {"time_limit_s": 1e-9, "max_time_limit_s": 1e-9})
    starts, note = dec.solve(snap, priority_order(snap, dec.params))
    if note.startswith("solver hit"):
        pytest.skip("CP-SAT found a schedule within a deterministic limit of 1e-9 on this build")
    assert "ls schedule used" in note
    ls_starts = list_schedule(snap, dec.params, priority_order(snap, dec.params))
    assert starts == {k: int(v // STEP) for k, v in ls_starts.items()}  # 1 and 3 now, 2 after job 1 (3 steps)
    plan = dec.decide(snap)
    assert [a.job_id for a in plan.starts()] == [1, 3]
    assert "ls schedule used" in plan.reason_for(2)


def test_dynshare_moves_cap_from_a_light_job_node_to_a_heavy_job_node():
    from dataclasses import replace

    from wattsched.model.plan import SetNodeCap

    light, heavy = Job(1, 0.0, 600.0, 1), Job(2, 0.0, 600.0, 1)
    snap = _snap(4, [], {1: 300.0, 2: 300.0}, cap_w=800.0, running=[(light, 0.0, (0,)), (heavy, 0.0, (1,))])
    # no caps yet: the even split, as simple
    assert make_policy("dynshare").decide(snap).actions == [SetNodeCap(n, 200.0) for n in range(4)]
    # caps at 200 W; node 0's light job draws 120 W, node 1's heavy job is held at its 200 W cap,
    # nodes 2 and 3 are idle (100 W)
    snap.running = {1: replace(snap.running[1], power_w=120.0), 2: replace(snap.running[2], power_w=200.0)}
    snap.desired_node_cap_w = {n: 200.0 for n in range(4)}
    plan = make_policy("dynshare", {"headroom_w": 10.0}).decide(snap)
    caps = {a.node: a.cap_w for a in plan.actions if type(a) is SetNodeCap}
    # donors keep their draw + 10 W: 130, 110, 110 (350 W); node 1 gets 800 - 350 = 450, clamped to its 300 W maximum
    assert caps == {0: 130.0, 1: 300.0, 2: 110.0, 3: 110.0}
    assert sum(caps.values()) <= 800.0
    assert plan_problems(snap, plan) == []


def test_dynshare_admission_lets_in_jobs_up_to_three_times_the_dynamic_part_of_the_cap():
    jobs = [Job(i, float(i), 600.0, 1) for i in range(1, 5)]
    power = {j.id: 300.0 for j in jobs}
    # 4 idle nodes = 400 W; each job adds 200 W. Cap 600 W (200 W above idle): bf under 400 + 3 x 200 = 1,000 W
    # admits three jobs; 3 x the whole cap (1,800 W) would admit all four.
    # Plain EASY (dynshare without admission) starts all four and leaves the rest to the node caps
    snap = _snap(4, jobs, power, cap_w=600.0)
    assert len(make_policy("dynshare", {"admission": True}).decide(snap).starts()) == 3
    assert len(make_policy("dynshare", {"admission": True, "admission_factor": 1.0}).decide(snap).starts()) == 1
    assert len(make_policy("dynshare").decide(snap).starts()) == 4
    # a cap below idle power admits nothing
    snap = _snap(4, jobs, power, cap_w=300.0)
    assert make_policy("dynshare", {"admission": True}).decide(snap).starts() == []


def test_dec_rapl_is_dec_while_jobs_arrive_fast_and_dynshare_otherwise():
    from wattsched.model.plan import SetNodeCap

    fast = [Job(i, 3000.0 + 10 * i, 600.0, 1) for i in range(1, 21)]  # 20 jobs in the last 30 min: one per 90 s
    snap = _snap(4, fast, {j.id: 300.0 for j in fast}, cap_w=800.0, now=3600.0)
    snap.desired_node_cap_w = {0: 200.0}
    plan = make_policy("dec+rapl").decide(snap)
    assert plan.actions[0] == SetNodeCap(0, None)  # the caps of a dynshare period are lifted
    assert plan.starts() == make_policy("dec").decide(snap).starts()
    # a job started under a node cap keeps it: lifting it would take the platform above the budget
    capped = Job(99, 0.0, 3600.0, 1)
    snap = _snap(4, fast, {**{j.id: 300.0 for j in fast}, 99: 300.0}, cap_w=800.0, now=3600.0,
                 running=[(capped, 0.0, (1,))])
    snap.desired_node_cap_w = {0: 200.0, 1: 200.0}
    plan = make_policy("dec+rapl").decide(snap)
    assert [a for a in plan.actions if type(a) is SetNodeCap] == [SetNodeCap(0, None)]
    slow = [Job(1, 0.0, 600.0, 1), Job(2, 3000.0, 600.0, 1)]  # 1 job in the last 30 min
    snap = _snap(4, slow, {1: 300.0, 2: 300.0}, cap_w=800.0, now=3600.0)
    plan = make_policy("dec+rapl").decide(snap)
    assert [a for a in plan.actions if type(a) is SetNodeCap] == [SetNodeCap(n, 200.0) for n in range(4)]
    assert [a.job_id for a in plan.starts()] == [1, 2]  # EASY: power is left to the node caps
