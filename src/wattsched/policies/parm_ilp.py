"""The PARM integer linear program of Sarood et al. 2014 (Fig. 2), on OR-Tools CP-SAT.

The solver core of the ``parm`` scheduler (issue 30, deliverable 3): given
the pending and running jobs of an overprovisioned machine (``N`` nodes, a
power budget ``W_max``, a set of CPU power levels), choose which pending jobs
start and, for every job started or running, its node count ``n`` and the CPU
power cap ``p`` of its nodes. Not a registered policy yet: a policy builds a
:class:`ParmInstance` from its snapshot, calls :func:`solve` and turns the
:class:`ParmSolution` into a plan.

The model
---------
One binary ``x[j, n, p]`` per job ``j``, candidate node count ``n`` and CPU
level ``p`` (below). Maximise Eq. 1, ``Σ w_j s_jnp x_jnp``, subject to

* Eq. 2: at most one combination per pending job (one chosen: the job starts);
* Eq. 3: exactly one per running job (it keeps running, maybe on other
  resources);
* Eq. 4: ``Σ n x <= N``;
* Eq. 5: ``Σ n (W_base + W_mem + p) x <= W_max``: per node the base power, the
  memory power (capped at a fixed value, 18 W in §VI) and the CPU level, each
  counted at its cap as the paper counts them (its ``W_base`` of Eq. 5 is
  "everything other than CPU and memory"; the memory's 18 W is added here
  explicitly);
* Eq. 6 (``noSE``, and ``wSE`` for a job reshaped less than ``f_se`` ago): a
  running job keeps its node count. It is applied by giving the job only its
  current node count as candidate, which is the same constraint.

Versions (Table II): ``noMM`` gives every job one node count, its request
(the CPU level is still free; the paper's experiments used the moldable
minimum instead, §VI-G: give ``requested_nodes = min_nodes`` for that);
``noSE`` lets a pending job take any count of its range and keeps running
jobs' counts; ``wSE`` also lets a running job change its count.

Speedup (Eq. 7) and weight (Eq. 8)
----------------------------------
``s_jnp = t_j(n0, p0) / t_j(n, p)`` with ``t_j`` the job's PASS model
(:class:`~wattsched.model.scaling.PassModel`), ``p0`` the lowest of the job's
levels and ``n0`` the least node count of the version's node set *before*
Eq. 6 (``noMM``: the request; ``noSE``, ``wSE``: ``min_nodes``), so a running
job's speedups are on the same base as when it was pending.

``w_j = (t_rem + (t_now - t_a))^α``: Eq. 8 prints the arrival time as
``t_j^α``, a typo for ``t_j^a`` (Table I). ``t_rem`` is ``t_j(n0, p0)`` for a
pending job and ``(1 - fraction_done) t_j(n0, p0)`` for a running one (the
caller tracks the fraction of work done, as §IV describes). A wait below zero
(a submit time after ``now``) counts as zero.

Reshaping (§VII-A, ``wSE`` only)
--------------------------------
A running job may change its node count only if it was last reshaped at least
``f_se_s`` (500 s) ago or never (``last_reshape_s=None``; a caller that wants
the start counted passes the start time). The cost of a reshape from ``n_f``
to ``n_t`` nodes is ``t_se = t_b + t_c``:

* boot time (Eq. 21) for an expansion, ``t_b = 0.01904 (n_t - n_f) + 72.73``
  s; a shrink boots nothing (``t_b = 0``);
* data transfer (Eq. 20), the job's memory ``m_j`` (``memory_mb``) moved over
  a cuboid's bisection at ``link_mb_s`` per link: expansion
  ``(m/n_f - m/n_t) n_f / (2 b n_f^(2/3))``, shrink
  ``(m/n_f)(n_f - n_t) / (2 b n_t^(2/3))``. Traces give no ``m_j``: the
  default 0 MB leaves only the boot time; ``link_mb_s`` defaults to 425 MB/s,
  a Blue Gene/P torus link.

The paper charges ``2 t_se^max`` (the largest ``t_se`` of the decision) to
every reshaped job after the decision; that coupling is not linear, so the
objective charges each reshape combination its own ``2 t_se``: with
``r = 1 - fraction_done``, ``s = r t(n0, p0) / (r t(n, p) + 2 t_se)``, which is
Eq. 7 when ``t_se = 0``. A reshape that gains less than it costs is thus not
chosen; the caller charges ``2 max t_se`` (:attr:`ParmSolution.reshape_charge_s`).

Candidates
----------
* Node counts: all of ``min_nodes..max_nodes`` when there are at most
  ``max_node_counts`` (8, the paper's ``|N_j|``, §VI-E) of them, otherwise
  that many spread evenly between them (both ends included, rounded); a
  running job's current count is added.
* CPU levels: the instance's levels at or above the job's ``p_l`` (below it
  the CPU meets the cap only by throttling, outside the model; see
  :meth:`PassModel.below_floor`), and of those above ``p_h``, where the job
  runs no faster, only the lowest (the others take more power for the same
  speedup and are never better; ``prune_dominated=False`` keeps them). A job
  left with no level is an error.

Integer scaling
---------------
CP-SAT takes integer coefficients. Objective: each term ``w s`` is divided by
the largest term of the instance (in logarithms, so a large ``α`` does not
overflow), times :data:`OBJ_SCALE` (10^6), rounded, at least 1 (starting a
job is never worth nothing); the rounding is at most 5·10^-7 of the largest
term per job. Power: centiwatts (:data:`POWER_SCALE`), each combination's
power rounded up and the budget down, so an integer-feasible answer is
within ``W_max`` in watts. Node counts are integers already.

Search: ``workers`` search workers (1, the default, is deterministic) with
``seed``; ``time_limit_s`` is CP-SAT's deterministic time unless
``wall_clock`` is set (as ``dec`` does). A previous solution
(:meth:`ParmSolution.as_hint`) is given as a hint: each job it names gets its
combination hinted (a combination no longer among the candidates is
skipped), and pending jobs it does not name are hinted not to start.
Without one the search starts from a greedy plan: running jobs on their
least power, then combinations in order of value (``w s``) per share of the
nodes and power left, then each job upgraded while it fits.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from wattsched.errors import PolicyError
from wattsched.model.scaling import PassModel

try:
    _FOUND = importlib.util.find_spec("ortools.sat.python.cp_model") is not None
except ImportError:  # pragma: no cover
    _FOUND = False
if not _FOUND:  # pragma: no cover - the registry reports it as "parm needs ortools"
    raise ImportError("the PARM ILP needs OR-Tools: pip install 'wattsched[cp]'")

log = logging.getLogger(__name__)

VERSIONS = ("noMM", "noSE", "wSE")
"""PARM's versions (Table II)."""

