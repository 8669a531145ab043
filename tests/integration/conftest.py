"""Fixtures for the live tests: a real multi-node Slurm (deploy/testcluster) and the daemon as a process.

The cluster is brought up once per session (4 nodes of 2 cores, the lua gate
installed) and torn down at the end. These tests need root (network namespaces,
munged, slurmd) and Debian's Slurm packages, which deploy/testcluster installs.
"""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from wattsched.agent.sysfs import Sysfs
from wattsched.daemon.slurm.parse import parse_nodes_json, parse_squeue_json

ROOT = Path(__file__).resolve().parents[2]
TESTCLUSTER = ROOT / "deploy" / "testcluster"
NODES = 4
PREFIX = "wst"
PROM_PORT = 9190
DAEMON_METRICS_PORT = 9917
DBD_PORT = 6919
REST_PORT = 6920


def _why_not() -> str | None:
    if sys.platform != "linux":
        return "the test cluster needs Linux network namespaces"
    if os.geteuid() != 0:
        return "the test cluster needs root (network namespaces, munged, slurmd)"
    if shutil.which("ip") is None or shutil.which("nsenter") is None:
        return "iproute2 and util-linux (ip, nsenter) are needed"
    if shutil.which("apt-get") is None and shutil.which("slurmctld") is None:
        return "Slurm is not installed and apt-get is not available to install it"
    return None


class Cluster:
    """The running test cluster: Slurm commands with its SLURM_CONF, job and node views through wattsched's parsers."""

    def __init__(self, directory: Path):
        self.dir = directory
        self.conf = directory / "etc" / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        self.heartbeat = directory / "state" / "wattsched" / "heartbeat"
        self.nodes = [f"{PREFIX}{i}" for i in range(1, NODES + 1)]
        self.prometheus = f"http://127.0.0.1:{PROM_PORT}"
        self.sysfs = directory / "sysfs"
        self.munge_socket = directory / "munge" / "munge.socket"

    def address(self, node: str) -> str:
        return f"10.199.8.{10 + int(node[len(PREFIX):])}"

    def prom_query(self, expr: str) -> list:
        import json
        import urllib.parse
        import urllib.request

        data = urllib.parse.urlencode({"query": expr}).encode()
        with urllib.request.urlopen(f"{self.prometheus}/api/v1/query", data=data, timeout=10) as r:
            body = json.load(r)
        assert body["status"] == "success", body
        return body["data"]["result"]

    def run(self, *args: str, check: bool = True, user: str | None = None) -> subprocess.CompletedProcess:
        cmd = list(args)
        if user is not None:
            cmd = ["runuser", "-u", user, "--", *cmd]
        proc = subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=60)
        if check and proc.returncode != 0:
            raise AssertionError(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip()}")
        return proc

    def submit(self, nodes: int = 1, seconds: float = 5, *, time_limit_min: int = 2, user: str | None = None,
               extra: tuple[str, ...] = ()) -> int:
        out = self.run("sbatch", "--parsable", "-N", str(nodes), "-t", str(time_limit_min), "-o", "/dev/null",
                       *extra, "--wrap", f"sleep {seconds}", user=user).stdout
        return int(out.strip().split(";")[0])

    def jobs(self) -> dict:
        jobs, _ = parse_squeue_json(self.run("squeue", "--json").stdout)
        return {j.job_id: j for j in jobs}

    def active(self) -> dict:
        """Jobs not finished (22.05's squeue --json also lists finished jobs until MinJobAge)."""
        return {i: j for i, j in self.jobs().items() if j.state in ("PENDING", "RUNNING", "COMPLETING", "SUSPENDED")}

    def node_states(self) -> dict:
        nodes, _ = parse_nodes_json(self.run("sinfo", "--json").stdout)
        return {n.name: n for n in nodes}

    def fresh_heartbeat(self) -> None:
        self.heartbeat.parent.mkdir(parents=True, exist_ok=True)
        self.heartbeat.write_text(f"{int(time.time())}\n")

    def stale_heartbeat(self) -> None:
        self.heartbeat.parent.mkdir(parents=True, exist_ok=True)
        self.heartbeat.write_text(f"{int(time.time()) - 3600}\n")

    def power_up_all(self) -> bool:
        """Ask Slurm to power up every node that is powered down (or on its way there); True when none is.

        A POWER_UP sent while a node is still powering down is not remembered by
        Slurm (22.05), so callers repeat this until it returns True.
        """
        settled = True
        for name, node in self.node_states().items():
            if node.powered_off or node.powering_down:
                settled = False
                self.run("scontrol", "update", f"nodename={name}", "state=power_up", check=False)
            elif node.powering_up:
                settled = False
        return settled

    def reset(self) -> None:
        """No jobs, every node idle and up, heartbeat stale (gate open)."""
        self.stale_heartbeat()
        self.run("scancel", "--full", "-u", "root", check=False)
        self.run("scancel", "--full", "-u", "alice", check=False)
        for name, node in self.node_states().items():
            if node.drained or node.down:
                self.run("scontrol", "update", f"nodename={name}", "state=resume", check=False)
        wait_for(lambda: self.power_up_all() and not self.active() and all(
            n.state == "IDLE" and not n.flags for n in self.node_states().values()), 120, "cluster idle", interval_s=1)


