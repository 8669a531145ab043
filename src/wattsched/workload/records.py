"""Workload records: what a trace says about a job, ground truth included.

A :class:`TraceJob` is what the simulator replays. It carries the truth a
policy must never see (real runtime, real power); the engine turns it into a
:class:`~wattsched.model.job.Job` at submission.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from wattsched.model.job import PowerEstimate, power_estimate, slotted

try:
    import cython
except ImportError:  # pure Python without Cython installed
    from wattsched import _shadow as cython


@dataclass  # slotted as pure Python below; compiled, a C type (records.pxd)
class TraceJob:
    """One job of a workload.

    Times are seconds relative to the trace's origin (see ``docs/simulator.md``).
    ``runtime_s`` is the real run time at nominal speed; ``walltime_s`` the
    requested time. Power fields are per node, in watts; ``None`` means the
    trace has no power for this job (the platform's busy power is used then).
    ``power_series`` optionally gives a measured per-node power profile as
    ``(offset_s, watts)`` steps from the job's start. ``units`` makes it a
    job of units (see :class:`~wattsched.model.job.Job`): ``nodes`` is then the
    number of units and the power fields are per unit.
    """

    id: int
    submit_s: float
    runtime_s: float
    walltime_s: float
    procs: int
    nodes: int
    user: str = ""
    group: str = ""
    partition: str = ""
    status: int = 1
    mean_w: float | None = None
    max_w: float | None = None
    std_w: float | None = None
    app_class: str = ""
    power_series: tuple[tuple[float, float], ...] | None = None
    gpus_per_node: int = 0
    min_nodes: int = 0
    max_nodes: int = 0
    malleable: bool = False
    extra: dict = field(default_factory=dict)
    units: tuple = ()

    def __init__(self, id: int, submit_s: float, runtime_s: float, walltime_s: float, procs: int, nodes: int,
                 user: str = "", group: str = "", partition: str = "", status: int = 1, mean_w: float | None = None,
                 max_w: float | None = None, std_w: float | None = None, app_class: str = "",
                 power_series: tuple[tuple[float, float], ...] | None = None, gpus_per_node: int = 0,
                 min_nodes: int = 0, max_nodes: int = 0, malleable: bool = False, extra: dict | None = None,
                 units: tuple = ()) -> None:
        # written out (the dataclass keeps it), so that the compiled core compiles it: one per job of a trace
        self.id = id
        self.submit_s = submit_s
        self.runtime_s = runtime_s
        self.walltime_s = walltime_s
        self.procs = procs
        self.nodes = nodes
        self.user = user
        self.group = group
        self.partition = partition
        self.status = status
        self.mean_w = mean_w
        self.max_w = max_w
        self.std_w = std_w
        self.app_class = app_class
        self.power_series = power_series
        self.gpus_per_node = gpus_per_node
        self.min_nodes = min_nodes
        self.max_nodes = max_nodes
        self.malleable = malleable
        self.extra = {} if extra is None else extra
        self.units = units


if not cython.compiled:
    TraceJob = slotted(TraceJob)


def app_of(job: TraceJob) -> str:
    """The job's PASS application (``extra["app"]``, its job table's ``app`` column), ``""`` if it has none.

    >>> app_of(TraceJob(1, 0.0, 60.0, 60.0, 4, 4, extra={"app": "lulesh"}))
    'lulesh'
    """
    return job.extra.get("app", "") if job.extra else ""


def true_power(tj: TraceJob, platform) -> PowerEstimate:
    """Real per-node power of a job (mean, max, std), as a node's meter shows it over the run.

    From its power profile if it has one (time-weighted), else its ``mean_w``/``max_w``/``std_w``,
    else the node's ``busy_w`` plus the job's GPUs at TDP.
    """
    if tj.power_series is not None:
        # each step weighs by how long it lasts (the last until the job's end)
        series = tj.power_series
        ends = [t for t, _ in series[1:]] + [max(tj.runtime_s, series[-1][0])]
        weights = [max(e - t, 0.0) for (t, _), e in zip(series, ends)]
        total = sum(weights)
        if total <= 0:
            weights, total = [1.0] * len(series), float(len(series))
        mean = sum(w * p for w, (_, p) in zip(weights, series)) / total
        var = sum(w * (p - mean) ** 2 for w, (_, p) in zip(weights, series)) / total
        return PowerEstimate(mean, max(p for _, p in series), var**0.5)
    if tj.mean_w is not None:
        return power_estimate(tj.mean_w, tj.max_w if tj.max_w is not None else tj.mean_w, tj.std_w or 0.0)
    w = platform.max_busy_w(tj.gpus_per_node)
    return PowerEstimate(w, w, 0.0)


@dataclass
class CleaningReport:
    """Counts of jobs dropped or changed by each cleaning rule, and lines skipped."""

    read: int = 0
    kept: int = 0
    dropped: dict[str, int] = field(default_factory=dict)
    adjusted: dict[str, int] = field(default_factory=dict)
    skipped_lines: int = 0

    def drop(self, rule: str) -> None:
        self.dropped[rule] = self.dropped.get(rule, 0) + 1

    def adjust(self, rule: str) -> None:
        self.adjusted[rule] = self.adjusted.get(rule, 0) + 1

    def as_dict(self) -> dict:
        return {
            "read": self.read,
            "kept": self.kept,
            "dropped": dict(self.dropped),
            "adjusted": dict(self.adjusted),
            "skipped_lines": self.skipped_lines,
        }


@dataclass
class Workload:
    """A stream of jobs in submission order plus what the source says about the machine.

    ``jobs`` is an iterator: large traces are read as the simulation goes.
    ``report`` fills in as the stream is consumed. ``origin_unix_s`` is the
    epoch time of ``t = 0`` when the source knows it.
    """

    name: str
    jobs: Iterator[TraceJob]
    max_procs: int | None = None
    max_nodes: int | None = None
    origin_unix_s: float | None = None
    header: dict[str, str] = field(default_factory=dict)
    report: CleaningReport = field(default_factory=CleaningReport)
    notes: list[str] = field(default_factory=list)
    has_power: bool = False
