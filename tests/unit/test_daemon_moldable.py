"""Moldable and malleable jobs in the daemon: node ranges read from captured Slurm 22.05 output (JSON and text),
what the policy sees of them, the moldable release and the shrink of a running job, and a shrink applied once
across a crash and restart.

The capture: tests/fixtures/slurm/v0.0.38-moldable-live/README.md.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest

from wattsched.config.daemon import DaemonConfig
from wattsched.daemon.loop import Daemon
from wattsched.daemon.metrics import DaemonMetrics
from wattsched.daemon.notify import Notifier
from wattsched.daemon.simcluster import SimCluster
from wattsched.daemon.slurm import resize
from wattsched.daemon.slurm.parse import decode_scontrol_jobs_text, decode_squeue_json, job_work_dir
from wattsched.daemon.slurm.records import ClusterState, SlurmNode
from wattsched.daemon.view import build_view
from wattsched.errors import SlurmCommandError
from wattsched.model.plan import Plan, Reshape
from wattsched.model.platform import NodePowerModel, Platform
from wattsched.policies.base import BasePolicy
from wattsched.workload.records import TraceJob

CAPTURE = Path(__file__).resolve().parents[1] / "fixtures" / "slurm" / "v0.0.38-moldable-live"
NODE_POWER = {"idle_w": 100.0, "busy_w": 300.0, "off_w": 10.0, "cap_min_w": 50.0, "cap_max_w": 300.0}


# --------------------------------------------------------------------------- reading the range


def ranges(records) -> dict[int, tuple[str, int, int]]:
    return {j.job_id: (j.state, j.node_count, j.max_nodes) for j in records}


EXPECTED = {1: ("COMPLETED", 1, 0), 2: ("COMPLETED", 1, 0), 4: ("PENDING", 1, 3), 5: ("PENDING", 2, 0),
            6: ("PENDING", 1, 0), 7: ("RUNNING", 3, 0)}


def test_json_gives_a_pending_jobs_node_range():
    decoded = decode_squeue_json((CAPTURE / "squeue.json").read_bytes())
    assert ranges(decoded.records) == EXPECTED and decoded.skipped == ()


@pytest.mark.parametrize("name", ["scontrol_jobs.txt", "scontrol_jobs_detail.txt"])
def test_text_gives_the_same_ranges_and_reads_a_resized_job(name):
    # jobs 1 and 2 were shrunk: scontrol prints ResizeTime= between AccrueTime= and StartTime=
    decoded = decode_scontrol_jobs_text((CAPTURE / name).read_text())
    assert ranges(decoded.records) == EXPECTED and decoded.skipped == ()


CAPTURE_2411 = CAPTURE.parent / "v0.0.42-moldable-live"
PENDING_2411 = {8: ("PENDING", 1, 2), 9: ("PENDING", 2, 0), 10: ("PENDING", 1, 0), 11: ("PENDING", 2, 0)}


def test_slurm_24_11_json_and_text_give_the_same_ranges():
    decoded = decode_squeue_json((CAPTURE_2411 / "squeue.json").read_bytes())
    assert {k: v for k, v in ranges(decoded.records).items() if v[0] == "PENDING"} == PENDING_2411
    assert decoded.skipped == ()
    for name in ("scontrol_jobs.txt", "scontrol_jobs_detail.txt"):
        # 24.11 prints ReqTRES= AllocTRES= (and ResizeTime= for the shrunk job 5): every record is read
        decoded = decode_scontrol_jobs_text((CAPTURE_2411 / name).read_text())
        assert decoded.skipped == () and len(decoded.records) == 10
        assert {k: v for k, v in ranges(decoded.records).items() if v[0] == "PENDING"} == PENDING_2411


def test_a_range_that_ends_below_its_start_is_a_skipped_record():
    doc = json.loads((CAPTURE / "squeue.json").read_text())
    bad = next(j for j in doc["jobs"] if j["job_id"] == 4)
    bad["node_count"], bad["max_nodes"] = 3, 2
    decoded = decode_squeue_json(json.dumps(doc))
    assert 4 not in {j.job_id for j in decoded.records} and decoded.skipped_ids == {4}
    assert decoded.skipped == ("job 4: jobs[2].max_nodes: node range 3-2 ends below its start",)
    text = (CAPTURE / "scontrol_jobs.txt").read_text().replace("NumNodes=1-3", "NumNodes=3-1")
    decoded = decode_scontrol_jobs_text(text)
    assert 4 not in {j.job_id for j in decoded.records} and decoded.skipped_ids == {4}
    assert "NumNodes: node range 3-1 ends below its start" in decoded.skipped[0]


def test_job_work_dir_reads_where_the_resize_scripts_go():
    text = (CAPTURE / "squeue.json").read_text()
    assert job_work_dir(text, 7) == ("/tmp/lm", 0, 0)
    with pytest.raises(Exception, match="job 99 is not listed"):
        job_work_dir(text, 99)


# --------------------------------------------------------------------------- what the policy sees


def capture_view(reshape: str):
    jobs = decode_squeue_json((CAPTURE / "squeue.json").read_bytes()).records
    nodes = tuple(SlurmNode(f"wst{i}", "ALLOCATED" if i <= 3 else "IDLE", cpus=2, partitions=("batch",))
                  for i in range(1, 5))
    state = ClusterState(tuple(jobs), nodes, version="22.05.8", read_at=1795314600.0)
    return build_view(state, partitions=frozenset(), holds={}, starts={}, power=NodePowerModel(**NODE_POWER),
                      cap_w=lambda _p: math.inf, estimator=None, epoch=1, include_adopted=True, platform_cache={},
                      take_user_holds=True,
                      reshape=reshape)


def test_the_policy_sees_moldable_ranges_and_malleable_running_jobs():
    snap = capture_view("shrink").snapshot
    j4, j5, j6 = snap.pending[4], snap.pending[5], snap.pending[6]
    assert (j4.nodes, j4.min_nodes, j4.max_nodes, j4.malleable) == (1, 1, 3, False)
    assert (j5.nodes, j5.min_nodes, j5.max_nodes) == (2, 0, 0) and (j6.nodes, j6.min_nodes, j6.max_nodes) == (1, 0, 0)
    run = snap.running[7]
    assert run.nodes == (0, 1, 2) and run.job.malleable and (run.job.min_nodes, run.job.max_nodes) == (1, 3)
    assert snap.can_reshape and snap.reshape_shrink_only


def test_a_backend_that_cannot_shrink_makes_the_guard_refuse_every_reshape():
    from wattsched.model.guard import plan_problems

    snap = capture_view("none").snapshot
    assert not snap.can_reshape
    assert "Reshape of job 7: this cluster cannot move a running job" in plan_problems(snap, Plan([Reshape(7, (0,))]))
    assert plan_problems(capture_view("shrink").snapshot, Plan([Reshape(7, (0, 1))])) == []


# --------------------------------------------------------------------------- acting, and acting once


class ShrinkSim(SimCluster):
    """The simulated cluster with Slurm's shrink: jobs are malleable; a shrink changes the nodes Slurm shows.

    ``crash_after_shrink`` makes the next shrink stop the daemon right after Slurm did it (a kill before the
    outcome is recorded)."""

    reshape = "shrink"
    crash_after_shrink = False

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.shrinks: list[tuple[int, tuple[str, ...]]] = []
        self.kept: dict[int, tuple[str, ...]] = {}  # the nodes a shrunk job keeps (the engine still has all)

    def read_state(self) -> ClusterState:
        state = super().read_state()
        jobs = []
        for j in state.jobs:
            kept = self.kept.get(j.job_id, j.nodes)
            jobs.append(dataclasses.replace(j, comment="wattsched:malleable", nodes=kept,
                                            node_count=len(kept) or j.node_count))
        return dataclasses.replace(state, jobs=tuple(jobs))

    def shrink(self, job_id, nodes):
        job = self._job(job_id)
        now = self.kept.get(job_id, job.nodes)
        if job.state != "RUNNING" or not set(nodes) <= set(now):
            raise SlurmCommandError(["sim", "shrink"], 1, "", "Invalid node name specified for job")
        self.kept[job_id] = tuple(n for n in now if n in set(nodes))
        self.shrinks.append((job_id, tuple(nodes)))
        if self.crash_after_shrink:
            raise KeyboardInterrupt("killed after the shrink")


class KeepFirstNode(BasePolicy):
    """Every running job onto its first node, at every call (a plan that has been applied comes again)."""

    name = "keep-first"

    def decide(self, snapshot, state=None) -> Plan:
        return Plan([Reshape(jid, run.nodes[:1]) for jid, run in sorted(snapshot.running.items())])


class Clock:
    t = 0.0

    def __call__(self) -> float:
        return self.t


def daemon(sim, tmp_path) -> Daemon:
    cfg = DaemonConfig(node_power=NODE_POWER, state_dir=tmp_path / "state", policy="easy", poll_interval_s=0.01)
    return Daemon(cfg, sim, metrics=DaemonMetrics(), notifier=Notifier(environ={}))


def test_a_shrink_is_applied_once_and_not_again_after_a_crash(tmp_path):
    import time

    sim = ShrinkSim([TraceJob(id=1, submit_s=0.0, runtime_s=1000.0, walltime_s=2000.0, procs=3, nodes=3,
                              user="u", mean_w=250.0, max_w=260.0, std_w=1.0)],
                    Platform.homogeneous_cluster(4, power=NodePowerModel(**NODE_POWER)), speedup=1.0,
                    clock=Clock(), epoch_s=float(int(time.time())))
    d = daemon(sim, tmp_path)
    d.cycle()  # easy starts the job on three nodes
    [nodes] = [s.nodes for s in sim.jobs.values() if s.state == "RUNNING"]
    assert len(nodes) == 3
    d.policy = KeepFirstNode()
    sim.crash_after_shrink = True
    with pytest.raises(KeyboardInterrupt):
        d.cycle()
    assert sim.shrinks == [(1, nodes[:1])] and [i.action for i in d.store.open_intents()] == ["shrink"]
    d.store.close()
    # restarted: the open intent is settled from what Slurm shows, and the plan's shrink is not sent again
    sim.crash_after_shrink = False
    d2 = daemon(sim, tmp_path)
    d2.policy = KeepFirstNode()
    d2.cycle()
    d2.cycle()
    assert sim.shrinks == [(1, nodes[:1])] and d2.store.open_intents() == []
    outcomes = list(d2.store.db.execute("SELECT action, outcome FROM intents WHERE action='shrink'"))
    assert outcomes == [("shrink", "reconciled:applied")]
    unchanged = [e for e in d2.store.audit_since(0) if e.action == "shrink" and e.outcome == "unchanged"]
    assert len(unchanged) == 2 and unchanged[0].reason == f"already on {nodes[0]}"
    d2.store.close()


def test_a_shrink_slurm_refuses_is_audited_as_failed(tmp_path):
    import time

    sim = ShrinkSim([TraceJob(id=1, submit_s=0.0, runtime_s=1000.0, walltime_s=2000.0, procs=2, nodes=2,
                              user="u", mean_w=250.0, max_w=260.0, std_w=1.0)],
                    Platform.homogeneous_cluster(4, power=NodePowerModel(**NODE_POWER)), speedup=1.0,
                    clock=Clock(), epoch_s=float(int(time.time())))
    d = daemon(sim, tmp_path)
    d.cycle()
    d.policy = KeepFirstNode()
    sim.shrink = lambda job_id, nodes: (_ for _ in ()).throw(
        SlurmCommandError(["scontrol", "update"], 1, "", "Invalid node name specified for job 1"))
    report = d.cycle()
    assert report.failed_actions == ["shrink 1"]
    [failed] = [e for e in d.store.audit_since(0) if e.action == "shrink"]
    assert failed.outcome == "failed" and "Invalid node name specified for job 1" in failed.reason
    d.store.close()


def test_resize_scripts_are_placed_without_following_a_link(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    target = tmp_path / "elsewhere"
    target.write_text("keep")
    sh, csh = resize.names(7)
    (work / sh).symlink_to(target)
    written = resize.place({sh: b"export SLURM_NODELIST=wst1\n", csh: b"setenv SLURM_NODELIST wst1\n"},
                           str(work), 0, 0, 7)
    assert written == [str(work / sh), str(work / csh)]
    assert target.read_text() == "keep" and not (work / sh).is_symlink()
    assert (work / sh).read_text() == "export SLURM_NODELIST=wst1\n"
    assert resize.place({sh: b""}, str(tmp_path / "gone"), 0, 0, 7) == []
