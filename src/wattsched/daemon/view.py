"""From what Slurm reports to what a policy sees: which jobs and nodes the daemon manages, and the snapshot.

Pure functions of a :class:`~wattsched.daemon.slurm.records.ClusterState` and
the daemon's own bookkeeping (its holds and the starts it awaits); no I/O.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from wattsched.daemon.slurm.backend import MARKER
from wattsched.daemon.slurm.records import (
    COMPLETING,
    HELD_USER,
    PENDING,
    RUNNING,
    SUSPENDED,
    ClusterState,
    SlurmJob,
    SlurmNode,
)
from wattsched.model import units as U
from wattsched.model.constraints import CapSchedule
from wattsched.model.job import Job, PowerEstimate, Unit, job_from_fields
from wattsched.model.ledger import Ledger
from wattsched.model.platform import Node, NodePowerModel, NodeState, Platform
from wattsched.model.snapshot import Snapshot

UNLIMITED_WALLTIME_S = 365 * 86400.0
"""Requested time assumed for a job with no time limit (its expected end for backfilling)."""

ACTIVE = (RUNNING, SUSPENDED, COMPLETING)

log = logging.getLogger("wattsched.daemon")


def natural_key(name: str):
    """``node2`` before ``node10``."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


@dataclass(slots=True)
class Classified:
    """Managed jobs sorted by what the daemon does with them."""

    ours: list[SlurmJob] = field(default_factory=list)  # pending, held by wattsched: the policy's queue
    # pending, not held (or, with the lua gate, held by its user) and not awaiting start: to hold as ours
    adopt: list[SlurmJob] = field(default_factory=list)
    starting: list[SlurmJob] = field(default_factory=list)  # released by wattsched, not yet running
    running: list[SlurmJob] = field(default_factory=list)
    others_held: list[SlurmJob] = field(default_factory=list)  # held by an admin (or a user): never touched


def is_managed_job(job: SlurmJob, partitions: frozenset[str]) -> bool:
    if not partitions:
        return True
    return any(p in partitions for p in job.partition.split(","))


def is_our_hold(job: SlurmJob, holds: Mapping[int, object]) -> bool:
    """A held pending job whose hold is wattsched's: marked in AdminComment, or recorded in the store."""
    if not job.held:
        return False
    return MARKER in job.admin_comment.split() or job.job_id in holds


def is_user_hold(job: SlurmJob) -> bool:
    """A held job whose hold is its user's (``JobHeldUser``) and not marked as wattsched's.

    In a managed partition wattsched takes such a hold over: the submit gate refuses a
    user's release of a held job there while the heartbeat is fresh, and holds (without
    the marker, which Slurm 22.05 does not let it set on a user's update) a job its user
    moves in from another partition. Holds by administrators are never taken over.
    """
    return job.held and job.reason == HELD_USER and MARKER not in job.admin_comment.split()


def classify(
    state: ClusterState,
    partitions: frozenset[str],
    holds: Mapping[int, object],
    starts: Mapping[int, object],
    take_user_holds: bool = False,
) -> Classified:
    """Sort the managed jobs; ``take_user_holds`` puts jobs their users hold among those to adopt.

    The daemon takes user holds over with the lua gate only: the gate refuses users'
    releases in managed partitions while the heartbeat is fresh, so such a job would
    otherwise wait for ever. Without the gate (``gate: daemon``) a user's hold is hers.
    """
    out = Classified()
    managed: dict[str, bool] = {}  # by partition list: a queue has few of them
    for job in state.jobs:
        m = managed.get(job.partition)
        if m is None:
            m = managed[job.partition] = is_managed_job(job, partitions)
        if not m:
            continue
        if job.state in ACTIVE:
            out.running.append(job)
        elif job.state == PENDING:
            if job.held:
                if is_our_hold(job, holds):
                    out.ours.append(job)
                elif take_user_holds and is_user_hold(job):
                    out.adopt.append(job)
                else:
                    out.others_held.append(job)
            elif job.job_id in starts:
                out.starting.append(job)
            else:
                out.adopt.append(job)
    key = lambda j: (j.submit_time or 0.0, j.job_id)  # noqa: E731
    out.ours.sort(key=key)
    out.adopt.sort(key=key)
    return out


