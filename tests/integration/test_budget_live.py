"""An energy budget with opportunistic shutdown on the real test cluster: Slurm power saving, C_ea across kill -9."""

from __future__ import annotations

import json
import signal
import sqlite3
import time
from pathlib import Path

import pytest

from .conftest import DAEMON_METRICS_PORT, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]


RAPL = 'sum by (node) (rate(node_rapl_package_joules_total{job="node"}[10s]))'


def kv(db: Path, key: str) -> dict:
    """A value of the daemon's state store, or {} while there is none."""
    if not db.exists():
        return {}
    con = sqlite3.connect(db, timeout=5)
    try:
        found = list(con.execute("SELECT value FROM kv WHERE key=?", (key,)))
    except sqlite3.OperationalError:  # tables not created yet
        return {}
    finally:
        con.close()
    return json.loads(found[0][0]) if found else {}


def energy_range_j(sysfs: Path, nodes: list[str]) -> dict[str, float]:
    return {f"{node}/{pkg.name}": int((pkg / "max_energy_range_uj").read_text().split()[0]) / 1e6
            for node in nodes for pkg in (sysfs / node / "class" / "powercap").glob("intel-rapl:*")
            if pkg.name.count(":") == 1}


def counters_j(sysfs: Path, nodes: list[str]) -> dict[str, float]:
    return {f"{node}/{pkg.name}": int((pkg / "energy_uj").read_text().split()[0]) / 1e6
            for node in nodes for pkg in (sysfs / node / "class" / "powercap").glob("intel-rapl:*")
            if pkg.name.count(":") == 1}


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
    con = sqlite3.connect(db, timeout=5)
    try:  # a node being resumed is waking, not one more node to power up each cycle
        woken = [n for (n,) in con.execute("SELECT target FROM audit WHERE action='power_up'")]
    finally:
        con.close()
    assert len(woken) == 1, woken
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


def test_energy_the_daemon_counts_from_prometheus_agrees_with_the_emulated_nodes_within_5_percent(
        cluster, daemon_config, daemon, tmp_path):
    """Budget energy from the RAPL counters through node exporters and Prometheus, against the nodes' own counters.

    The emulator advances each node's fake RAPL counter by the power it draws (idle 100 W, a job's declared
    power); the node exporters export them and Prometheus rates them; the daemon integrates that power into
    the budget window. Both sides are read at the same cycles, from steady idle to steady idle, with jobs of
    declared power running in between.
    """
    from .test_telemetry_live import metric

    wait_for(lambda: len(r := cluster.prom_query(RAPL)) == 4 and all(float(x["value"][1]) > 90 for x in r), 90,
             "steady idle power of every node in Prometheus")
    now = time.time()
    budget = {"start_s": now - 60, "end_s": now + 3600, "energy_j": 1e9, "label": "live"}
    path = daemon_config(
        policy="energy-bud", energy_budgets=[budget], node_power={"idle_w": 100.0, "busy_w": 350.0, "off_w": 10.0},
        telemetry={"source": "prometheus", "url": cluster.prometheus, "query": RAPL, "node_label": "node",
                   "max_age_s": 30, "settle_s": 0},
        metrics={"port": DAEMON_METRICS_PORT},
    )
    db = tmp_path / "state" / "state.db"
    daemon(path)
    cluster.fresh_heartbeat()
    wraps = energy_range_j(cluster.sysfs, cluster.nodes)

    def reading():
        """At the daemon's next cycle: (its energy counted in the window, the nodes' counters)."""
        last = kv(db, "energy").get("last_s")
        energy = wait_for(lambda: (e := kv(db, "energy")).get("last_s", 0) != last and e.get("consumed") and e,
                          30, "a daemon cycle")
        return sum(energy["consumed"].values()), counters_j(cluster.sysfs, cluster.nodes)

    wait_for(lambda: metric(f"http://127.0.0.1:{DAEMON_METRICS_PORT}/metrics", "wattsched_energy_budget_source",
                            {"wattsched_energy_budget_source": "power"}) == 1.0, 60,
             "budget energy counted from measured power")
    time.sleep(5)
    daemon0, nodes0 = reading()
    ids = [cluster.submit(seconds=60, time_limit_min=3, extra=("--comment=wattsched:power=350",)) for _ in range(3)]
    wait_for(lambda: all(cluster.jobs()[i].state == "RUNNING" for i in ids), 60, "the three jobs running")
    wait_for(lambda: not (set(ids) & set(cluster.active())), 120, "the jobs to end")
    time.sleep(25)  # steady idle again, past the rate window
    daemon1, nodes1 = reading()
    assert metric(f"http://127.0.0.1:{DAEMON_METRICS_PORT}/metrics", "wattsched_energy_budget_source",
                  {"wattsched_energy_budget_source": "power"}) == 1.0
    truth = sum((nodes1[k] - nodes0[k]) % wraps[k] for k in nodes0)
    counted = daemon1 - daemon0
    print(f"energy over {len(ids)} jobs: counted by the daemon {counted:.0f} J, emulated {truth:.0f} J, "
          f"{100 * (counted / truth - 1):+.2f} %")
    # About 100 s: 4 nodes idle at 100 W and three 60-s jobs at 350 W: some 80 kJ.
    assert truth > 60_000, truth
    assert counted == pytest.approx(truth, rel=0.05), (counted, truth)
