"""The demand-response policy (Ahmed et al. 2017): SLSQP frequencies, knapsack eviction, admission, replay."""

from __future__ import annotations

import itertools
import math
import random

import pytest

pytest.importorskip("scipy", reason="the dr policy needs scipy (extra [dr])")

from builders import snapshot, tj
from wattsched.appmodels import FREQ_LEVELS_GHZ, packaged_models
from wattsched.model.constraints import CapSchedule, CapStep, DemandResponseEvent
from wattsched.model.job import Job, RunningJob
from wattsched.model.plan import Evict, SetNodeFreq, Start
from wattsched.model.platform import NodePowerModel, Platform
from wattsched.model.response import LinearResponse
from wattsched.policies import make_policy
from wattsched.policies.dr import (
    JobPowerModel,
    knapsack_keep,
    optimal_frequencies,
    slsqp_frequencies,
    total_energy_j,
    total_power_w,
)
from wattsched.sim.engine import Engine, EngineOptions

MODELS = packaged_models()
APPS = sorted(MODELS)
PROC = NodePowerModel(off_w=5.0, idle_w=60.0, busy_w=220.0, busy_min_w=190.0,
                      freq_levels_hz=tuple(f * 1e9 for f in FREQ_LEVELS_GHZ), cap_min_w=80.0, cap_max_w=220.0)


def ahmed_platform(n: int) -> Platform:
    return Platform.homogeneous_cluster(n, power=PROC).with_response_classes(MODELS)


def random_jobs(rng: random.Random, n: int) -> list[JobPowerModel]:
    return [JobPowerModel(i, rng.uniform(180, 220) * rng.choice([1, 2, 4]), FREQ_LEVELS_GHZ,
                          MODELS[rng.choice(APPS)], rng.uniform(100, 5000)) for i in range(n)]


def brute_force(jobs, budget):
    best = None
    for combo in itertools.product(*(j.levels_ghz for j in jobs)):
        if total_power_w(jobs, combo) <= budget:
            e = total_energy_j(jobs, combo)
            if best is None or e < best[0]:
                best = (e, combo)
    return best


@pytest.mark.parametrize("seed", range(12))
def test_slsqp_frequencies_rounded_down_match_brute_force_over_the_levels(seed):
    rng = random.Random(seed)
    jobs = random_jobs(rng, rng.choice([1, 2, 3]))
    lo = total_power_w(jobs, [j.f_min for j in jobs])
    hi = total_power_w(jobs, [j.f_max for j in jobs])
    budget = lo + rng.uniform(0.05, 1.1) * (hi - lo)
    freqs = optimal_frequencies(jobs, budget)
    best = brute_force(jobs, budget)
    assert best is not None and freqs is not None
    assert all(f in FREQ_LEVELS_GHZ for f in freqs)
    assert total_power_w(jobs, freqs) <= budget  # re-checked after rounding
    # the rounded SLSQP answer is within 1 % of the best discrete choice (the local search closes the gap)
    assert total_energy_j(jobs, freqs) <= best[0] * 1.01
    # and the continuous optimum is a lower bound of the discrete one
    x = slsqp_frequencies(jobs, budget)
    assert total_energy_j(jobs, x) <= best[0] * (1 + 1e-6)


def test_frequencies_are_none_when_even_the_lowest_levels_exceed_the_budget():
    jobs = random_jobs(random.Random(1), 3)
    lo = total_power_w(jobs, [j.f_min for j in jobs])
    assert optimal_frequencies(jobs, lo * 0.99) is None
    assert optimal_frequencies(jobs, lo) == [j.f_min for j in jobs]


def test_an_unbinding_cap_gives_each_job_its_energy_optimal_level():
    jobs = random_jobs(random.Random(2), 2)
    freqs = optimal_frequencies(jobs, 1e9)
    for j, f in zip(jobs, freqs, strict=True):
        assert j.energy_j(f) == pytest.approx(min(j.energy_j(g) for g in j.levels_ghz))


def test_a_budget_that_fits_every_job_at_its_least_energy_level_needs_no_solver(monkeypatch):
    import wattsched.policies.dr as dr

    jobs = random_jobs(random.Random(5), 40)
    own = [dr.least_energy_level(j) for j in jobs]
    assert own == [min(j.levels_ghz, key=j.energy_j) for j in jobs]  # no ties among the packaged models
    monkeypatch.setattr(dr, "slsqp_frequencies", lambda *a, **k: pytest.fail("the solver ran"))
    assert optimal_frequencies(jobs, total_power_w(jobs, own)) == own
    assert brute_force(jobs[:3], total_power_w(jobs[:3], own[:3]))[1] == tuple(own[:3])
    # energy that does not depend on the frequency: the fastest level, not one picked by rounding noise
    flat = JobPowerModel(9, 800.0, FREQ_LEVELS_GHZ, LinearResponse(f=1.0, floor=0.0), 1000.0)
    assert dr.least_energy_level(flat) == 2.7


