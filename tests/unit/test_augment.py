"""Power augmentation: determinism under any consumption, per-user stability, ranges, passthrough."""

from __future__ import annotations

import itertools
import math
import random
from collections import Counter
from dataclasses import replace

import numpy as np
import pydantic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wattsched.workload.augment as aug
from wattsched.errors import ConfigError
from wattsched.model.platform import NodePowerModel
from wattsched.workload.augment import AugmentParams, augment, augment_workload, job_uniforms, splitmix64, stable_hash
from wattsched.workload.records import TraceJob, Workload, true_power

POWER = NodePowerModel()


def make_jobs(n, n_users=50, start=1):
    return [TraceJob(i, float(i), 60.0, 120.0, 1, 1 + i % 4, user=f"u{i % n_users}") for i in range(start, start + n)]


def by_id(jobs):
    return {j.id: (j.mean_w, j.max_w, j.std_w, j.app_class) for j in jobs}


def test_splitmix64_matches_the_reference_sequence():
    # splitmix64.c (Vigna) seeded with 1234567 starts 6457827717110365317, 3203168211198807973;
    # seeded with 0 it starts 0xe220a8397b1dcdaf, 0x6e789e6aa1b965f4.
    gamma = 0x9E3779B97F4A7C15
    assert splitmix64(1234567) == 6457827717110365317
    assert splitmix64(1234567 + gamma) == 3203168211198807973
    assert (splitmix64(0), splitmix64(gamma)) == (0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4)


def test_stable_hash_is_blake2b_and_not_salted():
    import hashlib

    assert stable_hash("alice") == int.from_bytes(hashlib.blake2b(b"alice", digest_size=8).digest(), "little")
    assert stable_hash("é") != stable_hash("e")


def test_vectorized_uniforms_match_the_reference():
    ids = [0, 1, 2, 12345, 2**63 + 17, 2**64 - 1]
    block = aug._uniforms_block(np.uint64(splitmix64(99)), np.array(ids, dtype=np.uint64))
    for k, job_id in enumerate(ids):
        assert block[:, k].tolist() == job_uniforms(99, job_id)
    assert np.all((block > 0) & (block < 1))


def test_job_values_follow_the_documented_draws():
    p = AugmentParams(job_sigma_rel=0.0, std_rel_min=0.05, std_rel_max=0.25, max_k=100.0, profile="constant")
    jobs = make_jobs(50)
    for job in augment(jobs, POWER, p, seed=5):
        u = job_uniforms(5, job.id)
        assert job.std_w / job.mean_w == pytest.approx(0.05 + u[2] * 0.20, rel=1e-12)
        assert job.max_w == POWER.busy_w  # max_k huge: always clipped


def test_same_seed_same_values_whatever_the_chunking_or_order():
    jobs = make_jobs(10_000)
    p = AugmentParams()
    whole = by_id(augment(jobs, POWER, p, seed=42))
    assert len(whole) == len(jobs)

    # in pieces of odd sizes, each piece a separate call
    pieces = {}
    for lo, hi in itertools.pairwise([0, 1, 4096, 4097, 7000, 10_000]):
        pieces.update(by_id(augment(jobs[lo:hi], POWER, p, seed=42)))
    assert pieces == whole

    # shuffled, consumed one at a time with next()
    shuffled = jobs[:]
    random.Random(0).shuffle(shuffled)
    it = augment(iter(shuffled), POWER, p, seed=42)
    one_by_one = by_id(next(it) for _ in range(len(shuffled)))
    assert one_by_one == whole

    other = by_id(augment(jobs, POWER, p, seed=43))
    assert sum(other[i] != whole[i] for i in whole) > 0.99 * len(whole)


def test_streaming_is_lazy():
    endless = (TraceJob(i, float(i), 1.0, 1.0, 1, 1, user="u") for i in itertools.count(1))
    first = list(itertools.islice(augment(endless, POWER, AugmentParams(), seed=1), 10))
    assert [j.id for j in first] == list(range(1, 11))
    assert all(j.mean_w is not None for j in first)


def test_per_user_values_are_stable():
    p = AugmentParams(job_sigma_rel=0.0, class_switch_prob=0.0, profile="constant")
    jobs = make_jobs(2000, n_users=40)
    out = list(augment(jobs, POWER, p, seed=9))
    per_user = {}
    for j in out:
        per_user.setdefault(j.user, set()).add((j.mean_w, j.app_class))
    assert all(len(v) == 1 for v in per_user.values())
    means = {next(iter(v))[0] for v in per_user.values()}
    assert len(means) == 40  # users differ
    assert all(POWER.busy_min_w <= m <= POWER.busy_w for m in means)

    # a user's values do not depend on who else is in the trace
    alone = next(augment([TraceJob(10**9, 0.0, 1.0, 1.0, 1, 1, user="u7")], POWER, p, seed=9))
    assert (alone.mean_w, alone.app_class) == next(iter(per_user["u7"]))