OBJ_SCALE = 1_000_000
"""The largest objective term ``w s`` of an instance counts as this many units; the others in proportion."""

POWER_SCALE = 100
"""Power in the model is in units of 1 / POWER_SCALE W (centiwatts)."""

BOOT_S_PER_NODE = 0.01904
BOOT_S_FIXED = 72.73
"""Eq. 21: boot time of an expansion, ``0.01904 (n_t - n_f) + 72.73`` s (Intrepid's)."""


@dataclass(frozen=True, slots=True)
class PendingJob:
    """A job in the pending queue.

    ``model`` is its PASS model (run time on ``n`` nodes at CPU cap ``p``);
    ``min_nodes..max_nodes`` its moldable range, ``requested_nodes`` the
    count ``noMM`` gives it; ``submit_s`` its arrival (Eq. 8's ``t_a``).
    """

    id: int
    model: PassModel
    min_nodes: int
    max_nodes: int
    requested_nodes: int
    submit_s: float


@dataclass(frozen=True, slots=True)
class RunningJob:
    """A running job: a pending job's fields plus its current allocation.

    ``nodes`` and ``cpu_w`` are its current node count and CPU level;
    ``fraction_done`` the fraction of its work done (``[0, 1)``, for Eq. 8's
    remaining time and the reshape cost); ``last_reshape_s`` when its node
    count last changed (None: never, so ``wSE`` may reshape it now);
    ``memory_mb`` its memory, moved when it is reshaped (Eq. 20).
    """

    id: int
    model: PassModel
    min_nodes: int
    max_nodes: int
    requested_nodes: int
    submit_s: float
    nodes: int
    cpu_w: float
    fraction_done: float = 0.0
    last_reshape_s: float | None = None
    memory_mb: float = 0.0


