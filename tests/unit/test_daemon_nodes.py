"""Node caps and frequencies through the daemon loop: real node agents on loopback, a real munged, SQLite.

The simulated cluster plays Slurm (a fake clock drives it); each of its nodes
has a wattsched agent (``AgentServer`` over a fake RAPL/cpufreq sysfs tree, the
hardware this machine lacks) listening on its own loopback address, and the
daemon reaches them through ``actuator.kind: agent`` with munge-signed
commands, as on a cluster.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from nodepolicy import install_entry_point
from wattsched.agent.auth import Verifier
from wattsched.agent.server import AgentServer
from wattsched.agent.sysfs import Sysfs
from wattsched.config.daemon import DaemonConfig
from wattsched.daemon.loop import Daemon
from wattsched.daemon.metrics import DaemonMetrics
from wattsched.daemon.notify import Notifier
from wattsched.daemon.simcluster import SimCluster
from wattsched.model.plan import Evict, Plan, PowerDown, PowerUp, Reshape, SetNodeCap, Start
from wattsched.model.platform import NodePowerModel, Platform
from wattsched.policies.base import PolicyTags
from wattsched.testing.fake_sysfs import make_fake_node
from wattsched.workload.records import TraceJob

EPOCH = float(int(time.time()))
NODE_POWER = {"idle_w": 100.0, "busy_w": 300.0, "off_w": 10.0, "busy_min_w": 200.0, "cap_min_w": 50.0,
              "cap_max_w": 300.0, "freq_levels_hz": [1.2e9, 1.5e9, 1.8e9, 2.1e9, 2.4e9], "switch_on_s": 20.0,
              "switch_off_s": 5.0}
NODES = 4


class FakeClock:
    def __init__(self):
        self.t = 0.0

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


class AddressedSim(SimCluster):
    """The simulated cluster with each node's NodeAddr on its own loopback address (where its agent listens)."""

    def read_state(self):
        state = super().read_state()
        nodes = [dataclasses.replace(n, address=f"127.0.0.{11 + i}") for i, n in enumerate(state.nodes)]
        return dataclasses.replace(state, nodes=nodes)


