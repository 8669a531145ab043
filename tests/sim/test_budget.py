"""Energy-budget policies (Dutot et al. 2017) on small instances worked out by hand."""

from __future__ import annotations

import math
import random

import pytest

from builders import platform, snapshot, tj
from wattsched.model.constraints import BudgetState, EnergyBudget
from wattsched.model.job import Job
from wattsched.model.plan import PowerDown, PowerUp, Start
from wattsched.policies import make_policy
from wattsched.policies.budget import BudgetPolicyState, min_balance_j
from wattsched.sim.engine import Engine, EngineOptions

# builders.SIMPLE_POWER: idle 100 W, busy 300 W, off 10 W; a computing node adds 200 W.


def test_counter_rule_1_then_monitoring_stage():
    pol = make_policy("energy-bud")
    state = pol.init_state()
    plat = platform(4)
    b = EnergyBudget(0.0, 1000.0, 400_000.0)  # R = 400 W
    run = [(Job(1, 0.0, 5000.0, 1), 0.0, (0,))]
    # First call in the window is a monitoring stage: C_ea = R * 100 - consumed.
    pol.decide(snapshot(plat, [], run, now=100.0, budgets=[BudgetState(b, 30_000.0)]), state)
    assert state.c_ea_j == pytest.approx(400 * 100 - 30_000)
    assert state.monitoring_stages == 1
    # Estimated power: 1 computing node (300) + 3 idle (100) = 600 W.
    assert state.last_power_w == pytest.approx(600.0)
    # Between stages, rule 1 adds R per second and the estimate is taken off: (400 - 600) * 100.
    pol.decide(snapshot(plat, [], run, now=200.0, budgets=[BudgetState(b, 99_999.0)]), state)
    assert state.c_ea_j == pytest.approx(10_000 - 20_000)
    assert state.monitoring_stages == 1
    # At the next stage (600 s after the first), C_ea is set from the measured energy again.
    pol.decide(snapshot(plat, [], run, now=700.0, budgets=[BudgetState(b, 240_000.0)]), state)
    assert state.c_ea_j == pytest.approx(400 * 700 - 240_000)
    assert state.monitoring_stages == 2
    # The state round-trips through JSON (the daemon persists it).
    assert BudgetPolicyState.from_json(state.to_json()) == state


def test_min_balance_is_taken_at_breakpoints():
    # Starts at 100 J, 15 W drawn against a 10 W rate until t=10, then 5 W: lowest at t=10.
    assert min_balance_j(100.0, 10.0, 0.0, 20.0, 15.0, [(10.0, 10.0)]) == 50.0
    assert min_balance_j(100.0, 10.0, 0.0, 5.0, 15.0, [(10.0, 10.0)]) == 75.0


def _reservation_case(head_wall_s: float, wide: int):
    """4 nodes, R = 500 W, C_ea = 50 kJ at t=200; job 1 runs on nodes 0-1 until 250.

    Head job 2 needs 4 nodes: reserved at 250. Job 3 (``wide`` nodes, 50 s) ends by the shadow time.
    """
    plat = platform(4)
    b = EnergyBudget(0.0, 10_000.0, 5_000_000.0)
    run = [(Job(1, 0.0, 100.0, 2), 150.0, (0, 1))]
    pending = [Job(2, 160.0, head_wall_s, 4), Job(3, 170.0, 50.0, wide)]
    return snapshot(plat, pending, run, now=200.0, budgets=[BudgetState(b, 500 * 200 - 50_000.0)])


def started(plan):
    return {a.job_id for a in plan.actions if isinstance(a, Start)}


