"""EASY+PC: power checks on predicted power, power-aware reservations, the paper's check methods."""

from __future__ import annotations

import random
import re
from unittest.mock import patch

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wattsched.policies.easy as easy_module
from builders import TagsChanged, platform, snapshot, tj
from wattsched.model.constraints import CapSchedule, EnergyBudget
from wattsched.model.end_table import EndTable
from wattsched.model.job import Job, PowerEstimate
from wattsched.policies import easy_pc, make_policy
from wattsched.policies.easy_pc import EasyPcPolicy
from wattsched.policies.power import PowerLedger
from wattsched.predictors import make_predictor
from wattsched.sim.engine import Engine, EngineOptions

# SIMPLE_POWER: idle 100 W, busy 300 W per node.


def run(jobs, policy, predictor=None, n=4, cap=None, options=None):
    return Engine(platform(n), jobs, policy, cap=cap, predictor=predictor, options=options).run()


NO_FORESIGHT = EngineOptions(cap_lookahead_s=0.0)
"""A site that announces no cap change ahead: the guard holds plans to the cap in force only."""


def starts(result):
    """Start time by job id; None for a job that never started (NaN would not compare equal)."""
    return {i: (None if s != s else s) for i, s in zip(result.jobs["id"].tolist(), result.jobs["start_s"].tolist())}


def test_oracle_max_never_exceeds_the_cap_while_mean_does():
    # Ten 1-node jobs whose power swings in phase between 150 and 250 W (mean 200, max 250, std 50).
    series = ((0.0, 150.0), (10.0, 250.0), (20.0, 150.0), (30.0, 250.0))
    jobs = [tj(i, 0.0, 40.0, power_series=series) for i in range(1, 11)]
    cap = CapSchedule.constant(1500.0)  # 10 idle nodes = 1000 W: room for 500 W of increments
    peaks = {}
    for check in ("mean", "max", "gaussian_99"):
        r = run(jobs, make_policy("easy-pc", {"check": check}), make_predictor("oracle"), n=10, cap=cap)
        peaks[check] = r.timeline["power_w"].max()
        assert set(r.jobs["state"]) == {"COMPLETED"}
    # mean: 5 jobs at once (5 x 100 W predicted), real peak 1000 - 500 + 5 x 250 = 1750 W
    assert peaks["mean"] == pytest.approx(1750.0)
    # max: 3 jobs at once (3 x 150 W), real peak 1450 W
    assert peaks["max"] <= 1500.0
    assert peaks["gaussian_99"] <= 1500.0


def test_reservation_accounts_for_power_and_backfill_does_not_take_the_heads_power():
    # 4 nodes, cap 1000 W: idle 400 W + room for three busy nodes (200 W each above idle).
    jobs = [
        tj(1, 0, 100, nodes=2),             # 800 W predicted
        tj(2, 1, 100, nodes=3),             # head: nodes at t=100, power then 400 + 600 = 1000 W
        tj(3, 2, 500, nodes=1),             # fits now, runs past t=100 on the spare node: no power left then
        tj(4, 3, 50, nodes=1, walltime=60),  # ends by t=100: may backfill
    ]
    cap = CapSchedule.constant(1000.0)
    s = starts(run(jobs, make_policy("easy-pc", {"check": "max"}), make_predictor("naive"), cap=cap))
    assert s[1] == 0 and s[4] == 3 and s[2] == 100
    assert s[3] >= 200  # after job 2, not before
    plain = starts(run(jobs, make_policy("easy"), cap=cap))
    assert plain[3] == 2  # power-unaware EASY backfills it on the spare node


def test_cap_window_ends_and_jobs_start():
    jobs = [tj(i, 0, 100, nodes=1) for i in range(1, 5)]
    cap = CapSchedule.window(0.0, 50.0, 600.0)  # room for one busy node during [0, 50)
    r = run(jobs, make_policy("easy-pc", {"check": "mean", "lookahead": False}), make_predictor("naive"), cap=cap)
    s = starts(r)
    assert sorted(s.values()) == [0, 50, 50, 50]


