"""BF: the power-aware EASY backfilling of Borghesi et al. 2018 (§2), which is ``easy-pc``.

The paper's BF is EASY backfilling where a job starts or backfills only if
its predicted power fits the budget next to the running jobs' predicted
power, the head job's reservation counting power as well as nodes: the
algorithm of :mod:`wattsched.policies.easy_pc` (Carastan-Santos et al. 2024,
Algorithm 1). ``bf`` is that policy under the paper's name, its power check
on the predicted mean by default (the paper's predictor gives one value per
job); every other parameter and all the code are ``easy-pc``'s.
"""

from __future__ import annotations

from pydantic import Field

from wattsched.policies.easy_pc import Check, EasyPcParams, EasyPcPolicy


class BfParams(EasyPcParams):
    check: Check = Field("mean", description="Power verification: mean, max or gaussian_68/95/99.")


class BfPolicy(EasyPcPolicy):
    """``easy-pc`` with the predicted-mean check by default. Registered as ``bf``."""

    name = "bf"
    Params = BfParams
