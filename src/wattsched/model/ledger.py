"""The cluster ledger: the bookkeeping of a cluster, updated by small typed operations.

One ledger holds what a policy's snapshot shows of the machine, and what the
energy accounting needs: each node's state (idle, busy, off, switching) with
the node-seconds and energy spent in each state, the free nodes, the units
in use on shared nodes (``node_free``), the caps and frequencies in force,
each running job's speed and power through its response model, the energy of
each job and of the platform, and the indexes the snapshot exposes (pending
queue and its :class:`QueueIndex`, running jobs, their expected ends and
:class:`EndTable`, the running estimate). It is pure: no I/O, no clock of its
own. Time arrives with :meth:`Ledger.advance` (which integrates energy
exactly, power being piecewise constant between two advances); the other
operations (a job submitted, started, ended, evicted, reshaped; a node's cap
or frequency set; a node switched off or on) act at the ledger's current time.

An operation that changes the speed of jobs already running (a cap set on
their node, a unit arriving on a capped shared node) lists them in
:attr:`Ledger.rerated`: their expected ends moved, and whoever keeps the
events (the engine) reschedules them and clears the list.

The simulator's engine drives a ledger from its event heap; the daemon's view
is meant to fill the same one from Slurm and telemetry (DESIGN.md §1).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

from wattsched.model.end_table import EndTable
from wattsched.model.job import Job, PowerEstimate, RunningJob, running_job_from_fields
from wattsched.model.platform import NodeState, Platform
from wattsched.model.queue_index import QueueIndex
from wattsched.model.response import LinearResponse, ResponseModel, ResponseScenario
from wattsched.model.snapshot import Snapshot
from wattsched.model.units import Capacity, capacity, core_share, format_units, minus, place, plus, unit_power_w
from wattsched.model.units import fits as unit_fits

_IDLE = int(NodeState.IDLE)
_BUSY = int(NodeState.BUSY)
_OFF = int(NodeState.OFF)
_SW_ON = int(NodeState.SWITCHING_ON)
_SW_OFF = int(NodeState.SWITCHING_OFF)
_STATES = 7
"""Size of the per-state counters (every :class:`NodeState` value has a slot)."""
DEFAULT_RESPONSE: ResponseModel = LinearResponse(f=1.0, floor=0.3)
"""Response of jobs with no application class: CPU-bound (the conservative choice)."""


def _insertion_point(free: list[int], node: int) -> int:
    """Where ``node`` goes in the decreasing list ``free``: ``bisect_left(free, -node, key=neg)``, written out
    so that the compiled core runs it on C integers.

    >>> _insertion_point([7, 5, 2], 4)
    2
    """
    lo, hi = 0, len(free)
    while lo < hi:
        mid = (lo + hi) >> 1
        if free[mid] > node:
            lo = mid + 1
        else:
            hi = mid
    return lo


def _end_position(ends: list, end_s: float, k: int, job_id: int, right: bool) -> int:
    """Where ``(end_s, k, job_id)`` goes in the sorted list ``ends`` of such tuples: after equal ones if
    ``right`` (``bisect_right``), else before (``bisect_left``); written out so that the compiled core compares
    C numbers, not tuples of Python objects.

    >>> ends = [(5.0, 2, 9), (7.0, 1, 3), (7.0, 4, 1)]
    >>> [_end_position(ends, 7.0, 1, 3, right) for right in (False, True)], _end_position(ends, 7.0, 2, 0, False)
    ([1, 2], 2)
    """
    lo, hi = 0, len(ends)
    while lo < hi:
        mid = (lo + hi) >> 1
        e = ends[mid]
        t = e[0]
        n = e[1]
        j = e[2]
        # whether the entry at mid goes before the new one (right: or equals it)
        if t != end_s:
            before = t < end_s
        elif n != k:
            before = n < k
        else:
            before = j < job_id or (right and j == job_id)
        if before:
            lo = mid + 1
        else:
            hi = mid
    return lo


def _state_power_w(pm, state: int) -> float:
    """Power of a node of power model ``pm`` in ``state`` with no job on it (drained and down nodes idle)."""
    if state == _OFF:
        return pm.off_w
    if state == _SW_ON:
        return pm.switch_on_w
    if state == _SW_OFF:
        return pm.switch_off_w
    return pm.idle_w


class Run:
    """A job attempt on the ledger: its nodes, speed and power, work and energy so far. Holds the ground truth
    (``truth``: the trace's record, with the real runtime and power) that only the simulator knows."""

    __slots__ = (
        "dynamic",
        "energy_j",
        "est_max_w",
        "est_mean_w",
        "est_std_w",
        "estimate",
        "floor_w",
        "idle_share_w",
        "job",
        "job_cap_w",
        "job_freq_hz",
        "job_settings",
        "last_s",
        "limit_work_s",
        "node_power_w",
        "nodes",
        "pass_model",
        "pass_ref_s",
        "power_w",
        "response",
        "speed",
        "start_s",
        "step_index",
        "truth",
        "unit_dyn_w",
        "version",
        "view",
        "work_done_s",
        "work_left_s",
    )

    def __init__(self, job: Job, truth, response: ResponseModel):
        self.job = job
        self.truth = truth
        self.response = response
        self.dynamic = False
        self.floor_w = 0.0
        self.version = 0
        self.energy_j = 0.0
        self.step_index = 0
        self.job_cap_w: float | None = None
        self.job_freq_hz: float | None = None
        self.idle_share_w = 0.0
        self.unit_dyn_w: list[float] | None = None  # a job of units: each unit's dynamic power now
        self.pass_model = None  # a job timed by PASS: its application's model (see Ledger.rate)
        self.pass_ref_s = 0.0  # and its run time on its requested nodes at p_h, in the model's seconds
        self.limit_work_s = 0.0  # a PASS job's time limit in work (its walltime, plus reshape overheads)


class JobAccount:
    """What the ledger remembers of a job across attempts: evictions, and the energy and node time they wasted."""

    __slots__ = ("energy_j", "evictions", "wasted_j", "wasted_node_s")

    def __init__(self):
        self.evictions = 0
        self.wasted_j = 0.0
        self.wasted_node_s = 0.0
        self.energy_j = 0.0


class Ledger:
    """The bookkeeping of ``platform``: node states, free nodes, power and energy.

    Parameters
    ----------
    platform
        The machine. Every node starts idle.
    responses
        Response model per application class (default: the platform's).
    scenario
        A per-job response scenario (Borghesi et al. 2018, §5.1.1), or None:
        the class models.
    end_table
        Keep an :class:`EndTable` beside the sorted expected ends.
    estimate
        Estimate of a job started without a prediction (default: the
        snapshot's, the node maximum).
    pass_models
        PASS application models by name (:class:`~wattsched.model.scaling.PassModel`), used on a platform
        with ``cpu_power_levels_w``, ``base_w`` and ``mem_w`` only: a whole-node job whose ``app`` is one of
        them is timed and powered by PASS (:meth:`rate`). Default: none.

    Attributes
    ----------
    now
        Time the books stand at (s): energy is integrated up to it.
    state
        Each node's :class:`NodeState` value.
    free
        Idle nodes by decreasing index, the order the daemon lists them in too
        (see ``Snapshot.free_nodes``): policies take from the end, the
        lowest-numbered first.
    power_w, energy_j
        Platform power now, and energy since the books opened.
    state_node_s, state_energy_j
        Node-seconds and energy spent in each state (indexed by state value),
        up to the last change of that state (:meth:`close` brings them to now).
    node_cap_w, node_freq_hz
        Cap and frequency limit in force on each node that has one: the lower
        of the node's own setting and that of the job started on it.
    node_free
        Free capacity of the nodes running units of jobs of units (shared).
    pending, qindex, estimates
        Pending jobs by id (in submission order), their index, their predictions.
    running, runs
        Running jobs: the view a policy sees, and the ledger's :class:`Run`.
    ends, end_table, running_est
        Running jobs' ``(expected end, nodes, id)`` sorted, the matching
        :class:`EndTable` (if kept), and the running jobs' summed estimates
        (mean, max, variance).
    accounts
        Per job, what its evicted attempts cost (:class:`JobAccount`).
    """

    def __init__(self, platform: Platform, *, responses: Mapping[str, ResponseModel] | None = None,
                 scenario: ResponseScenario | None = None, end_table: bool = False,
                 estimate: Callable[[Job], PowerEstimate] | None = None,
                 pass_models: Mapping[str, object] | None = None):
        n = len(platform.nodes)
        self.platform = platform
        self.now = 0.0
        self.state = [_IDLE] * n
        self.free: list[int] = list(range(n - 1, -1, -1))
        self.idle_w = [node.power.idle_w for node in platform.nodes]
        self.busy_w = [node.power.busy_w for node in platform.nodes]
        self.gpu_tdp_w = [node.power.gpu_tdp_w for node in platform.nodes]
        self.homogeneous = platform.homogeneous
        self.power_w = float(sum(self.idle_w))
        self.energy_j = 0.0
        self.state_node_s = [0.0] * 7
        self.state_energy_j = [0.0] * 7
        self.state_count = [0] * 7
        self.state_count[_IDLE] = n
        self.state_power = [0.0] * 7
        self.state_power[_IDLE] = self.power_w
        self.state_t = [0.0] * 7  # when each state's node-seconds and energy were last integrated
        self.node_cap_w: dict[int, float] = {}
        self.node_freq_hz: dict[int, float] = {}
        self.node_cap_set: dict[int, float] = {}  # the nodes' own settings (SetNodeCap, SetNodeFreq)
        self.node_freq_set: dict[int, float] = {}
        self.node_free: dict[int, Capacity] = {}
        self.node_runs: dict[int, list[Run]] = {}
        self.unit_hosts: dict = {}  # by unit: whether some node of the platform can host it
        self.responses = platform.response_classes if responses is None else responses
        self.scenario = scenario
        self.estimate = estimate
        self.pending: dict[int, Job] = {}
        self.qindex = QueueIndex(idle_w=platform.min_idle_w)  # with the idle power: power increments too
        self.estimates: dict[int, PowerEstimate] = {}
        self.default_estimates: dict = {}  # by GPUs per node, for jobs without a prediction
        self.running: dict[int, RunningJob] = {}
        self.runs: dict[int, Run] = {}
        self.accounts: dict[int, JobAccount] = {}
        self.ends: list[tuple[float, int, int]] = []
        self.end_table = EndTable(platform.min_idle_w) if end_table else None
        self.running_est = [0.0, 0.0, 0.0]
        self.rerated: list[Run] = []
        # PASS needs the platform's CPU levels and node base and memory power: elsewhere no job is timed by it
        self.pass_models = dict(pass_models) if pass_models and platform.overprovisioned else {}
        self.pass_node_w = (platform.base_w + platform.mem_w) if self.pass_models else 0.0
        # a CPU draws at most the platform's highest level (the naive strategy's one level caps every node)
        self.pass_top_w = max(platform.cpu_power_levels_w) if self.pass_models else math.inf
        if estimate is None:
            self.estimate = self.snapshot().estimate

    def snapshot(self, **fields) -> Snapshot:
        """A :class:`Snapshot` viewing this ledger: its queue, running jobs, nodes and indexes are the ledger's own
        containers (current as the ledger changes); ``fields`` are the rest (cap schedule, estimator, ...). Its
        figures (time, power, epoch) are the caller's to refresh before a policy reads it."""
        return Snapshot(now_s=self.now, platform=self.platform, pending=self.pending, running=self.running,
                        free_nodes=self.free, node_state=self.state, node_cap_w=self.node_cap_w,
                        node_freq_hz=self.node_freq_hz, node_free=self.node_free, queue_index=self.qindex,
                        estimates=self.estimates, running_estimate=self.running_est, end_table=self.end_table,
                        ends=self.ends, **fields)

    # ------------------------------------------------------------------ time
    def open(self, t: float) -> None:
        """Open the books at ``t``: nothing is counted before it."""
        self.now = t
        for i in range(_STATES):
            self.state_t[i] = t

    def advance(self, t: float) -> None:
        """Move the books on to ``t``, adding the energy drawn since the last advance (power held constant)."""
        if t > self.now:
            self.energy_j += self.power_w * (t - self.now)
            self.now = t

    def close(self) -> None:
        """Bring every state's node-seconds and energy up to now."""
        for state in (_IDLE, _BUSY, _OFF, _SW_ON, _SW_OFF):
            self.touch(state)

    # ------------------------------------------------------------------ per-state counters
    def touch(self, state: int) -> None:
        """Integrate the node-seconds and energy of ``state`` up to now (before it changes)."""
        dt = self.now - self.state_t[state]
        if dt > 0:
            self.state_energy_j[state] += self.state_power[state] * dt
            self.state_node_s[state] += self.state_count[state] * dt
        self.state_t[state] = self.now

    def set_power(self, state: int, delta: float) -> None:
        """The nodes in ``state`` draw ``delta`` W more (negative: less)."""
        self.touch(state)
        self.power_w += delta
        self.state_power[state] += delta

    def move_nodes(self, old: int, new: int, count: int) -> None:
        """``count`` nodes go from state ``old`` to ``new`` (their power moves apart: :meth:`set_power`)."""
        self.touch(old)
        self.touch(new)
        self.state_count[old] -= count
        self.state_count[new] += count

    def occupy(self, count: int, idle_w: float, busy_w: float) -> None:
        """``count`` nodes drawing ``idle_w`` in all go busy drawing ``busy_w`` (negative: the reverse)."""
        now = self.now
        dt = now - self.state_t[_IDLE]
        if dt > 0:
            self.state_energy_j[_IDLE] += self.state_power[_IDLE] * dt
            self.state_node_s[_IDLE] += self.state_count[_IDLE] * dt
            self.state_t[_IDLE] = now
        dt = now - self.state_t[_BUSY]
        if dt > 0:
            self.state_energy_j[_BUSY] += self.state_power[_BUSY] * dt
            self.state_node_s[_BUSY] += self.state_count[_BUSY] * dt
            self.state_t[_BUSY] = now
        self.state_count[_IDLE] -= count
        self.state_count[_BUSY] += count
        self.state_power[_IDLE] -= idle_w
        self.state_power[_BUSY] += busy_w
        self.power_w += busy_w - idle_w

    def jobs_power_w(self) -> float:
        """Power of the busy nodes."""
        return self.state_power[_BUSY]

    def count(self, state: int) -> int:
        """Nodes in ``state`` now."""
        return self.state_count[state]

    # ------------------------------------------------------------------ free nodes
    def take(self, node: int) -> None:
        """``node`` leaves the free list."""
        free = self.free
        del free[_insertion_point(free, node)]

    def give(self, node: int) -> None:
        """``node`` joins the free list."""
        self.free.insert(_insertion_point(self.free, node), node)

    def give_all(self, nodes: tuple[int, ...]) -> None:
        """``nodes`` join the free list."""
        free = self.free
        if len(nodes) <= 8:
            for n in nodes:
                free.insert(_insertion_point(free, n), n)
            return
        top = _insertion_point(free, max(nodes))
        if top == _insertion_point(free, min(nodes)):
            # no free node lies between the job's lowest and highest: its nodes go in as one block
            # (the usual case: a job gets a run of neighbouring free nodes), without sorting the list
            free[top:top] = sorted(nodes, reverse=True)
        else:
            free.extend(nodes)
            free.sort(reverse=True)

    # ------------------------------------------------------------------ power saving
    def power_down(self, n: int) -> float:
        """Idle node ``n`` starts switching off; returns how long that takes (s)."""
        pm = self.platform.nodes[n].power
        self.take(n)
        self.state[n] = _SW_OFF
        self.move_nodes(_IDLE, _SW_OFF, 1)
        self.set_power(_IDLE, -pm.idle_w)
        self.set_power(_SW_OFF, pm.switch_off_w)
        return pm.switch_off_s

    def power_up(self, n: int) -> float:
        """Node ``n``, off, starts switching on; returns how long that takes (s)."""
        pm = self.platform.nodes[n].power
        self.state[n] = _SW_ON
        self.move_nodes(_OFF, _SW_ON, 1)
        self.set_power(_OFF, -pm.off_w)
        self.set_power(_SW_ON, pm.switch_on_w)
        return pm.switch_on_s

    def switch_done(self, n: int, from_state: int) -> bool:
        """Node ``n`` ends its switch from ``from_state``: off, or idle and free; False if it was not switching so."""
        pm = self.platform.nodes[n].power
        if self.state[n] != from_state:
            return False
        if from_state == _SW_OFF:
            self.state[n] = _OFF
            self.move_nodes(_SW_OFF, _OFF, 1)
            self.set_power(_SW_OFF, -pm.switch_off_w)
            self.set_power(_OFF, pm.off_w)
        else:
            self.state[n] = _IDLE
            self.give(n)
            self.move_nodes(_SW_ON, _IDLE, 1)
            self.set_power(_SW_ON, -pm.switch_on_w)
            self.set_power(_IDLE, pm.idle_w)
        return True

    # ------------------------------------------------------------------ the queue
    def submit(self, job: Job) -> None:
        """``job`` joins the queue (jobs are submitted in submission order)."""
        self.pending[job.id] = job
        self.qindex.append(job)

    def set_estimate(self, job_id: int, est: PowerEstimate) -> None:
        """The prediction of pending job ``job_id``."""
        self.estimates[job_id] = est
        self.qindex.set_estimate(job_id, est.mean_w, est.max_w, est.std_w)

    def cancel(self, job_id: int) -> Job:
        """Pending job ``job_id`` leaves the queue unstarted; returns it."""
        job = self.pending.pop(job_id)
        self.qindex.remove(job_id)
        self.estimates.pop(job_id, None)
        return job

    def requeue(self, job: Job) -> None:
        """An evicted ``job`` is pending again, in submission order."""
        pending = self.pending
        if pending and next(reversed(pending.values())).submit_s > job.submit_s:
            items = sorted([*pending.values(), job], key=lambda j: (j.submit_s, j.id))
            pending.clear()
            pending.update((j.id, j) for j in items)
            self.qindex.rebuild(items)
        else:
            pending[job.id] = job
            self.qindex.append(job)

    def unhosted(self, job: Job) -> str | None:
        """Why no node of the platform could ever host some unit of ``job`` (a job of units), or None."""
        nodes = self.platform.nodes
        for u in job.units:
            ok = self.unit_hosts.get(u)
            if ok is None:
                ok = self.unit_hosts[u] = any(unit_fits(capacity(n), u, n.mem_mb > 0) for n in nodes)
            if not ok:
                most = [max(capacity(n)[i] for n in nodes) for i in range(4)]
                return (f"job {job.id}: unit {format_units((u,))} fits no node of platform {self.platform.name!r} "
                        f"(its nodes have at most {most[0]} cores, {most[1]} GPUs, {most[2]} MICs, {most[3]} MB): "
                        "the job could never start")
        return None

    def place_free(self, job: Job) -> tuple[int, ...] | None:
        """Nodes ``job`` would get among the free ones now (a job of units: shared nodes first), or None."""
        if job.units:
            return place(job.units, [*self.node_free, *reversed(self.free)], self.platform, self.node_free,
                         job.distinct_nodes)
        k = job.nodes
        return tuple(self.free[-k:]) if len(self.free) >= k else None

    # ------------------------------------------------------------------ jobs started and ended
    def start(self, job_id: int, nodes: tuple[int, ...], cap_w, freq_hz, truth) -> Run:
        """Pending job ``job_id`` starts on ``nodes`` (with a cap or frequency of its own, or None); ``truth`` is its
        trace record (real runtime and power). Returns its run; its expected end is the caller's to schedule."""
        job = self.pending.pop(job_id)
        self.qindex.remove(job_id)
        return self.begin(job, nodes, cap_w, freq_hz, truth, self.now)

    def begin(self, job: Job, nodes: tuple[int, ...], cap_w, freq_hz, truth, start_s: float) -> Run:
        """``job`` runs on ``nodes``, free until now, since ``start_s``: a job :meth:`start` takes from the queue, or
        one a live cluster reports running (:meth:`observe_run`)."""
        scenario = self.scenario
        if scenario is None:
            run = Run(job, truth, self.responses.get(job.app_class, DEFAULT_RESPONSE))
        else:
            run = Run(job, truth, scenario.for_job(job.id, job.app_class) or DEFAULT_RESPONSE)
            run.dynamic = True
            run.floor_w = scenario.floor_w
        run.start_s = start_s
        run.last_s = start_s
        run.nodes = nodes
        run.work_left_s = truth.runtime_s
        run.work_done_s = 0.0
        run.job_settings = cap_w is not None or freq_hz is not None
        if job.units:
            self._start_units(run)
            return run
        if job.app and self.pass_models:
            model = self.pass_models.get(job.app)
            if model is not None:
                model = model.for_request(job.nodes)
                run.pass_model = model
                run.pass_ref_s = model.time(job.nodes, model.p_h)
                run.limit_work_s = job.walltime_s
        state, free = self.state, self.free
        k = len(nodes)
        if free[-k:] == list(nodes):
            # The usual case: the policy took the last free nodes, in order.
            del free[-k:]
        else:
            for n in nodes:
                del free[_insertion_point(free, n)]
        for n in nodes:
            state[n] = _BUSY
        if self.homogeneous:
            idle = self.idle_w[0] * len(nodes)
        else:
            idle = 0.0
            for n in nodes:  # a loop, not sum() of a generator: the compiled core types this method
                idle += self.idle_w[n]
        if run.job_settings:
            run.job_cap_w, run.job_freq_hz = cap_w, freq_hz
            for n in nodes:
                self._settle_node(n, run)
        self.rate(run)
        self.occupy(k, idle, run.power_w)
        self._account_start(run, k)
        return run

    def _account_start(self, run: Run, k: int) -> None:
        """The started run's estimates, view and expected end (``k``: its nodes, or units)."""
        job = run.job
        jid = job.id
        nodes = run.nodes
        est = self.estimates.get(jid)
        if est is None:
            if job.units:
                est = self.estimate(job)
            else:
                est = self.default_estimates.get(job.gpus_per_node)
                if est is None:
                    est = self.default_estimates[job.gpus_per_node] = self.estimate(job)
        mean_w, max_w, std_w = est.mean_w, est.max_w, est.std_w
        re = self.running_est
        re[0] += mean_w * k
        re[1] += max_w * k
        re[2] += (std_w * k) ** 2
        run.estimate = est
        run.est_mean_w, run.est_max_w, run.est_std_w = mean_w, max_w, std_w  # for _release, without the lookups
        start_s = run.start_s
        expected = start_s + job.walltime_s
        if run.job_settings or self.node_cap_w or self.node_freq_hz:
            run.view = RunningJob(job, start_s, nodes, expected, run.power_w, run.speed, *self.limits(nodes))
        else:
            run.view = running_job_from_fields(job, start_s, nodes, expected, run.power_w, run.speed, None, None,
                                               0.0, None)
        self.runs[jid] = run
        self.running[jid] = run.view
        entry = (expected, k, jid)
        if self.end_table is None:
            self.ends.insert(_end_position(self.ends, expected, k, jid, True), entry)  # bisect.insort
        else:
            i = _end_position(self.ends, expected, k, jid, False)
            self.ends.insert(i, entry)
            self.end_table.insert(i, (expected, k, mean_w * k, max_w * k, (std_w * k) ** 2))

    def end(self, run: Run) -> None:
        """``run`` ends now (completed or killed): its nodes are given back, its prediction forgotten."""
        self.settle(run)
        self._release(run)
        self.estimates.pop(run.job.id, None)

    def evict(self, run: Run) -> Job:
        """``run`` is evicted now: its nodes are given back, its work and energy wasted; returns its job."""
        self.settle(run)
        self._release(run)
        jid = run.job.id
        acc = self.accounts.get(jid)
        if acc is None:
            acc = self.accounts[jid] = JobAccount()
        acc.evictions += 1
        acc.energy_j += run.energy_j
        acc.wasted_j += run.energy_j
        acc.wasted_node_s += (self.now - run.start_s) * len(run.nodes)
        return run.job

    def _release(self, run: Run) -> None:
        """Free the nodes of ``run`` and drop it from the running set."""
        jid = run.job.id
        state = self.state
        nodes = run.nodes
        if run.unit_dyn_w is not None:
            self._release_units(run)
        else:
            for n in nodes:
                state[n] = _IDLE
            self.give_all(nodes)
            if self.homogeneous:
                idle = self.idle_w[0] * len(run.nodes)
            else:
                idle = 0.0
                for n in nodes:
                    idle += self.idle_w[n]
            if run.job_settings:
                # A cap or frequency given with Start lasts as long as the job: the node's own setting returns.
                for n in run.nodes:
                    self._settle_node(n, None)
            self.occupy(-len(nodes), -idle, -run.power_w)
        k, re = len(nodes), self.running_est
        re[0] -= run.est_mean_w * k
        re[1] -= run.est_max_w * k
        re[2] -= (run.est_std_w * k) ** 2
        if not self.running:  # no drift: an empty machine sums to zero exactly
            re[0] = re[1] = re[2] = 0.0
        del self.runs[jid]
        del self.running[jid]
        ends = self.ends
        i = _end_position(ends, run.view.expected_end_s, len(run.view.nodes), jid, False)
        del ends[i]
        if self.end_table is not None:
            self.end_table.delete(i)

    def settle(self, run: Run) -> None:
        """Account the work and energy of ``run`` up to now."""
        dt = self.now - run.last_s
        if dt > 0:
            done = dt * run.speed
            run.work_left_s -= done
            run.work_done_s += done
            run.energy_j += run.power_w * dt
            run.last_s = self.now

    def power_step(self, run: Run) -> None:
        """``run`` moves on to the next step of its power profile (its own end is the caller's to reschedule)."""
        self.settle(run)
        old = run.power_w
        run.step_index += 1
        self.rate(run)
        self.set_power(_BUSY, run.power_w - old)
        v = run.view
        # the same nodes and limits: the view changes in its power (and speed, if a cap holds it back)
        run.view = running_job_from_fields(v.job, v.start_s, v.nodes, v.expected_end_s, run.power_w, run.speed,
                                           v.freq_hz, v.cap_w, run.work_done_s, run.last_s)
        self.running[run.job.id] = run.view
        if run.unit_dyn_w is not None:  # its units' new draw changes the share of the others on capped nodes
            self._rerate(self._capped_neighbours(run))

    def reshape(self, run: Run, nodes: tuple[int, ...], overhead_s: float = 0.0) -> None:
        """Malleable ``run`` moves to ``nodes`` now, its remaining work spread over them (linear speedup) plus
        ``overhead_s`` wall seconds at its new speed (its end is the caller's to reschedule)."""
        self.settle(run)
        old_nodes, new_nodes = run.nodes, nodes
        old_set, new_set = set(old_nodes), set(new_nodes)
        jid = run.job.id
        old_power = run.power_w
        for n in old_nodes:
            if n not in new_set:
                self.state[n] = _IDLE
                self.give(n)
                self.occupy(-1, -self.idle_w[n], 0.0)
        for n in new_nodes:
            if n not in old_set:
                self.take(n)
                self.state[n] = _BUSY
                self.occupy(1, self.idle_w[n], 0.0)
        if run.pass_model is None:
            run.work_left_s *= len(old_nodes) / len(new_nodes)
        # else the new node count changes the job's PASS speed (rate), not its work
        ends = self.ends
        i = _end_position(ends, run.view.expected_end_s, len(old_nodes), jid, False)
        del ends[i]
        entry = (run.view.expected_end_s, len(new_nodes), jid)
        j = _end_position(ends, entry[0], entry[1], jid, False)
        ends.insert(j, entry)
        if self.end_table is not None:
            est, k = run.estimate, len(new_nodes)
            self.end_table.delete(i)
            self.end_table.insert(j, (entry[0], k, est.mean_w * k, est.max_w * k, (est.std_w * k) ** 2))
        run.nodes = tuple(new_nodes)
        self.rate(run)
        if overhead_s > 0:  # wall seconds at the speed it runs at now, as work
            extra = overhead_s * run.speed
            run.work_left_s += extra
            run.limit_work_s += extra  # the overhead is the reshape's, not the job's: its limit moves with it
        self.set_power(_BUSY, run.power_w - old_power)
        self._replace_view(run)

    def _replace_view(self, run: Run) -> None:
        v = run.view
        run.view = RunningJob(v.job, v.start_s, run.nodes, v.expected_end_s, run.power_w, run.speed,
                              *self.limits(run.nodes), run.work_done_s, run.last_s)
        self.running[run.job.id] = run.view

    # ------------------------------------------------------------------ node settings
    def set_node_cap(self, node: int, cap_w: float | None) -> None:
        """The node's own cap (None: none); the runs on it are re-rated (:attr:`rerated`)."""
        if cap_w is None:
            self.node_cap_set.pop(node, None)
        else:
            self.node_cap_set[node] = cap_w
        self._node_changed(node)

    def set_node_freq(self, node: int, freq_hz: float | None) -> None:
        """The node's own frequency limit (None: nominal); the runs on it are re-rated (:attr:`rerated`)."""
        if freq_hz is None:
            self.node_freq_set.pop(node, None)
        else:
            self.node_freq_set[node] = freq_hz
        self._node_changed(node)

    def _node_changed(self, n: int) -> None:
        shared = self.node_runs.get(n)
        if shared is not None:  # units of several jobs: the setting applies to the node, every run re-rated
            self._settle_node(n, None)
            self._rerate(shared)
            return
        run = self.run_on(n)
        self._settle_node(n, run)
        if run is not None:
            self._rerate((run,))

    def _settle_node(self, n: int, run: Run | None) -> None:
        """Put in force on node ``n`` the lower of its own setting and that of ``run``, the job on it."""
        for own, job_value, table in ((self.node_cap_set.get(n), run and run.job_cap_w, self.node_cap_w),
                                      (self.node_freq_set.get(n), run and run.job_freq_hz, self.node_freq_hz)):
            values = [v for v in (own, job_value) if v is not None]
            if values:
                table[n] = min(values)
            else:
                table.pop(n, None)

    def limits(self, nodes: tuple[int, ...]) -> tuple[float | None, float | None]:
        """(lowest frequency limit, lowest cap) in force on ``nodes``, None where none is set."""
        freqs = [self.node_freq_hz[n] for n in nodes if n in self.node_freq_hz]
        caps = [self.node_cap_w[n] for n in nodes if n in self.node_cap_w]
        return (min(freqs) if freqs else None), (min(caps) if caps else None)

    def run_on(self, node: int) -> Run | None:
        """The run on ``node`` (a scan: node settings change rarely, starts and ends all the time)."""
        if self.state[node] != _BUSY:
            return None
        shared = self.node_runs.get(node)
        if shared is not None:
            return shared[0]
        return next((r for r in self.runs.values() if node in r.nodes), None)

    def node_power_w(self) -> list[float]:
        """Power of each node now: its job's share, or the power of its state."""
        out = [0.0] * len(self.state)
        nodes = self.platform.nodes
        for i, s in enumerate(self.state):
            pm = nodes[i].power
            if s == _OFF:
                out[i] = pm.off_w
            elif s == _SW_ON:
                out[i] = pm.switch_on_w
            elif s == _SW_OFF:
                out[i] = pm.switch_off_w
            else:
                out[i] = pm.idle_w
        for run in self.runs.values():
            if run.unit_dyn_w is not None:
                for n, dyn in zip(run.nodes, run.unit_dyn_w):
                    out[n] += dyn  # a shared node: idle plus each unit's dynamic power
                continue
            share = run.power_w / len(run.nodes)
            for n in run.nodes:
                out[n] = share
        return out

    # ------------------------------------------------------------------ a live cluster, as observed
    # The daemon fills a fresh ledger each cycle from what Slurm and the telemetry report: node states and
    # settings first, then the jobs found running (their power predicted through the response models, as the
    # simulator rates them), then the measured power, which replaces the prediction wherever it was read.

    def observe_state(self, node: int, state: int) -> None:
        """Node ``node`` is reported in ``state``. An idle node (off, switching, drained, down, or busy with jobs the
        ledger does not run) leaves the free list and draws its state's power; a node running jobs keeps their
        power."""
        old = self.state[node]
        if state == old:
            return
        if old != _IDLE:  # a node running jobs (or another partition's units), reported drained, down, switching
            self.move_nodes(old, state, 1)
            self.state[node] = state
            return
        pm = self.platform.nodes[node].power
        self.take(node)
        self.state[node] = state
        self.move_nodes(_IDLE, state, 1)
        self.set_power(_IDLE, -pm.idle_w)
        self.set_power(state, _state_power_w(pm, state))

    def observe_units(self, node: int, units) -> None:
        """``units`` of jobs the ledger does not run (another partition's) hold part of ``node``."""
        cap = self.node_free.get(node)
        if cap is None:
            cap = capacity(self.platform.nodes[node])
            if self.state[node] == _IDLE:
                self.observe_state(node, _BUSY)
        for u in units:
            cap = minus(cap, u)
        self.node_free[node] = cap

    def observe_run(self, job: Job, start_s: float, nodes: tuple[int, ...], truth) -> Run | None:
        """``job`` is reported running on ``nodes`` since ``start_s``; ``truth`` stands for what the simulator
        would know (the predicted power as ``mean_w``, the time limit as ``runtime_s``). None, and nothing
        changes, when a node of a whole-node job is not free (Slurm reported two jobs on it without units)."""
        if job.units:
            for n in nodes:
                if n not in self.node_free and self.state[n] != _IDLE:
                    return None
        else:
            for n in nodes:
                if self.state[n] != _IDLE:
                    return None
        return self.begin(job, nodes, None, None, truth, start_s)

    def observe_power(self, measured: Mapping[int, float]) -> None:
        """Measured power of nodes (W), in place of their predicted power.

        A whole-node job draws what its nodes draw (each node not read keeps its
        prediction). A shared node's power above idle goes to the units on it in
        proportion to the dynamic power each is predicted to draw there (evenly
        when none is), each unit keeping its share of the idle power by cores; the
        idle share of its free cores is the node's own. A node without jobs of the
        ledger draws what was read.
        """
        if not measured:
            return
        changed: dict[int, Run] = {}
        for n, runs in self.node_runs.items():
            watts = measured.get(n)
            if watts is None:
                continue
            dynamic = max(watts - self.idle_w[n], 0.0)
            slots = [(run, i) for run in runs for i, m in enumerate(run.nodes) if m == n]
            total = 0.0
            for run, i in slots:
                total += run.unit_dyn_w[i]
            for run, i in slots:
                run.unit_dyn_w[i] = dynamic * run.unit_dyn_w[i] / total if total > 0 else dynamic / len(slots)
                changed[run.job.id] = run
        for run in changed.values():
            old = run.power_w
            run.power_w = run.idle_share_w + sum(run.unit_dyn_w)
            self.set_power(_BUSY, run.power_w - old)
        for jid, run in self.runs.items():
            if run.unit_dyn_w is not None or not any(n in measured for n in run.nodes):
                continue
            old = run.power_w
            total = 0.0
            for n in run.nodes:
                watts = measured.get(n)
                total += self.node_rate_w(run, n) if watts is None else watts
            run.power_w = total
            run.node_power_w = total / len(run.nodes)
            self.set_power(_BUSY, total - old)
            changed[jid] = run
        for run in changed.values():
            self._replace_view(run)
        pnodes = self.platform.nodes
        held = {n for run in self.runs.values() for n in run.nodes}
        for n, watts in measured.items():
            st = self.state[n]
            if n in held:
                continue
            self.set_power(st, watts - _state_power_w(pnodes[n].power, st))

    def node_rate_w(self, run: Run, node: int) -> float:
        """Power of whole-node ``run`` on ``node`` under the node's cap and frequency, through its response model."""
        p = self._nominal_node_power(run, node)
        if node in self.node_cap_w or node in self.node_freq_hz:
            p *= self._node_factor(run, node, p)[0]
        return p

    # ------------------------------------------------------------------ per-job power through the response models
    def _rerate(self, runs) -> None:
        """Settle ``runs`` up to now and recompute their speed and power; they join :attr:`rerated`."""
        for run in runs:
            self.settle(run)
            old = run.power_w
            self.rate(run)
            self.set_power(_BUSY, run.power_w - old)
            self._replace_view(run)
            self.rerated.append(run)

    def _nominal_node_power(self, run: Run, node: int) -> float:
        tj = run.truth
        if tj.power_series is not None:
            return tj.power_series[run.step_index][1]
        if tj.mean_w is not None:
            return tj.mean_w
        return self.busy_w[node] + tj.gpus_per_node * self.gpu_tdp_w[node]

    def _node_factor(self, run: Run, node: int, nominal_w: float) -> tuple[float, float]:
        """(power ratio, duration multiplier) of ``run`` on ``node`` under its cap and frequency."""
        ratio, mult = 1.0, 1.0
        cap = self.node_cap_w.get(node)
        if run.dynamic:
            # Borghesi's scenarios: the cap cuts the dynamic power (above idle), never below floor_w of it.
            idle = self.idle_w[node]
            dyn = nominal_w - idle
            if dyn <= 0:
                return ratio, mult
            if cap is not None and cap < nominal_w:
                r, mult = run.response.under_power_ratio(max(cap - idle, run.floor_w, 0.0) / dyn)
                ratio = (idle + r * dyn) / nominal_w
            at_freq = self._at_node_freq(run, node)
            if at_freq is not None:
                r2, m2 = at_freq
                ratio, mult = min(ratio, (idle + max(r2 * dyn, min(run.floor_w, dyn))) / nominal_w), max(mult, m2)
            return ratio, mult
        if cap is not None and cap < nominal_w:
            ratio, mult = run.response.under_power_ratio(cap / nominal_w)
        at_freq = self._at_node_freq(run, node)
        if at_freq is not None:
            ratio, mult = min(ratio, at_freq[0]), max(mult, at_freq[1])
        return ratio, mult

    def _at_node_freq(self, run: Run, node: int) -> tuple[float, float] | None:
        """(power ratio, duration multiplier) of ``run`` at the frequency limit of ``node``; None at nominal."""
        freq = self.node_freq_hz.get(node)
        if freq is not None:
            fmax = self.platform.nodes[node].power.max_freq_hz
            if fmax and freq < fmax:
                return run.response.at_frequency_ratio(freq / fmax)
        return None

    def rate(self, run: Run) -> None:
        """Recompute the job's speed and power from its nodes' settings."""
        if run.unit_dyn_w is not None:
            self._rate_units(run)
            return
        if run.pass_model is not None:
            self._rate_pass(run)
            return
        if self.homogeneous and not (self.node_cap_w or self.node_freq_hz):
            series = run.truth.power_series
            p = run.truth.mean_w if series is None else series[run.step_index][1]
            if p is None:
                p = self.busy_w[0] + run.truth.gpus_per_node * self.gpu_tdp_w[0]
            run.speed = 1.0
            run.node_power_w = p
            run.power_w = p * len(run.nodes)
            return
        total = 0.0
        mult = 1.0
        controlled = self.node_cap_w or self.node_freq_hz
        for node in run.nodes:
            p = self._nominal_node_power(run, node)
            if controlled and (node in self.node_cap_w or node in self.node_freq_hz):
                r, m = self._node_factor(run, node, p)
                p *= r
                if m > mult:
                    mult = m
            total += p
        run.speed = 1.0 / mult
        run.power_w = total
        run.node_power_w = total / len(run.nodes) if run.nodes else 0.0

    def _pass_cpu_w(self, run: Run, node: int) -> float:
        """CPU power of PASS ``run`` on ``node``: its cap less base and memory power, the CPU power at the frequency
        limit, ``p_h`` without either; never above ``p_h`` (no faster beyond it) nor below the CPU's base ``c``."""
        model = run.pass_model
        p = model.p_h if model.p_h < self.pass_top_w else self.pass_top_w
        cap = self.node_cap_w.get(node)
        if cap is not None and cap - self.pass_node_w < p:
            p = cap - self.pass_node_w
        freq = self.node_freq_hz.get(node)
        if freq is not None:
            fmax = self.platform.nodes[node].power.max_freq_hz
            if fmax and freq < fmax:
                p = min(p, model.power(freq / fmax * model.f_h))
        return max(p, model.c)

    def _rate_pass(self, run: Run) -> None:
        """Speed and power of a job timed by PASS (Sarood et al. 2014, §V).

        Its work is its trace run time, on its requested nodes at full CPU power; on ``n`` nodes at CPU power ``p``
        it runs at speed ``T(requested, p_h) / T(n, p)``, ``p`` the lowest CPU power over its nodes (the slowest
        node sets the pace). Each node draws ``base_w + mem_w`` plus its CPU power (:meth:`_pass_cpu_w`).
        """
        model = run.pass_model
        nodes = run.nodes
        base = self.pass_node_w
        total = 0.0
        lowest = model.p_h if model.p_h < self.pass_top_w else self.pass_top_w
        if self.node_cap_w or self.node_freq_hz:
            for node in nodes:
                p = self._pass_cpu_w(run, node)
                if p < lowest:
                    lowest = p
                total += base + p
        else:
            total = (base + lowest) * len(nodes)
        run.speed = run.pass_ref_s / model.time(len(nodes), lowest)
        run.power_w = total
        run.node_power_w = total / len(nodes) if nodes else 0.0

    # ------------------------------------------------------------------ job units (shared nodes)
    def _unit_nominal_w(self, run: Run, i: int, node: int) -> float:
        """Nominal power of unit ``i`` of ``run`` on ``node`` alone: the trace's per-unit power, or the default."""
        tj = run.truth
        if tj.power_series is not None:
            return tj.power_series[run.step_index][1]
        if tj.mean_w is not None:
            return tj.mean_w
        return unit_power_w(self.platform.nodes[node], run.job.units[i])

    def _node_dynamic_w(self, node: int) -> float:
        """Nominal dynamic power of every unit on a shared node together."""
        idle = self.idle_w[node]
        total = 0.0
        for other in self.node_runs.get(node, ()):
            for i, n in enumerate(other.nodes):
                if n == node:
                    total += max(0.0, self._unit_nominal_w(other, i, node) - idle)
        return total

    def _rate_units(self, run: Run) -> None:
        """Speed and power of a job of units.

        A cap on a shared node limits the node's dynamic power: every unit on
        it gets the same fraction of its nominal dynamic power (as RAPL
        throttles a package), its job slowing through its response model; a
        frequency limit acts on every unit as on a whole node. The job is as
        fast as its slowest unit.
        """
        controlled = self.node_cap_w or self.node_freq_hz
        dyn_list = run.unit_dyn_w
        mult = 1.0
        total = 0.0
        for i, node in enumerate(run.nodes):
            idle = self.idle_w[node]
            dyn = max(0.0, self._unit_nominal_w(run, i, node) - idle)
            r = 1.0
            if controlled and dyn > 0:
                cap = self.node_cap_w.get(node)
                if cap is not None:
                    node_dyn = self._node_dynamic_w(node)
                    if cap - idle < node_dyn:
                        r, m = run.response.under_power_ratio(max(cap - idle, 0.0) / node_dyn)
                        mult = max(mult, m)
                at_freq = self._at_node_freq(run, node)
                if at_freq is not None:
                    r, mult = min(r, at_freq[0]), max(mult, at_freq[1])
                if r < 1.0:
                    dyn = max(r * dyn, min(run.floor_w, dyn))
            dyn_list[i] = dyn
            total += dyn
        run.speed = 1.0 / mult
        run.power_w = run.idle_share_w + total
        run.node_power_w = run.power_w / len(run.nodes) if run.nodes else 0.0

    def _capped_neighbours(self, run: Run) -> list[Run]:
        """Other runs on the capped shared nodes of ``run``: a unit arriving or leaving changes their share."""
        if not self.node_cap_w:
            return []
        out: list[Run] = []
        for n in set(run.nodes):
            if n in self.node_cap_w:
                for other in self.node_runs.get(n, ()):
                    if other is not run and other not in out:
                        out.append(other)
        return out

    def _start_units(self, run: Run) -> None:
        """Start a job of units: each unit on its node, the nodes shared with other jobs' units."""
        job = run.job
        nodes = run.nodes
        pnodes = self.platform.nodes
        node_free, node_runs, state = self.node_free, self.node_runs, self.state
        opened: list[int] = []
        for u, n in zip(job.units, nodes, strict=True):
            cap = node_free.get(n)
            if cap is None:
                cap = capacity(pnodes[n])
                opened.append(n)
            node_free[n] = minus(cap, u)
        idle = 0.0
        for n in opened:
            self.take(n)
            state[n] = _BUSY
            idle += self.idle_w[n]
        share = 0.0
        for u, n in zip(job.units, nodes):
            share += self.idle_w[n] * core_share(pnodes[n], u)
        run.idle_share_w = share
        run.unit_dyn_w = [0.0] * len(nodes)
        for n in set(nodes):
            node_runs.setdefault(n, []).append(run)
        self._rate_units(run)
        self.occupy(len(opened), idle, idle + run.power_w - run.idle_share_w)
        self._rerate(self._capped_neighbours(run))
        self._account_start(run, len(nodes))

    def _release_units(self, run: Run) -> None:
        """Give back the capacity of a job of units; nodes left without units go idle."""
        node_free, node_runs, state = self.node_free, self.node_runs, self.state
        for u, n in zip(run.job.units, run.nodes, strict=True):
            node_free[n] = plus(node_free[n], u)
        neighbours = self._capped_neighbours(run)
        emptied: list[int] = []
        for n in set(run.nodes):
            runs = node_runs[n]
            runs.remove(run)
            if not runs:
                del node_runs[n]
                del node_free[n]
                emptied.append(n)
        idle = 0.0
        for n in sorted(emptied):
            state[n] = _IDLE
            self.give(n)
            idle += self.idle_w[n]
        self.occupy(-len(emptied), -idle, -(idle + run.power_w - run.idle_share_w))
        self._rerate(neighbours)
