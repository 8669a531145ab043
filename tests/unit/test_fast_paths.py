"""Each policy's fast path decides as its plain reference (``tests/reference``) on random snapshots.

The policies keep only their fast paths (the queue index, the end table, the
running estimate, numpy filters, the compiled scan, memos); the plain
algorithms they stand for live under ``tests/reference``. Here 500 seeded
random snapshots per policy (nodes, running jobs with their ends, overdue and
tied ones included, a pending queue, caps constant and changing, predictions
for some, all or none of the jobs, measured power) must give the same plan:
the same starts on the same nodes, the same reasons, the same power estimate.
"""

from __future__ import annotations

import math
import random
from unittest.mock import patch

import pytest

from reference import easy_pc_plain, easy_plain
from wattsched.model.constraints import CapSchedule, CapStep
from wattsched.model.job import Job, PowerEstimate, RunningJob
from wattsched.model.platform import NodePowerModel, NodeState, Platform
from wattsched.model.snapshot import Snapshot
from wattsched.policies import easy, easy_pc
from wattsched.policies.easy import EasyPolicy
from wattsched.policies.easy_pc import EasyPcPolicy

SNAPSHOTS = 500
CHECKS = ("mean", "max", "gaussian_68", "gaussian_95", "gaussian_99")


def random_estimate(rng: random.Random, idle_w: float, busy_w: float) -> PowerEstimate:
    mean = rng.choice([rng.uniform(idle_w * 0.9, busy_w), busy_w, round(rng.uniform(idle_w, busy_w))])
    return PowerEstimate(mean, min(busy_w * 1.2, mean * rng.uniform(1.0, 1.3)), rng.choice([0.0, rng.uniform(0, 40)]))


def random_cap(rng: random.Random, now: float, lo_w: float, hi_w: float) -> CapSchedule:
    kind = rng.choice(["none", "constant", "constant", "constant", "window", "window", "steps", "ended"])
    level = lambda: rng.uniform(lo_w, hi_w)  # noqa: E731
    if kind == "none":
        return CapSchedule()
    if kind == "constant":
        return CapSchedule.constant(level())
    if kind == "window":  # a capped window now or ahead
        start = now + rng.choice([-100.0, 0.0, rng.uniform(1, 3000)])
        return CapSchedule.window(start, start + rng.uniform(10, 5000), level())
    if kind == "ended":  # a window over before now: no cap in force, none ahead
        return CapSchedule.window(now - 500.0, now - 100.0, level())
    t = now - rng.uniform(0, 500)
    steps = []
    for _ in range(rng.randint(1, 6)):
        steps.append(CapStep(t, rng.choice([level(), math.inf]), "step"))
        t += rng.uniform(1, 2000)
    return CapSchedule(steps)


