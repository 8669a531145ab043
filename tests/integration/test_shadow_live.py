"""Shadow mode on a real Slurm (deploy/testcluster): record a burst live, replay it, kill the recorder mid-cycle."""

from __future__ import annotations

import json
import random
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from wattsched.daemon.shadow import read_record

from .conftest import rows, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

RAPL = 'sum by (node) (rate(node_rapl_package_joules_total{job="node"}[10s]))'

# Sizes on the 4 exclusive nodes such that a blocked head job always needs every node that frees up before it
# can start (or fits beside the job before it): with one time limit for all, no backfill is possible, so Slurm's
# own schedule is first come, first served, and so is EASY's on the same jobs.
BURST = (2, 2, 4, 1, 3, 4, 2, 2, 4, 3, 1, 4)


def shadow_config(daemon_config, cluster, **extra):
    return daemon_config(policy="easy", shadow=True, telemetry={
        "source": "prometheus", "url": cluster.prometheus, "query": RAPL, "node_label": "node", "max_age_s": 30,
        "timeout_s": 5}, **extra)


def wattsched(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "wattsched", *args], capture_output=True, text=True, timeout=300)


def recorded_cycles(db: Path) -> int:
    found = rows(db, "SELECT COUNT(*) FROM shadow_cycles")
    return found[0][0] if found else 0


def test_shadow_replay_reproduces_slurms_order_and_another_policy_differs(cluster, daemon_config, daemon,
                                                                           tmp_path):
    config = shadow_config(daemon_config, cluster)
    db = tmp_path / "state" / "state.db"
    d = daemon(config, "--shadow")
    wait_for(lambda: recorded_cycles(db) >= 2, 60, "the first shadow cycles")
    ids = []
    for n in BURST:
        ids.append(cluster.submit(nodes=n, seconds=2, time_limit_min=1, user="alice"))
        time.sleep(0.2)
    wait_for(lambda: not any(j in cluster.active() for j in ids), 240, "the burst to finish")
    ended = lambda: {r[0] for r in rows(db, "SELECT job_id FROM shadow_jobs WHERE event='end'")}  # noqa: E731
    wait_for(lambda: set(ids) <= ended(), 30, "every end recorded")
    assert d.alive()
    # shadow mode applied nothing: no heartbeat, no holds, every audit row a dry run
    assert not rows(db, "SELECT * FROM holds")
    assert all(r[0] == 1 for r in rows(db, "SELECT dry_run FROM audit"))

    status = wattsched("status", "-c", str(config))
    assert status.returncode == 0, status.stderr
    line = next(ln for ln in status.stdout.splitlines() if ln.startswith("shadow record:"))
    # the burst, and any job of an earlier test that Slurm still lists (MinJobAge) when the record begins
    recorded = re.search(r"(\d+) jobs", line)
    assert recorded and int(recorded.group(1)) >= len(ids) and "cycles" in line and "KiB" in line, line
    assert d.stop() == 0

    # the live order as Slurm ran it, from Slurm's own start times in the record
    con = sqlite3.connect(db)
    record = read_record(con, db)
    con.close()
    starts = {j: next(e.time for e in ev if e.event == "start") for j, ev in record.jobs.items() if j in ids}
    live_order = sorted(ids, key=lambda j: (starts[j], j))
    assert live_order == ids, "Slurm ran the burst first come, first served"
    assert any(c.power for c in record.cycles), "measured node power was recorded"

    same = tmp_path / "replay-easy"
    out = wattsched("shadow", "replay", "-c", str(config), "--since", "1h", "--no-report", "--out", str(same))
    assert out.returncode == 0, out.stderr
    side = json.loads((same / "shadow.json").read_text())
    assert side["policy"] == "easy"
    assert side["start_order"]["live"] == ids
    assert side["start_order"]["replay"] == ids, side["start_order"]
    assert side["live"]["n_jobs"] == side["replay"]["n_jobs"] == len(ids)
    assert side["live"]["energy_j"] and side["replay"]["energy_j"]
    assert (same / "summary.json").exists() and (same / "shadow.md").exists()
    assert "start order: 12 of 12 jobs in the same position" in out.stdout

    other = tmp_path / "replay-saf"
    out = wattsched("shadow", "replay", "-c", str(config), "--since", "1h", "--policy", "easy", "--param",
                    "order=saf", "--out", str(other))
    assert out.returncode == 0, out.stderr
    side2 = json.loads((other / "shadow.json").read_text())
    assert side2["start_order"]["replay"] != ids, "smallest area first serves the burst in another order"
    assert sorted(side2["start_order"]["replay"]) == sorted(ids), "and starts every job"
    summary = json.loads((other / "summary.json").read_text())["summary"]
    assert summary["jobs_completed"] == len(ids)
    for name in ("report.html", "jobs.csv", "timeline.csv", "power.png", "shadow-trace.csv", "shadow.md"):
        assert (other / name).exists(), name


def test_kill_9_while_recording_loses_at_most_the_current_cycle(cluster, daemon_config, daemon, tmp_path):
    config = shadow_config(daemon_config, cluster, poll_interval_s=0.3)
    db = tmp_path / "state" / "state.db"
    d = daemon(config, "--shadow")
    wait_for(lambda: recorded_cycles(db) >= 1, 60, "the first shadow cycle")  # the record begins before the jobs
    ids = [cluster.submit(nodes=n, seconds=3, time_limit_min=1, user="alice") for n in (1, 2, 1, 4, 2)]
    rng = random.Random(7)
    for kill in range(3):
        if kill:
            d = daemon(config, "--shadow")
        before = recorded_cycles(db)
        wait_for(lambda b=before: recorded_cycles(db) >= b + 3, 60, "three more shadow cycles")
        time.sleep(rng.uniform(0.0, 0.6))
        d.stop(signal.SIGKILL)
        done = json.loads(rows(db, "SELECT value FROM kv WHERE key='cycle'")[0][0])  # the last completed cycle
        cycles = [r[0] for r in rows(db, "SELECT cycle FROM shadow_cycles ORDER BY id")]
        # every completed cycle is recorded; at most the one under way when killed is not (or is, whole)
        assert cycles[-1] in (done, done + 1), (cycles[-1], done)
        assert set(range(1, done + 1)) <= set(cycles)
        orphans = rows(db, "SELECT COUNT(*) FROM shadow_jobs WHERE cycle_id NOT IN (SELECT id FROM shadow_cycles)")
        assert orphans[0][0] == 0
        con = sqlite3.connect(db)
        read_record(con, db)  # reads whole, every row valid
        con.close()
    wait_for(lambda: not any(j in cluster.active() for j in ids), 120, "the jobs to finish")
    d = daemon(config, "--shadow")
    ended = lambda: {r[0] for r in rows(db, "SELECT job_id FROM shadow_jobs WHERE event='end'")}  # noqa: E731
    wait_for(lambda: set(ids) <= ended(), 30, "every end recorded after the restarts")
    d.stop()
    for jid in ids:  # one submission and one start each, across three kills and restarts
        events = [r[0] for r in rows(db, "SELECT event FROM shadow_jobs WHERE job_id=? ORDER BY id", (jid,))]
        assert events == ["submit", "start", "end"], (jid, events)
    out = wattsched("shadow", "replay", "-c", str(config), "--no-report", "--out", str(tmp_path / "replay"))
    assert out.returncode == 0, out.stderr
    assert json.loads((tmp_path / "replay" / "shadow.json").read_text())["replay"]["n_jobs"] == len(ids)
