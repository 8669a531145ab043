"""Fixtures for the docker cluster tests: deploy/docker brought up once per session, as a site would.

The first test builds the image if it is missing (from Debian's archive, no
registry), starts its own dockerd, brings up mysql, slurmdbd, slurmctld,
slurmrestd, c1, c2 and the wattsched service, and takes it all down at the
end of tests/docker. The whole time it holds the machine-wide lock of the namespace test
cluster (``/tmp/wattsched-testcluster-pytest.lock``), so the two never run at
once: dockerd and the namespace cluster share the host's network stack.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from wattsched.daemon.slurm.parse import parse_nodes_json, parse_squeue_json

ROOT = Path(__file__).resolve().parents[2]
DOCKER_DIR = ROOT / "deploy" / "docker"
LOCK = Path("/tmp/wattsched-testcluster-pytest.lock")
DIR = Path(os.environ.get("WATTSCHED_DOCKER_DIR", "/tmp/wattsched-docker-pytest"))
SUBNET = "10.199.15"
DOCKER = "/usr/bin/docker"
WATTSCHED = str(ROOT / ".venv" / "bin" / "wattsched")


def _why_not() -> str | None:
    if sys.platform != "linux":
        return "the docker cluster needs Linux"
    if os.geteuid() != 0:
        return "the docker cluster needs root (it starts its own dockerd)"
    missing = [p for p in ("/usr/sbin/dockerd", DOCKER, "/usr/bin/docker-compose", "/usr/bin/mmdebstrap")
               if not os.path.exists(p)]
    if missing:
        return (f"no container engine: {', '.join(missing)} missing (scripts/install-system-deps installs "
                "docker.io, docker-compose and mmdebstrap with apt-get)")
    if not Path(WATTSCHED).exists():
        return f"no {WATTSCHED}: the wattsched service runs the checkout's virtualenv (make .venv/.installed)"
    return None


def host_state() -> dict[str, str]:
    """What dockerd could leave behind on the host: firewall rules, nft ruleset, IP forwarding, mounts."""
    def out(*cmd: str) -> str:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
        return proc.stdout if proc.returncode == 0 else f"rc {proc.returncode}: {proc.stderr}"

    state = {f"iptables -t {t} -S": out("iptables", "-t", t, "-S") for t in ("filter", "nat", "mangle", "raw")}
    state["ip6tables -S"] = out("ip6tables", "-S")
    state["nft list ruleset"] = out("nft", "list", "ruleset")
    state["sysctl net.ipv4.ip_forward"] = out("sysctl", "-n", "net.ipv4.ip_forward")
    state["mounts under the docker dir"] = "\n".join(
        line for line in Path("/proc/self/mounts").read_text().splitlines() if f" {DIR}/" in line or f" {DIR} " in line)
    return state


class DockerCluster:
    """The compose cluster: Slurm commands in the slurmctld container, wattsched in its own."""

    def __init__(self, directory: Path):
        self.dir = directory
        self.env = {**os.environ, "WS_DK_DIR": str(directory), "WS_DK_SUBNET": SUBNET,
                    "DOCKER_HOST": f"unix://{directory}/docker.sock"}
        self.env.pop("WS_DK_WATTSCHED_CONFIG", None)
        self.rest_url = f"http://{SUBNET}.5:6820"
        self.metrics_url = f"http://{SUBNET}.20:9817/metrics"
        self.token_file = directory / "secrets" / "slurm-token"
        self.suite = "bookworm"
        self.up_seconds: list[float] = []

    # ------------------------------------------------------------ lifecycle

    def script(self, name: str, *args: str, env: dict | None = None, timeout: float = 900) -> str:
        proc = subprocess.run([str(DOCKER_DIR / name), *args], env={**self.env, **(env or {})},
                              capture_output=True, text=True, timeout=timeout)
        if proc.returncode != 0:
            raise AssertionError(f"deploy/docker/{name} {' '.join(args)} failed ({proc.returncode}):\n"
                                 f"{proc.stdout}\n{proc.stderr}")
        return proc.stdout

    def up(self, *args: str, config: Path | None = None, suite: str | None = None) -> str:
        env = {"WS_DK_SUITE": suite or self.suite}
        if config is not None:
            env["WS_DK_WATTSCHED_CONFIG"] = str(config)
        t0 = time.monotonic()
        out = self.script("up", *args, env=env)
        self.up_seconds.append(time.monotonic() - t0)
        if suite:
            self.suite = suite
        return out

    def down(self, *args: str) -> None:
        self.script("down", *args, env={"WS_DK_SUITE": self.suite}, timeout=300)

    # ------------------------------------------------------------ commands

    def docker(self, *args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
        proc = subprocess.run([DOCKER, *args], env=self.env, capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"docker {' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()}")
        return proc

    def ctl(self, *args: str, check: bool = True) -> str:
        return self.docker("exec", "slurmctld", *args, check=check).stdout

    def wattsched(self, *args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
        return self.docker("exec", "wattsched", WATTSCHED, *args, check=check, timeout=timeout)

    def python_in(self, container: str, code: str) -> str:
        return self.docker("exec", container, str(ROOT / ".venv" / "bin" / "python"), "-c", code).stdout

    def submit(self, nodes: int = 1, seconds: float = 5, *, extra: tuple[str, ...] = ()) -> int:
        out = self.ctl("sbatch", "--parsable", "-N", str(nodes), "-t", "5", "-o", "/dev/null", *extra,
                       "--wrap", f"sleep {seconds}")
        return int(out.strip().split(";")[0])

    def jobs(self) -> dict:
        jobs, _ = parse_squeue_json(self.ctl("squeue", "--json"))
        return {j.job_id: j for j in jobs}

    def active(self) -> dict:
        return {i: j for i, j in self.jobs().items() if j.state in ("PENDING", "RUNNING", "COMPLETING", "SUSPENDED")}

    def node_states(self) -> dict:
        command = ("sinfo", "--json") if self.suite == "bookworm" else ("scontrol", "show", "nodes", "--json")
        nodes, _ = parse_nodes_json(self.ctl(*command))
        return {n.name: n for n in nodes}

    def audit(self, state_dir: str = "/var/lib/wattsched") -> list[dict]:
        path = f"{state_dir}/state.db"
        code = (f"import json, sqlite3, os; p = {path!r}; print(json.dumps([] if not os.path.exists(p) else "
                "[dict(zip(('id','action','target','outcome','reason','dry_run'), r)) for r in sqlite3.connect(p)"
                ".execute('SELECT id, action, target, outcome, reason, dry_run FROM audit ORDER BY id')]))")
        return json.loads(self.python_in("wattsched", code))

    def reset(self) -> None:
        """No jobs, both nodes idle."""
        self.ctl("scancel", "--full", "-u", "root", check=False)
        for name, node in self.node_states().items():
            if node.drained or node.down:
                self.ctl("scontrol", "update", f"nodename={name}", "state=resume", check=False)
        wait_for(lambda: not self.active() and all(
            n.state == "IDLE" and not n.flags for n in self.node_states().values()), 90, "cluster idle")


def wait_for(predicate, timeout_s: float, what: str, interval_s: float = 0.5):
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")
        time.sleep(interval_s)


# package scope: the cluster goes down, and the lock is released, as soon as the last test here is
# done, so the namespace cluster's tests later in the same session can take the lock
@pytest.fixture(scope="package")
def docker_session():
    reason = _why_not()
    if reason:
        pytest.skip(reason)
    lock = open(LOCK, "w")  # noqa: SIM115
    fcntl.flock(lock, fcntl.LOCK_EX)  # the namespace cluster and this one never run at once
    cluster = DockerCluster(DIR)
    keep = bool(os.environ.get("WATTSCHED_DOCKER_KEEP"))
    try:
        if keep and (DIR / "docker.sock").exists():
            cluster.host_before = None  # kept from an earlier session: its state before up is not known here
        else:
            cluster.down()  # what a killed earlier session left, if anything
            cluster.host_before = host_state()
        cluster.up()
        yield cluster
    finally:
        if not keep:
            try:
                cluster.down()
            finally:
                lock.close()
        else:
            lock.close()


@pytest.fixture
def docker_cluster(docker_session):
    if not (docker_session.dir / "docker.sock").exists():
        pytest.skip("the docker cluster was taken down by an earlier test of this session")
    docker_session.reset()
    return docker_session


def have_tool(name: str) -> bool:
    return shutil.which(name) is not None
