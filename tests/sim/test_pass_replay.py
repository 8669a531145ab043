"""Replay times jobs of a PASS application by their node count and CPU cap (Sarood et al. 2014) on an
overprovisioned platform: by hand, through the engine with a hand-written plan, and end to end from the CLI."""

from __future__ import annotations

import csv
import textwrap

import pytest

from builders import cli, kth_excerpt
from wattsched.config.platform import load_platform
from wattsched.errors import TraceError
from wattsched.model.plan import Plan, Reshape, Start
from wattsched.policies.base import BasePolicy
from wattsched.scalingmodels import packaged_pass_models
from wattsched.sim.engine import Engine, EngineOptions
from wattsched.workload.records import TraceJob
from wattsched.workload.tables import read_job_table

MODELS = packaged_pass_models()


class Narrow(BasePolicy):
    """FCFS, each job started on its ``min_nodes`` (a moldable job's smallest count), capped at ``caps[id]`` if
    given: the node-count and cap choices a PARM policy makes, written by hand."""

    name = "narrow"

    def __init__(self, caps: dict[int, float] | None = None):
        super().__init__()
        self.caps = caps or {}

    def decide(self, snapshot, state=None):
        free = list(snapshot.free_nodes)
        actions = []
        for job in snapshot.pending.values():
            k = job.min_nodes or job.nodes
            if k > len(free):
                break
            actions.append(Start(job.id, tuple(free[-k:]), cap_w=self.caps.get(job.id)))
            del free[-k:]
        return Plan(actions)


def leanmd(jid: int, submit_s: float = 0.0) -> TraceJob:
    return TraceJob(jid, submit_s, 3600.0, 1e6, 120, 20, min_nodes=10, max_nodes=20, extra={"app": "leanmd"})


def rows(result) -> dict[int, dict]:
    keys = list(result.jobs)
    return {int(i): {k: result.jobs[k][n] for k in keys} for n, i in enumerate(result.jobs["id"])}


def test_a_plan_that_starts_a_job_on_fewer_capped_nodes_has_its_effect():
    # hand-checked in tests/unit/test_ledger_pass.py: 3,600 s on 20 nodes is 7,064.4068 s on 10, 8,947.3510 s at
    # a node cap of 95 W (CPU 39 W); the job's 10 nodes draw 38 + 18 + 52 W, or 95 W capped
    testbed = load_platform("sarood-testbed")
    jobs = [leanmd(1), leanmd(2)]
    out = rows(Engine(testbed, jobs, Narrow({2: 95.0}), options=EngineOptions(strict=True)).run())
    one, two = out[1], out[2]
    assert one["nodes"] == 10 and two["nodes"] == 10  # jobs.csv gives the count each ran on
    assert one["end_s"] - one["start_s"] == pytest.approx(7064.4068, abs=1e-3)
    assert one["energy_j"] == pytest.approx(10 * 108.0 * 7064.4068, rel=1e-7)
    assert two["end_s"] - two["start_s"] == pytest.approx(8947.3510, abs=1e-3)
    assert two["energy_j"] == pytest.approx(10 * 95.0 * 8947.3510, rel=1e-7)
    assert one["state"] == two["state"] == "COMPLETED"


class ShrinkOnce(BasePolicy):
    """Starts job 1 on its 20 nodes, then at its first call after ``at`` shrinks it to 10, charging ``cost``."""

    name = "shrink-once"

    def __init__(self, at: float, cost: float):
        super().__init__()
        self.at, self.cost, self.done = at, cost, False

    def decide(self, snapshot, state=None):
        if 1 in snapshot.pending:
            return Plan([Start(1, tuple(snapshot.free_nodes[-20:]))])
        run = snapshot.running.get(1)
        if run is not None and not self.done and snapshot.now_s >= self.at:
            self.done = True
            return Plan([Reshape(1, run.nodes[:10], self.cost)])
        return Plan()


