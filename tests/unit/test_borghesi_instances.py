"""§5 instances of Borghesi et al. 2018: queues, application classes, hot start; tables and the engine."""

from __future__ import annotations

import pytest

from builders import platform, tj
from wattsched.cli import main
from wattsched.errors import ConfigError
from wattsched.model.constraints import CapSchedule
from wattsched.policies import make_policy
from wattsched.sim.engine import Engine
from wattsched.workload.synthetic import Queue, QueueDist, generate, preset
from wattsched.workload.tables import read_job_table, write_job_table


def _jobs(**kw):
    return list(generate(kw.pop("n", 400), window_s=kw.pop("window_s", 900.0), arrival="burst", seed=3, **kw).jobs)


def test_preset_draws_queues_and_classes_with_their_shares():
    jobs = _jobs(n=3000, **preset("borghesi2018"))
    queues = [j.partition for j in jobs]
    classes = [j.app_class for j in jobs]
    assert {q: queues.count(q) / len(jobs) for q in set(queues)} == pytest.approx(
        {"debug": 0.3, "parallel": 0.6, "longpar": 0.1}, abs=0.03)
    assert {c: classes.count(c) / len(jobs) for c in set(classes)} == pytest.approx(
        {"cpu": 0.4, "memory": 0.3, "mixed": 0.3}, abs=0.03)
    assert max(j.nodes for j in jobs) <= 8 and all(j.procs == 16 * j.nodes for j in jobs)
    assert preset("borghesi2018")["queues"].ewt_param() == {"debug": 1800.0, "parallel": 21600.0,
                                                           "longpar": 86400.0}


def test_queues_classes_and_hot_start_leave_the_other_draws_unchanged():
    plain = _jobs()
    more = _jobs(queues=QueueDist(queues=[Queue(name="q", ewt_s=60, share=1)]), app_classes={"cpu": 1.0},
                 hot_start=0.5)
    instance = [j for j in more if not j.extra.get("running_at_start")]
    assert [(j.id, j.submit_s, j.runtime_s, j.nodes, j.user) for j in instance] == \
        [(j.id, j.submit_s, j.runtime_s, j.nodes, j.user) for j in plain]
    assert {j.partition for j in instance} == {"q"} and {j.app_class for j in instance} == {"cpu"}


@pytest.mark.parametrize("share", [0.0, 0.3, 0.7, 1.0])
def test_hot_start_occupies_exactly_the_share_of_the_nodes(share):
    jobs = _jobs(hot_start=share, max_nodes=64)
    hot = [j for j in jobs if j.extra.get("running_at_start")]
    assert sum(j.nodes for j in hot) == round(share * 64)
    assert all(j.submit_s == 0.0 and j.id > 400 and j.walltime_s >= j.runtime_s for j in hot)
    assert jobs[:len(hot)] == hot  # first, in submission order
    assert len(jobs) == 400 + len(hot)


def test_bad_hot_start_and_classes_are_refused():
    with pytest.raises(ConfigError, match=r"hot_start must be a share of the nodes in \[0, 1\], got 1.5"):
        _jobs(hot_start=1.5)
    with pytest.raises(ConfigError, match="app_classes must map class names to probabilities"):
        _jobs(app_classes={"cpu": -1})
    with pytest.raises(ConfigError, match="unknown preset 'eurora'"):
        preset("eurora")


@pytest.mark.parametrize("suffix", [".csv", ".csv.gz", ".parquet"])
def test_running_at_start_round_trips_through_job_tables(tmp_path, suffix):
    jobs = _jobs(n=20, hot_start=0.25, **{k: v for k, v in preset("borghesi2018").items()})
    path = tmp_path / f"x{suffix}"
    write_job_table(jobs, path)
    back = list(read_job_table(path, cores_per_node=16).jobs)
    assert [(j.id, bool(j.extra.get("running_at_start")), j.partition, j.app_class) for j in back] == \
        [(j.id, bool(j.extra.get("running_at_start")), j.partition, j.app_class) for j in jobs]


def test_tables_without_hot_jobs_keep_their_columns(tmp_path):
    path = tmp_path / "x.csv"
    write_job_table(_jobs(n=5), path)
    assert "running_at_start" not in path.read_text().splitlines()[0]


def test_the_engine_starts_hot_jobs_at_once_even_over_the_cap():
    hot = [tj(i, 0.0, 500.0, nodes=2, mean_w=300.0, max_w=300.0) for i in (10, 11)]
    for j in hot:
        j.extra["running_at_start"] = True
    new = tj(1, 0.0, 100.0, nodes=1, mean_w=300.0, max_w=300.0)
    # 5 nodes, cap 700 W: the hot jobs alone draw 4 x 300 + 100 idle = 1300 W; ls keeps the new job waiting
    result = Engine(platform(5), [*hot, new], make_policy("ls"), cap=CapSchedule.constant(700.0)).run()
    start = dict(zip(result.jobs["id"].tolist(), result.jobs["start_s"].tolist()))
    assert start[10] == start[11] == 0.0
    assert start[1] >= 500.0
    assert result.info["hot_started"] == 2


def test_a_hot_job_that_does_not_fit_waits_as_an_ordinary_job():
    hot = [tj(i, 0.0, 500.0, nodes=3) for i in (1, 2)]
    for j in hot:
        j.extra["running_at_start"] = True
    result = Engine(platform(4), hot, make_policy("easy")).run()
    start = dict(zip(result.jobs["id"].tolist(), result.jobs["start_s"].tolist()))
    assert start == {1: 0.0, 2: 500.0}
    assert result.info["hot_started"] == 1 and result.info["hot_start_pending"] == 1


def test_synth_command_writes_a_borghesi_instance_that_simulate_reads(tmp_path, capsys):
    out = tmp_path / "x.csv"
    assert main(["traces", "synth", "--preset", "borghesi2018", "--jobs", "60", "--window", "300", "--arrival",
                 "uniform", "--hot-start", "0.7", "--seed", "3", "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "hot start 0.7" in printed and "queue_ewt_s={debug: 1800.0" in printed
    jobs = list(read_job_table(out, cores_per_node=16).jobs)
    assert sum(j.nodes for j in jobs if j.extra.get("running_at_start")) == 45  # 70 % of 64, rounded
    run = tmp_path / "run"
    assert main(["simulate", "--trace", str(out), "--platform", "eurora", "--policy", "ls", "--cap", "60%",
                 "--param", "queue_ewt_s={debug: 1800, parallel: 21600, longpar: 86400}", "--out", str(run),
                 "-q", "--no-report"]) == 0
    assert "hot_started" in (run / "summary.json").read_text()
    assert main(["traces", "synth", "--jobs", "5", "--hot-start", "2", "-o", str(out)]) == 2
    assert "--hot-start: a share of the nodes in [0, 1], got 2" in capsys.readouterr().err
