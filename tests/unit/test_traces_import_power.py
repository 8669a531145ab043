"""Job power from a real Prometheus over each job's nodes and run, and a replay of the imported trace.

The Prometheus server is real (Debian's 2.42); its data are node power series
written into its database with ``promtool tsdb create-blocks-from openmetrics``
at the times of the captured accounting fixtures (tests/fixtures/sacct), the
way an IPMI exporter would have recorded them while those jobs ran: each node
draws its idle power plus, for every job on it, a load that varies second by
second.
"""

from __future__ import annotations

import contextlib
import csv
import json
import math
import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from wattsched.cli import main
from wattsched.config.platform import load_platform
from wattsched.daemon.slurm.sacct import parse_sacct_json
from wattsched.daemon.traceimport import import_accounting
from wattsched.telemetry.prometheus import PrometheusSource

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sacct"
PROMETHEUS, PROMTOOL = shutil.which("prometheus"), shutil.which("promtool")
IDLE = {"c1": 100.0, "c2": 110.0}
MARGIN_S = 300


def _fixture_docs() -> dict[str, Path]:
    # the docker cluster's captures (nodes c1, c2); not energy-v0.0.38, the namespace cluster's
    return {p.name: p / "sacct.json" for p in sorted(FIXTURES.iterdir())
            if p.name.startswith("v") and (p / "sacct.json").exists()}


def _load(job_id: int, t: int) -> float:
    """Per-node power a job adds at second ``t``: 150 W +- 60 W, changing every second."""
    return 150.0 + 60.0 * math.sin(t / 3.0 + job_id)


def _jobs():
    out = []
    for path in _fixture_docs().values():
        jobs, _ = parse_sacct_json(path.read_text())
        out.extend(j for j in jobs if j.ran)
    return out