def test_job_spread_around_the_user_mean():
    p = AugmentParams(job_sigma_rel=0.05, class_switch_prob=0.0, profile="constant")
    jobs = [TraceJob(i, 0.0, 1.0, 1.0, 1, 1, user="solo") for i in range(4000)]
    user_mean = next(augment(jobs[:1], POWER, p.model_copy(update={"job_sigma_rel": 0.0}), seed=3)).mean_w
    means = np.array([j.mean_w for j in augment(jobs, POWER, p, seed=3)])
    assert means.mean() == pytest.approx(user_mean, rel=0.01)
    assert means.std() == pytest.approx(0.05 * user_mean, rel=0.1)


def test_values_stay_within_the_node_model():
    model = NodePowerModel(idle_w=100.0, busy_min_w=250.0, busy_w=400.0)
    p = AugmentParams(job_sigma_rel=0.8, std_rel_min=0.0, std_rel_max=0.5, max_k=3.0, profile="constant")
    out = list(augment(make_jobs(20_000, n_users=500), model, p, seed=1))
    mean = np.array([j.mean_w for j in out])
    mx = np.array([j.max_w for j in out])
    std = np.array([j.std_w for j in out])
    assert np.all((mean >= 100.0) & (mean <= mx) & (mx <= 400.0))
    assert np.all((std >= 0.0) & (std <= 0.5 * mean))
    assert np.any(mean == 100.0) and np.any(mean == 400.0)  # the wide spread hits both clips
    assert {j.app_class for j in out} <= {"cpu", "memory", "mixed"}
    assert all(isinstance(j.mean_w, float) for j in out[:10])


def test_class_probabilities_are_respected():
    p = AugmentParams(class_probs={"mixed": 0.3, "cpu": 0.6, "memory": 0.1}, class_switch_prob=0.2)
    out = list(augment(make_jobs(20_000, n_users=10_000), POWER, p, seed=2))
    frac = {c: n / len(out) for c, n in Counter(j.app_class for j in out).items()}
    assert frac == pytest.approx({"cpu": 0.6, "memory": 0.1, "mixed": 0.3}, abs=0.025)


def test_class_switching():
    jobs = [TraceJob(i, 0.0, 1.0, 1.0, 1, 1, user="one") for i in range(3000)]
    never = {j.app_class for j in augment(jobs, POWER, AugmentParams(class_switch_prob=0.0), seed=4)}
    assert len(never) == 1
    always = Counter(j.app_class for j in augment(jobs, POWER, AugmentParams(class_switch_prob=1.0), seed=4))
    assert always["cpu"] / 3000 == pytest.approx(0.4, abs=0.04)
    some = Counter(j.app_class for j in augment(jobs, POWER, AugmentParams(class_switch_prob=0.3), seed=4))
    own = never.pop()
    # the user's class, plus 30 % redrawn of which its own share comes back
    share = AugmentParams().class_probs[own]
    assert some[own] / 3000 == pytest.approx(0.7 + 0.3 * share, abs=0.04)


def test_single_class_and_key_order_does_not_matter():
    only = list(augment(make_jobs(200), POWER, AugmentParams(class_probs={"memory": 1.0}), seed=1))
    assert {j.app_class for j in only} == {"memory"}
    a = by_id(augment(make_jobs(500), POWER, AugmentParams(class_probs={"cpu": 0.5, "mixed": 0.5}), seed=1))
    b = by_id(augment(make_jobs(500), POWER, AugmentParams(class_probs={"mixed": 0.5, "cpu": 0.5}), seed=1))
    assert a == b