@dataclass(frozen=True, slots=True)
class Assignment:
    """A node count and CPU level for one job (a hint's entries)."""

    nodes: int
    cpu_w: float


@dataclass(frozen=True)
class ParmInstance:
    """One decision of PARM: the jobs, the machine and the solver's settings.

    ``total_nodes`` is ``N``, ``budget_w`` is ``W_max``, ``levels_w`` the CPU
    power levels ``P`` (W), ``base_w`` and ``mem_w`` the per-node base and
    memory power (38 W and 18 W in §VI), ``alpha`` Eq. 8's exponent.

    ``idle_w`` is what a node no job is given draws, ``0`` in the paper's
    Eq. 5, which counts allocated nodes only. With ``idle_w > 0`` every one
    of the ``N`` nodes is counted at ``idle_w`` and a node given to a job at
    ``base_w + mem_w + p - idle_w`` more, so the whole machine, idle nodes
    included, stays within ``W_max`` (Eq. 5 becomes
    ``Σ n (W_base + W_mem + p - idle_w) x <= W_max - N idle_w``).

    ``short_budget`` says what happens when ``W_max`` is below the least
    power the running jobs need (a cap lowered under them): ``"error"``
    raises :class:`~wattsched.errors.PolicyError`; ``"least"`` runs every
    running job on its least-power combination, starts nothing, and says so
    in :attr:`ParmSolution.note`. See the module docstring for the rest.
    """

    now_s: float
    pending: tuple[PendingJob, ...]
    running: tuple[RunningJob, ...]
    total_nodes: int
    budget_w: float
    levels_w: tuple[float, ...]
    base_w: float = 38.0
    mem_w: float = 18.0
    alpha: float = 0.0
    version: str = "wSE"
    time_limit_s: float = 1.0
    wall_clock: bool = False
    workers: int = 1
    seed: int = 0
    hint: Mapping[int, Assignment] | None = None
    max_node_counts: int = 8
    prune_dominated: bool = True
    f_se_s: float = 500.0
    link_mb_s: float = 425.0
    idle_w: float = 0.0
    short_budget: str = "error"


@dataclass(frozen=True, slots=True)
class Combo:
    """One resource combination of a job: its node count, CPU level, speedup (Eq. 7), power and reshape cost."""

    nodes: int
    cpu_w: float
    speedup: float
    power_w: float
    reshape_s: float = 0.0


@dataclass(frozen=True, slots=True)
class JobCombos:
    """A job's candidate combinations and its weight (Eq. 8, as ``log w``)."""

    id: int
    running: bool
    log_weight: float
    combos: tuple[Combo, ...]

    @property
    def weight(self) -> float:
        """``w_j`` (``inf`` past 10^308: the solver works on ``log w``)."""
        return math.exp(self.log_weight) if self.log_weight < 709.0 else math.inf


@dataclass(frozen=True, slots=True)
class Choice:
    """What the solver chose for one job."""

    nodes: int
    cpu_w: float
    speedup: float
    weight: float
    power_w: float
    reshape_s: float = 0.0


