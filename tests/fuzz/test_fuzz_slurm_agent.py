"""Slurm output parsers and the node agent's HTTP API under fuzzing.

Parsers: any text gives records or a SlurmOutputError. Agent: any request gets an HTTP answer (never a 500
"internal error", never a hang), and a command changes sysfs only when it is valid and authenticated.
"""

from __future__ import annotations

import copy
import json
import socket
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from fuzz.strategies import JSON, NUMBERS, TOKENS
from wattsched.agent.auth import HEADER, Verifier, sign_request
from wattsched.agent.server import AgentServer
from wattsched.agent.sysfs import Sysfs
from wattsched.daemon.slurm.parse import (
    SlurmOutputError,
    parse_nodes_json,
    parse_scontrol_jobs_text,
    parse_scontrol_nodes_text,
    parse_squeue_json,
)
from wattsched.testing.fake_sysfs import make_fake_node

JOB = {"job_id": 7, "job_state": ["PENDING"], "user_name": "alice", "partition": "batch", "node_count": 2,
       "cpus": 8, "time_limit": {"set": True, "infinite": False, "number": 60}, "submit_time": {"number": 1700000000},
       "nodes": "", "priority": 100, "tres_per_node": "gres/gpu:2"}
NODE = {"name": "n1", "state": ["IDLE"], "cpus": 32, "real_memory": 1000, "features": ["a"], "partitions": ["batch"],
        "energy": {"current_watts": {"set": True, "number": 200}}}


def parses(fn, text):
    try:
        return fn(text)
    except SlurmOutputError as exc:
        assert str(exc)
        return exc


@given(st.lists(st.tuples(st.sampled_from(sorted(JOB)), JSON), max_size=4), st.integers(0, 3))
def test_squeue_json_with_damaged_fields(changes, copies):
    job = copy.deepcopy(JOB)
    for key, value in changes:
        job[key] = value
    result = parses(parse_squeue_json, json.dumps({"jobs": [job] * copies, "meta": {}}))
    if not isinstance(result, SlurmOutputError):
        jobs, _ = result
        assert all(j.job_id >= 1 and j.node_count >= 0 and j.cpus >= 0 for j in jobs)


@given(st.lists(st.tuples(st.sampled_from(sorted(NODE)), JSON), max_size=4), st.integers(0, 3))
def test_nodes_json_with_damaged_fields(changes, count):
    nodes = []
    for i in range(count):
        node = copy.deepcopy(NODE)
        node["name"] = f"n{i}"
        for key, value in changes:
            node[key] = value
        nodes.append(node)
    result = parses(parse_nodes_json, json.dumps({"nodes": nodes}))
    if not isinstance(result, SlurmOutputError):
        parsed, _ = result
        assert all(n.current_watts is None or 0 < n.current_watts <= 1e6 for n in parsed)


@given(st.one_of(st.text(max_size=200), JSON.map(json.dumps),
                 st.sampled_from(['{"jobs": [{"job_id": 1e999}]}', '{"nodes": NaN}', "[" * 5000, '{"jobs": -1}'])))
def test_json_parsers_on_any_text(text):
    parses(parse_squeue_json, text)
    parses(parse_nodes_json, text)


KEYS = ["JobId", "JobState", "NumCPUs", "NumNodes", "TimeLimit", "SubmitTime", "NodeList", "Priority", "UserId",
        "NodeName", "State", "CPUTot", "CurrentWatts", "RealMemory", "Reason", "Partitions", "Gres"]


@given(st.lists(st.lists(st.tuples(st.sampled_from(KEYS), st.one_of(TOKENS, NUMBERS)), max_size=6), max_size=4),
       st.text(max_size=40))
def test_scontrol_text_parsers(records, noise):
    text = "\n".join(" ".join(f"{k}={v}" for k, v in record) for record in records) + noise
    parses(parse_scontrol_jobs_text, text)
    parses(parse_scontrol_nodes_text, text)


# --------------------------------------------------------------------------- agent


@pytest.fixture(scope="module")
def agent(munge_socket):
    root = make_fake_node(Path(tempfile.mkdtemp(prefix="wattsched-fuzz-sys-")) / "sys", packages=2, cpus=2)
    server = AgentServer(Sysfs(root), Verifier({0}, socket=munge_socket, node="fuzz"), port=0,
                         registry=CollectorRegistry(), timeout_s=1.0)
    server.start()
    yield server, root, munge_socket
    server.shutdown()


def _exchange(server: AgentServer, request: bytes) -> bytes:
    with socket.create_connection((server.address, server.port), timeout=5) as conn:
        conn.sendall(request)
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
    return data


HEADERS = st.dictionaries(st.sampled_from(["Content-Length", "Content-Type", "Accept", "X-Other", HEADER]),
                          st.one_of(NUMBERS, st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126),
                                                     max_size=20)), max_size=4)


@given(st.sampled_from(["GET", "POST", "PUT", "HEAD", "BREW"]),
       st.sampled_from(["/metrics", "/v1/state", "/v1/cap", "/v1/freq", "/nope", "/v1/cap?x=1", "*"]),
       HEADERS, st.binary(max_size=64))
def test_agent_answers_any_request(agent, method, path, headers, body):
    server, _, _ = agent
    head = f"{method} {path} HTTP/1.1\r\nHost: agent\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    answer = _exchange(server, head.encode() + b"\r\n" + body)
    if answer:  # a request the stdlib cannot even parse may be closed with no answer
        status = int(answer.split(b" ", 2)[1])
        assert status != 500 and b"internal error" not in answer, answer[:300]


BODIES = st.one_of(
    st.fixed_dictionaries({"watts": st.one_of(JSON, st.integers(), st.floats())},
                          optional={"package": JSON, "request_id": JSON}).map(lambda d: json.dumps(d).encode()),
    st.fixed_dictionaries({"hz": st.one_of(JSON, st.integers(), st.floats())}).map(lambda d: json.dumps(d).encode()),
    st.sampled_from([b'{"watts": 1e999}', b'{"watts": ' + b"9" * 5000 + b"}", b'{"watts": NaN}', b"[" * 3000]),
    st.binary(max_size=40),
)


@given(st.sampled_from(["/v1/cap", "/v1/freq"]), BODIES)
def test_agent_authenticated_commands(agent, path, body):
    """Signed commands with any body: 200 with the values written, or a 4xx answer and nothing written."""
    server, root, sock = agent
    limits = [root / f"class/powercap/intel-rapl:{i}/constraint_0_power_limit_uw" for i in range(2)]
    before = [p.read_text() for p in limits]
    credential = sign_request("POST", path, body, sock, node="fuzz")
    head = (f"POST {path} HTTP/1.1\r\nHost: agent\r\n{HEADER}: {credential}\r\nContent-Length: {len(body)}\r\n"
            "\r\n").encode()
    answer = _exchange(server, head + body)
    status = int(answer.split(b" ", 2)[1])
    assert status in (200, 400, 422), answer[:400]
    if status != 200 and path == "/v1/cap":
        assert [p.read_text() for p in limits] == before