def test_jobs_with_power_pass_through_and_inputs_are_untouched():
    measured = TraceJob(5, 0.0, 1.0, 1.0, 1, 1, mean_w=123.0, user="u1")
    classed = TraceJob(6, 0.0, 1.0, 1.0, 1, 1, user="u1", app_class="memory", extra={"k": 1})
    plain = make_jobs(3, start=7)
    jobs = [*plain[:1], measured, classed, *plain[1:]]
    snapshot = [replace(j) for j in jobs]
    out = list(augment(jobs, POWER, AugmentParams(class_probs={"cpu": 1.0}), seed=8))
    assert [j.id for j in out] == [7, 5, 6, 8, 9]
    assert out[1] is measured and out[1] == snapshot[1]
    assert out[2].app_class == "memory" and out[2].mean_w is not None
    assert out[2].extra == {"k": 1} and out[2].extra is not classed.extra
    assert jobs == snapshot  # nothing mutated
    assert all(j.mean_w is None for j in plain)
    for before, after in zip(jobs, out):
        assert (after.id, after.submit_s, after.runtime_s, after.walltime_s, after.nodes, after.user) == (
            before.id, before.submit_s, before.runtime_s, before.walltime_s, before.nodes, before.user)


def test_keyword_and_positional_builders_agree():
    job = TraceJob(3, 1.0, 2.0, 3.0, 4, 5, user="u", group="g", partition="p", status=0,
                   power_series=((0.0, 1.0),), gpus_per_node=2, min_nodes=1, max_nodes=9, malleable=True,
                   extra={"a": 1})
    series = ((0.0, 150.0), (1.0, 170.0))
    assert aug._with_power_pos(job, 150.0, 160.0, 3.0, "cpu", series) == aug._with_power_kw(job, 150.0, 160.0, 3.0,
                                                                                          "cpu", series)


def test_augment_workload_sets_has_power():
    wl = Workload(name="w", jobs=iter(make_jobs(100)), notes=["read"])
    out = augment_workload(wl, POWER, AugmentParams(), seed=3)
    assert out.has_power and not wl.has_power
    assert out.report is wl.report
    assert out.notes[0] == "read" and "with seed 3" in out.notes[-1]
    jobs = list(out.jobs)
    assert len(jobs) == 100 and all(j.mean_w is not None for j in jobs)


@pytest.mark.parametrize("seed", [-1, 2**64, 1.5, True])
def test_bad_seed_raises_at_the_call(seed):
    with pytest.raises(ConfigError, match="seed must be an integer"):
        augment([], POWER, AugmentParams(), seed)


def test_bad_node_model():
    with pytest.raises(ConfigError, match="busy_min_w <= busy_w"):
        augment([], NodePowerModel(busy_min_w=300.0, busy_w=200.0), AugmentParams(), 1)


def test_params_are_validated():
    with pytest.raises(pydantic.ValidationError, match="extra"):
        AugmentParams(sigma=0.1)
    with pytest.raises(pydantic.ValidationError, match="must sum to 1"):
        AugmentParams(class_probs={"cpu": 0.5, "memory": 0.2})
    with pytest.raises(pydantic.ValidationError, match="must be >= 0"):
        AugmentParams(class_probs={"cpu": 1.5, "memory": -0.5})
    with pytest.raises(pydantic.ValidationError, match="std_rel_min"):
        AugmentParams(std_rel_min=0.3, std_rel_max=0.1)
    with pytest.raises(pydantic.ValidationError):
        AugmentParams(class_switch_prob=1.5)
    assert math.isclose(sum(AugmentParams().class_probs.values()), 1.0)


def test_user_values_follow_the_documented_generator():
    # per user: Generator(Philox(key=(seed, stable_hash(user)))) draws Beta, then the class uniform;
    # interleaving users checks that re-keying the shared generator leaves nothing behind
    p = AugmentParams(user_mean_alpha=2.5, user_mean_beta=1.5, job_sigma_rel=0.0, class_switch_prob=0.0,
                      profile="constant")
    names = ["ann", "bo", "ann", "cy", "bo", "dee"]
    jobs = [TraceJob(i, 0.0, 1.0, 1.0, 1, 1, user=u) for i, u in enumerate(names)]
    classes = sorted(p.class_probs)
    cum = np.cumsum([p.class_probs[c] for c in classes])
    for job in augment(jobs, POWER, p, seed=77):
        rng = np.random.Generator(np.random.Philox(key=np.array([77, stable_hash(job.user)], dtype=np.uint64)))
        b = rng.beta(2.5, 1.5)
        assert job.mean_w == pytest.approx(POWER.busy_min_w + b * (POWER.busy_w - POWER.busy_min_w), rel=1e-12)
        assert job.app_class == classes[int(np.searchsorted(cum, rng.random(), side="right"))]


def test_numpy_integer_seed_is_accepted():
    jobs = make_jobs(20)
    assert by_id(augment(jobs, POWER, AugmentParams(), np.int64(5))) == by_id(augment(jobs, POWER, AugmentParams(), 5))


