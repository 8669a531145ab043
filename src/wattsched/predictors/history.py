"""``history``: per-user weighted average of past jobs' power (Carastan-Santos et al. 2024, Eqs. 1-3).

For a job ``j`` of user ``u`` submitted at ``r_j``, each metric ``P`` (mean,
max and std node power) is predicted as

.. math::

    \\hat P_j = \\frac{\\sum_{j' \\in W} \\theta_{j'} P_{j'}}{\\sum_{j' \\in W} \\theta_{j'}},\\quad
    W = \\{j' : r_j - s \\le C_{j'} \\le r_j\\},\\quad
    \\theta_{j'} = \\left(1 - \\frac{r_j - C_{j'}}{s}\\right)^{\\alpha}

over the user's jobs ``j'`` completed (at ``C_j'``) within the window ``s``
before the submission. ``alpha = 2`` by default: recent jobs weigh more.

With the default window, the user's whole history (``s = r_j - C_first``, as in
the paper), the weights are ``((C_j' - C_first) / (r_j - C_first))^alpha`` and
the common denominator cancels, so the prediction is a ratio of two running
sums kept per user: O(1) per completed job and per prediction. A finite window
keeps the user's recent completions and sums over them.

The user's very first completed job has weight 0 in the whole-history form;
while all weights are 0 the prediction is the plain average. A user with no
completed job gets the ``fallback``: the same estimate over all users' jobs
(``global``), or the node maximum (``naive``).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from wattsched.model.job import Job, PowerEstimate, power_estimate
from wattsched.predictors.base import BasePredictor, CompletedJob, node_max_w


class HistoryParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    alpha: float = Field(2.0, ge=0, description="Aging exponent of Eq. 3 (1 linear, 2 favours recent jobs).")
    window_s: float | None = Field(
        None, gt=0, description="Window s of Eq. 2 in seconds; default: the user's whole history."
    )
    fallback: Literal["global", "naive"] = Field(
        "global", description="Estimate for a user with no completed job: all users' history, or the node maximum."
    )


class _Stats:
    """Running sums over one user's (or everyone's) completed jobs."""

    __slots__ = (
        "c0",
        "cached",
        "count",
        "last",
        "recent",
        "sum_max",
        "sum_mean",
        "sum_mean2",
        "sum_std",
        "w",
        "w_max",
        "w_mean",
        "w_std",
    )

    def __init__(self, keep_recent: bool):
        self.c0 = None
        self.count = 0
        self.w = self.w_mean = self.w_max = self.w_std = 0.0
        self.sum_mean = self.sum_max = self.sum_std = self.sum_mean2 = 0.0
        self.last: CompletedJob | None = None
        self.recent: deque | None = deque() if keep_recent else None
        self.cached: PowerEstimate | None = None  # the whole-history estimate, until the next add

    def add(self, c: CompletedJob, alpha: float) -> None:
        self.cached = None
        if self.c0 is None:
            self.c0 = c.end_s
        w = (c.end_s - self.c0) ** alpha if c.end_s > self.c0 else (1.0 if alpha == 0 else 0.0)
        self.count += 1
        self.w += w
        self.w_mean += w * c.mean_w
        self.w_max += w * c.max_w
        self.w_std += w * c.std_w
        self.sum_mean += c.mean_w
        self.sum_max += c.max_w
        self.sum_std += c.std_w
        self.sum_mean2 += c.mean_w * c.mean_w
        if self.last is None or c.end_s >= self.last.end_s:
            self.last = c
        if self.recent is not None:
            self.recent.append((c.end_s, c.mean_w, c.max_w, c.std_w))

    def whole(self) -> tuple[float, float, float] | None:
        if not self.count:
            return None
        if self.w > 0:
            return self.w_mean / self.w, self.w_max / self.w, self.w_std / self.w
        n = self.count
        return self.sum_mean / n, self.sum_max / n, self.sum_std / n

    def whole_estimate(self) -> PowerEstimate | None:
        """:meth:`whole` as a :class:`PowerEstimate`, made once per completed job, not per prediction."""
        est = self.cached
        if est is None and self.count:
            est = self.cached = power_estimate(*self.whole())
        return est

    def window(self, r: float, s: float, alpha: float) -> tuple[float, float, float] | None:
        recent = self.recent
        lo = r - s
        while recent and recent[0][0] < lo - s:  # far outside any later window: forget
            recent.popleft()
        tw = tm = tx = ts = 0.0
        n = 0
        um = ux = us = 0.0
        for end, mean, mx, std in recent:
            if lo <= end <= r:
                w = (1.0 - (r - end) / s) ** alpha
                tw += w
                tm += w * mean
                tx += w * mx
                ts += w * std
                n += 1
                um += mean
                ux += mx
                us += std
        if n == 0:
            return None
        if tw > 0:
            return tm / tw, tx / tw, ts / tw
        return um / n, ux / n, us / n

    def spread(self) -> float:
        """Standard deviation of the mean power over the user's jobs (feature 6 of Table 2)."""
        if self.count < 2:
            return 0.0
        m = self.sum_mean / self.count
        return math.sqrt(max(0.0, self.sum_mean2 / self.count - m * m))


class HistoryPredictor(BasePredictor):
    """Per-user aged average of completed jobs' power, Eqs. 1-3 of Carastan-Santos et al. 2024."""

    name = "history"
    Params = HistoryParams

    def __init__(self, params=None, **kwargs):
        super().__init__(params, **kwargs)
        keep = self.params.window_s is not None
        self.users_: dict[str, _Stats] = {}
        self.all_ = _Stats(keep)

    def update(self, completed: CompletedJob) -> None:
        keep = self.params.window_s is not None
        stats = self.users_.get(completed.job.user)
        if stats is None:
            stats = self.users_[completed.job.user] = _Stats(keep)
        alpha = self.params.alpha
        stats.add(completed, alpha)
        self.all_.add(completed, alpha)

    def _estimate(self, stats: _Stats | None, job: Job) -> tuple[float, float, float] | None:
        if stats is None:
            return None
        s = self.params.window_s
        if s is None:
            return stats.whole()
        return stats.window(job.submit_s, s, self.params.alpha)

    def predict(self, jobs: Sequence[Job]) -> list[PowerEstimate]:
        if self.params.window_s is None:
            return [self._predict_whole(job) for job in jobs]
        out = []
        for job in jobs:
            est = self._estimate(self.users_.get(job.user), job)
            if est is None:
                if self.params.fallback == "global":
                    est = self._estimate(self.all_, job)
                if est is None:
                    w = node_max_w(self.platform_, job)
                    est = (w, w, 0.0)
            out.append(PowerEstimate(*est))
        return out

    def _predict_whole(self, job: Job) -> PowerEstimate:
        """:meth:`predict` for one job with the default window, the user's whole history (no job time needed)."""
        stats = self.users_.get(job.user)
        est = stats.whole_estimate() if stats is not None else None
        if est is None:
            if self.params.fallback == "global":
                est = self.all_.whole_estimate()
            if est is None:
                w = node_max_w(self.platform_, job)
                est = PowerEstimate(w, w, 0.0)
        return est

    def user_features(self, job: Job) -> tuple[float, float, float]:
        """Features 5-7 of Table 2 for ``job``: history prediction, spread of the user's power, last job's power.

        Users without history get the global values.
        """
        stats = self.users_.get(job.user) or self.all_
        est = self._estimate(stats, job) or self._estimate(self.all_, job)
        pred = est[0] if est else node_max_w(self.platform_, job)
        last = stats.last.mean_w if stats.last is not None else pred
        return pred, stats.spread(), last