def test_lookahead_always_keeps_jobs_out_of_a_coming_window():
    jobs = [tj(1, 0, 100, nodes=1), tj(2, 0, 100, nodes=1)]
    cap = CapSchedule.window(50.0, 500.0, 600.0)  # from t=50 only one busy node fits
    with_lookahead = starts(run(jobs, make_policy("easy-pc", {"check": "max"}), make_predictor("naive"), cap=cap))
    assert sorted(with_lookahead.values()) == [0, 100]
    # `true`, as configurations said before the modes, is `always`
    assert make_policy("easy-pc", {"lookahead": True}).params.lookahead == "always"
    assert make_policy("easy-saf", {"lookahead": False}).params.lookahead == "off"
    without = starts(run(jobs, make_policy("easy-pc", {"check": "max", "lookahead": False}),
                         make_predictor("naive"), cap=cap, options=NO_FORESIGHT))
    assert sorted(without.values()) == [0, 0]


@pytest.mark.parametrize("name", ["easy-pc", "easy-saf", "knapsack"])
def test_window_lookahead_holds_jobs_only_from_the_window_start(name):
    # 4 nodes (idle 100, busy 300 W), window [50, 500) at 600 W: 400 W idle + one busy node.
    # Jobs 1 and 2 are submitted before the window (the warm-up) and would run into it; 3 and 4
    # are submitted inside it.
    jobs = [tj(1, 0, 100, nodes=1), tj(2, 0, 100, nodes=1), tj(3, 60, 100, nodes=1), tj(4, 60, 100, nodes=1)]
    cap = CapSchedule.window(50.0, 500.0, 600.0)

    def go(params):
        return starts(run(jobs, make_policy(name, {"check": "max", **params}), make_predictor("naive"), cap=cap))

    # `window` (the paper's, the reproduction's): nothing is held before t=50, so 1 and 2 both start
    # at 0 (and run into the window); inside it, one busy node at a time: 3 when both end at 100, 4
    # when 3 ends at 200.
    assert go({"lookahead": "window"}) == {1: 0.0, 2: 0.0, 3: 100.0, 4: 200.0}
    # `always` (the policies' default, the lookahead from now): 2 is held at t=0 because its requested
    # time reaches the window, so the machine enters the window at the cap: 2 at 100, 3 at 200, 4 at 300.
    assert make_policy(name).params.lookahead == "always"
    assert go({}) == {1: 0.0, 2: 100.0, 3: 200.0, 4: 300.0}


def test_lookahead_mode_is_checked():
    from wattsched.errors import ConfigError

    message = "params.lookahead: Input should be 'window', 'always' or 'off', got 'soon'"
    with pytest.raises(ConfigError, match=re.escape(message)):
        make_policy("easy-pc", {"lookahead": "soon"})


job_strategy = st.tuples(st.integers(0, 30), st.integers(0, 25), st.integers(1, 25), st.integers(1, 5))


@settings(max_examples=100, deadline=None)
@given(st.lists(job_strategy, min_size=1, max_size=30))
def test_without_a_cap_easy_pc_is_easy(raw):
    raw = sorted(raw, key=lambda x: x[0])
    jobs = [tj(k + 1, float(s), float(r), nodes=n, walltime=float(w)) for k, (s, r, w, n) in enumerate(raw)]
    a = starts(run(jobs, make_policy("easy"), n=6))
    b = starts(run(jobs, make_policy("easy-pc"), make_predictor("history"), n=6))
    assert a == b


def _called_at_every_event(policy):
    """``policy`` called after every event: steps of jobs' power included, however few nodes are free."""
    return TagsChanged(policy, ignores_power_steps=False, starts_on_free_nodes=False)


def test_easy_pc_and_its_family_ignore_steps_of_measured_power_and_knapsack_does_not():
    for name in ("easy-pc", "easy-saf", "bf", "dvfs"):
        tags = make_policy(name).tags()
        assert tags.ignores_power_steps and tags.starts_on_free_nodes
    # knapsack's profits (wait, stretch) rank the queue differently as time passes: a later call may start others
    tags = make_policy("knapsack").tags()
    assert not tags.ignores_power_steps and not tags.starts_on_free_nodes


