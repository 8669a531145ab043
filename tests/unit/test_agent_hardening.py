"""The node agent against hostile peers: real HTTP and sockets on loopback, munge played by FakeMunge.

- a command captured on its way to one node is refused by every other node and, replayed, by its own;
- a process squatting the agent's port cannot pass for the agent (its answers are not signed by the agent's UID);
- slow clients (one byte at a time) neither hold a connection past the request deadline nor lock others out;
- unauthenticated readers get energy in whole joules, at most once a second, never the raw RAPL counter;
- answers are read up to a bound.
"""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from wattsched.agent.auth import HEADER, NONCE_HEADER, REPLY_HEADER, Verifier, reply_message, sign, sign_request
from wattsched.agent.client import AgentClient, AgentError
from wattsched.agent.server import AgentServer
from wattsched.agent.sysfs import Sysfs
from wattsched.testing.fake_munge import FakeMunge
from wattsched.testing.fake_sysfs import make_fake_node

LIMIT = "class/powercap/intel-rapl:0/constraint_0_power_limit_uw"
ENERGY = "class/powercap/intel-rapl:0/energy_uj"


def start(tmp_path, name: str, munge: FakeMunge, **kwargs) -> AgentServer:
    root = make_fake_node(tmp_path / name)
    server = AgentServer(Sysfs(root), Verifier({0}, node=name, run=munge), port=0, registry=CollectorRegistry(),
                         **kwargs)
    server.start()
    server.root = root
    return server


def post(server: AgentServer, path: str, body: bytes, credential: str) -> tuple[int, dict]:
    req = urllib.request.Request(server.url + path, data=body, method="POST", headers={HEADER: credential})
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, json.loads(exc.read())


# --- (2) commands are for one node, answers come from the agent -------------------------------------------------------
def test_a_command_for_one_node_is_refused_by_another_and_replayed_by_its_own(tmp_path):
    key = b"one cluster key"
    cn01, cn02 = start(tmp_path, "cn01", FakeMunge(key)), start(tmp_path, "cn02", FakeMunge(key))  # two munged
    try:
        body = b'{"watts": 120}'
        credential = sign_request("POST", "/v1/cap", body, node="cn01", run=FakeMunge(key))
        assert post(cn01, "/v1/cap", body, credential)[0] == 200
        assert (cn01.root / LIMIT).read_text().strip() == "120000000"
        # the same credential presented to another node: its munged has never seen it, the node name refuses it
        status, answer = post(cn02, "/v1/cap", body, credential)
        assert (status, answer) == (403, {"ok": False, "error": "credential refused: wrong_node"})
        assert (cn02.root / LIMIT).read_text().strip() == "200000000"
        assert cn02.registry.get_sample_value("wattsched_agent_rejected_requests_total",
                                              {"reason": "wrong_node"}) == 1.0
        # replayed to its own node within the validity window, after munged forgot it (a restart): the agent's
        # own cache refuses it
        cn01.verifier.run = FakeMunge(key)
        status, answer = post(cn01, "/v1/cap", body, credential)
        assert (status, answer) == (403, {"ok": False, "error": "credential refused: replayed"})
    finally:
        cn01.shutdown()
        cn02.shutdown()