# --- munged and the agents --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def munge_socket():
    if not shutil.which("munged"):
        pytest.skip("munge is not installed (apt-get install munge)")
    if os.geteuid() != 0:
        pytest.skip("needs root: starts munged")
    base = Path(tempfile.mkdtemp(prefix="wattsched-munge-"))
    (base / "key").mkdir(mode=0o700)
    (base / "key" / "munge.key").write_bytes(os.urandom(1024))
    os.chmod(base / "key" / "munge.key", 0o400)
    sock = base / "munge.socket"
    subprocess.run(["munged", "--force", f"--socket={sock}", f"--key-file={base / 'key' / 'munge.key'}",
                    f"--pid-file={base / 'munged.pid'}", f"--log-file={base / 'munged.log'}",
                    f"--seed-file={base / 'key' / 'munged.seed'}"], check=True, capture_output=True, timeout=30)
    for _ in range(200):
        if sock.exists():
            break
        time.sleep(0.02)
    yield sock
    with contextlib.suppress(OSError, ValueError):
        os.kill(int((base / "munged.pid").read_text()), signal.SIGTERM)
    shutil.rmtree(base, ignore_errors=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.11", 0))
        return s.getsockname()[1]


@pytest.fixture
def agents(tmp_path, munge_socket):
    """One agent per node on 127.0.0.11.. (same port); returns (port, sysfs roots)."""
    port = _free_port()
    servers, roots = [], []
    names = [n.name for n in Platform.homogeneous_cluster(NODES).nodes]  # the simulated cluster's node names
    for i in range(NODES):
        root = make_fake_node(tmp_path / f"sys{i}", cpus=2, max_power_w=250.0, tdp_w=200.0)
        server = AgentServer(Sysfs(root), Verifier({0}, socket=str(munge_socket), node=names[i]),
                             address=f"127.0.0.{11 + i}", port=port, registry=CollectorRegistry(),
                             energy_period_s=0.0)  # the daemon cycles here faster than the agents' 1 s energy rate
        server.start()
        servers.append(server)
        roots.append(root)
    yield port, roots, servers
    for s in servers:
        s.shutdown()


def cap_of(root: Path) -> float:
    s = Sysfs(root)
    return s.power_limit_w(s.packages()[0])


def freq_of(root: Path) -> float:
    return Sysfs(root).scaling_max_freq_hz()


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def make_daemon(tmp_path, clock, agents, munge_socket, monkeypatch):
    port = agents[0]
    monkeypatch.syspath_prepend(str(install_entry_point(tmp_path / "site")))
    made = []

    def make(jobs=(), store_dir=None, **config):
        config.setdefault("policy", "node-setting")
        config.setdefault("poll_interval_s", 0.01)
        config.setdefault("actuator", {"kind": "agent", "munge_socket": str(munge_socket), "timeout_s": 5})
        config.setdefault("telemetry", {"agent_url": f"http://{{address}}:{port}"})
        cfg = DaemonConfig(node_power=NODE_POWER, state_dir=store_dir or tmp_path / "state", **config)
        sim = AddressedSim(list(jobs), Platform.homogeneous_cluster(NODES, power=NodePowerModel()), speedup=1.0,
                           clock=clock, epoch_s=EPOCH)
        d = Daemon(cfg, sim, metrics=DaemonMetrics(), notifier=Notifier(environ={}))
        made.append(d)
        return d

    yield make
    for d in made:
        d.store.close()


def audit(d: Daemon, action: str | None = None):
    return [e for e in d.store.audit_since(0) if action is None or e.action == action]


def intents(d: Daemon, action: str) -> list[tuple[str, str]]:
    return list(d.store.db.execute("SELECT target, outcome FROM intents WHERE action=? ORDER BY id", (action,)))


def sample(d: Daemon, name: str, labels: dict | None = None) -> float | None:
    return d.metrics.registry.get_sample_value(name, labels or {})


# --- tests ------------------------------------------------------------------------------------------------------------
def test_policy_sees_next_cycle_the_caps_and_frequencies_it_set(make_daemon, agents, clock):
    _, roots, _ = agents
    d = make_daemon()
    d.cycle()
    assert cap_of(roots[0]) == pytest.approx(150.0) and freq_of(roots[1]) == pytest.approx(1.5e9)
    assert cap_of(roots[2]) == pytest.approx(200.0)  # untouched
    assert [(e.target, e.outcome) for e in audit(d, "set_cap")] == [("node0000", "applied")]
    assert [(e.target, e.outcome) for e in audit(d, "set_freq")] == [("node0001", "applied")]
    clock.advance(10)
    d.cycle()
    seen = d.policy_state
    assert seen.seen_caps["0"] == pytest.approx(150.0)
    assert seen.seen_freqs["1"] == pytest.approx(1.5e9)
    # the other nodes are read back too: their firmware limit (200 W of a 250 W package) is a cap
    assert seen.seen_caps["2"] == pytest.approx(200.0) and "2" not in seen.seen_freqs
    assert seen.seen_desired_caps == {"0": 150.0}  # what wattsched set, beside what the nodes hold
    # seeing its settings in place, the policy asked for nothing more
    assert intents(d, "set_cap") == [("node0000", "applied")] and len(intents(d, "set_freq")) == 1
    assert sample(d, "wattsched_node_cap_watts", {"node": "node0000"}) == 150.0


def test_a_cap_changed_behind_the_daemons_back_is_set_again_and_audited(make_daemon, agents, clock):
    _, roots, _ = agents
    d = make_daemon(params={"freq_hz": None})
    d.cycle()
    s = Sysfs(roots[0])
    s.set_power_limit_w(s.packages()[0], 240.0)  # an administrator, or the firmware
    clock.advance(10)
    report = d.cycle()
    assert report.reconciled == ["set_cap node0000"]
    assert cap_of(roots[0]) == pytest.approx(150.0)
    rows = audit(d, "set_cap")
    assert [r.outcome for r in rows] == ["applied", "applied"]
    assert "drifted: the node holds 240 W, wattsched set 150 W" in rows[1].reason
    assert sample(d, "wattsched_node_setting_drift_total", {"kind": "cap"}) == 1.0
    clock.advance(10)
    assert d.cycle().reconciled == []  # in place: nothing to do


def test_kill_between_the_cap_write_and_its_record_applies_nothing_twice(make_daemon, agents, clock, tmp_path):
    _, roots, _ = agents
    d = make_daemon(params={"freq_hz": None})

    class Killed(BaseException):
        pass

    inner = d.actuator.set_cap

    def dies_after_writing(node, value, request_id):
        inner(node, value, request_id)
        raise Killed  # the process dies here: the node holds the cap, the store does not know

    d.actuator.set_cap = dies_after_writing
    with pytest.raises(Killed):
        d.cycle()
    assert cap_of(roots[0]) == pytest.approx(150.0)
    assert intents(d, "set_cap") == [("node0000", "pending")]
    assert [e.outcome for e in audit(d, "set_cap")] == ["pending"]  # the audit says what was attempted
    d.store.close()
    clock.advance(10)
    d2 = make_daemon(params={"freq_hz": None})
    d2.cycle()
    assert intents(d2, "set_cap") == [("node0000", "reconciled:applied")]
    rows = audit(d2, "set_cap")
    assert [r.outcome for r in rows] == ["reconciled:applied"] and "150 W" in rows[0].reason
    assert cap_of(roots[0]) == pytest.approx(150.0)
    assert d2.policy_state.seen_caps["0"] == pytest.approx(150.0)


def test_a_start_applies_its_cap_and_frequency_before_the_release_and_undoes_them_after(make_daemon, agents, clock):
    _, roots, _ = agents
    jobs = [TraceJob(id=1, submit_s=0.0, runtime_s=50.0, walltime_s=100.0, procs=1, nodes=1, user="u",
                     mean_w=200.0, max_w=210.0, std_w=1.0)]
    d = make_daemon(jobs, params={"cap_w": None, "freq_hz": None, "start_cap_w": 120.0, "start_freq_hz": 1.8e9})
    clock.advance(1)
    report = d.cycle()
    assert report.started == [1]
    node = d.backend.jobs[1].nodes[0] if d.backend.jobs[1].nodes else d.store.starts()[1][0][0]
    i = int(node[-1])
    assert cap_of(roots[i]) == pytest.approx(120.0) and freq_of(roots[i]) == pytest.approx(1.8e9)
    order = [e.action for e in audit(d) if e.target in (node, "1")]
    assert order[:3] == ["set_cap", "set_freq", "start"], order  # settings first, then the release
    clock.advance(5)
    d.cycle()
    running = d.last_view.snapshot.running[1]
    assert (running.cap_w, running.freq_hz) == (pytest.approx(120.0), pytest.approx(1.8e9))
    for _ in range(10):
        clock.advance(20)
        d.cycle()
    assert d.backend.finished == 1
    # the job is gone: its node goes back to what it had before (uncapped, nominal frequency)
    assert cap_of(roots[i]) == pytest.approx(250.0) and freq_of(roots[i]) == pytest.approx(2.4e9)
    assert d.store.desired() == {}


def test_a_start_whose_cap_cannot_be_applied_is_refused_with_the_reason(make_daemon, agents, clock):
    _, _roots, servers = agents
    for s in servers:
        s.shutdown()
    jobs = [TraceJob(id=1, submit_s=0.0, runtime_s=50.0, walltime_s=100.0, procs=1, nodes=1, user="u",
                     mean_w=200.0, max_w=210.0, std_w=1.0)]
    d = make_daemon(jobs, params={"cap_w": None, "freq_hz": None, "start_cap_w": 120.0})
    clock.advance(1)
    report = d.cycle()
    assert report.started == [] and report.failed_actions
    refused = [e for e in audit(d, "start") if e.outcome == "refused"]
    assert refused and "set_cap on node" in refused[0].reason and "job left held" in refused[0].reason
    assert sample(d, "wattsched_node_actuation_failures_total", {"kind": "cap"}) == 1.0
    assert d.backend.jobs[1].held


def test_dry_run_reads_the_nodes_and_changes_nothing(make_daemon, agents, clock):
    _, roots, _ = agents
    d = make_daemon(dry_run=True)
    d.cycle()
    clock.advance(10)
    d.cycle()
    assert cap_of(roots[0]) == pytest.approx(200.0) and freq_of(roots[1]) == pytest.approx(2.4e9)
    assert {e.outcome for e in audit(d, "set_cap")} == {"dry-run"}
    assert d.store.desired() == {}
    assert d.policy_state.seen_caps["0"] == pytest.approx(200.0)  # observed through the agents


class Scripted:
    """A policy returning a given plan per call (the daemon's dispatch of every action kind)."""

    name = "scripted"

    def tags(self):
        return PolicyTags(wants_empty_queue_calls=True)

    def __init__(self, plans):
        self.plans = list(plans)

    def init_state(self):
        return {}

    def decide(self, snapshot, state=None):
        return self.plans.pop(0) if self.plans else Plan()


def test_every_action_kind_is_applied_or_refused_through_a_cycle(make_daemon, agents, clock):
    jobs = [TraceJob(id=i, submit_s=0.0, runtime_s=500.0, walltime_s=1000.0, procs=1, nodes=1, user="u",
                     mean_w=200.0, max_w=210.0, std_w=1.0) for i in (1, 2)]
    d = make_daemon(jobs, policy="easy", evict="cancel")
    d.policy = Scripted([
        Plan([Start(1, (3,)), Start(2, (2,)), SetNodeCap(1, 140.0), PowerDown(0)]),
        Plan([Evict(1, requeue=False), PowerUp(0)]),
        Plan([Reshape(2, (2, 1))]),  # Slurm cannot move a running job: the guard refuses it live
    ])
    clock.advance(1)
    d.cycle()
    clock.advance(10)
    d.cycle()
    clock.advance(30)
    d.cycle()
    outcomes = {(e.action, e.target): e.outcome for e in audit(d)}
    assert outcomes[("start", "1")] == outcomes[("start", "2")] == "applied"
    assert outcomes[("set_cap", "node0001")] == "applied"
    assert outcomes[("power_down", "node0000")] == outcomes[("power_up", "node0000")] == "applied"
    assert outcomes[("cancel", "1")] == "applied"
    rejected = [e for e in audit(d, "plan") if e.outcome == "rejected"]
    assert len(rejected) == 1 and "Reshape of job 2, which is not malleable" in rejected[0].reason
    assert 1 not in {jid for jid, j in d.backend.jobs.items() if j.state == "RUNNING"}


def test_audit_rows_of_slurm_actions_are_written_before_the_action(make_daemon, agents, clock, tmp_path):
    jobs = [TraceJob(id=1, submit_s=0.0, runtime_s=50.0, walltime_s=100.0, procs=1, nodes=1, user="u",
                     mean_w=200.0, max_w=210.0, std_w=1.0)]
    d = make_daemon(jobs, policy="easy")
    seen = []
    release = d.backend.release

    def watching(job_id, nodes, comment):
        db = sqlite3.connect(tmp_path / "state" / "state.db")
        seen.extend(db.execute("SELECT action, target, outcome FROM audit WHERE action='start'"))
        db.close()
        release(job_id, nodes, comment)

    d.backend.release = watching
    clock.advance(1)
    d.cycle()
    assert seen == [("start", "1", "pending")]
    assert [(e.target, e.outcome) for e in audit(d, "start")] == [("1", "applied")]


def test_energy_budgets_count_the_nodes_energy_counters_when_every_node_has_them(make_daemon, agents, clock):
    from wattsched.testing.fake_sysfs import advance_energy

    _, roots, servers = agents
    budget = [{"start_s": EPOCH - 3600, "end_s": EPOCH + 86400, "energy_j": 1e6, "label": "today"}]
    d = make_daemon(params={"cap_w": None, "freq_hz": None}, energy_budgets=budget)
    d.cycle()
    for i, root in enumerate(roots):
        advance_energy(root, 0, 1000.0 * (i + 1))  # 10 kJ in all, whatever the power model says
    clock.advance(10)
    d.cycle()
    assert d.last_view.snapshot.budgets[0].consumed_j == pytest.approx(10000.0)
    assert sample(d, "wattsched_energy_budget_source", {"wattsched_energy_budget_source": "counters"}) == 1.0
    # a node without counters (its agent is down): power × time for the whole platform
    servers[3].shutdown()
    clock.advance(10)
    d.cycle()
    power = d.last_view.snapshot.platform_power_w
    assert d.last_view.snapshot.budgets[0].consumed_j == pytest.approx(10000.0 + 10 * power, rel=0.3)
    # no telemetry configured here: that platform power is the estimate
    assert sample(d, "wattsched_energy_budget_source", {"wattsched_energy_budget_source": "estimate"}) == 1.0


def test_a_rapl_offset_puts_the_nodes_power_outside_its_packages_off_the_cap_and_back_on_its_reading(
        make_daemon, agents, clock, munge_socket):
    _, roots, _ = agents
    actuator = {"kind": "agent", "munge_socket": str(munge_socket), "timeout_s": 5, "rapl_offset_w": 56.0}
    d = make_daemon(params={"freq_hz": None}, actuator=actuator)
    d.cycle()
    # the policy's node cap of 150 W is a packages' limit of 94 W (56 W of base and memory outside them)
    assert cap_of(roots[0]) == pytest.approx(94.0)
    clock.advance(10)
    d.cycle()
    assert d.policy_state.seen_caps["0"] == pytest.approx(150.0)  # read back as the node cap it is
    assert intents(d, "set_cap") == [("node0000", "applied")]  # in place: not set again


def test_the_rapl_offset_defaults_to_an_overprovisioned_platforms_base_and_memory_power(tmp_path):
    from wattsched.config.daemon import ActuatorConfig, TelemetryConfig
    from wattsched.daemon.actuators import make_actuator

    telemetry = TelemetryConfig(agent_url="http://{address}:9818")
    assert make_actuator(ActuatorConfig(kind="agent"), telemetry, platform_offset_w=56.0).rapl_offset_w == 56.0
    given = make_actuator(ActuatorConfig(kind="agent", rapl_offset_w=0.0), telemetry, platform_offset_w=56.0)
    assert given.rapl_offset_w == 0.0
    cfg = DaemonConfig(platform="sarood-testbed", state_dir=tmp_path / "state", actuator={"kind": "agent"},
                       telemetry={"agent_url": "http://{address}:9818"}, metrics={"port": 0})
    sim = AddressedSim([], Platform.homogeneous_cluster(NODES, power=NodePowerModel()), speedup=1.0,
                       clock=FakeClock(), epoch_s=EPOCH)
    d = Daemon(cfg, sim, metrics=DaemonMetrics(), notifier=Notifier(environ={}))
    try:
        assert d.actuator.rapl_offset_w == 56.0  # 38 W base + 18 W memory
    finally:
        d.store.close()
