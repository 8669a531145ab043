"""A simulated Slurm cluster for ``wattsched daemon --backend sim``: the simulator's engine, run against a clock.

It answers the daemon the way Slurm would, through the same
:class:`~wattsched.daemon.slurm.backend.SlurmBackend` interface, and all the
simulation is :class:`~wattsched.sim.engine.Engine`'s: the engine is stepped
to the clock's time at each read (:meth:`Engine.advance_to`), the way SimPy's
``RealtimeEnvironment`` runs the same processes as its ``Environment``
against the wall clock. Jobs of the trace arrive at their submission times
(scaled by ``speedup``) and are held at submission, as the lua gate holds
them; a job with an application class names it in its Slurm comment
(``wattsched:class=memory``), as its user would with ``sbatch --comment``; a
released job starts on the nodes it was pinned to as soon as they are free
(or on the first free nodes if it was not pinned) and runs its real run time,
slowed by the caps and frequencies in force, killed at its time limit;
``POWER_DOWN``/``POWER_UP`` take the node model's switching times. Node power
(``current_watts``) is the engine's, and each node's energy counter (what the
node agent reads from RAPL; here through ``actuator.kind: sim``) integrates it
exactly, event by event, so the daemon counts an energy budget as the
simulator does. Nothing here is a policy: the daemon decides, this only plays
Slurm's part (holding, starting released jobs).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from wattsched.daemon.slurm.backend import MARKER, with_marker
from wattsched.daemon.slurm.records import ClusterState, SlurmJob, SlurmNode
from wattsched.errors import SlurmCommandError
from wattsched.model.constraints import CapSchedule, DemandResponseEvent, EnergyBudget
from wattsched.model.plan import Evict, Plan, PowerDown, PowerUp, SetNodeCap, SetNodeFreq, Start
from wattsched.model.platform import NodeState, Platform
from wattsched.model.snapshot import Snapshot
from wattsched.model.state import PolicyState
from wattsched.policies.base import BasePolicy
from wattsched.sim.engine import Engine, EngineOptions
from wattsched.workload.records import TraceJob

_SLURM_STATE = {
    NodeState.IDLE: ("IDLE", frozenset()),
    NodeState.BUSY: ("ALLOCATED", frozenset()),
    NodeState.OFF: ("IDLE", frozenset({"POWERED_DOWN"})),
    NodeState.SWITCHING_ON: ("IDLE", frozenset({"POWERED_DOWN", "POWERING_UP"})),
    NodeState.SWITCHING_OFF: ("IDLE", frozenset({"POWERING_DOWN"})),
    NodeState.DRAINED: ("IDLE", frozenset({"DRAIN"})),
    NodeState.DOWN: ("DOWN", frozenset()),
}


COUNTER_RANGE_UJ = 2**63 - 1
"""Range of a simulated node's energy counter (µJ): RAPL's wraps at ``max_energy_range_uj``, this one never does."""


REQUEUE_DELAY_S = 121.0
"""A requeued job is not started again before this delay: Slurm sets its ``begin_time`` to now + ``cred_expire``
(120 s by default) + 1."""


@dataclass(slots=True)
class _Job:
    """What Slurm keeps of a job besides what the engine simulates: hold, comment, pinned nodes."""

    trace: TraceJob
    state: str = "PENDING"
    held: bool = True
    admin_comment: str = MARKER
    required: tuple[str, ...] = ()
    nodes: tuple[str, ...] = ()
    start_s: float | None = None
    begin_s: float = -math.inf
    """Not started before this trace time (a requeued job waits, as Slurm's ``begin_time``)."""


@dataclass(frozen=True, slots=True)
class _NodeView:
    """A node as the start hook :meth:`SimCluster._usable` sees it."""

    name: str
    index: int
    state: int


class _SlurmPart(BasePolicy):
    """The engine's policy slot: Slurm starting the jobs the daemon released, once their nodes are free."""

    name = "slurm"

    def __init__(self, cluster: SimCluster):
        super().__init__()
        self.cluster = cluster

    def decide(self, snapshot: Snapshot, state: PolicyState | None = None) -> Plan:
        return self.cluster._slurm_plan()


class SimCluster:
    """The simulated cluster.

    Parameters
    ----------
    jobs
        Trace jobs with their real run times and per-node power, in submission order.
    platform
        Nodes and their power models.
    speedup
        Simulated seconds per real second.
    clock
        Real-time clock (``time.monotonic``); tests drive a fake one.
    epoch_s
        Wall-clock time the first submission maps to (times reported look like live Slurm's).
    cap, dr_events, budgets
        A cap schedule, demand-response events and energy budgets in trace time, for the engine's
        record of power against the cap and for :meth:`next_event_s` (their changes are events); the
        daemon decides on its own from its configuration.
    """

    name = "sim"
    reshape = "none"
    speedup: float

    def __init__(self, jobs: Sequence[TraceJob], platform: Platform, speedup: float = 600.0,
                 clock: Callable[[], float] = time.monotonic, epoch_s: float | None = None,
                 cap: CapSchedule | None = None, dr_events: Sequence[DemandResponseEvent] = (),
                 budgets: Sequence[EnergyBudget] = ()):
        self.platform = platform
        self.speedup = speedup
        self.clock = clock
        self._t0 = clock()
        self.epoch_s = time.time() if epoch_s is None else epoch_s
        self.origin_s = jobs[0].submit_s if jobs else 0.0
        self.jobs: dict[int, _Job] = {}
        self._trace = {tj.id: tj for tj in jobs}
        self.engine = Engine(platform, list(jobs), _SlurmPart(self), cap=cap, dr_events=dr_events,
                             budgets=budgets, options=EngineOptions(strict=False))
        self.engine.begin()
        self.node_energy_j = [0.0] * len(platform)
        """Energy each node drew since the run began (J): its energy counter."""
        self._energy_s = self.engine.now
        self._names = [n.name for n in platform.nodes]
        self._index = {name: i for i, name in enumerate(self._names)}
        self.finished = 0
        self.releases: list[tuple[float, int, tuple[str, ...]]] = []
        """Every release the daemon made: (trace time, job id, pinned nodes)."""

    @classmethod
    def from_config(cls, sim, speed: float | None = None) -> SimCluster:
        """Build from the daemon config's ``sim`` block (the bundled trace by default), at ``speed`` simulated
        seconds per real second (:func:`wattsched.config.daemon.sim_speed`; ``sim.speedup`` or 600 if not given).

        The trace is opened and its power augmented as every run of the simulator does it
        (:func:`wattsched.sim.build.prepare_trace`), on the block's platform cut to ``nodes``.
        """
        from importlib.resources import as_file, files

        from wattsched.config import SimConfig
        from wattsched.sim.build import build_platform, prepare_trace

        def build(trace) -> SimCluster:
            config = SimConfig.model_validate({"trace": str(trace), "platform": sim.platform, "seed": sim.seed})
            platform = build_platform(config)
            if sim.nodes is not None and sim.nodes > len(platform):
                from wattsched.errors import ConfigError

                raise ConfigError(f"sim.nodes: {sim.nodes} nodes, but platform {sim.platform!r} has only "
                                  f"{len(platform)}")
            if sim.nodes is not None and sim.nodes < len(platform):
                platform = Platform(platform.nodes[: sim.nodes], name=platform.name,
                                    response_classes=platform.response_classes, source=platform.source)
            speedup = speed if speed is not None else sim.speedup if sim.speedup is not None else 600.0
            return cls(list(prepare_trace(config, platform).workload.jobs), platform, speedup=speedup)

        if sim.trace == "bundled":
            with as_file(files("wattsched") / "data" / "traces" / "KTH-SP2-1996-2.1-cln-first5000.swf.gz") as path:
                return build(path)
        return build(sim.trace)

    # ------------------------------------------------------------------ time

    @property
    def now_s(self) -> float:
        """Trace time the engine stands at."""
        return self.engine.now

    def next_event_s(self) -> float:
        """Trace time of the next thing that happens by itself (a submission, an end, a switch), or ``inf``."""
        return self.engine.next_event_s()

    def clock_time_of(self, trace_s: float) -> float:
        """The reading of :attr:`clock` at which the cluster reaches trace time ``trace_s``."""
        return self._t0 + (trace_s - self.origin_s) / self.speedup

    def wall_time_of(self, t: float) -> float:
        """The wall-clock time (epoch) at which the cluster's own clock (that of ``read_at``) reads ``t``.

        At a speed above 1 the cluster's clock runs ahead of the wall clock from :attr:`epoch_s` on;
        what Prometheus compares with its ``time()`` (the end of the last cycle, a deadline) is exported
        in wall-clock time through this.

        >>> c = SimCluster([], Platform.homogeneous_cluster(1), speedup=600.0, epoch_s=1000.0)
        >>> c.wall_time_of(1000.0 + 3600.0)
        1006.0
        """
        return self.epoch_s + (t - self.epoch_s) / self.speedup

    def _advance(self) -> None:
        reading = self.clock()
        now = self.origin_s + (reading - self._t0) * self.speedup
        eng = self.engine
        if now >= eng.now:
            # event by event: node power holds between two events, and changes at them
            while (t := eng.next_event_s()) <= now or (t < math.inf and self.clock_time_of(t) <= reading):
                self._count_energy(t)
                eng.advance_to(t)
                if t > now or self.clock_time_of(t) == reading:
                    # the clock reads the event's own time: the cluster stands at it exactly (mapping the
                    # reading back to trace time may round it by a last digit)
                    now = t
            self._count_energy(now)
            eng.advance_to(now)
        self._sync()

    def _count_energy(self, t: float) -> None:
        """Add each node's energy from the last count to ``t`` at the power it has held since."""
        dt = t - self._energy_s
        if dt > 0:
            energy = self.node_energy_j
            for i, w in enumerate(self.engine.node_power_w()):
                energy[i] += w * dt
            self._energy_s = t

    def _sync(self) -> None:
        """Mirror the engine's job states into Slurm's records."""
        eng = self.engine
        for jid in list(self.jobs):
            job = self.jobs[jid]
            run = eng.running.get(jid)
            if run is not None:
                job.state, job.nodes, job.start_s = "RUNNING", tuple(self._names[i] for i in run.nodes), run.start_s
            elif jid in eng.pending:
                if job.state == "RUNNING":  # evicted and requeued: pending again, unpinned, not held
                    job.state, job.nodes, job.start_s, job.required, job.held = "PENDING", (), None, (), False
                    job.begin_s = eng.now + REQUEUE_DELAY_S
            else:
                del self.jobs[jid]
                self.finished += 1
        for jid in eng.pending:
            if jid not in self.jobs:
                self.jobs[jid] = _Job(self._trace[jid])

    # ------------------------------------------------------------------ Slurm's own part

    def _usable(self, node: _NodeView) -> bool:
        """Whether Slurm would start a job on ``node`` now (a hook: a subclass can reserve nodes)."""
        return node.state == NodeState.IDLE

    def _slurm_plan(self) -> Plan:
        """Start released jobs whose nodes are free: on their pinned nodes, else on the first free ones."""
        actions = []
        taken: set[int] = set()
        state = self.engine.state
        pending = self.engine.pending
        for jid, job in sorted(self.jobs.items(), key=lambda kv: (kv[1].trace.submit_s, kv[0])):
            if job.held or job.state != "PENDING" or jid not in pending or job.begin_s > self.engine.now:
                continue
            want = max(job.trace.nodes, 1)
            usable = [i for i in range(len(state)) if i not in taken
                      and self._usable(_NodeView(self._names[i], i, state[i]))]
            if job.required:
                idx = [self._index[n] for n in job.required if n in self._index]
                if len(idx) != want or not set(idx) <= set(usable):
                    continue
            else:
                if len(usable) < want:
                    continue
                idx = usable[:want]
            actions.append(Start(jid, tuple(idx)))
            taken.update(idx)
        return Plan(actions)

    def _start_released(self) -> None:
        plan = self._slurm_plan()
        if plan.actions:
            problems = self.engine.apply(plan)
            if problems:  # pragma: no cover - the plan above is built from the same state
                raise SlurmCommandError(["sim", "start"], 1, "", "; ".join(problems))
        self._sync()

    # ------------------------------------------------------------------ what the daemon sees

    def read_state(self) -> ClusterState:
        self._advance()
        e = self.epoch_s - self.origin_s
        eng = self.engine
        jobs = []
        for jid, j in self.jobs.items():
            tj = j.trace
            jobs.append(SlurmJob(
                job_id=jid, state=j.state, user=tj.user or "user", partition="batch",
                reason="JobHeldAdmin" if j.held else ("None" if j.state == "RUNNING" else "Resources"),
                priority=0 if j.held else 1000, submit_time=e + tj.submit_s,
                start_time=None if j.start_s is None else e + j.start_s, time_limit_s=tj.walltime_s,
                node_count=max(tj.nodes, 1), cpus=max(tj.procs, 1), nodes=j.nodes, required_nodes=j.required,
                comment=f"wattsched:class={tj.app_class}" if tj.app_class else "", admin_comment=j.admin_comment,
                eligible_time=e + j.begin_s if math.isfinite(j.begin_s) else None,
            ))
        nodes = []
        watts = eng.node_power_w()
        for i, node in enumerate(self.platform.nodes):
            state, flags = _SLURM_STATE[NodeState(eng.state[i])]
            nodes.append(SlurmNode(name=node.name, state=state, flags=flags, cpus=node.cores,
                                   partitions=("batch",), current_watts=watts[i]))
        return ClusterState(tuple(jobs), tuple(nodes), version="sim", read_at=e + eng.now)

    # ------------------------------------------------------------------ actions

    def _job(self, job_id: int) -> _Job:
        job = self.jobs.get(job_id)
        if job is None:
            raise SlurmCommandError(["sim", str(job_id)], 1, "", "Invalid job id specified")
        return job

    def _node(self, name: str) -> int:
        try:
            return self.platform.index_of(name)
        except KeyError:
            raise SlurmCommandError(["sim", name], 1, "", f"Invalid node name specified: {name}") from None

    def hold(self, job_id: int, admin_comment: str) -> None:
        job = self._job(job_id)
        job.admin_comment = with_marker(admin_comment)
        if job.state == "PENDING":
            job.held = True

    def release(self, job_id: int, nodes: Sequence[str], admin_comment: str, node_count: int | None = None) -> None:
        job = self._job(job_id)
        if job.state != "PENDING":
            raise SlurmCommandError(["sim", "release", str(job_id)], 1, "", "Job is no longer pending execution")
        if node_count is not None and node_count != max(job.trace.nodes, 1):
            raise SlurmCommandError(["sim", "release", str(job_id)], 1, "",
                                    f"the simulated cluster runs a job on its trace's {job.trace.nodes} nodes, "
                                    f"not {node_count}")
        job.required, job.admin_comment, job.held = tuple(nodes), admin_comment, False
        self.releases.append((self.engine.now, job_id, tuple(nodes)))
        self._start_released()

    def shrink(self, job_id: int, nodes: Sequence[str]) -> None:
        raise SlurmCommandError(["sim", "shrink", str(job_id)], 1, "",
                                "the simulated cluster does not shrink running jobs (its jobs are the trace's)")

    def requeue(self, job_id: int) -> None:
        job = self._job(job_id)
        if job.state != "RUNNING":
            raise SlurmCommandError(["sim", "requeue", str(job_id)], 1, "", "Job is pending execution")
        self.engine.apply(Plan([Evict(job_id, requeue=True)]))
        self._sync()
        self._start_released()

    def cancel(self, job_id: int) -> None:
        job = self._job(job_id)
        if job.state == "RUNNING":
            self.engine.apply(Plan([Evict(job_id, requeue=False)]))
        else:
            self.engine.cancel_pending(job_id)
        self._sync()

    def power_down(self, node: str) -> None:
        problems = self.engine.apply(Plan([PowerDown(self._node(node))]))
        if problems:
            raise SlurmCommandError(["sim", "power_down", node], 1, "", "; ".join(problems))

    def power_up(self, node: str) -> None:
        problems = self.engine.apply(Plan([PowerUp(self._node(node))]))
        if problems:
            raise SlurmCommandError(["sim", "power_up", node], 1, "", "; ".join(problems))

    def node_actuator(self) -> SimNodeActuator:
        """The actuator of ``actuator.kind: sim``: caps and frequencies set on the simulated nodes."""
        return SimNodeActuator(self)

    def result(self):
        """Stop the engine where it stands and return its result (jobs, power timeline)."""
        return self.engine.finish()


class SimNodeActuator:
    """Node caps and CPU frequency ceilings of the simulated cluster (``actuator.kind: sim``).

    A setting takes effect at once on the node, and a running job slows by its
    response model, as the node agent's would on real nodes; :meth:`observe`
    reads back what the node holds.
    """

    name = "sim"

    def __init__(self, cluster: SimCluster):
        self.cluster = cluster

    def _set(self, node: SlurmNode, action, value: float | None):
        from wattsched.daemon.actuators import Outcome

        problems = self.cluster.engine.apply(Plan([action]))
        if problems:
            return Outcome.failed("; ".join(problems))
        return Outcome(True, "set on the simulated node", value)

    def set_cap(self, node: SlurmNode, cap_w: float | None, request_id: str):
        from wattsched.daemon.actuators import Outcome

        try:
            return self._set(node, SetNodeCap(self.cluster._node(node.name), cap_w), cap_w)
        except SlurmCommandError as exc:
            return Outcome.failed(str(exc))

    def set_freq(self, node: SlurmNode, freq_hz: float | None, request_id: str):
        from wattsched.daemon.actuators import Outcome

        try:
            return self._set(node, SetNodeFreq(self.cluster._node(node.name), freq_hz), freq_hz)
        except SlurmCommandError as exc:
            return Outcome.failed(str(exc))

    def observe(self, node: SlurmNode):
        from wattsched.daemon.actuators import NodeSetting

        try:
            i = self.cluster._node(node.name)
        except SlurmCommandError as exc:
            return NodeSetting(error=str(exc))
        eng = self.cluster.engine
        # one package, its counter in µJ as RAPL's energy_uj, with a range it never wraps within a run
        counter = (round(self.cluster.node_energy_j[i] * 1e6), COUNTER_RANGE_UJ)
        return NodeSetting(cap_w=eng.node_cap_w.get(i), freq_hz=eng.node_freq_hz.get(i), has_cap=True,
                           has_freq=True, counters=(counter,))
