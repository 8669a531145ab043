"""Jobs as a live system sees them, and power estimates.

A :class:`Job` holds only what Slurm would know about a job: who submitted it,
when, what it asked for. Ground truth (its real runtime and power) never lives
here: the simulator keeps it in its own records so that a policy cannot read it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, fields

try:
    import cython
except ImportError:  # pure Python without Cython installed
    from wattsched import _shadow as cython


class JobState(str, enum.Enum):
    """Final or current state of a job, named as Slurm names them."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    TIMEOUT = "TIMEOUT"  # killed at its requested time
    CANCELLED = "CANCELLED"  # evicted with cancel
    PREEMPTED = "PREEMPTED"  # evicted and requeued (transient)


@dataclass(frozen=True, slots=True)
class PowerEstimate:
    """Per-node power of a job, in watts: mean, maximum and standard deviation.

    >>> PowerEstimate(300.0, 350.0, 20.0).total_mean_w(4)
    1200.0
    """

    mean_w: float
    max_w: float
    std_w: float = 0.0

    def total_mean_w(self, nodes: int) -> float:
        return self.mean_w * nodes


@dataclass(frozen=True, slots=True)
class Unit:
    """One job unit: what it asks of the node it runs on (Borghesi et al. 2018, §3).

    ``mem_mb`` 0 asks no memory; a node whose ``mem_mb`` is 0 has no memory limit.
    """

    cores: int = 1
    gpus: int = 0
    mics: int = 0
    mem_mb: int = 0


@dataclass(frozen=True)  # slotted as pure Python below; compiled, a C type (job.pxd)
class Job:
    """A job as submitted.

    Parameters
    ----------
    id
        Job id, unique within a run.
    submit_s
        Submission time (trace-relative seconds in the simulator, epoch live).
    walltime_s
        Requested time limit. Slurm kills the job when it is reached.
    nodes
        Number of whole nodes requested.
    procs
        Processors requested in the original record (informational).
    min_nodes, max_nodes
        Range a moldable or malleable job accepts; both default to ``nodes``.
    malleable
        Whether the job may be reshaped while it runs (simulator only).
    app_class
        Application class (``cpu``, ``memory``, ``mixed`` or a site class); it
        selects the job's response model, i.e. how its runtime and power change
        with a frequency or power cap.
    units
        Job units (Borghesi et al. 2018, §3): each asks cores, GPUs, MICs and
        memory on one node, several units (of this job or of others) may share
        a node, and all start and end together. Empty (the default, and every
        SWF trace): the job takes ``nodes`` whole nodes. With units, ``nodes``
        is the number of units, a Start gives one node per unit (a node may
        repeat), and power figures "per node" are per unit: the power of a node
        running that unit alone (see :mod:`wattsched.model.units`).
    distinct_nodes
        With units: each unit on a node of its own (no two units of this job
        share a node, though units of other jobs may). Slurm lays a job out
        per node, so the daemon reads a job that shares nodes by node as one
        unit per node with this set; a job of tasks that Slurm may place
        anywhere (``-n`` alone) has one unit per task and this unset.
    app
        The job's application (a trace record's ``extra["app"]``, e.g. a
        packaged PASS model such as ``leanmd``), ``""`` for none. On a platform
        with CPU power levels the simulator times a job of a PASS application
        by its node count and CPU cap (4.6 of docs/simulator.md).
    """

    id: int
    submit_s: float
    walltime_s: float
    nodes: int
    user: str = ""
    group: str = ""
    account: str = ""
    partition: str = ""
    qos: str = ""
    procs: int = 0
    cores_per_node: int = 1
    gpus_per_node: int = 0
    mem_per_node_mb: int = 0
    min_nodes: int = 0
    max_nodes: int = 0
    malleable: bool = False
    exclusive: bool = True
    priority: float = 0.0
    app_class: str = ""
    features: tuple[str, ...] = field(default=())
    units: tuple[Unit, ...] = field(default=())
    distinct_nodes: bool = False
    app: str = ""

    @property
    def area(self) -> float:
        """Requested node-seconds, the key of Smallest Area First ordering."""
        return self.walltime_s * self.nodes


@dataclass(frozen=True)  # slotted as pure Python below; compiled, a C type (job.pxd)
class RunningJob:
    """A running job as a live system knows it.

    ``expected_end_s`` is ``start_s + walltime_s``: the latest the job can end
    if the cluster kills jobs at their requested time. ``power_w`` is the
    measured power of the whole job (all its nodes); ``speed`` is its current
    speed relative to nominal (below 1 under a cap or a lower frequency).
    ``freq_hz`` and ``cap_w`` are the lowest frequency limit and power cap in
    force on its nodes (``None``: none set). ``work_done_s`` is the work it had
    done at ``settled_s`` (default: its start), in seconds at nominal speed;
    :meth:`progress` extrapolates it at the current speed. Progress is counted
    against the requested time, the same way live (where the real runtime is
    unknown) and in replay (where telling it would leak the ground truth).

    >>> r = RunningJob(Job(1, 0.0, 100.0, 1), 10.0, (0,), 110.0, speed=0.5)
    >>> r.progress(50.0)
    0.2
    """

    job: Job
    start_s: float
    nodes: tuple[int, ...]
    expected_end_s: float
    power_w: float = 0.0
    speed: float = 1.0
    freq_hz: float | None = None
    cap_w: float | None = None
    work_done_s: float = 0.0
    settled_s: float | None = None

    def progress(self, now_s: float) -> float:
        """Fraction of the requested time worked at ``now_s``, in [0, 1] (at nominal speed; 0 without a limit)."""
        wall = self.job.walltime_s
        if not wall > 0:
            return 0.0
        since = self.start_s if self.settled_s is None else self.settled_s
        done = self.work_done_s + max(0.0, now_s - since) * self.speed
        return min(1.0, max(0.0, done / wall))


