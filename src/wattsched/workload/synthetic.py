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

Synthetic jobs carry no power; use :mod:`wattsched.workload.augment` to add it.
Determinism: each of the five aspects (arrivals, nodes, run times,
overestimation, users) has its own stream spawned from ``seed`` through
:class:`numpy.random.SeedSequence`, so the same arguments give the same jobs
and changing, say, the node distribution leaves the arrival times unchanged.
"""

from __future__ import annotations

import math
import operator
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from wattsched.errors import ConfigError
from wattsched.workload.records import CleaningReport, TraceJob, Workload

__all__ = ["ARRIVALS", "ArrivalParams", "DurationDist", "NodesDist", "UsersDist", "generate"]

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

    Returns
    -------
    Workload
        Jobs with ids ``1..n_jobs`` in submission order, status 1, no power.

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
    nodes_dist = nodes_dist or NodesDist()
    duration_dist = duration_dist or DurationDist()
    users = users or UsersDist()
    arrival_params = arrival_params or ArrivalParams()
    lo, hi = nodes_dist.min_nodes, min(nodes_dist.max_nodes or max_nodes, max_nodes)
    if lo > hi:
        raise ConfigError(f"NodesDist.min_nodes={lo} is above the largest allowed size {hi} (max_nodes)")
    if nodes_dist.kind == "power-of-two" and 2 ** math.floor(math.log2(hi)) < lo:
        raise ConfigError(f"no power of two between min_nodes={lo} and {hi}; use kind='log-uniform'")

    r_arr, r_nodes, r_run, r_over, r_user = (
        np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(5)
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
    params = {
        "arrival": arrival, "window_s": repr(float(window_s)), "seed": str(seed), "max_nodes": str(max_nodes),
        "cores_per_node": str(cores_per_node), "arrival_params": arrival_params.model_dump_json(),
        "nodes_dist": nodes_dist.model_dump_json(), "duration_dist": d.model_dump_json(),
        "users": users.model_dump_json(),
    }
    return Workload(
        name=f"synthetic-{arrival}-{n_jobs}jobs-{float(window_s):g}s-seed{seed}",
        jobs=iter(jobs),
        max_procs=max_nodes * cores_per_node,
        max_nodes=max_nodes,
        header=params,
        notes=[f"synthetic workload (Borghesi et al. 2018 §5): {n_jobs} jobs, {arrival} arrivals "
               f"over {float(window_s):g} s, seed {seed}"],
        report=CleaningReport(read=n_jobs, kept=n_jobs),
    )
