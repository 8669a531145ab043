"""PARM: the power-aware resource manager of Sarood et al. 2014, a registered policy (``parm``).

At each decision (an arrival, a job end) the policy builds the ILP of Fig. 2
(:mod:`wattsched.policies.parm_ilp`) from the snapshot, solves it, and turns
the answer into a plan: which pending jobs start, on how many nodes, and the
CPU power cap of every node given to a job, started or running.

The machine
-----------
On an overprovisioned platform (``budget_w``, ``cpu_power_levels_w``,
``base_w``, ``mem_w`` in its file, :attr:`Platform.overprovisioned`) a node
given to a job at CPU level ``p`` counts ``base_w + mem_w + p`` watts and gets
that as its node cap (:class:`~wattsched.model.plan.SetNodeCap`, before the
job's Start); ``W_max`` is the platform's budget, or the cap in force if
lower. A node no job is given draws its idle power, which the paper's Eq. 5
does not count; with ``count_idle`` (the default) the ILP counts it
(``idle_w`` of :class:`~wattsched.policies.parm_ilp.ParmInstance`), so the
machine as a whole stays within ``W_max``. ``count_idle: false`` is the
paper's accounting.

On a platform without CPU levels ``parm`` still works, as a plain packer: one
level, the platform's largest busy power, no caps set, ``W_max`` the cap in
force (none: only nodes limit).

Jobs
----
A job's run time on ``n`` nodes at level ``p`` is its application's PASS
model (:class:`~wattsched.model.scaling.PassModel`, by ``Job.app``; the
packaged Table IV applications) scaled so that its requested time is its run
time on its requested nodes at full CPU power, the way the simulator times it
(4.6 of docs/simulator.md). A job of no known application (or of units) runs
on its requested node count at the highest level, with speedup 1.
``version`` picks the node counts (Table II): ``noMM`` the request,
``noSE`` the job's moldable range ``min_nodes..max_nodes`` at start, ``wSE``
that range again for running malleable jobs, at most once every ``f_se_s``.

Rolling horizon: only the first ``horizon_jobs`` pending jobs (in queue
order) enter the model; the others wait for a later decision ("behind the
jobs PARM considers"). The previous decision's answer is the next one's hint
(the policy state keeps it), and the time limit is CP-SAT's deterministic
time unless ``wall_clock``.

Reshapes (``wSE``): a running job that shrinks gives up its last nodes and
one that grows takes free nodes; the plan lists shrinks first, then node caps,
then growths, then starts, so a shrink's nodes can go to a start of the same
plan. Each reshaped job is charged the paper's ``2 t_se^max`` (§VII-A), as the
:class:`~wattsched.model.plan.Reshape`'s ``overhead_s``. A live cluster that
cannot reshape (``Snapshot.can_reshape`` false) makes ``wSE`` plan as
``noSE``; one that can only shrink (a live Slurm, ``Snapshot.reshape_shrink_only``) gets shrinks only, each
keeping the job's first nodes (Slurm's batch host is the first).
"""

from __future__ import annotations

import dataclasses
import math
from itertools import islice
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from wattsched.errors import PolicyError
from wattsched.model.job import Job
from wattsched.model.plan import Plan, Reason, Reshape, SetNodeCap, Start
from wattsched.model.scaling import PassModel
from wattsched.model.snapshot import Snapshot
from wattsched.model.state import PolicyState
from wattsched.policies import parm_ilp
from wattsched.policies.base import BasePolicy, PolicyTags


class ParmParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    version: Literal["noMM", "noSE", "wSE"] = Field("wSE", description=(
        "PARM's version (Table II): noMM keeps each job's requested node count (CPU level still chosen), noSE "
        "chooses a pending job's node count in its moldable range, wSE also reshapes running malleable jobs."))
    alpha: float = Field(0.0, ge=0, le=10, description=(
        "Eq. 8's exponent: a job's weight is (remaining time + wait)^alpha; 0 maximises the sum of speedups, "
        "larger values favour jobs that have waited (Fig. 6)."))
    time_limit_s: float = Field(1.0, gt=0, description="Solver time limit per decision (s; deterministic time "
                                "unless wall_clock).")
    wall_clock: bool = Field(False, description="Limit wall-clock time instead of CP-SAT's deterministic time.")
    horizon_jobs: int = Field(200, ge=1, description=(
        "Rolling horizon: the pending jobs (in queue order) the ILP considers at one decision."))
    max_node_counts: int = Field(8, ge=1, le=64, description=(
        "Candidate node counts per job (the paper's |N_j|, 8): all of a range this short, else spread evenly."))
    f_se_s: float = Field(500.0, ge=0, description="wSE: least time between two reshapes of a job (s, §VII-A).")
    link_mb_s: float = Field(425.0, gt=0, description=(
        "wSE: bandwidth of one link (MB/s) in the reshape's data-transfer time (Eq. 20); a job's memory is its "
        "mem_per_node_mb times its nodes (0 when the trace gives none: boot time only)."))
    count_idle: bool = Field(True, description=(
        "Count the idle power of nodes no job is given against the budget, so the whole machine stays within "
        "it; false: the paper's Eq. 5, allocated nodes only."))
    workers: int = Field(1, ge=1, description="CP-SAT search workers (1: deterministic).")
    seed: int = Field(0, description="CP-SAT random seed.")


