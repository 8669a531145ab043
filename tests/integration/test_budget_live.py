"""An energy budget with opportunistic shutdown on the real test cluster: Slurm power saving, C_ea across kill -9."""

from __future__ import annotations

import json
import signal
import sqlite3
import time
from pathlib import Path

import pytest

from .conftest import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def policy_state(db: Path) -> dict:
    if not db.exists():
        return {}
    con = sqlite3.connect(db)
    try:
        found = list(con.execute("SELECT value FROM kv WHERE key='policy_state'"))
    except sqlite3.OperationalError:  # tables not created yet
        return {}
    finally:
        con.close()
    return json.loads(found[0][0])["state"] if found else {}


@pytest.fixture
def powered_cluster(cluster):
    """The cluster, with every node powered up and idle again afterwards (other tests expect that)."""
    yield cluster
    wait_for(lambda: cluster.power_up_all() and all(n.state == "IDLE" and not n.powered_off and not n.powering_up
                                                    for n in cluster.node_states().values()),
             180, "nodes powered up again", interval_s=2)


def test_budget_daemon_powers_idle_nodes_down_wakes_one_for_a_job_and_keeps_c_ea_across_kill_9(
        powered_cluster, daemon_config, daemon, tmp_path):
    cluster = powered_cluster
    now = time.time()
    budget = {"start_s": now - 60, "end_s": now + 3600, "energy_j": 1e7}
    rate_w = budget["energy_j"] / (budget["end_s"] - budget["start_s"])
    # One monitoring stage an hour: the restart below must carry C_ea on, not recompute it.
    path = daemon_config(policy="energy-bud", params={"shutdown": "always", "monitoring_period_s": 3600},
                         energy_budgets=[budget])
    db = tmp_path / "state" / "state.db"
    d = daemon(path)
    wait_for(lambda: all(n.powered_off for n in cluster.node_states().values()), 120,
             "Slurm to show every idle node powered down")
    # A job needs a node: the daemon powers one up and the job runs on it.
    job = cluster.submit(nodes=1, seconds=3)
    wait_for(lambda: (cluster.jobs().get(job) is not None and cluster.jobs()[job].state in ("RUNNING", "COMPLETED"))
             or job not in cluster.active(), 180, "the job to run on a powered-up node")
    powered = [n for n in cluster.node_states().values() if not n.powered_off]
    assert 1 <= len(powered) < len(cluster.nodes)  # one woken, the others still off
    # kill -9 in the middle of the window, then restart.
    before = wait_for(lambda: (s := policy_state(db)).get("window") and s, 30, "a saved C_ea")
    assert before["monitoring_stages"] == 1
    d.stop(signal.SIGKILL)
    time.sleep(2)
    daemon(path)
    after = wait_for(lambda: (s := policy_state(db)).get("last_call_s", 0) > before["last_call_s"] and s, 60,
                     "the restarted daemon's first decision")
    # Neither reset to a new stage nor granted twice: the counter goes on from the saved one.
    assert after["monitoring_stages"] == 1
    expected = before["c_ea_j"] + (rate_w - before["last_power_w"]) * (after["last_call_s"] - before["last_call_s"])
    assert after["c_ea_j"] == pytest.approx(expected, rel=1e-6)
