"""``parm`` live on the real test cluster (Slurm 22.05): a moldable job of a PASS application is released on the
node count PARM chose, its nodes' RAPL limits set first through the agents, at the CPU level PARM chose."""

from __future__ import annotations

import re

import pytest
import yaml

from .conftest import cap_w, completed, rows, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

# The PARM testbed's node (38 W base, 18 W memory, CPU levels 30-55 W) on a budget that feeds two nodes at the
# top level but not three at the lowest (3 x 86 W = 258 W > 250 W): parm gives a leanmd job of 1-3 nodes two
# nodes at 55 W, the lowest level above leanmd's p_h (52 W).
PLATFORM = {
    "name": "parm-live", "budget_w": 250.0, "cpu_power_levels_w": [30, 32, 34, 39, 45, 55], "base_w": 38.0,
    "mem_w": 18.0,
    "node_groups": [{"name": "wst", "count": 4, "cores": 2, "prefix": "wst", "power": {
        "idle_w": 69.5, "busy_w": 116.0, "busy_min_w": 86.0, "off_w": 5.0, "cap_min_w": 86.0, "cap_max_w": 116.0}}],
}


def show_job(cluster, jid: int) -> dict[str, str]:
    out = cluster.run("scontrol", "-o", "show", "job", str(jid)).stdout
    return dict(re.findall(r"(\w+)=(\S*)", out))


def test_parm_releases_a_moldable_job_on_its_chosen_count_with_the_cpu_caps_set_first(cluster, agent_daemon,
                                                                                          tmp_path):
    platform = tmp_path / "platform.yaml"
    platform.write_text(yaml.safe_dump(PLATFORM))
    db = tmp_path / "state" / "state.db"
    cluster.fresh_heartbeat()  # the gate holds the job for the daemon
    out = cluster.run("sbatch", "--parsable", "-t", "2", "-o", "/dev/null", "--nodes=1-3",
                      "--comment=wattsched:app=leanmd", "--wrap", "sleep 20").stdout
    jid = int(out.strip().split(";")[0])
    d = agent_daemon("parm", {"version": "noSE", "count_idle": False}, platform=str(platform), node_power=None)
    wait_for(lambda: show_job(cluster, jid)["JobState"] == "RUNNING", 60, "the moldable job to run")
    job = show_job(cluster, jid)
    assert job["NumNodes"] == "2" and job["NodeList"] == "wst[1-2]", job
    # the node cap 38 + 18 + 55 = 111 W reaches RAPL as the packages' 55 W (base and memory are outside them)
    assert cap_w(cluster, "wst1") == pytest.approx(55.0) and cap_w(cluster, "wst2") == pytest.approx(55.0)
    completed(db)  # the release answered before the store recorded it
    audit = rows(db, "SELECT action, target, outcome FROM audit WHERE action IN ('set_cap', 'start') ORDER BY id")
    assert sorted(audit[:2]) == [("set_cap", "wst1", "applied"), ("set_cap", "wst2", "applied")], audit
    assert audit[2] == ("start", str(jid), "applied"), audit
    assert d.alive()
