"""Seeded synthetic workloads in the manner of Borghesi et al. 2018, §5.

Borghesi et al. build their synthetic instances from distributions fitted to
the Eurora traces and spread the arrivals over a time window ("400 jobs in
15 minutes") following one of three patterns, which :func:`generate` offers:

``uniform``
    Arrival times uniform over ``[0, window_s)``.
``left-skewed``
    The paper's meaning: "a larger fraction of the jobs starts close to the
    window origin". Arrival ``= window_s · B`` with ``B ~ Beta(1, skew)``
    (density decreasing from the origin; ``skew = 1`` is uniform, the default
    3 puts 87.5 % of the jobs in the first half). Note that statisticians
    would call this shape *right*-skewed; the name follows the paper.
``burst``
    "Jobs arrive in groups": ``round(n_jobs / jobs_per_burst)`` bursts start
    at uniform times; each job joins a burst chosen uniformly and arrives
    uniformly within ``burst_width_fraction · window_s`` of its start.

The job features are drawn independently of the arrivals:

* nodes (:class:`NodesDist`): log-uniform between ``min_nodes`` and
  ``max_nodes`` (a fraction rounded to the nearest power of two, as real
  workloads favour them), only powers of two, or uniform;
* run time (:class:`DurationDist`): lognormal with a given median and log
  standard deviation, clipped to ``[min_s, max_s]``; the requested time is the
  run time times an overestimation factor, log-uniform in
  ``[overestimate_min, overestimate_max]`` (``>= 1``), rounded up to a multiple
  of ``walltime_round_s`` -- never below the run time;
* user (:class:`UsersDist`): Zipf-like, user ``k`` (1-based rank) drawn with
  probability proportional to ``k ** -zipf_s``.

* queue (:class:`QueueDist`, optional): the Slurm partition of each job,
  drawn with the queues' probabilities; each queue has an *expected waiting
  time* (``ewt_s``), the priority ``ls`` and ``dec`` order jobs by (pass
  :meth:`QueueDist.ewt_param` to them as ``queue_ewt_s``);
* application class (``app_classes``, optional): ``cpu``, ``memory`` or
  ``mixed`` (or a site's classes) drawn with the given probabilities; it picks
  the job's response to caps (``response=mixed``) and survives the power
  augmentation.

*Hot start* (``hot_start``, §5 of the paper, "HS"): a share of the machine's
nodes is occupied at ``t = 0`` by jobs already running. They are extra jobs
(ids after the instance's), submitted at 0 with ``extra["running_at_start"]``
set: the engine starts them at once on free nodes without asking the policy,
as a machine that was running them before the replay began. Their sizes come
from the node distribution (the last one trimmed to fill the share exactly)
and their remaining run times from the run-time distribution.

*Job units* (``units=True``, §3 and §5 of the paper): each job becomes a job
of units (:attr:`TraceJob.units <wattsched.workload.records.TraceJob>`, see
:mod:`wattsched.model.units`), as Eurora's users asked for resources per node.
The node count drawn above becomes the job's number of units; each unit asks
cores drawn uniformly from ``{1, 2, 4, 8, 16}`` (capped at ``cores_per_node``)
and memory uniform in 1 to 16 GB in whole GB (at most ``mem_per_node_mb``);
by a per-job draw, a quarter of the jobs ask 1 or 2 GPUs per unit, an eighth
1 or 2 MICs per unit, the others neither (never both; every unit of a job asks
the same accelerators). ``procs`` is the units' total cores. Hot-start jobs
get units too (their units count as the nodes they fill). The draws come from
their own stream, so the other aspects are the same with or without units.

*Moldable jobs* (``moldable``, Sarood et al. 2014, §VII-A): a
:class:`~wattsched.workload.moldable.MoldableParams` gives jobs a node range
``[ceil(θ·nodes), nodes]`` and a PASS application by the rule of
:mod:`wattsched.workload.moldable`, drawn per job from ``seed`` and the job's id,
so the other aspects are the same with or without it.

:data:`PRESETS` holds ``borghesi2018``: the instances of the paper on Eurora's
64 nodes (see :func:`preset`).

Synthetic jobs carry no power; use :mod:`wattsched.workload.augment` to add it.
Determinism: each aspect (arrivals, nodes, run times, overestimation, users,
queues, classes, hot start, units) has its own stream spawned from ``seed`` through
:class:`numpy.random.SeedSequence`, so the same arguments give the same jobs
and changing, say, the node distribution leaves the arrival times unchanged;
adding queues, classes, a hot start or units leaves the other aspects unchanged.
"""