def test_energy_reservation_stops_a_backfill():
    # Job 3 on 2 nodes: P̃ = 600 + 200 + 400 = 1200 W against 500 W for 50 s: needs 35 kJ of C_ea.
    # Head of 10 s: reserves 4 * 200 * 10 = 8 kJ, 50 - 8 >= 35: job 3 backfills.
    pol = make_policy("energy-bud")
    plan = pol.decide(_reservation_case(10.0, 2), pol.init_state())
    assert started(plan) == {3}
    # Head of 100 s: reserves 80 kJ > 50 kJ: job 3 would steal the head's energy and waits.
    state = pol.init_state()
    plan = pol.decide(_reservation_case(100.0, 2), state)
    assert started(plan) == set()
    assert state.reserved_job == 2 and state.reserved_j == pytest.approx(80_000.0)
    assert "energy reserved 80000 J" in plan.reason_for(2)
    # EASY, which knows no budget, backfills it either way.
    assert started(make_policy("easy").decide(_reservation_case(100.0, 2))) == {3}


def test_a_backfilled_job_counts_in_the_energy_check_of_the_next_one():
    # _reservation_case with two 1-node, 50-s jobs and C_ea = 40 kJ; the head (10 s) reserves 8 kJ.
    # One job: P̃ = 800 + 200 = 1000 W against 500 W for 50 s, needs 25 kJ of the 32 kJ left: it starts.
    # The second on top of it: 1200 W, needs 35 kJ: it waits. (Counting the first job's end but not its
    # power would see 1000 W again and start both.)
    plat = platform(4)
    b = EnergyBudget(0.0, 10_000.0, 5_000_000.0)
    run = [(Job(1, 0.0, 100.0, 2), 150.0, (0, 1))]
    pending = [Job(2, 160.0, 10.0, 4), Job(3, 170.0, 50.0, 1), Job(4, 171.0, 50.0, 1)]
    snap = snapshot(plat, pending, run, now=200.0, budgets=[BudgetState(b, 500 * 200 - 40_000.0)])
    assert started(make_policy("energy-bud").decide(snap)) == {3}
    snap = snapshot(plat, pending, run, now=200.0, budgets=[BudgetState(b, 500 * 200 - 45_000.0)])
    assert started(make_policy("energy-bud").decide(snap)) == {3, 4}  # 45 - 8 >= 35 kJ: both


def test_a_job_refused_for_energy_refuses_every_job_asking_more_for_longer():
    # C_ea = 30 kJ, head reserves 8 kJ: 22 kJ for backfills ending by the shadow time (t = 250).
    # Job 3 (1 node, 50 s) needs 25 kJ: refused; job 4 (1 node, 30 s): 1000 W for 30 s then 800 W (job 1
    # still runs) for 20 s = 15 + 6 kJ: starts; job 5 asks as much power for longer than job 3: refused.
    plat = platform(4)
    b = EnergyBudget(0.0, 10_000.0, 5_000_000.0)
    run = [(Job(1, 0.0, 100.0, 2), 150.0, (0, 1))]
    pending = [Job(2, 160.0, 10.0, 4), Job(3, 170.0, 50.0, 1), Job(4, 171.0, 30.0, 1), Job(5, 172.0, 50.0, 1)]
    snap = snapshot(plat, pending, run, now=200.0, budgets=[BudgetState(b, 500 * 200 - 30_000.0)])
    plan = make_policy("energy-bud").decide(snap)
    assert started(plan) == {4}


def test_inside_the_window_power_alone_decides_and_one_start_can_block_the_rest():
    policy = "powercap-easy"
    # R = 1000 W; 800 W now (job 1 on 2 nodes, 2 idle). One more node computing makes 1000 W: job 3 starts;
    # then any other job would exceed R, whatever its requested time (jobs 4 and 5 wait).
    plat = platform(4)
    b = EnergyBudget(0.0, 10_000.0, 10_000_000.0)
    run = [(Job(1, 0.0, 100.0, 2), 150.0, (0, 1))]
    pending = [Job(2, 160.0, 10.0, 4), Job(3, 170.0, 50.0, 1), Job(4, 171.0, 1.0, 1), Job(5, 172.0, 30.0, 1)]
    snap = snapshot(plat, pending, run, now=200.0, budgets=[BudgetState(b, 0.0)])
    assert started(make_policy(policy).decide(snap)) == {3}
    # 1100 W: two nodes fit no more (1200 W), one does, whichever job comes first in the queue.
    b = EnergyBudget(0.0, 10_000.0, 11_000_000.0)
    snap = snapshot(plat, pending[:1] + pending[2:], run, now=200.0, budgets=[BudgetState(b, 0.0)])
    assert started(make_policy(policy).decide(snap)) == {4}