def managed_nodes(state: ClusterState, partitions: frozenset[str]) -> list[SlurmNode]:
    nodes = [n for n in state.nodes if not partitions or partitions.intersection(n.partitions)]
    return sorted(nodes, key=lambda n: natural_key(n.name))


@dataclass(frozen=True, slots=True)
class PowerGroup:
    """A node group of a platform file: its name, node-name prefix, node names and power model."""

    name: str
    prefix: str
    names: frozenset[str]
    power: NodePowerModel


class PowerModels:
    """Which power model each Slurm node has: one model for all, or the node groups of a platform file.

    A node takes the model of the group holding its name; else of the group
    whose prefix and number match (``wst3`` is ``wst0003`` of a group with
    prefix ``wst``); else of a group named by one of its Slurm features; else
    of the first group.

    >>> m = PowerModels([PowerGroup("cpu", "c", frozenset({"c0000", "c0001"}), NodePowerModel(busy_w=300)),
    ...                  PowerGroup("gpu", "g", frozenset({"g0000"}), NodePowerModel(busy_w=900))])
    >>> [m.for_node(n, ()).busy_w for n in ("c1", "g0000", "x7")]
    [300, 900, 300]
    """

    def __init__(self, groups: Sequence[PowerGroup], response_classes=None, overprovisioning: dict | None = None):
        if not groups:
            raise ValueError("at least one power group is needed")
        self.groups = list(groups)
        self.response_classes = response_classes
        self.overprovisioning = dict(overprovisioning or {})
        """A platform file's ``budget_w``, ``cpu_power_levels_w``, ``base_w``, ``mem_w`` (PARM's machine), if set."""

    @classmethod
    def uniform(cls, power: NodePowerModel) -> PowerModels:
        return cls([PowerGroup("all", "", frozenset(), power)])

    @classmethod
    def from_platform_config(cls, config) -> PowerModels:
        """From a :class:`~wattsched.config.platform.PlatformConfig`."""
        over = {k: getattr(config, k) for k in ("budget_w", "cpu_power_levels_w", "base_w", "mem_w")
                if getattr(config, k) is not None}
        return cls([PowerGroup(g.name, g.name if g.prefix is None else g.prefix, frozenset(g.node_names()),
                               g.power.to_model()) for g in config.node_groups], config.build_response_classes(),
                   over)

    def for_node(self, name: str, features: Sequence[str] = ()) -> NodePowerModel:
        for g in self.groups:
            if name in g.names:
                return g.power
        m = re.match(r"^(.*?)(\d+)$", name)
        if m:
            for g in self.groups:
                if g.prefix and m.group(1) == g.prefix and any(
                        n.startswith(g.prefix) and n[len(g.prefix):].isdigit() and int(n[len(g.prefix):]) ==
                        int(m.group(2)) for n in g.names):
                    return g.power
        for g in self.groups:
            if g.name in features:
                return g.power
        return self.groups[0].power


def managed_platform(state: ClusterState, partitions: frozenset[str], power: NodePowerModel | PowerModels,
                     cache: dict, nodes: list[SlurmNode] | None = None) -> Platform:
    """The platform of the managed nodes, rebuilt only when the node set changes (``cache`` keeps it)."""
    if nodes is None:
        nodes = managed_nodes(state, partitions)
    key = tuple((n.name, n.cpus, n.gres) for n in nodes)
    platform = cache.get(key)
    if platform is None:
        cache.clear()
        platform = cache[key] = build_platform(nodes, power)
    return platform


def build_platform(nodes: list[SlurmNode], power: NodePowerModel | PowerModels, name: str = "slurm") -> Platform:
    models = power if isinstance(power, PowerModels) else PowerModels.uniform(power)
    return Platform(
        [
            Node(i, n.name, cores=max(n.cpus, 1), gpus=_gpus(n.gres), mem_mb=n.real_memory_mb, features=n.features,
                 power=models.for_node(n.name, n.features))
            for i, n in enumerate(nodes)
        ],
        name=name,
        response_classes=models.response_classes,
        **models.overprovisioning,
    )


def _schedule(cap: float | CapSchedule) -> CapSchedule:
    return cap if isinstance(cap, CapSchedule) else CapSchedule.constant(cap)


def _gpus(gres: str) -> int:
    m = re.search(r"gpu(?::[\w-]+)?:(\d+)", gres or "")
    return int(m.group(1)) if m else 0


