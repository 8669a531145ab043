"""A simulated Slurm cluster for ``wattsched daemon --backend sim``: a trace replayed in accelerated real time.

It answers the daemon the way Slurm would, through the same
:class:`~wattsched.daemon.slurm.backend.SlurmBackend` interface: jobs of the
trace arrive at their submission times (scaled by ``speedup``) and are held at
submission, as the lua gate holds them; a released job starts on the nodes it
was pinned to as soon as they are free and runs for its real run time (killed at
its time limit); ``POWER_DOWN``/``POWER_UP`` take the node model's switching
times. Node power (``current_watts``) follows the trace's augmented job power.
Nothing here is a policy: the daemon decides, this only plays Slurm.
"""

from __future__ import annotations

import heapq
import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from wattsched.daemon.slurm.backend import MARKER, with_marker
from wattsched.daemon.slurm.records import ClusterState, SlurmJob, SlurmNode
from wattsched.errors import SlurmCommandError
from wattsched.model.platform import Platform
from wattsched.sim.workload import TraceJob


@dataclass(slots=True)
class _Job:
    trace: TraceJob
    state: str = "PENDING"
    held: bool = True
    admin_comment: str = MARKER
    required: tuple[str, ...] = ()
    nodes: tuple[str, ...] = ()
    start_s: float | None = None
    end_s: float | None = None


@dataclass(slots=True)
class _Node:
    name: str
    cpus: int
    state: str = "IDLE"
    flags: set = field(default_factory=set)
    job: int | None = None
    ready_at: float = 0.0