def test_reduce_pc_refuses_the_short_wide_job_that_energy_bud_accepts():
    # The head's 8 kJ reservation at q=250 lowers the rate to 500 - 8000 / 50 = 340 W until then.
    # Job 3 takes every free node: 1200 W > 340 W, so reduce-pc refuses it; energy-bud has the energy.
    assert started(make_policy("energy-bud").decide(_reservation_case(10.0, 2))) == {3}
    assert started(make_policy("reduce-pc").decide(_reservation_case(10.0, 2))) == set()
    # powercap-easy has no savings at all: 1200 W > 500 W.
    assert started(make_policy("powercap-easy").decide(_reservation_case(10.0, 2))) == set()


# ---------------------------------------------------------------- a window that has not started yet

def _ahead_case(wall_s: float, running_end_s: float):
    """4 nodes idle at 400 W; a window [1000, 2000) at R = 600 W lies ahead; it is t=0.

    Job 1 runs on nodes 0-1 until ``running_end_s``; job 2 (1 node, ``wall_s``) waits.
    """
    plat = platform(4)
    run = [(Job(1, 0.0, running_end_s, 2), 0.0, (0, 1))]
    return snapshot(plat, [Job(2, 0.0, wall_s, 1)], run, now=0.0,
                    upcoming_budgets=[EnergyBudget(1000.0, 2000.0, 600_000.0)])


@pytest.mark.parametrize("policy", ["energy-bud", "reduce-pc", "powercap-easy"])
def test_a_job_running_into_a_window_ahead_is_charged_against_it(policy):
    pol = make_policy(policy)
    # Job 1 computes until 1200: at t=1000 the estimate is 800 W (job 1) + 200 W (job 2) + 200 W idle
    # = 1200 W against 600 W, from C_ea = 0: job 2 may not run into the window...
    state = pol.init_state()
    plan = pol.decide(_ahead_case(1500.0, 1200.0), state)
    assert started(plan) == set()
    assert "waiting for energy" in plan.reason_for(2)
    # ...but may run if it is over before the window opens (its whole requested time counts, not its start).
    assert started(pol.decide(_ahead_case(999.0, 1200.0), pol.init_state())) == {2}
    # Job 1 ends by t=900 (past and present consumption counted): at t=1000 only job 2 computes,
    # 300 + 3 * 100 = 600 W, within the rate: it starts.
    assert started(pol.decide(_ahead_case(1500.0, 900.0), pol.init_state())) == {2}
    # The counter is not touched before the window: no monitoring stage yet.
    assert state.window is None and state.monitoring_stages == 0
    # EASY knows no budget; without the window in the snapshot the policy sees none either.
    assert started(make_policy("easy").decide(_ahead_case(1500.0, 1200.0))) == {2}
    snap = _ahead_case(1500.0, 1200.0)
    snap.upcoming_budgets = ()
    assert started(pol.decide(snap, pol.init_state())) == {2}


