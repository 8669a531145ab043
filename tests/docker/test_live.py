"""The daemon acting on the compose cluster: `deploy/docker/up --live` with a test config."""

from __future__ import annotations

import uuid

import pytest
import yaml

from wattsched.daemon.slurm.backend import MARKER

from .conftest import ROOT, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture
def live_service(docker_cluster, tmp_path):
    """The wattsched service restarted live with a one-second cycle; back to dry-run afterwards."""
    state_dir = f"/var/lib/wattsched/live-{uuid.uuid4().hex[:8]}"
    config = tmp_path / "wattsched.yaml"
    config.write_text(yaml.safe_dump({
        "kind": "daemon", "policy": "easy", "gate": "daemon", "poll_interval_s": 1.0, "start_timeout_cycles": 10,
        "partitions": ["normal"], "state_dir": state_dir, "on_stop": "release",
        "node_power": {"idle_w": 95.0, "busy_w": 190.0, "off_w": 10.0},
        "slurm": {"backend": "cli", "conf": "/etc/slurm/slurm.conf", "timeout_s": 10, "retries": 1},
        "metrics": {"port": 9817, "address": "0.0.0.0"},
    }))
    config.chmod(0o644)
    c = docker_cluster
    c.up("--live", config=config)
    for node in ("c1", "c2"):  # nothing can start until the test says so
        c.ctl("scontrol", "update", f"nodename={node}", "state=drain", "reason=wattsched-test")
    try:
        yield c, state_dir
    finally:
        c.ctl("scancel", "--full", "-u", "root", check=False)
        for node in ("c1", "c2"):
            c.ctl("scontrol", "update", f"nodename={node}", "state=resume", check=False)
        c.up()  # the service back to its default: dry-run


def test_live_daemon_holds_new_jobs_and_starts_them_pinned_to_its_nodes(live_service):
    c, state_dir = live_service
    ids = [c.submit(nodes=n, seconds=3) for n in (1, 2, 1)]
    # the daemon's gate holds them, marked as its own
    wait_for(lambda: all(c.jobs()[j].held and MARKER in c.jobs()[j].admin_comment.split() for j in ids), 60,
             "the daemon to hold the new jobs")
    for node in ("c1", "c2"):
        c.ctl("scontrol", "update", f"nodename={node}", "state=resume")
    wait_for(lambda: not any(j in c.active() for j in ids), 180, "all jobs to finish")
    done = c.jobs()
    for j in ids:
        job = done[j]
        assert job.state == "COMPLETED", (j, job.state)
        assert job.required_nodes and set(job.nodes) == set(job.required_nodes), (j, job.nodes, job.required_nodes)
    rows = c.audit(state_dir)
    starts = [int(r["target"]) for r in rows if r["action"] == "start" and r["outcome"] == "applied"]
    confirmed = {int(r["target"]): r["outcome"] for r in rows if r["action"] == "started"}
    assert sorted(starts) == sorted(ids), "each job started by the daemon, once"
    assert confirmed == {j: "confirmed" for j in ids}, confirmed  # and where it chose
    assert all(r["dry_run"] == 0 for r in rows)
    # Slurm's accounting agrees on where each job ran
    for j in ids:
        ran = c.ctl("sacct", "-j", str(j), "-X", "-n", "-P", "-o", "NodeList").strip()
        assert ran and ran.replace("c[1-2]", "c1,c2") in (",".join(done[j].nodes), done[j].nodes[0]), ran


def test_requeue_through_the_daemons_backend_reruns_the_same_job(live_service):
    c, _ = live_service
    for node in ("c1", "c2"):
        c.ctl("scontrol", "update", f"nodename={node}", "state=resume")
    jid = c.submit(seconds=300)
    wait_for(lambda: c.jobs()[jid].state == "RUNNING", 90, "the daemon to start the job")
    # the very backend object the daemon's cycle uses for an Evict with requeue
    c.python_in("wattsched", "from wattsched.daemon.slurm.cli import SlurmCLI; "
                f"SlurmCLI(conf='/etc/slurm/slurm.conf').requeue({jid})")
    job = wait_for(lambda: (j := c.jobs()[jid]).state == "PENDING" and j, 30, "the job back in the queue")
    assert job.restart_count == 1 and not job.nodes
    states = c.ctl("sacct", "-j", str(jid), "-D", "-X", "-n", "-P", "-o", "State").split()
    assert "REQUEUED" in states, states
    assert str(ROOT)  # the service runs this checkout
