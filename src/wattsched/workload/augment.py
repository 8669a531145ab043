"""Seeded power augmentation for traces that carry no power.

Most public traces (the Parallel Workloads Archive, ``sacct`` exports) say
nothing about power. :func:`augment` gives every job without ``mean_w`` a
plausible per-node power and an application class, reproducibly, from a seed.

The model
---------
Let ``idle``, ``busy_min`` and ``busy`` be the node model's ``idle_w``,
``busy_min_w`` and ``busy_w`` (:class:`~wattsched.model.platform.NodePowerModel`),
and ``p`` an :class:`AugmentParams`.

Per user (users run similar codes, so power is a property of the user):

* mean node power ``m_u = busy_min + B · (busy - busy_min)`` with
  ``B ~ Beta(p.user_mean_alpha, p.user_mean_beta)``;
* application class ``c_u`` drawn from ``p.class_probs``.

Per job of user ``u``:

* ``mean_w = clip(m_u · (1 + p.job_sigma_rel · Z), idle, busy)``, ``Z ~ N(0, 1)``;
* ``std_w = mean_w · R`` with ``R ~ U(p.std_rel_min, p.std_rel_max)``;
* ``max_w = min(mean_w + p.max_k · std_w, busy)``;
* ``app_class``: with probability ``p.class_switch_prob`` a fresh draw from
  ``p.class_probs`` (which may give ``c_u`` again), otherwise ``c_u``; so the
  fraction of jobs of each class is ``class_probs`` in expectation. A job that
  already has an ``app_class`` keeps it.

Jobs of units (:attr:`TraceJob.units <wattsched.workload.records.TraceJob>`)
get per-unit power, that of a node running the unit alone: with the values
above drawn as for a node, and ``share`` the mean over the job's units of
``min(1, unit.cores / C)`` (``C`` the cores of the reference node,
``cores_per_node``),

* ``mean_w = idle + (mean_w - idle) · share``;
* ``max_w = idle + (max_w - idle) · share``;
* ``std_w = std_w · share``.

With ``p.profile == "ar1"`` (the default) every augmented job then gets a
fluctuating power series around these values (:func:`power_profile`; the job's
``mean_w``, ``max_w`` and ``std_w`` become the series' realised statistics);
``"constant"`` leaves the job at ``mean_w``. The series' normals come from
splitmix64 as below, keyed with ``seed ^ 0x70F11E`` (a stream of their own).

Jobs that already have ``mean_w`` are passed through unchanged (the same
object). GPU power is not augmented (neither for ``gpus_per_node`` nor for
the GPUs of units). Output order is input order.

Determinism
-----------
The values of a job depend only on ``seed``, its user name and its id -- not on
what came before it in the stream, how the stream is chunked or consumed, or
the Python process (Python's :func:`hash` is salted per process and is not used):

* per user: a NumPy :class:`~numpy.random.Generator` on a
  :class:`~numpy.random.Philox` (4x64, counter-based) keyed with
  ``(seed mod 2⁶⁴, stable_hash(user))``, counter 0, where :func:`stable_hash`
  is the first 8 bytes (little-endian) of BLAKE2b of the UTF-8 name; it draws
  ``B`` then the class uniform, once per user (values kept in a dict: memory
  grows with the number of users, not of jobs);
* per job: uniforms from splitmix64 (Steele, Lea, Flood 2014, the generator of
  ``java.util.SplittableRandom``), a counter-based hash, see
  :func:`job_uniforms`: ``u_k = ((splitmix64(base + (k-1)·γ) >> 11) + ½) · 2⁻⁵³``
  for ``k = 1..5``, with ``base = splitmix64(id + splitmix64(seed))``, all
  mod 2⁶⁴ and ``γ = 0x9E3779B97F4A7C15``: ``u_1, u_2`` make ``Z`` (Box-Muller),
  ``u_3`` gives ``R``, ``u_4`` decides a class switch, ``u_5`` draws the
  switched class. Jobs are processed in blocks with NumPy, so no generator
  is created per job. Job ids are taken modulo 2⁶⁴; equal ids get equal draws.

Probability tables are walked in sorted class-name order, so the order of keys
in ``class_probs`` does not matter.
"""