@pytest.mark.parametrize("seed", range(20))
def test_knapsack_matches_enumeration(seed):
    rng = random.Random(seed)
    n = rng.randint(1, 8)
    values = [rng.uniform(0, 100) for _ in range(n)]
    weights = [float(rng.randint(1, 40)) for _ in range(n)]
    capacity = float(rng.randint(0, 120))
    keep = knapsack_keep(values, weights, capacity)
    assert sum(w for w, k in zip(weights, keep, strict=True) if k) <= capacity
    best = max(sum(v for v, k in zip(values, ks, strict=True) if k)
               for ks in itertools.product([False, True], repeat=n)
               if sum(w for w, k in zip(weights, ks, strict=True) if k) <= capacity)
    assert sum(v for v, k in zip(values, keep, strict=True) if k) == pytest.approx(best)


def test_knapsack_with_coarse_buckets_still_fits():
    rng = random.Random(3)
    weights = [rng.uniform(100, 3000) for _ in range(60)]
    values = [rng.uniform(0, 1) for _ in range(60)]
    keep = knapsack_keep(values, weights, 20_000.0, max_buckets=50)
    assert sum(w for w, k in zip(weights, keep, strict=True) if k) <= 20_000.0


def _running(job: Job, start: float, nodes, power_w: float, now: float) -> RunningJob:
    return RunningJob(job, start, tuple(nodes), start + job.walltime_s, power_w=power_w)


def test_dr_lowers_frequencies_under_an_event_and_evicts_the_job_with_least_energy_spent():
    plat = ahmed_platform(4)
    a = Job(1, 0.0, 1000.0, 2, app_class="qe")
    b = Job(2, 0.0, 1000.0, 2, app_class="walberla")
    snap = snapshot(plat, running=[(a, 0.0, (0, 1)), (b, 900.0, (2, 3))], now=950.0)
    snap.running = {1: _running(a, 0.0, (0, 1), 430.0, 950.0), 2: _running(b, 900.0, (2, 3), 380.0, 950.0)}
    snap.platform_power_w = 810.0
    policy = make_policy("dr")
    # no cap: everything at f_max, nothing to do
    assert policy.decide(snap).actions == []
    # a cap that the lowest frequencies meet: frequencies lowered, on every node of a job alike, no eviction
    snap.cap = CapSchedule.constant(700.0)
    plan = policy.decide(snap)
    freqs = {a.node: a.freq_hz for a in plan.actions if isinstance(a, SetNodeFreq)}
    assert not any(isinstance(x, Evict) for x in plan.actions)
    assert freqs and freqs.get(0) == freqs.get(1) and freqs.get(2) == freqs.get(3)
    assert all(f is None or f / 1e9 in FREQ_LEVELS_GHZ for f in freqs.values())
    # a cap below both jobs at f_min: the job that has spent least (b: 50 s of 1000) is evicted
    snap.cap = CapSchedule.constant(350.0)
    plan = policy.decide(snap)
    assert [x.job_id for x in plan.actions if isinstance(x, Evict)] == [2]
    assert {x.node for x in plan.actions if isinstance(x, SetNodeFreq) and x.freq_hz} == {0, 1}


def test_dr_admission_uses_the_lowest_frequency_and_the_announced_event():
    plat = ahmed_platform(4)
    job = Job(7, 0.0, 3600.0, 2, app_class="qe")
    snap = snapshot(plat, pending=[job], now=0.0)
    snap.platform_power_w = 240.0
    policy = make_policy("dr")
    # starts with no cap
    assert [type(x) for x in policy.decide(snap).actions] == [Start]
    # an event announced during its requested time, below even its f_min power: it waits, with a reason
    snap.cap = CapSchedule.window(600.0, 1200.0, 250.0)
    plan = policy.decide(snap)
    assert plan.actions == [] and "announced" in plan.reason_for(7)
    # the same, without lookahead: FCFS by Eq. 7 only (the cap in force now)
    plan = make_policy("dr", {"lookahead": False}).decide(snap)
    assert [type(x) for x in plan.actions] == [Start]


def test_baselines_run_at_their_fixed_frequency():
    plat = ahmed_platform(2)
    job = Job(3, 0.0, 100.0, 2, app_class="gadget")
    snap = snapshot(plat, pending=[job], now=0.0)
    snap.platform_power_w = 120.0
    save = make_policy("powersave").decide(snap)
    assert {a.freq_hz for a in save.actions if isinstance(a, SetNodeFreq)} == {1.2e9}
    perf = make_policy("performance").decide(snap)
    assert [type(a) for a in perf.actions] == [Start]