def test_the_engine_shows_windows_ahead_and_a_job_started_before_one_keeps_to_its_budget():
    # 4 nodes idle at 400 W, a window [1000, 2000) of 500 kJ: R = 500 W, 100 W above idle.
    # A 1-node job (200 W more) submitted at t=0 for 5000 s would draw 600 W through the window: EASY
    # starts it at once and spends 600 kJ. energy-bud holds it: inside the window C_ea = 100 W * (t - 1000)
    # (monitoring stages every 100 s) must cover (600 - 500) W * (2000 - t) of its requested time
    # left in the window: from t = 1500 on, and the window uses exactly its budget.
    window = EnergyBudget(1000.0, 2000.0, 500_000.0)
    jobs = [tj(1, 0, 5000, nodes=1)]
    seen = []

    class Spy:
        """energy-bud, recording what each call saw of the budgets."""

        def __init__(self):
            self.inner = make_policy("energy-bud", {"monitoring_period_s": 100.0})

        def __getattr__(self, name):
            return getattr(self.inner, name)

        def decide(self, snap, state=None):
            seen.append((snap.now_s, [b.budget for b in snap.budgets], list(snap.upcoming_budgets)))
            return self.inner.decide(snap, state)

    r = Engine(platform(4), jobs, Spy(), budgets=[window], options=EngineOptions(strict=True)).run()
    assert seen[0] == (0.0, [], [window])
    assert all(up == [] and cur == [window] for t, cur, up in seen if 1000.0 <= t < 2000.0)
    assert float(r.jobs["start_s"][0]) == pytest.approx(1500.0)
    assert _window_energy(r, window) == pytest.approx(window.energy_j)
    easy = Engine(platform(4), jobs, make_policy("easy"), budgets=[window]).run()
    assert float(easy.jobs["start_s"][0]) == 0.0
    assert _window_energy(easy, window) == pytest.approx(600_000.0)


def _random_jobs(n=200, seed=3):
    rng = random.Random(seed)
    t = 0.0
    out = []
    for i in range(1, n + 1):
        t += rng.expovariate(1 / 40)
        run = rng.uniform(10, 600)
        out.append(tj(i, round(t), round(run), nodes=rng.randint(1, 8), walltime=round(run * rng.uniform(1, 3))))
    return out


def _starts(policy, budgets=(), n=8, **params):
    engine = Engine(platform(n), _random_jobs(), make_policy(policy, params), budgets=budgets,
                    options=EngineOptions(strict=True))
    r = engine.run()
    return {int(i): float(s) for i, s in zip(r.jobs["id"], r.jobs["start_s"])}, r


@pytest.mark.parametrize("policy", ["energy-bud", "reduce-pc", "powercap-easy"])
def test_unlimited_budget_gives_easy_schedule(policy):
    easy, _ = _starts("easy")
    assert _starts(policy)[0] == easy  # no budget: B = inf
    # A window whose rate exceeds any platform power changes nothing either.
    huge = [EnergyBudget(0.0, 1e5, 1e15)]
    assert _starts(policy, huge)[0] == easy


def test_tight_budget_delays_jobs_and_saves_energy():
    easy, r_easy = _starts("easy")
    window = EnergyBudget(1000.0, 6000.0, 5000.0 * 8 * 160.0)  # R = 1280 W: 8 nodes at 160 W on average
    bud, r_bud = _starts("energy-bud", [window])
    pc, r_pc = _starts("powercap-easy", [window])
    assert bud != easy and pc != easy
    e_easy, e_bud, e_pc = (_window_energy(r, window) for r in (r_easy, r_bud, r_pc))
    assert e_pc < e_easy and e_bud < e_easy
    # The budget holds within what the monitoring period lets the estimate drift (600 s at most 8 * 200 W).
    assert e_bud <= window.energy_j + 600 * 8 * 200
    # energy-bud spends savings that powercap-easy leaves unused.
    assert e_bud >= e_pc


def _window_energy(result, window):
    import numpy as np

    t = np.asarray(result.timeline["t_s"], dtype=float)
    p = np.asarray(result.timeline["power_w"], dtype=float)
    lo, hi = window.start_s, window.end_s
    e = 0.0
    for i in range(len(t) - 1):
        a, b = max(t[i], lo), min(t[i + 1], hi)
        if b > a:
            e += p[i] * (b - a)
    return e


