"""The oracle predictor: real values, and with a seeded relative error margin for sensitivity studies."""

from __future__ import annotations

import pytest

from wattsched.errors import ConfigError
from wattsched.model.job import Job, PowerEstimate
from wattsched.predictors import make_predictor

TRUTH = {i: PowerEstimate(100.0 + i, 150.0 + i, 10.0) for i in range(200)}
JOBS = [Job(i, float(i), 3600.0, 1) for i in range(200)]


def oracle(**params):
    p = make_predictor("oracle", params)
    p.observe_truth(TRUTH.__getitem__)
    return p


def test_oracle_returns_the_real_values_by_default():
    assert oracle().predict(JOBS) == [TRUTH[i] for i in range(200)]


def test_rel_error_scales_each_job_within_the_margin_the_same_way_whatever_the_order():
    pred = oracle(rel_error=0.1, seed=3).predict(JOBS)
    ratios = [p.mean_w / TRUTH[i].mean_w for i, p in enumerate(pred)]
    assert all(0.9 <= r <= 1.1 for r in ratios)
    assert min(ratios) < 0.93 and max(ratios) > 1.07  # spread over the margin, not a constant bias
    assert all(p.max_w / TRUTH[i].max_w == pytest.approx(r) for i, (p, r) in enumerate(zip(pred, ratios)))
    # one draw per job: the same whatever the batch or its order; another seed gives other errors
    assert oracle(rel_error=0.1, seed=3).predict(JOBS[::-1])[::-1] == pred
    assert oracle(rel_error=0.1, seed=4).predict(JOBS) != pred


def test_rel_error_out_of_range_is_refused():
    with pytest.raises(ConfigError, match="rel_error"):
        make_predictor("oracle", {"rel_error": 1.5})
