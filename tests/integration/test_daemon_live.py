"""The daemon against a real multi-node Slurm (deploy/testcluster): every control path end to end."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from wattsched.daemon.slurm.backend import MARKER

from .conftest import rows, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def audit_rows(config_dir: Path, action: str | None = None) -> list[tuple]:
    path = config_dir / "state" / "state.db"
    if not path.exists():
        return []
    db = sqlite3.connect(path)
    try:
        sql = "SELECT action, target, outcome, reason, dry_run FROM audit"
        where, args = (" WHERE action=?", (action,)) if action else ("", ())
        rows = list(db.execute(sql + where + " ORDER BY id", args))
    except sqlite3.OperationalError as exc:  # the daemon has created the file but not its tables yet
        if "no such table" not in str(exc):
            raise
        rows = []
    finally:
        db.close()
    return rows


def test_easy_starts_jobs_only_through_the_daemon_on_its_nodes(cluster, daemon_config, daemon, tmp_path):
    d = daemon(daemon_config(policy="easy"))
    wait_for(lambda: cluster.heartbeat.read_text().strip().isdigit()
             and int(cluster.heartbeat.read_text()) > time.time() - 5, 30, "a fresh heartbeat")
    ids = [cluster.submit(nodes=n, seconds=4, user="alice") for n in (1, 2, 1, 3, 1)]
    # the gate holds every job at submission, marked as wattsched's
    first = cluster.jobs()
    for jid in ids:
        job = first.get(jid)
        assert job is not None and (job.held or job.job_id in {s for s in first if first[s].state == "RUNNING"})
    wait_for(lambda: not any(j in cluster.active() for j in ids), 120, "all jobs to finish")
    assert d.alive()
    starts = {int(t): r for a, t, o, r, _ in audit_rows(tmp_path, "start") if o == "applied"}
    confirmed = {int(t): (o, r) for a, t, o, r, _ in audit_rows(tmp_path, "started")}
    assert set(starts) == set(ids), "every job was started by the daemon, once"
    assert set(confirmed) == set(ids)
    assert all(o == "confirmed" for o, _ in confirmed.values()), confirmed  # on the nodes it chose
    assert "mismatch" not in {o for o, _ in confirmed.values()}


def test_user_cannot_release_a_gated_job(cluster):
    cluster.fresh_heartbeat()
    jid = cluster.submit(user="alice")
    job = cluster.jobs()[jid]
    assert job.held and MARKER in job.admin_comment.split()
    proc = cluster.run("scontrol", "release", str(jid), user="alice", check=False)
    assert proc.returncode != 0
    assert cluster.jobs()[jid].held
    cluster.run("scontrol", "release", str(jid))  # root (the daemon's identity) may
    assert not cluster.jobs()[jid].held


@pytest.fixture
def only_batch_gated(cluster):
    """The gate manages ``batch`` only (``shared`` is left to Slurm) for the test; restored afterwards."""
    conf = cluster.dir / "etc" / "wattsched-gate.conf"
    before = conf.read_text()
    lines = [line for line in before.splitlines() if not line.startswith("partitions")]
    conf.write_text("\n".join([*lines, "partitions = batch"]) + "\n")  # re-read at every submission and update
    yield cluster
    conf.write_text(before)


def _stays_held(cluster, jid: int, seconds: float = 2.0) -> None:
    """The job is still pending and held after ``seconds`` (Slurm starts a released job within a second here)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        job = cluster.jobs()[jid]
        assert job.state == "PENDING" and job.held, (job.state, job.priority, job.reason)
        time.sleep(0.2)


def test_a_job_submitted_held_is_gated_and_its_user_cannot_release_it(cluster, daemon_config, daemon, tmp_path):
    # the daemon is stopped but its heartbeat is fresh: the gate holds everything
    cluster.fresh_heartbeat()
    jid = cluster.submit(seconds=2, user="alice", extra=("--hold",))
    job = cluster.jobs()[jid]
    assert job.held and MARKER in job.admin_comment.split()  # gated although held by its user
    proc = cluster.run("scontrol", "release", str(jid), user="alice", check=False)
    assert proc.returncode != 0 and "held state" in proc.stderr
    _stays_held(cluster, jid)
    # the daemon takes it as its own and starts it
    daemon(daemon_config(policy="easy"))
    wait_for(lambda: jid not in cluster.active(), 60, "the daemon to start the job and the job to finish")
    assert [int(t) for _, t, o, _, _ in audit_rows(tmp_path, "start") if o == "applied"] == [jid]


