"""``oracle``: the real values. For baselines only; every output that uses it says so."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from wattsched.model.job import Job, PowerEstimate
from wattsched.predictors.base import BasePredictor


class OraclePredictor(BasePredictor):
    """Returns each job's real mean, max and std node power.

    Only the simulator can feed it: it sets :attr:`truth_`, a function from a
    job id to its real power. A live daemon has no oracle.
    """

    name = "oracle"
    is_oracle = True
    truth_: Callable[[int], PowerEstimate] | None = None

    def predict(self, jobs: Sequence[Job]) -> list[PowerEstimate]:
        if self.truth_ is None:
            raise RuntimeError("the oracle predictor only works inside the simulator, which knows real power")
        return [self.truth_(job.id) for job in jobs]
