"""The wattsched service of the compose cluster, as deploy/docker/up starts it: the daemon in dry-run."""

from __future__ import annotations

import time
import urllib.request

import pytest

from .conftest import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _slurm_view(cluster) -> dict:
    # Slurm's own pending reason flips between Priority and Resources; a hold's reason is what matters
    jobs = {jid: (j.state, j.priority, j.reason if j.held else "", j.required_nodes, j.admin_comment, j.nodes)
            for jid, j in cluster.jobs().items()}
    nodes = {n: (s.state, sorted(s.flags)) for n, s in cluster.node_states().items()}
    return {"jobs": jobs, "nodes": nodes}


def test_dry_run_service_audits_decisions_and_changes_nothing_in_slurm(docker_cluster):
    c = docker_cluster
    # both nodes busy with long jobs, so the next ones wait in the queue; one job held by its user
    busy = [c.submit(seconds=300, extra=("--exclusive",)) for _ in range(2)]
    wait_for(lambda: all(c.jobs()[j].state == "RUNNING" for j in busy), 60, "the long jobs to start")
    waiting = [c.submit(nodes=n, seconds=30) for n in (1, 2, 1)]
    user_held = c.submit(extra=("--hold",))
    before = _slurm_view(c)
    seen = {r["id"] for r in c.audit()}
    # the service polls every 5 s: give it three cycles
    wait_for(lambda: {int(r["target"]) for r in c.audit() if r["id"] not in seen and r["action"] == "hold"}
             >= set(waiting), 60, "dry-run hold decisions for the waiting jobs")
    time.sleep(6)
    after = _slurm_view(c)
    assert after == before, "a dry-run daemon changed Slurm"
    new = [r for r in c.audit() if r["id"] not in seen]
    assert new and all(r["dry_run"] == 1 and r["outcome"] == "dry-run" for r in new), new
    assert user_held not in {int(r["target"]) for r in new if r["target"].isdigit()}, "a user's own hold is not ours"
    assert all(not j.admin_comment for j in c.jobs().values()), "no hold marker was written"
    with urllib.request.urlopen(c.metrics_url, timeout=10) as resp:
        metrics = resp.read().decode()
    assert "wattsched_dry_run 1.0" in metrics
    cycles = [float(line.split()[-1]) for line in metrics.splitlines() if line.startswith("wattsched_cycles_total ")]
    assert cycles and cycles[0] >= 3
    # a site's view of the same: `wattsched audit` in the container
    out = c.wattsched("audit", "-c", "/etc/wattsched/wattsched.yaml", "--since", "1h").stdout
    assert "dry-run" in out and str(waiting[0]) in out