def test_a_job_moved_into_a_managed_partition_is_held(only_batch_gated, daemon_config, daemon, tmp_path):
    cluster = only_batch_gated
    cluster.fresh_heartbeat()
    jid = cluster.submit(seconds=2, user="alice", extra=("--hold", "-p", "shared"))  # not managed: not gated
    job = cluster.jobs()[jid]
    assert job.held and MARKER not in job.admin_comment.split()
    cluster.run("scontrol", "update", f"jobid={jid}", "partition=batch", user="alice")
    assert cluster.jobs()[jid].partition == "batch"
    proc = cluster.run("scontrol", "release", str(jid), user="alice", check=False)
    assert proc.returncode != 0 and "held state" in proc.stderr
    _stays_held(cluster, jid)
    # a job that was not held is held by the move itself
    free = cluster.submit(seconds=2, user="alice", extra=("-p", "shared", "--begin", "now+600"))
    cluster.run("scontrol", "update", f"jobid={free}", "partition=batch", user="alice")
    assert cluster.jobs()[free].held
    assert cluster.run("scontrol", "release", str(free), user="alice", check=False).returncode != 0
    cluster.run("scontrol", "update", f"jobid={free}", "starttime=now", user="alice")
    _stays_held(cluster, free)
    # the daemon takes both holds over (marks them) and starts the jobs
    daemon(daemon_config(policy="easy"))
    wait_for(lambda: not {jid, free} & set(cluster.active()), 60, "the daemon to start both jobs and them to finish")
    held = {int(t) for _, t, o, _, _ in audit_rows(tmp_path, "hold") if o == "applied"}
    started = {int(t) for _, t, o, _, _ in audit_rows(tmp_path, "start") if o == "applied"}
    assert {jid, free} <= held and started == {jid, free}


def test_stale_heartbeat_opens_the_gate(cluster):
    cluster.stale_heartbeat()
    open_job = cluster.submit()
    assert not cluster.jobs()[open_job].held
    wait_for(lambda: cluster.jobs()[open_job].state in ("RUNNING", "COMPLETED"), 30,
             "Slurm to start the job itself")
    cluster.fresh_heartbeat()
    gated = cluster.submit()
    assert cluster.jobs()[gated].held
    cluster.heartbeat.unlink()  # no heartbeat at all: open too
    jid = cluster.submit()
    assert not cluster.jobs()[jid].held


def test_power_aware_policy_keeps_the_running_set_within_the_cap(cluster, daemon_config, daemon, tmp_path):
    # 4 nodes, idle 100 W, busy 300 W: 400 W + 200 W per busy node; a 800 W cap allows 2 busy nodes
    d = daemon(daemon_config(policy="easy-pc", params={"check": "max"}, cap_w=800))
    cluster.fresh_heartbeat()
    ids = [cluster.submit(nodes=1, seconds=3) for _ in range(5)]
    most = 0
    deadline = time.monotonic() + 120
    while any(j in cluster.active() for j in ids):
        running = sum(1 for j in cluster.jobs().values() if j.state == "RUNNING")
        most = max(most, running)
        assert running <= 2, f"{running} jobs running under a cap that allows 2"
        assert time.monotonic() < deadline, "jobs did not finish"
        time.sleep(0.3)
    assert most == 2, "the cap is used, not just respected"
    assert d.alive()
    assert {int(t) for _, t, o, _, _ in audit_rows(tmp_path, "start") if o == "applied"} == set(ids)


def _slurm_view(cluster) -> dict:
    jobs = {jid: (j.state, j.priority, j.reason, j.required_nodes, j.admin_comment, j.nodes)
            for jid, j in cluster.jobs().items()}
    nodes = {n: (s.state, sorted(s.flags)) for n, s in cluster.node_states().items()}
    return {"jobs": jobs, "nodes": nodes}


