"""Demand response by frequency scaling and eviction (Ahmed, Liu and Wu 2017, Algorithm 1).

``dr``
    Admission as Algorithm 1, line 1: the pending jobs are scanned in
    submission order and each eligible one starts: enough nodes are free
    (Eq. 6) and its power at the lowest frequency, added to the running jobs'
    power, fits under the cap in force (Eq. 7) and, with every running job at
    its lowest frequency, under the lowest cap announced over its requested
    time (an event seen from its notice time on). ``queue: fcfs`` stops
    at the first job that is not eligible instead (strict FCFS). With no cap in force every
    job runs at its highest frequency. With a cap in force (a demand-response
    event, or any capped window) the frequencies of all running jobs are
    chosen to minimise their remaining energy ``Σ e_R(j, f_j)`` (Eq. 8) under
    the cap, by SLSQP (scipy), rounded down to the levels the nodes offer and
    re-checked (a discrete local search then moves single jobs to other levels
    while the total falls and the cap holds). When even the lowest frequencies
    exceed the cap, running jobs are evicted by a 0/1 knapsack that keeps the
    jobs with the most energy spent (Eq. 9) under the cap at their lowest
    frequencies, and the frequencies are solved again. Frequencies are set on
    every node of a job only when they change.
``dr-easy-pc``
    The same frequency and eviction logic over ``easy-pc`` admission (EASY
    backfilling with power checks) instead of FCFS.
``performance``, ``powersave``
    The paper's baselines: the same admission (Eqs. 6-7 at their frequency), every
    job always at the highest (``performance``) or lowest (``powersave``)
    frequency, no eviction. With ``cap_aware: false`` they admit by free nodes
    only (Eq. 6) and ignore caps and events, as the paper's
    demand-response-agnostic baselines do.

Power is counted as the platform counts it: the cap bounds the measured
platform power, idle and off nodes included. A running job's power at another
frequency is its measured power scaled by its response model (the
application's polynomials ``p(f)``, ``t(f)`` for the classes of
:mod:`wattsched.appmodels`); a pending job's is its predicted power.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from wattsched.model.job import Job
from wattsched.model.plan import Action, Evict, Plan, Reason, SetNodeFreq, Start
from wattsched.model.response import LinearResponse, ResponseModel
from wattsched.model.snapshot import Snapshot
from wattsched.model.state import PolicyState
from wattsched.policies.base import BasePolicy, PolicyTags
from wattsched.policies.easy_pc import EasyPcPolicy, EasyPcState

_CPU_BOUND = LinearResponse(f=1.0, floor=0.3)
"""Response of a job whose class the platform does not know: CPU-bound, as the simulator takes it."""

FreqMode = Literal["optimal", "max", "min"]


# --------------------------------------------------------------------------- pure solvers


@dataclass(frozen=True, slots=True)
class JobPowerModel:
    """One job as the frequency solver sees it.

    Attributes
    ----------
    nominal_w
        Power of the whole job at ``f_max`` (all its nodes).
    levels_ghz
        Frequency levels its nodes offer, ascending; the last is ``f_max``.
    response
        How its power and run time change with the frequency ratio.
    remaining_s
        Time left at ``f_max``: ``(1 - α_j) · requested time``.
    idle_w
        Power of its nodes when idle (what an eviction leaves).
    """

    job_id: int
    nominal_w: float
    levels_ghz: tuple[float, ...]
    response: ResponseModel
    remaining_s: float
    idle_w: float = 0.0

    @property
    def f_min(self) -> float:
        return self.levels_ghz[0]

    @property
    def f_max(self) -> float:
        return self.levels_ghz[-1]

    def power_w(self, f_ghz: float) -> float:
        """``n_j · p(j, f)``: power of the job at ``f_ghz``."""
        if self.f_max <= 0:
            return self.nominal_w
        return self.nominal_w * self.response.at_frequency_ratio(f_ghz / self.f_max)[0]

    def energy_j(self, f_ghz: float) -> float:
        """``e_R(j, f)`` (Eq. 8): energy of the rest of the job at ``f_ghz``."""
        if self.f_max <= 0:
            return self.nominal_w * self.remaining_s
        p, t = self.response.at_frequency_ratio(f_ghz / self.f_max)
        return self.nominal_w * p * self.remaining_s * t


def round_down(f_ghz: float, levels: Sequence[float]) -> float:
    """The highest level not above ``f_ghz`` (the lowest level if all are above).

    >>> round_down(2.05, (1.2, 1.4, 2.0, 2.7)), round_down(1.0, (1.2, 2.7)), round_down(2.7, (1.2, 2.7))
    (2.0, 1.2, 2.7)
    """
    i = int(np.searchsorted(np.asarray(levels), f_ghz + 1e-9, side="right")) - 1
    return float(levels[max(i, 0)])


def total_power_w(jobs: Sequence[JobPowerModel], freqs: Sequence[float]) -> float:
    return sum(j.power_w(f) for j, f in zip(jobs, freqs, strict=True))


def total_energy_j(jobs: Sequence[JobPowerModel], freqs: Sequence[float]) -> float:
    return sum(j.energy_j(f) for j, f in zip(jobs, freqs, strict=True))


def _separable_gradient(term, jobs: Sequence[JobPowerModel], x, lo, hi, h: float = 1e-6) -> np.ndarray:
    """Gradient of ``Σ term(job_j, x_j)`` by a central difference per job, one-sided at the bounds."""
    g = np.zeros(len(jobs))
    for i, j in enumerate(jobs):
        a, b = max(lo[i], x[i] - h), min(hi[i], x[i] + h)
        if b > a:
            g[i] = (term(j, b) - term(j, a)) / (b - a)
    return g


def slsqp_frequencies(jobs: Sequence[JobPowerModel], budget_w: float, maxiter: int = 100) -> list[float] | None:
    """Continuous frequencies minimising ``Σ e_R(j, f_j)`` with ``Σ n_j p(j, f_j) <= budget_w`` (SLSQP).

    Returns ``None`` when the jobs exceed the budget even at their lowest
    frequencies. The result may sit slightly above the budget (the solver's
    tolerance); :func:`optimal_frequencies` rounds it down and re-checks.
    """
    from scipy.optimize import minimize

    if not jobs:
        return []
    lo = np.array([j.f_min for j in jobs])
    hi = np.array([j.f_max for j in jobs])
    if total_power_w(jobs, lo) > budget_w:
        return None
    e_scale = max(total_energy_j(jobs, hi), 1e-9)
    p_scale = max(total_power_w(jobs, hi), 1e-9)

    def objective(x):
        return total_energy_j(jobs, x) / e_scale

    def objective_grad(x):
        return _separable_gradient(JobPowerModel.energy_j, jobs, x, lo, hi) / e_scale

    def slack(x):
        return (budget_w - total_power_w(jobs, x)) / p_scale

    def slack_grad(x):
        return -_separable_gradient(JobPowerModel.power_w, jobs, x, lo, hi) / p_scale

    x0 = lo + 0.5 * (hi - lo)
    if slack(x0) < 0:
        x0 = lo.copy()
    # Both sums are separable (job j's term depends on f_j only): their gradients take 2 evaluations per job,
    # where scipy's default finite differences would re-evaluate the whole sum once per job.
    res = minimize(objective, x0, method="SLSQP", jac=objective_grad, bounds=list(zip(lo, hi, strict=True)),
                   constraints=[{"type": "ineq", "fun": slack, "jac": lambda x: slack_grad(x)[None, :]}],
                   options={"maxiter": maxiter, "ftol": 1e-9})
    x = np.clip(np.asarray(res.x, dtype=float), lo, hi)
    if not np.all(np.isfinite(x)):
        x = lo.copy()
    return x.tolist()


def least_energy_level(job: JobPowerModel) -> float:
    """The level with the least remaining energy; among levels within rounding of it, the highest (fastest).

    A job whose energy does not depend on the frequency (a CPU-bound linear
    model) thus stays at ``f_max`` instead of a level picked by rounding noise.
    """
    energies = [job.energy_j(f) for f in job.levels_ghz]
    least = min(energies)
    tol = 1e-9 * abs(least) + 1e-12
    return max(f for f, e in zip(job.levels_ghz, energies, strict=True) if e <= least + tol)


def optimal_frequencies(jobs: Sequence[JobPowerModel], budget_w: float, maxiter: int = 100) -> list[float] | None:
    """Frequency levels for ``jobs`` under ``budget_w``: SLSQP, rounded down to the levels, re-checked.

    After rounding, a job whose rounded set still exceeds the budget (a
    non-monotone power model) is lowered, the most power saved first, until
    it fits; then single jobs are moved to other levels while that lowers the
    total remaining energy and keeps the budget. When every job at its own
    least-energy level fits the budget, that is the answer (the optimum of the
    discrete problem) and no solver runs. ``None`` when the jobs do not fit
    even at their lowest levels.
    """
    # When every job at its own most frugal level fits, that is the optimum of the discrete problem: no solver.
    own = [least_energy_level(j) for j in jobs]
    if total_power_w(jobs, own) <= budget_w:
        return own
    x = slsqp_frequencies(jobs, budget_w, maxiter)
    if x is None:
        return None
    freqs = [round_down(f, j.levels_ghz) for f, j in zip(x, jobs, strict=True)]
    power = total_power_w(jobs, freqs)
    while power > budget_w * (1 + 1e-12):
        best, best_gain = -1, 0.0
        for i, j in enumerate(jobs):
            k = j.levels_ghz.index(freqs[i])
            if k > 0:
                gain = j.power_w(freqs[i]) - j.power_w(j.levels_ghz[k - 1])
                if gain > best_gain:
                    best, best_gain = i, gain
        if best < 0:
            return None
        k = jobs[best].levels_ghz.index(freqs[best])
        freqs[best] = jobs[best].levels_ghz[k - 1]
        power = total_power_w(jobs, freqs)
    return _local_search(jobs, freqs, budget_w)


def _local_search(jobs: Sequence[JobPowerModel], freqs: list[float], budget_w: float) -> list[float]:
    powers = [j.power_w(f) for j, f in zip(jobs, freqs, strict=True)]
    energies = [j.energy_j(f) for j, f in zip(jobs, freqs, strict=True)]
    total = sum(powers)
    for _ in range(4 * len(jobs) * 8 + 1):
        best = None
        best_gain = 1e-9 * max(1.0, abs(sum(energies)))
        for i, j in enumerate(jobs):
            for f in j.levels_ghz:
                if f == freqs[i]:
                    continue
                p = j.power_w(f)
                if total - powers[i] + p > budget_w:
                    continue
                gain = energies[i] - j.energy_j(f)
                if gain > best_gain:
                    best, best_gain = (i, f, p), gain
        if best is None:
            break
        i, f, p = best
        total += p - powers[i]
        freqs[i], powers[i], energies[i] = f, p, jobs[i].energy_j(f)
    return freqs


def knapsack_keep(values: Sequence[float], weights_w: Sequence[float], capacity_w: float,
                  max_buckets: int = 4000) -> list[bool]:
    """0/1 knapsack: which items to keep for the most value with total weight at most ``capacity_w``.

    Weights are rounded up to buckets of ``capacity_w / max_buckets`` (at least
    1 W), so a kept set always fits; ties keep the earlier items.

    >>> knapsack_keep([10, 7, 5], [6, 5, 4], 9)
    [False, True, True]
    """
    n = len(values)
    if capacity_w < 0:
        return [False] * n
    res = max(1.0, capacity_w / max_buckets)
    cap = math.floor(capacity_w / res + 1e-9)
    w = [max(0, math.ceil(wt / res - 1e-9)) for wt in weights_w]
    best = np.zeros(cap + 1)
    take = np.zeros((n, cap + 1), dtype=bool)
    for i in range(n - 1, -1, -1):
        wi, vi = w[i], float(values[i])
        if wi > cap:
            continue
        cand = np.full(cap + 1, -np.inf)
        cand[wi:] = best[: cap + 1 - wi] + vi
        better = cand >= best  # ties: keep (the earlier items are decided last, so they win ties)
        take[i] = better
        best = np.where(better, cand, best)
    keep = [False] * n
    c = cap
    for i in range(n):
        if take[i, c]:
            keep[i] = True
            c -= w[i]
    return keep


# --------------------------------------------------------------------------- the policies


_QUEUE_DESC = ("How the queue is scanned: 'first-fit' starts, in submission order, every job that fits "
               "(Algorithm 1, line 1: the first eligible job, again and again); 'fcfs' stops at the first job "
               "that does not fit (strict FCFS: no job overtakes an earlier one).")


class DrEasyPcParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    requeue: bool = Field(True, description="Evicted jobs are requeued (true) or cancelled (false).")
    lookahead: bool = Field(True, description="Admit a job only if, with every running job at its lowest "
                            "frequency, it also fits under the lowest cap announced over its requested time.")
    maxiter: int = Field(100, ge=1, le=10000, description="Iteration limit of the SLSQP solver.")
    knapsack_buckets: int = Field(4000, ge=10, le=100000, description="Resolution of the eviction knapsack: the "
                                  "capacity is cut into this many power buckets (at least 1 W each).")


class DrParams(DrEasyPcParams):
    queue: Literal["first-fit", "fcfs"] = Field("first-fit", description=_QUEUE_DESC)


class BaselineParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    queue: Literal["first-fit", "fcfs"] = Field("first-fit", description=_QUEUE_DESC)

    cap_aware: bool = Field(True, description="Admit by Eq. 7 (power under the cap in force) and the lookahead. "
                            "false: admit by free nodes only (Eq. 6) and ignore caps and events altogether, "
                            "as the paper's demand-response-agnostic baselines do.")
    lookahead: bool = Field(True, description="Admit a job only if, with every running job at its lowest "
                            "frequency, it also fits under the lowest cap announced over its requested time.")


class _Ctx:
    """What one decision computes about the jobs: their power models and the power not drawn by them."""

    def __init__(self, snapshot: Snapshot):
        self.s = snapshot
        self.other_w = snapshot.other_power_w()

    def levels(self, nodes: Sequence[int]) -> tuple[float, ...]:
        pm = self.s.platform.nodes[nodes[0]].power
        levels = sorted({round(f / 1e9, 6) for f in pm.freq_levels_hz})
        return tuple(levels) if levels else (0.0,)

    def response(self, job: Job) -> ResponseModel:
        return self.s.response_for(job) or _CPU_BOUND

    def running_model(self, jid: int) -> JobPowerModel:
        r = self.s.running[jid]
        levels = self.levels(r.nodes)
        resp = self.response(r.job)
        f_now = levels[-1] if r.freq_hz is None else min(r.freq_hz / 1e9, levels[-1])
        ratio = resp.at_frequency_ratio(f_now / levels[-1])[0] if levels[-1] > 0 else 1.0
        if r.power_w > 0 and ratio > 0:
            nominal = r.power_w / ratio
        else:
            nominal = self.s.estimate(r.job).mean_w * len(r.nodes)
        remaining = (1.0 - r.progress(self.s.now_s)) * r.job.walltime_s
        return JobPowerModel(jid, nominal, levels, resp, remaining, self.s.platform.idle_w_of(r.nodes))

    def pending_model(self, job: Job, nodes: tuple[int, ...]) -> JobPowerModel:
        levels = self.levels(nodes)
        nominal = self.s.estimate(job).mean_w * len(nodes)
        return JobPowerModel(job.id, nominal, levels, self.response(job), job.walltime_s,
                             self.s.platform.idle_w_of(nodes))

    def current_ghz(self, jid: int, model: JobPowerModel) -> float:
        f = self.s.running[jid].freq_hz
        return model.f_max if f is None else round_down(f / 1e9, model.levels_ghz)


class _DrBase(BasePolicy):
    Params: ClassVar[type[BaseModel]] = DrParams
    freq_mode: ClassVar[FreqMode] = "optimal"

    def tags(self) -> PolicyTags:
        return dataclasses.replace(super().tags(), wants_empty_queue_calls=True)

    # ---- admission
    def _admit(self, snapshot: Snapshot, ctx: _Ctx, state: PolicyState | None, plan: Plan,
               models: dict[int, JobPowerModel], freqs: dict[int, float]) -> list[tuple[Job, tuple[int, ...]]]:
        """Eqs. 6-7 at the policy's admission frequency, first-fit or strict FCFS. Fills ``plan`` reasons."""
        free = snapshot.free_nodes
        end = len(free)
        started: list[tuple[Job, tuple[int, ...]]] = []
        cap_now = snapshot.cap_w
        run_w = sum(models[j].power_w(freqs[j]) for j in models)
        run_min_w = sum(m.power_w(m.f_min) for m in models.values())
        other = ctx.other_w
        lookahead = getattr(self.params, "lookahead", True)
        if not getattr(self.params, "cap_aware", True):
            cap_now, lookahead = math.inf, False
        strict = getattr(self.params, "queue", "first-fit") == "fcfs"
        for job in snapshot.pending.values():
            if end == 0:
                break
            k = job.nodes
            if k > end:
                plan.reasons[job.id] = Reason("waiting for {} nodes ({} free)", k, end)
                if strict:
                    break
                continue
            nodes = tuple(free[end - k:end])
            m = ctx.pending_model(job, nodes)
            f = m.f_max if self.freq_mode == "max" else m.f_min
            p = m.power_w(f)
            after = other - m.idle_w + run_w + p
            if after > cap_now:
                plan.reasons[job.id] = Reason("its power at {:.2f} GHz ({:.0f} W) would exceed the cap "
                                              "({:.0f} W of {:.0f} W)", f, p, after, cap_now)
                if strict:
                    break
                continue
            if lookahead:
                ahead = float(snapshot.lowest_cap(job.walltime_s))
                after_min = other - m.idle_w + run_min_w + m.power_w(m.f_min)
                if after_min > ahead:
                    plan.reasons[job.id] = Reason("a cap of {:.0f} W is announced during its requested time; with "
                                                  "every job at its lowest frequency it would need {:.0f} W",
                                                  ahead, after_min)
                    if strict:
                        break
                    continue
            started.append((job, nodes))
            models[job.id], freqs[job.id] = m, f
            other -= m.idle_w
            run_w += p
            run_min_w += m.power_w(m.f_min)
            end -= k
        plan.default_reason = "behind an earlier job (FCFS)" if strict else "no free nodes left for it"
        return started

    def decide(self, snapshot: Snapshot, state: PolicyState | None = None) -> Plan:
        ctx = _Ctx(snapshot)
        models = {jid: ctx.running_model(jid) for jid in snapshot.running}
        freqs = {jid: ctx.current_ghz(jid, m) for jid, m in models.items()}
        plan = Plan([])
        started = self._admit(snapshot, ctx, state, plan, models, freqs)
        evicted: list[int] = []
        if self.freq_mode == "max":
            chosen = {jid: m.f_max for jid, m in models.items()}
        elif self.freq_mode == "min":
            chosen = {jid: m.f_min for jid, m in models.items()}
        else:
            chosen, evicted = self._optimise(snapshot, ctx, models, started, plan.reasons)
        actions: list[Action] = []
        requeue = getattr(self.params, "requeue", True)
        for jid in evicted:
            actions.append(Evict(jid, requeue=requeue))
        for job, nodes in started:
            actions.append(Start(job.id, nodes))
        # frequencies: every node of a job at one level; nodes left idle back to their nominal one
        desired = snapshot.desired_node_freq_hz
        job_nodes = {jid: snapshot.running[jid].nodes for jid in snapshot.running}
        job_nodes.update({job.id: nodes for job, nodes in started})
        busy: set[int] = set()
        for jid, f in chosen.items():
            m = models[jid]
            want = None if f >= m.f_max or m.f_max <= 0 else f * 1e9
            for n in job_nodes[jid]:
                busy.add(n)
                if desired.get(n) != want:
                    actions.append(SetNodeFreq(n, want))
        for n in sorted(desired):
            if n not in busy:
                actions.append(SetNodeFreq(n, None))
        plan.actions = actions
        return plan

    def _optimise(self, snapshot: Snapshot, ctx: _Ctx, models: dict[int, JobPowerModel],
                  started: list[tuple[Job, tuple[int, ...]]], reasons: dict) -> tuple[dict[int, float], list[int]]:
        """Algorithm 1, lines 8-12: frequencies under the cap in force, evicting by knapsack if they cannot meet it."""
        cap = snapshot.cap_w
        if not math.isfinite(cap):
            return {jid: m.f_max for jid, m in models.items()}, []
        p = self.params
        new = {job.id for job, _ in started}
        ids = sorted(models)
        other = ctx.other_w - sum(models[j].idle_w for j in new)
        jobs = [models[j] for j in ids]
        res = optimal_frequencies(jobs, cap - other, p.maxiter)
        evicted: list[int] = []
        if res is None:
            # Evict: keep the running jobs with the most energy spent (Eq. 9) that fit at their lowest frequencies.
            olds = [j for j in ids if j not in new]
            idle_all = sum(models[j].idle_w for j in olds)
            new_min = sum(models[j].power_w(models[j].f_min) for j in new)
            capacity = cap - other - idle_all - new_min
            if capacity < 0:
                # evicting every running job would not bring the platform under the cap: evict none
                return {jid: m.f_min for jid, m in models.items()}, []
            values, weights = [], []
            for j in olds:
                m = models[j]
                f_now = ctx.current_ghz(j, m)
                r = snapshot.running[j]
                alpha = r.progress(snapshot.now_s)
                pr, tr = m.response.at_frequency_ratio(f_now / m.f_max) if m.f_max > 0 else (1.0, 1.0)
                values.append(alpha * m.nominal_w * pr * r.job.walltime_s * tr)  # Eq. 9
                weights.append(max(0.0, m.power_w(m.f_min) - m.idle_w))
            keep = knapsack_keep(values, weights, capacity, p.knapsack_buckets)
            evicted = [j for j, k in zip(olds, keep, strict=True) if not k]
            spent = dict(zip(olds, values, strict=True))
            for j in evicted:
                reasons[j] = Reason("the cap of {:.0f} W cannot be met at the lowest frequencies; the jobs kept "
                                    "(knapsack, Eq. 9) spent more energy than this one ({:.3g} MJ)", cap,
                                    spent[j] / 1e6)
            ids = [j for j in ids if j not in evicted]
            other += sum(models[j].idle_w for j in evicted)
            jobs = [models[j] for j in ids]
            res = optimal_frequencies(jobs, cap - other, p.maxiter)
            if res is None:  # knapsack rounding keeps this from happening; stay safe
                res = [m.f_min for m in jobs]
            for j in evicted:
                del models[j]
        return dict(zip(ids, res, strict=True)), evicted