def test_admission_scans_the_queue_for_eligible_jobs_as_algorithm_1_line_1():
    plat = ahmed_platform(4)
    wide = Job(1, 0.0, 3600.0, 4, app_class="qe")  # too much power even at f_min under the cap
    narrow = Job(2, 1.0, 3600.0, 1, app_class="qe")  # fits
    snap = snapshot(plat, pending=[wide, narrow], now=10.0)
    snap.platform_power_w = 240.0
    snap.cap = CapSchedule([CapStep(0.0, 300.0, "")])
    for name in ("dr", "performance", "powersave"):
        plan = make_policy(name).decide(snap)
        starts = [a.job_id for a in plan.actions if isinstance(a, Start)]
        if name == "performance":  # at f_max the narrow job does not fit either (220 W + 3 idle nodes at 60 W > 300 W)
            assert starts == [] and "exceed the cap" in plan.reason_for(2)
        else:
            assert starts == [2], name
        assert "exceed the cap" in plan.reason_for(1)
        # strict FCFS: the narrow job waits behind the wide one
        plan = make_policy(name, {"queue": "fcfs"}).decide(snap)
        assert not any(isinstance(a, Start) for a in plan.actions)
        assert plan.reason_for(2) == "behind an earlier job (FCFS)"


def test_cap_agnostic_baselines_admit_by_free_nodes_only():
    plat = ahmed_platform(4)
    job = Job(5, 0.0, 3600.0, 4, app_class="seissol")
    snap = snapshot(plat, pending=[job], now=0.0)
    snap.platform_power_w = 240.0
    # a cap in force below the job's power even at f_min, and a lower one announced: cap-aware baselines wait
    snap.cap = CapSchedule([CapStep(0.0, 300.0, ""), CapStep(600.0, 250.0, "")])
    for name in ("performance", "powersave"):
        plan = make_policy(name).decide(snap)
        assert not any(isinstance(a, Start) for a in plan.actions)
        assert "exceed the cap" in plan.reason_for(5)
        # cap_aware: false starts it all the same, at the policy's own frequency, and evicts nothing
        plan = make_policy(name, {"cap_aware": False}).decide(snap)
        assert [a.job_id for a in plan.actions if isinstance(a, Start)] == [5]
        assert not any(isinstance(a, Evict) for a in plan.actions)
        freqs = {a.freq_hz for a in plan.actions if isinstance(a, SetNodeFreq)}
        assert freqs == (set() if name == "performance" else {1.2e9})


class _Watch:
    """Wraps a policy and records what each call saw and did."""

    def __init__(self, policy):
        self.policy = policy
        self.seen = []
        for k in ("name", "Params", "State"):
            setattr(self, k, getattr(policy, k))

    def tags(self):
        return self.policy.tags()

    def init_state(self):
        return self.policy.init_state()

    def decide(self, snap, state=None):
        plan = self.policy.decide(snap, state)
        self.seen.append((snap.now_s, len(snap.dr_events), snap.cap_w, snap.lowest_cap(1e9), list(plan.actions)))
        return plan


def test_in_replay_an_event_is_invisible_to_dr_before_its_notice_time():
    plat = ahmed_platform(4)
    jobs = [tj(1, 0.0, 5000.0, nodes=4, walltime=6000.0, app_class="qe", mean_w=215.0, max_w=220.0),
            tj(2, 100.0, 10.0, nodes=1, app_class="qe", mean_w=215.0, max_w=220.0),
            tj(3, 3000.0, 10.0, nodes=1, app_class="qe", mean_w=215.0, max_w=220.0)]
    event = DemandResponseEvent(notice_s=1000.0, start_s=2000.0, end_s=4000.0, cap_w=700.0)
    watch = _Watch(make_policy("dr"))
    result = Engine(plat, jobs, watch, dr_events=[event],
                    options=EngineOptions(strict=True, tick_s=250.0, response_classes=MODELS)).run()
    before = [s for s in watch.seen if s[0] < 1000.0]
    assert before and all(n == 0 and math.isinf(cap) and math.isinf(ahead) for _, n, cap, ahead, _ in before)
    assert all(not any(isinstance(a, SetNodeFreq) for a in acts) for *_, acts in before)
    noticed = [s for s in watch.seen if 1000.0 <= s[0] < 2000.0]
    assert noticed and all(n == 1 and math.isinf(cap) and ahead == 700.0 for _, n, cap, ahead, _ in noticed)
    at_start = next(s for s in watch.seen if s[0] >= 2000.0)
    assert any(isinstance(a, SetNodeFreq) and a.freq_hz for a in at_start[4])
    # the platform stayed under the event's cap while it was in force
    t, p = result.timeline["t_s"], result.timeline["power_w"]
    inside = [(p[i]) for i in range(len(t) - 1) if t[i + 1] > 2000.0 and t[i] < 4000.0]
    assert inside and max(inside) <= 700.0 + 1e-6
