"""Seeded moldable and malleable jobs, and PASS applications, for traces that have neither.

Sarood et al. 2014 (PARM, §VII-A) turn a rigid trace into moldable jobs with
one rule: a job that asked ``n`` nodes may run on any count in
``[ceil(θ·n), n]``, θ drawn uniformly in ``[0.2, 0.6]`` per job. :func:`moldable`
applies that rule to a job stream, reproducibly, from a seed, and gives every
job one of the packaged PASS applications (:mod:`wattsched.scalingmodels`,
Table IV of the paper) so that a later step can time it by its node count and
CPU power.

The rule
--------
With ``p`` a :class:`MoldableParams` and ``n = job.nodes`` (the requested nodes):

* with probability ``p.fraction`` the job is moldable: ``θ ~ U[θ_lo, θ_hi]``
  (``p.theta``), ``min_nodes = max(1, ceil(θ·n))``, ``max_nodes = n``, and
  ``malleable = p.malleable``; otherwise it keeps ``min_nodes = max_nodes = n``
  (stored as 0, "the requested nodes", the same as a trace that says nothing);
* every job gets ``extra["app"]``, one of ``p.apps`` (default: every packaged
  PASS application), each equally likely.

A job that already has a range (``min_nodes`` or ``max_nodes`` set, from its
job table) keeps it, and one that has an ``app`` keeps it; jobs of units
(:attr:`TraceJob.units <wattsched.workload.records.TraceJob>`) are never made
moldable (their size is their units). ``min_nodes ≤ nodes ≤ max_nodes`` always
holds, so a policy that starts the job on its requested nodes, as every
policy but PARM does, is not refused by the guard: the range changes no
existing schedule.

Determinism
-----------
A job's draws depend only on the seed and its id, as the power augmentation's
(:func:`wattsched.workload.augment.job_uniforms`), with the seed mixed with a
constant of its own so that they are independent of the augmentation's draws
under the same seed: ``u_1`` decides moldability (``u_1 < fraction``), ``u_2``
gives ``θ = θ_lo + u_2 (θ_hi - θ_lo)``, ``u_3`` the application.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import replace
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field, field_validator

from wattsched.errors import ConfigError
from wattsched.workload.augment import job_uniforms, stable_hash
from wattsched.workload.records import TraceJob, Workload, app_of

__all__ = ["MoldableParams", "app_of", "moldable", "moldable_workload", "pass_apps"]

_MASK64 = (1 << 64) - 1
_SALT = stable_hash("wattsched.workload.moldable")


def pass_apps() -> tuple[str, ...]:
    """Names of the packaged PASS applications (Sarood et al. 2014, Table IV), sorted.

    >>> pass_apps()
    ('amr', 'jacobi2d', 'leanmd', 'lulesh', 'wave2d')
    """
    from wattsched.scalingmodels import packaged_pass_models

    return tuple(sorted(packaged_pass_models()))


class MoldableParams(BaseModel):
    """The ``moldable`` block: which jobs become moldable, their node ranges and applications (PARM, §VII-A)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    doc_name: ClassVar[str] = "moldable block"

    fraction: float = Field(
        default=1.0,
        ge=0,
        le=1,
        description=(
            "Share of the jobs made moldable, in [0, 1]; each job is drawn independently. The others keep "
            "their requested node count. Default: `1` (every job, as in the paper). Example: `0.5`."
        ),
    )
    theta: tuple[float, float] = Field(
        default=(0.2, 0.6),
        description=(
            "`[lo, hi]`, the range of θ: a moldable job that asked `n` nodes may run on "
            "`ceil(θ·n)` to `n` nodes, θ uniform in `[lo, hi]` per job; `0 < lo ≤ hi ≤ 1`. "
            "Default: `[0.2, 0.6]` (Sarood et al. 2014, §VII-A). Example: `[0.5, 0.5]`."
        ),
    )
    malleable: bool = Field(
        default=False,
        description=(
            "Whether moldable jobs are also malleable (may be reshaped within their range while they run). "
            "Default: `false`."
        ),
    )
    apps: tuple[str, ...] | None = Field(
        default=None,
        description=(
            "PASS applications to assign, each equally likely, to every job that has none (the job "
            "table column `app`). Default: all the packaged ones, `amr`, `jacobi2d`, `leanmd`, `lulesh`, "
            "`wave2d` (Sarood et al. 2014, Table IV). Example: `[leanmd, wave2d]`."
        ),
    )
    seed: int | None = Field(
        default=None,
        ge=0,
        le=2**64 - 1,
        description=(
            "Seed of the draws (θ, which jobs, which application). Default: the run's `seed`. Example: `7`."
        ),
    )

    @field_validator("theta")
    @classmethod
    def _theta(cls, v: tuple[float, float]) -> tuple[float, float]:
        lo, hi = v
        if not (math.isfinite(lo) and math.isfinite(hi) and 0 < lo <= hi <= 1):
            raise ValueError(f"must be [lo, hi] with 0 < lo ≤ hi ≤ 1, got [{lo:g}, {hi:g}]; e.g. [0.2, 0.6]")
        return v

    @field_validator("apps")
    @classmethod
    def _apps(cls, v: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if v is None:
            return v
        if not v:
            raise ValueError("give at least one application, or leave the key out for all of them")
        known = pass_apps()
        for name in v:
            if name not in known:
                raise ValueError(f"{name!r} is not a packaged PASS application; they are {', '.join(known)}")
        return v


def moldable(jobs: Iterable[TraceJob], params: MoldableParams, seed: int, *,
             in_place: bool = False) -> Iterator[TraceJob]:
    """Make jobs moldable (or malleable) and give them an application, by the rule of the module documentation.

    Parameters
    ----------
    jobs
        Any iterable of jobs, consumed lazily.
    params
        The rule's parameters; ``params.seed``, when set, replaces ``seed``.
    seed
        Integer in ``[0, 2**64)``, the run's seed.
    in_place
        Change the input jobs themselves (for a caller that owns them) instead of copies.

    Returns
    -------
    Iterator[TraceJob]
        The jobs in input order.

    Examples
    --------
    >>> job = TraceJob(1, 0.0, 60.0, 120.0, 10, 10)
    >>> out = next(moldable([job], MoldableParams(), seed=3))
    >>> 2 <= out.min_nodes <= 6, out.max_nodes, out.malleable, app_of(out) in pass_apps()
    (True, 10, False, True)
    """
    value = params.seed if params.seed is not None else seed
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _MASK64:
        raise ConfigError(f"seed must be an integer in [0, 2**64), got {value!r}")
    apps = params.apps or pass_apps()
    return _moldable(iter(jobs), params, apps, value ^ _SALT, in_place)


def _moldable(jobs: Iterator[TraceJob], p: MoldableParams, apps: tuple[str, ...], key: int, in_place: bool):
    lo, hi = p.theta
    for job in jobs:
        u1, u2, u3 = job_uniforms(key, job.id & _MASK64, 3)
        change = {}
        if u1 < p.fraction and not job.units and not (job.min_nodes or job.max_nodes):
            theta = lo + u2 * (hi - lo)
            change = {"min_nodes": min(job.nodes, max(1, math.ceil(theta * job.nodes))), "max_nodes": job.nodes,
                      "malleable": p.malleable}
        app = None if app_of(job) else apps[min(int(u3 * len(apps)), len(apps) - 1)]
        if not change and app is None:
            yield job
            continue
        target = job if in_place else replace(job, extra=dict(job.extra))
        for name, v in change.items():
            setattr(target, name, v)
        if app is not None:
            target.extra["app"] = app
        yield target


def moldable_workload(workload: Workload, params: MoldableParams, seed: int, *, in_place: bool = False) -> Workload:
    """Wrap a workload's job stream in :func:`moldable`, with a note recording the rule and the seed."""
    used = params.seed if params.seed is not None else seed
    lo, hi = params.theta
    note = (f"moldable jobs (wattsched.workload.moldable) with seed {used}: fraction {params.fraction:g}, "
            f"min_nodes = ceil(θ·nodes), θ ~ U[{lo:g}, {hi:g}], max_nodes = nodes"
            + (", malleable" if params.malleable else "") + f"; apps {', '.join(params.apps or pass_apps())}")
    return replace(workload, jobs=moldable(workload.jobs, params, seed, in_place=in_place),
                   notes=[*workload.notes, note], header=dict(workload.header))