@dataclass(frozen=True)
class ParmSolution:
    """The answer: a choice per job started or running, and how the search went.

    ``status`` is CP-SAT's (``OPTIMAL``, ``FEASIBLE``, ``UNKNOWN``, ...);
    ``objective`` and ``best_bound`` are Eq. 1's value of the choices and the
    solver's bound on it (in Eq. 1's units, from the scaled integers; ``inf``
    only if ``w^α`` passes 10^308), ``gap`` the relative gap
    ``(bound - objective) / bound`` of the integer model, ``hit_time_limit``
    whether the search stopped at its limit. Without a solution (``UNKNOWN``)
    the choices are a fallback, the better of the hint (if given and
    feasible, completed by the least-power combination of running jobs it does
    not name) and the greedy plan the search starts from (``note`` says
    which).
    """

    status: str
    choices: dict[int, Choice]
    objective: float
    best_bound: float
    gap: float
    hit_time_limit: bool
    wall_time_s: float
    variables: int
    hint_jobs: int = 0
    note: str = ""
    running_ids: frozenset[int] = field(default_factory=frozenset)
    previous_nodes: Mapping[int, int] = field(default_factory=dict)

    @property
    def started(self) -> list[int]:
        """Pending jobs the solution starts."""
        return sorted(j for j in self.choices if j not in self.running_ids)

    @property
    def reshaped(self) -> list[int]:
        """Running jobs whose node count changes."""
        return sorted(j for j in self.running_ids if j in self.choices
                      and self.choices[j].nodes != self.previous_nodes.get(j))

    @property
    def reshape_charge_s(self) -> float:
        """The paper's charge to every reshaped job: ``2 max t_se`` over the reshaped jobs (0 if none)."""
        return 2.0 * max((self.choices[j].reshape_s for j in self.reshaped), default=0.0)

    def nodes_used(self) -> int:
        return sum(c.nodes for c in self.choices.values())

    def power_w(self) -> float:
        return sum(c.power_w for c in self.choices.values())

    def as_hint(self) -> dict[int, Assignment]:
        """The choices as a hint for the next decision."""
        return {j: Assignment(c.nodes, c.cpu_w) for j, c in self.choices.items()}


# ---------------------------------------------------------------------------------------------------------- candidates


def node_counts(lo: int, hi: int, k: int = 8) -> list[int]:
    """Candidate node counts of a range: all of ``lo..hi`` if at most ``k``, else ``k`` spread evenly (ends kept).

    >>> node_counts(4, 9), node_counts(10, 80), node_counts(1, 3, 1)
    ([4, 5, 6, 7, 8, 9], [10, 20, 30, 40, 50, 60, 70, 80], [1])
    >>> node_counts(1, 10)
    [1, 2, 4, 5, 6, 7, 9, 10]
    """
    if hi - lo + 1 <= k:
        return list(range(lo, hi + 1))
    if k == 1:
        return [lo]
    return sorted({math.floor(lo + i * (hi - lo) / (k - 1) + 0.5) for i in range(k)})


def job_levels(model: PassModel, levels: tuple[float, ...], prune: bool = True) -> list[float]:
    """The CPU levels a job may get: those at or above its ``p_l``; above ``p_h`` only the lowest if ``prune``.

    >>> from wattsched.model.scaling import PassModel
    >>> m = PassModel(a=1.54, b=10.13, c=13.5, p_l=32, p_h=37, beta=0.08, A=64, sigma=0.5, T1=1e4)
    >>> job_levels(m, (30, 33, 36, 44, 50, 60)), job_levels(m, (30, 33, 36, 44, 50, 60), prune=False)
    ([33, 36, 44], [33, 36, 44, 50, 60])
    """
    ok = sorted(p for p in levels if not model.below_floor(p))
    if not prune:
        return ok
    above = [p for p in ok if p >= model.p_h]
    return [p for p in ok if p < model.p_h] + above[:1]


def reshape_seconds(n_from: int, n_to: int, memory_mb: float = 0.0, link_mb_s: float = 425.0) -> float:
    """``t_se = t_b + t_c`` of reshaping a job from ``n_from`` to ``n_to`` nodes (Eqs. 20-21; 0 if unchanged).

    >>> reshape_seconds(100, 100), round(reshape_seconds(100, 200), 3), reshape_seconds(200, 100)
    (0.0, 74.634, 0.0)
    >>> round(reshape_seconds(8, 64, memory_mb=8000, link_mb_s=100), 3)  # 72.73 + 1.066 boot + 8.75 data
    82.546
    """
    if n_to == n_from:
        return 0.0
    m, b = memory_mb, link_mb_s
    if n_to > n_from:
        t_b = BOOT_S_PER_NODE * (n_to - n_from) + BOOT_S_FIXED
        t_c = (m / n_from - m / n_to) * n_from / (2.0 * b * n_from ** (2.0 / 3.0)) if m > 0 else 0.0
        return t_b + t_c
    return (m / n_from) * (n_from - n_to) / (2.0 * b * n_to ** (2.0 / 3.0)) if m > 0 else 0.0