def test_easy_pc_is_not_called_when_only_a_running_jobs_power_steps():
    calls = []

    class Counted(EasyPcPolicy):
        def decide(self, snapshot, state=None):
            calls.append(snapshot.now_s)
            return super().decide(snapshot, state)

    # job 1 steps its power at 10, 20 and 30 s; job 2 waits for it until 40 s, a node free but not the power:
    # 2 idle nodes (200 W) + job 1 (100 W above idle, sigma 50 W) + job 2 (200 W) + 3 sigma = 650 W > 500 W
    series = ((0.0, 150.0), (10.0, 250.0), (20.0, 150.0), (30.0, 250.0))
    jobs = [tj(1, 0.0, 40.0, power_series=series, mean_w=200.0, max_w=250.0, std_w=50.0),
            tj(2, 1.0, 10.0, mean_w=300.0, max_w=300.0, std_w=0.0)]
    cap = CapSchedule.constant(500.0)
    r = run(jobs, Counted(), make_predictor("oracle"), n=2, cap=cap)
    assert starts(r) == {1: 0.0, 2: 40.0}
    assert calls == [0.0, 1.0, 40.0]
    calls.clear()
    every = run(jobs, _called_at_every_event(Counted()), make_predictor("oracle"), n=2, cap=cap)
    assert calls == [0.0, 1.0, 10.0, 20.0, 30.0, 40.0]  # what the tag saves
    assert starts(every) == starts(r)
    calls.clear()
    # on one node, job 2 finds no node free at its submission: nothing to call the policy for until 40 s
    r = run(jobs, Counted(), make_predictor("oracle"), n=1, cap=cap)
    assert starts(r) == {1: 0.0, 2: 40.0}
    assert calls == [0.0, 40.0]


step_job_strategy = st.tuples(st.integers(0, 30), st.integers(1, 25), st.integers(1, 25), st.integers(1, 4),
                              st.lists(st.tuples(st.integers(1, 12), st.floats(110.0, 300.0)), max_size=4))


@settings(max_examples=100, deadline=None)
@given(st.lists(step_job_strategy, min_size=1, max_size=40), st.sampled_from(["mean", "max", "gaussian_99"]),
       st.sampled_from(["easy-pc", "easy-saf", "bf", "dvfs"]), st.sampled_from(["oracle", "history"]),
       st.sampled_from(["constant", "window", "steps", "budget"]))
def test_skipping_the_steps_of_jobs_power_changes_no_schedule(raw, check, name, predictor, cap_kind):
    from wattsched.model.response import LinearResponse

    raw = sorted(raw, key=lambda x: x[0])
    jobs = []
    for k, (s, r, w, n, steps) in enumerate(raw):
        at, series = 0.0, [(0.0, 200.0)]
        for dt, watts in steps:  # steps inside and past the run, some of them at the same instants as events
            at += float(dt)
            series.append((at, watts))
        jobs.append(tj(k + 1, float(s) / 2, float(r), nodes=n, walltime=float(w), user=f"u{k % 3}",
                       mean_w=200.0, max_w=300.0, std_w=30.0, power_series=tuple(series),
                       app_class="cpu" if k % 2 else ""))
    cap_w = 6 * 100 + 3 * 150.0
    cap = {"constant": CapSchedule.constant(cap_w), "window": CapSchedule.window(5.0, 40.0, cap_w),
           "steps": CapSchedule.window(0.0, 20.0, cap_w + 200.0),
           "budget": CapSchedule.constant(cap_w)}[cap_kind]
    # with an energy budget the guard rejects plans that would spend more than the window has left; whether it
    # lets a plan through moves with the energy measured so far, so a rejected plan is asked for again at steps
    budgets = [EnergyBudget(0.0, 60.0, 60_000.0)] if cap_kind == "budget" else []
    # dvfs slows the blocked head of the cpu class (half the jobs) when power, not nodes, holds it
    plat = platform(6).with_response_classes({"cpu": LinearResponse(f=1.0)})

    def go(policy):
        return Engine(plat, jobs, policy, cap=cap, budgets=budgets, predictor=make_predictor(predictor),
                      options=EngineOptions(strict=False)).run()

    skipping = go(make_policy(name, {"check": check}))
    every = go(_called_at_every_event(make_policy(name, {"check": check})))
    for column in ("id", "start_s", "end_s", "energy_j"):  # NaN: never started, under a cap it never fits
        assert [None if x != x else x for x in skipping.jobs[column].tolist()] == \
            [None if x != x else x for x in every.jobs[column].tolist()]
    assert skipping.timeline["power_w"].tolist() == every.timeline["power_w"].tolist()
    assert skipping.info["plans_rejected"] <= every.info["plans_rejected"]
    assert skipping.info["policy_calls"] <= every.info["policy_calls"]


