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

Beside the engine: :mod:`~wattsched.sim.intake` submits the workload's jobs
(their ground truth kept apart, predictions made), :mod:`~wattsched.sim.controls`
keeps the cap schedule, demand-response notices, budgets and ticks, and
:mod:`~wattsched.sim.recorder` records the jobs that leave and the timeline.
"""

from __future__ import annotations

import math
import time as _time
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, assert_never

from wattsched.errors import PlanViolation
from wattsched.model.constraints import CapSchedule, DemandResponseEvent, EnergyBudget, NoticedEvent
from wattsched.model.forecast import forecast
from wattsched.model.guard import plan_problems
from wattsched.model.job import Job, JobState
from wattsched.model.ledger import Ledger, Run
from wattsched.model.plan import Evict, Plan, PowerDown, PowerUp, Reshape, SetNodeCap, SetNodeFreq, Start
from wattsched.model.platform import NodeState, Platform
from wattsched.model.snapshot import Snapshot
from wattsched.model.state import PolicyState
from wattsched.model.units import pack_starts
from wattsched.policies.base import Policy, policy_tags
from wattsched.sim.collector import sparse
from wattsched.sim.controls import Controls
from wattsched.sim.events import EventHeap
from wattsched.sim.intake import Intake
from wattsched.sim.options import EngineOptions, forecast_horizon, run_scenario
from wattsched.sim.recorder import CONTROL_LOG_MAX, Recorder
from wattsched.sim.result import SimResult
from wattsched.workload.records import TraceJob, Workload

__all__ = ["CONTROL_LOG_MAX", "Engine", "EngineOptions", "simulate"]

# Event kinds, in the order they are processed at equal times.
_END, _SWITCH, _STEP, _CAP, _BUDGET, _TICK, _DR = range(7)

_BUSY = int(NodeState.BUSY)
_SW_ON = int(NodeState.SWITCHING_ON)
_SW_OFF = int(NodeState.SWITCHING_OFF)

_EPS = 1e-9


def pass_models_for(platform: Platform) -> Mapping:
    """The PASS application models jobs are timed by on ``platform``: the packaged ones (Sarood et al. 2014,
    Table IV) on an overprovisioned platform, none elsewhere (4.6 of docs/simulator.md)."""
    if not platform.overprovisioned:
        return {}
    from wattsched.scalingmodels import packaged_pass_models

    return packaged_pass_models()


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
        self.policy = policy
        self.policy_tags = tags = policy_tags(policy)  # what the policy declares it needs, read once
        self.policy_state: PolicyState = policy.init_state()
        self.options = opts = options or EngineOptions()
        self.controls = Controls(cap, budgets, dr_events, opts, tags)
        self.response = run_scenario(opts, tags.response_scenario, seed)
        self.seed = seed
        self.now = 0.0
        self._heap = EventHeap()
        self.epoch = 0
        self.ledger = ledger = Ledger(platform, responses=opts.response_classes, scenario=self.response,
                                      end_table=tags.wants_end_table, pass_models=pass_models_for(platform))
        # the ledger's containers, for readers of the engine (they are never rebound)
        self.state, self.free, self.pending, self.running = ledger.state, ledger.free, ledger.pending, ledger.running
        self.node_cap_w, self.node_freq_hz, self.qindex = ledger.node_cap_w, ledger.node_freq_hz, ledger.qindex
        self._snapshot = ledger.snapshot(cap=self.controls.cap, cap_lookahead_s=opts.cap_lookahead_s,
                                         estimator=estimator,
                                         # in replay every setting takes effect at once
                                         desired_node_cap_w=ledger.node_cap_w, desired_node_freq_hz=ledger.node_freq_hz)
        ledger.estimate = self._snapshot.estimate  # the estimate of a job started without a prediction
        self.recorder = recorder = Recorder(ledger)
        self.rejections, self.control_log = recorder.rejections, recorder.control_log  # never rebound either
        self.stats = {"policy_calls": 0, "events": 0, "plans_rejected": 0, "actions": 0, "submitted": 0}
        self._events = self._calls = 0
        self._forecast_horizon_s = forecast_horizon(opts, tags.wants_forecast)
        self._until = math.inf
        self._hold_open = self._stopping = False
        self._skip_steps = self._moved = self._free_starts = self._rejected = False
        self._gen: Iterator[None] | None = None
        self.result_: SimResult | None = None
        self.predictor = predictor
        # a policy that declares no constraint (easy, fcfs) never searches the queue index by power
        self.intake = Intake(workload, ledger, self._snapshot, predictor=predictor, maps_units=tags.maps_units,
                             index_estimates=tags.constraints is None or bool(tags.constraints), options=opts)
        # Slurm's scheduling passes (EngineOptions.sched_passes): the last one held, the next one due (nan: none)
        self._passes = opts.sched_passes
        self._pass_last, self._pass_next, self._pass_origin = -math.inf, math.nan, 0.0
        self._hot = False
        if self._passes is not None:
            self.stats["sched_passes"] = self.stats["held_starts"] = 0

    # ------------------------------------------------------------------ the ledger's and the controls' figures
    @property
    def power_w(self) -> float:
        """Platform power now (W)."""
        return self.ledger.power_w

    @property
    def energy_j(self) -> float:
        """Energy drawn since the run began (J)."""
        return self.ledger.energy_j

    @property
    def cap(self) -> CapSchedule:
        """The cap schedule, with the windows of the demand-response events noticed so far."""
        return self.controls.cap

    @property
    def noticed(self) -> list[NoticedEvent]:
        """The demand-response events noticed so far, in the order they were."""
        return self.controls.noticed

    # ------------------------------------------------------------------ events
    def _push(self, t: float, kind: int, obj: Any = None, version: int = 0) -> None:
        self._heap.push(t, kind, obj, version)

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
        """Time of the next event (a submission included; a superseded end or power step is none), or ``inf``."""
        return self._next_time()

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
        return self.recorder.jobs_left()

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
            self._moved = False
            control = self._events_at(t)
            self._submit_at(t)
            # A queue-only policy has nothing to do with an empty queue; control events
            # (cap changes, ticks, ...) and node-managing policies are always served. A policy
            # that ignores power steps is not called when only jobs' power changed, unless the guard
            # rejected its last plan: the guard's verdict moves with the energy a budget has left.
            if (pending and (self._moved or not self._skip_steps or self._rejected) and self._could_start()) \
                    or control or self._always_call:
                self._decide(t)
            self.recorder.row(t, self._cap_now)  # through self: a C call (a generator's locals are untyped)
        self._wrap_up(wall0)

    def _prime(self) -> None:
        """Before the first event: the known control events on the heap, the clock at the first event."""
        controls = self.controls
        for t in controls.cap.change_times():
            self._push(t, _CAP)
        for i, e in enumerate(controls.dr_events):
            self._push(e.notice_s, _DR, i)
        for i, b in enumerate(controls.budgets):
            self._push(b.start_s, _BUDGET, i)
            self._push(b.end_s, _BUDGET, i)
        nxt = self.intake.first()
        # The clock starts at the first event: the first submission, or an earlier cap or budget change.
        start = nxt.submit_s if nxt is not None else math.inf
        if self._heap.first_time() < start:
            start = self._heap.first_time()
        if math.isfinite(start):
            self.now = start
            self._pass_origin = start
            self.ledger.open(start)
            if controls.tick_s:
                self._push(start + controls.tick_s, _TICK)
        opts = self.options
        self._limit = opts.time_limit_s if opts.time_limit_s is not None else math.inf
        self._cap_now = controls.cap.cap_at(self.now)
        self._always_call = self.policy_tags.wants_empty_queue_calls
        self._skip_steps = self.policy_tags.ignores_power_steps
        self._free_starts = self.policy_tags.starts_on_free_nodes

    def _could_start(self) -> bool:
        """Whether a call could start a job: not when the policy only starts jobs on free nodes and fewer are
        free than the smallest pending job asks (once starts are packed onto units, free nodes alone do not
        tell)."""
        return not self._free_starts or self.intake.pack or len(self.free) >= self.qindex.smallest()

    def _next_time(self) -> float:
        """Time of the next event, superseded ones dropped (a job's old end: it neither moves the clock nor calls
        the policy)."""
        heap = self._heap
        items = heap.items
        runs = self.ledger.runs
        while items:
            head = items[0]
            if head[1] == _END or head[1] == _STEP:
                run = runs.get(head[3])
                if run is None or run.version != head[4]:
                    heap.pop()
                    continue
            break
        t = heap.first_time()
        nxt = self.intake.next_job
        if nxt is not None and nxt.submit_s < t:
            t = nxt.submit_s
        return t

    def _events_at(self, t: float) -> bool:
        """Handle the heap's events at ``t``; returns whether one was a control event (the policy is called)."""
        heap = self._heap
        items = heap.items
        runs = self.ledger.runs
        control = False
        while items and heap.first_time() <= t:
            _, kind, _, obj, version = heap.pop()
            self._events += 1
            if kind == _END:
                run = runs.get(obj)
                if run is not None and run.version == version:
                    self._end(run)
                    self._moved = True
            elif kind == _STEP:
                run = runs.get(obj)
                if run is not None and run.version == version:
                    self._power_step(run)
            else:
                control = True
                self._on_control(kind, obj, version, t)
        return control

    def _on_control(self, kind: int, obj: Any, version: int, t: float) -> None:
        controls = self.controls
        if kind == _SWITCH:
            if self.ledger.switch_done(obj, version):
                self.epoch += 1
        elif kind == _CAP:
            self.epoch += 1
            self._cap_now = controls.cap.cap_at(t)
            if controls.noticed:
                self._snapshot.dr_events = controls.notices_in_force(t)
        elif kind == _BUDGET:
            controls.budget_edge(obj, t, self.ledger.energy_j)
            self.epoch += 1
        elif kind == _DR:
            self._notice(obj)
            self._cap_now = controls.cap.cap_at(t)
        elif kind == _TICK:
            if controls.tick(t, self.intake.next_job is not None or bool(self.running), bool(self.pending)):
                self._push(t + controls.tick_s, _TICK)

    def _notice(self, i: int) -> None:
        """Demand-response event ``i`` is announced: its window joins the cap schedule policies see."""
        controls = self.controls
        changes = controls.notice(i, self.ledger.power_w, self.now)
        snap = self._snapshot
        snap.cap = controls.cap
        snap.dr_events = controls.notices_in_force(self.now)
        self.epoch += 1
        for t in changes:
            self._push(t, _CAP)

    def _submit_at(self, t: float) -> None:
        """Submit the workload's jobs up to ``t`` (hot-started, if they ran when the trace began)."""
        intake = self.intake
        nxt = intake.next_job
        if nxt is None or nxt.submit_s > t:
            return
        first_new = intake.submitted
        hot = intake.submit_until(t)
        self._events += intake.submitted - first_new
        self._moved = True
        if self._passes is not None:  # a submission asks for a pass of Slurm's scheduler
            self._pass_request(t)
        if hot:
            self._start_hot(hot)

    def _decide(self, t: float) -> None:
        """Call the policy on the snapshot at ``t`` and apply its plan."""
        snap = self._refresh(t)
        controls = self.controls
        if controls.budgets:
            snap.budgets = controls.budget_states(self.now, self.ledger.energy_j)
            snap.upcoming_budgets = controls.upcoming_budgets(self.now)
        horizon_s = self._forecast_horizon_s
        if horizon_s is not None:
            snap.forecast = forecast(snap, None, horizon_s, min(self.options.forecast_step_s, horizon_s))
        self._calls += 1
        plan = self.policy.decide(snap, self.policy_state)
        if self.intake.pack and plan.actions:
            plan = pack_starts(snap, plan)
        self._rejected = False
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
        limit, ledger, intake = self._limit, self.ledger, self.intake
        end_t = min(self.now, limit) if math.isfinite(limit) else self.now
        if math.isfinite(limit) and limit > self.now and (self._heap.items or intake.next_job is not None):
            ledger.advance(limit)
            self.now = end_t = limit
        not_submitted = intake.close()
        stats = self.stats
        stats["policy_calls"] = self._calls
        stats["events"] = self._events
        stats["submitted"] = intake.submitted
        self.recorder.unfinished()
        if not_submitted:
            stats["not_submitted"] = not_submitted
        self.recorder.row(end_t, self.controls.cap.cap_at(end_t))
        self.result_ = self._result(_time.perf_counter() - wall0)

    # ------------------------------------------------------------ jobs
    def _schedule_end(self, run: Run) -> None:
        run.version += 1
        now = self.now
        finish = now + max(run.work_left_s, 0.0) / run.speed
        if self.options.kill_at_walltime:
            if run.pass_model is None:
                kill = run.start_s + run.job.walltime_s
            else:  # its limit counts work at its requested nodes and full CPU power (4.6 of docs/simulator.md)
                kill = run.last_s + max(run.limit_work_s - run.work_done_s, 0.0) / run.speed
            if kill < finish:
                finish = max(kill, now)
        self._push(finish, _END, run.job.id, run.version)
        self._schedule_step(run, finish)

    def _schedule_step(self, run: Run, finish: float) -> None:
        """The next step of ``run``'s power profile, if it comes before ``finish``."""
        series = run.truth.power_series
        if series is not None and run.step_index + 1 < len(series):
            offset = series[run.step_index + 1][0]
            at = self.now + max(offset - run.work_done_s, 0.0) / run.speed
            if at < finish:
                self._push(at, _STEP, run.job.id, run.version)

    def _start_hot(self, job_ids: list[int]) -> None:
        """Start jobs that were running before the replay began (a hot start) on free nodes, without the policy.

        They are the machine's state at their submission time, not decisions:
        the guard and the cap do not apply to them. One that does not find
        enough free nodes stays pending as an ordinary job (counted in
        ``stats["hot_start_pending"]``).
        """
        self._hot = True  # running already: no scheduling pass to wait for
        for jid in job_ids:
            nodes = self.ledger.place_free(self.pending[jid])
            if nodes is not None:
                self._start(Start(jid, nodes))
                self.stats["hot_started"] = self.stats.get("hot_started", 0) + 1
            else:
                self.stats["hot_start_pending"] = self.stats.get("hot_start_pending", 0) + 1
        self._hot = False
        self.epoch += 1

    def _start(self, action: Start) -> None:
        jid = action.job_id
        ledger = self.ledger
        truth = self.intake.truth[jid]
        hold = 0.0
        if self._passes is not None and not self._hot:
            # the start waits for Slurm's next pass after the release; the job holds its nodes, idle, until then
            hold = self._pass_request(self.now + self._passes.release_lag_s) - self.now
            if hold > _EPS:
                power = self.platform.nodes[action.nodes[0]].power
                truth = held(truth, hold, power.idle_w, power.busy_w)
                self.stats["held_starts"] += 1
        run = ledger.start(jid, action.nodes, action.cap_w, action.freq_hz, truth)
        if hold > _EPS:
            run.start_s = self.now + hold  # its recorded start, and its time limit's, is the pass
        if ledger.rerated:
            self._reschedule()
        self._schedule_end(run)

    def _pass_request(self, t: float) -> float:
        """Something asks at ``t`` for a pass of Slurm's scheduler: the time of the pass that serves it (the one due,
        or the first tick at least ``interval_s`` after the last)."""
        passes = self._passes
        due = self._pass_next
        tick = passes.tick_s
        if due == due:  # a pass is due: it serves requests up to its time, and is held by any later one
            if due >= t - _EPS:
                return due
            self._pass_last = due
        at = max(t, self._pass_last + passes.interval_s)
        due = self._pass_origin + math.ceil((at - self._pass_origin) / tick - _EPS) * tick
        self._pass_next = due
        self.stats["sched_passes"] += 1
        return due

    def _reschedule(self) -> None:
        """Reschedule the ends of the runs the ledger re-rated (their speed changed)."""
        rerated = self.ledger.rerated
        for run in rerated:
            self._schedule_end(run)
        rerated.clear()

    def _end(self, run: Run) -> None:
        ledger = self.ledger
        ledger.end(run)
        if self._passes is not None:  # a job's end asks for a pass of Slurm's scheduler
            self._pass_request(self.now)
        if ledger.rerated:
            self._reschedule()
        self.epoch += 1
        done = run.work_left_s <= _EPS * max(1.0, run.truth.runtime_s)
        if self.predictor is not None:
            self.intake.learn(run, self.now)
        self._record(run.job, JobState.COMPLETED if done else JobState.TIMEOUT, run.start_s, self.now, run.energy_j,
                     run.work_done_s, len(run.nodes))

    def _power_step(self, run: Run) -> None:
        ledger = self.ledger
        speed = run.speed
        ledger.power_step(run)
        if run.speed == speed:
            # its speed holds (uncapped, or a cap its new power stays under): its end holds too
            self._schedule_step(run, math.inf)
        else:
            self._schedule_end(run)
        if ledger.rerated:
            self._reschedule()

    def _record(self, job: Job, state: JobState, start: float, end: float, energy_j: float = 0.0,
                work_s: float = math.nan, nodes: int = -1) -> None:
        self.recorder.job(job, state, start, end, energy_j, work_s, nodes)
        self.intake.truth.pop(job.id, None)

    # ------------------------------------------------------------ plans
    def _apply(self, plan: Plan) -> None:
        problems = plan_problems(self._snapshot, plan)
        if problems:
            self.stats["plans_rejected"] += 1
            self._rejected = True
            if self.options.strict:
                raise PlanViolation(problems)
            self.recorder.rejected(self.now, problems)
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
                    self.recorder.control(self.now, "evict" if action.requeue else "cancel", -1, math.nan,
                                          action.job_id)
                    self._evict(action)
                case SetNodeCap() | SetNodeFreq():
                    self._set_node(action)
                case PowerDown():
                    self._push(self.now + self.ledger.power_down(action.node), _SWITCH, action.node, _SW_OFF)
                case PowerUp():
                    self._push(self.now + self.ledger.power_up(action.node), _SWITCH, action.node, _SW_ON)
                case Reshape():
                    self._reshape(action)
                case _:
                    assert_never(action)
        if plan.actions:
            self.epoch += 1

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
            self._record(job, JobState.CANCELLED, run.start_s, self.now, 0.0, math.nan, len(run.nodes))

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
        self.recorder.control(self.now, kind, n, math.nan if value is None else value,
                              -1 if run is None else run.job.id)

    def _reshape(self, action: Reshape) -> None:
        run = self.ledger.runs[action.job_id]
        hook = self.options.reshape_overhead
        overhead_s = action.overhead_s if action.overhead_s > 0 else 0.0
        if hook is not None:
            overhead_s += max(0.0, hook(run.job, len(run.nodes), len(action.nodes)))
        self.ledger.reshape(run, action.nodes, overhead_s)
        self._schedule_end(run)

    # ------------------------------------------------------------ results
    def _result(self, wall_s: float) -> SimResult:
        jobs, timeline = self.recorder.tables()
        info = {
            "policy": getattr(self.policy, "name", type(self.policy).__name__),
            "predictor": getattr(self.predictor, "name", None),
            "oracle": self.intake.predictor_tags is not None and self.intake.predictor_tags.needs_truth,
            "params": self.policy.get_params() if hasattr(self.policy, "get_params") else {},
            "seed": self.seed,
            "nodes": len(self.platform.nodes),
            "platform": self.platform.name,
            "response": "classes" if self.response is None else self.response.label(),
            "kill_at_walltime": self.options.kill_at_walltime,
            "wall_time_s": wall_s,
            **self.recorder.figures(),
            **self.stats,
        }
        if self.workload is not None:
            info["trace"] = self.workload.name
            info["cleaning"] = self.workload.report.as_dict()
            info["notes"] = list(self.workload.notes)
            info["origin_unix_s"] = self.workload.origin_unix_s
        return SimResult(jobs=jobs, timeline=timeline, platform=self.platform, info=info)


