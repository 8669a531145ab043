"""``oracle``: the real values. For baselines only; every output that uses it says so.

For studies of misprediction the oracle can be wrong on purpose, in two
seeded ways that combine:

* ``rel_error``: every job's prediction is its real power scaled by
  ``1 + u``, ``u`` uniform in ``[-rel_error, rel_error]`` (a symmetric error
  margin, as in the sensitivity studies of Ahmed et al. 2017, Fig. 8);
* ``under_share`` and ``under_by``: a share of the jobs is predicted
  ``under_by`` below its real power (Borghesi et al. 2018, §5.2.4: 10 % of
  the jobs under-predicted by 40 %).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Sequence

from pydantic import BaseModel, ConfigDict, Field

from wattsched.model.job import Job, PowerEstimate
from wattsched.predictors.base import BasePredictor, PredictorTags


class OracleParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    rel_error: float = Field(0.0, ge=0.0, lt=1.0, description=(
        "Relative error margin of the predictions, for sensitivity studies: each job's real power is scaled by "
        "1 + u, u uniform in [-rel_error, rel_error], drawn once per job (seeded by `seed` and the job id). "
        "Default 0: the real values."))
    under_share: float = Field(
        0.0, ge=0, le=1, description="Share of the jobs predicted below their real power (seeded by job id).")
    under_by: float = Field(
        0.0, ge=0, lt=1, description="Those jobs' prediction is the real power × (1 − under_by); Borghesi: 0.4.")
    seed: int = Field(0, ge=0, description="Seed of the errors and of the choice of under-predicted jobs.")


def job_uniform(seed: int, job_id: int, stream: str = "") -> float:
    """A uniform in ``[0, 1)`` that depends only on ``seed``, ``job_id`` and ``stream`` (not on call order).

    >>> job_uniform(1, 7) == job_uniform(1, 7) != job_uniform(2, 7)
    True
    >>> job_uniform(1, 7) != job_uniform(1, 7, "error")
    True
    """
    digest = hashlib.blake2b(f"{seed}:{job_id}{':' + stream if stream else ''}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") / 2.0**64


class OraclePredictor(BasePredictor):
    """Returns each job's real mean, max and std node power, optionally wrong on purpose (see the module).

    Its tags say ``needs_truth``: only the simulator (or an evaluation) can
    feed it, through :meth:`observe_truth`, a function from a job id to its
    real power. A live daemon has no oracle.
    """

    name = "oracle"
    Params = OracleParams
    truth_: Callable[[int], PowerEstimate] | None = None

    def tags(self) -> PredictorTags:
        return dataclasses.replace(super().tags(), needs_truth=True)

    def observe_truth(self, truth: Callable[[int], PowerEstimate]) -> None:
        """Take the real power: ``truth(job_id)`` is the job's real mean, max and std node power."""
        self.truth_ = truth

    def under_predicted(self, job_id: int) -> bool:
        """Whether this job's prediction is lowered (``under_share`` of the jobs, seeded)."""
        p = self.params
        return p.under_share > 0 and job_uniform(p.seed, job_id) < p.under_share

    def factor(self, job_id: int) -> float:
        """The factor applied to this job's real power (1 without errors)."""
        p = self.params
        k = 1.0
        if p.rel_error > 0:
            k *= 1.0 + p.rel_error * (2.0 * job_uniform(p.seed, job_id, "error") - 1.0)
        if p.under_by > 0 and self.under_predicted(job_id):
            k *= 1.0 - p.under_by
        return k

    def predict(self, jobs: Sequence[Job]) -> list[PowerEstimate]:
        if self.truth_ is None:
            raise RuntimeError("the oracle predictor only works inside the simulator, which knows real power")
        p = self.params
        if p.rel_error <= 0 and (p.under_share <= 0 or p.under_by <= 0):
            return [self.truth_(job.id) for job in jobs]
        out = []
        for job in jobs:
            est = self.truth_(job.id)
            k = self.factor(job.id)
            out.append(est if k == 1.0 else PowerEstimate(est.mean_w * k, est.max_w * k, est.std_w * k))
        return out
