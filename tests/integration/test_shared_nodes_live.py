"""Jobs that share nodes on the real test cluster (select/cons_tres): the daemon packs them as jobs of units.

The cluster's ``shared`` partition (OverSubscribe=NO: jobs share nodes by
cores and memory unless ``--exclusive``) covers the same 2-core nodes as the
exclusive ``batch`` partition. ``wattsched daemon`` manages ``shared`` with
``ls``, which maps each job's units onto partly used nodes first; every
release is pinned with a ReqNodeList, so where Slurm runs a job is where the
daemon put it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import rows, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def sbatch(cluster, *args: str, seconds: int = 40) -> int:
    out = cluster.run("sbatch", "--parsable", "-p", "shared", "-t", "2", "-o", "/dev/null", *args,
                      "--wrap", f"sleep {seconds}").stdout
    return int(out.strip().split(";")[0])


def running(cluster, job_id: int):
    job = cluster.jobs().get(job_id)
    return job if job is not None and job.state == "RUNNING" else None


def starts(db: Path) -> dict[str, str]:
    return {t: r for t, o, r in rows(db, "SELECT target, outcome, reason FROM audit WHERE action='start' "
                                         "ORDER BY id") if o == "applied"}


def test_ls_packs_jobs_that_share_nodes_and_spreads_a_job_of_tasks(cluster, daemon_config, daemon, tmp_path):
    db = tmp_path / "state" / "state.db"
    d = daemon(daemon_config(policy="ls", partitions=["shared"], gate="daemon"))
    cluster.fresh_heartbeat()
    first = sbatch(cluster, "-n", "1", "--mem-per-cpu=100")
    a = wait_for(lambda: running(cluster, first), 60, "the first job to run")
    (node,) = a.nodes
    assert a.allocation and a.allocation[0].node == node
    # one CPU left on that node: the next one-CPU job goes there, not to an idle node
    second = sbatch(cluster, "-n", "1", "--mem-per-cpu=100")
    b = wait_for(lambda: running(cluster, second), 60, "the second job to run")
    assert b.nodes == (node,)
    # three tasks of one CPU: no room left on the shared node, so two idle nodes, one of them full
    third = sbatch(cluster, "-n", "3", "--mem-per-cpu=100")
    c = wait_for(lambda: running(cluster, third), 60, "the job of tasks to run")
    assert len(c.nodes) == 2 and node not in c.nodes
    assert sorted(al.cores or al.cpus for al in c.allocation) == [1, 2]
    # a job by node (-N 2) asks a node of its own per unit: the idle CPU left by the job of tasks and the
    # last idle node
    fourth = sbatch(cluster, "-N", "2", "--ntasks-per-node=1", "--mem-per-cpu=100")
    e = wait_for(lambda: running(cluster, fourth), 60, "the job by node to run")
    assert len(set(e.nodes)) == 2 and node not in e.nodes
    audited = starts(db)
    assert audited[str(first)].startswith(f"on {node}") and audited[str(second)].startswith(f"on {node}")
    assert set(cluster.jobs()[third].required_nodes) == set(c.nodes)  # pinned where Slurm ran it
    assert "mismatch" not in {o for (o,) in rows(db, "SELECT outcome FROM audit WHERE action='started'")}
    assert d.alive()