def cap_w(cluster, node: str) -> float:
    """The node's RAPL long-term limit, summed over its packages, as its fake sysfs holds it."""
    s = Sysfs(cluster.sysfs / node)
    return sum(s.power_limit_w(p) for p in s.packages())


def freq_hz(cluster, node: str) -> float:
    """The node's frequency ceiling (scaling_max_freq) as its fake sysfs holds it."""
    return Sysfs(cluster.sysfs / node).scaling_max_freq_hz()


def agent_metrics(cluster, node: str) -> dict[str, float]:
    """The node agent's ``/metrics`` (served in the node's namespace), by sample name summed over labels."""
    from prometheus_client.parser import text_string_to_metric_families

    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(f"http://{cluster.address(node)}:9818/metrics", timeout=10) as r:
        text = r.read().decode()
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[sample.name] = out.get(sample.name, 0.0) + sample.value
    return out


def rows(db: Path, sql: str, args: tuple = ()) -> list[tuple]:
    """Rows of the daemon's state store; none while the daemon has not created it (or its tables)."""
    if not db.exists():
        return []
    con = sqlite3.connect(db)
    try:
        return list(con.execute(sql, args))
    except sqlite3.OperationalError:  # the daemon has not created its tables yet
        return []
    finally:
        con.close()


def completed(db: Path, timeout_s: float = 15.0) -> None:
    """Wait until the daemon has no command in flight: each intent it wrote ahead (``pending``, with its audit row)
    before a command is completed once the command has answered. What a test sees on the cluster (a node's cap, a
    job running) can come a moment before the daemon's store records it."""
    wait_for(lambda: rows(db, "SELECT count(*) FROM intents WHERE outcome='pending'") == [(0,)], timeout_s,
             "the daemon's commands in flight to complete")


def cycle_no(db: Path) -> int:
    """The daemon's last cycle number, from its state store (0 before the first)."""
    import json

    found = rows(db, "SELECT value FROM kv WHERE key='cycle'")
    return int(json.loads(found[0][0])) if found else 0


def wait_for(predicate, timeout_s: float, what: str, interval_s: float = 0.25):
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")
        time.sleep(interval_s)


