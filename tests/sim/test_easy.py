"""EASY backfilling: golden schedules on hand-made traces, and a property test against a brute-force EASY."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from builders import TagsChanged, platform, tj
from wattsched.model.constraints import CapSchedule
from wattsched.policies import make_policy
from wattsched.sim.engine import Engine, EngineOptions


def starts(jobs, policy="easy", n=4, **params):
    r = Engine(platform(n), jobs, make_policy(policy, params)).run()
    return {int(i): float(s) for i, s in zip(r.jobs["id"], r.jobs["start_s"])}


# 4 nodes. Job 2 (4 nodes) is blocked behind job 1 until t=10: its shadow time.
GOLDEN = [
    tj(1, 0, 10, nodes=3),
    tj(2, 1, 5, nodes=4),
    tj(3, 2, 5, nodes=1, walltime=8),   # ends by 10 <= shadow: backfills at 2
    tj(4, 3, 20, nodes=1),              # would delay job 2: waits
]


def test_easy_golden():
    assert starts(GOLDEN) == {1: 0, 2: 10, 3: 2, 4: 15}


def test_fcfs_golden():
    assert starts(GOLDEN, "fcfs") == {1: 0, 2: 10, 3: 15, 4: 15}


def test_backfill_on_extra_nodes_even_past_the_shadow_time():
    # Head job 2 needs 2 of 4 nodes at t=10; 1 node is free now and will stay spare: job 3 may use it for long.
    jobs = [tj(1, 0, 10, nodes=3), tj(2, 1, 5, nodes=2), tj(3, 2, 100, nodes=1)]
    assert starts(jobs) == {1: 0, 2: 10, 3: 2}
    # With the head needing all 4 nodes there is no extra node: job 3 waits.
    jobs = [tj(1, 0, 10, nodes=3), tj(2, 1, 5, nodes=4), tj(3, 2, 100, nodes=1)]
    assert starts(jobs) == {1: 0, 2: 10, 3: 15}


def test_reservation_uses_requested_not_real_times_and_jobs_exceeding_walltime_are_killed():
    # Job 1 asks for 100 s but runs 10: the shadow time is 100, so job 3 (asks 48 s) backfills at 2,
    # and job 2 starts when job 3 really ends (12), not when it said it would.
    # Job 4 runs 60 s but asked for 30: killed at 30 + its start.
    jobs = [tj(1, 0, 10, nodes=3, walltime=100), tj(2, 1, 5, nodes=4), tj(3, 2, 10, nodes=1, walltime=48)]
    assert starts(jobs) == {1: 0, 2: 12, 3: 2}
    r = Engine(platform(4), [tj(4, 0, 60, nodes=1, walltime=30)], make_policy("easy")).run()
    assert r.jobs["end_s"][0] == 30 and r.jobs["state"][0] == "TIMEOUT"


def test_zero_runtime_and_same_time_submissions():
    jobs = [tj(1, 0, 0, nodes=4), tj(2, 0, 0, nodes=4), tj(3, 0, 5, nodes=2), tj(4, 0, 5, nodes=3)]
    assert starts(jobs) == {1: 0, 2: 0, 3: 0, 4: 5}


def test_saf_order_starts_the_smallest_area_first():
    jobs = [tj(1, 0, 10, nodes=4), tj(2, 1, 50, nodes=2), tj(3, 2, 5, nodes=2), tj(4, 3, 1, nodes=4)]
    # At t=10: areas 100 (job 2), 10 (job 3), 4 (job 4): job 4 first, then 3 and 2 together.
    assert starts(jobs, order="saf") == {1: 0, 4: 10, 3: 11, 2: 11}
    assert starts(jobs) == {1: 0, 2: 10, 3: 10, 4: 60}


def test_bad_param_is_a_config_error_naming_the_key():
    from wattsched.errors import ConfigError

    with pytest.raises(ConfigError, match=r"params\.order"):
        make_policy("easy", {"order": "lifo"})
    with pytest.raises(ConfigError, match=r"params\.bogus"):
        make_policy("easy", {"bogus": 1})


# ---------------------------------------------------------------- brute force


def brute_force_easy(jobs, n_nodes):
    """A direct EASY, written independently of the policy: returns starts and checks reservations."""
    pending = []  # in submission order
    running = []  # (end_real, expected_end, nodes, id)
    free = n_nodes
    start = {}
    reservation = {}  # job id -> earliest promised start
    subs = sorted(jobs, key=lambda j: (j.submit_s, j.id))
    i = 0
    t = 0.0
    while i < len(subs) or pending or running:
        t = min([subs[i].submit_s if i < len(subs) else math.inf, *(r[0] for r in running)])
        for r in [r for r in running if r[0] <= t]:
            running.remove(r)
            free += r[2]
        while i < len(subs) and subs[i].submit_s <= t:
            pending.append(subs[i])
            i += 1
        # one scheduling pass
        while pending and pending[0].nodes <= free:
            j = pending.pop(0)
            end = t + min(j.runtime_s, j.walltime_s)
            running.append((end, t + j.walltime_s, j.nodes, j.id))
            free -= j.nodes
            start[j.id] = t
        if pending:
            head = pending[0]
            avail = free
            shadow, extra = math.inf, 0
            for exp_end, n in sorted((r[1], r[2]) for r in running):
                avail += n
                if avail >= head.nodes:
                    shadow, extra = exp_end, avail - head.nodes
                    break
            reservation[head.id] = min(reservation.get(head.id, math.inf), shadow)
            for j in list(pending[1:]):
                if j.nodes > free:
                    continue
                if t + j.walltime_s <= shadow:
                    pass
                elif j.nodes <= extra:
                    extra -= j.nodes
                else:
                    continue
                pending.remove(j)
                running.append((t + min(j.runtime_s, j.walltime_s), t + j.walltime_s, j.nodes, j.id))
                free -= j.nodes
                start[j.id] = t
                if free == 0:
                    break
    return start, reservation


job_strategy = st.tuples(
    st.integers(0, 30),  # submit
    st.integers(0, 25),  # runtime
    st.integers(1, 25),  # walltime
    st.integers(1, 5),   # nodes
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(job_strategy, min_size=1, max_size=14), st.integers(5, 6))
def test_easy_matches_brute_force_and_never_delays_the_head(raw, n_nodes):
    raw = sorted(raw, key=lambda x: x[0])
    jobs = [tj(k + 1, float(s), float(r), nodes=n, walltime=float(w)) for k, (s, r, w, n) in enumerate(raw)]
    expected, reservation = brute_force_easy(jobs, n_nodes)
    got = starts(jobs, n=n_nodes)
    assert got == expected
    for jid, promised in reservation.items():
        assert got[jid] <= promised, f"job {jid} was promised t={promised} but started at {got[jid]}"


@settings(max_examples=100, deadline=None)
@given(st.lists(job_strategy, min_size=60, max_size=120))
def test_indexed_backfilling_matches_the_plain_scan_on_long_queues(raw):
    # Long queues switch EASY to its numpy queue index; the schedule must not change.
    raw = sorted(raw, key=lambda x: x[0])
    jobs = [tj(k + 1, float(s) / 4, float(r), nodes=n, walltime=float(w)) for k, (s, r, w, n) in enumerate(raw)]
    expected, _ = brute_force_easy(jobs, 5)
    assert starts(jobs, n=5) == expected


def test_easy_survives_overrunning_jobs_when_not_killed():
    jobs = [tj(1, 0, 50, nodes=3, walltime=10), tj(2, 1, 5, nodes=4), tj(3, 2, 5, nodes=1, walltime=5)]
    r = Engine(platform(4), jobs, make_policy("easy"), options=EngineOptions(kill_at_walltime=False)).run()
    s = dict(zip(r.jobs["id"].tolist(), r.jobs["start_s"].tolist()))
    # job 1 overruns its estimate: at t=10 the shadow moves to "now" and job 3 can still use the free node
    assert s[1] == 0 and s[2] == 50 and s[3] == 2


def test_shadow_time_merges_this_decisions_starts_as_a_full_sort_would():
    import math
    import random
    from types import SimpleNamespace

    from wattsched.policies.easy import shadow_time

    def by_sorting(snapshot, head_nodes, free, started):
        ends = sorted([*((e, n) for e, n, _ in snapshot.running_by_end()), *started])
        for e, n in ends:
            free += n
            if free >= head_nodes:
                return max(e, snapshot.now_s), free - head_nodes
        return math.inf, 0

    rng = random.Random(7)
    for _ in range(20_000):  # small integer times and sizes: many ties, where the order matters
        ends = sorted((float(rng.randint(0, 8)), rng.randint(1, 6), j) for j in range(rng.randint(0, 6)))
        started = [(float(rng.randint(0, 8)), rng.randint(1, 6)) for _ in range(rng.randint(1, 4))]
        snap = SimpleNamespace(now_s=float(rng.randint(0, 4)), running_by_end=lambda ends=ends: ends)
        head, free = rng.randint(1, 30), rng.randint(0, 5)
        assert shadow_time(snap, head, free, list(started)) == by_sorting(snap, head, free, started), (ends, started)


def test_easy_and_fcfs_declare_that_they_only_start_jobs_on_free_nodes():
    assert make_policy("easy").tags().starts_on_free_nodes and make_policy("fcfs").tags().starts_on_free_nodes
    assert not make_policy("knapsack").tags().starts_on_free_nodes  # its ranking moves with time


def test_no_call_while_fewer_nodes_are_free_than_the_smallest_pending_job_asks():
    calls = []

    class Counted(type(make_policy("fcfs"))):
        def decide(self, snapshot, state=None):
            calls.append(snapshot.now_s)
            return super().decide(snapshot, state)

    # 2 nodes: job 1 takes both until t=10; jobs 2 (t=1) and 3 (t=2) find none free; job 4 (t=12) finds one, asks 2
    jobs = [tj(1, 0, 10, nodes=2), tj(2, 1, 5, nodes=1), tj(3, 2, 3, nodes=2), tj(4, 12, 1, nodes=2)]
    r = Engine(platform(2), jobs, Counted()).run()
    assert calls == [0.0, 10.0, 15.0, 18.0]  # not at 1 and 2 (no node free), nor at 12 (1 free, 2 asked)
    assert dict(zip(r.jobs["id"].tolist(), r.jobs["start_s"].tolist())) == {1: 0.0, 2: 10.0, 3: 15.0, 4: 18.0}
    calls.clear()
    capped = Engine(platform(2), jobs, Counted(), cap=CapSchedule.window(1.5, 1.7, 1e6)).run()
    assert 1.5 in calls  # a control event still calls it
    assert capped.jobs["start_s"].tolist() == r.jobs["start_s"].tolist()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(job_strategy, min_size=1, max_size=40), st.integers(3, 8),
       st.sampled_from(["easy", "fcfs", "easy-saf"]))
def test_skipping_calls_that_could_start_nothing_changes_no_schedule(raw, n_nodes, name):
    raw = sorted(raw, key=lambda x: x[0])
    jobs = [tj(k + 1, float(s) / 3, float(r), nodes=min(n, n_nodes), walltime=float(w))
            for k, (s, r, w, n) in enumerate(raw)]
    params = {"order": "saf"} if name == "easy-saf" else {}
    policy = make_policy(name.removesuffix("-saf"), params)
    skipping = Engine(platform(n_nodes), jobs, policy).run()
    every = TagsChanged(make_policy(name.removesuffix("-saf"), params), starts_on_free_nodes=False)
    every = Engine(platform(n_nodes), jobs, every).run()
    for column in ("id", "start_s", "end_s", "energy_j"):
        assert skipping.jobs[column].tolist() == every.jobs[column].tolist()
    assert skipping.info["policy_calls"] <= every.info["policy_calls"]