def test_in_place_gives_the_same_values_on_the_input_objects():
    jobs = make_jobs(3000, n_users=40)
    copies = list(augment(jobs, POWER, AugmentParams(), seed=11))
    fresh = make_jobs(3000, n_users=40)
    out = list(augment(fresh, POWER, AugmentParams(), seed=11, in_place=True))
    assert all(a is b for a, b in zip(out, fresh))
    assert [(j.mean_w, j.max_w, j.std_w, j.app_class) for j in out] == [
        (j.mean_w, j.max_w, j.std_w, j.app_class) for j in copies]
    assert all(j.mean_w is None for j in jobs)  # the copying form leaves its input alone


# ----------------------------------------------------------------------------- job units


def unit_job(i, units, user=None):
    from wattsched.model.units import parse_units

    us = parse_units(units)
    return TraceJob(i, float(i), 60.0, 120.0, sum(u.cores for u in us), len(us), user=user or f"u{i % 7}", units=us)


@pytest.mark.parametrize(("units", "share"), [
    ("4c", 0.25), ("4c;8c;32c", (0.25 + 0.5 + 1.0) / 3), ("3*16c", 1.0), ("2g", 0.0), ("2*2c1m;12c2g", 1 / 3),
])
def test_unit_power_is_a_node_running_the_unit_alone(units, share):
    power = NodePowerModel(idle_w=120.0, busy_min_w=150.0, busy_w=480.0, gpu_tdp_w=150.0)
    ids = range(1, 300)
    whole = by_id(augment([TraceJob(i, float(i), 60.0, 120.0, 16, 2, user=f"u{i % 7}") for i in ids], power,
                          AugmentParams(), seed=4))
    for job in augment([unit_job(i, units) for i in ids], power, AugmentParams(), seed=4, cores_per_node=16):
        m, x, s, c = whole[job.id]
        assert job.mean_w == pytest.approx(120.0 + (m - 120.0) * share, rel=1e-12, abs=1e-12)
        assert job.max_w == pytest.approx(120.0 + (x - 120.0) * share, rel=1e-12, abs=1e-12)
        assert job.std_w == pytest.approx(s * share, rel=1e-12, abs=1e-12)
        assert job.app_class == c
        assert 120.0 <= job.mean_w <= job.max_w <= 480.0


def test_whole_node_jobs_are_unchanged_among_jobs_of_units(monkeypatch):
    monkeypatch.setattr(aug, "_BLOCK", 64)  # unit jobs in some blocks only, and blocks of unit jobs only
    plain = make_jobs(1000)
    mixed = [unit_job(j.id, "2*4c1g;16c", j.user) if 300 <= j.id < 500 or j.id % 5 == 0 else j for j in plain]
    alone = by_id(augment(plain, POWER, AugmentParams(), seed=3))
    with_units = by_id(augment(mixed, POWER, AugmentParams(), seed=3, cores_per_node=8))
    changed = {j.id for j in mixed if j.units}
    assert {k: v for k, v in with_units.items() if k not in changed} == {k: v for k, v in alone.items()
                                                                          if k not in changed}
    idle = POWER.idle_w  # 2*4c1g;16c on nodes of 8 cores: 2/3 of a node's dynamic power
    assert [with_units[k][0] - idle for k in sorted(changed)] == pytest.approx(
        [(alone[k][0] - idle) * 2 / 3 for k in sorted(changed)], rel=1e-12, abs=1e-12)
    # the same values in place, and whatever the cores when no job has units
    fresh = [unit_job(j.id, "2*4c1g;16c", j.user) if j.units else replace(j) for j in mixed]
    assert by_id(augment(fresh, POWER, AugmentParams(), seed=3, in_place=True, cores_per_node=8)) == with_units
    assert by_id(augment(plain, POWER, AugmentParams(), seed=3, cores_per_node=8)) == alone


def test_jobs_of_units_need_the_reference_cores():
    jobs = [*make_jobs(3), unit_job(9, "4c")]
    assert len(list(augment(make_jobs(3), POWER, AugmentParams(), seed=1))) == 3  # not needed without units
    with pytest.raises(ConfigError, match="job 9 has units: augmenting jobs of units needs cores_per_node"):
        list(augment(jobs, POWER, AugmentParams(), seed=1))
    for bad in (0, -2, 1.5, True, "16"):
        with pytest.raises(ConfigError, match="cores_per_node must be an integer >= 1"):
            augment(jobs, POWER, AugmentParams(), 1, cores_per_node=bad)
    assert by_id(augment(jobs, POWER, AugmentParams(), 1, cores_per_node=np.int64(16))) == \
        by_id(augment(jobs, POWER, AugmentParams(), 1, cores_per_node=16))