@pytest.fixture(scope="session")
def cluster_session(tmp_path_factory):
    reason = _why_not()
    if reason:
        pytest.skip(reason)
    directory = Path(os.environ.get("WATTSCHED_TESTCLUSTER_DIR", "/tmp/wattsched-testcluster-pytest"))
    # one test session at a time owns the cluster (another pytest run on this machine waits here)
    import fcntl

    lock = open(f"{directory}.lock", "w")  # noqa: SIM115
    fcntl.flock(lock, fcntl.LOCK_EX)
    env = {**os.environ, "WS_TC_DIR": str(directory), "WS_TC_BRIDGE": "wsbrt0", "WS_TC_SUBNET": "10.199.8",
           "WS_TC_PREFIX": PREFIX, "WS_TC_CTLD_PORT": "6917", "WS_TC_PYTHON": sys.executable,
           "WS_TC_PROM_PORT": str(PROM_PORT), "WS_TC_DAEMON_PORT": str(DAEMON_METRICS_PORT),
           "WS_TC_IDLE_W": "100", "WS_TC_BUSY_W": "250",
           "WS_TC_DBD_PORT": str(DBD_PORT), "WS_TC_REST_PORT": str(REST_PORT), "WS_TC_ACCT_USERS": "root alice"}
    subprocess.run([str(TESTCLUSTER / "down")], env=env, capture_output=True, timeout=120)
    proc = subprocess.run([str(TESTCLUSTER / "up"), "--nodes", str(NODES), "--gate", "lua"], env=env,
                          capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        pytest.fail(f"deploy/testcluster/up failed:\n{proc.stdout}\n{proc.stderr}")
    if subprocess.run(["id", "alice"], capture_output=True).returncode != 0:
        subprocess.run(["useradd", "--no-create-home", "alice"], check=True)
    cluster = Cluster(directory)
    cluster.up_env = env
    yield cluster
    if not os.environ.get("WATTSCHED_TESTCLUSTER_KEEP"):
        subprocess.run([str(TESTCLUSTER / "down")], env=env, capture_output=True, timeout=120)
    lock.close()


@pytest.fixture
def cluster(cluster_session):
    cluster_session.reset()
    return cluster_session


ACCOUNTING_DAEMONS = ("mariadbd", "slurmdbd", "slurmrestd")


def _running(pid: int) -> bool:
    """The process runs (a zombie, ended but not yet reaped, does not)."""
    try:
        return "\nState:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


@pytest.fixture
def accounting(cluster):
    """The session cluster with job accounting for one test (``deploy/testcluster/up --accounting``): MariaDB,
    slurmdbd and slurmrestd (JWT), so ``sacct`` and ``/slurmdb`` answer. Returns slurmrestd's URL.

    Accounting is opt-in: the other tests run on the cluster without it, as they always did. Turning it on and off
    restarts slurmctld (about 9 s each); afterwards MariaDB, slurmdbd and slurmrestd are gone.

    With accounting comes energy accounting: each slurmd restarts in a mount namespace of its own where
    acct_gather_energy/ibmaem reads the node's emulated AEM meter (see deploy/testcluster/up --help), and jobs
    get an extern step (``PrologFlags=Contain``) whose energy is the job's ``ConsumedEnergyRaw``.
    """
    up = [str(TESTCLUSTER / "up"), "--nodes", str(NODES), "--gate", "lua"]
    env = {**cluster.env, **cluster.up_env}
    proc = subprocess.run([*up, "--accounting"], env=env, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        # back to the cluster the other tests expect before failing
        subprocess.run(up, env=env, capture_output=True, timeout=600)
        pytest.fail(f"deploy/testcluster/up --accounting failed:\n{proc.stdout}\n{proc.stderr}")
    pids = {d: int((cluster.dir / "run" / f"{d}.pid").read_text()) for d in ACCOUNTING_DAEMONS}
    # every slurmd gathers energy from its node's meter, which only its own mount namespace shows
    for i in range(1, NODES + 1):
        slurmd = int((cluster.dir / "run" / f"slurmd-{PREFIX}{i}.pid").read_text())
        assert os.readlink(f"/proc/{slurmd}/ns/mnt") != os.readlink("/proc/self/ns/mnt"), f"slurmd of {PREFIX}{i}"
        meter = Path(f"/proc/{slurmd}/root/sys/devices/platform/aem.0/energy1_input")
        assert int(meter.read_text()) > 0, meter
    assert not Path("/sys/devices/platform/aem.0").exists()
    # MariaDB on its unix socket under the cluster's directory only; slurmdbd.conf as slurmdbd requires it
    listening = subprocess.run(["ss", "-H", "-ltnp"], capture_output=True, text=True, check=True).stdout
    assert f"pid={pids['mariadbd']}," not in listening, listening
    assert (cluster.dir / "mysql" / "mysqld.sock").is_socket()
    dbd_conf = (cluster.dir / "etc" / "slurmdbd.conf").stat()
    assert (dbd_conf.st_mode & 0o777, dbd_conf.st_uid) == (0o600, 0)
    yield f"http://127.0.0.1:{REST_PORT}"
    proc = subprocess.run(up, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"deploy/testcluster/up (accounting off) failed:\n{proc.stderr}"
    left = {d: pid for d, pid in pids.items() if _running(pid)}
    assert not left, f"accounting daemons left running after up without --accounting: {left}"
    conf = cluster.conf.read_text()
    assert "AccountingStorageType=accounting_storage/none" in conf
    # and no energy accounting: each slurmd restarted as before, in the host's mount namespace
    assert "JobAcctGatherType=jobacct_gather/none" in conf and "AcctGatherEnergyType" not in conf
    host_mnt = os.readlink("/proc/self/ns/mnt")
    for pidfile in (cluster.dir / "run").glob("slurmd-*.pid"):
        assert os.readlink(f"/proc/{int(pidfile.read_text())}/ns/mnt") == host_mnt, pidfile.name


class DaemonProcess:
    """``wattsched daemon`` as a separate process, as systemd would run it."""

    def __init__(self, config: Path, log: Path, args: tuple[str, ...] = (), env: dict | None = None):
        self.config, self.log = config, log
        self.args = args
        self.env = env
        self.proc: subprocess.Popen | None = None

    def start(self) -> DaemonProcess:
        self.logf = open(self.log, "a")  # noqa: SIM115
        self.proc = subprocess.Popen([sys.executable, "-m", "wattsched", "-v", "daemon", "-c", str(self.config),
                                      *self.args], stdout=self.logf, stderr=subprocess.STDOUT, env=self.env)
        return self

    def send(self, sig) -> None:
        self.proc.send_signal(sig)

    def stop(self, sig=signal.SIGTERM, timeout_s: float = 30) -> int:
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout_s)
        finally:
            self.logf.close()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def text(self) -> str:
        return self.log.read_text()


@pytest.fixture
def daemon_config(tmp_path, cluster):
    """Write a daemon config for the test cluster; returns a function taking overrides."""

    def make(**overrides) -> Path:
        config = {
            "kind": "daemon", "policy": "easy", "poll_interval_s": 1.0, "state_dir": str(tmp_path / "state"),
            # Slurm may take a few seconds to start a released job; at one cycle a second the default
            # of 3 cycles would take jobs back that are about to start
            "start_timeout_cycles": 10,
            "heartbeat_file": str(cluster.heartbeat), "partitions": ["batch"],
            "node_power": {"idle_w": 100.0, "busy_w": 300.0, "off_w": 10.0},
            "slurm": {"conf": str(cluster.conf), "timeout_s": 10, "retries": 1, "retry_backoff_s": 0.5},
            "metrics": {"port": 0},
        }
        for key, value in overrides.items():
            if isinstance(value, dict) and isinstance(config.get(key), dict):
                config[key] = {**config[key], **value}
            else:
                config[key] = value
        path = tmp_path / "wattsched.yaml"
        path.write_text(yaml.safe_dump(config))
        return path

    return make


@pytest.fixture
def daemon(tmp_path):
    started: list[DaemonProcess] = []

    def start(config: Path, *args: str, env: dict | None = None) -> DaemonProcess:
        d = DaemonProcess(config, tmp_path / "daemon.log", args, env).start()
        started.append(d)
        return d

    yield start
    for d in started:
        d.stop(signal.SIGKILL)


@pytest.fixture
def agent_daemon(cluster, daemon_config, daemon):
    """Start the daemon with a policy and the agent actuator (munge-signed commands to the nodes' agents).

    Returns ``start(policy, params, env=None, **config)``. Afterwards the daemons
    are stopped and every node gets back the cap and frequency it had.
    """
    before = {n: (cap_w(cluster, n), freq_hz(cluster, n)) for n in cluster.nodes}
    started = []

    def start(policy: str, params: dict, env: dict | None = None, **config) -> DaemonProcess:
        config.setdefault("telemetry", {"agent_url": "http://{address}:9818"})
        path = daemon_config(policy=policy, params=params, gate="daemon",
                             actuator={"kind": "agent", "munge_socket": str(cluster.munge_socket), "timeout_s": 10},
                             **config)
        d = daemon(path, env=env)
        started.append(d)
        return d

    yield start
    for d in started:
        d.stop(signal.SIGKILL)
    for node, (cap, freq) in before.items():
        s = Sysfs(cluster.sysfs / node)
        for p in s.packages():
            s.set_power_limit_w(p, cap / len(s.packages()))
        s.set_max_freq_hz(freq)
