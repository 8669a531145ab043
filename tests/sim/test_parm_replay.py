"""``parm`` in replay: the PARM testbed under its budget, through the engine and from the command line."""

from __future__ import annotations

import csv

import pytest

from builders import cli, read_summary
from wattsched.config.platform import load_platform
from wattsched.policies import make_policy
from wattsched.sim.engine import Engine, EngineOptions
from wattsched.workload.records import app_of
from wattsched.workload.tables import read_job_table

pytest.importorskip("ortools")

TESTBED = load_platform("sarood-testbed")


@pytest.fixture(scope="module")
def jobs_csv(tmp_path_factory):
    path = tmp_path_factory.mktemp("parm") / "jobs.csv"
    out = cli("traces", "synth", "--jobs", 60, "--window", 1800, "--max-nodes", 38, "--median-runtime", 600,
              "--moldable", 1, "--malleable", "--seed", 3, "-o", path)
    assert out.returncode == 0, out.stderr
    return path


@pytest.mark.parametrize("version", ["noMM", "noSE", "wSE"])
def test_every_version_runs_the_trace_within_the_budget_with_the_guard_strict(jobs_csv, version):
    trace = list(read_job_table(jobs_csv).jobs)
    ranges = {j.id: (j.min_nodes or j.nodes, j.max_nodes or j.nodes, j.nodes) for j in trace}
    assert all(app_of(j) for j in trace) and any(j.malleable for j in trace)
    engine = Engine(TESTBED, trace, make_policy("parm", {"version": version}), cap=None,
                    options=EngineOptions(strict=True))
    result = engine.run()
    jobs = result.jobs
    assert set(jobs["state"]) == {"COMPLETED"}  # a job slowed by its scheduler is not killed at its walltime
    # power, idle nodes included, never above the budget (count_idle)
    assert result.timeline["power_w"].max() <= TESTBED.budget_w + 1e-6
    used = dict(zip(jobs["id"].tolist(), jobs["nodes"].tolist(), strict=True))
    for jid, n in used.items():
        lo, hi, req = ranges[jid]
        if version == "noMM":
            assert n == req
        else:
            assert lo <= n <= hi
    if version != "noMM":
        assert any(n < ranges[j][2] for j, n in used.items())  # moldable: some ran on fewer nodes than asked
    if version == "wSE":
        assert engine.stats["actions"] > 0


def test_simulate_parm_on_the_testbed_from_the_command_line(jobs_csv, tmp_path):
    out = tmp_path / "run"
    res = cli("simulate", "--trace", jobs_csv, "--platform", "sarood-testbed", "--policy", "parm",
              "--param", "version=wSE", "--out", out, timeout=600)
    assert res.returncode == 0, res.stderr
    assert "policy parm (version: wSE" in res.stdout
    summary = read_summary(out)
    assert summary["verdicts"]["cap"]["held"] is True
    # the budget is the run's cap, and the report shows the node caps over time
    with open(out / "node_caps.csv", newline="") as fh:
        caps = {float(r["cap_w"]) for r in csv.DictReader(fh)}
    assert caps and caps <= {TESTBED.base_w + TESTBED.mem_w + p for p in TESTBED.cpu_power_levels_w}
    html = (out / "report.html").read_text()
    assert "<h2>Node caps</h2>" in html and "<h2>Node counts</h2>" in html
    with open(out / "node_counts.csv", newline="") as fh:
        counts = list(csv.DictReader(fh))
    ranged = {j.id for j in read_job_table(jobs_csv).jobs if j.min_nodes < j.max_nodes}
    assert {int(r["id"]) for r in counts} == ranged
    assert all(int(r["min_nodes"]) <= int(r["nodes"]) <= int(r["max_nodes"]) for r in counts)


def test_an_overprovisioned_platforms_budget_is_the_runs_cap_unless_the_config_gives_one(jobs_csv, tmp_path):
    res = cli("simulate", "--trace", jobs_csv, "--platform", "sarood-testbed", "--policy", "easy", "--out",
              tmp_path / "easy", "-q")
    assert res.returncode == 0, res.stderr
    assert "ignores the power cap of this run (the platform's budget_w)" in res.stderr
    verdict = read_summary(tmp_path / "easy")["verdicts"]["cap"]
    assert verdict["held"] is False  # easy runs every node at full power: 38 x 116 W > 3,300 W
    given = cli("simulate", "--trace", jobs_csv, "--platform", "sarood-testbed", "--policy", "easy", "--cap",
                "5000", "--out", tmp_path / "capped", "-q")
    assert given.returncode == 0, given.stderr
    assert read_summary(tmp_path / "capped")["verdicts"]["cap"]["held"] is True


def test_simulate_makes_the_jobs_moldable_with_the_moldable_options(tmp_path):
    plain = tmp_path / "plain.csv"
    assert cli("traces", "synth", "--jobs", 30, "--window", 600, "--max-nodes", 38, "--median-runtime", 300,
               "-o", plain).returncode == 0
    out = tmp_path / "run"
    res = cli("simulate", "--trace", plain, "--platform", "sarood-testbed", "--policy", "parm", "--moldable", 1,
              "--theta", "0.5,0.5", "--malleable", "--out", out, "-q")
    assert res.returncode == 0, res.stderr
    notes = " ".join(read_summary(out)["info"]["notes"])
    assert "moldable jobs" in notes and "malleable" in notes
    bad = cli("simulate", "--trace", plain, "--platform", "sarood-testbed", "--theta", "0.5,0.5", "--out",
              tmp_path / "bad")
    assert bad.returncode == 2 and "--theta: needs --moldable FRACTION" in bad.stderr


def test_the_naive_strategy_runs_every_node_at_one_cpu_level_on_as_many_nodes_as_the_budget_feeds(tmp_path):
    naive = load_platform("intrepid-overprovisioned").naive(30.0)
    assert len(naive) == 55_248 and naive.cpu_power_levels_w == (30.0,)  # 4,751,360 W // 86 W, §VII-D
    assert len(load_platform("intrepid-overprovisioned").naive(60.0)) == 40_960
    jobs = tmp_path / "jobs.csv"
    assert cli("traces", "synth", "--jobs", 40, "--window", 600, "--max-nodes", 38, "--median-runtime", 300,
               "--moldable", 1, "--seed", 5, "-o", jobs).returncode == 0
    out = tmp_path / "naive"
    res = cli("simulate", "--trace", jobs, "--platform", "sarood-testbed", "--naive-cpu-w", 45, "--policy", "easy",
              "--out", out, "-q")
    assert res.returncode == 0, res.stderr
    assert "machine: 32 nodes" in res.stdout and "naive strategy: every node at CPU 45 W" in res.stdout
    summary = read_summary(out)
    assert summary["verdicts"]["cap"]["held"] is True  # 32 x (38 + 18 + 45) W = 3,232 W <= 3,300 W
    # each job ran at min(p_h, 45 W): slower than at full CPU power for an application whose p_h is above 45 W
    full = cli("simulate", "--trace", jobs, "--platform", "sarood-testbed", "--policy", "easy", "--out",
               tmp_path / "full", "-q")
    assert full.returncode == 0

    def mean_runtime(run):
        s = read_summary(run)["summary"]
        return s["mean_turnaround_s"] - s["mean_wait_s"]

    assert mean_runtime(out) > 1.05 * mean_runtime(tmp_path / "full")
    bad = cli("simulate", "--trace", jobs, "--naive-cpu-w", 30, "--procs", 64, "--out", tmp_path / "bad")
    assert bad.returncode == 2 and "--naive-cpu-w: platform '64-procs' is not overprovisioned" in bad.stderr
