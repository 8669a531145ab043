"""The oracle's deliberate under-prediction (Borghesi et al. 2018, §5.2.4) and what it does to a capped run."""

from __future__ import annotations

import pytest

from builders import platform, tj
from wattsched.errors import WattschedError
from wattsched.model.constraints import CapSchedule
from wattsched.policies import make_policy
from wattsched.predictors import make_predictor
from wattsched.predictors.oracle import job_uniform
from wattsched.sim.engine import Engine

# SIMPLE_POWER: idle 100 W, busy 300 W per node.


def test_the_chosen_share_is_predicted_lower_by_the_given_fraction():
    pred = make_predictor("oracle", {"under_share": 0.1, "under_by": 0.4, "seed": 3})
    chosen = [i for i in range(1, 2001) if pred.under_predicted(i)]
    assert 150 <= len(chosen) <= 250  # 10 % of 2,000 jobs, seeded
    assert chosen == [i for i in range(1, 2001) if job_uniform(3, i) < 0.1]
    other = make_predictor("oracle", {"under_share": 0.1, "under_by": 0.4, "seed": 4})
    assert chosen != [i for i in range(1, 2001) if other.under_predicted(i)]


def test_defaults_predict_the_truth_and_bad_params_are_refused():
    assert not any(make_predictor("oracle").under_predicted(i) for i in range(100))
    with pytest.raises(WattschedError, match="under_by"):
        make_predictor("oracle", {"under_by": 1.0})


def _peak(predictor, margin: float = 0.0) -> float:
    # Four 1-node jobs at 300 W on four nodes; cap 1,000 W = 400 W idle + 3 x 200 W increments.
    jobs = [tj(i, 0.0, 100.0, mean_w=300.0, max_w=300.0, std_w=0.0) for i in range(1, 5)]
    policy = make_policy("ls", {"cap_margin": margin})
    r = Engine(platform(4), jobs, policy, cap=CapSchedule.constant(1000.0), predictor=predictor).run()
    assert set(r.jobs["state"]) == {"COMPLETED"}
    return float(r.timeline["power_w"].max())


def test_under_predicted_jobs_push_a_proactive_policy_over_the_cap():
    assert _peak(make_predictor("oracle")) == pytest.approx(1000.0)  # three jobs: 400 + 3 x 200, at the cap
    # every job predicted 40 % low (180 W, an 80 W increment): all four start, 400 + 4 x 200 = 1,200 W
    low = make_predictor("oracle", {"under_share": 1.0, "under_by": 0.4})
    assert _peak(low) == pytest.approx(1200.0)
    # a 1 % margin (plan against 990 W) keeps the true predictions to two jobs
    assert _peak(make_predictor("oracle"), margin=0.01) == pytest.approx(800.0)