def held(truth: TraceJob, hold_s: float, idle_w: float, busy_w: float) -> TraceJob:
    """``truth`` with its run preceded by ``hold_s`` on its nodes at ``idle_w`` a node (a start waiting for Slurm);
    ``busy_w`` is its power over its run where the trace gives none.

    >>> t = held(TraceJob(1, 0.0, 10.0, 60.0, 2, 2, mean_w=250.0, max_w=260.0), 2.0, 100.0, 300.0)
    >>> t.runtime_s, t.mean_w, t.max_w
    (12.0, 225.0, 260.0)
    >>> round(held(TraceJob(1, 0.0, 10.0, 60.0, 2, 2), 2.0, 100.0, 300.0).mean_w, 1)
    266.7
    """
    import dataclasses

    run = truth.runtime_s
    total = run + hold_s
    mean_w = truth.mean_w
    if total > 0:
        mean_w = ((busy_w if mean_w is None else mean_w) * run + idle_w * hold_s) / total
    series = truth.power_series
    if series is not None:
        series = ((0.0, idle_w), *((offset + hold_s, w) for offset, w in series))
    return dataclasses.replace(truth, runtime_s=total, mean_w=mean_w, power_series=series)


def simulate(platform: Platform, workload, policy: Policy, **kwargs) -> SimResult:
    """Convenience wrapper: ``Engine(platform, workload, policy, **kwargs).run()``."""
    return Engine(platform, workload, policy, **kwargs).run()