from __future__ import annotations

import math
import operator
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from wattsched.errors import ConfigError
from wattsched.model.job import Unit
from wattsched.workload.moldable import MoldableParams
from wattsched.workload.moldable import moldable as make_moldable
from wattsched.workload.records import CleaningReport, TraceJob, Workload

__all__ = ["ARRIVALS", "PRESETS", "ArrivalParams", "DurationDist", "NodesDist", "QueueDist", "UsersDist", "generate",
           "preset"]

ARRIVALS = ("uniform", "left-skewed", "burst")
"""The arrival patterns :func:`generate` knows."""


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ArrivalParams(_Params):
    """Shape parameters of the arrival patterns (each pattern uses its own).

    Attributes
    ----------
    skew
        ``left-skewed``: the ``b`` of ``Beta(1, b)``; the fraction of jobs in
        the first half of the window is ``1 - 0.5 ** skew``.
    jobs_per_burst
        ``burst``: mean number of jobs per burst.
    burst_width_fraction
        ``burst``: length of a burst as a fraction of the window.
    """

    skew: float = Field(3.0, ge=1.0)
    jobs_per_burst: float = Field(50.0, gt=0)
    burst_width_fraction: float = Field(0.02, gt=0, le=1)


class NodesDist(_Params):
    """Distribution of the number of nodes per job.

    Attributes
    ----------
    kind
        ``log-uniform``, ``power-of-two`` (``2**k``, ``k`` uniform over the
        powers of two in range) or ``uniform``.
    min_nodes, max_nodes
        Range; ``max_nodes=None`` is the machine size given to :func:`generate`.
    pow2_fraction
        ``log-uniform`` only: the fraction of jobs rounded (in log scale) to a
        power of two within range.
    """

    kind: Literal["log-uniform", "power-of-two", "uniform"] = "log-uniform"
    min_nodes: int = Field(1, ge=1)
    max_nodes: int | None = Field(None, ge=1)
    pow2_fraction: float = Field(0.5, ge=0, le=1)


class DurationDist(_Params):
    """Run times (lognormal) and requested times (run time × overestimation).

    Attributes
    ----------
    median_s, sigma
        Median and log standard deviation of the lognormal run time.
    min_s, max_s
        Run times are clipped to this range.
    overestimate_min, overestimate_max
        The requested time is the run time times a factor log-uniform in this
        range (both ``>= 1``).
    walltime_round_s
        The requested time is rounded up to a multiple of this (users ask for
        round values); 0 disables rounding.
    """

    median_s: float = Field(900.0, gt=0)
    sigma: float = Field(1.5, ge=0)
    min_s: float = Field(1.0, ge=0)
    max_s: float = Field(86400.0, gt=0)
    overestimate_min: float = Field(1.0, ge=1)
    overestimate_max: float = Field(4.0, ge=1)
    walltime_round_s: float = Field(60.0, ge=0)

    @model_validator(mode="after")
    def _ranges(self) -> DurationDist:
        if self.min_s > self.max_s:
            raise ValueError(f"min_s={self.min_s} is above max_s={self.max_s}")
        if self.overestimate_min > self.overestimate_max:
            raise ValueError(
                f"overestimate_min={self.overestimate_min} is above overestimate_max={self.overestimate_max}"
            )
        return self


class UsersDist(_Params):
    """Zipf-like users: rank ``k`` in ``1..n_users`` has weight ``k ** -zipf_s``.

    Users are named ``prefix`` plus the zero-padded rank (``user01``, ...);
    ``zipf_s = 0`` makes them equally likely.
    """

    n_users: int = Field(20, ge=1)
    zipf_s: float = Field(1.2, ge=0)
    prefix: str = "user"


class Queue(_Params):
    """One queue: its name (the jobs' partition), expected waiting time and share of the jobs."""

    name: str = Field(min_length=1)
    ewt_s: float = Field(gt=0)
    share: float = Field(gt=0)


class QueueDist(_Params):
    """Queues the jobs are submitted to, drawn by ``share`` (shares are normalised).

    >>> q = QueueDist(queues=[Queue(name="debug", ewt_s=1800, share=1), Queue(name="long", ewt_s=86400, share=3)])
    >>> q.ewt_param()
    {'debug': 1800.0, 'long': 86400.0}
    """

    queues: list[Queue] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique(self) -> QueueDist:
        names = [q.name for q in self.queues]
        if len(set(names)) != len(names):
            raise ValueError(f"queue names repeat: {names}")
        return self

    def ewt_param(self) -> dict[str, float]:
        """The ``queue_ewt_s`` parameter of ``ls``/``dec`` for these queues."""
        return {q.name: q.ewt_s for q in self.queues}


