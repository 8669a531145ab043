"""The discrete-event engine: replays a workload through a policy, under power constraints.

The engine is the clock. Events sit on a heap ordered by ``(time, priority,
sequence)``: job ends, node switch completions, job power-profile steps,
cap-schedule changes, budget window edges, demand-response notices,
monitoring ticks. Submissions are streamed from the workload alongside the
heap (a 450,000-job trace is never all in memory) and come after heap events
of the same time. After each batch of same-time events the policy is called
once; its plan goes through the guard and is applied at the same instant.
Deterministic for a given workload, policy and seed.

The bookkeeping is the :class:`~wattsched.model.ledger.Ledger`'s (node states,
units, caps, per-job power, energy, the indexes): the engine drives it, one
typed operation per event or action, and records what leaves it. The policy
sees the ledger through a :class:`~wattsched.model.snapshot.Snapshot`, with
what a live system would know; ground truth (real runtimes and power) stays
in the ledger's run records. Energy is integrated exactly: power is piecewise
constant between events.
"""

from __future__ import annotations

import dataclasses
import math
import time as _time
from collections.abc import Iterable, Iterator
from heapq import heappop, heappush
from itertools import islice
from typing import Any, assert_never

from wattsched.errors import ConfigError, PlanViolation, TraceError
from wattsched.model.constraints import BudgetState, CapSchedule, DemandResponseEvent, EnergyBudget, NoticedEvent
from wattsched.model.forecast import forecast
from wattsched.model.guard import plan_problems
from wattsched.model.job import Job, JobState, PowerEstimate, job_from_fields
from wattsched.model.ledger import Ledger, Run
from wattsched.model.plan import Evict, Plan, PowerDown, PowerUp, Reshape, SetNodeCap, SetNodeFreq, Start
from wattsched.model.platform import NodeState, Platform
from wattsched.model.response import ResponseScenario
from wattsched.model.snapshot import Snapshot
from wattsched.model.state import PolicyState
from wattsched.model.units import pack_starts
from wattsched.policies.base import Policy, policy_tags
from wattsched.predictors.base import completed_job_builder, predictor_tags
from wattsched.sim.collector import sparse
from wattsched.sim.options import EngineOptions
from wattsched.sim.result import JOB_NUMBERS, TIMELINE_COLUMNS, SimResult, job_table
from wattsched.sim.rows import Rows
from wattsched.workload.records import TraceJob, Workload, true_power

# Event kinds, in the order they are processed at equal times.
_END, _SWITCH, _STEP, _CAP, _BUDGET, _TICK, _DR = range(7)
CONTROL_LOG_MAX = 1_000_000
"""Most entries :attr:`Engine.control_log` keeps."""

_BUSY = int(NodeState.BUSY)
_OFF = int(NodeState.OFF)
_SW_ON = int(NodeState.SWITCHING_ON)
_SW_OFF = int(NodeState.SWITCHING_OFF)

_EPS = 1e-9


def _scenario(given: ResponseScenario | None, declared: ResponseScenario | None, seed: int) -> ResponseScenario | None:
    """The run's per-job response scenario: the options', else the one the policy's tags declare (its per-job
    draws fixed by the run's seed); None for the class models."""
    if given is None and declared is not None:
        given = dataclasses.replace(declared, seed=seed)
    if given is not None and given.kind == "classes":
        return None  # the class models, exactly as without a scenario
    return given