class _Impostor(BaseHTTPRequestHandler):
    """What a local user bound to the agent's port answers: "ok" to everything, signed with its own credential."""

    munge: FakeMunge | None = None

    def log_message(self, *args):
        pass

    def _answer(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = json.dumps({"ok": True, "applied_w": {"package-0": 120.0}, "state": {}}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        nonce = self.headers.get(NONCE_HEADER)
        if self.munge is not None and nonce:
            self.send_header(REPLY_HEADER, sign(reply_message("cn01", 200, nonce, body), run=self.munge))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer


@pytest.mark.parametrize("signed_by", [None, 1000])
def test_an_impostor_on_the_agents_port_is_not_taken_for_the_agent(signed_by):
    key = b"one cluster key"
    handler = type("H", (_Impostor,), {"munge": None if signed_by is None else FakeMunge(key, uid=signed_by)})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        client = AgentClient(f"http://127.0.0.1:{httpd.server_address[1]}", "cn01", run=FakeMunge(key))
        expected = "carries no X-Wattsched-Reply-Munge" if signed_by is None else "signed by uid 1000, not by"
        with pytest.raises(AgentError, match=f"HTTP 200 refused: .*{expected}"):
            client.set_cap(120)
        with pytest.raises(AgentError, match=expected):
            client.state()
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_the_agent_signs_its_answers_for_its_node(tmp_path):
    key = b"one cluster key"
    agent = start(tmp_path, "cn01", FakeMunge(key))
    try:
        assert AgentClient(agent.url, "cn01", run=FakeMunge(key)).set_cap(150)["ok"]
        assert AgentClient(agent.url, "cn01", run=FakeMunge(key)).state()["http_status"] == 200
        # a client that thinks it talks to cn02 refuses cn01's answers (and cn01 refuses its command)
        with pytest.raises(AgentError, match="not for this answer from node cn02"):
            AgentClient(agent.url, "cn02", run=FakeMunge(key)).state()
    finally:
        agent.shutdown()


# --- (3) slow clients -------------------------------------------------------------------------------------------------
def _trickle(conns: list[socket.socket], stop: threading.Event, closed: list[float], every_s: float) -> None:
    request = b"GET /v1/state HTTP/1.1\r\nHost: agent\r\n"
    start = time.monotonic()
    for i in range(10_000):
        if stop.wait(every_s):
            return
        for conn in list(conns):
            try:
                conn.sendall(request[i % len(request):][:1])
            except OSError:
                conns.remove(conn)
                closed.append(time.monotonic() - start)


def test_slowloris_neither_outlives_the_request_deadline_nor_locks_out_others(tmp_path):
    munge = FakeMunge()
    agent = start(tmp_path, "cn01", munge, timeout_s=1.5, max_connections=16, max_per_peer=4)
    stop = threading.Event()
    conns, closed = [], []
    try:
        for _ in range(16):  # sixteen slow clients from one address, each sending a header byte every 0.3 s
            s = socket.socket()
            s.bind(("127.0.0.2", 0))
            try:
                s.connect((agent.address, agent.port))
            except OSError:
                s.close()
                continue
            conns.append(s)
            time.sleep(0.05)  # one at a time, so each is accepted (the listen backlog is short)
        slow = threading.Thread(target=_trickle, args=(conns, stop, closed, 0.3), daemon=True)
        slow.start()
        time.sleep(0.5)
        # a legitimate client on another address is served at once
        started = time.monotonic()
        answer = AgentClient(agent.url, "cn01", run=munge, timeout_s=5).state()
        assert answer["http_status"] == 200 and time.monotonic() - started < 1.0
        # and the trickling connections are cut at the deadline (1.5 s), not kept alive by each byte
        deadline = time.monotonic() + 6
        while conns and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not conns, f"{len(conns)} slow connections still open after 6 s"
    finally:
        stop.set()
        for s in conns:
            s.close()
        agent.shutdown()


# --- (4) energy to unauthenticated readers ----------------------------------------------------------------------------
def test_unauthenticated_readers_get_whole_joules_at_most_once_a_second(tmp_path):
    agent = start(tmp_path, "cn01", FakeMunge())
    energy = agent.root / ENERGY
    try:
        energy.write_text("123456789\n")

        def served() -> tuple[int, float]:
            with urllib.request.urlopen(agent.url + "/v1/state", timeout=5) as resp:
                uj = json.loads(resp.read())["packages"][0]["energy_uj"]
            with urllib.request.urlopen(agent.url + "/metrics", timeout=5) as resp:
                text = resp.read().decode()
            [family] = [f for f in text_string_to_metric_families(text)
                        if f.name == "wattsched_agent_rapl_energy_joules"]
            return uj, family.samples[0].value

        assert served() == (123_000_000, 123.0)  # 123.456789 J served as 123 J
        energy.write_text("124999999\n")  # 1.5 J later, within the same second: nothing new is read
        assert served() == (123_000_000, 123.0)
        time.sleep(1.05)
        assert served() == (124_000_000, 124.0)
    finally:
        agent.shutdown()


# --- (9) bounded answers ----------------------------------------------------------------------------------------------
def test_an_oversized_answer_is_refused_naming_the_url_and_limit():
    class Huge(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            self.send_response(200)
            self.end_headers()
            for _ in range(64):
                self.wfile.write(b" " * 65536)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Huge)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        with pytest.raises(AgentError, match=rf"^{url}/v1/state: answer larger than 1048576 bytes"):
            AgentClient(url, "cn01", run=FakeMunge()).state()
    finally:
        httpd.shutdown()
        httpd.server_close()