def _check(inst: ParmInstance) -> None:
    if inst.version not in VERSIONS:
        raise PolicyError(f"version must be one of {', '.join(VERSIONS)}, got {inst.version!r}")
    if not inst.levels_w:
        raise PolicyError("levels_w is empty: give at least one CPU power level in W, e.g. (30, 33, 36, 44, 50, 60)")
    bad = [p for p in inst.levels_w if not (isinstance(p, (int, float)) and math.isfinite(p) and p > 0)]
    if bad:
        raise PolicyError(f"levels_w must be positive numbers of watts, got {bad[0]!r}")
    if inst.total_nodes < 1:
        raise PolicyError(f"total_nodes (N) must be >= 1, got {inst.total_nodes}")
    if not (math.isfinite(inst.budget_w) and inst.budget_w > 0):
        raise PolicyError(f"budget_w (W_max) must be a positive number of watts, got {inst.budget_w!r}")
    for name in ("base_w", "mem_w", "alpha", "idle_w"):
        v = getattr(inst, name)
        if not (math.isfinite(v) and v >= 0):
            raise PolicyError(f"{name} must be a finite number >= 0, got {v!r}")
    if inst.idle_w > inst.base_w + inst.mem_w + min(inst.levels_w):
        raise PolicyError(f"idle_w={inst.idle_w:g} W is above the least a node given to a job draws, base_w + mem_w + "
                          f"the lowest level = {inst.base_w + inst.mem_w + min(inst.levels_w):g} W")
    if inst.total_nodes * inst.idle_w >= inst.budget_w and inst.short_budget == "error":
        raise PolicyError(f"budget_w={inst.budget_w:g} W is not above the {inst.total_nodes} nodes' idle power "
                          f"({inst.total_nodes * inst.idle_w:g} W at idle_w={inst.idle_w:g} W)")
    if inst.short_budget not in ("error", "least"):
        raise PolicyError(f"short_budget must be 'error' or 'least', got {inst.short_budget!r}")
    if not inst.time_limit_s > 0:
        raise PolicyError(f"time_limit_s must be > 0, got {inst.time_limit_s!r}")
    if inst.max_node_counts < 1 or inst.workers < 1:
        raise PolicyError("max_node_counts and workers must be >= 1, got "
                          f"{inst.max_node_counts} and {inst.workers}")
    if not inst.link_mb_s > 0 or not inst.f_se_s >= 0:
        raise PolicyError(f"link_mb_s must be > 0 and f_se_s >= 0, got {inst.link_mb_s!r} and {inst.f_se_s!r}")
    seen: set[int] = set()
    for j in (*inst.pending, *inst.running):
        where = f"{'running' if isinstance(j, RunningJob) else 'pending'} job {j.id}"
        if j.id in seen:
            raise PolicyError(f"{where}: job id given twice")
        seen.add(j.id)
        probs = j.model.problems()
        if probs:
            raise PolicyError(f"{where}: bad PASS model: {'; '.join(probs)}")
        if not 1 <= j.min_nodes <= j.max_nodes:
            raise PolicyError(f"{where}: need 1 <= min_nodes <= max_nodes, got {j.min_nodes}..{j.max_nodes}")
        if not j.min_nodes <= j.requested_nodes <= j.max_nodes:
            raise PolicyError(f"{where}: requested_nodes={j.requested_nodes} is outside min_nodes..max_nodes "
                              f"({j.min_nodes}..{j.max_nodes})")
        least = j.requested_nodes if inst.version == "noMM" else j.min_nodes
        if isinstance(j, PendingJob) and least > inst.total_nodes:
            raise PolicyError(f"{where} needs at least {least} nodes in {inst.version}, more than N={inst.total_nodes}")
        if isinstance(j, RunningJob):
            if j.nodes < 1:
                raise PolicyError(f"{where}: nodes must be >= 1, got {j.nodes}")
            if not 0 <= j.fraction_done < 1:
                raise PolicyError(f"{where}: fraction_done must be in [0, 1), got {j.fraction_done!r}")
            if j.memory_mb < 0:
                raise PolicyError(f"{where}: memory_mb must be >= 0, got {j.memory_mb!r}")


def _may_reshape(inst: ParmInstance, j: RunningJob) -> bool:
    return inst.version == "wSE" and (j.last_reshape_s is None or inst.now_s - j.last_reshape_s >= inst.f_se_s)


