"""The reactive power-capping policies of Borghesi et al. 2018 on the real test cluster.

``simple``, ``dynshare`` and ``dvfs`` run in a ``wattsched daemon`` process
against the multi-node Slurm of deploy/testcluster; their node caps and
frequencies go out as munge-signed commands to the wattsched agents on the
nodes, whose fake RAPL/cpufreq sysfs trees the power emulator drives from what
Slurm runs (a job declares its node power with ``--comment=wattsched:power=W``
and draws at most its node's cap). Every setting is read back from the sysfs
tree and from the agent's ``/metrics``, and found in the daemon's audit log.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from wattsched.agent.sysfs import Sysfs

from .conftest import agent_metrics, cap_w, cycle_no, freq_hz, rows, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

GHZ = 1e9
NODE_POWER = {"idle_w": 100.0, "busy_w": 300.0, "off_w": 10.0, "cap_min_w": 50.0, "cap_max_w": 500.0,
              # the fake cpufreq's table: 1.2 to 2.4 GHz every 100 MHz
              "freq_levels_hz": [f * 1e8 for f in range(12, 25)]}
"""The daemon's model of the test cluster's nodes (the power emulator idles them at 100 W)."""


def audit(db: Path, action: str) -> list[tuple[str, str, str]]:
    return rows(db, "SELECT target, outcome, reason FROM audit WHERE action=? ORDER BY id", (action,))


def running_on(cluster, job_id: int) -> str | None:
    job = cluster.jobs().get(job_id)
    return job.nodes[0] if job is not None and job.state == "RUNNING" and job.nodes else None


def test_simple_even_splits_the_budget_evenly_as_node_caps_and_starts_jobs_regardless(cluster, agent_daemon, tmp_path):
    db = tmp_path / "state" / "state.db"
    d = agent_daemon("simple", {"allocation": "even"}, cap_w=800.0, node_power=NODE_POWER)
    cluster.fresh_heartbeat()
    # 400 W per node asked, far above the 200 W each node is left: EASY starts it anyway, RAPL holds it
    jid = cluster.submit(nodes=1, seconds=6, extra=("--comment=wattsched:power=400",))
    wait_for(lambda: all(abs(cap_w(cluster, n) - 200.0) < 0.01 for n in cluster.nodes), 60, "200 W on every node")
    node = wait_for(lambda: running_on(cluster, jid), 60, "the job to run")
    for n in cluster.nodes:
        assert agent_metrics(cluster, n)["wattsched_agent_rapl_power_limit_watts"] == pytest.approx(200.0)
    wait_for(lambda: jid not in cluster.active(), 60, "the job to end")
    # set once per node, and never again while nothing changes
    caps = audit(db, "set_cap")
    assert sorted((t, o) for t, o, _ in caps) == sorted((n, "applied") for n in cluster.nodes)
    assert all(r.startswith("200 W, decided by the policy") for _, _, r in caps), caps
    assert (str(jid), "applied") in [(t, o) for t, o, _ in audit(db, "start")]
    assert cap_w(cluster, node) == pytest.approx(200.0)
    assert d.alive()


def test_dynshare_moves_the_budget_from_a_light_jobs_node_to_a_heavy_jobs_node(cluster, agent_daemon, tmp_path):
    db = tmp_path / "state" / "state.db"
    budget = 1000.0
    # Node power measured by scraping the agents every cycle. A 2 s cycle reads a counter the
    # emulator moves every 0.1 s to within 5 %: a 10 % tolerance and 30 W of headroom keep a
    # node at its cap from being read as below it.
    d = agent_daemon("dynshare", {"at_cap_tolerance": 0.1, "headroom_w": 30.0}, cap_w=budget,
                     node_power=NODE_POWER, poll_interval_s=2.0,
                     telemetry={"source": "agents", "agent_url": "http://{address}:9818", "settle_s": 3.0})
    cluster.fresh_heartbeat()
    # the heavy job would draw 600 W per node: more than any cap it can get
    light = cluster.submit(nodes=1, seconds=90, extra=("--comment=wattsched:power=140",))
    heavy = cluster.submit(nodes=1, seconds=90, extra=("--comment=wattsched:power=600",))
    light_node = wait_for(lambda: running_on(cluster, light), 60, "the light job to run")
    heavy_node = wait_for(lambda: running_on(cluster, heavy), 60, "the heavy job to run")
    idle = [n for n in cluster.nodes if n not in (light_node, heavy_node)]

    most = 0.0

    def shared():
        nonlocal most
        caps = {n: cap_w(cluster, n) for n in cluster.nodes}
        most = max(most, sum(caps.values()))
        # the light node keeps its draw plus headroom, idle nodes theirs, the heavy node takes the rest
        # (570 W, clamped to its 500 W maximum)
        return (caps[heavy_node] >= 490.0 and caps[light_node] <= 200.0
                and all(caps[n] <= 150.0 for n in idle)) and caps

    caps = wait_for(shared, 75, "the budget moved to the heavy job's node", interval_s=0.3)
    assert caps[light_node] == pytest.approx(170.0, abs=20.0)
    # the shares hold over the next cycles, within the budget at every look
    at, n_sets = cycle_no(db), len(audit(db, "set_cap"))
    while cycle_no(db) < at + 5:
        assert shared(), {n: cap_w(cluster, n) for n in cluster.nodes}
        time.sleep(0.3)
    assert most <= budget + 1.0
    # and are not set again for the noise of measured power (at most once while the last move settles)
    assert len(audit(db, "set_cap")) - n_sets <= 1, audit(db, "set_cap")[n_sets:]
    # the agents report what their nodes hold
    for n in (light_node, heavy_node):
        assert agent_metrics(cluster, n)["wattsched_agent_rapl_power_limit_watts"] == pytest.approx(
            cap_w(cluster, n), abs=0.01)
    assert light in cluster.active() and heavy in cluster.active()
    # audited: both nodes started from the even split (250 W); then the light one gave and the heavy one took
    sets = {n: [float(r.split(" W")[0]) for t, o, r in audit(db, "set_cap") if t == n and o == "applied"]
            for n in (light_node, heavy_node)}
    assert sets[light_node][0] == sets[heavy_node][0] == pytest.approx(budget / len(cluster.nodes))
    assert min(sets[light_node]) < budget / len(cluster.nodes) < max(sets[heavy_node])
    assert all(o == "applied" for _, o, _ in audit(db, "set_cap"))
    assert d.alive()
    for jid in (light, heavy):
        cluster.run("scancel", str(jid))


def test_dvfs_starts_a_job_over_the_budget_at_a_lower_frequency_for_its_lifetime(cluster, agent_daemon, tmp_path):
    db = tmp_path / "state" / "state.db"
    # 4 idle nodes: 400 W; a job at full speed: +200 W on its node (300 W busy), over a 560 W budget.
    # At f / 2.4 GHz its node power is 300 W × f / 2.4 GHz (the cpu class: power as frequency), so
    # 2.0 GHz (250 W, +150 W) is the highest level that fits, for a 1.2× longer run.
    d = agent_daemon("dvfs", {}, cap_w=560.0, node_power=NODE_POWER, job_class="cpu")
    cluster.fresh_heartbeat()
    jid = cluster.submit(nodes=1, seconds=8)
    node = wait_for(lambda: running_on(cluster, jid), 60, "the job to run")
    ceilings, current = set(), set()
    while (job := cluster.jobs().get(jid)) is not None and job.state == "RUNNING":
        s = Sysfs(cluster.sysfs / node)
        current |= {int((p.path / "scaling_cur_freq").read_text()) * 1000.0 for p in s.cpufreq_policies()}
        ceilings.add((freq_hz(cluster, node),
                      agent_metrics(cluster, node)["wattsched_agent_cpu_scaling_max_frequency_hertz"]))
        time.sleep(0.5)
    # the whole time it ran, its node's ceiling was 2.0 GHz, and the governor ran it there (the
    # emulator sees a job up to 0.5 s after Slurm starts it: until then the node idles at 1.2 GHz)
    assert ceilings == {(2.0 * GHZ, 2.0 * GHZ)}
    assert 2.0 * GHZ in current and current <= {1.2 * GHZ, 2.0 * GHZ}
    assert all(freq_hz(cluster, n) == pytest.approx(2.4 * GHZ) for n in cluster.nodes if n != node)
    # after it, the node is back at its maximum
    wait_for(lambda: freq_hz(cluster, node) == pytest.approx(2.4 * GHZ), 30, "the frequency reset")
    # the agent writes the node before it answers; the daemon records the answer
    def both_applied():
        found = audit(db, "set_freq")
        return [(t, o) for t, o, _ in found] == [(node, "applied")] * 2 and found

    freqs = wait_for(both_applied, 10, "the reset audited")
    assert freqs[0][2].startswith("2.00 GHz") and f"job {jid} no longer runs here" in freqs[1][2], freqs
    starts = rows(db, "SELECT target, outcome FROM audit WHERE action IN ('set_freq', 'start') ORDER BY id")
    assert starts[:2] == [(node, "applied"), (str(jid), "applied")]  # the frequency before the release
    assert d.alive()