class SimCluster:
    """The simulated cluster.

    Parameters
    ----------
    jobs
        Trace jobs with their real run times and per-node power, in submission order.
    platform
        Nodes and their power model.
    speedup
        Simulated seconds per real second.
    clock
        Real-time clock (``time.monotonic``); tests drive a fake one.
    epoch_s
        Wall-clock time the trace's time 0 maps to (times reported look like live Slurm's).
    """

    name = "sim"

    def __init__(self, jobs: Sequence[TraceJob], platform: Platform, speedup: float = 600.0,
                 clock: Callable[[], float] = time.monotonic, epoch_s: float | None = None):
        self.platform = platform
        self.speedup = speedup
        self.clock = clock
        self._t0 = clock()
        self.epoch_s = time.time() if epoch_s is None else epoch_s
        first = jobs[0].submit_s if jobs else 0.0
        self._arrivals = [(tj.submit_s - first, tj) for tj in jobs]
        self._next_arrival = 0
        self.jobs: dict[int, _Job] = {}
        self.nodes = {n.name: _Node(n.name, n.cores) for n in platform.nodes}
        self._order = [n.name for n in platform.nodes]
        self._ends: list[tuple[float, int, int]] = []
        self._seq = itertools.count()
        self.now_s = 0.0
        self.finished = 0

    @classmethod
    def from_config(cls, sim) -> SimCluster:
        """Build from the daemon config's ``sim`` block (the bundled trace by default)."""
        from importlib.resources import as_file, files

        from wattsched.sim.augment import AugmentParams, augment_workload
        from wattsched.sim.platforms import load_platform
        from wattsched.sim.swf import read_swf

        platform = load_platform(sim.platform)
        if sim.nodes is not None and sim.nodes > len(platform):
            from wattsched.errors import ConfigError

            raise ConfigError(f"sim.nodes: {sim.nodes} nodes, but platform {sim.platform!r} has only {len(platform)}")
        if sim.nodes is not None and sim.nodes < len(platform):
            platform = Platform(platform.nodes[: sim.nodes], name=platform.name)
        if sim.trace == "bundled":
            ref = files("wattsched") / "data" / "traces" / "KTH-SP2-1996-2.1-cln-first5000.swf.gz"
            with as_file(ref) as path:
                workload = read_swf(path, cores_per_node=1, machine_procs=len(platform))
                jobs = list(augment_workload(workload, platform.nodes[0].power, AugmentParams(), sim.seed).jobs)
        else:
            workload = read_swf(sim.trace, cores_per_node=1, machine_procs=len(platform))
            jobs = list(augment_workload(workload, platform.nodes[0].power, AugmentParams(), sim.seed).jobs)
        return cls(jobs, platform, speedup=sim.speedup)

    # ------------------------------------------------------------------ time

    def _advance(self) -> None:
        now = (self.clock() - self._t0) * self.speedup
        while True:
            t_end = self._ends[0][0] if self._ends else float("inf")
            t_arr = self._arrivals[self._next_arrival][0] if self._next_arrival < len(self._arrivals) else float("inf")
            t = min(t_end, t_arr)
            if t > now:
                break
            self.now_s = t
            if t_end <= t_arr:
                _, _, jid = heapq.heappop(self._ends)
                self._finish(jid)
            else:
                tj = self._arrivals[self._next_arrival][1]
                self._next_arrival += 1
                self.jobs[tj.id] = _Job(tj)
            self._schedule()
        self.now_s = now
        for node in self.nodes.values():
            if node.ready_at and node.ready_at <= now:
                node.ready_at = 0.0
                if "POWERING_DOWN" in node.flags:
                    node.flags.discard("POWERING_DOWN")
                    node.flags.add("POWERED_DOWN")
                elif "POWERING_UP" in node.flags:
                    node.flags.discard("POWERING_UP")
        self._schedule()

    def _finish(self, jid: int) -> None:
        job = self.jobs.pop(jid)
        for name in job.nodes:
            self.nodes[name].job = None
            self.nodes[name].state = "IDLE"
        self.finished += 1

    def _usable(self, node: _Node) -> bool:
        return node.job is None and not node.flags

    def _schedule(self) -> None:
        """Slurm's own part: start released jobs (on their pinned nodes, else the first free ones)."""
        for jid, job in sorted(self.jobs.items(), key=lambda kv: (kv[1].trace.submit_s, kv[0])):
            if job.state != "PENDING" or job.held:
                continue
            want = max(job.trace.nodes, 1)
            if job.required:
                names = list(job.required)
                if len(names) != want or not all(self._usable(self.nodes[n]) for n in names):
                    continue
            else:
                names = [n for n in self._order if self._usable(self.nodes[n])][:want]
                if len(names) < want:
                    continue
            self._start(jid, job, tuple(names))

    def _start(self, jid: int, job: _Job, names: tuple[str, ...]) -> None:
        job.state, job.nodes, job.start_s = "RUNNING", names, self.now_s
        run = min(job.trace.runtime_s, job.trace.walltime_s)
        job.end_s = self.now_s + run
        for n in names:
            self.nodes[n].job = jid
            self.nodes[n].state = "ALLOCATED"
        heapq.heappush(self._ends, (job.end_s, next(self._seq), jid))

    # ------------------------------------------------------------------ what the daemon sees

    def read_state(self) -> ClusterState:
        self._advance()
        e = self.epoch_s
        jobs = []
        for jid, j in self.jobs.items():
            tj = j.trace
            jobs.append(SlurmJob(
                job_id=jid, state=j.state, user=tj.user or "user", partition="batch",
                reason="JobHeldAdmin" if j.held else ("None" if j.state == "RUNNING" else "Resources"),
                priority=0 if j.held else 1000, submit_time=e + tj.submit_s - self._arrivals[0][1].submit_s,
                start_time=None if j.start_s is None else e + j.start_s, time_limit_s=tj.walltime_s,
                node_count=max(tj.nodes, 1), cpus=max(tj.procs, 1), nodes=j.nodes, required_nodes=j.required,
                admin_comment=j.admin_comment,
            ))
        nodes = []
        for name in self._order:
            n = self.nodes[name]
            watts = None
            if n.job is not None:
                watts = self.jobs[n.job].trace.mean_w
            nodes.append(SlurmNode(name=name, state=n.state, flags=frozenset(n.flags), cpus=n.cpus,
                                   partitions=("batch",), current_watts=watts))
        return ClusterState(tuple(jobs), tuple(nodes), version="sim", read_at=e + self.now_s)

    # ------------------------------------------------------------------ actions

    def _job(self, job_id: int) -> _Job:
        job = self.jobs.get(job_id)
        if job is None:
            raise SlurmCommandError(["sim", str(job_id)], 1, "", "Invalid job id specified")
        return job

    def hold(self, job_id: int, admin_comment: str) -> None:
        job = self._job(job_id)
        job.admin_comment = with_marker(admin_comment)
        if job.state == "PENDING":
            job.held = True

    def release(self, job_id: int, nodes: Sequence[str], admin_comment: str) -> None:
        job = self._job(job_id)
        if job.state != "PENDING":
            raise SlurmCommandError(["sim", "release", str(job_id)], 1, "", "Job is no longer pending execution")
        job.required, job.admin_comment, job.held = tuple(nodes), admin_comment, False
        self._schedule()

    def requeue(self, job_id: int) -> None:
        job = self._job(job_id)
        if job.state != "RUNNING":
            raise SlurmCommandError(["sim", "requeue", str(job_id)], 1, "", "Job is pending execution")
        self._ends = [e for e in self._ends if e[2] != job_id]
        heapq.heapify(self._ends)
        for n in job.nodes:
            self.nodes[n].job, self.nodes[n].state = None, "IDLE"
        job.state, job.nodes, job.start_s, job.end_s, job.held = "PENDING", (), None, None, False

    def cancel(self, job_id: int) -> None:
        job = self._job(job_id)
        if job.state == "RUNNING":
            self._ends = [e for e in self._ends if e[2] != job_id]
            heapq.heapify(self._ends)
        self._finish(job_id)

    def power_down(self, node: str) -> None:
        n = self.nodes[node]
        n.flags.add("POWERING_DOWN")
        n.ready_at = self.now_s + self.platform.nodes[0].power.switch_off_s

    def power_up(self, node: str) -> None:
        n = self.nodes[node]
        n.flags.discard("POWERED_DOWN")
        n.flags.add("POWERING_UP")
        n.ready_at = self.now_s + self.platform.nodes[0].power.switch_on_s
