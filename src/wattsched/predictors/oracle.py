"""``oracle``: the real values. For baselines only; every output that uses it says so."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from wattsched.model.job import Job, PowerEstimate
from wattsched.predictors.base import BasePredictor


class OracleParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    rel_error: float = Field(0.0, ge=0.0, lt=1.0, description=(
        "Relative error margin of the predictions, for sensitivity studies: each job's real power is scaled by "
        "1 + u, u uniform in [-rel_error, rel_error], drawn once per job (seeded by `seed` and the job id). "
        "Default 0: the real values."))
    seed: int = Field(0, ge=0, description="Seed of the errors drawn when `rel_error` > 0.")


class OraclePredictor(BasePredictor):
    """Returns each job's real mean, max and std node power, optionally with a seeded relative error.

    Only the simulator can feed it: it sets :attr:`truth_`, a function from a
    job id to its real power. A live daemon has no oracle.
    """

    name = "oracle"
    Params = OracleParams
    is_oracle = True
    truth_: Callable[[int], PowerEstimate] | None = None

    def predict(self, jobs: Sequence[Job]) -> list[PowerEstimate]:
        if self.truth_ is None:
            raise RuntimeError("the oracle predictor only works inside the simulator, which knows real power")
        err = self.params.rel_error
        if err <= 0:
            return [self.truth_(job.id) for job in jobs]
        out = []
        for job in jobs:
            true = self.truth_(job.id)
            k = 1.0 + err * (2.0 * error_draw(self.params.seed, job.id) - 1.0)
            out.append(PowerEstimate(true.mean_w * k, true.max_w * k, true.std_w * k))
        return out


def error_draw(seed: int, job_id: int) -> float:
    """A uniform draw in [0, 1) that depends only on ``seed`` and ``job_id`` (not on the order of calls).

    >>> error_draw(3, 17) == error_draw(3, 17), error_draw(3, 17) != error_draw(4, 17)
    (True, True)
    """
    return float(np.random.default_rng([seed, job_id & 0xFFFFFFFFFFFF]).random())
