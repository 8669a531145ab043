"""The snapshot: everything a policy may know at one instant.

The simulator hands policies a snapshot that is a read-only *view* of its own
state (copying a queue of thousands of jobs at every event would dominate the
run time); the daemon builds a fresh one each cycle. Either way a policy must
not modify it: the conformance suite checks this for every policy.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from wattsched.model.constraints import BudgetState, CapSchedule, EnergyBudget, NoticedEvent
from wattsched.model.end_table import EndTable
from wattsched.model.job import Job, PowerEstimate, RunningJob, slotted
from wattsched.model.platform import NodeState, Platform
from wattsched.model.queue_index import QueueIndex
from wattsched.model.response import ResponseModel
from wattsched.model.units import default_unit_estimate_w

try:
    import cython
except ImportError:  # pure Python without Cython installed
    from wattsched import _shadow as cython

if TYPE_CHECKING:  # model.forecast computes on snapshots; numpy.typing costs 40 ms at import
    import numpy.typing as npt

    from wattsched.model.forecast import Forecast


@dataclass  # slotted as pure Python below; compiled, a C type (snapshot.pxd)
class Snapshot:
    """State of the cluster at ``now_s``.

    Attributes
    ----------
    pending
        Pending jobs by id, in queue (submission) order.
    running
        Running jobs by id.
    free_nodes
        Indices of nodes that are idle, powered on and usable, in decreasing
        index order (a node running units of jobs of units is not free: see
        ``node_free``). The order is canonical: the simulator and the daemon list
        free nodes alike, so a policy given the same state picks the same
        nodes on both. The built-in policies take nodes from the end of this
        list, the lowest-numbered free nodes first.
    node_state
        State of every node, by index.
    cap
        The power-cap schedule as known now, demand-response windows noticed
        so far included; :attr:`cap_w` is the cap in force now. Look ahead
        with :meth:`lowest_cap` (``cap.lowest_cap``), which sees no further
        than ``cap_lookahead_s``.
    cap_lookahead_s
        How far ahead the cap schedule is known and enforced: the guard holds
        a plan's power estimate to the lowest cap over this horizon (capped by
        the shortest requested time among the plan's starts). ``0`` checks the
        cap in force now only.
    budgets
        Energy-budget windows in force now, with the energy consumed in each so far.
    upcoming_budgets
        Energy-budget windows that start later, as far ahead as they are known
        (the daemon lays recurring ones out a week ahead), soonest first: a job
        started now whose requested time runs into one is charged against it.
    dr_events
        Demand-response events noticed so far and not yet over, with the cap
        each resolved to at its notice time.
    unsettled_nodes
        Nodes whose measured power does not show yet a change made to them
        (live: a cap, a frequency or an eviction less than
        ``telemetry.settle_s`` ago); the power of their running jobs is the
        predicted one meanwhile. Empty in replay, where power is exact.
    node_cap_w, node_freq_hz
        Observed power cap and frequency limit per node index (nodes absent
        have none): what is in force now.
    desired_node_cap_w, desired_node_freq_hz
        What the plans so far asked for, by node. They differ from the
        observed values while an actuation is pending or failed (live); in
        replay they are equal.
    node_free
        Free capacity ``(cores, gpus, mics, mem_mb)`` of each node running
        units of jobs of units (:mod:`wattsched.model.units`), by node index:
        further units may start there. Such a node is busy and not in
        ``free_nodes``; a job without units never gets it.
    platform_power_w
        Measured platform power.
    epoch
        Changes whenever anything but the arrival of new jobs at the end of
        ``pending`` (or the passing of time) changed since the previous
        snapshot of the same source. Policies may use it to reuse work from
        their previous call; a source that cannot tell just increments it
        every time.
    queue_index
        Optional :class:`~wattsched.model.queue_index.QueueIndex` over
        ``pending`` in the same order, kept up to date by the source.
    estimates
        Predicted per-node power of pending and running jobs, by job id.
    running_estimate
        ``[sum of mean, sum of max, variance]`` over running jobs, kept by the
        source (see :meth:`running_estimate_totals`, :meth:`build_indexes`).
    jobs_power_w
        Measured power of all running jobs together.
    end_table
        Optional: the running jobs in :meth:`running_by_end` order with their
        predicted power (:class:`~wattsched.model.end_table.EndTable`); kept
        by the simulator for policies that set ``wants_end_table``.
    ends
        Optional: the running jobs as :meth:`running_by_end` returns them,
        kept sorted by the source; computed on first use otherwise.
    estimator
        Returns a power estimate for a pending job (a predictor, or the
        platform's nominal busy power when no predictor is configured).
    can_reshape
        Whether the source can reshape a running job at all (the simulator
        can; the daemon says so where its Slurm backend can shrink a job,
        and the guard refuses a ``Reshape`` otherwise).
    reshape_shrink_only
        The source can only shrink a running job, to a subset of its nodes
        that keeps its first node (a live Slurm: ``scontrol update
        NodeList=`` of a running job, which must keep the job's batch host);
        the guard refuses any other ``Reshape``.
    forecast
        Platform power over the next hours as the snapshot stands (no plan
        applied yet), from :func:`wattsched.model.forecast.forecast`; filled
        by the daemon and by the simulator when asked (``None`` otherwise).
    """

    now_s: float
    platform: Platform
    pending: Mapping[int, Job]
    running: Mapping[int, RunningJob]
    free_nodes: Sequence[int]
    node_state: Sequence[int]
    cap: CapSchedule = field(default_factory=CapSchedule)
    cap_lookahead_s: float = math.inf
    budgets: Sequence[BudgetState] = ()
    upcoming_budgets: Sequence[EnergyBudget] = ()
    dr_events: Sequence[NoticedEvent] = ()
    platform_power_w: float = 0.0
    epoch: int = 0
    estimator: Callable[[Job], PowerEstimate] | None = None
    unsettled_nodes: frozenset[int] = frozenset()
    node_cap_w: Mapping[int, float] = field(default_factory=dict)
    node_freq_hz: Mapping[int, float] = field(default_factory=dict)
    desired_node_cap_w: Mapping[int, float] = field(default_factory=dict)
    desired_node_freq_hz: Mapping[int, float] = field(default_factory=dict)
    queue_index: QueueIndex | None = None
    estimates: Mapping[int, PowerEstimate] | None = None
    running_estimate: Sequence[float] | None = None
    jobs_power_w: float | None = None
    end_table: EndTable | None = None
    ends: list[tuple[float, int, int]] | None = None
    forecast: Forecast | None = None
    can_reshape: bool = True
    reshape_shrink_only: bool = False
    node_free: Mapping[int, tuple[int, int, int, int]] = field(default_factory=dict)

    @property
    def cap_w(self) -> float:
        return self.cap.cap_at(self.now_s)

    def lowest_cap(self, duration_s: float | npt.ArrayLike,
                   start_s: float | None = None) -> float | npt.NDArray[np.float64]:
        """The lookahead: lowest cap over ``[start, start + duration_s)`` as far as the schedule is known.

        ``start_s`` defaults to now; ``duration_s`` may be an array (see
        :meth:`~wattsched.model.constraints.CapSchedule.lowest_cap`). The
        horizon runs from now: a start later than now sees less far past it.
        """
        start = self.now_s if start_s is None else start_s
        horizon = self.cap_lookahead_s
        if math.isfinite(horizon):
            horizon = max(0.0, self.now_s + horizon - start)
        return self.cap.lowest_cap(start, duration_s, horizon)

    def response_for(self, job: Job) -> ResponseModel | None:
        """The job's response model (by its application class), or None when the platform has none for it."""
        return self.platform.response_for(job.app_class)

    def estimate(self, job: Job) -> PowerEstimate:
        """Power estimate for a job (per node): the predictor's, else the node maximum."""
        if self.estimates is not None:
            est = self.estimates.get(job.id)
            if est is not None:
                return est
        if self.estimator is not None:
            return self.estimator(job)
        if job.units:  # per unit: its share of a node, at most
            busy = default_unit_estimate_w(self.platform, job)
            return PowerEstimate(busy, busy, 0.0)
        busy = self.platform.max_busy_w(job.gpus_per_node)
        return PowerEstimate(busy, busy, 0.0)

    def running_estimate_totals(self) -> tuple[float, float, float]:
        """Over the running jobs: sum of predicted mean power, sum of predicted max, variance of the sum (W²).

        Jobs' powers are taken as independent of each other and a job's nodes
        as fully correlated (``std`` of a job = nodes × per-node std). Kept by
        the source (:attr:`running_estimate`); summed here otherwise.
        """
        totals = self.running_estimate
        if totals is None:
            totals = self._running_totals()
        m, x, v = totals
        return m, x, v

    def _running_totals(self) -> list[float]:
        m = x = v = 0.0
        for r in self.running.values():
            est = self.estimate(r.job)
            n = len(r.nodes)
            m += est.mean_w * n
            x += est.max_w * n
            v += (est.std_w * n) ** 2
        return [m, x, v]

    def build_indexes(self, end_table: bool = True) -> None:
        """Build the indexes a source keeps up to date, where missing, from the snapshot's jobs.

        The simulator maintains :attr:`queue_index`, :attr:`running_estimate`,
        :attr:`ends` and (for policies that set ``wants_end_table``)
        :attr:`end_table` from event to event; a source that builds a fresh
        snapshot each time (the daemon) builds them here once, after its last
        change to ``pending``, ``running`` or ``estimates``, so that a policy
        gets the same shape, and takes the same code path, in both places.
        Built with the same constructors and the same arithmetic as the
        engine's: its index holds each queued job's :meth:`estimate`, its end
        table each running job's.
        """
        idle_w = self.platform.min_idle_w
        if self.running_estimate is None:
            self.running_estimate = self._running_totals()
        ends = self.running_by_end()
        estimate = self._shared_estimate()
        if end_table and self.end_table is None:
            table = EndTable(idle_w)
            running = self.running
            for i, (e, k, jid) in enumerate(ends):
                est = estimate(running[jid].job)
                table.insert(i, (e, k, est.mean_w * k, est.max_w * k, (est.std_w * k) ** 2))
            self.end_table = table
        if self.queue_index is None:
            self.queue_index = QueueIndex.of(self.pending.values(), estimate, idle_w)

    def _shared_estimate(self) -> Callable[[Job], PowerEstimate]:
        """:meth:`estimate`, the nominal estimate made once per GPU count rather than once per job.

        Without a prediction or an estimator, a whole-node job's estimate depends on its GPUs per
        node alone (the engine keeps it so too): one per queue of a hundred thousand jobs.
        """
        estimate = self.estimate
        if self.estimator is not None:
            return estimate
        known = self.estimates or {}
        nominal: dict[int, PowerEstimate] = {}

        def shared(job: Job) -> PowerEstimate:
            est = known.get(job.id)
            if est is None:
                if job.units:
                    return estimate(job)
                est = nominal.get(job.gpus_per_node)
                if est is None:
                    est = nominal[job.gpus_per_node] = estimate(job)
            return est

        return shared

    def with_indexes(self, end_table: bool = True) -> Snapshot:
        """This snapshot if it has its indexes (:meth:`build_indexes`), else a copy of it that has them.

        The copy shares everything else with this snapshot, which stays as it
        was (a policy must not modify its input).
        """
        if (self.queue_index is not None and self.running_estimate is not None
                and (self.end_table is not None or not end_table)):
            return self
        other = replace(self)
        other.build_indexes(end_table)
        return other

    def other_power_w(self) -> float:
        """Measured power not drawn by running jobs: idle, off and switching nodes."""
        jobs = self.jobs_power_w
        if jobs is None:
            jobs = sum(r.power_w for r in self.running.values())
        return self.platform_power_w - jobs

    def running_by_end(self) -> list[tuple[float, int, int]]:
        """Running jobs as ``(expected_end_s, node_count, job_id)``, soonest end first.

        A job may be past its expected end (a cluster that lets jobs overrun);
        callers treat such a job as ending now.
        """
        if self.ends is None:
            self.ends = sorted((r.expected_end_s, len(r.nodes), jid) for jid, r in self.running.items())
        return self.ends

    def usable_node_count(self) -> int:
        """Nodes that can run jobs now or later (not drained or down)."""
        return sum(1 for s in self.node_state if s < NodeState.DRAINED)


if not cython.compiled:
    Snapshot = slotted(Snapshot)


def fraction_cap(platform: Platform, fraction: float) -> float:
    """A cap given as a fraction of the platform's maximum dynamic power, in watts, idle power included.

    >>> from wattsched.model.platform import Platform, NodePowerModel
    >>> p = Platform.homogeneous_cluster(10, power=NodePowerModel(idle_w=100, busy_w=300))
    >>> fraction_cap(p, 0.5)
    2000.0
    """
    if not 0 < fraction <= 1 or math.isnan(fraction):
        raise ValueError(f"cap fraction must be in (0, 1], got {fraction}")
    return platform.idle_power_w + fraction * platform.max_dynamic_power_w