def test_shutdown_saves_the_energy_the_platform_model_says():
    # 2 nodes; one 1000-s job on one node. EASY: 300 * 1000 + 100 * 1000 = 400 kJ.
    jobs = [tj(1, 0, 1000, nodes=1)]
    r = Engine(platform(2), jobs, make_policy("easy")).run()
    assert r.info["energy_j"] == pytest.approx(400_000.0)
    # Shutdown: node 1 switches off at t=0 (5 s at 120 W), then 10 W; node 0 switches off at 1000.
    # 300 * 1000 + 120 * 5 (node 0)  +  120 * 5 + 10 * 1000 (node 1, off from 5 to 1005).
    # The run lasts until the last monitoring tick (T = 1200), both nodes off by then.
    r = Engine(platform(2), jobs, make_policy("easy-shutdown")).run()
    end = float(r.timeline["t_s"][-1])
    assert end == 1200.0
    assert r.info["energy_j"] == pytest.approx(300_000 + 600 + 600 + 10 * (end - 5) + 10 * (end - 1005))
    assert r.info["node_seconds_by_state"]["switching_off"] == pytest.approx(10.0)


def test_shutdown_wakes_nodes_for_the_head_job_and_counts_the_switch_on_time():
    # Job 2 needs both nodes at t=100 while job 1 runs until 1000: waiting would start it at 1000,
    # waking node 1 (20 s) does not help since job 1 holds node 0; the head waits with node 1 off.
    # Job 3 needs 1 node at t=100 on an all-off platform: node woken, starts at 100 + 20.
    jobs = [tj(1, 0, 1000, nodes=1), tj(3, 100, 50, nodes=1)]
    eng = Engine(platform(2), jobs, make_policy("easy-shutdown"))
    r = eng.run()
    s = {int(i): float(t) for i, t in zip(r.jobs["id"], r.jobs["start_s"])}
    assert s[1] == 0.0
    # Node 1 went off at 0 (ready at 5), is woken at 100 and ready at 120.
    assert s[3] == pytest.approx(120.0)


def test_shutdown_never_touches_drained_nodes_and_keeps_nodes_for_a_close_reservation():
    plat = platform(4)
    snap = snapshot(plat, [Job(2, 0.0, 100.0, 3)], [(Job(1, 0.0, 10.0, 2), 0.0, (0, 1))], now=0.0)
    snap.node_state[3] = 5  # drained
    snap.free_nodes = [2]
    plan = make_policy("easy-shutdown").decide(snap, None)
    # The head (3 nodes) is reserved at t=10, sooner than off + on (25 s): node 2 stays on; node 3 is drained.
    assert not [a for a in plan.actions if isinstance(a, PowerDown | PowerUp)]
    snap.pending = {}
    plan = make_policy("easy-shutdown").decide(snap, None)
    assert plan.actions == [PowerDown(2)]


def test_budget_metrics_by_hand():
    from wattsched.sim.metrics import budget_metrics

    # 2 nodes; job 1 computes on one node over [0, 1000): 400 W (300 + 100) throughout.
    r = Engine(platform(2), [tj(1, 0, 1000, nodes=1), tj(2, 0, 2000, nodes=1)], make_policy("easy")).run()
    m = budget_metrics(r, 500.0, 1500.0, energy_j=1_000_000.0)
    # [500, 1000): both busy (600 W); [1000, 1500): one busy (400 W). Utilization (1 * 500 + 2 * 500... )
    assert m["energy_j"] == pytest.approx(600 * 500 + 400 * 500)
    assert m["relative_energy"] == pytest.approx(0.5)
    assert m["utilization"] == pytest.approx((2 * 500 + 1 * 500) / (2 * 1000))
    assert m["jobs_started"] == 2 and m["mean_bsld"] == pytest.approx(1.0)