def test_a_plan_the_guard_rejected_is_asked_for_again_at_the_next_step_of_a_jobs_power():
    # Job 2's plan would spend more than the energy budget has left at 1 s. Job 1 draws less than predicted, so
    # the guard's verdict turns as time passes: at job 1's step at 10 s the same plan fits. The engine calls the
    # policy there (not at 50 s, the window's end, its next event otherwise), as a daemon deciding at every
    # event, or a run that calls at every step, does.
    jobs = [tj(1, 0.0, 100.0, mean_w=200.0, max_w=200.0, std_w=0.0,
               power_series=((0.0, 150.0), (10.0, 160.0), (30.0, 150.0))),
            tj(2, 1.0, 100.0, mean_w=200.0, max_w=200.0, std_w=0.0)]

    def go(policy):
        return Engine(platform(2), jobs, policy, cap=CapSchedule.constant(10_000.0),
                      budgets=[EnergyBudget(0.0, 50.0, 17_000.0)], predictor=make_predictor("oracle"),
                      options=EngineOptions(strict=False)).run()

    skipping = go(make_policy("easy-pc", {"check": "mean"}))
    every = go(_called_at_every_event(make_policy("easy-pc", {"check": "mean"})))
    assert starts(skipping) == starts(every) == {1: 0.0, 2: 10.0}
    assert skipping.info["plans_rejected"] == every.info["plans_rejected"] == 1


@pytest.mark.parametrize("check", ["mean", "max", "gaussian_68", "gaussian_95", "gaussian_99"])
@pytest.mark.parametrize("order", ["fcfs", "saf"])
def test_plans_pass_the_guard_with_their_own_power_estimate(check, order):
    rng = random.Random(3)
    jobs = []
    t = 0.0
    for i in range(400):
        t += rng.expovariate(1 / 10)
        mean = rng.uniform(120, 290)
        jobs.append(tj(i + 1, t, rng.uniform(1, 300), nodes=rng.randint(1, 4), walltime=400.0, user=f"u{i % 7}",
                       mean_w=mean, max_w=min(300.0, mean * 1.1), std_w=mean * 0.05))
    cap = CapSchedule.window(0.0, 2000.0, 8 * 100 + 4 * 200.0)
    # strict engine: the guard checks every plan's power estimate against the cap
    r = run(jobs, make_policy("easy-pc", {"check": check, "order": order}), make_predictor("history"), n=8, cap=cap)
    assert set(r.jobs["state"]) == {"COMPLETED"}


@settings(max_examples=40, deadline=None)
@given(st.lists(job_strategy, min_size=60, max_size=150), st.sampled_from(["mean", "max", "gaussian_95"]))
def test_indexed_backfilling_under_a_cap_matches_the_plain_scan(raw, check):
    import wattsched.policies.easy as easy_module

    raw = sorted(raw, key=lambda x: x[0])
    rng = random.Random(len(raw))
    jobs = [tj(k + 1, float(s) / 4, float(r), nodes=n, walltime=float(w), user=f"u{k % 5}",
               mean_w=rng.uniform(120, 290), max_w=300.0, std_w=rng.uniform(0, 30))
            for k, (s, r, w, n) in enumerate(raw)]
    cap = CapSchedule.window(10.0, 60.0, 6 * 100 + 3 * 150.0)  # lookahead matters before t=10

    def go():
        return starts(run(jobs, make_policy("easy-pc", {"check": check, "lookahead": "always"}),
                          make_predictor("history"), n=6, cap=cap))

    indexed = go()
    saved = easy_module.INDEX_MIN_QUEUE
    easy_module.INDEX_MIN_QUEUE = 10**9
    try:
        plain = go()
    finally:
        easy_module.INDEX_MIN_QUEUE = saved
    assert indexed == plain


@settings(max_examples=40, deadline=None)
@given(st.lists(job_strategy, min_size=5, max_size=80), st.sampled_from(["mean", "max", "gaussian_99"]),
       st.booleans())
def test_replay_with_the_fast_paths_is_the_replay_with_the_plain_algorithm(raw, check, window):
    from reference.easy_pc_plain import PlainEasyPcPolicy

    raw = sorted(raw, key=lambda x: x[0])
    rng = random.Random(len(raw))
    jobs = [tj(k + 1, float(s) / 2, float(r), nodes=n, walltime=float(w), user=f"u{k % 3}",
               mean_w=rng.uniform(120, 290), max_w=300.0, std_w=rng.uniform(0, 30))
            for k, (s, r, w, n) in enumerate(raw)]
    cap_w = 6 * 100 + 3 * 150.0
    cap = CapSchedule.window(5.0, 40.0, cap_w) if window else CapSchedule.constant(cap_w)
    a = starts(run(jobs, EasyPcPolicy({"check": check}), make_predictor("history"), n=6, cap=cap))
    b = starts(run(jobs, PlainEasyPcPolicy(check=check), make_predictor("history"), n=6, cap=cap))
    assert a == b


