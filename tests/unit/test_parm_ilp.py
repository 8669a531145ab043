"""The PARM ILP (Sarood et al. 2014, Fig. 2): optimum against enumeration, constraints, Eq. 8's α, hints, bad input."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wattsched.errors import PolicyError
from wattsched.policies.parm_ilp import (
    VERSIONS,
    Assignment,
    ParmInstance,
    PendingJob,
    RunningJob,
    combinations,
    solve,
)
from wattsched.scalingmodels import packaged_pass_models

pytest.importorskip("ortools.sat.python.cp_model")

APPS = packaged_pass_models()
BASE_W, MEM_W = 38.0, 18.0
LEVELS = (33.0, 36.0, 39.0)  # at or above p_l and at or below p_h of leanmd, wave2d, lulesh and amr: none pruned


def four_jobs(version: str, alpha: float = 0.5) -> ParmInstance:
    """Three pending jobs and one running, 12 nodes and a budget that binds before the nodes do."""
    pending = (
        PendingJob(1, APPS["leanmd"], 2, 6, 4, submit_s=100.0),
        PendingJob(2, APPS["wave2d"], 1, 4, 3, submit_s=900.0),
        PendingJob(3, APPS["amr"], 2, 5, 4, submit_s=0.0),
    )
    running = (RunningJob(4, APPS["lulesh"], 2, 6, 3, submit_s=0.0, nodes=3, cpu_w=39.0, fraction_done=0.4),)
    return ParmInstance(now_s=1000.0, pending=pending, running=running, total_nodes=12, budget_w=900.0,
                        levels_w=LEVELS, base_w=BASE_W, mem_w=MEM_W, alpha=alpha, version=version,
                        time_limit_s=10.0)


def brute_force(inst: ParmInstance) -> tuple[float, dict[int, tuple[int, float]]]:
    """Eq. 1's optimum by enumerating every combination of every job, from the paper's formulas directly."""
    options = []
    for j in (*inst.pending, *inst.running):
        run = isinstance(j, RunningJob)
        n0 = j.requested_nodes if inst.version == "noMM" else j.min_nodes
        p0 = min(inst.levels_w)
        t0 = j.model.time(n0, p0)
        rem = 1 - j.fraction_done if run else 1.0
        w = (rem * t0 + inst.now_s - j.submit_s) ** inst.alpha                         # Eq. 8
        if inst.version == "noMM":
            counts = [j.nodes] if run else [j.requested_nodes]
        elif run and inst.version == "noSE":
            counts = [j.nodes]                                                          # Eq. 6
        else:
            counts = range(j.min_nodes, j.max_nodes + 1)
        opts = [] if run else [None]                                                    # Eqs. 2, 3
        for n in counts:
            for p in inst.levels_w:
                t = j.model.time(n, p)
                if run and n != j.nodes:
                    t_b = 0.01904 * (n - j.nodes) + 72.73 if n > j.nodes else 0.0      # Eq. 21, no memory
                    s = rem * t0 / (rem * t + 2 * t_b)
                else:
                    s = t0 / t                                                          # Eq. 7
                opts.append((j.id, n, p, w * s))
        options.append(opts)
    best, arg = -1.0, None
    for pick in itertools.product(*options):
        chosen = [o for o in pick if o is not None]
        if sum(o[1] for o in chosen) > inst.total_nodes:                                # Eq. 4
            continue
        if sum(o[1] * (inst.base_w + inst.mem_w + o[2]) for o in chosen) > inst.budget_w:  # Eq. 5
            continue
        value = sum(o[3] for o in chosen)
        if value > best:
            best, arg = value, {o[0]: (o[1], o[2]) for o in chosen}
    return best, arg


def assert_feasible(inst: ParmInstance, sol, fallback: bool = False) -> None:
    assert sol.status in (("UNKNOWN",) if fallback else ("OPTIMAL", "FEASIBLE"))
    assert sum(c.nodes for c in sol.choices.values()) <= inst.total_nodes
    power = sum(c.nodes * (inst.base_w + inst.mem_w + c.cpu_w) for c in sol.choices.values())
    assert power <= inst.budget_w + 1e-9
    assert math.isclose(power, sol.power_w())
    for j in inst.running:                                 # Eq. 3: every running job has exactly one choice
        assert j.id in sol.choices
        if inst.version != "wSE":
            assert sol.choices[j.id].nodes == j.nodes      # Eq. 6
    for j in inst.pending:
        if j.id in sol.choices:
            c = sol.choices[j.id]
            assert c.cpu_w in inst.levels_w
            assert j.min_nodes <= c.nodes <= j.max_nodes
            if inst.version == "noMM":
                assert c.nodes == j.requested_nodes
    assert set(sol.choices) <= {j.id for j in (*inst.pending, *inst.running)}


@pytest.mark.parametrize("version", VERSIONS)
def test_four_jobs_optimum_equals_enumeration(version):
    inst = four_jobs(version)
    best, arg = brute_force(inst)
    sol = solve(inst)
    assert sol.status == "OPTIMAL"
    assert_feasible(inst, sol)
    assert sol.objective == pytest.approx(best, rel=1e-5)
    assert sol.best_bound == pytest.approx(best, rel=1e-5)
    assert sol.gap == pytest.approx(0.0, abs=1e-9) and not sol.hit_time_limit
    assert {j: (c.nodes, c.cpu_w) for j, c in sol.choices.items()} == arg  # no ties in this instance


def test_four_jobs_versions_differ_as_their_freedom_does():
    """wSE has every choice noSE has (same speedup base), and here uses its extra freedom to reshape job 4."""
    no_se, w_se = solve(four_jobs("noSE")), solve(four_jobs("wSE"))
    assert w_se.objective > no_se.objective
    assert w_se.reshaped == [4] and no_se.reshaped == []
    assert w_se.reshape_charge_s == pytest.approx(2 * w_se.choices[4].reshape_s)
    no_mm = solve(four_jobs("noMM"))
    assert {no_mm.choices[j].nodes for j in no_mm.started} <= {4, 3}


def test_reshape_is_blocked_within_f_se():
    inst = four_jobs("wSE")
    r = inst.running[0]
    recent = RunningJob(r.id, r.model, r.min_nodes, r.max_nodes, r.requested_nodes, r.submit_s, r.nodes, r.cpu_w,
                        r.fraction_done, last_reshape_s=inst.now_s - 499.0)
    import dataclasses

    blocked = dataclasses.replace(inst, running=(recent,))
    assert {c.nodes for jc in combinations(blocked) if jc.id == 4 for c in jc.combos} == {3}
    assert solve(blocked).reshaped == []
    free = dataclasses.replace(blocked, now_s=inst.now_s + 1.0)
    assert {c.nodes for jc in combinations(free) if jc.id == 4 for c in jc.combos} == {2, 3, 4, 5, 6}


@st.composite
def instances(draw):
    version = draw(st.sampled_from(VERSIONS))
    n_total = draw(st.integers(4, 16))
    levels = tuple(sorted(draw(st.sets(st.sampled_from((30.0, 33.0, 36.0, 44.0, 50.0, 60.0)), min_size=1,
                                       max_size=3)) | {36.0}))
    names = sorted(APPS)
    jobs = []
    for i in range(draw(st.integers(1, 5))):
        lo = draw(st.integers(1, 4))
        hi = draw(st.integers(lo, lo + 12))
        req = draw(st.integers(lo, hi))
        if version == "noMM":
            req = min(req, n_total)
            lo = min(lo, req)
        jobs.append((i, APPS[draw(st.sampled_from(names))], lo, hi, req, draw(st.floats(0, 5000))))
    n_run = draw(st.integers(0, min(2, len(jobs))))
    running, used = [], 0
    for i, model, lo, hi, req, sub in jobs[:n_run]:
        nodes = draw(st.integers(lo, hi))
        if used + nodes > n_total:
            continue
        used += nodes
        running.append(RunningJob(i, model, lo, hi, req, sub, nodes=nodes, cpu_w=levels[-1],
                                  fraction_done=draw(st.floats(0, 0.9)),
                                  last_reshape_s=draw(st.one_of(st.none(), st.floats(0, 6000)))))
    pending = tuple(PendingJob(i, m, lo, hi, req, sub) for i, m, lo, hi, req, sub in jobs[n_run:]
                    if (req if version == "noMM" else lo) <= n_total)
    floor_w = sum(r.nodes for r in running) * (BASE_W + MEM_W + 36.0)
    budget = floor_w + draw(st.floats(1.0, 1500.0))
    return ParmInstance(now_s=6000.0, pending=pending, running=tuple(running), total_nodes=n_total, budget_w=budget,
                        levels_w=levels, base_w=BASE_W, mem_w=MEM_W, alpha=draw(st.sampled_from((0.0, 0.5, 2.0))),
                        version=version, time_limit_s=5.0)


@settings(max_examples=25, deadline=None)
@given(instances())
def test_constraints_hold_on_random_instances(inst):
    sol = solve(inst)
    assert_feasible(inst, sol)
    jobs = combinations(inst)
    if math.prod(len(jc.combos) + 1 for jc in jobs) <= 20_000:
        # the candidates' own enumeration (the candidate rules are pinned by the four-job test and the doctests)
        best = -1.0
        for pick in itertools.product(*[([] if jc.running else [None]) + [(jc, c) for c in jc.combos]
                                        for jc in jobs]):
            chosen = [o for o in pick if o is not None]
            if (sum(c.nodes for _, c in chosen) <= inst.total_nodes
                    and sum(c.power_w for _, c in chosen) <= inst.budget_w):
                best = max(best, sum(jc.weight * c.speedup for jc, c in chosen))
        assert sol.objective == pytest.approx(best, rel=1e-5)


def test_alpha_trades_speedup_for_waiting_time():
    """Eq. 8: α = 0 starts the job with the larger speedup; a large α the one that has waited long."""
    fast = PendingJob(1, APPS["leanmd"], 4, 8, 8, submit_s=99_990.0)    # scales well, just arrived
    slow = PendingJob(2, APPS["jacobi2d"], 8, 8, 8, submit_s=0.0)       # one node count, β 0.08, waited 100,000 s
    base = dict(now_s=100_000.0, pending=(fast, slow), running=(), total_nodes=8, budget_w=2_000.0,
                levels_w=(33.0, 36.0, 44.0), base_w=BASE_W, mem_w=MEM_W, version="noSE")
    greedy = solve(ParmInstance(alpha=0.0, **base))
    fair = solve(ParmInstance(alpha=3.0, **base))
    assert greedy.started == [1] and fair.started == [2]
    assert greedy.choices[1].speedup > 1.5 > fair.choices[2].speedup
    assert fair.choices[2].weight > solve(ParmInstance(alpha=3.0, **{**base, "pending": (fast,)})).choices[1].weight


def big_instance(n_jobs: int = 60) -> ParmInstance:
    names = sorted(APPS)
    pending = tuple(PendingJob(i, APPS[names[i % 5]], 4 + i % 7, 20 + 3 * (i % 11), 16 + i % 5, submit_s=7.0 * i)
                    for i in range(n_jobs))
    return ParmInstance(now_s=1000.0, pending=pending, running=(), total_nodes=200, budget_w=200 * 86.0,
                        levels_w=(30.0, 33.0, 36.0, 44.0, 50.0, 60.0), alpha=0.5, version="noSE", time_limit_s=2.0)


def test_previous_solution_is_accepted_as_hint():
    import dataclasses

    inst = big_instance()
    first = solve(inst)
    assert first.status in ("OPTIMAL", "FEASIBLE")
    again = solve(dataclasses.replace(inst, hint=first.as_hint()))
    assert again.hint_jobs == len(first.choices) > 0
    assert again.objective >= first.objective * (1 - 1e-6)
    # a millisecond of deterministic time: CP-SAT's first solution is the hint
    quick = solve(dataclasses.replace(inst, hint=first.as_hint(), time_limit_s=1e-3))
    assert quick.status in ("OPTIMAL", "FEASIBLE") and quick.objective >= first.objective * (1 - 1e-6)
    # a limit too short for any search keeps the hint, a feasible plan
    short = solve(dataclasses.replace(inst, hint=first.as_hint(), time_limit_s=1e-6))
    assert short.status == "UNKNOWN" and short.hit_time_limit and "the hint kept" in short.note
    assert short.as_hint() == first.as_hint() and short.objective == pytest.approx(first.objective)
    bare = solve(dataclasses.replace(inst, time_limit_s=1e-6))
    assert "the greedy plan kept" in bare.note and bare.started     # without a hint: the greedy starting point
    assert_feasible(inst, bare, fallback=True)
    assert first.objective * 0.5 < bare.objective <= first.objective * (1 + 1e-6)  # 0.62 measured
    # a hint naming jobs that are gone and combinations no longer offered is skipped, not an error
    stale = {**first.as_hint(), 999: Assignment(4, 33.0), 0: Assignment(3, 31.0)}
    third = solve(dataclasses.replace(inst, hint=stale))
    assert third.hint_jobs == len(first.choices) - (0 in first.choices)
    assert_feasible(inst, third)


def test_infeasible_hint_is_not_kept():
    import dataclasses

    inst = big_instance()
    everything = {j.id: Assignment(j.max_nodes, 60.0) for j in inst.pending}   # far above N and W_max
    short = solve(dataclasses.replace(inst, hint=everything, time_limit_s=1e-6))
    assert "the greedy plan kept" in short.note
    assert_feasible(inst, short, fallback=True)


def test_time_limit_hit_is_reported():
    import dataclasses

    sol = solve(dataclasses.replace(big_instance(150), time_limit_s=0.002))   # deterministic time: reproducible
    assert sol.status == "FEASIBLE" and sol.hit_time_limit
    assert sol.gap > 0.01 and "solver hit its 0.002 s limit on 150 jobs" in sol.note
    assert sol.best_bound > sol.objective
    assert not solve(big_instance(20)).hit_time_limit


def test_empty_levels_is_an_error():
    import dataclasses

    with pytest.raises(PolicyError, match="levels_w is empty"):
        solve(dataclasses.replace(four_jobs("wSE"), levels_w=()))


def test_budget_below_running_jobs_base_power_is_an_error():
    import dataclasses

    # job 4 runs on 3 nodes: at least 3 × (38 + 18 + 33) = 267 W
    with pytest.raises(PolicyError, match=r"budget_w=200 W is below the least power the running jobs need, 267 W"):
        solve(dataclasses.replace(four_jobs("noSE"), budget_w=200.0))


def test_other_bad_input_is_named():
    import dataclasses

    inst = four_jobs("noSE")
    with pytest.raises(PolicyError, match="version must be one of noMM, noSE, wSE, got 'wse'"):
        solve(dataclasses.replace(inst, version="wse"))
    with pytest.raises(PolicyError, match=r"pending job 2: no CPU level at or above its p_l=32 W"):
        solve(dataclasses.replace(inst, levels_w=(30.0,)))
    with pytest.raises(PolicyError, match="pending job 1 needs at least 4 nodes in noMM, more than N=3"):
        solve(dataclasses.replace(inst, version="noMM", total_nodes=3))
    with pytest.raises(PolicyError, match="pending job 1: requested_nodes=9 is outside"):
        solve(dataclasses.replace(inst, pending=(PendingJob(1, APPS["amr"], 2, 6, 9, 0.0),)))