def combinations(inst: ParmInstance) -> list[JobCombos]:
    """Every job's candidate combinations with Eq. 7's speedups and Eq. 8's weight, pending jobs first.

    Checks the instance (:class:`~wattsched.errors.PolicyError` naming the
    job or field at fault).
    """
    _check(inst)
    out = []
    for j in (*inst.pending, *inst.running):
        running = isinstance(j, RunningJob)
        m = j.model
        levels = job_levels(m, tuple(inst.levels_w), inst.prune_dominated)
        if not levels:
            raise PolicyError(f"{'running' if running else 'pending'} job {j.id}: no CPU level at or above its "
                              f"p_l={m.p_l:g} W among levels_w={tuple(inst.levels_w)}")
        n0 = j.requested_nodes if inst.version == "noMM" else j.min_nodes
        p0 = levels[0]
        t0 = float(m.time(n0, p0))
        if not running:
            counts = [j.requested_nodes] if inst.version == "noMM" else node_counts(
                j.min_nodes, j.max_nodes, inst.max_node_counts)
            counts = [n for n in counts if n <= inst.total_nodes]
            rem = 1.0
        else:
            counts = [j.nodes]
            if _may_reshape(inst, j):
                counts = sorted({j.nodes, *node_counts(j.min_nodes, j.max_nodes, inst.max_node_counts)})
                counts = [n for n in counts if n <= inst.total_nodes or n == j.nodes]
            rem = 1.0 - j.fraction_done
        wait = max(0.0, inst.now_s - j.submit_s)
        log_w = inst.alpha * math.log(rem * t0 + wait) if inst.alpha > 0 else 0.0
        combos = []
        per_node = inst.base_w + inst.mem_w - inst.idle_w
        times = _unit_times(dataclasses.replace(m, T1=1.0), tuple(counts), tuple(levels)) * m.T1
        for n, row in zip(counts, times.tolist(), strict=True):
            t_se = reshape_seconds(j.nodes, n, j.memory_mb, inst.link_mb_s) if running else 0.0
            for p, t in zip(levels, row, strict=True):
                s = t0 / t if t_se == 0 else rem * t0 / (rem * t + 2.0 * t_se)
                combos.append(Combo(n, float(p), s, n * (per_node + p), t_se))
        out.append(JobCombos(j.id, running, log_w, tuple(combos)))
    return out


@functools.lru_cache(maxsize=4096)
def _unit_times(m: PassModel, counts: tuple[int, ...], levels: tuple[float, ...]) -> np.ndarray:
    """Run times of a model with ``T1 = 1`` on ``counts`` x ``levels`` (PASS times scale with ``T1``: every
    branch of Downey's model is ``T1`` times a function of ``n``), kept for the next decision."""
    out = np.asarray(m.time(np.asarray(counts, dtype=float)[:, None], np.asarray(levels, dtype=float)[None, :]))
    out.setflags(write=False)
    return out


def _power_units(w: float) -> int:
    return math.ceil(w * POWER_SCALE - 1e-9)


def _greedy(jobs: list[JobCombos], least: dict[int, int], values: list[list[float]], powers: list[list[int]],
            n_total: int, budget: int) -> dict[int, int]:
    """A feasible plan by density: running jobs on their least power, then (job, combination) pairs in order of
    value per share of the nodes and power left, each job at most once; then each chosen job upgraded to its
    most valuable combination that still fits. The search's starting point when no hint is given."""
    picks = dict(least)
    rows = {jc.id: k for k, jc in enumerate(jobs)}
    nodes = sum(jobs[rows[j]].combos[i].nodes for j, i in picks.items())
    power = sum(powers[rows[j]][i] for j, i in picks.items())
    room_n, room_p = max(1, n_total - nodes), max(1, budget - power)
    order = sorted(((values[k][i] / (c.nodes / room_n + powers[k][i] / room_p), k, i)
                    for k, jc in enumerate(jobs) if not jc.running for i, c in enumerate(jc.combos)), reverse=True)
    for _, k, i in order:
        jc = jobs[k]
        if jc.id in picks:
            continue
        c = jc.combos[i]
        if nodes + c.nodes <= n_total and power + powers[k][i] <= budget:
            picks[jc.id] = i
            nodes += c.nodes
            power += powers[k][i]
    for j, i in list(picks.items()):
        k = rows[j]
        c0 = jobs[k].combos[i]
        for i2 in sorted(range(len(jobs[k].combos)), key=lambda x: -values[k][x]):
            if values[k][i2] <= values[k][i]:
                break
            c2 = jobs[k].combos[i2]
            if (nodes - c0.nodes + c2.nodes <= n_total
                    and power - powers[k][i] + powers[k][i2] <= budget):
                nodes += c2.nodes - c0.nodes
                power += powers[k][i2] - powers[k][i]
                picks[j] = i2
                break
    return picks