def node_state(node: SlurmNode, busy: bool) -> NodeState:
    if node.down:
        return NodeState.DOWN
    if node.drained:
        return NodeState.DRAINED
    if node.powering_down:
        return NodeState.SWITCHING_OFF
    if node.powered_off:
        return NodeState.SWITCHING_ON if node.powering_up else NodeState.OFF
    if node.powering_up:
        return NodeState.SWITCHING_ON
    if busy or node.state in ("ALLOCATED", "MIXED", "COMPLETING"):
        return NodeState.BUSY
    return NodeState.IDLE


CLASS_RE = re.compile(r"(?:^|\s)wattsched:class=(\S+)")
"""A job's own application class in its Slurm comment (``sbatch --comment=wattsched:class=memory``)."""


def job_class(j: SlurmJob, default: str = "") -> str:
    """The application class of a Slurm job: the one its comment names, else ``default``.

    >>> job_class(SlurmJob(1, "PENDING", comment="run 3 wattsched:class=memory"), "cpu")
    'memory'
    >>> job_class(SlurmJob(2, "PENDING"), "cpu")
    'cpu'
    """
    comment = j.comment
    if not comment or "wattsched:class=" not in comment:
        return default
    m = CLASS_RE.search(comment)
    return m.group(1) if m else default


APP_RE = re.compile(r"(?:^|\s)wattsched:app=([a-z0-9][a-z0-9_-]{0,31})(?:\s|$)")
"""A job's application in its Slurm comment (``sbatch --comment=wattsched:app=leanmd``): the PASS model ``parm``
times it by (docs/policies.md, 4.8). Lower-case letters, digits, ``_`` and ``-``, at most 32."""


def job_app(j: SlurmJob) -> str:
    """The application a Slurm job's comment names (:data:`APP_RE`), ``""`` for none or a malformed name.

    >>> job_app(SlurmJob(1, "PENDING", comment="wattsched:malleable wattsched:app=leanmd"))
    'leanmd'
    >>> job_app(SlurmJob(2, "PENDING"))
    ''
    >>> job_app(SlurmJob(3, "PENDING", comment="wattsched:app=../x"))
    ''
    """
    comment = j.comment
    if not comment or "wattsched:app=" not in comment:
        return ""
    m = APP_RE.search(comment)
    return m.group(1) if m else ""


MALLEABLE = "wattsched:malleable"
"""Token in a job's Slurm comment (``sbatch --comment=wattsched:malleable``) that lets a policy shrink the job
while it runs (a ``Reshape``): the job's application sources the resize script Slurm writes, or reads its new
node list itself."""


def is_malleable(j: SlurmJob) -> bool:
    """Whether the job's comment declares it malleable (:data:`MALLEABLE`).

    >>> is_malleable(SlurmJob(1, "RUNNING", comment="wattsched:malleable wattsched:class=cpu"))
    True
    >>> is_malleable(SlurmJob(2, "RUNNING", comment="wattsched:malleable=no"))
    False
    """
    return MALLEABLE in j.comment.split()


def node_range(j: SlurmJob, nodes: int) -> tuple[int, int]:
    """``(min_nodes, max_nodes)`` of the policy's job of ``j`` on ``nodes`` nodes; ``(0, 0)``: exactly ``nodes``.

    A pending job submitted with ``--nodes=MIN-MAX`` accepts any count of its range (``nodes`` is MIN, Slurm's
    default). Slurm forgets the range once the job runs and cannot give a running job more nodes, so a running
    malleable job (:func:`is_malleable`) may go down to one node and no higher than it has.

    >>> node_range(SlurmJob(1, "PENDING", node_count=1, max_nodes=3), 1)
    (1, 3)
    >>> node_range(SlurmJob(2, "RUNNING", node_count=3, comment="wattsched:malleable"), 3)
    (1, 3)
    >>> node_range(SlurmJob(3, "RUNNING", node_count=3), 3)
    (0, 0)
    """
    if j.state == PENDING:
        return (nodes, j.max_nodes) if j.max_nodes > nodes else (0, 0)
    return (1, nodes) if is_malleable(j) and nodes > 1 else (0, 0)