def power_at(node: str, t: int, jobs) -> float:
    return IDLE[node] + sum(_load(j.job_id, t) for j in jobs if node in j.node_names and j.start <= t < j.end)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def prom(tmp_path_factory):
    """A Prometheus server holding ``node_power_watts{node=...}`` at 1 s over every fixture's jobs."""
    if PROMETHEUS is None or PROMTOOL is None:
        pytest.skip("prometheus and promtool not installed (apt-get install prometheus)")
    tmp = tmp_path_factory.mktemp("prom-backfill")
    series = {}
    for path in _fixture_docs().values():
        jobs, _ = parse_sacct_json(path.read_text())
        ran = [j for j in jobs if j.ran]
        lo, hi = int(min(j.start for j in ran)) - MARGIN_S, int(max(j.end for j in ran)) + MARGIN_S
        for t in range(lo, hi):
            for node in IDLE:
                series[(node, t)] = power_at(node, t, ran)
    lines = ["# TYPE node_power_watts gauge"]
    lines += [f'node_power_watts{{node="{n}"}} {w!r} {t}' for (n, t), w in sorted(series.items())]
    (tmp / "power.om").write_text("\n".join(lines) + "\n# EOF\n")
    subprocess.run([PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", str(tmp / "power.om"), str(tmp / "data")],
                   check=True, capture_output=True, timeout=120)
    (tmp / "prometheus.yml").write_text("global: {scrape_interval: 15s}\n")
    port = free_port()
    log = (tmp / "prometheus.log").open("w")
    proc = subprocess.Popen([PROMETHEUS, f"--config.file={tmp / 'prometheus.yml'}",
                             f"--storage.tsdb.path={tmp / 'data'}", "--storage.tsdb.retention.time=100y",
                             f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"], stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                pytest.fail(f"prometheus exited: {(tmp / 'prometheus.log').read_text()[-2000:]}")
            with contextlib.suppress(OSError), urllib.request.urlopen(url + "/-/ready", timeout=1) as r:
                if r.status == 200:
                    break
            if time.monotonic() > deadline:
                pytest.fail("prometheus did not get ready in 30 s")
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(10)
        log.close()


@pytest.mark.parametrize("version", sorted(_fixture_docs()))
def test_power_over_each_jobs_nodes_and_run(prom, version):
    jobs, _ = parse_sacct_json(_fixture_docs()[version].read_text())
    src = PrometheusSource(prom, "node_power_watts", node_label="node")
    imported = import_accounting(jobs, prometheus=src, step_s=1)
    ran = [j for j in jobs if j.ran]
    assert imported.sources == {"prometheus": len(ran)}
    by_id = {j.job_id: j for j in ran}
    for k, row in enumerate(imported.jobs):
        job = by_id[row.id]
        seconds = range(int(job.start), int(job.end))
        # every node's power at every second of the run, averaged over the job's nodes
        per_step = [sum(power_at(n, t, ran) for n in job.node_names) / job.nodes for t in seconds]
        assert row.mean_w == pytest.approx(sum(per_step) / len(per_step), rel=1e-9)
        assert row.max_w == pytest.approx(max(per_step), rel=1e-9)
        assert imported.record["energy_j"][1][k] == pytest.approx(sum(per_step) * job.nodes, rel=1e-9)
        assert imported.record["power_source"][1][k] == "prometheus"


def _exclusive_versions():
    """Fixtures whose jobs never shared a node (a replay on whole nodes can start each when Slurm did)."""
    out = []
    for version, path in _fixture_docs().items():
        jobs = [j for j in parse_sacct_json(path.read_text())[0] if j.ran]
        if not any(a.job_id < b.job_id and set(a.node_names) & set(b.node_names) and a.start < b.end and b.start < a.end
                   for a in jobs for b in jobs):
            out.append(version)
    return out


@pytest.mark.parametrize("version", _exclusive_versions() or [pytest.param("none", marks=pytest.mark.skip(
    reason="no fixture with an exclusive schedule"))])
def test_replay_as_run_reproduces_the_recorded_energy(prom, version, tmp_path, capsys):
    """import --as-run, platform fit, simulate: the replay's energy is the nodes' measured energy within 2 %."""
    doc = _fixture_docs()[version]
    trace, platform, run = tmp_path / "jobs.csv", tmp_path / "site.yaml", tmp_path / "run"
    prom_opts = ["--prometheus", prom, "--power-query", "node_power_watts", "--node-label", "node", "--step", "1"]
    assert main(["traces", "import", "--sacct-json", str(doc), "--as-run", "-q", "-o", str(trace), *prom_opts]) == 0
    nodes_json = doc.parent / "scontrol-nodes.json"
    nodes = ["--nodes-json", str(nodes_json)] if nodes_json.exists() else []
    assert main(["platform", "fit", "--trace", str(trace), "--name", "docker", "-o", str(platform), *prom_opts,
                 *nodes]) == 0
    fitted = yaml.safe_load(platform.read_text())
    group = fitted["node_groups"][0]
    assert group["count"] == 2 and group["power"]["idle_w"] in (100.0, 105.0, 110.0)
    if nodes:  # the docker nodes have 2 CPUs each (scontrol show nodes --json)
        assert group["cores"] == 2
    assert len(load_platform(str(platform))) == 2
    assert main(["simulate", "--trace", str(trace), "--platform", str(platform), "--policy", "fcfs",
                 "--no-report", "-q", "--out", str(run), "--json"]) == 0
    capsys.readouterr()
    with (run / "jobs.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    with trace.open() as fh:
        recorded = {r["id"]: r for r in csv.DictReader(fh)}
    # each job started when Slurm started it
    for r in rows:
        assert float(r["start_s"]) == pytest.approx(float(recorded[r["id"]]["start_s"]), abs=1e-6), r["id"]
    ran = [j for j in parse_sacct_json(doc.read_text())[0] if j.ran]
    measured = sum(power_at(n, t, ran) for j in ran for n in j.node_names for t in range(int(j.start), int(j.end)))
    replayed = sum(float(r["energy_j"]) for r in rows)
    assert replayed == pytest.approx(measured, rel=0.02)
    queue = json.loads((run / "summary.json").read_text())["verdicts"]["queue"]
    assert queue["drained"] and queue["n_jobs"] == len(ran)
