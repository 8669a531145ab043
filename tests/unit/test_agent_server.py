"""The node agent end to end: a real munged, real HTTP on 127.0.0.1, a fake sysfs tree of real files."""

import hashlib
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from wattsched.agent.auth import (
    HEADER,
    Verifier,
    canonical_message,
    parse_message,
    parse_unmunge,
    sign,
    sign_request,
)
from wattsched.agent.client import AgentClient, AgentError
from wattsched.agent.commands import add_commands, allowed_uids
from wattsched.agent.server import MAX_PER_PEER, AgentServer
from wattsched.agent.sysfs import Sysfs
from wattsched.errors import ConfigError
from wattsched.testing.fake_sysfs import make_fake_node

NON_ROOT = "wsagent"
NODE = "cn01"
LIMIT = "class/powercap/intel-rapl:{}/constraint_0_power_limit_uw"
POLICY = "devices/system/cpu/cpufreq/policy{}/scaling_max_freq"

# unmunge 0.5.15 output, captured on this machine (text and --numeric forms)
UNMUNGE_TEXT = b"""STATUS:          Replayed credential (17)
ENCODE_HOST:     localhost (127.0.0.1)
ENCODE_TIME:     2026-11-22 03:15:41 +0000 (1795317341)
DECODE_TIME:     2026-11-22 03:15:41 +0000 (1795317341)
TTL:             300
CIPHER:          aes128 (4)
MAC:             sha256 (5)
ZIP:             none (0)
UID:             root (0)
GID:             root (0)
LENGTH:          11

hello world"""
UNMUNGE_NUMERIC = b"""STATUS:          0
ENCODE_HOST:     127.0.0.1
ENCODE_TIME:     1795317352
DECODE_TIME:     1795317352
TTL:             300
CIPHER:          4
MAC:             5
ZIP:             0
UID:             1002
GID:             1002
LENGTH:          1

y"""


# --- munged -----------------------------------------------------------------------------------------------------------
def _stop(pid_file: Path) -> None:
    try:
        pid = int(pid_file.read_text())
    except (OSError, ValueError):
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    for _ in range(100):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.02)