@dataclass(frozen=True, slots=True)
class ClassRule:
    """The site's rule for the application class a job gets (``job_class_from_comment``).

    A job's comment is its user's text, and the class steers how ``dvfs`` and the
    demand-response policies slow or evict it, so the site chooses whether a
    declared class is ``trusted`` (used as declared), ``ignored`` (every job gets
    ``default``) or ``validated`` (used when ``users`` lists it for the job's user,
    or ``accounts`` for its account; else ``default``).

    >>> rule = ClassRule("cpu", "validated", users={"alice": frozenset({"memory"})})
    >>> rule.resolve(SlurmJob(1, "PENDING", user="alice", comment="wattsched:class=memory"))
    ('memory', '')
    >>> rule.resolve(SlurmJob(2, "PENDING", user="bob", comment="wattsched:class=memory"))[0]
    'cpu'
    >>> ClassRule("cpu").resolve(SlurmJob(3, "PENDING", user="bob", comment="wattsched:class=memory"))
    ('memory', '')
    """

    default: str = ""
    mode: str = "trusted"
    users: Mapping[str, frozenset[str]] = field(default_factory=dict)
    accounts: Mapping[str, frozenset[str]] = field(default_factory=dict)
    _told: set[int] = field(default_factory=set, compare=False, repr=False)
    """Jobs whose declared class was not used and that were logged for it (once per job)."""

    @classmethod
    def from_config(cls, cfg) -> ClassRule:
        """The rule of a daemon config (``job_class``, ``job_class_from_comment``, ``job_class_allowed``)."""
        allowed = cfg.job_class_allowed
        users = {u: frozenset(c) for u, c in (allowed.users if allowed else {}).items()}
        accounts = {a: frozenset(c) for a, c in (allowed.accounts if allowed else {}).items()}
        return cls(cfg.job_class, cfg.job_class_from_comment, users, accounts)

    def resolve(self, j: SlurmJob) -> tuple[str, str]:
        """``(class, why)``: the class job ``j`` gets, and why its declared class is not used ("" if it is, or
        if it declares none)."""
        declared = job_class(j, "")
        if not declared or self.mode == "trusted":
            return declared or self.default, ""
        if self.mode == "ignored":
            return self.default, "job_class_from_comment is ignored"
        if declared in self.users.get(j.user, ()) or declared in self.accounts.get(j.account, ()):
            return declared, ""
        return self.default, (f"job_class_allowed lists it neither for user {j.user!r} nor for account "
                              f"{j.account!r}")

    def of(self, j: SlurmJob) -> str:
        """The class job ``j`` gets; a declared class not used is logged, once per job."""
        cls_name, why = self.resolve(j)
        if why and j.job_id not in self._told:
            self._told.add(j.job_id)
            log.warning("job %d (user %s): declared class %r not used (%s); it gets %s", j.job_id, j.user,
                        job_class(j, ""), why, repr(self.default) if self.default else "no class")
        return cls_name

    def forget_all_but(self, jobs: Sequence[SlurmJob]) -> None:
        """Forget the jobs logged for, except ``jobs`` (those still in Slurm): the set stays bounded."""
        if self._told:
            self._told.intersection_update(j.job_id for j in jobs)