# Borghesi et al. 2018 do not list Eurora's queues; the ones below are
# wattsched's assumption in the shape the paper describes (a debug queue with a
# short expected wait, a parallel one, a long one), with the classes' shares
# of augment's defaults. Eurora jobs were mostly small: 1 to 8 nodes,
# log-uniform, powers of two favoured.
PRESETS: dict[str, dict] = {
    "borghesi2018": {
        "max_nodes": 64,
        "cores_per_node": 16,
        "nodes_dist": NodesDist(kind="log-uniform", min_nodes=1, max_nodes=8, pow2_fraction=0.5),
        "duration_dist": DurationDist(median_s=900.0, sigma=1.2, min_s=60.0, max_s=21600.0,
                                      overestimate_min=1.0, overestimate_max=3.0),
        "queues": QueueDist(queues=[Queue(name="debug", ewt_s=1800.0, share=0.3),
                                    Queue(name="parallel", ewt_s=21600.0, share=0.6),
                                    Queue(name="longpar", ewt_s=86400.0, share=0.1)]),
        "app_classes": {"cpu": 0.4, "memory": 0.3, "mixed": 0.3},
    },
}
"""Named sets of :func:`generate` arguments (see :func:`preset`)."""


def preset(name: str) -> dict:
    """The :func:`generate` keyword arguments of preset ``name``.

    >>> sorted(preset("borghesi2018"))
    ['app_classes', 'cores_per_node', 'duration_dist', 'max_nodes', 'nodes_dist', 'queues']
    """
    if name not in PRESETS:
        raise ConfigError(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}")
    return dict(PRESETS[name])


def _arrivals(rng: np.random.Generator, n: int, window_s: float, arrival: str, p: ArrivalParams) -> np.ndarray:
    if arrival == "uniform":
        t = rng.uniform(0.0, window_s, n)
    elif arrival == "left-skewed":
        t = window_s * rng.beta(1.0, p.skew, n)
    else:  # burst
        n_bursts = max(1, round(n / p.jobs_per_burst))
        width_s = p.burst_width_fraction * window_s
        starts = rng.uniform(0.0, window_s - width_s, n_bursts)
        which = rng.integers(0, n_bursts, n)
        t = starts[which] + rng.uniform(0.0, width_s, n)
    # float rounding must not put a job on the window's end
    return np.sort(np.clip(t, 0.0, np.nextafter(window_s, 0.0)), kind="stable")


def _nodes(rng: np.random.Generator, n: int, lo: int, hi: int, d: NodesDist) -> np.ndarray:
    if d.kind == "uniform":
        return rng.integers(lo, hi + 1, n)
    if d.kind == "power-of-two":
        k_lo, k_hi = math.ceil(math.log2(lo)), math.floor(math.log2(hi))
        return 2 ** rng.integers(k_lo, k_hi + 1, n)
    x = np.exp(rng.uniform(math.log(lo), math.log(hi + 1), n))
    nodes = np.clip(np.floor(x), lo, hi).astype(np.int64)
    pow2 = np.clip(2 ** np.rint(np.log2(x)).astype(np.int64), lo, hi)
    return np.where(rng.random(n) < d.pow2_fraction, pow2, nodes)


UNIT_CORES = (1, 2, 4, 8, 16)
"""Cores a generated unit asks, drawn uniformly (capped at the node's cores)."""
UNIT_MAX_MEM_GB = 16
"""Most memory a generated unit asks, in GB (Eurora's nodes had 16 GB)."""
UNIT_GPU_SHARE, UNIT_MIC_SHARE = 0.25, 0.125
"""Shares of generated jobs of units whose units ask GPUs, MICs (1 or 2 each; never both)."""