class Engine:
    """Replay ``workload`` on ``platform`` through ``policy``.

    Parameters
    ----------
    platform
        The simulated machine.
    workload
        Jobs in submission order (an iterable of :class:`TraceJob` or a
        :class:`Workload`).
    policy
        Any registered policy.
    cap
        Power-cap schedule (default: uncapped).
    budgets
        Energy-budget windows, exposed to the policy with their consumption.
    options
        See :class:`EngineOptions`.
    estimator
        Power estimator handed to the policy through the snapshot.
    predictor
        A predictor (see :mod:`wattsched.predictors`): jobs are predicted when
        submitted, the predictor learns each job's measured power when it
        completes, and the predictions reach the policy through the snapshot.
    """

    def __init__(
        self,
        platform: Platform,
        workload: Workload | Iterable[TraceJob],
        policy: Policy,
        *,
        cap: CapSchedule | None = None,
        budgets: Iterable[EnergyBudget] = (),
        dr_events: Iterable[DemandResponseEvent] = (),
        options: EngineOptions | None = None,
        estimator=None,
        predictor=None,
        seed: int = 0,
    ):
        self.platform = platform
        self.workload = workload if isinstance(workload, Workload) else None
        self._jobs: Iterator[TraceJob] = iter(workload.jobs if isinstance(workload, Workload) else workload)
        self.policy = policy
        self.policy_tags = tags = policy_tags(policy)  # what the policy declares it needs, read once
        # a policy that declares no constraint (easy, fcfs) never searches the queue index by power
        self._index_estimates = tags.constraints is None or bool(tags.constraints)
        self.policy_state: PolicyState = policy.init_state()
        self.cap = cap or CapSchedule()
        self.budgets = list(budgets)
        self.dr_events = sorted(dr_events, key=lambda e: (e.notice_s, e.start_s))
        self.noticed: list[NoticedEvent] = []
        self.options = opts = options or EngineOptions()
        self.response = _scenario(opts.response, tags.response_scenario, seed)
        self.seed = seed
        self.now = 0.0
        self._heap: list = []
        self._seq = 0
        self.epoch = 0
        self._truth: dict[int, TraceJob] = {}  # ground truth of the jobs in the system, by id
        self.ledger = ledger = Ledger(platform, responses=opts.response_classes, scenario=self.response,
                                      end_table=tags.wants_end_table)
        # the ledger's containers, for readers of the engine (they are never rebound)
        self.state, self.free, self.pending, self.running = ledger.state, ledger.free, ledger.pending, ledger.running
        self.node_cap_w, self.node_freq_hz, self.qindex = ledger.node_cap_w, ledger.node_freq_hz, ledger.qindex
        self._snapshot = ledger.snapshot(cap=self.cap, cap_lookahead_s=opts.cap_lookahead_s, estimator=estimator,
                                         # in replay every setting takes effect at once
                                         desired_node_cap_w=ledger.node_cap_w, desired_node_freq_hz=ledger.node_freq_hz)
        ledger.estimate = self._snapshot.estimate  # the estimate of a job started without a prediction
        # a policy mapping whole nodes: its starts of jobs of units are packed (once such a job is seen)
        self._maps_units = tags.maps_units
        self._pack = False
        self._budget_start_energy: dict[int, float] = {}
        # the jobs that left, in the order they left: ids, users and states; the numbers of JOB_NUMBERS
        self._job_ids: list[int] = []
        self._job_users: list[str] = []
        self._job_states: list[str] = []
        self._job_rows = Rows(len(JOB_NUMBERS))
        self._timeline = Rows(len(TIMELINE_COLUMNS))  # a row per event
        self.stats = {"policy_calls": 0, "events": 0, "plans_rejected": 0, "actions": 0, "submitted": 0}
        self._events = self._calls = self._submitted = self._ticks = 0
        self.rejections: list[str] = []
        self.control_log: list[tuple[float, str, int, float, int]] = []
        """Evictions and node frequency/cap changes applied: ``(t_s, kind, node, value, job_id)`` (-1: none).

        ``kind`` is ``evict``, ``cancel``, ``freq`` or ``cap``; ``value`` is the frequency (Hz) or cap (W) set,
        NaN for nominal; ``job_id`` is the job evicted or running on the node. At most
        :data:`CONTROL_LOG_MAX` entries.
        """
        self._forecast_horizon_s = opts.forecast_horizon_s
        if self._forecast_horizon_s is None and tags.wants_forecast:
            self._forecast_horizon_s = 7200.0
        self._until = math.inf
        self._hold_open = self._stopping = False
        self._gen: Iterator[None] | None = None
        self.result_: SimResult | None = None
        self._next_job: TraceJob | None = None
        self.predictor = predictor
        self.predictor_tags = None if predictor is None else predictor_tags(predictor)
        if predictor is not None:
            self._completed = completed_job_builder()
            predictor.setup(platform)
            if self.predictor_tags.needs_truth:
                predictor.observe_truth(self._true_estimate)  # an oracle: the replay knows the real power

    # ------------------------------------------------------------------ the ledger's figures
    @property
    def power_w(self) -> float:
        """Platform power now (W)."""
        return self.ledger.power_w

    @property
    def energy_j(self) -> float:
        """Energy drawn since the run began (J)."""
        return self.ledger.energy_j

    # ------------------------------------------------------------------ events
    def _push(self, t: float, kind: int, obj: Any = None, version: int = 0) -> None:
        self._seq += 1
        heappush(self._heap, (t, kind, self._seq, obj, version))

    # ------------------------------------------------------------ the run
    def run(self) -> SimResult:
        """Run to the end of the workload (or the time limit) and return the result.

        The collector's passes are sparse meanwhile (:func:`~wattsched.sim.collector.sparse`): an event's
        objects mostly end by reference counting, and the passes would walk the live ones again.
        """
        with sparse():
            for _ in self._loop():
                pass
        assert self.result_ is not None
        return self.result_

    # ------------------------------------------------------------ stepping against a clock
    def begin(self) -> None:
        """Start a run that an outside controller steps with :meth:`advance_to` and acts on with :meth:`apply`.

        The engine then waits for its controller instead of ending when no
        event is left (a held job may still be released). This is how the
        daemon's simulated cluster drives it against a clock.
        """
        self._hold_open = True
        self._until = -math.inf
        self._gen = self._loop()
        next(self._gen, None)

    def advance_to(self, t: float) -> None:
        """Process every event up to time ``t`` (the policy is called as in a run), then stand at ``t``."""
        if self._gen is None:
            raise RuntimeError("advance_to() needs begin() first")
        self._until = t
        next(self._gen, None)
        if t > self.now:
            self.ledger.advance(t)
            self.now = t

    def finish(self) -> SimResult:
        """End a stepped run where it stands (see :meth:`begin`): jobs still running or pending are recorded so."""
        if self._gen is None:
            raise RuntimeError("finish() needs begin() first")
        self._stopping = True
        for _ in self._gen:
            pass
        assert self.result_ is not None
        return self.result_

    def next_event_s(self) -> float:
        """Time of the next event (a submission included), or ``inf``."""
        t = self._heap[0][0] if self._heap else math.inf
        nxt = self._next_job
        return min(t, nxt.submit_s) if nxt is not None else t

    def apply(self, plan: Plan) -> list[str]:
        """Apply ``plan`` now, as the policy's plans are; returns the guard's problems (nothing applied then)."""
        snap = self._refresh(self.now)
        problems = plan_problems(snap, plan)
        if not problems:
            self._apply(plan)
        return problems

    def cancel_pending(self, job_id: int) -> None:
        """Withdraw pending job ``job_id`` (cancelled before it started)."""
        job = self.ledger.cancel(job_id)
        self.epoch += 1
        self._record(job, JobState.CANCELLED, math.nan, self.now)

    def node_power_w(self) -> list[float]:
        """Power of each node now: its job's share, or the power of its state."""
        return self.ledger.node_power_w()

    def finished_jobs(self) -> int:
        """Jobs that left the system (completed, killed, cancelled)."""
        return len(self._job_ids)

    def _loop(self) -> Iterator[None]:
        wall0 = _time.perf_counter()
        self._prime()
        limit = self._limit
        pending = self.pending
        while True:
            t = self._next_time()
            if t > self._until or (t == math.inf and self._hold_open):
                # Stepped against a clock: wait until the controller moves the clock on.
                if self._stopping:
                    break
                yield
                continue
            if t == math.inf or t > limit:
                break
            if t > self.now:
                self.ledger.advance(t)
                self.now = t
            control = self._events_at(t)
            self._submit_at(t)
            # A queue-only policy has nothing to do with an empty queue; control events
            # (cap changes, ticks, ...) and node-managing policies are always served.
            if pending or control or self._always_call:
                self._decide(t)
            self._add_row(t, self._cap_now)
        self._wrap_up(wall0)

    def _add_row(self, t: float, cap_w: float) -> None:
        """The timeline's row at ``t``: power, cap, busy and off nodes, queue length."""
        ledger = self.ledger
        self._timeline.add((t, ledger.power_w, cap_w, ledger.state_count[_BUSY], ledger.state_count[_OFF],
                            len(self.pending)))

    def _prime(self) -> None:
        """Before the first event: the known control events on the heap, the clock at the first event."""
        opts = self.options
        # A policy with monitoring stages (its tags' ``tick_period_s``) is called at that period too.
        self._tick_s = tick_s = opts.tick_s or self.policy_tags.tick_period_s
        self._tick_until = max((b.end_s for b in self.budgets), default=-math.inf)
        for t in self.cap.change_times():
            self._push(t, _CAP)
        for i, e in enumerate(self.dr_events):
            self._push(e.notice_s, _DR, i)
        for i, b in enumerate(self.budgets):
            self._push(b.start_s, _BUDGET, i)
            self._push(b.end_s, _BUDGET, i)
        nxt = self._next_job = next(self._jobs, None)
        # The clock starts at the first event: the first submission, or an earlier cap or budget change.
        start = nxt.submit_s if nxt is not None else math.inf
        if self._heap and self._heap[0][0] < start:
            start = self._heap[0][0]
        if math.isfinite(start):
            self.now = start
            self.ledger.open(start)
            if tick_s:
                self._push(start + tick_s, _TICK)
        self._limit = opts.time_limit_s if opts.time_limit_s is not None else math.inf
        self._bar = self._progress_bar()
        self._cap_now = self.cap.cap_at(self.now)
        self._always_call = self.policy_tags.wants_empty_queue_calls

    def _next_time(self) -> float:
        """Time of the next event, superseded ones dropped (a job's old end: it neither moves the clock nor calls
        the policy)."""
        heap = self._heap
        runs = self.ledger.runs
        while heap:
            head = heap[0]
            if head[1] == _END or head[1] == _STEP:
                run = runs.get(head[3])
                if run is None or run.version != head[4]:
                    heappop(heap)
                    continue
            break
        t = heap[0][0] if heap else math.inf
        nxt = self._next_job
        if nxt is not None and nxt.submit_s < t:
            t = nxt.submit_s
        return t

    def _events_at(self, t: float) -> bool:
        """Handle the heap's events at ``t``; returns whether one was a control event (the policy is called)."""
        heap = self._heap
        runs = self.ledger.runs
        control = False
        while heap and heap[0][0] <= t:
            _, kind, _, obj, version = heappop(heap)
            self._events += 1
            if kind == _END:
                run = runs.get(obj)
                if run is not None and run.version == version:
                    self._end(run)
            elif kind == _STEP:
                run = runs.get(obj)
                if run is not None and run.version == version:
                    self._power_step(run)
            else:
                control = True
                self._on_control(kind, obj, version, t)
        return control

    def _on_control(self, kind: int, obj: Any, version: int, t: float) -> None:
        if kind == _SWITCH:
            self._switch_done(obj, version)
        elif kind == _CAP:
            self.epoch += 1
            self._cap_now = self.cap.cap_at(t)
            if self.noticed:
                self._snapshot.dr_events = [e for e in self.noticed if e.event.end_s > t]
        elif kind == _BUDGET:
            if t == self.budgets[obj].start_s:
                self._budget_start_energy[obj] = self.ledger.energy_j
            self.epoch += 1
        elif kind == _DR:
            self._notice(self.dr_events[obj])
            self._cap_now = self.cap.cap_at(t)
        elif kind == _TICK:
            self._on_tick(t)

    def _on_tick(self, t: float) -> None:
        opts, tick_s = self.options, self._tick_s
        self._ticks += 1
        if opts.max_ticks is not None and self._ticks > opts.max_ticks:
            # the period is tick_s, or the policy's own (named by its parameter)
            param = None if opts.tick_s else self.policy_tags.tick_param
            key, fix = ("tick_s", "a longer tick") if param is None else (
                f"params.{param}", f"a longer period (--param {param}=SECONDS)")
            raise ConfigError(
                f"{key}: the run reached {opts.max_ticks:,} ticks of {tick_s:g} s at "
                f"t = {t:,.0f} s; use {fix} or raise the limit (--max-ticks, config "
                "key max_ticks)")
        # A policy's own monitoring stages go on for a waiting queue only while a budget window
        # lasts: a job that can never start would otherwise keep the run going for ever.
        if self._next_job is not None or self.running or (self.pending and (opts.tick_s or t < self._tick_until)):
            self._push(t + tick_s, _TICK)

    def _submit_at(self, t: float) -> None:
        """Submit the workload's jobs up to ``t`` (predicted, if a predictor runs; hot-started, if they ran)."""
        nxt = self._next_job
        if nxt is None or nxt.submit_s > t:
            return
        truth = self._truth
        ledger = self.ledger
        jobs = self._jobs
        bar = self._bar
        first_new = submitted = self._submitted
        hot: list[int] = []
        while nxt is not None and nxt.submit_s <= t:
            job = self._make_job(nxt)
            if job.id in truth:
                raise TraceError(self.workload.name if self.workload else "workload", None,
                                 f"job id {job.id} appears twice in the workload")
            truth[job.id] = nxt
            if job.units:
                self._check_units(job)
            ledger.submit(job)
            if nxt.extra and nxt.extra.get("running_at_start"):
                hot.append(job.id)
            submitted += 1
            nxt = next(jobs, None)
            if bar is not None and not submitted & 1023:
                bar.update(1024)
        self._next_job = nxt
        self._events += submitted - first_new
        self._submitted = submitted
        if self.predictor is not None:
            new = list(islice(reversed(self.pending.values()), submitted - first_new))
            new.reverse()
            for job, est in zip(new, self.predictor.predict(new)):
                ledger.set_estimate(job.id, est)
        elif submitted > first_new and self._index_estimates:
            # No prediction: the estimate the policy gets (nominal busy power) narrows the index's searches too
            # (for a policy that plans against power: a power-unaware one never searches the index by power).
            snap, qindex = self._snapshot, ledger.qindex
            for job in islice(reversed(self.pending.values()), submitted - first_new):
                est = snap.estimate(job)
                qindex.set_estimate(job.id, est.mean_w, est.max_w, est.std_w)
        if hot:
            self._start_hot(hot)

    def _decide(self, t: float) -> None:
        """Call the policy on the snapshot at ``t`` and apply its plan."""
        snap = self._refresh(t)
        if self.budgets:
            snap.budgets = self._budget_states()
            snap.upcoming_budgets = self._upcoming_budgets()
        horizon_s = self._forecast_horizon_s
        if horizon_s is not None:
            snap.forecast = forecast(snap, None, horizon_s, min(self.options.forecast_step_s, horizon_s))
        self._calls += 1
        plan = self.policy.decide(snap, self.policy_state)
        if self._pack and plan.actions:
            plan = pack_starts(snap, plan)
        if plan.actions or plan.power_estimate_w is not None:
            self._apply(plan)

    def _refresh(self, t: float) -> Snapshot:
        """The snapshot's figures brought to ``t`` (its containers are the ledger's, always current)."""
        snap = self._snapshot
        snap.now_s = t
        snap.epoch = self.epoch
        snap.platform_power_w = self.ledger.power_w
        snap.jobs_power_w = self.ledger.state_power[_BUSY]
        return snap

    def _wrap_up(self, wall0: float) -> None:
        """The run ends: the clock to the time limit if one is set, unfinished jobs recorded, the result built."""
        limit, ledger = self._limit, self.ledger
        end_t = min(self.now, limit) if math.isfinite(limit) else self.now
        if math.isfinite(limit) and limit > self.now and (self._heap or self._next_job is not None):
            ledger.advance(limit)
            self.now = end_t = limit
        bar = self._bar
        if bar is not None:
            bar.update(self._submitted & 1023)
            bar.close()
        stats = self.stats
        stats["policy_calls"] = self._calls
        stats["events"] = self._events
        stats["submitted"] = self._submitted
        runs = ledger.runs
        for jid in list(runs):
            self._finalize_unfinished_run(runs[jid])
        pending = self.pending
        for jid in list(pending):
            self._record(pending[jid], JobState.PENDING, math.nan, math.nan)
        if self._next_job is not None:
            stats["not_submitted"] = 1 + sum(1 for _ in self._jobs)
        self._add_row(end_t, self.cap.cap_at(end_t))
        self.result_ = self._result(_time.perf_counter() - wall0)

    def _progress_bar(self):
        if not self.options.progress:
            return None
        from tqdm import tqdm

        total = None
        if self.workload is not None:
            raw = self.workload.header.get("MaxJobs")
            if raw and raw.strip().isdigit():
                total = int(raw.strip())
        return tqdm(total=total, unit=" jobs", delay=2.0, mininterval=0.5, leave=False, desc="simulating")

    # ------------------------------------------------------------ jobs
    @staticmethod
    def _make_job(tj: TraceJob) -> Job:
        # Positional, in Job's field order: this runs once per job.
        return job_from_fields(
            tj.id, tj.submit_s, tj.walltime_s, tj.nodes, tj.user, tj.group, "", tj.partition, "", tj.procs,
            1, tj.gpus_per_node, 0, tj.min_nodes, tj.max_nodes, tj.malleable, True, 0.0, tj.app_class, (),
            tj.units, False,
        )

    def _schedule_end(self, run: Run) -> None:
        run.version += 1
        now = self.now
        finish = now + max(run.work_left_s, 0.0) / run.speed
        if self.options.kill_at_walltime:
            kill = run.start_s + run.job.walltime_s
            if kill < finish:
                finish = max(kill, now)
        self._push(finish, _END, run.job.id, run.version)
        series = run.truth.power_series
        if series is not None and run.step_index + 1 < len(series):
            offset = series[run.step_index + 1][0]
            at = now + max(offset - run.work_done_s, 0.0) / run.speed
            if at < finish:
                self._push(at, _STEP, run.job.id, run.version)

    def _start_hot(self, job_ids: list[int]) -> None:
        """Start jobs that were running before the replay began (a hot start) on free nodes, without the policy.

        They are the machine's state at their submission time, not decisions:
        the guard and the cap do not apply to them. One that does not find
        enough free nodes stays pending as an ordinary job (counted in
        ``stats["hot_start_pending"]``).
        """
        for jid in job_ids:
            nodes = self.ledger.place_free(self.pending[jid])
            if nodes is not None:
                self._start(Start(jid, nodes))
                self.stats["hot_started"] = self.stats.get("hot_started", 0) + 1
            else:
                self.stats["hot_start_pending"] = self.stats.get("hot_start_pending", 0) + 1
        self.epoch += 1

    def _start(self, action: Start) -> None:
        jid = action.job_id
        ledger = self.ledger
        run = ledger.start(jid, action.nodes, action.cap_w, action.freq_hz, self._truth[jid])
        if ledger.rerated:
            self._reschedule()
        self._schedule_end(run)

    def _reschedule(self) -> None:
        """Reschedule the ends of the runs the ledger re-rated (their speed changed)."""
        rerated = self.ledger.rerated
        for run in rerated:
            self._schedule_end(run)
        rerated.clear()

    def _end(self, run: Run) -> None:
        ledger = self.ledger
        ledger.end(run)
        if ledger.rerated:
            self._reschedule()
        self.epoch += 1
        done = run.work_left_s <= _EPS * max(1.0, run.truth.runtime_s)
        if self.predictor is not None:
            self._learn(run)
        self._record(run.job, JobState.COMPLETED if done else JobState.TIMEOUT, run.start_s, self.now, run.energy_j,
                     run.work_done_s)

    def _true_estimate(self, job_id: int) -> PowerEstimate:
        """Real per-node power of a job: what the oracle sees and what the predictor learns."""
        return true_power(self._truth[job_id], self.platform)

    def _learn(self, run: Run) -> None:
        true = true_power(self._truth[run.job.id], self.platform)
        self.predictor.update(self._completed(run.job, run.start_s, self.now, true.mean_w, true.max_w, true.std_w))

    def _power_step(self, run: Run) -> None:
        ledger = self.ledger
        ledger.power_step(run)
        self._schedule_end(run)
        if ledger.rerated:
            self._reschedule()

    def _finalize_unfinished_run(self, run: Run) -> None:
        self.ledger.settle(run)
        self._record(run.job, JobState.RUNNING, run.start_s, math.nan, run.energy_j, run.work_done_s)

    def _record(self, job: Job, state: JobState, start: float, end: float, energy_j: float = 0.0,
                work_s: float = math.nan) -> None:
        acc = self.ledger.accounts.pop(job.id, None)
        self._job_ids.append(job.id)
        self._job_users.append(job.user)
        self._job_states.append(state._value_)
        submit = job.submit_s
        if acc is None:
            self._job_rows.add((submit, start, end, start - submit, end - start, job.walltime_s, job.nodes, energy_j,
                                0.0, 0.0, 0, work_s))
        else:
            self._job_rows.add((submit, start, end, start - submit, end - start, job.walltime_s, job.nodes,
                                energy_j + acc.energy_j, acc.wasted_j, acc.wasted_node_s, acc.evictions, work_s))
        self._truth.pop(job.id, None)

    # ------------------------------------------------------------ plans
    def _apply(self, plan: Plan) -> None:
        problems = plan_problems(self._snapshot, plan)
        if problems:
            self.stats["plans_rejected"] += 1
            if self.options.strict:
                raise PlanViolation(problems)
            if len(self.rejections) < 100:
                self.rejections.append(f"t={self.now:.0f}: " + "; ".join(problems))
            return
        self.stats["actions"] += len(plan.actions)
        for action in plan.actions:
            if type(action) is Start:  # the common case first, without the match machinery
                self._start(action)
                continue
            self.epoch += 1
            match action:
                case Start():
                    self._start(action)
                case Evict():
                    self._log_control("evict" if action.requeue else "cancel", -1, math.nan, action.job_id)
                    self._evict(action)
                case SetNodeCap() | SetNodeFreq():
                    self._set_node(action)
                case PowerDown():
                    self._power_down(action.node)
                case PowerUp():
                    self._power_up(action.node)
                case Reshape():
                    self._reshape(action)
                case _:
                    assert_never(action)
        if plan.actions:
            self.epoch += 1

    def _log_control(self, kind: str, node: int, value: float, job_id: int) -> None:
        if len(self.control_log) < CONTROL_LOG_MAX:
            self.control_log.append((self.now, kind, node, value, job_id))

    def _evict(self, action: Evict) -> None:
        ledger = self.ledger
        run = ledger.runs[action.job_id]
        job = ledger.evict(run)
        if ledger.rerated:
            self._reschedule()
        self.epoch += 1
        if action.requeue:
            ledger.requeue(job)
        else:
            ledger.estimates.pop(job.id, None)
            self._record(job, JobState.CANCELLED, run.start_s, self.now)

    def _set_node(self, action: SetNodeCap | SetNodeFreq) -> None:
        ledger = self.ledger
        n = action.node
        if type(action) is SetNodeCap:
            ledger.set_node_cap(n, action.cap_w)
            kind, value = "cap", action.cap_w
        else:
            ledger.set_node_freq(n, action.freq_hz)
            kind, value = "freq", action.freq_hz
        if ledger.rerated:
            self._reschedule()
        run = ledger.run_on(n)
        self._log_control(kind, n, math.nan if value is None else value, -1 if run is None else run.job.id)

    # ------------------------------------------------------------ job units
    def _check_units(self, job: Job) -> None:
        """A submitted job of units: packed for a whole-node policy; refused if some unit fits no node at all."""
        if not self._maps_units:
            self._pack = True
        problem = self.ledger.unhosted(job)
        if problem is not None:
            raise TraceError(self.workload.name if self.workload else "workload", None, problem, field="units")

    # ------------------------------------------------------------ control events
    def _notice(self, event: DemandResponseEvent) -> None:
        """A demand-response event is announced: its window joins the cap schedule policies see."""
        baseline = self.ledger.power_w
        cap_w = event.target_cap_w(baseline)
        self.noticed.append(NoticedEvent(event, baseline, cap_w))
        self.cap = self.cap.with_limit(event.start_s, event.end_s, cap_w, event.label)
        snap = self._snapshot
        snap.cap = self.cap
        snap.dr_events = [e for e in self.noticed if e.event.end_s > self.now]
        self.epoch += 1
        for t in (event.start_s, event.end_s):
            if t > self.now:
                self._push(t, _CAP)

    def _power_down(self, n: int) -> None:
        self._push(self.now + self.ledger.power_down(n), _SWITCH, n, _SW_OFF)

    def _power_up(self, n: int) -> None:
        self._push(self.now + self.ledger.power_up(n), _SWITCH, n, _SW_ON)

    def _switch_done(self, n: int, from_state: int) -> None:
        if self.ledger.switch_done(n, from_state):
            self.epoch += 1

    def _reshape(self, action: Reshape) -> None:
        run = self.ledger.runs[action.job_id]
        hook = self.options.reshape_overhead
        overhead_s = 0.0 if hook is None else max(0.0, hook(run.job, len(run.nodes), len(action.nodes)))
        self.ledger.reshape(run, action.nodes, overhead_s)
        self._schedule_end(run)

    # ------------------------------------------------------------ results
    def _budget_states(self) -> list[BudgetState]:
        out = []
        for i, b in enumerate(self.budgets):
            if b.start_s <= self.now < b.end_s:
                consumed = self.ledger.energy_j - self._budget_start_energy.get(i, self.ledger.energy_j)
                out.append(BudgetState(b, consumed))
        return out

    def _upcoming_budgets(self) -> list[EnergyBudget]:
        return sorted((b for b in self.budgets if b.start_s > self.now), key=lambda b: b.start_s)

    def _result(self, wall_s: float) -> SimResult:
        jobs = job_table(self._job_ids, self._job_users, self._job_states, self._job_rows.table())
        table = self._timeline.table()
        timeline = {col: table[:, k].copy() for k, col in enumerate(TIMELINE_COLUMNS)}
        self.ledger.close()
        names = ("idle", "busy", "off", "switching_on", "switching_off")
        info = {
            "policy": getattr(self.policy, "name", type(self.policy).__name__),
            "predictor": getattr(self.predictor, "name", None),
            "oracle": self.predictor_tags is not None and self.predictor_tags.needs_truth,
            "params": self.policy.get_params() if hasattr(self.policy, "get_params") else {},
            "seed": self.seed,
            "nodes": len(self.platform.nodes),
            "platform": self.platform.name,
            "response": "classes" if self.response is None else self.response.label(),
            "kill_at_walltime": self.options.kill_at_walltime,
            "wall_time_s": wall_s,
            "energy_j": self.ledger.energy_j,
            "node_seconds_by_state": dict(zip(names, self.ledger.state_node_s)),
            "energy_j_by_state": dict(zip(names, self.ledger.state_energy_j)),
            "rejected_plans": self.rejections,
            **self.stats,
        }
        if self.workload is not None:
            info["trace"] = self.workload.name
            info["cleaning"] = self.workload.report.as_dict()
            info["notes"] = list(self.workload.notes)
            info["origin_unix_s"] = self.workload.origin_unix_s
        return SimResult(jobs=jobs, timeline=timeline, platform=self.platform, info=info)


def simulate(platform: Platform, workload, policy: Policy, **kwargs) -> SimResult:
    """Convenience wrapper: ``Engine(platform, workload, policy, **kwargs).run()``."""
    return Engine(platform, workload, policy, **kwargs).run()