def to_job(j: SlurmJob, app_class: str = "", units: tuple[Unit, ...] = (), distinct: bool = False) -> Job:
    """The policy's view of a Slurm job of class ``app_class`` (:meth:`ClassRule.of`): whole nodes, or ``units``
    (see :func:`request_units`). A job of whole nodes carries its node range (:func:`node_range`) and whether it
    is malleable (:func:`is_malleable`); a job of units has neither."""
    nodes = len(units) if units else max(j.node_count, 1)
    lo, hi = (0, 0) if units else node_range(j, nodes)
    limit = j.time_limit_s
    walltime = limit if limit and math.isfinite(limit) else UNLIMITED_WALLTIME_S
    # Every field in Job's order (job_from_fields: a third of the dataclass __init__'s cost, per queued job):
    # id, submit, walltime, nodes, user, group, account, partition, qos, procs, cores and GPUs per node,
    # memory per node, min and max nodes, malleable, exclusive, priority, class, features, units, distinct, app.
    cpus = j.cpus
    return job_from_fields(
        j.job_id, j.submit_time or 0.0, walltime, nodes, j.user, "", j.account, j.partition, j.qos, cpus,
        max(1, cpus // max(j.node_count, 1)), j.gpus_per_node, 0, lo, hi, not units and is_malleable(j), True, 0.0,
        app_class,
        (), units, distinct and bool(units), "" if units else job_app(j),
    )


def request_units(j: SlurmJob, platform: Platform) -> tuple[tuple[Unit, ...], bool]:
    """What a pending job that may share nodes asks, as job units: ``(units, distinct_nodes)``.

    ``((), False)`` for a job that takes whole nodes (``--exclusive``, a
    partition with ``OverSubscribe=EXCLUSIVE``: Slurm marks the job so).
    Slurm lays a job out by node: a job that gives its tasks per node, a node
    count above one, GPUs or memory per node asks one unit per node, each on a
    node of its own, of the CPUs (tasks per node × CPUs per task, else its
    CPUs spread evenly over its nodes), GPUs and memory (``--mem``, else
    ``--mem-per-cpu`` × CPUs) of one node. A job of tasks alone (``-n 8``),
    which Slurm may spread over any nodes, asks one unit per task, and so
    does a job whose per-node unit would fit no node of the platform.

    >>> p = Platform.homogeneous_cluster(4, cores=2)
    >>> request_units(SlurmJob(1, "PENDING", shared=True, node_count=2, tasks=4, tasks_per_node=2,
    ...                        mem_per_cpu_mb=50), p)
    ((Unit(cores=2, gpus=0, mics=0, mem_mb=100), Unit(cores=2, gpus=0, mics=0, mem_mb=100)), True)
    >>> units, distinct = request_units(SlurmJob(2, "PENDING", shared=True, tasks=3, cpus=3), p)
    >>> len(units), units[0], distinct
    (3, Unit(cores=1, gpus=0, mics=0, mem_mb=0), False)
    """
    if not j.shared:
        return (), False
    cpt = max(1, j.cpus_per_task)
    tasks = max(1, j.tasks or j.cpus // cpt)
    if tasks > U.MAX_UNITS:
        return (), False
    nodes = max(1, j.node_count)
    gpus = j.gpus_per_node
    if j.tasks_per_node or nodes > 1 or tasks == 1 or gpus or j.mem_per_node_mb:
        cores = j.tasks_per_node * cpt if j.tasks_per_node else -(-max(j.cpus, tasks * cpt) // nodes)
        units = (Unit(cores, gpus, 0, j.mem_per_node_mb or j.mem_per_cpu_mb * cores),) * nodes
        if nodes > 1 or gpus or U.place(units, range(len(platform.nodes)), platform, {}, True) is not None:
            return units, True
    mem = j.mem_per_cpu_mb * cpt if j.mem_per_cpu_mb else -(-j.mem_per_node_mb // tasks)
    return (Unit(cpt, 0, 0, mem),) * tasks, False


def allocated_units(j: SlurmJob, index: Mapping[str, int], slurm_nodes: Sequence[SlurmNode]
                    ) -> tuple[tuple[Unit, ...], tuple[int, ...]] | None:
    """A running job that shares nodes as one unit per node it holds, from what Slurm allocated there.

    ``None`` for a job that holds whole nodes, or whose allocation Slurm did not
    report (it then counts as holding its nodes whole).
    """
    if not j.shared or not j.allocation:
        return None
    units: list[Unit] = []
    idx: list[int] = []
    for a in j.allocation:
        i = index.get(a.node)
        if i is None:
            continue
        node = slurm_nodes[i]
        cpus = a.cpus or a.cores * max(1, node.threads_per_core)
        units.append(Unit(min(max(cpus, 1), max(node.cpus, 1)), j.gpus_per_node, 0, a.mem_mb))
        idx.append(i)
    return (tuple(units), tuple(idx)) if units else None


@dataclass(slots=True)
class View:
    """The snapshot of one cycle and the mappings needed to act on the plan made from it."""

    snapshot: Snapshot
    classified: Classified
    slurm_jobs: dict[int, SlurmJob]
    node_names: list[str]
    slurm_nodes: dict[str, SlurmNode] = field(default_factory=dict)
    predicted_power_w: float = 0.0
    """Platform power from predictions alone (what the daemon would assume without telemetry)."""
    skipped_jobs: frozenset[int] = frozenset()
    """Jobs whose record Slurm printed but could not be read this cycle (``ClusterState.skipped_jobs``)."""


def build_view(
    state: ClusterState,
    *,
    partitions: frozenset[str],
    holds: Mapping[int, object],
    starts: Mapping[int, tuple],
    power: NodePowerModel | PowerModels,
    cap_w: Callable[[Platform], float | CapSchedule],
    estimator: Callable[[list[Job]], list[PowerEstimate]] | None,
    epoch: int,
    include_adopted: bool,
    platform_cache: dict,
    measured: Mapping[str, float] | None = None,
    settle_s: float = 0.0,
    default_class: str | ClassRule = "",
    take_user_holds: bool = False,
    indexes: bool = True,
    end_table: bool = True,
    job_cache: dict | None = None,
    classified: Classified | None = None,
    node_cap_w: Mapping[int, float] | None = None,
    node_freq_hz: Mapping[int, float] | None = None,
    reshape: str = "none",
) -> View:
    """The snapshot a policy decides on.

    ``include_adopted`` puts pending jobs that are not held yet into the queue
    too (dry-run, where the daemon holds nothing but decides as if it did).
    ``measured`` is node power by node name from telemetry; nodes missing from it
    are estimated (never taken as zero). A job that started less than
    ``settle_s`` ago keeps its predicted power: rate-based telemetry still shows
    (part of) the idle node it replaced. ``default_class`` is the application
    class of jobs whose comment names none (:func:`job_class`), or the site's whole
    :class:`ClassRule` (a class name alone trusts the comments).
    ``take_user_holds``: see :func:`classify`. ``job_cache`` (a dict the caller keeps between
    cycles) reuses the policy's job of a queued Slurm job whose record the backend reused unchanged
    (the same object) on the same platform: at 100,000 queued jobs most are the same from cycle to cycle.

    With ``indexes``, the snapshot gets the indexes the simulator keeps
    (:meth:`~wattsched.model.snapshot.Snapshot.build_indexes`; the end table
    with ``end_table``, which the simulator keeps for policies that set
    ``wants_end_table``): a policy then takes the same code path live as in
    replay. A caller that changes the snapshot's jobs or estimates afterwards
    passes ``indexes=False`` and builds them once it is done.

    ``reshape`` is what the backend can do to a running job (``SlurmBackend.reshape``): with ``shrink`` the
    snapshot lets a policy shrink a malleable job to a subset of its nodes that keeps its first one (Slurm's
    batch host); with ``none`` the guard refuses every ``Reshape``.
    """
    c = classified if classified is not None else classify(state, partitions, holds, starts, take_user_holds)
    rule = default_class if isinstance(default_class, ClassRule) else ClassRule(default_class)
    nodes = managed_nodes(state, partitions)
    platform = managed_platform(state, partitions, power, platform_cache, nodes)
    index = {n.name: i for i, n in enumerate(nodes)}

    now = state.read_at
    # Running jobs, and released jobs Slurm has not started yet on their planned nodes (their nodes and power
    # are committed: a policy that ignored them would over-commit the cap): (job, start, node indices).
    running_jobs: dict[int, tuple[Job, float, tuple[int, ...]]] = {}
    for j in c.running:
        alloc = allocated_units(j, index, nodes)
        if alloc is not None:
            running_jobs[j.job_id] = (to_job(j, rule.of(j), alloc[0], True), j.start_time or now, alloc[1])
            continue
        idx = tuple(index[n] for n in j.nodes if n in index)
        if idx:
            running_jobs[j.job_id] = (to_job(j, rule.of(j)), j.start_time or now, idx)
    for j in c.starting:
        planned, released_at = starts[j.job_id][0], starts[j.job_id][1]
        units, distinct = request_units(j, platform)
        idx = tuple(index[n] for n in planned if n in index)
        if units and len(idx) == len(planned) == len(units):  # released unit by unit (a node may repeat)
            running_jobs[j.job_id] = (to_job(j, rule.of(j), units, distinct), released_at, idx)
        elif idx:
            running_jobs[j.job_id] = (to_job(j, rule.of(j)), released_at, tuple(dict.fromkeys(idx)))

    # a job Slurm will not start yet (the begin time it gives a requeued job, --begin) is not offered to the
    # policy: a release would only time out
    queue = [j for j in (c.ours + c.adopt if include_adopted else c.ours)
             if not (j.eligible_time and j.eligible_time > now)]
    queue.sort(key=lambda j: (j.submit_time or 0.0, j.job_id))
    pending = _pending_jobs(queue, platform, rule, job_cache)
    rule.forget_all_but(state.jobs)

    estimates: dict[int, PowerEstimate] = {}
    if estimator is not None:
        jobs = list(pending.values()) + [r[0] for r in running_jobs.values()]
        if jobs:
            estimates = dict(zip((j.id for j in jobs), estimator(jobs), strict=True))

    # The ledger of the managed nodes, filled as the simulator's engine fills its own: the settings in force,
    # the jobs running (predicted power through the response models), then what the telemetry measured.
    ledger = Ledger(platform)
    ledger.open(now)
    ledger.estimates.update(estimates)  # the running jobs' totals and ends are kept as the jobs are observed
    for i, cap in (node_cap_w or {}).items():
        ledger.set_node_cap(i, cap)
    for i, freq in (node_freq_hz or {}).items():
        ledger.set_node_freq(i, freq)
    settling: set[int] = set()  # nodes of jobs that started less than settle_s ago: predicted, not measured
    for jid, (job, start, idx) in running_jobs.items():
        est = estimates.get(jid)
        truth = Expected(job.walltime_s, est.mean_w if est is not None else None, job.gpus_per_node)
        if ledger.observe_run(job, start, idx, truth) is None:
            log.debug("job %d: a node of it already runs another job; left out of the snapshot", jid)
        elif start > now - settle_s:
            settling.update(idx)
    # jobs of other partitions sharing managed nodes take their part too (their power stays the node's)
    for j in state.jobs:
        if j.state in ACTIVE and not is_managed_job(j, partitions):
            alloc = allocated_units(j, index, nodes)
            if alloc is not None:
                for u, i in zip(*alloc, strict=True):
                    ledger.observe_units(i, (u,))
    for i, f in ledger.node_free.items():
        ledger.node_free[i] = (max(f[0], 0), max(f[1], 0), max(f[2], 0), max(f[3], 0))
    for i, n in enumerate(nodes):
        held = ledger.state[i] == NodeState.BUSY
        st = node_state(n, held)
        if st != ledger.state[i]:
            ledger.observe_state(i, int(st))
    predicted = ledger.power_w
    names = [n.name for n in nodes]
    if measured:
        ledger.observe_power({i: measured[name] for i, name in enumerate(names)
                              if name in measured and i not in settling})
    snapshot = ledger.snapshot(
        cap=_schedule(cap_w(platform)),
        platform_power_w=ledger.power_w,
        jobs_power_w=sum(r.power_w for r in ledger.runs.values()),
        epoch=epoch,
        # what the backend can do to a running job (SlurmBackend.reshape): shrink it, or nothing
        can_reshape=reshape == "shrink",
        reshape_shrink_only=True,
    )
    # The queue and the indexes over it: built once from the whole queue, as the simulator's are kept.
    snapshot.pending = pending
    snapshot.estimates = ledger.estimates if estimator is not None else None
    snapshot.queue_index = snapshot.end_table = None  # the ledger's are empty: built from the whole queue below
    if indexes:
        snapshot.build_indexes(end_table)
    return View(snapshot, c, {j.job_id: j for j in state.jobs}, names, {n.name: n for n in nodes}, predicted,
                state.skipped_jobs)


def _pending_jobs(queue: list[SlurmJob], platform: Platform, rule: ClassRule, job_cache: dict | None
                  ) -> dict[int, Job]:
    """The policy's jobs of the queued Slurm jobs; ``job_cache`` (see :func:`build_view`) reuses unchanged ones
    (the same record under the same class rule)."""
    if job_cache is None:
        return {j.job_id: to_job(j, rule.of(j), *request_units(j, platform)) for j in queue}
    pending, cached = {}, {}
    for j in queue:
        hit = job_cache.get(j.job_id)
        if hit is not None and hit[0] is j and hit[1] is platform and (hit[2] is rule or hit[2] == rule):
            job = hit[3]
        else:
            job = to_job(j, rule.of(j), *request_units(j, platform))
        pending[j.job_id] = job
        cached[j.job_id] = (j, platform, rule, job)
    job_cache.clear()
    job_cache.update(cached)
    return pending


@dataclass(frozen=True, slots=True)
class Expected:
    """What the daemon expects of a running job, where the simulator has the trace's record: its predicted power
    per node (``None``: the node's busy power) and its time limit as its run time."""

    runtime_s: float
    mean_w: float | None
    gpus_per_node: int
    power_series: None = None
