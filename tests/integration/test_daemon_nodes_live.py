"""Node caps and frequencies reconciled on the real test cluster: the daemon as a process, the wattsched agents
on the cluster's nodes (fake RAPL/cpufreq sysfs), munge-signed commands, the node-setting test policy loaded
through the ``wattsched.policies`` entry point group as a site's own package would be."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from wattsched.agent.sysfs import Sysfs

from .conftest import cap_w, completed, cycle_no, freq_hz, rows, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))
from nodepolicy import install_entry_point  # noqa: E402


def policy_state(db: Path) -> dict:
    found = rows(db, "SELECT value FROM kv WHERE key='policy_state'")
    return json.loads(found[0][0])["state"] if found else {}


@pytest.fixture
def node_daemon(agent_daemon, tmp_path):
    """Start the daemon with the node-setting policy and the agent actuator; restores the nodes afterwards."""
    site = install_entry_point(tmp_path / "site")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), str(site)])}

    def start(params: dict, extra_env: dict | None = None, **config):
        return agent_daemon("node-setting", params, env={**env, **(extra_env or {})}, **config)

    return start


def test_policy_sees_next_cycle_the_caps_and_frequencies_it_set_as_read_through_the_agents(
        cluster, node_daemon, tmp_path):
    db = tmp_path / "state" / "state.db"
    d = node_daemon({"cap_w": 150.0, "cap_nodes": [0], "freq_hz": 1.5e9, "freq_nodes": [1]})
    state = wait_for(lambda: (s := policy_state(db)).get("seen_caps", {}).get("0") == 150.0 and
                     s.get("seen_freqs", {}).get("1") == 1.5e9 and s, 60, "the policy to see its settings")
    assert d.alive()
    assert cap_w(cluster, "wst1") == pytest.approx(150.0) and freq_hz(cluster, "wst2") == pytest.approx(1.5e9)
    assert state["seen_desired_caps"] == {"0": 150.0}
    # seeing them in place, it asked once per setting
    assert rows(db, "SELECT target, outcome FROM intents WHERE action='set_cap'") == [("wst1", "applied")]
    assert rows(db, "SELECT target, outcome FROM intents WHERE action='set_freq'") == [("wst2", "applied")]
    assert "node-setting policy sees caps {'0': 150.0" in d.text()


def test_a_cap_changed_behind_the_daemons_back_is_set_again_within_two_cycles_and_audited(
        cluster, node_daemon, tmp_path):
    db = tmp_path / "state" / "state.db"
    d = node_daemon({"cap_w": 150.0, "cap_nodes": [0], "freq_hz": None})
    wait_for(lambda: policy_state(db).get("seen_caps", {}).get("0") == 150.0, 60, "the cap in place")
    s = Sysfs(cluster.sysfs / "wst1")
    at = cycle_no(db)
    for p in s.packages():
        s.set_power_limit_w(p, 220.0 / len(s.packages()))  # an administrator, or the firmware
    wait_for(lambda: abs(cap_w(cluster, "wst1") - 150.0) < 0.5, 30, "the cap set again")
    assert cycle_no(db) - at <= 2
    completed(db)  # the agent wrote the node before it answered
    drift = rows(db, "SELECT outcome, reason FROM audit WHERE action='set_cap' AND reason LIKE '%drifted%'")
    assert drift and drift[0][0] == "applied" and "the node holds 220 W, wattsched set 150 W" in drift[0][1]
    assert d.alive()
    assert "node wst1: drifted: the node holds 220 W, wattsched set 150 W; setting it again" in d.text()


class _SlowAnswers(BaseHTTPRequestHandler):
    """An HTTP proxy that forwards at once but answers a cap command only ``delay_s`` after the agent did."""

    delay_s = 5.0
    forwarded = threading.Event()

    def log_message(self, *args):
        pass

    def _forward(self, method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "proxy-connection",
                                                                               "connection")}
        req = urllib.request.Request(self.path, data=body, headers=headers, method=method)
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(req, timeout=10) as r:
                status, payload = r.status, r.read()
        except urllib.error.HTTPError as exc:
            status, payload = exc.code, exc.read()
        if method == "POST" and self.path.endswith("/v1/cap"):
            type(self).forwarded.set()
            time.sleep(self.delay_s)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_GET(self):
        self._forward("GET")

    def do_POST(self):
        self._forward("POST")


def test_kill_9_between_the_cap_write_and_its_record_then_restart_applies_nothing_twice(
        cluster, node_daemon, tmp_path):
    db = tmp_path / "state" / "state.db"
    _SlowAnswers.forwarded.clear()
    proxy = ThreadingHTTPServer(("127.0.0.1", 0), _SlowAnswers)
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{proxy.server_address[1]}"
        d = node_daemon({"cap_w": 150.0, "cap_nodes": [0], "freq_hz": None},
                        extra_env={"http_proxy": url, "no_proxy": "127.0.0.1,localhost"})
        # the agent has written the cap; the daemon waits for the answer and has not recorded it
        assert _SlowAnswers.forwarded.wait(60), d.text()
        d.stop(signal.SIGKILL)
    finally:
        proxy.shutdown()
    assert cap_w(cluster, "wst1") == pytest.approx(150.0)
    assert rows(db, "SELECT target, outcome FROM intents WHERE action='set_cap'") == [("wst1", "pending")]
    assert rows(db, "SELECT target, outcome FROM audit WHERE action='set_cap'") == [("wst1", "pending")]
    # restart (no proxy): the write in flight is found applied on the node and not made again
    node_daemon({"cap_w": 150.0, "cap_nodes": [0], "freq_hz": None})
    wait_for(lambda: rows(db, "SELECT outcome FROM intents WHERE action='set_cap'") == [("reconciled:applied",)],
             60, "the in-flight cap reconciled")
    start = cycle_no(db)
    wait_for(lambda: cycle_no(db) >= start + 3, 60, "three more cycles")
    assert rows(db, "SELECT target, outcome FROM intents WHERE action='set_cap'") == [
        ("wst1", "reconciled:applied")]
    audit = rows(db, "SELECT target, outcome, reason FROM audit WHERE action='set_cap'")
    assert [(t, o) for t, o, _ in audit] == [("wst1", "reconciled:applied")] and "150 W" in audit[0][2]
    assert cap_w(cluster, "wst1") == pytest.approx(150.0)
    assert policy_state(db)["seen_caps"]["0"] == 150.0


def test_a_start_applies_its_cap_and_frequency_on_the_jobs_node_before_the_release(cluster, node_daemon, tmp_path):
    db = tmp_path / "state" / "state.db"
    d = node_daemon({"cap_w": None, "freq_hz": None, "start_cap_w": 160.0, "start_freq_hz": 1.8e9})
    cluster.fresh_heartbeat()
    jid = cluster.submit(nodes=1, seconds=8)
    job = wait_for(lambda: (j := cluster.jobs().get(jid)) is not None and j.state == "RUNNING" and j, 60,
                   "the job to run")
    [node] = job.nodes
    assert cap_w(cluster, node) == pytest.approx(160.0) and freq_hz(cluster, node) == pytest.approx(1.8e9)
    completed(db)  # the release answered before the store recorded it
    audit = rows(db, "SELECT id, action, target, outcome FROM audit WHERE action IN ('set_cap', 'set_freq', "
                     "'start') ORDER BY id")
    assert [(a, t, o) for _, a, t, o in audit[:3]] == [
        ("set_cap", node, "applied"), ("set_freq", node, "applied"), ("start", str(jid), "applied")]
    # once the job has ended the node goes back to uncapped and its nominal frequency
    wait_for(lambda: jid not in cluster.active(), 60, "the job to end")
    wait_for(lambda: not rows(db, "SELECT node FROM node_desired"), 30, "the job's settings undone")
    s = Sysfs(cluster.sysfs / node)
    assert cap_w(cluster, node) == pytest.approx(sum(s.max_power_w(p) for p in s.packages()))
    assert freq_hz(cluster, node) == pytest.approx(s.max_freq_hz())
    assert d.alive()