def test_a_reshape_charges_its_overhead_and_moves_the_time_limit_with_it():
    # job 1 (leanmd, 20 nodes, 3,600 s at p_h) is shrunk to 10 nodes at t = 1,800 s (job 2's arrival), charged
    # 100 s: the other half of its work at 10 nodes takes 1,800 s x 7,064.4068 / 3,600 (test_ledger_pass), plus
    # the 100 s; its time limit (3,600 s of work) is not reached on the way
    testbed = load_platform("sarood-testbed")
    one = TraceJob(1, 0.0, 3600.0, 3600.0, 20, 20, min_nodes=10, max_nodes=20, malleable=True,
                   extra={"app": "leanmd"})
    two = TraceJob(2, 1800.0, 10.0, 10.0, 1, 1, extra={"app": "leanmd"})
    out = rows(Engine(testbed, [one, two], ShrinkOnce(1800.0, 100.0), options=EngineOptions(strict=True)).run())
    assert out[1]["state"] == "COMPLETED" and out[1]["nodes"] == 10
    assert out[1]["end_s"] == pytest.approx(1800.0 + 1800.0 * 7064.4068 / 3600.0 + 100.0, rel=1e-6)


def test_an_application_without_a_model_is_refused_naming_the_job():
    job = TraceJob(7, 0.0, 60.0, 120.0, 6, 1, extra={"app": "gromacs"})
    with pytest.raises(TraceError, match=r"app: job 7: application 'gromacs' has no PASS model on platform "
                                         r"'sarood-testbed' \(known: amr, jacobi2d, leanmd, lulesh, wave2d\)"):
        Engine(load_platform("sarood-testbed"), [job], Narrow()).run()


def _csv(path) -> dict[int, dict]:
    with open(path, newline="") as fh:
        return {int(r["id"]): r for r in csv.DictReader(fh)}


def test_simulate_on_the_testbed_with_moldable_jobs_follows_pass(tmp_path):
    trace = kth_excerpt(tmp_path, jobs=60)
    config = tmp_path / "run.yaml"
    config.write_text(textwrap.dedent(f"""\
        trace: {trace}
        platform: sarood-testbed
        policy: fcfs
        moldable: {{}}
    """))
    out = tmp_path / "run"
    proc = cli("simulate", "--config", config, "--out", out, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    done = _csv(out / "jobs.csv")
    workload = read_job_table(out / "workload.csv.gz")
    truth = {j.id: j for j in workload.jobs}
    assert len(done) == 60 and set(done) == set(truth)
    # fcfs starts every job on its requested nodes, uncapped: its trace run time, each node drawing 38 + 18 W
    # and its application's p_h (not the trace's augmented mean_w)
    for jid, r in done.items():
        tj = truth[jid]
        app = tj.extra["app"]
        assert float(r["end_s"]) - float(r["start_s"]) == tj.runtime_s
        assert float(r["energy_j"]) == pytest.approx(tj.nodes * (56.0 + MODELS[app].p_h) * tj.runtime_s, rel=1e-6,
                                                     abs=1e-3)
    # the same moldable workload, every job started on its smallest count: runtime · T(min, p_h) / T(nodes, p_h)
    again = read_job_table(out / "workload.csv.gz")  # a workload's jobs are read once
    narrow = rows(Engine(load_platform("sarood-testbed"), again, Narrow(), options=EngineOptions()).run())
    assert set(narrow) == set(truth)
    longer = 0
    for jid, r in narrow.items():
        tj = truth[jid]
        m = MODELS[tj.extra["app"]]
        expect = tj.runtime_s * m.time(tj.min_nodes, m.p_h) / m.time(tj.nodes, m.p_h)
        took = r["end_s"] - r["start_s"]
        if r["state"] == "COMPLETED":
            assert took == pytest.approx(expect, rel=1e-9, abs=1e-6)
        else:  # killed at its requested time, before the longer run was done
            assert r["state"] == "TIMEOUT" and took == pytest.approx(tj.walltime_s) and expect > tj.walltime_s
        longer += tj.min_nodes < tj.nodes and tj.runtime_s > 0
    assert longer >= 10  # enough of the excerpt's jobs shrank to show it
