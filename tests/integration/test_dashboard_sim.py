"""The Grafana dashboard against the daemon on the simulated cluster, through a real Prometheus (Debian's) on
loopback: every panel's queries return data. No Slurm and no test cluster: three daemon processes on the simulated
cluster, as a user would start them:

- the defaults of ``wattsched daemon --backend sim`` (the embedded demo: easy-pc under a 60 % cap);
- deploy/examples/dr-local with its loopback VTN (vtn.py): a demand-response event from the grid, frequencies
  lowered, jobs requeued, reports and opt answers (the *Demand response* row);
- dec+rapl, a policy that caps nodes (the *Node caps* panel).

Every query of every panel returns data, but those that cannot without real nodes or an hour of history, each
named by why: node_exporter's series (RAPL, CPU frequency), the node agents' (``wattsched_agent_*``: caps and
frequencies as the nodes hold them) and the forecast of an hour ago (``offset 1h``). So every panel has data but the
three that show node_exporter's series only.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from grid_vtn import free_port

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "wattsched.json"
EXAMPLE = ROOT / "deploy" / "examples" / "dr-local"
PROMETHEUS = shutil.which("prometheus")
NODE_EXPORTER_ONLY = {"Node power from node_exporter RAPL", "RAPL package and DRAM power per node",
                      "CPU frequency (node_exporter)"}
"""Panels of real nodes' node_exporter series: no simulated cluster has them."""


def cannot_have_data(expr: str) -> str | None:
    """Why a query has no data against the simulated cluster in a minute, or None when it must have data."""
    if re.search(r"\bnode_(rapl|cpu)_", expr):
        return "node_exporter on real nodes"
    if "wattsched_agent_" in expr:
        return "the wattsched agents on real nodes"
    if "offset 1h" in expr:
        return "an hour of history"
    return None


def env() -> dict:
    e = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "PYTHONUNBUFFERED": "1"}
    e.pop("NOTIFY_SOCKET", None)
    return e


def query(url: str, expr: str) -> list:
    body = urllib.parse.urlencode({"query": expr}).encode()
    with urllib.request.urlopen(url + "/api/v1/query", data=body, timeout=5) as r:
        reply = json.loads(r.read())
    assert reply["status"] == "success", (expr, reply)
    return reply["data"]["result"]


def test_every_dashboard_panel_returns_data_against_the_simulated_cluster(tmp_path):
    if PROMETHEUS is None:
        pytest.skip("prometheus not installed (apt-get install prometheus)")
    pytest.importorskip("openleadr", reason="openleadr not installed (pip install 'wattsched[openadr]')")
    from wattsched.daemon.commands import DEMO
    from wattsched.telemetry.dashboard import panel_queries

    ports = {name: free_port() for name in ("demo", "dr", "caps")}
    configs = {
        "demo": {"slurm": {"backend": "sim"}, **DEMO},
        "caps": {"slurm": {"backend": "sim"}, "sim": {"nodes": 16}, "policy": "dec+rapl", "cap_w": "60%",
                 "actuator": {"kind": "sim"}, "poll_interval_s": 1.0},
    }
    dr = yaml.safe_load((EXAMPLE / "wattsched.yaml").read_text())
    vtn_port = free_port()
    dr["demand_response"]["openadr2"]["vtn_url"] = f"http://127.0.0.1:{vtn_port}/OpenADR2/Simple/2.0b"
    dr["sim"]["trace"] = str(EXAMPLE / "jobs.swf")
    dr["poll_interval_s"] = 1.0
    configs["dr"] = dr
    for name, cfg in configs.items():
        cfg.update(metrics={"port": ports[name], "address": "127.0.0.1"}, state_dir=str(tmp_path / name))
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(cfg))
    scrape = {"global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
              "scrape_configs": [{"job_name": "wattsched", "static_configs": [
                  {"targets": [f"127.0.0.1:{p}" for p in ports.values()]}]}]}
    (tmp_path / "prometheus.yml").write_text(json.dumps(scrape))
    prom_port = free_port()
    url = f"http://127.0.0.1:{prom_port}"

    procs: list[subprocess.Popen] = []
    logs = []
    try:
        def start(name: str, argv: list[str]) -> subprocess.Popen:
            log = open(tmp_path / f"{name}.log", "w")  # noqa: SIM115 (closed below)
            logs.append(log)
            proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env())
            procs.append(proc)
            return proc

        start("prometheus", [PROMETHEUS, f"--config.file={tmp_path / 'prometheus.yml'}",
                             f"--storage.tsdb.path={tmp_path / 'data'}", f"--web.listen-address=127.0.0.1:{prom_port}",
                             "--log.level=warn"])
        start("vtn", [sys.executable, str(EXAMPLE / "vtn.py"), "--port", str(vtn_port), "--send-after", "3",
                      "--start-in", "5"])
        for name in configs:
            start(f"daemon-{name}", [sys.executable, "-m", "wattsched", "daemon", "-c", str(tmp_path / f"{name}.yaml")])

        panels: dict[str, list[str]] = {}
        for title, expr in panel_queries(DASHBOARD):
            panels.setdefault(title, []).append(expr)
        assert set(panels) >= NODE_EXPORTER_ONLY
        for title in NODE_EXPORTER_ONLY:  # only node_exporter series: the exemption is no wider than that
            assert not any(re.search(r"\bwattsched_", e) for e in panels[title]), title

        def empty() -> list[str]:
            return [f"{t}: {e}" for t, exprs in panels.items() for e in exprs
                    if cannot_have_data(e) is None and not query(url, e)]

        deadline = time.monotonic() + 120
        missing = ["not asked yet"]
        while missing and time.monotonic() < deadline:
            for p in procs:
                assert p.poll() is None, {f.name: Path(f.name).read_text()[-2000:] for f in logs}
            time.sleep(2)
            try:
                missing = empty()
            except OSError:  # Prometheus not up yet
                continue
        assert not missing, "queries without data:\n" + "\n".join(missing)
        assert {t for t, exprs in panels.items() if all(cannot_have_data(e) for e in exprs)} == NODE_EXPORTER_ONLY
        # the demand-response row with the event of the local VTN in force, and its measured reduction
        assert float(query(url, "max(wattsched_dr_event_active)")[0]["value"][1]) == 1
        assert float(query(url, "max(wattsched_dr_event_target_watts < +Inf)")[0]["value"][1]) == 1400
        assert float(query(url, "min(wattsched_dr_vtn_connected)")[0]["value"][1]) == 1
        # "Since last good cycle" is a few seconds, never negative (the demo's clock runs 600 times faster)
        since = [float(r["value"][1]) for r in query(url, "time() - wattsched_last_cycle_timestamp_seconds")]
        assert len(since) == 3 and all(-1 < s < 10 for s in since), since
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(30)
                except subprocess.TimeoutExpired:
                    p.kill()
        for log in logs:
            log.close()
