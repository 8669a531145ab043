"""The queue index: candidates, power increments, removed jobs and compaction."""

import math
import random

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from wattsched.model.job import Job, PowerEstimate
from wattsched.model.queue_index import DEAD_NODES, QueueIndex
from wattsched.policies.power import PowerLedger


def test_increments_are_the_ledgers_and_unknown_estimates_pass_every_filter():
    q = QueueIndex(idle_w=100.0)
    q.append(Job(1, 0.0, 60.0, 3))
    q.append(Job(2, 0.0, 60.0, 2))
    q.set_estimate(1, 250.0, 290.0, 12.5)
    i = q.pos[1]
    mean, mx, var = PowerLedger("mean", 0.0, 100.0).increment(PowerEstimate(250.0, 290.0, 12.5), 3)
    assert (q.inc_mean[i], q.inc_max[i], q.inc_var[i]) == (mean, mx, var)
    j = q.pos[2]  # no estimate yet
    assert (q.inc_mean[j], q.inc_max[j], q.inc_var[j]) == (-math.inf, -math.inf, 0.0)
    q.set_estimate(2, math.nan, math.nan, math.nan)  # an unknown estimate stays unknown
    assert q.inc_mean[j] == -math.inf


def test_without_idle_power_no_increments_are_kept():
    q = QueueIndex()
    q.append(Job(1, 0.0, 60.0, 3))
    q.set_estimate(1, 250.0, 290.0, 12.5)
    assert q.est_mean[0] == 250.0 and q.inc_mean[0] == -math.inf


def test_removed_jobs_are_left_out_by_node_count_and_power_alone():
    q = QueueIndex(idle_w=100.0)
    for i in range(3):
        q.append(Job(i, 0.0, 60.0, 1))
        q.set_estimate(i, 200.0, 200.0, 0.0)
    q.remove(1)
    assert q.nodes[1] == DEAD_NODES and q.inc_mean[1] == math.inf and q.wall[1] == math.inf
    assert [int(q.ids[p]) for p in q.candidates(after_id=-1, free=4, horizon_s=math.inf, extra=4)] == [0, 2]


def brute_force(jobs, alive, after_id, free, horizon, extra):
    ids = [j.id for j in jobs if j.id in alive]
    start = ids.index(after_id) + 1 if after_id in alive else 0
    return [jid for jid in ids[start:]
            if alive[jid].nodes <= free and (alive[jid].walltime_s <= horizon or alive[jid].nodes <= extra)]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 8), st.integers(1, 100), st.booleans()), min_size=1, max_size=400),
       st.integers(0, 2**16))
def test_candidates_match_a_scan_through_removals_and_compaction(spec, seed):
    rng = random.Random(seed)
    q = QueueIndex(capacity=8, idle_w=100.0)
    jobs, alive = [], {}
    for i, (n, w, remove_one) in enumerate(spec):
        job = Job(i, float(i), float(w), n)
        jobs.append(job)
        alive[i] = job
        q.append(job)
        q.set_estimate(i, 100.0 + n, 120.0 + n, float(n))
        if remove_one and alive:
            victim = rng.choice(sorted(alive))
            del alive[victim]
            q.remove(victim)
    # order kept, positions consistent, increments follow their jobs through compactions
    live = [p for p in range(q.size) if q.alive[p]]
    assert [int(q.ids[p]) for p in live] == [j.id for j in jobs if j.id in alive]
    assert all(q.pos[int(q.ids[p])] == p for p in live)
    assert all(q.inc_mean[p] == (q.est_mean[p] - 100.0) * q.nodes[p] for p in live)
    assert 2 * q.dead <= q.size or q.dead < 256
    for _ in range(5):
        after = rng.choice([-1, *alive])
        free, extra, horizon = rng.randint(0, 9), rng.randint(0, 9), rng.uniform(0, 120)
        got = [int(q.ids[p]) for p in q.candidates(after, free, horizon, extra)]
        assert got == brute_force(jobs, alive, after, free, horizon, extra)


def test_compaction_keeps_dead_entries_a_minority():
    q = QueueIndex(idle_w=100.0)
    for i in range(2000):
        q.append(Job(i, 0.0, 10.0, 1))
    for i in range(0, 2000, 2):
        q.remove(i)
    for i in range(1, 1200, 2):
        q.remove(i)
    assert len(q) == 400 and 2 * q.dead <= q.size
    assert np.array_equal(q.ids[: q.size][q.alive[: q.size]], np.arange(1201, 2000, 2))


def test_an_index_built_at_once_is_the_index_built_job_by_job():
    import random

    from wattsched.model.job import PowerEstimate

    rng = random.Random(5)
    jobs = [Job(i, 0.0, rng.choice([1.0, 60.0, rng.uniform(1, 1e5)]), rng.randint(1, 300)) for i in range(3000)]
    estimates = {j.id: PowerEstimate(rng.choice([float("nan"), 50.0, rng.uniform(1, 400)]), rng.uniform(1, 500),
                                     rng.choice([0.0, rng.uniform(0, 40)])) for j in jobs if rng.random() < 0.7}
    for idle in (None, 95.0, 100.0 / 3):
        estimate = lambda j: estimates.get(j.id, PowerEstimate(float("nan"), float("nan")))  # noqa: E731
        bulk = QueueIndex.of(jobs, estimate, idle)
        one = QueueIndex(idle_w=idle)
        for j in jobs:
            one.append(j)
        for j in jobs:
            e = estimate(j)
            one.set_estimate(j.id, e.mean_w, e.max_w, e.std_w)
        assert bulk.size == one.size and bulk.pos == one.pos
        for name in QueueIndex._ARRAYS:
            a, b = getattr(bulk, name)[: bulk.size], getattr(one, name)[: one.size]
            assert a.tobytes() == b.tobytes(), name


def test_smallest_is_the_fewest_nodes_a_pending_job_asks():
    q = QueueIndex()
    assert q.smallest() == DEAD_NODES  # none pending
    for i, n in enumerate([5, 3, 3, 7]):
        q.append(Job(i, 0.0, 60.0, n))
    assert q.smallest() == 3
    q.remove(1)
    assert q.smallest() == 3  # job 2 still asks 3
    q.remove(2)
    assert q.smallest() == 5
    q.append(Job(9, 0.0, 60.0, 1))
    assert q.smallest() == 1
    q.rebuild([Job(4, 0.0, 60.0, 6)])
    assert q.smallest() == 6
    q.remove(4)
    assert q.smallest() == DEAD_NODES


@settings(max_examples=200)
@given(st.lists(st.tuples(st.sampled_from(["append", "remove", "rebuild", "extend"]), st.integers(1, 12)),
                max_size=300), st.integers(0, 2**16))
def test_smallest_follows_appends_removals_rebuilds_and_compactions(ops, seed):
    rng = random.Random(seed)
    q = QueueIndex(capacity=4)
    alive: dict[int, Job] = {}
    next_id = 0
    for op, n in ops:
        if op == "remove" and alive:
            victim = rng.choice(sorted(alive))
            q.remove(victim)
            del alive[victim]
        elif op == "rebuild":
            keep = [j for j in alive.values() if rng.random() < 0.7]
            q.rebuild(keep)
            alive = {j.id: j for j in keep}
        else:
            batch = [Job(next_id + k, 0.0, 60.0, rng.randint(1, n)) for k in range(1 if op == "append" else n)]
            next_id += len(batch)
            if op == "append":
                q.append(batch[0])
            else:
                q.extend(batch)
            alive.update((j.id, j) for j in batch)
        assert q.smallest() == min((j.nodes for j in alive.values()), default=DEAD_NODES)
