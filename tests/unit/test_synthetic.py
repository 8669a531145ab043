"""Synthetic workloads: determinism, arrival shapes, bounds of the drawn features."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pydantic
import pytest

from wattsched.errors import ConfigError
from wattsched.workload.synthetic import ArrivalParams, DurationDist, NodesDist, UsersDist, generate


def jobs_of(n=500, **kw):
    kw.setdefault("window_s", 900.0)
    kw.setdefault("seed", 7)
    return list(generate(n, **kw).jobs)


def arrivals(n=2000, **kw):
    return np.array([j.submit_s for j in jobs_of(n, **kw)])


def test_same_seed_same_jobs_other_seed_other_jobs():
    for arrival in ("uniform", "left-skewed", "burst"):
        a = jobs_of(300, arrival=arrival, seed=11)
        assert a == jobs_of(300, arrival=arrival, seed=11)
        assert a != jobs_of(300, arrival=arrival, seed=12)


def test_streams_are_independent_per_aspect():
    base = jobs_of(200, seed=3)
    other = jobs_of(200, seed=3, nodes_dist=NodesDist(kind="uniform"))
    assert [j.submit_s for j in base] == [j.submit_s for j in other]
    assert [j.runtime_s for j in base] == [j.runtime_s for j in other]
    assert [j.nodes for j in base] != [j.nodes for j in other]


def test_ids_order_and_window():
    for arrival in ("uniform", "left-skewed", "burst"):
        jobs = jobs_of(400, arrival=arrival, window_s=300)
        assert [j.id for j in jobs] == list(range(1, 401))
        t = [j.submit_s for j in jobs]
        assert t == sorted(t)
        assert all(0.0 <= x < 300.0 for x in t)
        assert all(isinstance(x, float) for x in t)


def test_uniform_arrivals_fill_the_window_evenly():
    t = arrivals(arrival="uniform")
    assert 0.45 < np.mean(t < 450) < 0.55
    counts = np.histogram(t, bins=10, range=(0, 900))[0]
    assert counts.min() > 0.6 * len(t) / 10


def test_left_skewed_arrivals_crowd_the_origin():
    t = arrivals(arrival="left-skewed")
    assert np.mean(t < 450) > 0.8  # Beta(1, 3): 87.5 % expected
    stronger = arrivals(arrival="left-skewed", arrival_params=ArrivalParams(skew=6.0))
    assert np.mean(stronger < 100) > np.mean(t < 100)
    flat = arrivals(arrival="left-skewed", arrival_params=ArrivalParams(skew=1.0))
    assert 0.45 < np.mean(flat < 450) < 0.55


def test_burst_arrivals_come_in_groups():
    # 200 jobs, 50 per burst: 4 bursts each 2 % of the window long, so at most a dozen
    # of 100 bins hold jobs; uniform arrivals touch most bins.
    occupied = {a: np.count_nonzero(np.histogram(arrivals(200, arrival=a), bins=100, range=(0, 900))[0])
                for a in ("burst", "uniform")}
    assert occupied["burst"] <= 12
    assert occupied["uniform"] > 60

    t = arrivals(300, arrival="burst", arrival_params=ArrivalParams(jobs_per_burst=100, burst_width_fraction=0.01))
    groups = 1 + np.count_nonzero(np.diff(t) > 9.0)  # gaps longer than one burst separate groups
    assert groups <= 3


def test_node_counts_in_range_for_each_kind():
    for kind in ("log-uniform", "power-of-two", "uniform"):
        nodes = [j.nodes for j in jobs_of(1000, nodes_dist=NodesDist(kind=kind), max_nodes=48)]
        assert min(nodes) >= 1 and max(nodes) <= 48
        if kind == "power-of-two":
            assert set(nodes) <= {1, 2, 4, 8, 16, 32}
            assert len(set(nodes)) == 6
    nodes = [j.nodes for j in jobs_of(500, nodes_dist=NodesDist(min_nodes=4, max_nodes=1000), max_nodes=10)]
    assert min(nodes) >= 4 and max(nodes) <= 10


def test_log_uniform_favours_small_jobs_and_powers_of_two():
    nodes = np.array([j.nodes for j in jobs_of(4000, nodes_dist=NodesDist(pow2_fraction=0.5), max_nodes=64)])
    assert np.mean(nodes <= 8) > np.mean(nodes > 8)  # log-uniform: as many in [1, 8] as in (8, 64]
    pow2 = np.mean((nodes & (nodes - 1)) == 0)
    none = np.array([j.nodes for j in jobs_of(4000, nodes_dist=NodesDist(pow2_fraction=0.0), max_nodes=64)])
    assert pow2 > np.mean((none & (none - 1)) == 0) + 0.2


def test_procs_follow_cores_per_node():
    wl = generate(50, window_s=60, seed=1, cores_per_node=16, max_nodes=8)
    assert (wl.max_nodes, wl.max_procs) == (8, 128)
    assert all(j.procs == 16 * j.nodes for j in wl.jobs)


def test_durations_and_walltimes_in_bounds():
    d = DurationDist(median_s=600, sigma=2.0, min_s=30, max_s=7200, overestimate_min=1.5, overestimate_max=3.0,
                     walltime_round_s=60)
    jobs = jobs_of(2000, duration_dist=d)
    run = np.array([j.runtime_s for j in jobs])
    wall = np.array([j.walltime_s for j in jobs])
    assert run.min() >= 30 and run.max() <= 7200
    assert np.any(run == 30) and np.any(run == 7200)  # sigma 2 reaches the clips
    assert 400 < np.median(run) < 900
    assert np.all(wall >= 1.5 * run)
    assert np.all(wall <= np.ceil(3.0 * run / 60) * 60)
    assert np.all(np.mod(wall, 60) == 0)


def test_exact_walltime_without_overestimation_or_rounding():
    d = DurationDist(overestimate_min=1.0, overestimate_max=1.0, walltime_round_s=0)
    assert all(j.walltime_s == j.runtime_s for j in jobs_of(300, duration_dist=d))


def test_users_are_zipf_like():
    users = Counter(j.user for j in jobs_of(5000, users=UsersDist(n_users=12, zipf_s=1.2)))
    assert set(users) <= {f"user{k:02d}" for k in range(1, 13)}
    ranked = [users[f"user{k:02d}"] for k in range(1, 13)]
    assert ranked[0] == max(ranked)
    assert ranked[0] > 2 * ranked[3]  # 4 ** 1.2 ≈ 5.3 expected
    assert ranked[0] / 5000 == pytest.approx(1 / sum(k**-1.2 for k in range(1, 13)), abs=0.03)

    flat = Counter(j.user for j in jobs_of(5000, users=UsersDist(n_users=5, zipf_s=0, prefix="u")))
    assert set(flat) == {"u1", "u2", "u3", "u4", "u5"}
    assert max(flat.values()) < 1.15 * min(flat.values())


def test_workload_metadata():
    wl = generate(20, window_s=300, arrival="burst", seed=5, max_nodes=16)
    assert wl.has_power is False
    assert wl.header["arrival"] == "burst" and wl.header["seed"] == "5"
    assert "burst" in wl.name and "seed5" in wl.name
    assert wl.report.read == wl.report.kept == 20
    assert all(j.mean_w is None and j.status == 1 for j in wl.jobs)


def test_zero_jobs():
    assert list(generate(0, window_s=10, seed=0).jobs) == []


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"arrival": "poisson"}, r"unknown arrival 'poisson'; use one of uniform, left-skewed, burst"),
        ({"window_s": 0}, "window_s must be a finite number > 0"),
        ({"window_s": math.inf}, "window_s must be a finite number > 0"),
        ({"seed": -1}, "seed must be an integer >= 0"),
        ({"max_nodes": 0}, "max_nodes and cores_per_node must be >= 1"),
        ({"nodes_dist": NodesDist(min_nodes=100)}, "min_nodes=100 is above the largest allowed size 64"),
        ({"nodes_dist": NodesDist(kind="power-of-two", min_nodes=5, max_nodes=7)}, "no power of two"),
    ],
)
def test_bad_arguments_raise_config_errors(kwargs, pattern):
    kw = {"window_s": 100.0, "seed": 1, **kwargs}
    with pytest.raises(ConfigError, match=pattern):
        generate(10, **kw)


def test_params_are_validated():
    with pytest.raises(pydantic.ValidationError, match="extra"):
        NodesDist(kindd="uniform")
    with pytest.raises(pydantic.ValidationError, match="overestimate_min"):
        DurationDist(overestimate_min=0.5)
    with pytest.raises(pydantic.ValidationError, match=r"min_s=10\.0 is above max_s=5\.0"):
        DurationDist(min_s=10, max_s=5)
    with pytest.raises(pydantic.ValidationError):
        ArrivalParams(burst_width_fraction=0)


def test_numpy_integers_are_accepted():
    assert jobs_of(30, seed=np.int64(4)) == jobs_of(30, seed=4)
    assert len(list(generate(np.int32(12), window_s=np.float64(60.0), seed=0).jobs)) == 12


# ----------------------------------------------------------------------------- job units


def test_units_leave_every_other_draw_unchanged():
    for kw in ({}, {"arrival": "burst", "hot_start": 0.6, "cores_per_node": 16,
                    "app_classes": {"cpu": 0.5, "memory": 0.5}}):
        plain = jobs_of(400, seed=5, **kw)
        units = jobs_of(400, seed=5, units=True, **kw)
        assert all(not j.units for j in plain) and all(j.units for j in units)
        assert [(j.id, j.submit_s, j.runtime_s, j.walltime_s, j.nodes, j.user, j.app_class, j.extra) for j in units] \
            == [(j.id, j.submit_s, j.runtime_s, j.walltime_s, j.nodes, j.user, j.app_class, j.extra) for j in plain]
    assert jobs_of(50, seed=5, units=False) == jobs_of(50, seed=5)


def test_units_follow_the_documented_distributions():
    jobs = jobs_of(6000, seed=9, units=True, cores_per_node=16, max_nodes=64)
    units = [u for j in jobs for u in j.units]
    assert all(len(j.units) == j.nodes and j.procs == sum(u.cores for u in j.units) for j in jobs)
    cores = Counter(u.cores for u in units)
    assert set(cores) == {1, 2, 4, 8, 16}
    assert all(n / len(units) == pytest.approx(0.2, abs=0.02) for n in cores.values())
    mem_gb = Counter(u.mem_mb / 1024 for u in units)
    assert set(mem_gb) == set(range(1, 17))
    # accelerators: one request per job, shared by its units, GPUs or MICs but never both
    assert all(len({(u.gpus, u.mics) for u in j.units}) == 1 for j in jobs)
    asks = [(j.units[0].gpus, j.units[0].mics) for j in jobs]
    assert all(g == 0 or m == 0 for g, m in asks)
    gpu = sum(1 for g, _ in asks if g) / len(jobs)
    mic = sum(1 for _, m in asks if m) / len(jobs)
    assert (gpu, mic) == (pytest.approx(0.25, abs=0.02), pytest.approx(0.125, abs=0.015))
    assert {g for g, _ in asks} == {0, 1, 2} and {m for _, m in asks} == {0, 1, 2}
    # units of one job differ: cores and memory are drawn per unit
    assert any(len(set(j.units)) > 1 for j in jobs)


def test_units_are_capped_by_the_node():
    small = jobs_of(500, seed=2, units=True, cores_per_node=4, mem_per_node_mb=3 * 1024 + 512)
    assert max(u.cores for j in small for u in j.units) == 4
    assert {u.mem_mb for j in small for u in j.units} == {1024, 2048, 3072}
    assert all(u.cores == 1 for j in jobs_of(100, seed=2, units=True) for u in j.units)  # one core per node


def test_units_are_seeded_and_recorded():
    a = generate(300, window_s=600, seed=4, units=True, cores_per_node=16)
    assert list(a.jobs) == jobs_of(300, window_s=600, seed=4, units=True, cores_per_node=16)
    assert jobs_of(300, window_s=600, seed=5, units=True, cores_per_node=16) != \
        jobs_of(300, window_s=600, seed=4, units=True, cores_per_node=16)
    assert (a.header["units"], a.header["mem_per_node_mb"]) == ("true", "16384")
    assert "jobs of units" in a.notes[0]
    plain = generate(30, window_s=600, seed=4)
    assert "units" not in plain.header and "mem_per_node_mb" not in plain.header


def test_hot_start_jobs_get_units_and_leave_the_instance_units_unchanged():
    hot = jobs_of(300, seed=6, units=True, cores_per_node=16, hot_start=0.5)
    cold = jobs_of(300, seed=6, units=True, cores_per_node=16)
    running = [j for j in hot if j.extra.get("running_at_start")]
    assert running and all(j.units and len(j.units) == j.nodes for j in running)
    assert sum(len(j.units) for j in running) == 32
    assert [j.units for j in hot[len(running):]] == [j.units for j in cold]


@pytest.mark.parametrize(("kwargs", "pattern"), [
    ({"units": "yes"}, "units must be true or false"),
    ({"units": True, "mem_per_node_mb": 512}, "mem_per_node_mb must be an integer >= 1024"),
])
def test_bad_unit_arguments(kwargs, pattern):
    with pytest.raises(ConfigError, match=pattern):
        generate(10, window_s=100.0, seed=1, **kwargs)


def test_synthetic_units_from_the_cli(tmp_path, capsys):
    from wattsched.cli import main
    from wattsched.workload.tables import read_job_table

    out = tmp_path / "u.csv"
    assert main(["traces", "synth", "--preset", "borghesi2018", "--jobs", "40", "--units", "--seed", "3",
                 "-o", str(out)]) == 0
    assert "job units" in capsys.readouterr().out
    jobs = list(read_job_table(out, cores_per_node=16).jobs)
    assert len(jobs) == 40 and all(j.units and len(j.units) == j.nodes for j in jobs)
    assert out.read_text().splitlines()[0].endswith(",units")
    plain = tmp_path / "p.csv"
    assert main(["traces", "synth", "--preset", "borghesi2018", "--jobs", "40", "--seed", "3", "-o", str(plain)]) == 0
    assert "units" not in plain.read_text().splitlines()[0]
    assert [(j.id, j.submit_s, j.nodes) for j in read_job_table(plain, cores_per_node=16).jobs] == \
        [(j.id, j.submit_s, j.nodes) for j in jobs]