class DrPolicy(_DrBase):
    """Demand response (Ahmed et al. 2017): first-fit admission, energy-optimal frequencies, knapsack eviction."""

    name = "dr"

    def __init__(self, params=None, **kwargs):
        super().__init__(params, **kwargs)
        try:  # the SLSQP solver: fail when built, not at the first event
            import scipy.optimize  # noqa: F401
        except ImportError as exc:
            from wattsched.policies import UnavailablePolicy

            raise UnavailablePolicy(f"policy {self.name!r} needs scipy, which is not installed "
                                    f"(pip install 'wattsched[dr]') ({exc})") from exc


class DrEasyPcPolicy(DrPolicy):
    """``dr`` over easy-pc admission (EASY backfilling with power checks) instead of FCFS."""

    name = "dr-easy-pc"
    Params = DrEasyPcParams
    State = EasyPcState

    def _admit(self, snapshot, ctx, state, plan, models, freqs):
        sub = EasyPcPolicy().decide(snapshot, state)
        plan.reasons.update(sub.reasons)
        plan.default_reason = sub.default_reason
        started = []
        by_id = snapshot.pending
        for a in sub.starts():
            job = by_id[a.job_id]
            m = ctx.pending_model(job, a.nodes)
            models[job.id], freqs[job.id] = m, m.f_max
            started.append((job, a.nodes))
        return started


class PerformancePolicy(_DrBase):
    """Baseline of ``dr``: its admission, every job at the highest frequency, no eviction."""

    name = "performance"
    Params = BaselineParams
    freq_mode = "max"


class PowersavePolicy(_DrBase):
    """Baseline of ``dr``: its admission, every job at the lowest frequency, no eviction."""

    name = "powersave"
    Params = BaselineParams
    freq_mode = "min"