def test_dry_run_leaves_slurm_untouched(cluster, daemon_config, daemon, tmp_path):
    cluster.fresh_heartbeat()
    gated = [cluster.submit(nodes=n, seconds=30) for n in (1, 2, 4)]
    cluster.stale_heartbeat()
    admin = cluster.submit(nodes=1, extra=("--hold",))
    cluster.run("scontrol", "hold", str(admin))  # an administrator's hold (JobHeldAdmin): never ours
    before = _slurm_view(cluster)
    assert all(before["jobs"][j][1] == 0 for j in gated)
    d = daemon(daemon_config(policy="easy", dry_run=True))
    wait_for(lambda: len(audit_rows(tmp_path, "start")) >= 2, 30, "dry-run decisions")
    time.sleep(2)
    d.stop()
    after = _slurm_view(cluster)
    assert after == before
    rows = audit_rows(tmp_path, "start")
    assert rows and all(r[2] == "dry-run" and r[4] == 1 for r in rows)
    assert {int(r[1]) for r in rows} <= set(gated) and admin not in {int(r[1]) for r in rows}
    assert int(cluster.heartbeat.read_text()) < time.time() - 600, "dry-run does not refresh the heartbeat"


def _slow_release_wrappers(tmp_path: Path, delay_s: float) -> Path:
    """Slurm commands as the daemon runs them, except that ``scontrol release`` first waits ``delay_s``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for cmd in ("squeue", "sinfo", "scancel"):
        (bin_dir / cmd).symlink_to(subprocess.run(["which", cmd], capture_output=True, text=True).stdout.strip())
    real = subprocess.run(["which", "scontrol"], capture_output=True, text=True).stdout.strip()
    script = bin_dir / "scontrol"
    script.write_text(f'#!/bin/sh\n[ "$1" = release ] && sleep {delay_s}\nexec {real} "$@"\n')
    script.chmod(0o755)
    return bin_dir


def test_kill_9_mid_cycle_then_restart_is_consistent(cluster, daemon_config, daemon, tmp_path):
    bin_dir = _slow_release_wrappers(tmp_path, 3.0)
    config = daemon_config(policy="easy", slurm={"bin_dir": str(bin_dir)})
    cluster.fresh_heartbeat()
    ids = [cluster.submit(nodes=1, seconds=3) for _ in range(3)]
    d = daemon(config)
    db = tmp_path / "state" / "state.db"
    # the daemon has written its intent to start a job and is inside `scontrol release` (its store may exist
    # before its tables do: rows() reads none then)
    wait_for(lambda: rows(db, "SELECT 1 FROM intents WHERE action='start' AND outcome='pending'"),
             30, "a start in flight")
    d.stop(signal.SIGKILL)
    in_flight = [int(r[0]) for r in rows(db, "SELECT target FROM intents WHERE outcome='pending'")]
    assert in_flight
    # dead daemon: the job it was releasing is pinned but still held; nothing is lost
    jobs = cluster.jobs()
    assert all(j in jobs for j in ids)
    d2 = daemon(daemon_config(policy="easy"))  # restart without the slow wrappers
    wait_for(lambda: not any(j in cluster.active() for j in ids), 90, "all jobs to run and finish")
    assert d2.alive()
    intents = rows(db, "SELECT action, target, outcome FROM intents")
    assert not [i for i in intents if i[2] == "pending"], intents
    assert any(i[2].startswith("reconciled:") for i in intents), intents
    starts = [int(t) for _, t, o, _, _ in audit_rows(tmp_path, "start") if o == "applied"]
    confirmed = [int(t) for _, t, o, _, _ in audit_rows(tmp_path, "started") if o == "confirmed"]
    # each job ran exactly once (Slurm never ran a job twice: none was requeued)
    assert sorted(set(confirmed)) == sorted(ids) and len(confirmed) == len(ids)
    assert set(starts) == set(ids)


def test_restart_of_slurmctld_under_the_daemon(cluster, daemon_config, daemon, tmp_path):
    d = daemon(daemon_config(policy="easy"))
    cluster.fresh_heartbeat()
    pidfile = cluster.dir / "run" / "slurmctld.pid"
    pid = int(pidfile.read_text())
    os.kill(pid, signal.SIGTERM)
    wait_for(lambda: not Path(f"/proc/{pid}").exists(), 30, "slurmctld to stop")
    # a daemon slow to start on a loaded machine has its first cycles after the stop: wait until one has failed
    wait_for(lambda: "failed" in d.text(), 60, "a failed cycle to be logged")
    assert d.alive()
    subprocess.run(["slurmctld", "-f", str(cluster.conf)], env=cluster.env, check=True, timeout=30)
    wait_for(lambda: cluster.run("scontrol", "ping", check=False).returncode == 0, 60, "slurmctld back")
    jid = cluster.submit(seconds=2)
    wait_for(lambda: jid not in cluster.active(), 60, "the job submitted after the restart to run")
    assert d.alive()
    assert any(int(t) == jid for _, t, o, _, _ in audit_rows(tmp_path, "start") if o == "applied")
    assert "failed" in d.text() and "Traceback" not in d.text()


def test_bad_config_is_refused_with_file_and_key(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: daemon\npolicy: easy\npoll_interval_s: -3\nslurm:\n  backend: cli\n  tiemout_s: 3\n")
    for args in (["check-config", str(bad)], ["daemon", "-c", str(bad)]):
        proc = subprocess.run([sys.executable, "-m", "wattsched", *args], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2
        assert f"{bad}" in proc.stderr and "poll_interval_s" in proc.stderr and "slurm.tiemout_s" in proc.stderr
        assert "Traceback" not in proc.stderr


def test_unreachable_slurmctld_and_garbage_output_do_not_kill_the_daemon(cluster, daemon_config, daemon, tmp_path):
    # a slurm.conf pointing at a port nobody listens on
    conf = tmp_path / "unreachable.conf"
    conf.write_text(cluster.conf.read_text().replace("SlurmctldPort=6917", "SlurmctldPort=6999"))
    d = daemon(daemon_config(slurm={"conf": str(conf), "timeout_s": 5, "retries": 0}))
    wait_for(lambda: d.text().count("failed") >= 2, 60, "failed cycles to be logged")
    assert d.alive()
    d.stop()
    # squeue answering garbage: the error names the command and the daemon goes on
    bin_dir = tmp_path / "garbage"
    bin_dir.mkdir()
    for cmd in ("sinfo", "scontrol", "scancel"):
        (bin_dir / cmd).symlink_to(subprocess.run(["which", cmd], capture_output=True, text=True).stdout.strip())
    (bin_dir / "squeue").write_text("#!/bin/sh\necho '{\"jobs\": [{\"job_id\": \"x'\n")
    (bin_dir / "squeue").chmod(0o755)
    log = tmp_path / "daemon.log"
    offset = len(log.read_text())
    d2 = daemon(daemon_config(slurm={"bin_dir": str(bin_dir), "output": "json"}))
    wait_for(lambda: "squeue --json" in log.read_text()[offset:], 30, "the parse error to be logged")
    time.sleep(2)
    assert d2.alive()
    assert "Traceback" not in log.read_text()[offset:]


def test_a_released_job_slurm_does_not_start_is_held_again(cluster, daemon_config, daemon, tmp_path):
    # Slurm is told to run the job on a drained node (the wrapper swaps the daemon's choice), so it never starts
    cluster.run("scontrol", "update", "nodename=wst4", "state=drain", "reason=wattsched test")
    real = subprocess.run(["which", "scontrol"], capture_output=True, text=True).stdout.strip()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for cmd in ("squeue", "sinfo", "scancel"):
        (bin_dir / cmd).symlink_to(subprocess.run(["which", cmd], capture_output=True, text=True).stdout.strip())
    (bin_dir / "scontrol").write_text(
        "#!/bin/bash\nargs=()\nfor a in \"$@\"; do\n"
        "  case \"$a\" in ReqNodeList=*) args+=(ReqNodeList=wst4) ;; *) args+=(\"$a\") ;; esac\n"
        f"done\nexec {real} \"${{args[@]}}\"\n")
    (bin_dir / "scontrol").chmod(0o755)
    daemon(daemon_config(policy="easy", start_timeout_cycles=2, slurm={"bin_dir": str(bin_dir)}))
    cluster.fresh_heartbeat()
    jid = cluster.submit()
    wait_for(lambda: any(int(t) == jid and "not started by Slurm" in r
                         for _, t, _o, r, _ in audit_rows(tmp_path, "hold")), 60, "the job to be held again")
    job = cluster.jobs()[jid]
    assert job.state == "PENDING"
    assert [r for _, t, o, r, _ in audit_rows(tmp_path, "started") if int(t) == jid] == []