from __future__ import annotations

import hashlib
import math
import operator
from collections.abc import Iterable, Iterator
from dataclasses import fields, replace
from itertools import islice
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from wattsched.errors import ConfigError
from wattsched.model.platform import NodePowerModel, Platform
from wattsched.workload.records import TraceJob, Workload

__all__ = ["AugmentParams", "augment", "augment_workload", "job_uniforms", "power_profile", "reference_cores",
           "splitmix64", "stable_hash"]

_MASK64 = (1 << 64) - 1
_GAMMA = 0x9E3779B97F4A7C15
_M1 = 0xBF58476D1CE4E5B9
_M2 = 0x94D049BB133111EB
_N_UNIFORMS = 5
_BLOCK = 4096
_PROFILE_KEY = 0x70F11E  # mixed into the seed: the power series draw from a stream of their own


class AugmentParams(BaseModel):
    """Parameters of the power augmentation (see the module documentation).

    The defaults are illustrative, not fitted to a machine.

    Attributes
    ----------
    user_mean_alpha, user_mean_beta
        Shape of the Beta distribution placing each user's mean power between
        ``busy_min_w`` and ``busy_w``.
    job_sigma_rel
        Relative standard deviation of a job's mean power around its user's.
    std_rel_min, std_rel_max
        A job's power standard deviation, as a fraction of its mean, is uniform
        in this range.
    max_k
        ``max_w = mean_w + max_k · std_w`` (clipped to ``busy_w``).
    class_probs
        Probability of each application class (they must sum to 1).
    class_switch_prob
        Probability that a job redraws its class instead of taking its user's.
    profile
        ``ar1`` (default): every augmented job gets a seeded power series
        (:func:`power_profiles`); ``constant``: a job draws its ``mean_w`` for
        its whole run.
    step_s, max_steps
        A job of run time ``r`` gets ``clip(ceil(r / step_s), 1, max_steps)``
        equal steps (longer steps for jobs longer than ``max_steps · step_s``).
    step_corr
        Correlation of two consecutive steps of ``step_s`` seconds (AR(1));
        steps of length ``d`` are correlated by ``step_corr ** (d / step_s)``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    user_mean_alpha: float = Field(2.0, gt=0)
    user_mean_beta: float = Field(2.0, gt=0)
    job_sigma_rel: float = Field(0.1, ge=0)
    std_rel_min: float = Field(0.02, ge=0)
    std_rel_max: float = Field(0.10, ge=0)
    max_k: float = Field(2.0, ge=0)
    class_probs: dict[str, float] = Field(default_factory=lambda: {"cpu": 0.4, "memory": 0.3, "mixed": 0.3})
    class_switch_prob: float = Field(0.1, ge=0, le=1)
    profile: Literal["ar1", "constant"] = "ar1"
    step_s: float = Field(1800.0, gt=0, allow_inf_nan=False)
    max_steps: int = Field(3, ge=1, le=1000)
    step_corr: float = Field(0.125, ge=0, lt=1)

    @field_validator("class_probs")
    @classmethod
    def _probs(cls, v: dict[str, float]) -> dict[str, float]:
        if not v:
            raise ValueError("give at least one class, e.g. {'cpu': 1.0}")
        for name, prob in v.items():
            if not name:
                raise ValueError("class names must not be empty")
            if not (math.isfinite(prob) and prob >= 0):
                raise ValueError(f"probability of {name!r} must be >= 0, got {prob!r}")
        total = math.fsum(v.values())
        if abs(total - 1.0) > 1e-6:
            raise ValueError(f"class probabilities must sum to 1, they sum to {total!r}")
        return v

    @model_validator(mode="after")
    def _std_range(self) -> AugmentParams:
        if self.std_rel_min > self.std_rel_max:
            raise ValueError(f"std_rel_min={self.std_rel_min} is above std_rel_max={self.std_rel_max}")
        return self


def splitmix64(x: int) -> int:
    """One step of splitmix64: mix ``x + γ`` into a 64-bit value.

    This is the output of ``SplittableRandom``/``splitmix64.c`` for state ``x``.

    >>> hex(splitmix64(0))
    '0xe220a8397b1dcdaf'
    """
    z = (x + _GAMMA) & _MASK64
    z = ((z ^ (z >> 30)) * _M1) & _MASK64
    z = ((z ^ (z >> 27)) * _M2) & _MASK64
    return z ^ (z >> 31)


def stable_hash(text: str) -> int:
    """A 64-bit hash of a string, the same in every process and on every platform.

    >>> stable_hash("alice") == stable_hash("alice") != stable_hash("bob")
    True
    >>> 0 <= stable_hash("") < 2**64
    True
    """
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little")


def job_uniforms(seed: int, job_id: int, n: int = _N_UNIFORMS) -> list[float]:
    """The ``n`` uniforms in ``(0, 1)`` that :func:`augment` draws for a job (reference version).

    :func:`augment` computes the same numbers with NumPy, a block of jobs at a time.

    >>> u = job_uniforms(1, 42)
    >>> len(u), all(0 < x < 1 for x in u), u == job_uniforms(1, 42) != job_uniforms(2, 42)
    (5, True, True)
    """
    base = splitmix64((job_id + splitmix64(seed & _MASK64)) & _MASK64)
    return [((splitmix64((base + (k - 1) * _GAMMA) & _MASK64) >> 11) + 0.5) * 2.0**-53 for k in range(1, n + 1)]


def _uniforms_block(seed_key: np.uint64, ids: np.ndarray, n: int = _N_UNIFORMS) -> np.ndarray:
    """Vectorized :func:`job_uniforms`: an ``(n, len(ids))`` array."""
    gamma, m1, m2 = np.uint64(_GAMMA), np.uint64(_M1), np.uint64(_M2)
    s30, s27, s31, s11 = np.uint64(30), np.uint64(27), np.uint64(31), np.uint64(11)

    def mix(z: np.ndarray) -> np.ndarray:  # splitmix64(z - γ); uint64 arithmetic wraps mod 2**64
        z = (z ^ (z >> s30)) * m1
        z = (z ^ (z >> s27)) * m2
        return z ^ (z >> s31)

    with np.errstate(over="ignore"):
        base = mix(ids + seed_key + gamma)
        out = np.empty((n, len(ids)))
        z = base
        for k in range(n):
            z = z + gamma
            out[k] = ((mix(z) >> s11).astype(np.float64) + 0.5) * 2.0**-53
    return out


def _profiles_block(seed_key: np.uint64, ids: np.ndarray, mean: np.ndarray, std: np.ndarray, top: np.ndarray,
                    floor_w: float, runtime: np.ndarray, p: AugmentParams):
    """Power series of a block of jobs (see :func:`power_profile`), vectorized.

    Returns ``(steps, values, mean, max, std)``: the number of steps of each job,
    an ``(n_max, len(ids))`` array of step values (rows past a job's steps are
    unused) and the realised statistics of each job's steps.
    """
    steps = np.clip(np.ceil(runtime / p.step_s), 1, p.max_steps).astype(np.int64)
    n_max = int(steps.max()) if len(steps) else 1
    u = _uniforms_block(seed_key, ids, 2 * n_max)
    z = np.sqrt(-2.0 * np.log(u[0::2])) * np.cos(2.0 * math.pi * u[1::2])
    dt = np.where(steps > 0, runtime / steps, 0.0)
    phi = p.step_corr ** (dt / p.step_s)
    innov = np.sqrt(1.0 - phi * phi)
    x = np.empty_like(z)
    x[0] = z[0]
    for k in range(1, n_max):
        x[k] = phi * x[k - 1] + innov * z[k]
    lo = np.maximum(floor_w, 2.0 * mean - top)
    values = np.clip(mean + std * x, lo, top)
    used = np.arange(n_max)[:, None] < steps[None, :]
    m_r = np.where(used, values, 0.0).sum(axis=0) / steps
    x_r = np.where(used, values, -np.inf).max(axis=0)
    s_r = np.sqrt(np.where(used, (values - m_r) ** 2, 0.0).sum(axis=0) / steps)
    return steps, values, m_r, x_r, s_r, dt


def _series(steps: np.ndarray, values: np.ndarray, dt: np.ndarray, std: np.ndarray) -> list:
    """The ``power_series`` tuples of a block (None for a constant one: one step, or every step the same)."""
    flat = (steps == 1) | (std == 0.0)
    cols = values.T.tolist()
    out = []
    for n, row, d, f in zip(steps.tolist(), cols, dt.tolist(), flat.tolist()):
        out.append(None if f else tuple(zip([i * d for i in range(n)], row[:n])))
    return out


def power_profile(job: TraceJob, params: AugmentParams, seed: int, *, floor_w: float = 0.0) -> TraceJob:
    """The fluctuating power of one job with ``mean_w``, ``std_w`` and ``max_w``, as :func:`augment` gives it.

    The job's run of ``r`` seconds is cut into ``n = clip(ceil(r / step_s), 1,
    max_steps)`` equal steps of ``d = r / n``. The steps follow a stationary
    AR(1) process: ``x_0 = Z_0``, ``x_k = φ x_{k-1} + sqrt(1 - φ²) Z_k`` with
    ``φ = step_corr ** (d / step_s)``, and step ``k`` draws ``clip(mean_w +
    std_w · x_k, lo, max_w)`` with ``lo = max(floor_w, 2 mean_w - max_w)``
    (symmetric around the mean unless the floor is higher). The ``Z_k`` are
    standard normals (Box-Muller) from splitmix64 on ``(seed, job id)``, a
    stream of their own (:func:`job_uniforms` with another key), so a job's
    series depends only on the seed, its id and its own power and run time.
    The returned copy's ``mean_w``, ``max_w`` and ``std_w`` are the realised
    statistics of its steps (what a meter would show); a job whose steps are
    all equal (one step, or a spread of zero) gets no series: its power is
    constant.

    >>> job = TraceJob(7, 0.0, 7200.0, 7200.0, 1, 1, mean_w=200.0, max_w=240.0, std_w=20.0)
    >>> out = power_profile(job, AugmentParams(), seed=1)
    >>> len(out.power_series), all(160.0 <= w <= 240.0 for _, w in out.power_series)
    (3, True)
    >>> out.power_series == power_profile(job, AugmentParams(), seed=1).power_series
    True
    """
    if job.mean_w is None:
        raise ConfigError(f"job {job.id} has no mean_w: power_profile needs its mean, std and max power")
    seed = _check_seed(seed)
    one = np.array
    steps, values, m_r, x_r, s_r, dt = _profiles_block(
        np.uint64(splitmix64(seed ^ _PROFILE_KEY)), one([job.id & _MASK64], dtype=np.uint64), one([job.mean_w]),
        one([job.std_w or 0.0]), one([job.max_w if job.max_w is not None else job.mean_w]), float(floor_w),
        one([float(job.runtime_s)]), params)
    series = _series(steps, values, dt, s_r)[0]
    return replace(job, mean_w=float(m_r[0]), max_w=float(x_r[0]), std_w=float(s_r[0]), power_series=series)


def reference_cores(platform: Platform) -> int:
    """The cores of the platform's reference node: the first node with :attr:`Platform.reference_power`.

    The ``cores_per_node`` to augment a workload with ``platform.reference_power``.

    >>> reference_cores(Platform.homogeneous_cluster(4, cores=16))
    16
    """
    ref = platform.reference_power
    return next(n.cores for n in platform.nodes if n.power == ref)


def _unit_share(units_of: list[tuple], cores_per_node: int | None, ids: list[int]) -> np.ndarray:
    """Per job, the mean over its units of ``min(1, unit.cores / cores_per_node)``."""
    if cores_per_node is None:
        raise ConfigError(f"job {ids[0]} has units: augmenting jobs of units needs cores_per_node, the cores of "
                          "the reference node (e.g. augment(..., cores_per_node=reference_cores(platform)))")
    counts = np.fromiter(map(len, units_of), dtype=np.int64, count=len(units_of))
    cores = np.fromiter((u.cores for units in units_of for u in units), dtype=np.float64, count=int(counts.sum()))
    starts = np.zeros(len(counts), dtype=np.int64)
    np.cumsum(counts[:-1], out=starts[1:])
    return np.add.reduceat(np.minimum(cores / cores_per_node, 1.0), starts) / counts


def _check_seed(seed: int) -> int:
    try:
        value = operator.index(seed)  # ints and NumPy integers, not floats
    except TypeError:
        value = -1
    if isinstance(seed, bool) or not 0 <= value <= _MASK64:
        raise ConfigError(f"seed must be an integer in [0, 2**64), got {seed!r}; e.g. augment(jobs, power, params, 1)")
    return value


def _check(node_power: NodePowerModel, seed: int) -> int:
    value = _check_seed(seed)
    if not node_power.idle_w <= node_power.busy_w or not node_power.busy_min_w <= node_power.busy_w:
        raise ConfigError(
            "power augmentation needs idle_w <= busy_w and busy_min_w <= busy_w in the node power model, got "
            f"idle_w={node_power.idle_w}, busy_min_w={node_power.busy_min_w}, busy_w={node_power.busy_w}"
        )
    return value


def augment(
    jobs: Iterable[TraceJob], node_power: NodePowerModel, params: AugmentParams, seed: int, *,
    in_place: bool = False, cores_per_node: int | None = None,
) -> Iterator[TraceJob]:
    """Give every job without power a seeded per-node power and an application class.

    Streaming: jobs are read a block at a time, and only per-user values are
    kept, so a trace of any length passes through in bounded memory.

    Parameters
    ----------
    jobs
        Any iterable of jobs, consumed lazily.
    node_power
        The node model whose ``idle_w``, ``busy_min_w`` and ``busy_w`` bound the powers.
    params
        The distributions.
    seed
        Integer in ``[0, 2**64)``.
    in_place
        Set the power fields on the input jobs themselves instead of copying
        them (for a caller that owns the jobs, such as a run reading its trace);
        the values are the same.
    cores_per_node
        Cores of the node whose model is ``node_power`` (:func:`reference_cores`
        of a platform): the power of a unit scales with its share of them. Needed
        only for jobs of units (a :class:`ConfigError` when one comes without it).

    Returns
    -------
    Iterator[TraceJob]
        A generator of the jobs in input order: new :class:`TraceJob` objects
        with ``mean_w``, ``max_w``, ``std_w`` and ``app_class`` set, or the
        input job itself when it already had ``mean_w``. Input jobs are not
        modified unless ``in_place``.

    Raises
    ------
    ConfigError
        ``seed``, ``cores_per_node`` or the node model is unusable (raised at the call, not on first use).

    Examples
    --------
    >>> from wattsched.model.platform import NodePowerModel
    >>> job = TraceJob(1, 0.0, 60.0, 120.0, 1, 1, user="alice")
    >>> out = next(augment([job], NodePowerModel(), AugmentParams(), seed=7))
    >>> 95.0 <= out.mean_w <= out.max_w <= 190.738, out.app_class in {"cpu", "memory", "mixed"}
    (True, True)
    """
    if cores_per_node is not None:
        try:
            cores = -1 if isinstance(cores_per_node, bool) else operator.index(cores_per_node)
        except TypeError:
            cores = -1
        if cores < 1:
            raise ConfigError(f"cores_per_node must be an integer >= 1, got {cores_per_node!r}")
        cores_per_node = cores
    return _augment(iter(jobs), node_power, params, _check(node_power, seed), in_place, cores_per_node)


def _augment(jobs: Iterator[TraceJob], node_power: NodePowerModel, p: AugmentParams, seed: int,
             in_place: bool = False, cores_per_node: int | None = None):
    idle_w, busy_w, busy_min_w = float(node_power.idle_w), float(node_power.busy_w), float(node_power.busy_min_w)
    classes = sorted(p.class_probs)
    cum = np.cumsum([p.class_probs[c] for c in classes])
    cum[-1] = 1.0  # rounding must not leave a gap at the top
    cum_list = cum.tolist()
    users: dict[str, tuple[float, int]] = {}  # name -> (mean power, class index)
    seed_key = np.uint64(splitmix64(seed))
    profile_key = np.uint64(splitmix64(seed ^ _PROFILE_KEY))
    fluctuate = p.profile == "ar1"
    # One generator, re-keyed for each new user: Philox is counter-based, so setting its key
    # to (seed, hash(user)) and its counter to 0 gives each user its own fixed stream without
    # the cost of building a generator (and hashing a SeedSequence) per user.
    bitgen = np.random.Philox(key=0)
    rng = np.random.Generator(bitgen)
    state = bitgen.state
    state.update(buffer_pos=4, has_uint32=0, uinteger=0)  # empty buffers: the stream starts afresh

    def new_user(name: str) -> tuple[float, int]:
        state["state"] = {"counter": np.zeros(4, dtype=np.uint64),
                          "key": np.array([seed & _MASK64, stable_hash(name)], dtype=np.uint64)}
        bitgen.state = state
        mean = busy_min_w + float(rng.beta(p.user_mean_alpha, p.user_mean_beta)) * (busy_w - busy_min_w)
        u = float(rng.random())
        users[name] = value = (mean, next(k for k, c in enumerate(cum_list) if u < c))
        return value

    while True:
        block = list(islice(jobs, _BLOCK))
        if not block:
            return
        todo = [j for j in block if j.mean_w is None]
        if not todo:
            yield from block
            continue
        get = users.get
        per_user = [get(j.user) or new_user(j.user) for j in todo]
        user_mean = np.fromiter((v[0] for v in per_user), dtype=np.float64, count=len(todo))
        user_class = np.fromiter((v[1] for v in per_user), dtype=np.intp, count=len(todo))
        ids = np.fromiter((j.id & _MASK64 for j in todo), dtype=np.uint64, count=len(todo))
        u = _uniforms_block(seed_key, ids)

        z = np.sqrt(-2.0 * np.log(u[0])) * np.cos(2.0 * math.pi * u[1])
        mean = np.clip(user_mean * (1.0 + p.job_sigma_rel * z), idle_w, busy_w)
        std = mean * (p.std_rel_min + u[2] * (p.std_rel_max - p.std_rel_min))
        mx = np.minimum(mean + p.max_k * std, busy_w)
        if any(map(_units_of, todo)):
            # jobs of units: per-unit power, a node running the unit alone (only these jobs are transformed)
            at = [k for k, j in enumerate(todo) if j.units]
            share = _unit_share([todo[k].units for k in at], cores_per_node, [todo[k].id for k in at])
            mean[at] = idle_w + (mean[at] - idle_w) * share
            mx[at] = idle_w + (mx[at] - idle_w) * share
            std[at] *= share
        switched = np.searchsorted(cum, u[4], side="right")
        cls = np.where(u[3] < p.class_switch_prob, switched, user_class)
        if fluctuate:
            # the job's fields become the realised statistics of its series (what a meter shows)
            runtime = np.fromiter((j.runtime_s for j in todo), dtype=np.float64, count=len(todo))
            steps, values, m_r, x_r, s_r, dt = _profiles_block(profile_key, ids, mean, std, mx, idle_w, runtime, p)
            series = _series(steps, values, dt, s_r)
            own = [k for k, j in enumerate(todo) if j.power_series is not None]
            for k in own:  # a job with a measured series of its own keeps it, and the drawn statistics
                series[k] = todo[k].power_series
                m_r[k], x_r[k], s_r[k] = mean[k], mx[k], std[k]
            mean, mx, std = m_r, x_r, s_r
        else:
            series = [j.power_series for j in todo]

        if in_place:
            for j, m, x, s, c, ps in zip(todo, mean.tolist(), mx.tolist(), std.tolist(), cls.tolist(), series):
                j.mean_w, j.max_w, j.std_w, j.power_series = m, x, s, ps
                if not j.app_class:
                    j.app_class = classes[c]
            yield from block
            continue
        made = iter([
            _with_power(j, m, x, s, j.app_class or classes[c], ps)
            for j, m, x, s, c, ps in zip(todo, mean.tolist(), mx.tolist(), std.tolist(), cls.tolist(), series)
        ])
        for j in block:
            yield next(made) if j.mean_w is None else j


_units_of = operator.attrgetter("units")


def _with_power_kw(job: TraceJob, mean_w: float, max_w: float, std_w: float, app_class: str,
                   power_series) -> TraceJob:
    return TraceJob(
        id=job.id, submit_s=job.submit_s, runtime_s=job.runtime_s, walltime_s=job.walltime_s,
        procs=job.procs, nodes=job.nodes, user=job.user, group=job.group, partition=job.partition,
        status=job.status, mean_w=mean_w, max_w=max_w, std_w=std_w, app_class=app_class,
        power_series=power_series, gpus_per_node=job.gpus_per_node, min_nodes=job.min_nodes,
        max_nodes=job.max_nodes, malleable=job.malleable, extra=dict(job.extra), units=job.units,
    )


def _with_power_pos(job: TraceJob, mean_w: float, max_w: float, std_w: float, app_class: str,
                    power_series) -> TraceJob:
    return TraceJob(
        job.id, job.submit_s, job.runtime_s, job.walltime_s, job.procs, job.nodes, job.user, job.group,
        job.partition, job.status, mean_w, max_w, std_w, app_class, power_series, job.gpus_per_node,
        job.min_nodes, job.max_nodes, job.malleable, dict(job.extra), job.units,
    )


_POSITIONAL_ORDER = (
    "id", "submit_s", "runtime_s", "walltime_s", "procs", "nodes", "user", "group", "partition", "status",
    "mean_w", "max_w", "std_w", "app_class", "power_series", "gpus_per_node", "min_nodes", "max_nodes",
    "malleable", "extra", "units",
)
# Building by position is about twice as fast as by keyword (this is most of augment's time);
# fall back to keywords if TraceJob's fields ever change, so that a reordering cannot mix values up.
_with_power = (
    _with_power_pos if tuple(f.name for f in fields(TraceJob)) == _POSITIONAL_ORDER else _with_power_kw
)


def augment_workload(workload: Workload, node_power: NodePowerModel, params: AugmentParams, seed: int, *,
                     in_place: bool = False, cores_per_node: int | None = None) -> Workload:
    """Wrap a workload's job stream in :func:`augment`; the result has ``has_power`` set.

    The returned workload shares ``report`` with the input (it still fills in
    as the stream is consumed) and adds a note recording the seed and parameters.
    The input workload's ``jobs`` iterator is consumed through the result; do not
    use both.
    """
    return replace(
        workload,
        jobs=augment(workload.jobs, node_power, params, seed, in_place=in_place, cores_per_node=cores_per_node),
        has_power=True,
        notes=[
            *workload.notes,
            f"power augmented (wattsched.workload.augment) with seed {seed}: {params_text(params.model_dump())}",
        ],
        header=dict(workload.header),
    )


def params_text(params: dict) -> str:
    """Augmentation parameters as one line for people (``key value``, nested ``key=value``).

    >>> params_text({"max_k": 2.0, "class_probs": {"cpu": 0.4, "mixed": 0.6}})
    'max_k 2, class_probs cpu=0.4 mixed=0.6'
    """
    def value(v) -> str:
        if isinstance(v, dict):
            return " ".join(f"{k}={value(x)}" for k, x in v.items())
        return f"{v:g}" if isinstance(v, float) else str(v)

    return ", ".join(f"{k} {value(v)}" for k, v in params.items())
