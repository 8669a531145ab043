"""Scheduling under an energy budget (Dutot et al. 2017, *Towards energy budget control in HPC*).

A budget window ``[t_s, t_e)`` allows ``B`` joules. Rule 1 makes ``R = B / (t_e - t_s)``
joules available each second; rule 2 starts a job only if the energy balance
stays positive over its whole requested time. The available-energy counter
``C_ea`` (:attr:`BudgetPolicyState.c_ea_j`) holds the energy made available so
far minus the energy consumed:

- at every call it grows by ``(R - P̃) · dt`` since the previous call, ``P̃``
  being the *estimated* platform power after the previous plan: the paper's
  ``P̃_platform = n_idle · P̃_idle + n_comp · P̃_comp`` (§V-C), ``p_comp_w`` per
  computing node and ``p_idle_w`` per node that is not computing, off and
  switching nodes included: "coarsely overestimated within the algorithm, by
  counting the number of computing and non-computing nodes" (§IV-C-1); with
  shutdown "the power consumption of an off node is lesser than an idle node's
  one. This leads our algorithm to overestimate even more the cluster's energy
  consumption, which would make a greater amount of energy available after
  monitoring stages" (§IV-C-3). ``p_off_w`` (unset by default) charges off
  nodes their own estimate instead, and switching nodes their switching power;
- at every monitoring stage (``monitoring_period_s``) it is set to
  ``R · (now - t_s) - consumed``, with the energy the window has really
  consumed (``BudgetState.consumed_j``: measured by the engine in replay,
  from telemetry energy counters live).

Policies:

``energy-bud``
    EASY backfilling (:mod:`wattsched.policies.easy`) plus the counter. A job
    starts if the estimated platform power with it stays at or under ``R``,
    or if the balance ``C_ea + ∫ (R - P̃(τ)) dτ`` stays non-negative over the
    job's requested time (and the running jobs' remaining times). The head job
    that cannot start gets an energy reservation ``J`` (its extra power over
    its requested time inside the window) besides its node reservation:
    backfilled jobs are checked against ``C_ea - J``.
``reduce-pc``
    The same, but the head's reservation lowers the rate until its start
    ``q`` instead: a backfilled job must fit under ``R - J / (q - now)``.
``powercap-easy``
    EASY with the power limit ``R`` on the estimated platform power for the
    whole window, no savings (the baseline of §V-C).
``easy-shutdown``
    EASY with opportunistic shutdown and no budget.

Every one of them takes ``shutdown``: idle nodes that the queue does not need
soon are powered down, and powered up again when the head job or a backfill
candidate needs them (:func:`plan_shutdown`). ``window`` powers nodes down only
inside a budget window (as the authors' simulation code does; the paper does
not say), ``always`` at any time.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable
from typing import ClassVar, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from wattsched.model.constraints import BudgetState
from wattsched.model.job import Job
from wattsched.model.plan import Plan, PowerDown, PowerUp, Reason, Start
from wattsched.model.platform import NodeState, Platform
from wattsched.model.snapshot import Snapshot
from wattsched.model.state import PolicyState
from wattsched.policies.base import BasePolicy, PolicyTags
from wattsched.policies.easy import queue_order, shadow_time

_EPS = 1e-9


class BudgetParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    monitoring_period_s: float = Field(
        600.0, gt=0, description="Period of the monitoring stages: C_ea is set from the measured energy, in seconds."
    )
    p_comp_w: float | None = Field(
        None, gt=0, description="Estimated power of a computing node, W (default: each node's busy_w). Paper: 203.12."
    )
    p_idle_w: float | None = Field(
        None, gt=0, description="Estimated power of an idle node, W (default: each node's idle_w). Paper: 100."
    )
    p_off_w: float | None = Field(
        None, ge=0,
        description=(
            "Estimated power of a node that is off, W; switching nodes then count at their switching power. "
            "Default: unset, every node that is not computing counts at p_idle_w (the paper's "
            "n_idle·P̃_idle + n_comp·P̃_comp)."
        ),
    )
    shutdown: Literal["never", "window", "always"] = Field(
        "never",
        description=(
            "Opportunistic shutdown: 'never', 'window' (nodes powered down only while a budget window is in "
            "force, as the paper's simulation code does) or 'always' (at any time)."
        ),
    )
    min_idle_s: float = Field(
        0.0, ge=0, description="A node is powered down only after being idle this long (avoids flapping), s."
    )
    order: Literal["fcfs", "saf"] = Field("fcfs", description="Queue order: 'fcfs' or 'saf'.")


class ShutdownParams(BudgetParams):
    shutdown: Literal["never", "window", "always"] = Field(
        "always", description="Opportunistic shutdown: 'never', 'window' or 'always'."
    )


class BudgetPolicyState(PolicyState):
    """The counter C_ea and what the budget policies remember between calls (persisted live)."""

    window: tuple[float, float, float] | None = Field(None, description="(start_s, end_s, energy_j) of the window")
    c_ea_j: float = 0.0
    last_call_s: float | None = None
    last_power_w: float = 0.0
    last_monitor_s: float | None = None
    monitoring_stages: int = 0
    reserved_j: float = 0.0
    reserved_job: int | None = None
    reserved_start_s: float | None = None
    idle_since_s: dict[int, float] = Field(default_factory=dict)
    woken_s: dict[int, float] = Field(
        default_factory=dict, description="nodes this policy powered up, by the time it did, until they are not off")


# Row of _Power.table by node state: computing, idle (drained nodes too), off (down nodes too), switching.
_ROW = np.array([1, 0, 2, 3, 4, 1, 2], dtype=np.intp)  # indexed by NodeState


class _Power:
    """Estimated per-node powers (P̂_comp, P̂_idle, P̂_off, switching) for the nodes of a platform."""

    __slots__ = ("by_state", "comp", "idle", "off", "sw_off", "sw_on", "table")

    def __init__(self, platform: Platform, params: BudgetParams):
        nodes = platform.nodes
        self.comp = [params.p_comp_w if params.p_comp_w is not None else n.power.busy_w for n in nodes]
        self.idle = [params.p_idle_w if params.p_idle_w is not None else n.power.idle_w for n in nodes]
        if params.p_off_w is None:
            # The paper's estimate counts computing and non-computing nodes only: off and switching at P̃_idle.
            self.off = self.sw_on = self.sw_off = list(self.idle)
        else:
            self.off = [params.p_off_w] * len(nodes)
            self.sw_on = [n.power.switch_on_w for n in nodes]
            self.sw_off = [n.power.switch_off_w for n in nodes]
        self.table = np.array([self.comp, self.idle, self.off, self.sw_on, self.sw_off], dtype=np.float64)
        # Identical nodes (the usual case): the platform power is a count per state times one power each.
        same = len(nodes) > 0 and bool((self.table == self.table[:, :1]).all())
        self.by_state = self.table[_ROW, 0] if same else None

    def platform_w(self, node_state) -> float:
        """Estimated platform power with the nodes in ``node_state``."""
        s = np.asarray(node_state, dtype=np.intp)
        if self.by_state is not None:
            return float(np.bincount(s, minlength=len(_ROW)) @ self.by_state)
        return float(self.table[_ROW[s], np.arange(len(s))].sum())

    def extra_w(self, nodes) -> float:
        """Extra estimated power when these idle nodes compute."""
        return sum(self.comp[i] - self.idle[i] for i in nodes)


def min_balance_j(c_ea_j: float, rate_w: float, now_s: float, end_s: float, power_w: float,
                  drops: list[tuple[float, float]]) -> float:
    """Lowest energy balance over ``[now, end]``: ``C_ea + ∫ (rate - P̃(τ)) dτ``.

    ``P̃`` starts at ``power_w`` and falls by ``dw`` at each ``(t, dw)`` of
    ``drops`` (running jobs ending). The balance is piecewise linear, so its
    minimum is at ``now``, a drop or ``end``.

    >>> min_balance_j(100.0, 10.0, 0.0, 20.0, 15.0, [(10.0, 10.0)])
    50.0
    """
    bal = lowest = c_ea_j
    t, p = now_s, power_w
    for when, dw in sorted(drops):
        if when >= end_s:
            break
        if when > t:
            bal += (rate_w - p) * (when - t)
            lowest = min(lowest, bal)
            t = when
        p -= dw
    if end_s > t:
        bal += (rate_w - p) * (end_s - t)
        lowest = min(lowest, bal)
    return lowest


class BudgetPolicy(BasePolicy):
    """EASY backfilling under an energy budget. Registered as ``energy-bud``."""

    name = "energy-bud"
    Params = BudgetParams
    State = BudgetPolicyState
    mode: ClassVar[str] = "energy-bud"

    _powers: tuple[Platform, BudgetParams, _Power] | None = None

    def _power_model(self, platform: Platform) -> _Power:
        """The estimated node powers, computed once per platform (the simulator and daemon keep theirs)."""
        cached = self._powers
        if cached is None or cached[0] is not platform or cached[1] is not self.params:
            cached = self._powers = (platform, self.params, _Power(platform, self.params))
        return cached[2]

    def tags(self) -> PolicyTags:
        # called with nothing queued (shutdown) and at the period of the monitoring stages
        return dataclasses.replace(super().tags(), wants_empty_queue_calls=True,
                                   tick_period_s=self.params.monitoring_period_s,
                                   tick_param="monitoring_period_s", constraints=frozenset({"budgets"}))

    # ------------------------------------------------------------ counter
    def _update_counter(self, snapshot: Snapshot, state: BudgetPolicyState,
                        budget: BudgetState | None) -> float:
        """Apply rule 1 and the monitoring stage; return the rate R (inf without a budget)."""
        now = snapshot.now_s
        if budget is None:
            state.window = None
            state.last_call_s = now
            return math.inf
        b = budget.budget
        rate = b.energy_j / (b.end_s - b.start_s)
        key = (b.start_s, b.end_s, b.energy_j)
        period = self.params.monitoring_period_s
        if state.window != key or state.last_monitor_s is None or now - state.last_monitor_s >= period - _EPS:
            # Monitoring stage: what was made available minus what was really consumed.
            state.window = key
            state.c_ea_j = rate * (now - b.start_s) - budget.consumed_j
            state.last_monitor_s = now
            state.monitoring_stages += 1
        elif state.last_call_s is not None and now > state.last_call_s:
            state.c_ea_j += (rate - state.last_power_w) * (now - state.last_call_s)
        state.last_call_s = now
        return rate

    # ------------------------------------------------------------ decide
    def decide(self, snapshot: Snapshot, state: PolicyState | None = None) -> Plan:
        if not isinstance(state, BudgetPolicyState):
            state = self.init_state()
        params = self.params
        now = snapshot.now_s
        budget = snapshot.budgets[0] if snapshot.budgets else None
        rate = self._update_counter(snapshot, state, budget)
        # The window the energy is counted in: the one in force, else the next one (rule 2 over the whole
        # requested time: a job started now that runs into a later window is charged against it, from
        # C_ea = 0 at its start).
        t_from = now
        c_ea = state.c_ea_j
        ahead = snapshot.upcoming_budgets[0] if budget is None and snapshot.upcoming_budgets else None
        if ahead is not None:
            rate = ahead.energy_j / (ahead.end_s - ahead.start_s)
            t_from, c_ea = ahead.start_s, 0.0
        energy = self.mode != "easy" and math.isfinite(rate)
        if budget is not None:
            t_end = budget.budget.end_s
        else:
            t_end = ahead.end_s if ahead is not None else math.inf
        pw = self._power_model(snapshot.platform)
        power = pw.platform_w(snapshot.node_state) if energy or params.shutdown != "never" else 0.0
        free = snapshot.free_nodes
        end = len(free)
        plan = Plan()
        actions = plan.actions
        # Running jobs' ends inside the window, with the power each gives back (computing -> idle).
        drops: list[tuple[float, float]] = []
        if energy:
            for r in snapshot.running.values():
                e = max(r.expected_end_s, now)
                if e < t_end:
                    drops.append((e, pw.extra_w(r.nodes)))
        state.reserved_j, state.reserved_job, state.reserved_start_s = 0.0, None, None

        def fits_energy(nodes, job: Job, available_j: float, rate_w: float, power_w: float) -> bool:
            """Whether ``job`` on ``nodes`` keeps the energy balance, with the platform at ``power_w`` now."""
            dw = pw.extra_w(nodes)
            job_end = min(now + job.walltime_s, t_end)
            if job_end <= t_from:
                return True  # over before the next window opens
            if power_w + dw <= rate_w + _EPS:
                return True
            # The estimated power when the window opens (now, or at its start if it lies ahead), and its drops.
            p0, later = window_power(power_w + dw, t_from, drops)
            if self.mode == "powercap-easy":
                return t_from > now and p0 <= rate_w + _EPS  # drops only lower the power after t_from
            horizon = max([job_end, *(t for t, _ in later)]) if later else job_end
            return min_balance_j(available_j, rate_w, t_from, horizon, p0, [*later, (job_end, dw)]) >= -_EPS

        started: list[tuple[float, int]] = []
        head = None
        head_energy_blocked = False
        reserve_j = 0.0
        for job in queue_order(snapshot, params.order):
            k = job.nodes
            if k > end:
                head = job
                break
            nodes = tuple(free[end - k : end])
            if energy and not fits_energy(nodes, job, c_ea, rate, power):
                head, head_energy_blocked = job, True
                break
            actions.append(Start(job.id, nodes))
            started.append((now + job.walltime_s, k))
            end -= k
            if energy:
                dw = pw.extra_w(nodes)
                power += dw
                if now + job.walltime_s < t_end:
                    drops.append((now + job.walltime_s, dw))

        if head is not None:
            if head_energy_blocked:
                shadow, extra = now, end - head.nodes
            else:
                shadow, extra = shadow_time(snapshot, head.nodes, end, started)
            if energy and shadow < t_end:
                q = shadow
                if head_energy_blocked:
                    q = now + params.monitoring_period_s
                # The head's extra power over its requested time inside the window, on typical nodes.
                per_node = sum(pw.comp[i] - pw.idle[i] for i in free[:1] or [0])
                reserve_j = head.nodes * per_node * max(0.0, min(q + head.walltime_s, t_end) - max(q, t_from))
                state.reserved_j, state.reserved_job, state.reserved_start_s = reserve_j, head.id, q
            if end:
                self._backfill(snapshot, plan, head, free, end, shadow, extra, energy, fits_energy,
                               c_ea, rate, reserve_j, state.reserved_start_s, pw, drops, t_from, t_end)
                end = len(free) - sum(len(a.nodes) for a in actions if type(a) is Start)
                power = pw.platform_w(snapshot.node_state) + sum(pw.extra_w(a.nodes) for a in plan.starts())
            why = "energy" if head_energy_blocked else "nodes"
            plan.reasons[head.id] = Reason(_HEAD_REASON, why, head.nodes, end, shadow, c_ea, state.reserved_j)
            plan.default_reason = "does not fit before the head job's node or energy reservation"
        elif actions:
            power = pw.platform_w(snapshot.node_state) + sum(pw.extra_w(a.nodes) for a in plan.starts())

        if params.shutdown != "never":
            # Nodes are powered down only while shutdown applies, but woken whenever the queue needs them.
            down = params.shutdown == "always" or budget is not None
            fits = None
            if head is not None:
                base = power
                q = state.reserved_start_s
                spread = self.mode == "reduce-pc" and (q is None or q > t_from)
                reduced = rate - reserve_j / max(q - t_from, _EPS) if (
                    self.mode == "reduce-pc" and reserve_j > 0 and q is not None and q > t_from) else rate

                def fits(job: Job, nodes, added_w: float, start_s: float) -> bool:
                    """The backfill energy check for ``job`` on ``nodes`` once they are on (at ``start_s``)."""
                    if not energy or start_s + job.walltime_s <= t_from:
                        return True
                    p_now = base + added_w
                    if spread or self.mode == "powercap-easy":
                        dw = pw.extra_w(nodes)
                        p0 = p_now + dw if t_from <= now else window_power(p_now + dw, t_from, drops)[0]
                        return p0 <= (reduced if spread else rate) + _EPS
                    return fits_energy(nodes, job, c_ea - reserve_j, rate, p_now)

            taken = {a.job_id for a in plan.starts()}
            power += plan_shutdown(snapshot, plan, state, head, head_energy_blocked, params.min_idle_s, pw, down,
                                   (j for j in queue_order(snapshot, params.order)
                                    if head is not None and j.id != head.id and j.id not in taken), fits)
        state.last_power_w = power if math.isfinite(power) else 0.0
        return plan

    def _backfill(self, snapshot, plan, head, free, end, shadow, extra, energy, fits_energy,
                  c_ea, rate, reserve_j, q, pw, drops, t_from, t_end) -> None:
        now = snapshot.now_s
        actions = plan.actions
        power = pw.platform_w(snapshot.node_state) + sum(pw.extra_w(a.nodes) for a in plan.starts())
        reduced = rate
        # reduce-pc spreads the head's reservation over the time until it starts, inside the window; a head
        # reserved before the window opens is charged as energy-bud does (C_ea - J).
        spread = self.mode == "reduce-pc" and (q is None or q > t_from)
        if self.mode == "reduce-pc" and reserve_j > 0 and q is not None and q > t_from:
            reduced = rate - reserve_j / max(q - t_from, _EPS)
        taken = {a.job_id for a in actions if type(a) is Start}
        taken.add(head.id)
        # Energy refusals as (extra power, requested time): every start only raises the estimated power, so a
        # job asking at least as much power for at least as long is refused too, without computing it again.
        refused: list[tuple[float, float]] = []
        # Inside the window, powercap-easy and reduce-pc's lowered rate refuse on power alone: once one more
        # node computing would exceed the limit, only a job over before the window opens could start.
        limit = reduced if spread else rate
        power_only = energy and t_from <= now and (spread or self.mode == "powercap-easy")
        floor_dw = min((pw.comp[i] - pw.idle[i] for i in free[:end]), default=0.0) if power_only else 0.0
        blocked = power_only and floor_dw >= 0.0 and power + floor_dw > limit + _EPS
        for job in queue_order(snapshot, self.params.order):
            if job.id in taken or (blocked and now + job.walltime_s > t_from):
                continue
            k = job.nodes
            if k > end:
                continue
            uses_extra = False
            if now + job.walltime_s <= shadow:
                pass
            elif k <= extra:
                uses_extra = True
            else:
                continue
            nodes = tuple(free[end - k : end])
            if energy:
                dw = pw.extra_w(nodes)
                if now + job.walltime_s <= t_from:
                    ok = True  # over before the next window opens
                elif any(dw >= f_dw and job.walltime_s >= f_wall for f_dw, f_wall in refused):
                    continue
                elif spread:
                    p0 = power + dw if t_from <= now else window_power(power + dw, t_from, drops)[0]
                    ok = p0 <= reduced + _EPS
                else:
                    ok = fits_energy(nodes, job, c_ea - reserve_j, rate, power)
                if not ok:
                    refused = [f for f in refused if not (f[0] >= dw and f[1] >= job.walltime_s)]
                    refused.append((dw, job.walltime_s))
                    continue
                power += dw
                if now + job.walltime_s < t_end:
                    drops.append((now + job.walltime_s, dw))
            if uses_extra:
                extra -= k
            actions.append(Start(job.id, nodes))
            taken.add(job.id)
            blocked = power_only and floor_dw >= 0.0 and power + floor_dw > limit + _EPS
            end -= k
            if end == 0:
                break


def window_power(power_w: float, t_from_s: float,
                 drops: list[tuple[float, float]]) -> tuple[float, list[tuple[float, float]]]:
    """Estimated power at ``t_from_s`` (jobs ending by then give theirs back) and the drops after it.

    >>> window_power(900.0, 100.0, [(50.0, 200.0), (150.0, 300.0)])
    (700.0, [(150.0, 300.0)])
    """
    p = power_w - sum(dw for t, dw in drops if t <= t_from_s)
    return p, [(t, dw) for t, dw in drops if t > t_from_s]


def plan_shutdown(snapshot: Snapshot, plan: Plan, state: BudgetPolicyState, head: Job | None,
                  head_energy_blocked: bool, min_idle_s: float, pw: _Power, power_down: bool = True,
                  candidates: Iterable[Job] = (), fits: Callable[[Job, tuple, float, float], bool] | None = None
                  ) -> float:
    """Add opportunistic shutdown to ``plan``; return the change of estimated power.

    Idle nodes left after the plan's starts are powered down once idle for
    ``min_idle_s``, except those the head job will need before a node could be
    switched off and on again (``switch_off_s + switch_on_s``). When the head
    waits for nodes and nodes that are off (or switching on) would let it
    start, the missing ones are powered up. Then each backfill candidate
    (``candidates``: the queued jobs behind the head that did not start, in
    queue order) that the idle nodes left cannot hold, but the idle nodes and
    the nodes off or switching on can, gets the missing nodes powered up (and
    the idle ones kept) if it does not delay the head: it ends, from
    ``now + switch_on_s``, by the head's reservation, or it uses nodes the head
    does not need then; and if ``fits(job, nodes, added_w, start_s)`` (the
    policy's backfill energy check) accepts it. The job itself starts at a
    later call, once its nodes are on: the paper's scheduler allocates off
    nodes like idle ones and switches them on for any job it starts, the head
    or a backfilled one. Only idle, usable nodes are ever powered down: never
    a drained or down node.
    """
    now = snapshot.now_s
    used = {n for a in plan.starts() for n in a.nodes}
    left = [n for n in snapshot.free_nodes if n not in used]
    since = {n: state.idle_since_s.get(n, now) for n in left}
    state.idle_since_s = since
    delta = 0.0
    states = snapshot.node_state
    keep = 0
    if head is not None:
        models = snapshot.platform.nodes
        arr = np.asarray(states)
        switching = np.flatnonzero(arr == NodeState.SWITCHING_ON).tolist()
        off = np.flatnonzero(arr == NodeState.OFF).tolist()
        # A node powered up a moment ago may still read as off (a live resource manager shows the request
        # only once its resume program runs): it is waking, not a node to power up again. Forgotten once it
        # no longer reads as off, or after its switch-on time (and a minute) has passed.
        woken = {n: t for n, t in state.woken_s.items()
                 if n < len(arr) and arr[n] == NodeState.OFF and now - t <= models[n].power.switch_on_s + 60.0}
        state.woken_s = woken
        waking_nodes = switching + list(woken)
        off = [n for n in off if n not in woken]
        wake_s = max((models[n].power.switch_on_s for n in off + waking_nodes), default=0.0)
        head_waking, head_woken = 0, False   # waking nodes the head takes; whether it gets nodes powered up
        if head_energy_blocked:
            keep = head.nodes
            shadow, extra = now, len(left) - head.nodes
        else:
            started = [(now + snapshot.pending[a.job_id].walltime_s, len(a.nodes)) for a in plan.starts()]
            shadow, extra = shadow_time(snapshot, head.nodes, len(left), started)
            turn_s = max((models[n].power.switch_off_s + models[n].power.switch_on_s for n in left), default=0.0)
            if shadow - now <= turn_s:
                keep = head.nodes
            missing = head.nodes - len(left) - len(waking_nodes)
            if missing <= len(off) and now + wake_s < shadow:
                # Waking nodes starts the head sooner than waiting for running jobs: keep the idle ones too.
                keep, head_woken = head.nodes, True
                head_waking = min(len(waking_nodes), head.nodes - len(left))
                for n in off[: max(0, missing)]:
                    plan.actions.append(PowerUp(n))
                    state.woken_s[n] = now
                    delta += pw.sw_on[n] - pw.off[n]
                off = off[max(0, missing):]
                # The head starts once its nodes are on (every idle one among them): only the nodes still off or
                # waking beyond its own are free of it.
                shadow, extra = now + wake_s, 0
        # Backfill candidates. The head's reservation counts the nodes off or waking as free, as the paper's
        # scheduler does (it allocates them like idle ones): the candidate must end by its start or use nodes
        # it does not need then.
        idle_free = max(0, len(left) - keep)
        waking_free = waking_nodes[head_waking:]
        if head_energy_blocked:
            extra = max(0, extra) + len(off) + len(waking_free)
        elif not head_woken:
            total = len(left) + len(off) + len(waking_free)
            if total >= head.nodes:
                shadow, extra = now + wake_s, total - head.nodes
            else:
                shadow, extra = shadow_time(snapshot, head.nodes, total, started)
        else:
            extra = len(off) + len(waking_free)
        added_w = 0.0
        for job in candidates if (off or waking_free) else ():
            k = job.nodes
            if k <= idle_free:
                continue  # the idle nodes could hold it: the backfill refused it for time or energy
            if k > idle_free + len(waking_free) + len(off):
                continue
            start_s = now + wake_s
            uses_extra = start_s + job.walltime_s > shadow
            if uses_extra and k > extra:
                continue
            n_idle = idle_free
            n_waking = min(len(waking_free), k - n_idle)
            n_off = k - n_idle - n_waking
            nodes = (*left[idle_free - n_idle: idle_free], *waking_free[:n_waking], *off[:n_off])
            if fits is not None and not fits(job, nodes, added_w, start_s):
                continue
            for n in off[:n_off]:
                plan.actions.append(PowerUp(n))
                state.woken_s[n] = now
                delta += pw.sw_on[n] - pw.off[n]
            added_w += pw.extra_w(nodes)
            off, waking_free = off[n_off:], waking_free[n_waking:]
            keep += n_idle
            idle_free -= n_idle
            if uses_extra:
                extra -= k
            if not off and not waking_free:
                break
    # Keep the highest-indexed idle nodes for the head and the woken candidates (the policies take nodes
    # from the end).
    for n in left[: max(0, len(left) - keep)] if power_down else ():
        if now - since[n] >= min_idle_s - _EPS:
            plan.actions.append(PowerDown(n))
            delta += pw.sw_off[n] - pw.idle[n]
            since.pop(n, None)
    return delta


class ReducePcPolicy(BudgetPolicy):
    """energyBud whose head reservation lowers the rate until the head starts. Registered as ``reduce-pc``."""

    name = "reduce-pc"
    mode = "reduce-pc"


class PowercapEasyPolicy(BudgetPolicy):
    """EASY with the power limit B/(t_e - t_s) on the estimated platform power. Registered as ``powercap-easy``."""

    name = "powercap-easy"
    mode = "powercap-easy"


class EasyShutdownPolicy(BudgetPolicy):
    """EASY backfilling with opportunistic shutdown and no budget. Registered as ``easy-shutdown``."""

    name = "easy-shutdown"
    Params = ShutdownParams
    mode = "easy"


_HEAD_REASON = ("head of queue, waiting for {}: needs {} nodes, {} free; reserved at t={:.0f}s; "
                "C_ea {:.0f} J, energy reserved {:.0f} J")