def random_snapshot(seed: int) -> Snapshot:
    rng = random.Random(seed)
    n = rng.choice([1, 3, 8, 20, 64, 150])
    idle_w, busy_w = rng.choice([(100.0, 300.0), (95.0, 190.738), (50.0, 400.0)])
    plat = Platform.homogeneous_cluster(n, power=NodePowerModel(idle_w=idle_w, busy_w=busy_w))
    now = float(rng.randint(0, 10_000))
    nodes = list(range(n))
    rng.shuffle(nodes)
    ends = [now - 5.0, now, now + 10.0, now + 30.0, now + 60.0, now + 600.0]  # overdue, now, ties, = walls
    running: dict[int, RunningJob] = {}
    jid = 1
    busy_share = rng.random()
    while len(nodes) > n * (1 - busy_share) and nodes:
        k = min(len(nodes), rng.choice([1, 1, 2, rng.randint(1, max(1, n // 4))]))
        wall = float(rng.choice([60, 600, 3600, rng.randint(1, 20_000)]))
        end = rng.choice([*ends, now + rng.uniform(1, 20_000)])
        job = Job(jid, end - wall - rng.uniform(0, 100), wall, k, user=f"u{jid % 4}")
        running[jid] = RunningJob(job, end - wall, tuple(sorted(nodes[:k])), end, power_w=0.0)
        nodes = nodes[k:]
        jid += 1
    state = [int(NodeState.IDLE)] * n
    for r in running.values():
        for i in r.nodes:
            state[i] = int(NodeState.BUSY)
    for i in range(n):
        if state[i] == NodeState.IDLE and rng.random() < 0.05:
            state[i] = int(rng.choice([NodeState.OFF, NodeState.DRAINED]))
    free = [i for i in range(n - 1, -1, -1) if state[i] == NodeState.IDLE]
    pending: dict[int, Job] = {}
    t = now - rng.uniform(0, 5000)
    for _ in range(rng.choice([0, 1, 5, 30, 60, 100, 200, 400, 400])):
        t += rng.choice([0.0, rng.uniform(0, 30)])
        k = rng.choice([1, 1, 2, 4, rng.randint(1, n), rng.randint(1, n + 2)])
        wall = float(rng.choice([30, 60, 600, 3600, rng.randint(1, 30_000)]))
        pending[jid] = Job(jid, t, wall, k, user=f"u{jid % 4}")
        jid += 1
    coverage = rng.choice(["none", "all", "some"])
    estimates = None
    if coverage != "none":
        estimates = {j: random_estimate(rng, idle_w, busy_w) for j in [*running, *pending]
                     if coverage == "all" or rng.random() < 0.6}
    jobs_w = 0.0
    for jid_, r in running.items():
        est = estimates.get(jid_) if estimates else None
        w = (est.mean_w if est else busy_w) * len(r.nodes) * rng.uniform(0.8, 1.2)
        running[jid_] = RunningJob(r.job, r.start_s, r.nodes, r.expected_end_s, power_w=w)
        jobs_w += w
    other_w = sum(idle_w for s in state if s != NodeState.BUSY) * rng.uniform(0.9, 1.1)
    lo, hi = plat.idle_power_w, plat.idle_power_w + n * (busy_w - idle_w)
    return Snapshot(
        now_s=now, platform=plat, pending=pending, running=running, free_nodes=free, node_state=state,
        cap=random_cap(rng, now, lo + 0.05 * (hi - lo), hi), cap_lookahead_s=rng.choice([math.inf, 0.0, 1800.0]),
        platform_power_w=jobs_w + other_w, jobs_power_w=jobs_w, epoch=seed, estimates=estimates,
    )


def plain_copy(snap: Snapshot) -> Snapshot:
    """The same state without any index: what the reference sees."""
    return Snapshot(now_s=snap.now_s, platform=snap.platform, pending=dict(snap.pending), running=dict(snap.running),
                    free_nodes=list(snap.free_nodes), node_state=list(snap.node_state), cap=snap.cap,
                    cap_lookahead_s=snap.cap_lookahead_s, platform_power_w=snap.platform_power_w,
                    jobs_power_w=snap.jobs_power_w, epoch=snap.epoch, estimates=snap.estimates)


def indexed(snap: Snapshot, seed: int) -> Snapshot:
    """As the simulator and the daemon hand it over (indexes built), or bare (the policy builds them)."""
    if seed % 3:
        snap.build_indexes(end_table=True)
    return snap


def starts(plan):
    return [(a.job_id, tuple(a.nodes)) for a in plan.actions]


def reasons(plan):
    return {jid: str(r) for jid, r in plan.reasons.items()}, plan.default_reason


@pytest.mark.parametrize("scan", [False, True], ids=["numpy", "scan"])
def test_easy_pc_fast_path_decides_as_the_plain_algorithm(scan):
    # the compiled scan's code runs as Python where it is not compiled: both ways of the constant-cap backfill
    differ = []
    with patch.object(easy_pc, "_SCAN", scan):
        for seed in range(SNAPSHOTS):
            rng = random.Random(-seed)
            params = {"check": rng.choice(CHECKS), "order": rng.choice(["fcfs", "fcfs", "fcfs", "saf"]),
                      "lookahead": rng.choice(["window", "always", "always", "off"])}
            snap = random_snapshot(seed)
            want, unneeded = easy_pc_plain.decide(plain_copy(snap), easy_pc_plain.Params(**params))
            policy = EasyPcPolicy(params)
            got = policy.decide(indexed(snap, seed), policy.init_state())
            same = starts(got) == starts(want) and got.power_estimate_w == want.power_estimate_w
            if same and reasons(got) != reasons(want):
                # the fast filters (with slack) may compute the reservation the plain pass did not need
                head = next(iter(want.reasons), None)
                same = unneeded is not None and reasons(got) == ({head: unneeded}, want.default_reason)
            if not same:
                differ.append((seed, params, starts(got), starts(want), reasons(got), reasons(want)))
    assert not differ, f"{len(differ)} of {SNAPSHOTS} differ, first: {differ[0]}"


@pytest.mark.parametrize("scan", [False, True], ids=["numpy", "scan"])
def test_easy_fast_path_decides_as_the_plain_algorithm(scan):
    # the compiled scan's code runs as Python where it is not compiled: both ways of the indexed backfill
    differ = []
    with patch.object(easy, "_SCAN", scan):
        for seed in range(SNAPSHOTS):
            order = "saf" if seed % 5 == 0 else "fcfs"
            snap = random_snapshot(seed)
            want = easy_plain.decide(plain_copy(snap), order)
            policy = EasyPolicy(order=order)
            got = policy.decide(indexed(snap, seed), policy.init_state())
            if starts(got) != starts(want) or reasons(got) != reasons(want):
                differ.append((seed, order, starts(got), starts(want), reasons(got), reasons(want)))
    assert not differ, f"{len(differ)} of {SNAPSHOTS} differ, first: {differ[0]}"
