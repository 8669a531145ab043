"""The history predictor against Eqs. 1-3 worked out by hand."""

import pytest

from builders import platform
from wattsched.model.job import Job
from wattsched.predictors import make_predictor
from wattsched.predictors.base import CompletedJob


def done(user, end, mean, mx=None, std=0.0, jid=0):
    job = Job(jid, 0.0, 100.0, 1, user=user)
    return CompletedJob(job, 0.0, end, mean, mx if mx is not None else mean, std)


def job(user, submit, jid=99):
    return Job(jid, submit, 100.0, 2, user=user)


def hist(**params):
    return make_predictor("history", params).setup(platform(2))


def test_whole_history_weights_by_age_squared():
    p = hist()
    for c in (done("a", 100, 200.0, 250.0, 10.0), done("a", 200, 300.0, 320.0, 20.0),
              done("a", 400, 100.0, 150.0, 5.0)):
        p.update(c)
    # s = r - C_first = 500 - 100; theta = ((C - 100) / 400)^2 -> 0, 1/16, 9/16
    w = [0.0, 1 / 16, 9 / 16]
    expect_mean = (w[1] * 300 + w[2] * 100) / (w[1] + w[2])
    est = p.predict([job("a", 500.0)])[0]
    assert est.mean_w == pytest.approx(expect_mean)
    assert est.max_w == pytest.approx((w[1] * 320 + w[2] * 150) / (w[1] + w[2]))
    assert est.std_w == pytest.approx((w[1] * 20 + w[2] * 5) / (w[1] + w[2]))


def test_alpha_one_is_linear_aging():
    p = hist(alpha=1)
    for c in (done("a", 0, 100.0), done("a", 100, 200.0), done("a", 300, 400.0)):
        p.update(c)
    # weights proportional to C - C_first: 0, 100, 300
    assert p.predict([job("a", 1000.0)])[0].mean_w == pytest.approx((100 * 200 + 300 * 400) / 400)


def test_finite_window_excludes_old_jobs_and_ages_within_it():
    p = hist(window_s=100.0)
    for c in (done("a", 0, 1000.0), done("a", 150, 200.0), done("a", 190, 300.0)):
        p.update(c)
    # r = 200: window [100, 200]; theta = (1 - (200 - C)/100)^2 -> C=150: 0.25, C=190: 0.81
    est = p.predict([job("a", 200.0)])[0]
    assert est.mean_w == pytest.approx((0.25 * 200 + 0.81 * 300) / (0.25 + 0.81))


def test_single_completed_job_is_its_own_prediction():
    p = hist()
    p.update(done("a", 50, 222.0))
    assert p.predict([job("a", 60.0)])[0].mean_w == pytest.approx(222.0)


def test_users_are_separate_and_new_users_fall_back():
    p = hist()
    p.update(done("a", 10, 100.0))
    p.update(done("b", 20, 300.0))
    p.update(done("b", 30, 300.0))
    assert p.predict([job("a", 40.0)])[0].mean_w == pytest.approx(100.0)
    # global fallback: the same formula over everyone's jobs: weights (20-10)^2, (30-10)^2 on 300 W
    assert p.predict([job("c", 40.0)])[0].mean_w == pytest.approx(300.0)
    naive = hist(fallback="naive")
    naive.update(done("a", 10, 100.0))
    assert naive.predict([job("c", 40.0)])[0].mean_w == pytest.approx(300.0)  # SIMPLE_POWER busy_w
    empty = hist()
    assert empty.predict([job("z", 0.0)])[0].max_w == pytest.approx(300.0)


def test_no_leakage_in_a_simulation():
    """A job's prediction is made at its submission and ignores jobs that complete later."""
    from builders import tj
    from wattsched.policies import make_policy
    from wattsched.sim.engine import Engine

    jobs = [
        tj(1, 0, 10, user="a", mean_w=150.0, max_w=150.0, std_w=0.0),
        tj(2, 5, 10, user="a", mean_w=250.0, max_w=250.0, std_w=0.0),   # submitted before job 1 ends
        tj(3, 20, 10, user="a", mean_w=290.0, max_w=290.0, std_w=0.0),  # after jobs 1 and 2 ended
    ]
    seen = {}

    class Spy(make_policy("easy").__class__):
        def decide(self, snapshot, state=None):
            for j in snapshot.pending.values():
                seen.setdefault(j.id, snapshot.estimate(j).mean_w)
            return super().decide(snapshot, state)

    Engine(platform(1), jobs, Spy(), predictor=make_predictor("history")).run()
    assert seen[1] == pytest.approx(300.0)  # nothing completed: the node maximum (global fallback empty)
    assert seen[2] == pytest.approx(300.0)  # job 1 still running at t=5
    # by t=20 jobs 1 (ended 10) and 2 (ended 20) completed: weights 0 and 1 -> 250 W, not 290
    assert seen[3] == pytest.approx(250.0)


def test_predictions_follow_each_completion():
    # the whole-history estimate is kept per user between completions, and dropped by the next one
    p = hist()
    assert p.predict([job("a", 0)])[0].mean_w == p.platform_.nodes[0].power.busy_w  # no history at all
    p.update(done("b", 100, 150.0))
    first = p.predict([job("a", 150), job("b", 150)])
    assert [e.mean_w for e in first] == [150.0, 150.0]  # a: the global history
    p.update(done("a", 200, 250.0, 260.0, 4.0))
    p.update(done("a", 300, 210.0, 230.0, 2.0))
    after = p.predict([job("a", 400), job("b", 400)])
    assert after[0].mean_w == pytest.approx(210.0) and after[1].mean_w == 150.0  # weights 0 and 1
    assert after[0] == p.predict([job("a", 500)])[0]