def _draw_units(rng: np.random.Generator, nodes: list[int], cores_per_node: int,
                mem_per_node_mb: int) -> list[tuple[Unit, ...]]:
    """The units of jobs of ``nodes`` units each (see the module documentation), in one vectorised draw."""
    n, total = len(nodes), sum(nodes)
    cores = np.minimum(rng.choice(np.array(UNIT_CORES), total), cores_per_node)
    mem_gb = rng.integers(1, min(UNIT_MAX_MEM_GB, mem_per_node_mb // 1024) + 1, total)
    kind = rng.random(n)
    count = rng.integers(1, 3, n)
    gpus = np.where(kind < UNIT_GPU_SHARE, count, 0)
    mics = np.where((kind >= UNIT_GPU_SHARE) & (kind < UNIT_GPU_SHARE + UNIT_MIC_SHARE), count, 0)
    cache: dict[tuple[int, int, int, int], Unit] = {}
    out: list[tuple[Unit, ...]] = []
    start = 0
    for k, g, m in zip(nodes, gpus.tolist(), mics.tolist()):
        units = []
        for c, gb in zip(cores[start:start + k].tolist(), mem_gb[start:start + k].tolist()):
            key = (c, g, m, gb)
            u = cache.get(key)
            if u is None:
                u = cache[key] = Unit(c, g, m, gb * 1024)
            units.append(u)
        out.append(tuple(units))
        start += k
    return out


def _as_int(x: object) -> int:
    """``x`` as an int if it is an integer (NumPy ones included, bools not), else -1."""
    if isinstance(x, bool):
        return -1
    try:
        return operator.index(x)
    except TypeError:
        return -1


def generate(
    n_jobs: int,
    *,
    window_s: float,
    arrival: str = "uniform",
    seed: int,
    nodes_dist: NodesDist | None = None,
    duration_dist: DurationDist | None = None,
    users: UsersDist | None = None,
    max_nodes: int = 64,
    cores_per_node: int = 1,
    arrival_params: ArrivalParams | None = None,
    queues: QueueDist | None = None,
    app_classes: dict[str, float] | None = None,
    hot_start: float = 0.0,
    units: bool = False,
    mem_per_node_mb: int = 16384,
    moldable: MoldableParams | None = None,
) -> Workload:
    """Generate a seeded synthetic workload (see the module documentation).

    Parameters
    ----------
    n_jobs
        Number of jobs.
    window_s
        Arrivals fall in ``[0, window_s)``.
    arrival
        ``"uniform"``, ``"left-skewed"`` or ``"burst"``.
    seed
        Seed of :func:`numpy.random.default_rng`; same arguments, same jobs.
    nodes_dist, duration_dist, users, arrival_params
        Distributions; ``None`` uses the defaults of each class.
    max_nodes
        Size of the machine (Eurora had 64 nodes); no job asks for more.
    cores_per_node
        ``procs = nodes * cores_per_node``.
    queues
        Queues (partitions) with expected waiting times; ``None``: no partition.
    app_classes
        Application class probabilities, e.g. ``{"cpu": 0.4, "memory": 0.3,
        "mixed": 0.3}``; ``None``: no class (the augmentation draws one).
    hot_start
        Share of the ``max_nodes`` nodes occupied at ``t = 0`` by jobs already
        running (0 to 1; 0.7 is the paper's HS 70 %).
    units
        Make every job a job of units (see the module documentation); ``procs``
        is then the units' total cores.
    mem_per_node_mb
        Memory of a node, the most a unit asks (with ``units``; default
        Eurora's 16 GB; at least 1024).
    moldable
        Make jobs moldable (node range ``[ceil(θ·nodes), nodes]``) and give
        each a PASS application (``extra["app"]``), see the module
        documentation; ``None`` (the default): rigid jobs without application.

    Returns
    -------
    Workload
        Jobs with ids ``1..n_jobs`` in submission order, status 1, no power;
        with a hot start, the running jobs first (submitted at 0, ids from
        ``n_jobs + 1``).

    Raises
    ------
    ConfigError
        An argument is out of range.

    Examples
    --------
    >>> wl = generate(50, window_s=300, arrival="burst", seed=1)
    >>> jobs = list(wl.jobs)
    >>> len(jobs), all(0 <= j.submit_s < 300 for j in jobs)
    (50, True)
    """
    example = 'e.g. generate(400, window_s=900, arrival="burst", seed=1)'
    if _as_int(n_jobs) < 0:
        raise ConfigError(f"n_jobs must be an integer >= 0, got {n_jobs!r}; {example}")
    n_jobs = _as_int(n_jobs)
    if not (isinstance(window_s, int | float) and math.isfinite(window_s) and window_s > 0):
        raise ConfigError(f"window_s must be a finite number > 0, got {window_s!r}; {example}")
    if arrival not in ARRIVALS:
        raise ConfigError(f"unknown arrival {arrival!r}; use one of {', '.join(ARRIVALS)}; {example}")
    if _as_int(seed) < 0:
        raise ConfigError(f"seed must be an integer >= 0, got {seed!r}; {example}")
    seed = _as_int(seed)
    if max_nodes < 1 or cores_per_node < 1:
        raise ConfigError(f"max_nodes and cores_per_node must be >= 1, got {max_nodes!r} and {cores_per_node!r}")
    if not (isinstance(hot_start, int | float) and 0.0 <= hot_start <= 1.0):
        raise ConfigError(f"hot_start must be a share of the nodes in [0, 1], got {hot_start!r}; e.g. 0.7")
    if not isinstance(units, bool | np.bool_):
        raise ConfigError(f"units must be true or false, got {units!r}")
    if units and not (_as_int(mem_per_node_mb) >= 1024):
        raise ConfigError(f"mem_per_node_mb must be an integer >= 1024 (a unit asks at least 1 GB), "
                          f"got {mem_per_node_mb!r}; e.g. 16384")
    if app_classes is not None:
        bad = {k: v for k, v in app_classes.items() if not (isinstance(v, int | float) and v >= 0)}
        if bad or not app_classes or sum(app_classes.values()) <= 0:
            raise ConfigError(f"app_classes must map class names to probabilities >= 0 with a positive sum, "
                              f"got {app_classes!r}; e.g. {{'cpu': 0.4, 'memory': 0.3, 'mixed': 0.3}}")
    nodes_dist = nodes_dist or NodesDist()
    duration_dist = duration_dist or DurationDist()
    users = users or UsersDist()
    arrival_params = arrival_params or ArrivalParams()
    lo, hi = nodes_dist.min_nodes, min(nodes_dist.max_nodes or max_nodes, max_nodes)
    if lo > hi:
        raise ConfigError(f"NodesDist.min_nodes={lo} is above the largest allowed size {hi} (max_nodes)")
    if nodes_dist.kind == "power-of-two" and 2 ** math.floor(math.log2(hi)) < lo:
        raise ConfigError(f"no power of two between min_nodes={lo} and {hi}; use kind='log-uniform'")

    # spawn(9)'s first five children are spawn(5)'s: instances without queues, classes, a hot start or units
    # are unchanged
    r_arr, r_nodes, r_run, r_over, r_user, r_queue, r_class, r_hot, r_units = (
        np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(9)
    )
    submit = _arrivals(r_arr, n_jobs, float(window_s), arrival, arrival_params)
    nodes = _nodes(r_nodes, n_jobs, lo, hi, nodes_dist)

    d = duration_dist
    runtime = np.clip(r_run.lognormal(math.log(d.median_s), d.sigma, n_jobs), d.min_s, d.max_s)
    factor = np.exp(r_over.uniform(math.log(d.overestimate_min), math.log(d.overestimate_max), n_jobs))
    walltime = runtime * factor
    if d.walltime_round_s > 0:
        walltime = np.ceil(walltime / d.walltime_round_s) * d.walltime_round_s
    walltime = np.maximum(walltime, runtime)  # rounding error must not undercut the run time

    ranks = np.arange(1, users.n_users + 1, dtype=float)
    weights = ranks ** -users.zipf_s
    user_idx = r_user.choice(users.n_users, size=n_jobs, p=weights / weights.sum())
    width = len(str(users.n_users))
    names = [f"{users.prefix}{k:0{width}d}" for k in range(1, users.n_users + 1)]

    jobs = [
        TraceJob(i, t, r, w, n * cores_per_node, n, user=names[u])
        for i, t, r, w, n, u in zip(
            range(1, n_jobs + 1), submit.tolist(), runtime.tolist(), walltime.tolist(), nodes.tolist(),
            user_idx.tolist(),
        )
    ]
    if queues is not None:
        shares = np.array([q.share for q in queues.queues])
        which = r_queue.choice(len(shares), size=n_jobs, p=shares / shares.sum())
        for j, k in zip(jobs, which.tolist()):
            j.partition = queues.queues[k].name
    if app_classes is not None:
        cls_names = list(app_classes)
        probs = np.array([float(app_classes[c]) for c in cls_names])
        which = r_class.choice(len(cls_names), size=n_jobs, p=probs / probs.sum())
        for j, k in zip(jobs, which.tolist()):
            j.app_class = cls_names[k]
    hot = _hot_jobs(r_hot, round(hot_start * max_nodes), n_jobs, lo, hi, nodes_dist, d, cores_per_node, names,
                    weights / weights.sum(), queues, app_classes)
    if units:
        mem_per_node_mb = _as_int(mem_per_node_mb)
        # the instance's units first, then the hot jobs': a hot start leaves the instance's units unchanged
        for group in (jobs, hot):
            for j, us in zip(group, _draw_units(r_units, [j.nodes for j in group], cores_per_node,
                                                mem_per_node_mb)):
                j.units = us
                j.procs = sum(u.cores for u in us)
    jobs = hot + jobs
    if moldable is not None:
        # per job from the seed and its id (wattsched.workload.moldable): the other aspects are unchanged
        jobs = list(make_moldable(jobs, moldable, seed, in_place=True))
    params = {
        "arrival": arrival, "window_s": repr(float(window_s)), "seed": str(seed), "max_nodes": str(max_nodes),
        "cores_per_node": str(cores_per_node), "arrival_params": arrival_params.model_dump_json(),
        "nodes_dist": nodes_dist.model_dump_json(), "duration_dist": d.model_dump_json(),
        "users": users.model_dump_json(),
    }
    if queues is not None:
        params["queues"] = queues.model_dump_json()
    if app_classes is not None:
        params["app_classes"] = repr(dict(app_classes))
    if hot_start:
        params["hot_start"] = repr(float(hot_start))
    if units:
        params["units"] = "true"
        params["mem_per_node_mb"] = str(mem_per_node_mb)
    if moldable is not None:
        params["moldable"] = moldable.model_dump_json()
    return Workload(
        name=f"synthetic-{arrival}-{n_jobs}jobs-{float(window_s):g}s-seed{seed}",
        jobs=iter(jobs),
        max_procs=max_nodes * cores_per_node,
        max_nodes=max_nodes,
        header=params,
        notes=[f"synthetic workload (Borghesi et al. 2018 §5): {n_jobs} jobs, {arrival} arrivals "
               f"over {float(window_s):g} s, seed {seed}"
               + (f", hot start: {len(hot)} jobs running on {sum(j.nodes for j in hot)} of {max_nodes} nodes at 0"
                  if hot and not units else "")
               + (f", hot start: {len(hot)} jobs running with {sum(j.nodes for j in hot)} units "
                  f"(of {max_nodes} nodes) at 0" if hot and units else "")
               + (", jobs of units" if units else "")
               + (f", moldable jobs (fraction {moldable.fraction:g}, θ in [{moldable.theta[0]:g}, "
                  f"{moldable.theta[1]:g}]{', malleable' if moldable.malleable else ''}) with PASS applications"
                  if moldable is not None else "")],
        report=CleaningReport(read=len(jobs), kept=len(jobs)),
    )


def _hot_jobs(rng: np.random.Generator, nodes_to_fill: int, n_jobs: int, lo: int, hi: int, nodes_dist: NodesDist,
              d: DurationDist, cores_per_node: int, names: list[str], user_p: np.ndarray,
              queues: QueueDist | None, app_classes: dict[str, float] | None) -> list[TraceJob]:
    """Jobs running at ``t = 0`` on exactly ``nodes_to_fill`` nodes (see the module documentation)."""
    out: list[TraceJob] = []
    left = nodes_to_fill
    while left > 0:
        n = int(min(_nodes(rng, 1, lo, hi, nodes_dist)[0], left))
        full = float(np.clip(rng.lognormal(math.log(d.median_s), d.sigma), d.min_s, d.max_s))
        # it started before the replay: a uniform part of its run is left, its requested time is the rest of its own
        remaining = max(full * float(rng.uniform(0.05, 1.0)), 1.0)
        walltime = max(remaining * float(np.exp(rng.uniform(math.log(d.overestimate_min),
                                                            math.log(d.overestimate_max)))), remaining)
        job = TraceJob(n_jobs + len(out) + 1, 0.0, remaining, walltime, n * cores_per_node, n,
                       user=names[int(rng.choice(len(names), p=user_p))])
        if queues is not None:
            shares = np.array([q.share for q in queues.queues])
            job.partition = queues.queues[int(rng.choice(len(shares), p=shares / shares.sum()))].name
        if app_classes is not None:
            cls = list(app_classes)
            probs = np.array([float(app_classes[c]) for c in cls])
            job.app_class = cls[int(rng.choice(len(cls), p=probs / probs.sum()))]
        job.extra["running_at_start"] = True
        out.append(job)
        left -= n
    return out