def test_reference_cores_are_those_of_the_reference_node():
    from wattsched.config.platform import load_platform
    from wattsched.model.platform import Node, Platform
    from wattsched.workload.augment import reference_cores

    assert reference_cores(load_platform("eurora")) == 16
    many, few = NodePowerModel(busy_w=200.0), NodePowerModel(busy_w=300.0)
    nodes = [Node(0, "a", cores=64, power=few)] + [Node(i, f"b{i}", cores=8, power=many) for i in range(1, 4)]
    assert reference_cores(Platform(nodes)) == 8


def test_augment_workload_passes_the_cores_on():
    jobs = [unit_job(1, "4c"), unit_job(2, "2*16c")]
    wl = Workload(name="w", jobs=iter(jobs))
    got = by_id(augment_workload(wl, POWER, AugmentParams(), seed=3, cores_per_node=16).jobs)
    assert got == by_id(augment(jobs, POWER, AugmentParams(), seed=3, cores_per_node=16))
    assert got != by_id(augment(jobs, POWER, AugmentParams(), seed=3, cores_per_node=8))


def test_traces_augment_gives_jobs_of_units_per_unit_power(tmp_path):
    from wattsched.cli import main
    from wattsched.workload.tables import read_job_table, write_job_table

    jobs = [unit_job(1, "4*4c2G", user="a"), TraceJob(2, 1.0, 60.0, 120.0, 16, 4, user="a"), unit_job(3, "16c", "a")]
    src, out = tmp_path / "in.csv", tmp_path / "out.csv"
    write_job_table(jobs, src)
    assert main(["traces", "augment", str(src), "--platform", "eurora", "--cores-per-node", "16", "--seed", "2",
                 "--out", str(out)]) == 0
    a, whole, full = read_job_table(out, cores_per_node=16).jobs
    assert (a.units, full.units, whole.units) == (jobs[0].units, jobs[2].units, ())
    # the same user: the whole-node job and the one-unit job of 16 cores draw alike; 4 of 16 cores, a quarter
    idle = 120.0
    for j in (a, whole, full):
        w = by_id(augment([TraceJob(j.id, 0.0, 1.0, 1.0, 16, 1, user="a")], NodePowerModel(
            idle_w=idle, busy_min_w=150.0, busy_w=180.0, gpu_tdp_w=150.0), AugmentParams(), seed=2))[j.id]
        share = 0.25 if j.id == 1 else 1.0
        assert (j.mean_w, j.max_w) == pytest.approx((idle + (w[0] - idle) * share, idle + (w[1] - idle) * share),
                                                    rel=1e-12)


# --------------------------------------------------------------------------- fluctuating power (profile ar1)

CONSTANT = AugmentParams(profile="constant")


def long_jobs(n, n_users=20, start=1):
    """Jobs of run times from 1 s to about 20 h: one step, a few, and max_steps longer steps."""
    return [TraceJob(i, float(i), float(1 + (i * 7919) % 72000), 72000.0, 1, 1 + i % 4, user=f"u{i % n_users}")
            for i in range(start, start + n)]


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**64 - 1), step_s=st.floats(1.0, 5000.0), max_steps=st.integers(1, 30),
       step_corr=st.floats(0.0, 0.99), std_rel=st.floats(0.0, 0.6), max_k=st.floats(0.0, 4.0))