class _Plain(EasyPcPolicy):
    """easy-pc without its constant-cap backfilling shortcut: the general numpy filter after each start."""

    def _backfill_constant(self, snapshot, plan, ledger, end, res, head, cap_w):
        self._backfill_filtered(snapshot, plan, ledger, end, res, head)


@pytest.mark.parametrize("scan", [True, False], ids=["scan", "numpy-filter"])
@settings(max_examples=60, deadline=None)
@given(st.lists(job_strategy, min_size=20, max_size=200), st.sampled_from(["mean", "max", "gaussian_99"]),
       st.sampled_from(["history", None]), st.sampled_from([6, 40, 150]), st.floats(0.2, 0.95))
def test_constant_cap_shortcuts_match_the_plain_computation(scan, raw, check, predictor, n, fraction):
    # Both ways of the shortcut: the compiled scan (pure Python where not compiled) and numpy's filter.
    raw = sorted(raw, key=lambda x: x[0])
    rng = random.Random(len(raw) * n)
    scale = max(1, n // 10)
    jobs = [tj(k + 1, float(s) / 4, float(r), nodes=min(n, k_n * rng.randint(1, scale)), walltime=float(w),
               user=f"u{k % 5}", mean_w=rng.uniform(110, 290), max_w=300.0, std_w=rng.uniform(0, 30))
            for k, (s, r, w, k_n) in enumerate(raw)]
    cap = CapSchedule.constant(n * 100 + fraction * n * 200)  # some heads never fit under a low cap

    def go(policy):
        return starts(run(jobs, policy, make_predictor(predictor) if predictor else None, n=n, cap=cap))

    with patch.object(easy_module, "INDEX_MIN_QUEUE", 0), patch.object(easy_pc, "_SCAN", scan):
        fast = go(EasyPcPolicy({"check": check}))  # the indexed backfill for every queue
        with patch.object(easy_pc, "_shadow_walk", lambda *a: None), \
                patch.object(easy_pc, "_never_fits", lambda *a: False), patch.object(easy_pc, "_SCAN", False):
            plain = go(_Plain({"check": check}))
    assert fast == plain


@pytest.mark.parametrize("scan", [True, False], ids=["compiled-walk", "python-walk"])
@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from(["mean", "max", "gaussian_95"]))
def test_reservation_walk_and_never_fits_match_the_cumulative_sums(scan, seed, check):
    # Long end tables (the walk hands over to numpy after 64 rows), ties and overdue ends.
    rng = random.Random(seed)
    plat = platform(500)
    now = 1000.0
    table = EndTable(idle_w=100.0)
    ends = sorted(rng.choice([now - 5, now, now + 10, now + 10, rng.uniform(now, now + 1e4)])
                  for _ in range(rng.choice([0, 3, 9, 40, 70, 200])))
    used = 0
    for i, end in enumerate(ends):
        k = rng.randint(1, 3)
        used += k
        mean, std = rng.uniform(120, 300), rng.uniform(0, 25)
        table.insert(i, (end, float(k), mean * k, min(300.0, mean + 20) * k, (std * k) ** 2))
    rows = table.view()
    free = 500 - used
    ledger = PowerLedger(check, 100.0 * free, 100.0, float(rows[:, 2].sum()), float(rows[:, 3].sum()),
                         float(rows[:, 4].sum()))
    head = Job(1, 0.0, 100.0, rng.randint(1, 500))
    est = PowerEstimate(rng.uniform(150, 300), 300.0, rng.uniform(0, 25))
    cap = 100.0 * 500 + rng.uniform(0.0, 1.0) * 200.0 * 500
    snap = snapshot(plat, now=now, cap=CapSchedule.constant(cap), end_table=table, estimates={1: est})
    policy = EasyPcPolicy({"check": check})

    def reserve():
        shadow, extra, at = easy_pc._shadow_vectorised_impl(policy, snap, head, free, ledger.copy(), [])
        return shadow, extra, None if at is None else (at.base_w, at.mean_w, at.max_w, at.var_w2)

    with patch.object(easy_pc, "_SCAN", scan):
        fast = reserve()
    with patch.object(easy_pc, "_shadow_walk", lambda *a: None), \
            patch.object(easy_pc, "_never_fits", lambda *a: False), patch.object(easy_pc, "_SCAN", False):
        plain = reserve()
    assert fast == plain
