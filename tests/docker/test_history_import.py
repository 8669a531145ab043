"""`wattsched history import` from real `sacct` output, served by the compose cluster's slurmdbd."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.parse
import urllib.request

import pytest
import yaml

from .conftest import SUBNET, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PROM_ADDR = f"{SUBNET}.1:19390"  # this host's address on the compose network: the containers reach it


@pytest.fixture
def prometheus(tmp_path, docker_cluster):
    """A real prometheus on the network's bridge scraping node power from a loopback exporter.

    The containers have no power sensors, so per-node power comes from a gauge this test sets
    (c1 120 W, c2 260 W), the way an IPMI exporter would report it.
    """
    from prometheus_client import CollectorRegistry, Gauge, start_http_server

    registry = CollectorRegistry()
    power = Gauge("node_power_watts", "node power", ["node"], registry=registry)
    power.labels("c1").set(120)
    power.labels("c2").set(260)
    server, _thread = start_http_server(0, addr="127.0.0.1", registry=registry)
    port = server.server_port
    config = tmp_path / "prometheus.yml"
    config.write_text(yaml.safe_dump({"global": {"scrape_interval": "1s"}, "scrape_configs": [
        {"job_name": "power", "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]}]}))
    proc = subprocess.Popen(["prometheus", f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                             f"--web.listen-address={PROM_ADDR}"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)

    def query(expr: str) -> list:
        data = urllib.parse.urlencode({"query": expr}).encode()
        try:
            with urllib.request.urlopen(f"http://{PROM_ADDR}/api/v1/query", data=data, timeout=5) as r:
                return json.load(r)["data"]["result"]
        except OSError:
            return []

    try:
        wait_for(lambda: len(query("node_power_watts")) == 2, 60, "node power in prometheus")
        yield f"http://{PROM_ADDR}"
    finally:
        proc.terminate()
        proc.wait(30)
        server.shutdown()


def test_history_import_reads_sacct_from_slurmdbd_and_power_from_prometheus(docker_cluster, prometheus):
    c = docker_cluster
    since = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(time.time() - 60))
    jid = c.submit(seconds=20, extra=("-w", "c2"))
    wait_for(lambda: jid not in c.active(), 120, "the job to finish")
    # the finished job is in slurmdbd's accounting
    wait_for(lambda: c.ctl("sacct", "-j", str(jid), "-X", "-n", "-P", "-o", "State").strip() == "COMPLETED", 60,
             "sacct to report the job")
    config = {"kind": "daemon", "policy": "easy", "state_dir": "/var/lib/wattsched/history-test",
              "slurm": {"conf": "/etc/slurm/slurm.conf"},
              "telemetry": {"source": "prometheus", "url": prometheus, "query": "node_power_watts",
                            "node_label": "node", "settle_s": 2}}
    c.python_in("wattsched", f"open('/tmp/history.yaml', 'w').write({yaml.safe_dump(config)!r})")
    proc = c.wattsched("history", "import", "-c", "/tmp/history.yaml", "--since", since, "-q", check=False)
    assert proc.returncode == 0, proc.stderr
    assert "finished jobs since" in proc.stdout and "added to the power history" in proc.stdout, proc.stdout
    rows = json.loads(c.python_in("wattsched", (
        "import json, sqlite3; print(json.dumps(list(sqlite3.connect('/var/lib/wattsched/history-test/state.db')"
        f".execute('SELECT job_id, nodes, mean_w, max_w, source FROM history WHERE job_id = {jid}'))))")))
    assert len(rows) == 1, rows
    job_id, nodes, mean_w, max_w, source = rows[0]
    assert job_id == jid and nodes == 1 and source == "prometheus"
    assert mean_w == pytest.approx(260, abs=1) and max_w == pytest.approx(260, abs=1)
    # a second import adds nothing: the job is already there
    again = c.wattsched("history", "import", "-c", "/tmp/history.yaml", "--since", since, "-q").stdout
    assert " 0 added" in again, again
