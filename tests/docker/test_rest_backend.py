"""The slurmrestd backend against the compose cluster's slurmrestd (JWT from `scontrol token`).

Debian bookworm's slurmrestd 22.05 (REST v0.0.38) reads and cancels; the last
test brings the same compose file up on Debian trixie's Slurm 24.11 (v0.0.42),
where the daemon off the head node holds, pins and releases through REST.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
import yaml

from wattsched.daemon.slurm.backend import MARKER
from wattsched.daemon.slurm.rest import SlurmREST, SlurmRESTError

from .conftest import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CLI_STATE = ("from wattsched.daemon.slurm.cli import SlurmCLI; s = SlurmCLI(conf='/etc/slurm/slurm.conf')"
             ".read_state(); print(repr((s.jobs, s.nodes)))")


def _stable_queue(c) -> tuple[int, int]:
    running = c.submit(seconds=300, extra=("-w", "c1"))
    wait_for(lambda: c.jobs()[running].state == "RUNNING", 60, "the job to start")
    held = c.submit(seconds=30, extra=("--hold",))
    c.ctl("scontrol", "update", f"jobid={held}", f"AdminComment={MARKER}")
    return running, held


def test_rest_reads_the_same_records_as_the_cli_backend(docker_cluster):
    c = docker_cluster
    running, held = _stable_queue(c)
    rest = SlurmREST(c.rest_url, c.token_file)
    state = rest.read_state()
    assert rest.version() == "0.0.38" and state.version.startswith("22.05")
    # the cli backend, as the wattsched service runs it, at the same moment
    assert repr((state.jobs, state.nodes)) == c.python_in("wattsched", CLI_STATE).strip()
    jobs = {j.job_id: j for j in state.jobs}
    assert jobs[running].state == "RUNNING" and jobs[running].nodes == ("c1",)
    assert jobs[held].held and jobs[held].admin_comment == MARKER


def test_rest_on_22_05_cancels_and_refuses_what_its_api_cannot_do(docker_cluster):
    c = docker_cluster
    running, held = _stable_queue(c)
    rest = SlurmREST(c.rest_url, c.token_file)
    before = c.jobs()[held]
    with pytest.raises(SlurmRESTError, match="cannot pin a job to nodes"):
        rest.release(held, ["c2"], MARKER)
    assert c.jobs()[held] == before
    rest.cancel(running)
    wait_for(lambda: c.jobs()[running].state == "CANCELLED", 30, "the job to be cancelled")
    with pytest.raises(SlurmRESTError, match=r"GET http://.*/slurm/v0.0.38/job/999999: HTTP 500: .*"):
        rest.request("GET", "/slurm/v0.0.38/job/999999")


def test_daemon_off_the_head_node_in_dry_run_through_rest(docker_cluster, tmp_path):
    c = docker_cluster
    busy = [c.submit(seconds=300, extra=("--exclusive",)) for _ in range(2)]
    wait_for(lambda: all(c.jobs()[j].state == "RUNNING" for j in busy), 60, "both nodes busy")
    waiting = c.submit(seconds=30)
    token = tmp_path / "token"
    token.write_text(c.token_file.read_text())
    token.chmod(0o600)
    config = tmp_path / "wattsched.yaml"
    config.write_text(yaml.safe_dump({
        "kind": "daemon", "policy": "easy", "gate": "daemon", "poll_interval_s": 0.5, "partitions": ["normal"],
        "state_dir": str(tmp_path / "state"), "metrics": {"port": 0},
        # the docker network is internal to this machine: plain HTTP is a choice the site makes, said in the config
        "slurm": {"backend": "rest", "url": c.rest_url, "token_file": str(token), "allow_insecure_http": True}}))
    proc = subprocess.run([sys.executable, "-m", "wattsched", "-v", "daemon", "-c", str(config), "--dry-run",
                           "--cycles", "3"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "backend rest" in proc.stderr and c.token_file.read_text().strip() not in proc.stderr + proc.stdout
    audit = subprocess.run([sys.executable, "-m", "wattsched", "audit", "--state-dir", str(tmp_path / "state"),
                            "--since", "1h"], capture_output=True, text=True, timeout=60).stdout
    assert str(waiting) in audit and "dry-run" in audit
    assert not c.jobs()[waiting].held


def test_live_daemon_through_rest_on_slurm_24_11(docker_session, tmp_path):
    """Same compose file, Debian trixie's image: hold, pin and release through slurmrestd v0.0.42."""
    c = docker_session
    c.down("--keep-image")
    c.up(suite="trixie")
    t0 = time.monotonic()
    c.reset()
    token = tmp_path / "token"
    token.write_text(c.token_file.read_text())
    token.chmod(0o600)
    rest = SlurmREST(c.rest_url, token)
    assert rest.version() == "0.0.42" and rest.read_state().version.startswith("24.11")
    for node in ("c1", "c2"):
        c.ctl("scontrol", "update", f"nodename={node}", "state=drain", "reason=wattsched-test")
    config = tmp_path / "wattsched.yaml"
    config.write_text(yaml.safe_dump({
        "kind": "daemon", "policy": "easy", "gate": "daemon", "poll_interval_s": 1.0, "start_timeout_cycles": 10,
        "partitions": ["normal"], "state_dir": str(tmp_path / "state"), "metrics": {"port": 0},
        "node_power": {"idle_w": 95.0, "busy_w": 190.0, "off_w": 10.0},
        "slurm": {"backend": "rest", "url": c.rest_url, "token_file": str(token), "timeout_s": 10,
                  "allow_insecure_http": True}}))
    log = open(tmp_path / "daemon.log", "w")  # noqa: SIM115
    daemon = subprocess.Popen([sys.executable, "-m", "wattsched", "-v", "daemon", "-c", str(config)],
                              stdout=log, stderr=subprocess.STDOUT)
    try:
        ids = [c.submit(nodes=n, seconds=3) for n in (1, 2, 1)]
        wait_for(lambda: all(c.jobs()[j].held and MARKER in c.jobs()[j].admin_comment.split() for j in ids), 60,
                 "the daemon to hold the new jobs through REST")
        for node in ("c1", "c2"):
            c.ctl("scontrol", "update", f"nodename={node}", "state=resume")
        wait_for(lambda: not any(j in c.active() for j in ids), 180, "all jobs to finish")
        assert daemon.poll() is None, (tmp_path / "daemon.log").read_text()
    finally:
        daemon.terminate()
        daemon.wait(30)
        log.close()
    for j in ids:
        ran = c.ctl("sacct", "-j", str(j), "-X", "-n", "-P", "-o", "State,NodeList").strip()
        assert ran.startswith("COMPLETED|"), ran
    text = (tmp_path / "daemon.log").read_text()
    assert "backend rest" in text and token.read_text().strip() not in text
    import sqlite3

    rows = list(sqlite3.connect(tmp_path / "state" / "state.db").execute(
        "SELECT action, target, outcome FROM audit WHERE action IN ('start', 'started')"))
    assert sorted(int(t) for a, t, o in rows if a == "start" and o == "applied") == sorted(ids)
    assert {int(t): o for a, t, o in rows if a == "started"} == {j: "confirmed" for j in ids}
    assert time.monotonic() - t0 < 600
