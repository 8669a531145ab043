"""``oracle``: the real values. For baselines only; every output that uses it says so.

For studies of misprediction (Borghesi et al. 2018, §5.2.4) the oracle can
under-predict on purpose: a seeded share of the jobs (``under_share``) is
predicted ``under_by`` below its real power (mean and max).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence

from pydantic import BaseModel, ConfigDict, Field

from wattsched.model.job import Job, PowerEstimate
from wattsched.predictors.base import BasePredictor


class OracleParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    under_share: float = Field(
        0.0, ge=0, le=1, description="Share of the jobs predicted below their real power (seeded by job id).")
    under_by: float = Field(
        0.0, ge=0, lt=1, description="Those jobs' prediction is the real power × (1 − under_by); Borghesi: 0.4.")
    seed: int = Field(0, ge=0, description="Seed of the choice of under-predicted jobs.")


def job_uniform(seed: int, job_id: int) -> float:
    """A uniform in ``[0, 1)`` that depends only on ``seed`` and ``job_id``.

    >>> job_uniform(1, 7) == job_uniform(1, 7) != job_uniform(2, 7)
    True
    """
    digest = hashlib.blake2b(f"{seed}:{job_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") / 2.0**64


class OraclePredictor(BasePredictor):
    """Returns each job's real mean, max and std node power.

    Only the simulator can feed it: it sets :attr:`truth_`, a function from a
    job id to its real power. A live daemon has no oracle. With
    ``under_share > 0`` the jobs whose :func:`job_uniform` is below it get a
    prediction ``under_by`` lower than their real power.
    """

    name = "oracle"
    is_oracle = True
    Params = OracleParams
    truth_: Callable[[int], PowerEstimate] | None = None

    def under_predicted(self, job_id: int) -> bool:
        """Whether this job's prediction is lowered (``under_share`` of the jobs, seeded)."""
        p = self.params
        return p.under_share > 0 and job_uniform(p.seed, job_id) < p.under_share

    def predict(self, jobs: Sequence[Job]) -> list[PowerEstimate]:
        if self.truth_ is None:
            raise RuntimeError("the oracle predictor only works inside the simulator, which knows real power")
        out = []
        factor = 1.0 - self.params.under_by
        for job in jobs:
            est = self.truth_(job.id)
            if factor < 1.0 and self.under_predicted(job.id):
                est = PowerEstimate(est.mean_w * factor, est.max_w * factor, est.std_w * factor)
            out.append(est)
        return out