_ADDED_BY_DATACLASS = frozenset({"__init__", "__repr__", "__eq__", "__hash__", "__setattr__", "__delattr__",
                                 "__getstate__", "__setstate__", "__dataclass_fields__", "__dataclass_params__",
                                 "__match_args__", "__weakref__", "__dict__"})


def slotted(cls: type) -> type:
    """``cls`` (a dataclass) made again as the same dataclass with ``slots=True``, for pure Python.

    The compiled core declares some dataclasses as C types in ``.pxd`` files, and Cython makes those
    dataclasses itself (it takes no ``slots``); as pure Python, such a class is passed through this after its
    definition (``if not cython.compiled: X = slotted(X)``), so that both have a fixed layout and no
    per-instance ``__dict__``. A method the class defines itself (say its own ``__init__``) is kept; those
    the dataclass decorator wrote are written again.
    """

    def written_by_dataclass(name: str, value) -> bool:
        code = getattr(value, "__code__", None)
        return name in _ADDED_BY_DATACLASS and (code is None or code.co_filename == "<string>")

    namespace = {k: v for k, v in cls.__dict__.items() if not written_by_dataclass(k, v)}
    namespace.update((f.name, f) for f in fields(cls))  # each field as declared (a default factory leaves none)
    params = cls.__dataclass_params__
    return dataclass(frozen=params.frozen, eq=params.eq, slots=True)(type(cls.__name__, cls.__bases__, namespace))


if not cython.compiled:
    Job = slotted(Job)
    RunningJob = slotted(RunningJob)


def slot_layout(cls: type) -> type:
    """A class with the slots of ``cls`` (a slotted dataclass), hence its memory layout, and nothing else.

    The per-job constructors of the compiled core (:func:`power_estimate` and the like) fill one
    with plain attribute stores, then make it a ``cls`` by assigning ``__class__``: a frozen
    dataclass's generated ``__init__`` sets each field through ``object.__setattr__``, at about
    three times the cost.
    """
    return type(f"_{cls.__name__}Layout", (), {"__slots__": cls.__slots__})


_PowerEstimateLayout = slot_layout(PowerEstimate)
_new = object.__new__


def power_estimate(mean_w: float, max_w: float, std_w: float) -> PowerEstimate:
    """``PowerEstimate(mean_w, max_w, std_w)``, built on a :func:`slot_layout` (per completed job)."""
    obj = _new(_PowerEstimateLayout)
    obj.mean_w = mean_w
    obj.max_w = max_w
    obj.std_w = std_w
    obj.__class__ = PowerEstimate
    return obj


def job_from_fields(id, submit_s, walltime_s, nodes, user, group, account, partition, qos, procs, cores_per_node,
                    gpus_per_node, mem_per_node_mb, min_nodes, max_nodes, malleable, exclusive, priority, app_class,
                    features, units, distinct_nodes, app) -> Job:
    """``Job(*values)`` with every field given, in field order, no default filled in: the simulator's per-job path.

    Compiled, the fields are stored straight into a new Job's C struct; as
    pure Python, ``Job(*values)``. The result is equal to ``Job(*values)``
    (a unit test holds the parameters to ``fields(Job)``).
    """
    if not cython.compiled:
        return Job(id, submit_s, walltime_s, nodes, user, group, account, partition, qos, procs, cores_per_node,
                   gpus_per_node, mem_per_node_mb, min_nodes, max_nodes, malleable, exclusive, priority,
                   app_class, features, units, distinct_nodes, app)
    obj = Job.__new__(Job)
    obj.id = id
    obj.submit_s = submit_s
    obj.walltime_s = walltime_s
    obj.nodes = nodes
    obj.user = user
    obj.group = group
    obj.account = account
    obj.partition = partition
    obj.qos = qos
    obj.procs = procs
    obj.cores_per_node = cores_per_node
    obj.gpus_per_node = gpus_per_node
    obj.mem_per_node_mb = mem_per_node_mb
    obj.min_nodes = min_nodes
    obj.max_nodes = max_nodes
    obj.malleable = malleable
    obj.exclusive = exclusive
    obj.priority = priority
    obj.app_class = app_class
    obj.features = features
    obj.units = units
    obj.distinct_nodes = distinct_nodes
    obj.app = app
    return obj


def running_job_from_fields(job, start_s, nodes, expected_end_s, power_w, speed, freq_hz, cap_w, work_done_s,
                            settled_s) -> RunningJob:
    """``RunningJob(*values)`` with every field given, as :func:`job_from_fields` builds a Job."""
    if not cython.compiled:
        return RunningJob(job, start_s, nodes, expected_end_s, power_w, speed, freq_hz, cap_w, work_done_s,
                          settled_s)
    obj = RunningJob.__new__(RunningJob)
    obj.job = job
    obj.start_s = start_s
    obj.nodes = nodes
    obj.expected_end_s = expected_end_s
    obj.power_w = power_w
    obj.speed = speed
    obj.freq_hz = freq_hz
    obj.cap_w = cap_w
    obj.work_done_s = work_done_s
    obj.settled_s = settled_s
    return obj