def test_nodes_switched_off_in_a_window_are_woken_after_it_and_an_impossible_job_ends_the_run():
    # Shutdown only in the window [0, 100): node 1 goes off; job 2 (2 nodes) arrives after the window.
    window = [EnergyBudget(0.0, 100.0, 1e9)]
    jobs = [tj(1, 0, 50, nodes=1), tj(2, 200, 50, nodes=2), tj(3, 300, 50, nodes=5)]  # job 3: too big
    eng = Engine(platform(2), jobs, make_policy("energy-bud", {"shutdown": "window"}), budgets=window,
                 options=EngineOptions(strict=True))
    r = eng.run()
    s = {int(i): float(t) for i, t in zip(r.jobs["id"], r.jobs["start_s"])}
    assert s[1] == 0.0
    assert s[2] == pytest.approx(200.0 + 20.0)  # node(s) woken at 200, 20 s to switch on
    assert math.isnan(s[3])  # never starts, and the run still ends


def test_budget_metrics_count_only_jobs_started_before_the_end():
    from wattsched.sim.metrics import budget_metrics

    r = Engine(platform(1), [tj(1, 0, 1000, nodes=1), tj(2, 0, 100, nodes=1)], make_policy("easy")).run()
    assert budget_metrics(r, 0.0, 500.0)["jobs_started"] == 1  # job 2 starts at 1000
    assert budget_metrics(r, 0.0, 2000.0)["jobs_started"] == 2


def test_a_node_powered_up_that_still_reads_off_is_not_powered_up_again():
    # Live, a node powered up a moment ago can still read as off on the next call (the resource manager shows
    # the request once its resume program runs): waking a second node for the same job would be a double
    # decision. Switch-on time of builders' nodes: 20 s.
    plat = platform(2)
    pol = make_policy("easy-shutdown")
    state = pol.init_state()

    def snap(now):
        s = snapshot(plat, [Job(1, 0.0, 100.0, 1)], [], now=now)
        s.node_state[0] = s.node_state[1] = 2  # both off
        s.free_nodes = []
        return s

    first = [a for a in pol.decide(snap(10.0), state).actions if isinstance(a, PowerUp)]
    assert len(first) == 1
    assert not [a for a in pol.decide(snap(11.0), state).actions if isinstance(a, PowerUp)]
    # still off long after its switch-on time (and a minute): the request is taken as lost and made again
    again = [a for a in pol.decide(snap(10.0 + 20.0 + 61.0), state).actions if isinstance(a, PowerUp)]
    assert len(again) == 1
    assert BudgetPolicyState.from_json(state.to_json()) == state


def test_the_estimate_counts_off_and_switching_nodes_as_idle_as_the_paper_does():
    # Dutot et al. §V-C: P̃_platform = n_idle·P̃_idle + n_comp·P̃_comp; §IV-C-3: an off node is counted as a
    # non-computing one. 5 nodes: node 0 computes, node 1 idle, node 2 switching on, nodes 3 and 4 off.
    plat = platform(5)
    b = EnergyBudget(0.0, 10_000.0, 5_000_000.0)   # R = 500 W

    def snap(now):
        s = snapshot(plat, [], [(Job(1, 0.0, 5000.0, 1), 0.0, (0,))], now=now, budgets=[BudgetState(b, 0.0)])
        s.node_state[2], s.node_state[3], s.node_state[4] = 3, 2, 2
        s.free_nodes = [1]
        return s

    est = {"p_comp_w": 203.12, "p_idle_w": 100.0}
    pol = make_policy("energy-bud", est)
    state = pol.init_state()
    pol.decide(snap(100.0), state)
    assert state.last_power_w == pytest.approx(203.12 + 4 * 100.0)   # 603.12 W, not the nodes' 9.75-W off power
    # Between monitoring stages C_ea falls by the estimate: 500 · 100 (stage at t=100) + (500 − 603.12) · 50.
    pol.decide(snap(150.0), state)
    assert state.c_ea_j == pytest.approx(500 * 100 - 103.12 * 50)
    # p_off_w charges off nodes their own estimate, and switching nodes their switching power (150 W here).
    pol = make_policy("energy-bud", {**est, "p_off_w": 9.75})
    state = pol.init_state()
    pol.decide(snap(100.0), state)
    assert state.last_power_w == pytest.approx(203.12 + 100.0 + 150.0 + 2 * 9.75)   # 472.62 W