def _start_munged(base: Path) -> Path:
    sock = base / "sock" / "munge.socket"
    result = subprocess.run(
        ["munged", "--force", f"--socket={sock}", f"--key-file={base / 'key' / 'munge.key'}",
         f"--pid-file={base / 'munged.pid'}", f"--log-file={base / 'munged.log'}",
         f"--seed-file={base / 'key' / 'munged.seed'}"], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    for _ in range(100):
        if sock.exists():
            return sock
        time.sleep(0.02)
    raise AssertionError(f"munged did not create {sock}")


@pytest.fixture(scope="module")
def munge():
    """A private munged. Its directory is outside pytest's tmp_path (0700) so the non-root user reaches the socket."""
    if not shutil.which("munged") or not shutil.which("munge"):
        pytest.skip("munge is not installed (apt-get install munge)")
    if os.geteuid() != 0:
        pytest.skip("needs root: starts munged and signs as a second user")
    base = Path(tempfile.mkdtemp(prefix="wattsched-munge-"))
    (base / "sock").mkdir()
    (base / "key").mkdir()
    os.chmod(base, 0o755)
    os.chmod(base / "sock", 0o755)
    os.chmod(base / "key", 0o700)
    (base / "key" / "munge.key").write_bytes(os.urandom(1024))
    os.chmod(base / "key" / "munge.key", 0o400)
    try:
        yield {"socket": _start_munged(base), "base": base}
    finally:
        _stop(base / "munged.pid")
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def non_root_user():
    try:
        pwd.getpwnam(NON_ROOT)
    except KeyError:
        subprocess.run(["useradd", "--no-create-home", NON_ROOT], check=True, capture_output=True)
    return pwd.getpwnam(NON_ROOT).pw_uid


def sign_as(user: str, payload: bytes, sock: Path) -> str:
    proc = subprocess.run(["runuser", "-u", user, "--", "munge", f"--socket={sock}"], input=payload,
                          capture_output=True, check=True, timeout=10)
    return proc.stdout.decode().strip()


# --- agent ------------------------------------------------------------------------------------------------------------
class Agent:
    def __init__(self, root, server, sock):
        self.root, self.server, self.sock = root, server, sock
        self.client = AgentClient(server.url, NODE, munge_socket=sock)

    def read(self, rel: str) -> str:
        return (self.root / rel).read_text().strip()

    def sample(self, name: str, **labels) -> float | None:
        return self.server.registry.get_sample_value(name, labels)

    def post(self, path: str, body: bytes, credential: str | None = None) -> tuple[int, dict]:
        headers = {"Content-Type": "application/json"}
        if credential is not None:
            headers[HEADER] = credential
        req = urllib.request.Request(self.server.url + path, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=5) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            with exc:
                return exc.code, json.loads(exc.read())

    def get(self, path: str) -> tuple[int, bytes]:
        with urllib.request.urlopen(self.server.url + path, timeout=5) as resp:
            return resp.status, resp.read()


def start_agent(tmp_path, munge, packages=1, cpus=2, uids=(0,)):
    root = make_fake_node(tmp_path / "sys", packages=packages, cpus=cpus)
    server = AgentServer(Sysfs(root), Verifier(set(uids), socket=munge["socket"], node=NODE), port=0,
                         registry=CollectorRegistry())
    server.start()
    return Agent(root, server, munge["socket"])


@pytest.fixture
def agent(tmp_path, munge):
    a = start_agent(tmp_path, munge)
    yield a
    a.server.shutdown()


@pytest.fixture
def agent2(tmp_path, munge):
    a = start_agent(tmp_path, munge, packages=2, cpus=4)
    yield a
    a.server.shutdown()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- pure parts -------------------------------------------------------------------------------------------------------
def test_parse_unmunge_reads_text_and_numeric_metadata():
    c = parse_unmunge(UNMUNGE_TEXT, 17)
    assert (c.status, c.status_text, c.uid, c.gid, c.encode_time, c.ttl_s) == (
        17, "Replayed credential", 0, 0, 1795317341, 300)
    assert c.payload == b"hello world"
    c = parse_unmunge(UNMUNGE_NUMERIC)
    assert (c.status, c.uid, c.encode_time, c.payload) == (0, 1002, 1795317352, b"y")
    c = parse_unmunge(b"", 8)  # garbage: unmunge prints only to stderr
    assert c.status == 8 and c.uid is None


def test_canonical_message_binds_method_path_and_body():
    msg = parse_message(canonical_message("post", "/v1/cap", b'{"watts": 1}', node=NODE, nonce="abc", timestamp=42))
    assert msg.node == NODE
    assert msg.method == "POST" and msg.path == "/v1/cap" and msg.nonce == "abc" and msg.timestamp == 42
    assert msg.body_sha256 == hashlib.sha256(b'{"watts": 1}').hexdigest()
    a, b = canonical_message("POST", "/v1/cap", b"", node=NODE), canonical_message("POST", "/v1/cap", b"", node=NODE)
    assert a != b  # a fresh nonce each time: two identical commands never share a credential


def test_verifier_replay_cache_catches_what_munged_does_not():
    """After a munged restart its replay cache is empty; the agent's own cache still refuses the credential."""
    body = b'{"hz": null}'
    payload = canonical_message("POST", "/v1/freq", body, node=NODE)
    now = time.time()
    out = (f"STATUS: 0\nENCODE_TIME: {int(now)}\nTTL: 300\nUID: 0\nGID: 0\n\n").encode() + payload

    def run(cmd, stdin):
        assert cmd[0] == "unmunge" and "--numeric" in cmd and "--socket=/s" in cmd
        return subprocess.CompletedProcess(cmd, 0, out, b"")

    v = Verifier({0}, socket="/s", run=run, clock=lambda: now, node=NODE)
    assert v.verify("MUNGE:abc:", "POST", "/v1/freq", body) == (0, "ok", "")
    uid, reason, detail = v.verify("MUNGE:abc:", "POST", "/v1/freq", body)
    assert (uid, reason) == (0, "replayed") and "agent's replay cache" in detail
    # expired entries leave the cache
    v.clock = lambda: now + 1000
    assert v.verify("MUNGE:abc:", "POST", "/v1/freq", body).reason == "expired"


# --- munge ------------------------------------------------------------------------------------------------------------
def test_root_credential_verifies_and_only_once(munge):
    v = Verifier({0}, socket=munge["socket"], node=NODE)
    cred = sign_request("POST", "/v1/cap", b"{}", munge["socket"], node=NODE)
    assert cred.startswith("MUNGE:")
    assert v.verify(cred, "POST", "/v1/cap", b"{}").ok
    uid, reason, detail = v.verify(cred, "POST", "/v1/cap", b"{}")
    assert (uid, reason, detail) == (0, "replayed", "munged: replayed credential")


def test_credential_for_another_request_is_refused(munge):
    v = Verifier({0}, socket=munge["socket"], node=NODE)
    cred = sign_request("POST", "/v1/cap", b'{"watts": 100}', munge["socket"], node=NODE)
    verdict = v.verify(cred, "POST", "/v1/cap", b'{"watts": 250}')
    assert verdict.reason == "payload_mismatch" and "body sha256" in verdict.detail
    cred = sign(b"just some bytes", munge["socket"])
    assert v.verify(cred, "POST", "/v1/cap", b"").reason == "payload_mismatch"


def test_stale_and_garbage_credentials_are_refused(munge):
    cred = sign_request("POST", "/v1/cap", b"", munge["socket"], node=NODE)
    late = Verifier({0}, socket=munge["socket"], ttl_s=60, clock=lambda: time.time() + 120, node=NODE)
    verdict = late.verify(cred, "POST", "/v1/cap", b"")
    assert verdict.reason == "expired" and "ttl 60 s" in verdict.detail
    v = Verifier({0}, socket=munge["socket"], node=NODE)
    assert v.verify("MUNGE:not-a-credential:", "POST", "/v1/cap", b"").reason == "invalid_credential"
    assert v.verify("", "POST", "/v1/cap", b"").reason == "missing_credential"
    gone = Verifier({0}, socket=munge["base"] / "no-such.socket", node=NODE)
    assert gone.verify(cred, "POST", "/v1/cap", b"").reason == "munge_unavailable"


def test_non_root_credential_carries_its_uid(munge, non_root_user):
    cred = sign_as(NON_ROOT, canonical_message("POST", "/v1/cap", b"", node=NODE), munge["socket"])
    assert Verifier({0}, socket=munge["socket"], node=NODE).verify(cred, "POST", "/v1/cap", b"") == (
        non_root_user, "uid_not_allowed", f"uid {non_root_user} is not in [0]")
    cred = sign_as(NON_ROOT, canonical_message("POST", "/v1/cap", b"", node=NODE), munge["socket"])
    assert Verifier({0, non_root_user}, socket=munge["socket"], node=NODE).verify(cred, "POST", "/v1/cap", b"").ok


# --- the agent over HTTP ----------------------------------------------------------------------------------------------
def test_signed_cap_reaches_sysfs_and_metrics(agent):
    answer = agent.client.set_cap(180, request_id="r-1")
    assert answer["ok"] is True and answer["http_status"] == 200 and answer["request_id"] == "r-1"
    assert answer["applied_w"] == {"package-0": 180.0}
    assert answer["state"]["packages"][0]["power_limit_w"] == 180.0
    assert agent.read(LIMIT.format(0)) == "180000000"
    assert agent.sample("wattsched_agent_rapl_power_limit_watts", package="0") == 180.0
    assert agent.sample("wattsched_agent_commands_total", command="cap", outcome="ok") == 1.0
    _, text = agent.get("/metrics")
    families = {f.name: f for f in text_string_to_metric_families(text.decode())}
    [limit] = families["wattsched_agent_rapl_power_limit_watts"].samples
    assert limit.labels == {"package": "0"} and limit.value == 180.0
    assert families["wattsched_agent_rapl_energy_joules"].type == "counter"
    assert families["wattsched_agent_rapl_max_power_watts"].samples[0].value == 250.0
    assert families["wattsched_agent_cpu_max_frequency_hertz"].samples[0].value == 2.4e9


def test_node_cap_is_split_evenly_across_packages(agent2):
    answer = agent2.client.set_cap(300)
    assert answer["ok"] and answer["applied_w"] == {"package-0": 150.0, "package-1": 150.0}
    assert agent2.read(LIMIT.format(0)) == agent2.read(LIMIT.format(1)) == "150000000"
    assert answer["state"]["power_limit_w"] == 300.0
    answer = agent2.client.set_cap(90, package=1)
    assert answer["ok"] and answer["applied_w"] == {"package-1": 90.0}
    assert agent2.read(LIMIT.format(0)) == "150000000" and agent2.read(LIMIT.format(1)) == "90000000"
    answer = agent2.client.set_cap(None)  # lift the cap: each package to its maximum
    assert answer["ok"] and answer["applied_w"] == {"package-0": 250.0, "package-1": 250.0}


def test_node_cap_that_splits_out_of_range_is_refused_whole(agent2):
    answer = agent2.client.set_cap(600)
    assert answer["http_status"] == 422 and answer["ok"] is False
    assert answer["error"] == ("node cap 600 W split over 2 packages: power limit 300 W for package-0 is above its "
                               "maximum 250 W (constraint_0_max_power_uw)")
    assert agent2.read(LIMIT.format(0)) == agent2.read(LIMIT.format(1)) == "200000000"


@pytest.mark.parametrize(("body", "match"), [
    ({"watts": 1000}, "power limit 1000 W for package-0 is above its maximum 250 W"),
    ({"watts": 0.2}, "power limit 0.2 W for package-0 is below the minimum 1 W"),
    ({"watts": -3}, "power limit must be positive, got -3 W"),
    ({"watts": "lots"}, "power limit must be a number of W, got 'lots'"),
    ({"watts": 100, "package": 7}, r"no RAPL package 7 .* \(packages: 0\)"),
])
def test_out_of_range_cap_is_422_and_writes_nothing(agent, body, match):
    import re

    payload = json.dumps(body).encode()
    status, answer = agent.post("/v1/cap", payload, sign_request("POST", "/v1/cap", payload, agent.sock, node=NODE))
    assert status == 422 and answer["ok"] is False and re.search(match, answer["error"])
    assert answer["state"]["packages"][0]["power_limit_w"] == 200.0  # read back: unchanged
    assert agent.read(LIMIT.format(0)) == "200000000"
    assert agent.sample("wattsched_agent_commands_total", command="cap", outcome="invalid") == 1.0


def test_replayed_credential_is_403_and_counted(agent):
    body = b'{"watts": 150}'
    cred = sign_request("POST", "/v1/cap", body, agent.sock, node=NODE)
    assert agent.post("/v1/cap", body, cred)[0] == 200
    agent.client.set_cap(120)
    status, answer = agent.post("/v1/cap", body, cred)
    assert (status, answer) == (403, {"ok": False, "error": "credential refused: replayed"})
    assert agent.read(LIMIT.format(0)) == "120000000"  # the replay changed nothing
    assert agent.sample("wattsched_agent_rejected_requests_total", reason="replayed") == 1.0


def test_missing_credential_is_401_and_counted(agent, caplog):
    status, answer = agent.post("/v1/cap", b'{"watts": 150}')
    assert status == 401 and answer["ok"] is False and "X-Wattsched-Munge" in answer["error"]
    assert agent.read(LIMIT.format(0)) == "200000000"
    assert agent.sample("wattsched_agent_rejected_requests_total", reason="missing_credential") == 1.0
    assert "rejected POST /v1/cap from 127.0.0.1: uid unknown, reason missing_credential" in caplog.text


def test_non_root_credential_is_403_logged_with_its_uid(agent, non_root_user, caplog):
    body = b'{"watts": 150}'
    cred = sign_as(NON_ROOT, canonical_message("POST", "/v1/cap", body, node=NODE), agent.sock)
    status, answer = agent.post("/v1/cap", body, cred)
    assert (status, answer) == (403, {"ok": False, "error": "credential refused: uid_not_allowed"})
    assert agent.read(LIMIT.format(0)) == "200000000"
    assert agent.sample("wattsched_agent_rejected_requests_total", reason="uid_not_allowed") == 1.0
    assert f"uid {non_root_user}, reason uid_not_allowed" in caplog.text


def test_credential_signed_for_other_body_is_403(agent):
    cred = sign_request("POST", "/v1/cap", b'{"watts": 100}', agent.sock, node=NODE)
    status, answer = agent.post("/v1/cap", b'{"watts": 10}', cred)
    assert status == 403 and answer["error"] == "credential refused: payload_mismatch"
    assert agent.sample("wattsched_agent_rejected_requests_total", reason="payload_mismatch") == 1.0


def test_malformed_body_is_400(agent):
    for body in (b"not json", b'{"hz": 1}', b"[1, 2]"):
        status, answer = agent.post("/v1/cap", body, sign_request("POST", "/v1/cap", body, agent.sock, node=NODE))
        expected = ('body is not valid JSON: Expecting value' if body == b"not json"
                    else 'body must be a JSON object with "watts", e.g. {"watts": 200}')
        assert status == 400 and answer["error"].startswith(expected)
    assert agent.sample("wattsched_agent_commands_total", command="cap", outcome="bad_request") == 3.0


def test_set_freq_writes_every_policy_in_khz(agent2):
    answer = agent2.client.set_freq(1.6e9)
    assert answer["ok"] and answer["scaling_max_freq_hz"] == 1.6e9
    assert [agent2.read(POLICY.format(k)) for k in range(4)] == ["1600000"] * 4
    assert agent2.sample("wattsched_agent_cpu_scaling_max_frequency_hertz") == 1.6e9
    answer = agent2.client.set_freq(3e9)
    assert answer["http_status"] == 422 and "above the hardware maximum 2.4e+09 Hz" in answer["error"]
    assert [agent2.read(POLICY.format(k)) for k in range(4)] == ["1600000"] * 4
    answer = agent2.client.set_freq(None)
    assert answer["ok"] and answer["scaling_max_freq_hz"] == 2.4e9
    assert [agent2.read(POLICY.format(k)) for k in range(4)] == ["2400000"] * 4


def test_state_and_unknown_endpoints(agent):
    state = agent.client.state()
    assert state["ok"] and state["http_status"] == 200
    [pkg] = state["packages"]
    assert pkg["name"] == "package-0" and pkg["power_limit_w"] == 200.0 and pkg["max_power_w"] == 250.0
    assert pkg["energy_j"] == 0.0 and state["freq"]["max_freq_hz"] == 2.4e9
    status, answer = agent.post("/v1/nothing", b"{}")
    assert status == 404 and not answer["ok"]


def test_unreadable_energy_comes_back_as_data(agent):
    (agent.root / "class/powercap/intel-rapl:0/energy_uj").unlink()
    state = agent.client.state()
    assert state["ok"] is False and state["packages"][0]["energy_j"] is None
    assert "energy_uj: cannot read" in state["errors"][0]
    status, _ = agent.get("/metrics")
    assert status == 200 and agent.sample("wattsched_agent_sysfs_errors_total") == 1.0


def test_client_against_a_closed_port_raises_agent_error():
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(AgentError, match=rf"^{url}/v1/state: cannot reach the agent: Connection refused"):
        AgentClient(url, NODE, timeout_s=1).state()


# --- the command ------------------------------------------------------------------------------------------------------
def test_allowed_uids(non_root_user):
    assert allowed_uids([5], NON_ROOT) == {0, 5, non_root_user}
    with pytest.raises(ConfigError, match="--slurm-user nosuchuser: no such user"):
        allowed_uids([], "nosuchuser")


def test_agent_command_serves_until_sigterm(tmp_path, munge):
    import argparse

    parser = argparse.ArgumentParser()
    add_commands(parser.add_subparsers())
    args = parser.parse_args(["agent", "--port", "1", "--allow-uid", "7"])
    assert (args.sysfs_root, args.address, args.allow_uid, args.func.__name__) == (
        "/sys", "127.0.0.1", [7], "cmd_agent")

    root = make_fake_node(tmp_path / "sys")
    port = free_port()
    code = ("import argparse, logging, sys\nfrom wattsched.agent.commands import add_commands\n"
            "logging.basicConfig(level=logging.WARNING, format='%(levelname)s %(name)s: %(message)s')\n"
            "p = argparse.ArgumentParser(); add_commands(p.add_subparsers())\n"
            "a = p.parse_args(sys.argv[1:]); sys.exit(a.func(a))\n")
    proc = subprocess.Popen([sys.executable, "-c", code, "agent", "--sysfs-root", str(root), "--address",
                             "127.0.0.1", "--port", str(port), "--munge-socket", str(munge["socket"]),
                             "--node-name", NODE],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        client = AgentClient(f"http://127.0.0.1:{port}", NODE, munge_socket=munge["socket"], timeout_s=2)
        for _ in range(200):
            try:
                client.state()
                break
            except AgentError:
                time.sleep(0.05)
        assert client.set_cap(110)["ok"]
        assert (root / LIMIT.format(0)).read_text() == "110000000\n"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=10)
        assert proc.returncode == 0, err
        assert "signal SIGTERM: stopping" in err and "cap by uid 0" in err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# --- bad input (F33, F34 of the bad-input tour): real sockets against a real agent -------------------------------
def _raw(server: AgentServer, request: bytes, *, wait_s: float = 5.0) -> bytes:
    """Send ``request`` as is and return everything the agent answers before closing (or ``wait_s``)."""
    with socket.create_connection((server.address, server.port), timeout=wait_s) as conn:
        conn.sendall(request)
        chunks = []
        try:
            while chunk := conn.recv(65536):
                chunks.append(chunk)
        except TimeoutError:
            pass
        return b"".join(chunks)


def _post_head(length: int | str, credential: str | None = None) -> bytes:
    cred = f"{HEADER}: {credential}\r\n" if credential else ""
    return (f"POST /v1/cap HTTP/1.1\r\nHost: agent\r\nContent-Type: application/json\r\n{cred}"
            f"Content-Length: {length}\r\n\r\n").encode()


def test_f33_unauthenticated_half_sent_bodies_are_answered_at_once(agent):
    """As many half-sent bodies without a credential as one peer may hold open: each is refused (401) at once, its
    body never awaited. (One more could find the others' handlers not yet ended on a loaded machine, and be refused
    503 by the bound on one peer's connections instead.)"""
    start = time.monotonic()
    conns = []
    for _ in range(MAX_PER_PEER):
        conn = socket.create_connection((agent.server.address, agent.server.port), timeout=5)
        conn.sendall(_post_head(10) + b"{")
        conns.append(conn)
    answers = []
    for conn in conns:  # read to the end: the agent closes the connection (the unread body is no next request)
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
        answers.append(data)
        conn.close()
    assert all(a.startswith(b"HTTP/1.0 401") for a in answers), answers
    assert time.monotonic() - start < 3
    assert agent.sample("wattsched_agent_rejected_requests_total", reason="missing_credential") == MAX_PER_PEER
    # a credential that munged refuses is refused from the headers too
    answer = _raw(agent.server, _post_head(10, "MUNGE:bogus") + b"{")
    assert answer.startswith(b"HTTP/1.0 403") and b"invalid_credential" in answer


def test_f33_idle_sockets_time_out_and_connections_are_capped(tmp_path, munge):
    root = make_fake_node(tmp_path / "sys")
    server = AgentServer(Sysfs(root), Verifier({0}, socket=munge["socket"], node=NODE), port=0,
                         registry=CollectorRegistry(),
                         timeout_s=0.5, max_connections=2)
    assert server.address == "127.0.0.1"  # loopback unless told otherwise
    server.start()
    try:
        # an authenticated command whose body never arrives: 408 after the timeout, the write never happens
        body = b'{"watts": 100}' + b" " * 6
        credential = sign_request("POST", "/v1/cap", body, munge["socket"], node=NODE)
        start = time.monotonic()
        answer = _raw(server, _post_head(len(body), credential) + body[:1])
        assert answer.startswith(b"HTTP/1.0 408") and b"timed out reading the body" in answer, answer
        assert 0.4 < time.monotonic() - start < 4
        # a connection that sends nothing is closed after the timeout
        assert _raw(server, b"") == b""
    finally:
        server.shutdown()
    # the cap on connections, on a server whose timeout outlasts any scheduling delay of a loaded machine
    server = AgentServer(Sysfs(root), Verifier({0}, socket=munge["socket"], node=NODE), port=0,
                         registry=CollectorRegistry(),
                         timeout_s=30, max_connections=2)
    server.start()
    try:
        # two idle connections hold both slots: a third is refused at once with 503
        idle = [socket.create_connection((server.address, server.port), timeout=5) for _ in range(2)]
        time.sleep(0.1)
        third = _raw(server, b"GET /v1/state HTTP/1.1\r\n\r\n", wait_s=2)
        assert third.startswith(b"HTTP/1.1 503") and b"too many connections" in third, third
        for conn in idle:
            conn.close()
        # their handlers read the end of the stream and free the slots, long before the timeout
        deadline = time.monotonic() + 10
        while True:
            try:
                with urllib.request.urlopen(server.url + "/v1/state", timeout=5) as resp:
                    assert resp.status == 200
                    break
            except urllib.error.HTTPError as exc:
                assert exc.code == 503 and time.monotonic() < deadline
                time.sleep(0.1)
    finally:
        server.shutdown()


def test_f34_bad_content_length_and_huge_numbers(agent):
    answer = _raw(agent.server, _post_head(-5, "x"))
    assert answer.startswith(b"HTTP/1.0 400") and b"Content-Length must be a number of bytes from 0 to 65536" in answer
    answer = _raw(agent.server, _post_head("1" * 5000, "x"))
    assert answer.startswith(b"HTTP/1.0 400"), answer[:200]
    limit_before = agent.read(LIMIT.format(0))
    for body, status, message in (
        (b'{"watts": ' + b"9" * 5000 + b"}", 400, "body is not valid JSON: an integer of 5000 digits is out of range"),
        (b'{"watts": ' + b"9" * 400 + b"}", 400, "body is not valid JSON: an integer of 400 digits"),
        (b'{"watts": 1e400}', 422, '"watts" must be a finite number, got inf'),
        (b'{"watts": NaN}', 400, "body is not valid JSON: NaN is not a number"),
    ):
        got, answer = agent.post("/v1/cap", body, sign_request("POST", "/v1/cap", body, agent.sock, node=NODE))
        assert (got, answer["ok"]) == (status, False) and answer["error"].startswith(message), answer
    assert agent.read(LIMIT.format(0)) == limit_before
