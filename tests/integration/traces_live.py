"""What the live ``traces import`` tests share: the burst of jobs, the power query and Prometheus's own job energy.

Used by test_traces_import_live.py (jobs from a shadow record) and test_traces_import_sacct_live.py (jobs from
slurmdbd through sacct and slurmrestd), both on the namespace cluster of deploy/testcluster.
"""

from __future__ import annotations

import csv
import random
import subprocess
import sys
import time
from pathlib import Path

# node power in watts from the node exporter's RAPL counters, one series per node (label node); rate over 5 s,
# two or three scrapes at the cluster's 2 s
QUERY = 'sum by (node) (rate(node_rapl_package_joules_total{job="node"}[{range}]))'
RATE_WINDOW = "5s"
IDLE_W = 100.0  # the power emulator's idle node (conftest: WS_TC_IDLE_W)
SEED = 31
N_JOBS = 16
IDLE_GAP_S = 15.0


def burst(seed: int = SEED, n: int = N_JOBS) -> list[tuple[float, int, int, int]]:
    """``(submit offset s, nodes, run time s, declared watts per node)``: a job every 0 to 2 s.

    >>> jobs = burst()
    >>> len(jobs), {n for _, n, _, _ in jobs} == {1, 2, 3, 4}, all(6 <= r <= 14 for _, _, r, _ in jobs)
    (16, True, True)
    >>> len({w for *_, w in jobs}) > 8
    True
    """
    rng = random.Random(seed)
    t, out = 0.0, []
    for _ in range(n):
        out.append((round(t, 1), rng.choice((1, 1, 2, 2, 3, 4)), rng.randint(6, 14), rng.randrange(160, 400, 10)))
        t += rng.uniform(0.0, 2.0)
    return out


def submit_burst(cluster, jobs: list[tuple[float, int, int, int]], first_s: float) -> dict[int, int]:
    """Submit ``jobs`` (of :func:`burst`) as alice, the first at ``first_s`` (epoch s) and the rest at their offsets
    from it, each declaring its power per node to the power emulator; the declared watts by job id, in order."""
    declared = {}
    for offset, nodes, run_s, watts in jobs:
        time.sleep(max(0.0, first_s + offset - time.time()))
        job = cluster.submit(nodes=nodes, seconds=run_s, time_limit_min=1, user="alice",
                             extra=(f"--comment=wattsched:power={watts}",))
        declared[job] = watts
    return declared


def wattsched(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "wattsched", *args], capture_output=True, text=True, timeout=300)


def read_csv(path: Path) -> dict[int, dict]:
    with path.open() as fh:
        return {int(r["id"]): r for r in csv.DictReader(fh)}


def scraped_until(cluster) -> float:
    """The time of the last scrape of every node's RAPL counters (0 before the first)."""
    found = cluster.prom_query('min(timestamp(node_rapl_package_joules_total{job="node"}))')
    return float(found[0]["value"][1]) if found else 0.0


def prometheus_job_energy(cluster, nodes: list[str], start: float, end: float) -> float:
    """The job's energy as Prometheus computes it: each node's mean power at the 1 s steps of the run from its
    start up to, not including, its end (a subquery evaluated at the last of them), summed over the nodes, times the
    run time."""
    runtime = round(end - start)
    # the steps start .. end - 1, whether the range includes its left end (Prometheus 2) or not (3)
    expr = (f"avg_over_time(({QUERY.replace('{range}', RATE_WINDOW)})[{runtime * 1000 - 500}ms:1s] "
            f"@ {round(end) - 1})")
    by_node = {r["metric"].get("node"): float(r["value"][1]) for r in cluster.prom_query(expr)}
    missing = [n for n in nodes if n not in by_node]
    assert not missing, f"Prometheus has no power of {missing} over {start:.0f}-{end:.0f}"
    return sum(by_node[n] for n in nodes) * runtime