def test_power_series_respect_their_bounds_and_replay_the_same(seed, step_s, max_steps, step_corr, std_rel, max_k):
    model = NodePowerModel(idle_w=100.0, busy_min_w=120.0, busy_w=300.0)
    base = dict(std_rel_min=0.0, std_rel_max=std_rel, max_k=max_k, job_sigma_rel=0.5)
    p = AugmentParams(step_s=step_s, max_steps=max_steps, step_corr=step_corr, **base)
    jobs = long_jobs(300)
    drawn = {j.id: j for j in augment(jobs, model, p.model_copy(update={"profile": "constant"}), seed=seed)}
    out = list(augment(jobs, model, p, seed=seed))
    for job, src in zip(out, jobs):
        nominal = drawn[job.id]
        lo = max(model.idle_w, 2 * nominal.mean_w - nominal.max_w)
        n = min(max(math.ceil(src.runtime_s / step_s), 1), max_steps)
        if job.power_series is None:  # constant: one step, or every step the same
            assert job.std_w == 0.0 and job.max_w == job.mean_w
            values = [job.mean_w]
        else:
            offsets = [t for t, _ in job.power_series]
            values = [w for _, w in job.power_series]
            assert len(values) == n and offsets[0] == 0.0
            assert offsets == pytest.approx([k * src.runtime_s / n for k in range(n)])
        assert all(lo - 1e-9 <= w <= nominal.max_w + 1e-9 for w in values), (job.id, values, lo, nominal)
        # the job's figures are its series' own (what a meter shows, what the oracle predicts)
        assert job.mean_w == pytest.approx(float(np.mean(values)), rel=1e-12)
        assert job.max_w == max(values)
        assert job.std_w == pytest.approx(float(np.std(values)), rel=1e-9, abs=1e-9)
        true = true_power(job, None)
        assert (true.mean_w, true.max_w) == pytest.approx((job.mean_w, job.max_w), rel=1e-12)
    again = list(augment(reversed(jobs), model, p, seed=seed))
    assert {j.id: j.power_series for j in again} == {j.id: j.power_series for j in out}


def test_power_series_depend_on_the_seed_and_not_on_the_order_or_chunks():
    jobs = long_jobs(3000)
    whole = {j.id: j.power_series for j in augment(jobs, POWER, AugmentParams(), seed=11)}
    assert sum(s is not None for s in whole.values()) > 2000
    pieces = {}
    for lo, hi in [(0, 1), (1, 2500), (2500, 3000)]:
        pieces.update({j.id: j.power_series for j in augment(jobs[lo:hi], POWER, AugmentParams(), seed=11)})
    assert pieces == whole
    other = {j.id: j.power_series for j in augment(jobs, POWER, AugmentParams(), seed=12)}
    both = [k for k in whole if whole[k] is not None and other[k] is not None]
    assert len(both) > 2000 and sum(whole[k] != other[k] for k in both) > 0.99 * len(both)
    # one job alone, through the public single-job function, gives its series in the stream
    nominal = next(augment(jobs[41:42], POWER, CONSTANT, seed=11))
    alone = aug.power_profile(nominal, AugmentParams(), 11, floor_w=POWER.idle_w)
    assert alone.power_series == whole[jobs[41].id]


def test_power_series_are_autocorrelated_as_asked():
    # means near the middle of a wide busy range, clipped only at 4 std (rarely): the AR(1) process itself
    p = AugmentParams(step_s=100.0, max_steps=200, step_corr=0.8, std_rel_min=0.1, std_rel_max=0.1, max_k=4.0,
                      job_sigma_rel=0.0, user_mean_alpha=50.0, user_mean_beta=50.0)
    jobs = [TraceJob(i, 0.0, 20000.0, 20000.0, 1, 1, user=f"u{i}") for i in range(1, 201)]
    wide = NodePowerModel(idle_w=0.0, busy_min_w=1e3, busy_w=1e6)
    lag1 = []
    for job in augment(jobs, wide, p, seed=3):
        x = np.array([w for _, w in job.power_series])
        x = (x - x.mean()) / x.std()
        lag1.append(float(np.mean(x[1:] * x[:-1])))
    assert np.mean(lag1) == pytest.approx(0.8, abs=0.05)
    lag0 = []
    for job in augment(jobs, wide, p.model_copy(update={"step_corr": 0.0}), seed=3):
        x = np.array([w for _, w in job.power_series])
        x = (x - x.mean()) / x.std()
        lag0.append(float(np.mean(x[1:] * x[:-1])))
    assert abs(np.mean(lag0)) < 0.05


def test_constant_profile_gives_no_series_and_the_drawn_power():
    out = list(augment(long_jobs(500), POWER, CONSTANT, seed=5))
    assert all(j.power_series is None for j in out)
    assert all(j.std_w > 0 for j in out)


def test_a_job_with_a_measured_series_keeps_it():
    measured = ((0.0, 150.0), (30.0, 170.0))
    job = TraceJob(5, 0.0, 60.0, 60.0, 1, 1, user="u", power_series=measured)
    out = next(augment([job], POWER, AugmentParams(), seed=1))
    assert out.power_series == measured


@pytest.mark.parametrize("bad", [{"profile": "wavy"}, {"step_s": 0}, {"max_steps": 0}, {"step_corr": 1.0},
                                 {"step_corr": -0.1}])
def test_bad_profile_options_are_refused(bad):
    with pytest.raises(pydantic.ValidationError):
        AugmentParams(**bad)
