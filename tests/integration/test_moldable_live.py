"""Moldable and malleable jobs on the real test cluster (Slurm 22.05): the daemon as a process with a test policy
that emits what ``parm`` emits (SetNodeCap before Start, a Start on a count of a job's ``--nodes=MIN-MAX``
range, a Reshape of a running malleable job), node caps through the wattsched agents."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

from wattsched.daemon.slurm.hostlist import expand

from .conftest import cap_w, completed, cycle_no, rows, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))
from moldpolicy import install_entry_point  # noqa: E402


@pytest.fixture
def mold_daemon(agent_daemon, tmp_path):
    """Start the daemon with the mold-test policy and the agent actuator; the nodes are restored afterwards."""
    site = install_entry_point(tmp_path / "site")
    # the wattsched under test first (a source tree's, when PYTHONPATH names it), then the test policy
    path = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*path, str(TESTS), str(site)])}

    def start(params: dict, **config):
        return agent_daemon("mold-test", params, env=env, **config)

    return start


def show_job(cluster, jid: int) -> dict[str, str]:
    """``scontrol -o show job``'s keys that hold no spaces (node counts, node lists, times)."""
    out = cluster.run("scontrol", "-o", "show", "job", str(jid)).stdout
    return dict(re.findall(r"(\w+)=(\S*)", out))


def submit(cluster, *args: str, seconds: int = 60, workdir: Path | None = None) -> int:
    extra = ("--chdir", str(workdir)) if workdir is not None else ()
    out = cluster.run("sbatch", "--parsable", "-t", "2", "-o", "/dev/null", *extra, *args,
                      "--wrap", f"sleep {seconds}").stdout
    return int(out.strip().split(";")[0])


def test_a_moldable_job_runs_on_the_count_chosen_with_its_caps_set_first(cluster, mold_daemon, tmp_path):
    db = tmp_path / "state" / "state.db"
    cluster.fresh_heartbeat()  # the gate holds the job for the daemon
    jid = submit(cluster, "--nodes=1-3", seconds=20)
    assert show_job(cluster, jid)["NumNodes"] == "1-3"
    d = mold_daemon({"start_nodes": 2, "cap_w": 140.0})
    wait_for(lambda: show_job(cluster, jid)["JobState"] == "RUNNING", 60, "the moldable job to run")
    job = show_job(cluster, jid)
    assert job["NumNodes"] == "2" and job["NodeList"] == "wst[1-2]", job
    assert cap_w(cluster, "wst1") == pytest.approx(140.0) and cap_w(cluster, "wst2") == pytest.approx(140.0)
    completed(db)  # the release answered before the store recorded it
    audit = rows(db, "SELECT action, target, reason, outcome FROM audit WHERE action IN ('set_cap', 'start') "
                     "ORDER BY id")
    assert [(a, t, o) for a, t, _, o in audit[:3]] == [
        ("set_cap", "wst1", "applied"), ("set_cap", "wst2", "applied"), ("start", str(jid), "applied")]
    assert audit[2][2] == "on wst[1-2] (2 of 1-3 nodes)"
    assert d.alive()


def test_a_running_malleable_job_is_shrunk_and_its_dropped_node_freed(cluster, mold_daemon, tmp_path):
    db = tmp_path / "state" / "state.db"
    work = tmp_path / "work"
    work.mkdir()
    cluster.fresh_heartbeat()
    jid = submit(cluster, "-N", "3", "--comment=wattsched:malleable", workdir=work)
    d = mold_daemon({"shrink_to": 2})
    wait_for(lambda: show_job(cluster, jid)["NumNodes"] == "2", 60, "the job shrunk to 2 nodes")
    job = show_job(cluster, jid)
    assert job["JobState"] == "RUNNING" and job["NodeList"] == "wst[1-2]" and job["BatchHost"] == "wst1", job
    wait_for(lambda: cluster.node_states()["wst3"].state == "IDLE", 30, "the dropped node idle")
    assert {n: s.state for n, s in cluster.node_states().items()} == {
        "wst1": "ALLOCATED", "wst2": "ALLOCATED", "wst3": "IDLE", "wst4": "IDLE"}
    # the resize scripts for the job's shell, in its working directory, owned by its user
    script = work / f"slurm_job_{jid}_resize.sh"
    text = wait_for(lambda: script.is_file() and script.read_text(), 10, "the resize script")
    assert 'export SLURM_NODELIST="wst[1-2]"\n' in text and "export SLURM_JOB_NUM_NODES=2\n" in text, text
    assert 'setenv SLURM_NODELIST "wst[1-2]"' in (work / f"slurm_job_{jid}_resize.csh").read_text()
    shrinks = rows(db, "SELECT target, reason, outcome FROM audit WHERE action='shrink' AND outcome='applied'")
    assert shrinks == [(str(jid), "to wst[1-2] from wst[1-3]", "applied")]
    # the policy asks no more; a daemon restarted does not shrink it again
    d.stop()
    d2 = mold_daemon({"shrink_to": 2})
    first = cycle_no(db)
    wait_for(lambda: cycle_no(db) >= first + 3, 30, "three cycles of the restarted daemon")
    assert rows(db, "SELECT count(*) FROM audit WHERE action='shrink' AND outcome='applied'") == [(1,)]
    assert show_job(cluster, jid)["NumNodes"] == "2" and d2.alive()


def test_a_plan_that_grows_a_running_job_is_refused_live(cluster, mold_daemon, tmp_path):
    db = tmp_path / "state" / "state.db"
    cluster.fresh_heartbeat()
    jid = submit(cluster, "-N", "2", "--comment=wattsched:malleable")
    d = mold_daemon({"grow_by": 1})
    wait_for(lambda: show_job(cluster, jid)["JobState"] == "RUNNING", 60, "the job to run")
    held = show_job(cluster, jid)["NodeList"]
    sql = "SELECT reason FROM audit WHERE action='plan' AND outcome='rejected' ORDER BY id"
    before = len(rows(db, sql))
    rejected = wait_for(lambda: rows(db, sql)[before + 1:], 30, "the guard to refuse the growing plan")
    # the policy adds the lowest node the job does not hold (which depends on where it was started)
    added = re.search(rf"Reshape of job {jid} adds (wst\d): this cluster can only shrink a running job \(Slurm "
                      r"cannot give it nodes it does not hold\)", rejected[-1][0])
    assert added and added.group(1) not in expand(held), rejected
    assert "plan rejected by the guard" in d.text()
    job = show_job(cluster, jid)
    assert job["JobState"] == "RUNNING" and job["NumNodes"] == "2" and job["NodeList"] == held, job