def _candidate_case(wall_s: float):
    """4 nodes: job 1 on node 0 until t=1000, node 1 idle, nodes 2-3 off; head job 2 needs all 4 nodes."""
    plat = platform(4)
    s = snapshot(plat, [Job(2, 5.0, 100.0, 4), Job(3, 6.0, wall_s, 2)], [(Job(1, 0.0, 1000.0, 1), 0.0, (0,))],
                 now=10.0)
    s.node_state[2] = s.node_state[3] = 2
    s.free_nodes = [1]
    return s


def test_shutdown_wakes_nodes_for_a_backfill_candidate_that_does_not_delay_the_head():
    # The head (4 nodes) cannot start before job 1 ends at 1000 (its shadow, counting off nodes as free).
    # Job 3 (2 nodes, 100 s) needs node 1 and one node that is off: switched on by 10 + 20, it ends at 130,
    # before 1000, so node 2 is powered up and node 1 kept on (not powered down).
    plan = make_policy("easy-shutdown").decide(_candidate_case(100.0), None)
    assert plan.actions == [PowerUp(2)]
    # 2,000 s would run past the head's start, and the head needs every node then: nothing is woken, node 1
    # goes off.
    plan = make_policy("easy-shutdown").decide(_candidate_case(2000.0), None)
    assert plan.actions == [PowerDown(1)]


def test_a_candidate_refused_for_energy_wakes_nothing():
    # energy-bud at R = 250 W: node 0 computing (300) + three others (100): 600 W, far over; job 3 on two more
    # computing nodes would draw 1000 W against C_ea of 0: refused, so its node stays off (and node 1 goes off).
    s = _candidate_case(100.0)
    s.budgets = [BudgetState(EnergyBudget(0.0, 10_000.0, 2_500_000.0), 250 * 10.0)]
    plan = make_policy("energy-bud", {"shutdown": "window"}).decide(s, None)
    assert plan.actions == [PowerDown(1)]


def test_a_backfill_candidate_starts_once_its_woken_nodes_are_on():
    # Job 1 holds nodes 2-3 until 1000; nodes 0-1 go off at t=0. At t=100 the head (job 2, 4 nodes) must wait
    # for job 1, and job 3 (2 nodes, 50 s) gets nodes 0-1 woken: it starts at 100 + 20 s of switch-on.
    jobs = [tj(1, 0, 1000, nodes=2), tj(2, 100, 100, nodes=4), tj(3, 100, 50, nodes=2)]
    r = Engine(platform(4), jobs, make_policy("easy-shutdown")).run()
    s = {int(i): float(t) for i, t in zip(r.jobs["id"], r.jobs["start_s"])}
    assert s[3] == pytest.approx(120.0)
    # Job 3's nodes go off again when it ends (the head is 830 s away); they are woken when job 1 ends.
    assert s[2] == pytest.approx(1000.0 + 20.0)


@pytest.mark.parametrize(("mode", "down"), [("window", False), ("always", True)])
def test_shutdown_outside_the_window_only_when_asked(mode, down):
    # No window in force (the next one opens at 1000): 'window' (the experiment's, as the authors' code)
    # powers nothing down; 'always' powers the two idle nodes down.
    s = snapshot(platform(2), [], [], now=0.0, upcoming_budgets=[EnergyBudget(1000.0, 2000.0, 1e6)])
    plan = make_policy("energy-bud", {"shutdown": mode}).decide(s, None)
    assert plan.actions == ([PowerDown(0), PowerDown(1)] if down else [])
    # Off by default.
    assert make_policy("energy-bud").params.shutdown == "never"
