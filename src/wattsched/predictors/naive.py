"""``naive``: every job draws the maximum power its nodes can reach."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from wattsched.model.job import Job, PowerEstimate
from wattsched.predictors.base import BasePredictor, node_max_w


class NaiveParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    node_max_w: float | None = Field(
        None, gt=0, description="Maximum node power in W; default the platform's busy_w plus GPUs at TDP "
        "(Carastan-Santos et al. use 2,100 W for a Marconi100 node)."
    )


class NaivePredictor(BasePredictor):
    """Maximum reachable power: mean = max = the node maximum, std = 0."""

    name = "naive"
    Params = NaiveParams

    def predict(self, jobs: Sequence[Job]) -> list[PowerEstimate]:
        fixed = self.params.node_max_w
        out = []
        for job in jobs:
            w = fixed if fixed is not None else node_max_w(self.platform_, job)
            out.append(PowerEstimate(w, w, 0.0))
        return out