class ParmState(PolicyState):
    """What PARM keeps between decisions: the last answer (the next hint) and when each job was last reshaped."""

    hint: dict[int, tuple[int, float]] = Field(default_factory=dict)
    reshaped_at: dict[int, float] = Field(default_factory=dict)


_FLAT_A = 1.0


def _flat_model(level_w: float, seconds: float) -> PassModel:
    """A model under which a job runs ``seconds`` on any node count at any level: speedup 1, level ``level_w``."""
    return PassModel(a=1.0, b=0.0, c=0.0, p_l=level_w, p_h=level_w, beta=0.0, A=_FLAT_A, sigma=0.0,
                     T1=max(seconds, 1.0))


class ParmPolicy(BasePolicy):
    """PARM's ILP scheduler for overprovisioned machines. Registered as ``parm``."""

    name = "parm"
    Params = ParmParams
    State = ParmState

    def __init__(self, params=None):
        super().__init__(params)
        self._models = None
        self._scaled: dict[tuple[str, float, int], PassModel] = {}
        self._idle = None

    def tags(self) -> PolicyTags:
        return dataclasses.replace(super().tags(), constraints=frozenset({"cap"}))

    # ------------------------------------------------------------------ the machine
    def _pass_models(self):
        if self._models is None:
            from wattsched.scalingmodels import packaged_pass_models

            self._models = packaged_pass_models()
        return self._models

    def _model_of(self, job: Job, over: bool, top_level: float) -> tuple[PassModel, bool]:
        """The job's model in its own seconds, and whether it is a PASS application's (else flat)."""
        model = self._pass_models().get(job.app) if over and job.app and not job.units else None
        seconds = job.walltime_s if job.walltime_s > 0 else 1.0
        if model is None:
            return _flat_model(top_level, seconds), False
        key = (job.app, seconds, job.nodes)
        scaled = self._scaled.get(key)
        if scaled is None:
            model = model.for_request(job.nodes)
            ref = float(model.time(job.nodes, model.p_h))
            scaled = dataclasses.replace(model, T1=model.T1 * seconds / ref)
            if len(self._scaled) > 100_000:
                self._scaled.clear()
            self._scaled[key] = scaled
        return scaled, True

    def _idle_w(self, plat) -> float:
        """The largest idle power of a node of ``plat`` (worked out once per platform: it may have 40,960 nodes)."""
        seen = self._idle
        if seen is None or seen[0] is not plat:
            value = plat.nodes[0].power.idle_w if plat.homogeneous else max(n.power.idle_w for n in plat.nodes)
            seen = self._idle = (plat, value)
        return seen[1]

    # ------------------------------------------------------------------ decide
    def decide(self, snapshot: Snapshot, state: ParmState | None = None) -> Plan:
        p = self.params
        plat = snapshot.platform
        over = plat.overprovisioned
        total = len(snapshot.free_nodes) + sum(len(r.nodes) for r in snapshot.running.values())
        plan = Plan(default_reason="behind the jobs PARM considers (rolling horizon)")
        if total == 0:
            plan.default_reason = "no usable node (all off, down or drained)"
            return plan
        if over:
            levels = tuple(plat.cpu_power_levels_w)
            base, mem = plat.base_w, plat.mem_w
            budget = min(plat.budget_w, snapshot.cap_w)
        else:
            levels = (plat.max_busy_w(),)
            base = mem = 0.0
            cap = snapshot.cap_w
            budget = cap if math.isfinite(cap) else total * levels[0] * 2.0 + 1.0
        idle_w = self._idle_w(plat) if p.count_idle else 0.0
        idle_w = min(idle_w, base + mem + levels[0])
        budget -= (len(plat.nodes) - total) * idle_w  # nodes off, down or drained: at most idle, counted so
        top = levels[-1]
        version = p.version
        reshape_ok = version == "wSE" and snapshot.can_reshape
        shrink_only = snapshot.reshape_shrink_only
        now = snapshot.now_s

        st = state if state is not None else self.init_state()
        pending, pass_jobs = [], set()
        too_big: dict[int, int] = {}
        for job in islice(snapshot.pending.values(), p.horizon_jobs):
            model, is_pass = self._model_of(job, over, top)
            lo = job.min_nodes or job.nodes
            hi = job.max_nodes or job.nodes
            if job.units or not is_pass or version == "noMM":
                lo = hi = job.nodes
            if lo > total:
                too_big[job.id] = lo
                continue
            req = min(max(job.nodes, lo), hi)
            if is_pass:
                pass_jobs.add(job.id)
            pending.append(parm_ilp.PendingJob(job.id, model, lo, hi, req, job.submit_s))
        running = []
        for jid, r in snapshot.running.items():
            job = r.job
            model, is_pass = self._model_of(job, over, top)
            k = len(r.nodes)
            lo = job.min_nodes or job.nodes
            hi = job.max_nodes or job.nodes
            if not (reshape_ok and job.malleable and is_pass and not job.units):
                lo = hi = k
            elif shrink_only:  # a live Slurm shrinks a running job, never grows it
                hi = k
            lo, hi = min(lo, k), max(hi, k)
            cap = snapshot.node_cap_w.get(r.nodes[0]) if r.nodes else None
            cpu = top if cap is None or not over else min(levels, key=lambda x: abs(x - (cap - base - mem)))
            if is_pass:
                pass_jobs.add(jid)
            running.append(parm_ilp.RunningJob(
                jid, model, lo, hi, min(max(job.nodes, lo), hi), job.submit_s, k, cpu,
                min(r.progress(now), 0.999), st.reshaped_at.get(jid),
                float(job.mem_per_node_mb) * k))
        for jid, need in too_big.items():
            plan.reasons[jid] = Reason("needs {} nodes, more than the {} usable", need, total)
        if not pending and not (over and running):
            return plan
        hint = {j: parm_ilp.Assignment(n, c) for j, (n, c) in st.hint.items()} or None
        inst = parm_ilp.ParmInstance(
            now_s=now, pending=tuple(pending), running=tuple(running), total_nodes=total, budget_w=budget,
            levels_w=levels, base_w=base, mem_w=mem, alpha=p.alpha, version="wSE" if reshape_ok else (
                "noMM" if version == "noMM" else "noSE"),
            time_limit_s=p.time_limit_s, wall_clock=p.wall_clock, workers=p.workers, seed=p.seed, hint=hint,
            max_node_counts=p.max_node_counts, f_se_s=p.f_se_s, link_mb_s=p.link_mb_s, idle_w=idle_w,
            short_budget="least")
        sol = parm_ilp.solve(inst)
        self._plan(snapshot, sol, plan, over, base + mem, pass_jobs)
        if state is not None:
            state.hint = {j: (c.nodes, c.cpu_w) for j, c in sol.choices.items()}
            live = snapshot.running
            state.reshaped_at = {j: t for j, t in st.reshaped_at.items() if j in live} | {
                j: now for j in sol.reshaped}
        for job in pending:
            if job.id not in sol.choices and job.id not in plan.reasons:
                plan.reasons[job.id] = Reason("scheduled later by PARM: no node count and CPU power level fits the "
                                              "nodes and power left ({} W budget) better than the jobs it started",
                                              round(budget))
        if sol.note:
            head = next((j.id for j in pending if j.id not in sol.choices), None)
            if head is not None:
                plan.reasons[head] = Reason("scheduled later by PARM ({})", sol.note)
        return plan

    def _plan(self, snapshot: Snapshot, sol, plan: Plan, over: bool, node_w: float, pass_jobs: set[int]) -> None:
        """The solution as actions: shrinks, node caps of running jobs, growths, then starts with their caps."""
        actions = plan.actions
        seen_cap = snapshot.node_cap_w
        pool = list(snapshot.free_nodes)  # decreasing index: take from the end, lowest first

        def caps(nodes, cpu_w):
            if not over:
                return
            value = node_w + cpu_w
            for n in nodes:
                if seen_cap.get(n) != value:
                    actions.append(SetNodeCap(n, value))

        charge = sol.reshape_charge_s
        grows = []
        for jid in sorted(sol.running_ids):
            c = sol.choices.get(jid)
            r = snapshot.running[jid]
            if c is None:
                continue
            k = len(r.nodes)
            if c.nodes < k:
                keep, gone = r.nodes[:c.nodes], r.nodes[c.nodes:]
                actions.append(Reshape(jid, tuple(keep), charge))
                pool.extend(gone)
                pool.sort(reverse=True)
                caps(keep, c.cpu_w)
            elif c.nodes > k:
                grows.append((jid, r, c))
            elif jid in pass_jobs:  # a job of units or of no PASS application keeps the level it started at
                caps(r.nodes, c.cpu_w)
        for jid, r, c in grows:
            extra = tuple(pool[-(c.nodes - len(r.nodes)):])
            del pool[-(c.nodes - len(r.nodes)):]
            caps(r.nodes + extra, c.cpu_w)
            actions.append(Reshape(jid, r.nodes + extra, charge))
        for jid in sol.started:
            c = sol.choices[jid]
            job = snapshot.pending[jid]
            nodes = tuple(pool[-c.nodes:])
            if len(nodes) < c.nodes:  # pragma: no cover - the ILP's Eq. 4 rules it out
                raise PolicyError(f"parm: job {jid} given {c.nodes} nodes, {len(nodes)} free")
            del pool[-c.nodes:]
            if not job.units:
                caps(nodes, c.cpu_w)
            actions.append(Start(jid, nodes))