# ------------------------------------------------------------------------------------------------------------- solve


def solve(inst: ParmInstance) -> ParmSolution:
    """Solve the ILP of Fig. 2 for one decision (see the module docstring)."""
    from ortools.sat.python import cp_model

    jobs = combinations(inst)
    budget = math.floor((inst.budget_w - inst.total_nodes * inst.idle_w) * POWER_SCALE + 1e-9)
    least = {jc.id: min(range(len(jc.combos)), key=lambda i: (jc.combos[i].power_w, jc.combos[i].nodes))
             for jc in jobs if jc.running}
    run_jobs = [jc for jc in jobs if jc.running]
    need_nodes = sum(jc.combos[least[jc.id]].nodes for jc in run_jobs)
    need_power = sum(_power_units(jc.combos[least[jc.id]].power_w) for jc in run_jobs)
    if need_nodes > inst.total_nodes:
        raise PolicyError(f"the running jobs need at least {need_nodes} nodes, more than N={inst.total_nodes}")
    short = ""
    if need_power > budget and inst.short_budget == "least":
        short = (f"budget_w={inst.budget_w:g} W is below the least power the running jobs need "
                 f"({need_power / POWER_SCALE + inst.total_nodes * inst.idle_w:g} W): they run on their "
                 "least power and nothing starts")
        budget = need_power
        log.info("parm: %s", short)
    elif need_power > budget:
        least_w = need_power / POWER_SCALE + inst.total_nodes * inst.idle_w
        raise PolicyError(
            f"budget_w={inst.budget_w:g} W is below the least power the running jobs need, {least_w:g} W (their "
            "node counts times base_w + mem_w + their lowest CPU level, and idle_w for every other node); "
            "raise budget_w or lower base_w, mem_w or the levels")

    top = max((jc.log_weight + math.log(c.speedup) for jc in jobs for c in jc.combos), default=0.0)
    m = cp_model.CpModel()
    xs: list[list] = []
    all_x, node_coef, power_coef, obj_coef = [], [], [], []
    values = [[math.exp(jc.log_weight + math.log(c.speedup) - top) for c in jc.combos] for jc in jobs]
    powers = [[_power_units(c.power_w) for c in jc.combos] for jc in jobs]
    for jc, vals, pws in zip(jobs, values, powers, strict=True):
        row = [m.new_bool_var("") for _ in jc.combos]
        xs.append(row)
        if jc.running:
            m.add_exactly_one(row)              # Eq. 3
        else:
            m.add_at_most_one(row)              # Eq. 2
        all_x.extend(row)
        node_coef.extend(c.nodes for c in jc.combos)
        power_coef.extend(pws)
        obj_coef.extend(max(1, round(OBJ_SCALE * v)) for v in vals)
    if all_x:
        m.add(cp_model.LinearExpr.weighted_sum(all_x, node_coef) <= inst.total_nodes)   # Eq. 4
        m.add(cp_model.LinearExpr.weighted_sum(all_x, power_coef) <= budget)            # Eq. 5
        m.maximize(cp_model.LinearExpr.weighted_sum(all_x, obj_coef))                  # Eq. 1

    greedy = _greedy(jobs, least, values, powers, inst.total_nodes, budget)
    hint_jobs = 0
    hinted: dict[int, int] | None = None
    if inst.hint is None:
        for jc, row in zip(jobs, xs, strict=True):
            for i, x in enumerate(row):
                m.add_hint(x, greedy.get(jc.id) == i)
    else:
        hinted = {}
        for jc, row in zip(jobs, xs, strict=True):
            a = inst.hint.get(jc.id)
            at = None if a is None else next(
                (i for i, c in enumerate(jc.combos) if c.nodes == a.nodes and abs(c.cpu_w - a.cpu_w) < 1e-9), None)
            if at is None and jc.running:
                hinted[jc.id] = least[jc.id]
                continue
            for i, x in enumerate(row):
                m.add_hint(x, i == at)
            if at is not None:
                hint_jobs += 1
                hinted[jc.id] = at
        by_id0 = {jc.id: jc for jc in jobs}
        if (sum(by_id0[j].combos[i].nodes for j, i in hinted.items()) > inst.total_nodes
                or sum(_power_units(by_id0[j].combos[i].power_w) for j, i in hinted.items()) > budget):
            hinted = None  # the hint (completed) breaks Eq. 4 or 5: no fallback to it

    solver = cp_model.CpSolver()
    solver.parameters.num_search_workers = inst.workers
    solver.parameters.random_seed = inst.seed
    # Presolve tuned to this model (two linear constraints over at-most-ones): the overlap search between them
    # and the at-most-ones took more than a second of deterministic time on 200 jobs x 48 combinations and
    # found nothing; symmetry, probing and presolve rounds beyond the first did not pay either
    # (benchmarks/parm_solver.py).
    solver.parameters.find_big_linear_overlap = False
    solver.parameters.symmetry_level = 0
    solver.parameters.cp_model_probing_level = 0
    solver.parameters.max_presolve_iterations = 1
    if inst.wall_clock:
        solver.parameters.max_time_in_seconds = inst.time_limit_s
    else:
        solver.parameters.max_deterministic_time = inst.time_limit_s
    status = solver.solve(m)
    name = solver.status_name(status)
    running_ids = frozenset(jc.id for jc in run_jobs)
    previous = {j.id: j.nodes for j in inst.running}
    n_vars = len(all_x)
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        # the variables are the model's first ones, in the order of all_x: read the solution vector once
        values_now = np.fromiter(solver.response_proto.solution, dtype=np.int64, count=n_vars)
        picks = {}
        at = 0
        for jc in jobs:
            k = len(jc.combos)
            hit = np.flatnonzero(values_now[at:at + k])
            if hit.size:
                picks[jc.id] = int(hit[0])
            at += k
        obj_int = solver.objective_value
        bound_int = solver.best_objective_bound
        gap = (bound_int - obj_int) / bound_int if bound_int > 0 else 0.0
        note = ""
        hit = status == cp_model.FEASIBLE
        if hit:
            note = (f"solver hit its {inst.time_limit_s:g} s limit on {len(jobs)} jobs "
                    f"({n_vars} combinations), gap {gap:.2%}; best solution found kept")
            log.info("parm: %s", note)
    else:
        obj_int = bound_int = math.nan
        gap = math.inf
        hit = status == cp_model.UNKNOWN
        def value(p: dict[int, int]) -> float:
            return math.fsum(values[k][p[jc.id]] for k, jc in enumerate(jobs) if jc.id in p)

        if hinted is not None and value(hinted) >= value(greedy):
            picks = hinted
            kept = "the hint kept (its jobs that are still offered; other running jobs on their least power)"
        else:
            picks = greedy
            kept = "the greedy plan kept (by value per share of nodes and power)"
        note = f"solver found no solution ({name}) within {inst.time_limit_s:g} s on {len(jobs)} jobs; {kept}"
        log.warning("parm: %s", note)
    by_id = {jc.id: jc for jc in jobs}
    choices = {}
    for jid, i in picks.items():
        jc, c = by_id[jid], by_id[jid].combos[i]
        choices[jid] = Choice(c.nodes, c.cpu_w, c.speedup, jc.weight, c.power_w, c.reshape_s)
    objective = math.fsum(by_id[j].weight * c.speedup for j, c in choices.items())
    try:
        scale = math.exp(top) / OBJ_SCALE
        best_bound = bound_int * scale
    except OverflowError:
        best_bound = math.inf
    if short:
        note = f"{short}; {note}" if note else short
    return ParmSolution(name, choices, objective, best_bound, gap, hit, solver.wall_time, n_vars,
                        hint_jobs, note, running_ids, previous)
