"""A sweep whose Dask workers are Slurm jobs on the live test cluster (dask-jobqueue's SLURMCluster).

The scheduler runs in the ``wattsched sweep`` process on this host and listens
on the test cluster's bridge address, the one the node namespaces reach; the
workers are ``sbatch`` jobs that run on the test nodes with this machine's
Python (same filesystem). The results must equal those of a local run.
"""

from __future__ import annotations

import csv
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from wattsched.daemon.slurm.parse import parse_squeue_json

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
KTH = ROOT / "src" / "wattsched" / "data" / "traces" / "KTH-SP2-1996-2.1-cln-first5000.swf.gz"
BRIDGE_ADDR = "10.199.8.1"  # WS_TC_SUBNET.1 of the pytest cluster (tests/integration/conftest.py)

SWEEP = f"""\
kind: sweep
name: slurm-sweep
base: {{procs: 100, predictor: history}}
axes:
  slices: {{trace: "{KTH}", count: 3, length_h: 48, warmup_h: 12, seed: 11}}
  policies:
    - easy
    - {{name: easy-pc, params: {{check: [mean, gaussian_99]}}}}
  caps: ["50%", "70%"]
cap_window: {{start_s: 0, end_s: 10800}}
exclude:
  - {{policy: easy, cap: "70%"}}
cluster:
  kind: slurm
  queue: batch
  workers: 2              # two Slurm jobs...
  cores: 1                # ...of one single-threaded worker each
  memory: 800MB           # the test nodes have RealMemory=1000
  walltime: "00:10:00"
  scheduler_host: {BRIDGE_ADDR}
"""
RUNS = 3 * 5
TIMINGS = {"run_wall_s", "sim_wall_s"}


def _rows(path: Path) -> dict[str, dict]:
    with open(path, newline="") as fh:
        return {r["key"]: r for r in csv.DictReader(fh)}


def test_sweep_workers_are_slurm_jobs_and_results_equal_a_local_run(cluster, tmp_path):
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(textwrap.dedent(SWEEP))
    env = {**cluster.env, "PYTHONUNBUFFERED": "1"}
    out = tmp_path / "slurm"
    proc = subprocess.Popen([sys.executable, "-m", "wattsched", "sweep", str(sweep), "--out", str(out), "-q"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen: dict[int, object] = {}
    deadline = time.monotonic() + 600
    while proc.poll() is None:
        assert time.monotonic() < deadline, "the Slurm sweep did not finish in 10 minutes"
        jobs, _ = parse_squeue_json(cluster.run("squeue", "--json").stdout)
        for j in jobs:
            if j.state == "RUNNING":
                seen[j.job_id] = j
        time.sleep(0.2)
    stdout, stderr = proc.communicate()
    assert proc.returncode == 0, f"{stdout}\n{stderr}"
    assert f"{RUNS} runs: 0 already done, {RUNS} executed (0 failed)" in stdout

    # the workers were Slurm jobs running on the test nodes
    workers = [j for j in seen.values() if j.name.startswith("dask-worker")]
    assert len(workers) >= 1, f"no dask-worker job seen running in squeue (saw {list(seen.values())})"
    ran_on = {n for j in workers for n in j.nodes}
    assert ran_on and ran_on <= set(cluster.nodes), ran_on
    logs = list((out / "dask-logs").glob("*.err"))
    assert logs, "no worker job logs"
    text = "\n".join(p.read_text() for p in logs)
    assert f"tls://{BRIDGE_ADDR}:" in text, text[-2000:]  # the scheduler on the bridge address, over TLS
    assert any(f"10.199.8.{10 + i}" in text for i in range(1, 5)), "workers did not listen on node addresses"
    # no worker job left behind
    time.sleep(1)
    left = [j for j in cluster.active().values() if j.name.startswith("dask-worker")]
    assert not left, left

    # the same sweep on a local cluster gives the same rows
    local = tmp_path / "local"
    text_local = sweep.read_text().replace("  kind: slurm\n", "  kind: local\n")
    for k in ("queue", "workers", "cores", "memory", "walltime", "scheduler_host"):
        text_local = "\n".join(line for line in text_local.splitlines() if not line.startswith(f"  {k}:")) + "\n"
    sweep_local = tmp_path / "local.yaml"
    sweep_local.write_text(text_local.replace("  kind: local\n", "  kind: local\n  workers: 1\n"))
    proc = subprocess.run([sys.executable, "-m", "wattsched", "sweep", str(sweep_local), "--out", str(local), "-q"],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    a, b = _rows(out / "runs.csv"), _rows(local / "runs.csv")
    assert len(a) == RUNS and set(a) == set(b)  # the cluster block is not part of a run's key
    for key in a:
        ra = {k: v for k, v in a[key].items() if k not in TIMINGS}
        rb = {k: v for k, v in b[key].items() if k not in TIMINGS}
        assert ra == rb, key
