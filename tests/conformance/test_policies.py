"""One suite over every registered policy: feasible plans, determinism, unmodified snapshots.

A policy whose optional dependency is missing is skipped with the reason.
"""

from __future__ import annotations

import copy
import random

import pytest

from builders import SIMPLE_POWER, platform, snapshot, tj
from wattsched.model import units
from wattsched.model.constraints import CapSchedule
from wattsched.model.guard import plan_problems
from wattsched.model.job import Job, Unit
from wattsched.model.platform import Node, NodeState, Platform
from wattsched.policies import UnavailablePolicy, available, make_policy, policy_class
from wattsched.policies.base import policy_tags
from wattsched.sim.engine import Engine


def _policy_or_skip(name):
    try:
        policy_class(name)
    except UnavailablePolicy as exc:
        pytest.skip(str(exc))
    return make_policy(name)


def random_snapshot(seed: int):
    rng = random.Random(seed)
    n = rng.randint(1, 12)
    plat = platform(n)
    now = float(rng.randint(0, 1000))
    nodes = list(range(n))
    rng.shuffle(nodes)
    running = []
    jid = 1
    while nodes and rng.random() < 0.7:
        k = rng.randint(1, len(nodes))
        job = Job(jid, now - rng.randint(0, 500), float(rng.randint(1, 900)), k, user=f"u{rng.randint(1, 3)}")
        running.append((job, job.submit_s + rng.randint(0, 50), tuple(nodes[:k])))
        nodes = nodes[k:]
        jid += 1
    pending = []
    for _ in range(rng.randint(0, 40)):
        pending.append(Job(jid, now - rng.randint(0, 300), float(rng.randint(0, 2000)), rng.randint(1, n),
                           user=f"u{rng.randint(1, 3)}"))
        jid += 1
    pending.sort(key=lambda j: (j.submit_s, j.id))
    cap = CapSchedule.constant(rng.choice([None, 300.0 * n, 150.0 * n]))
    snap = snapshot(plat, pending, running, now=now, cap=cap, epoch=seed)
    # some nodes off or drained: they are not free
    for node in list(snap.free_nodes):
        if rng.random() < 0.1:
            snap.node_state[node] = int(rng.choice([NodeState.OFF, NodeState.DRAINED]))
    snap.free_nodes = [i for i, s in enumerate(snap.node_state) if s == NodeState.IDLE]
    return snap


def frozen_view(snap):
    return (
        snap.now_s, list(snap.pending.items()), list(snap.running.items()), list(snap.free_nodes),
        list(snap.node_state), snap.epoch, snap.cap.steps,
    )


@pytest.mark.parametrize("name", available())
@pytest.mark.parametrize("seed", range(40))
def test_plans_are_feasible_deterministic_and_leave_the_snapshot_alone(name, seed):
    policy = _policy_or_skip(name)
    snap = random_snapshot(seed)
    before = copy.deepcopy(frozen_view(snap))
    plan = policy.decide(snap, policy.init_state())
    assert plan_problems(snap, plan) == []
    assert frozen_view(snap) == before
    again = make_policy(name).decide(random_snapshot(seed), policy.init_state())
    assert again.actions == plan.actions
    # every pending job not started has a reason
    started = {a.job_id for a in plan.starts()}
    for job in snap.pending.values():
        if job.id not in started:
            assert plan.reason_for(job.id)


@pytest.mark.parametrize("name", available())
def test_policy_runs_a_trace_through_the_engine_with_the_guard_strict(name):
    policy = _policy_or_skip(name)
    fields = policy.Params.model_fields
    if "time_limit_s" in fields and "max_time_limit_s" in fields:
        # a constraint solver's limits do not change the contract: small ones keep 300 jobs quick
        policy = make_policy(name, {"time_limit_s": 0.01, "max_time_limit_s": 0.04})
    rng = random.Random(7)
    jobs = []
    t = 0.0
    for i in range(300):
        t += rng.expovariate(1 / 20)
        runtime = rng.choice([0.0, rng.uniform(1, 400)])
        jobs.append(tj(i + 1, t, runtime, nodes=rng.randint(1, 8), walltime=max(1.0, runtime * rng.uniform(0.8, 3))))
    result = Engine(platform(8), jobs, policy).run()  # strict: a guard violation raises
    assert set(result.jobs["state"]) <= {"COMPLETED", "TIMEOUT"}
    assert (result.jobs["start_s"] >= result.jobs["submit_s"]).all()
    assert result.timeline["busy_nodes"].max() <= 8


@pytest.mark.parametrize("name", available())
def test_params_round_trip(name):
    policy = _policy_or_skip(name)
    rebuilt = make_policy(name, policy.get_params())
    assert rebuilt.get_params() == policy.get_params()
    assert name in repr(policy) or type(policy).__name__ in repr(policy)


def _unit_platform(n: int) -> Platform:
    return Platform([Node(i, f"n{i}", cores=16, gpus=2 if i % 2 else 0, mem_mb=16384, power=SIMPLE_POWER,
                          mics=0 if i % 2 else 2) for i in range(n)])


