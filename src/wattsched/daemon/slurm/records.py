"""Jobs and nodes as Slurm reports them, independent of the Slurm version and the way they were read.

Every backend (CLI JSON of any data_parser version, plain ``scontrol`` text,
pyslurm) produces these records; the rest of the daemon reads only them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Base job states, as Slurm names them.
PENDING = "PENDING"
RUNNING = "RUNNING"
SUSPENDED = "SUSPENDED"
COMPLETING = "COMPLETING"

# Reasons of a held job (priority 0).
HELD_ADMIN = "JobHeldAdmin"
HELD_USER = "JobHeldUser"


@dataclass(frozen=True, slots=True)
class NodeAllocation:
    """What Slurm allocated to a job on one node.

    ``cpus``: the CPUs allocated there where Slurm says so (``cpus.count``
    of data_parser v0.0.41 and later, the ``CPU_IDs`` of ``scontrol -d show
    job``), else 0. ``cores``: the cores marked allocated in the JSON's
    per-socket core map, else 0; 22.05 to v0.0.40 give only these, and the
    daemon multiplies them by the node's threads per core. ``mem_mb``: the
    memory allocated there, MB.
    """

    node: str
    cpus: int = 0
    cores: int = 0
    mem_mb: int = 0


@dataclass(frozen=True, slots=True)
class SlurmJob:
    """One job from ``squeue``/``scontrol show job``.

    Times are epoch seconds (``None`` when Slurm has none). ``time_limit_s`` is
    ``None`` for an unlimited job. ``nodes`` are the allocated nodes and
    ``required_nodes`` the ReqNodeList, both expanded from Slurm's hostlist form.
    ``admin_comment`` (which only admins can set) carries wattsched's hold marker.
    ``state`` is the base state (``PENDING``, ``RUNNING``, ...); ``flags`` the
    extra state flags newer Slurm versions report next to it (``REQUEUED``,
    ``COMPLETING``, ...). ``priority`` 0 means held.

    ``shared``: the job may share its nodes with other jobs (Slurm's
    default ``OverSubscribe=OK`` or ``YES``). ``False`` for ``--exclusive``
    and for every job of a partition with ``OverSubscribe=EXCLUSIVE`` (Slurm
    marks those at submission), for ``user``, ``mcs`` and ``topo`` (whole
    nodes for one user, group or topology block), for a mode wattsched does
    not know, and when Slurm does not say: the job then counts as holding
    its nodes whole, the safe reading.

    What the job asks: ``tasks`` (0: not given), ``tasks_per_node`` (0: not
    given), ``cpus_per_task`` (1 when not given), ``mem_per_node_mb``
    (``--mem``) or ``mem_per_cpu_mb`` (``--mem-per-cpu``, or the partition's
    ``DefMemPerCPU``), 0 when not given.

    ``max_nodes``: the most nodes a pending moldable job accepts (``sbatch
    --nodes=MIN-MAX``: ``node_count`` is MIN, Slurm's default, and
    ``max_nodes`` MAX); 0 when Slurm gives no range (a job submitted without
    ``-N`` or with one count, and every running job: Slurm forgets the range
    once it allocates).

    ``allocation``: what the job holds on each node, one
    :class:`NodeAllocation` per node in Slurm's order, for a job that holds
    nodes (running, suspended or completing) and ``()`` otherwise. The JSON
    backends (CLI and slurmrestd) and the text backend (``scontrol -d``)
    fill it. The pyslurm backend leaves it empty, as pyslurm documents its
    per-node layout as subject to change; it reads ``shared`` and what the
    job asks from pyslurm's documented ``Job`` properties.
    """

    job_id: int
    state: str
    user: str = ""
    account: str = ""
    partition: str = ""
    qos: str = ""
    name: str = ""
    reason: str = ""
    flags: frozenset[str] = frozenset()
    priority: int | None = None
    submit_time: float | None = None
    start_time: float | None = None
    end_time: float | None = None
    time_limit_s: float | None = None
    node_count: int = 1
    max_nodes: int = 0
    cpus: int = 0
    nodes: tuple[str, ...] = ()
    required_nodes: tuple[str, ...] = ()
    excluded_nodes: tuple[str, ...] = ()
    comment: str = ""
    admin_comment: str = ""
    requeue: bool = True
    batch: bool = True
    restart_count: int = 0
    eligible_time: float | None = None  # Slurm starts it no earlier (a requeued job's or --begin's begin time)
    gpus_per_node: int = 0
    features: str = ""
    shared: bool = False
    tasks: int = 0
    tasks_per_node: int = 0
    cpus_per_task: int = 1
    mem_per_node_mb: int = 0
    mem_per_cpu_mb: int = 0
    allocation: tuple[NodeAllocation, ...] = ()

    @property
    def held(self) -> bool:
        return self.state == PENDING and (self.priority == 0 or self.reason in (HELD_ADMIN, HELD_USER))


@dataclass(frozen=True, slots=True)
class SlurmNode:
    """One node from ``sinfo``/``scontrol show node``.

    ``state`` is the base state in upper case (``IDLE``, ``ALLOCATED``,
    ``MIXED``, ``DOWN``, ``UNKNOWN``, ...); ``flags`` the state flags
    (``DRAIN``, ``POWERED_DOWN``, ``POWERING_UP``, ``POWERING_DOWN``,
    ``POWER_DOWN``, ``NOT_RESPONDING``, ...), upper case, as newer Slurm
    reports them (22.05's lowercase ``state_flags`` and the plain-text
    ``IDLE+DRAIN+POWERED_DOWN`` form are normalised to this).
    ``current_watts`` is ``None`` when Slurm has no energy data.
    """

    name: str
    state: str
    flags: frozenset[str] = frozenset()
    cpus: int = 0
    sockets: int = 0
    cores_per_socket: int = 0
    threads_per_core: int = 1
    real_memory_mb: int = 0
    features: tuple[str, ...] = ()
    partitions: tuple[str, ...] = ()
    gres: str = ""
    reason: str = ""
    current_watts: float | None = None
    address: str = ""

    @property
    def drained(self) -> bool:
        return "DRAIN" in self.flags or "DRAINED" in self.flags or "DRAINING" in self.flags

    @property
    def down(self) -> bool:
        """Down, failed or not responding; a node being resumed does not respond until its slurmd starts."""
        if self.state in ("DOWN", "FAIL", "FUTURE", "UNKNOWN"):
            return True
        return "NOT_RESPONDING" in self.flags and not self.powering_up

    @property
    def powered_off(self) -> bool:
        return "POWERED_DOWN" in self.flags

    @property
    def powering_up(self) -> bool:
        return "POWERING_UP" in self.flags or "POWER_UP" in self.flags

    @property
    def powering_down(self) -> bool:
        return "POWERING_DOWN" in self.flags or "POWER_DOWN" in self.flags


@dataclass(frozen=True, slots=True)
class ClusterState:
    """What one read of Slurm returned: jobs (pending and running), nodes, and Slurm's version string.

    ``skipped_records``: job and node records Slurm printed that could not be read and were left out
    (each logged once with its job id or node name). ``skipped_jobs``: the ids of the jobs left out so:
    they exist, so what the daemon keeps about them (its hold, a start awaiting confirmation) is kept.
    """

    jobs: tuple[SlurmJob, ...]
    nodes: tuple[SlurmNode, ...]
    version: str = ""
    read_at: float = 0.0
    partitions: dict[str, tuple[str, ...]] = field(default_factory=dict)
    skipped_records: int = 0
    skipped_jobs: frozenset[int] = frozenset()