def _random_units(rng: random.Random) -> tuple[Unit, ...]:
    kind = rng.choice(["cpu", "cpu", "gpu", "mic"])
    unit = Unit(rng.choice([1, 2, 4, 8, 16]), rng.randint(1, 2) if kind == "gpu" else 0,
                rng.randint(1, 2) if kind == "mic" else 0, 1024 * rng.randint(1, 16))
    return (unit,) * rng.randint(1, 3)  # at most 3 GPU or MIC nodes: every job can run


def random_unit_snapshot(seed: int):
    """Jobs of units (sharing nodes) beside whole-node jobs, running and pending."""
    rng = random.Random(seed)
    n = rng.randint(2, 8)
    plat = _unit_platform(n)
    now = float(rng.randint(0, 1000))
    left = {i: units.capacity(plat.nodes[i]) for i in range(n)}
    whole_free = set(range(n))
    running = []
    jid = 1
    for _ in range(rng.randint(0, 6)):
        us = _random_units(rng)
        nodes = units.place(us, sorted(left), plat, left)
        if nodes is None:
            continue
        units.take(left, plat, us, nodes)
        whole_free -= set(nodes)
        job = Job(jid, now - rng.randint(0, 500), float(rng.randint(1, 900)), len(us), units=us)
        running.append((job, job.submit_s, nodes))
        jid += 1
    if whole_free and rng.random() < 0.5:
        node = min(whole_free)
        running.append((Job(jid, now - 10, 500.0, 1), now - 10, (node,)))
        jid += 1
    pending = []
    for _ in range(rng.randint(0, 25)):
        if rng.random() < 0.7:
            us = _random_units(rng)
            # some read from Slurm: one unit per node, each on a node of its own (a stream of their own)
            distinct = len(us) > 1 and random.Random(seed * 1000 + jid).random() < 0.5
            pending.append(Job(jid, now - rng.randint(0, 300), float(rng.randint(1, 2000)), len(us), units=us,
                               distinct_nodes=distinct))
        else:
            pending.append(Job(jid, now - rng.randint(0, 300), float(rng.randint(1, 2000)), rng.randint(1, n)))
        jid += 1
    pending.sort(key=lambda j: (j.submit_s, j.id))
    cap = CapSchedule.constant(rng.choice([None, 300.0 * n, 150.0 * n]))
    return snapshot(plat, pending, running, now=now, cap=cap, epoch=seed)


@pytest.mark.parametrize("name", available())
@pytest.mark.parametrize("seed", range(15))
def test_plans_with_job_units_are_feasible_and_leave_the_snapshot_alone(name, seed):
    policy = _policy_or_skip(name)
    snap = random_unit_snapshot(seed)
    before = copy.deepcopy((frozen_view(snap), dict(snap.node_free)))
    plan = policy.decide(snap, policy.init_state())
    assert (frozen_view(snap), dict(snap.node_free)) == before
    if not policy_tags(policy).maps_units:  # a whole-node policy: the simulator packs its starts
        plan = units.pack_starts(snap, plan)
    assert plan_problems(snap, plan) == []
    assert (frozen_view(snap), dict(snap.node_free)) == before
    again = make_policy(name).decide(random_unit_snapshot(seed), policy.init_state())
    if not policy_tags(policy).maps_units:
        again = units.pack_starts(random_unit_snapshot(seed), again)
    assert again.actions == plan.actions


@pytest.mark.parametrize("name", available())
def test_policy_runs_jobs_of_units_through_the_engine_with_the_guard_strict(name):
    policy = _policy_or_skip(name)
    fields = policy.Params.model_fields
    if "time_limit_s" in fields and "max_time_limit_s" in fields:
        policy = make_policy(name, {"time_limit_s": 0.01, "max_time_limit_s": 0.04})
    rng = random.Random(11)
    jobs = []
    t = 0.0
    # A policy that powers nodes off sees a job of units as whole nodes: it may keep off the only nodes
    # with the GPUs or MICs the job's units ask for (docs/policies.md, "Jobs of units"); CPU units here.
    cpu_only = name == "easy-shutdown"
    for i in range(150):
        t += rng.expovariate(1 / 30)
        runtime = rng.uniform(1, 400)
        walltime = max(1.0, runtime * rng.uniform(1.0, 3))
        if rng.random() < 0.7:
            us = _random_units(rng)
            if cpu_only:
                us = tuple(Unit(u.cores, 0, 0, u.mem_mb) for u in us)
            jobs.append(tj(i + 1, t, runtime, nodes=len(us), walltime=walltime, units=us))
        else:
            jobs.append(tj(i + 1, t, runtime, nodes=rng.randint(1, 4), walltime=walltime))
    engine = Engine(_unit_platform(6), jobs, policy)
    result = engine.run()  # strict: a guard violation raises
    assert set(result.jobs["state"]) <= {"COMPLETED", "TIMEOUT"}
    assert len(result.jobs["id"]) == 150
    assert result.timeline["busy_nodes"].max() <= 6
    assert set(engine.node_power_w()) <= {SIMPLE_POWER.idle_w, SIMPLE_POWER.off_w} and not engine.ledger.node_free
