"""The ``learned`` predictor: history fallback, weekly retraining, accuracy, determinism, no leakage."""

from __future__ import annotations

import heapq

import numpy as np
import pytest

pytest.importorskip("sklearn")

from builders import SIMPLE_POWER, platform
from wattsched.model.job import Job
from wattsched.predictors import make_predictor
from wattsched.predictors.base import CompletedJob
from wattsched.predictors.history import HistoryPredictor
from wattsched.predictors.learned import WEEK_S, LearnedPredictor

FAST = {"model": "linear", "min_train_jobs": 20, "search_max_jobs": 400}


def workload(n_jobs: int = 1500, span_s: float = 3.5 * WEEK_S, seed: int = 0, noise_w: float = 3.0):
    """Jobs whose power depends on their nodes and requested time, not on their user.

    Returns ``[(job, runtime_s, (mean, max, std))]`` in submission order.
    """
    rng = np.random.default_rng(seed)
    submits = np.sort(rng.uniform(0, span_s, n_jobs))
    out = []
    for i, s in enumerate(submits):
        nodes = int(rng.integers(1, 9))
        walltime = float(rng.uniform(600, 4 * 3600))
        runtime = walltime * float(rng.uniform(0.2, 1.0))
        mean = min(110.0 + 15.0 * nodes + walltime / 200.0 + float(rng.normal(0, noise_w)), 300.0)
        power = (mean, min(mean * 1.1, 300.0), 0.05 * mean)
        job = Job(i, float(s), walltime, nodes, user=f"u{int(rng.integers(8))}", procs=nodes)
        out.append((job, runtime, power))
    return out


def replay(pred, jobs, stop_s: float | None = None):
    """Feed ``jobs`` to ``pred`` in time order (completions first at equal times); predictions by job id."""
    pred.setup(platform(8))
    ends: list = []
    out = {}
    for job, runtime, (mean, mx, std) in jobs:
        if stop_s is not None and job.submit_s > stop_s:
            break
        while ends and ends[0][0] <= job.submit_s:
            _, _, done = heapq.heappop(ends)
            pred.update(done)
        out[job.id] = pred.predict([job])[0]
        end = job.submit_s + runtime
        heapq.heappush(ends, (end, job.id, CompletedJob(job, job.submit_s, end, mean, mx, std)))
    return out


def mae(preds, jobs, start=0):
    return float(np.mean([abs(preds[j.id].mean_w - p[0]) for j, _, p in jobs[start:] if j.id in preds]))


def test_falls_back_to_history_before_the_first_retraining():
    jobs = [j for j in workload(600) if j[0].submit_s < WEEK_S]
    learned = replay(LearnedPredictor(FAST), jobs)
    history = replay(HistoryPredictor(), jobs)
    assert learned == history  # identical PowerEstimates, job by job


def test_too_few_jobs_at_a_boundary_keeps_the_history_prediction():
    jobs = workload(300, span_s=1.5 * WEEK_S)
    pred = LearnedPredictor({**FAST, "min_train_jobs": 10_000})
    assert replay(pred, jobs) == replay(HistoryPredictor(), jobs)
    assert pred.models_ is None and pred.retrain_log_ == []


def test_retrains_at_each_week_boundary_on_jobs_completed_before_it():
    jobs = workload()
    pred = LearnedPredictor(FAST, clock=iter(range(1000)).__next__)
    replay(pred, jobs)
    log = pred.retrain_log_
    assert [r["at_s"] for r in log] == [WEEK_S, 2 * WEEK_S, 3 * WEEK_S]
    for r in log:
        completed = sum(1 for j, rt, _ in jobs if j.submit_s + rt < r["at_s"])
        assert r["n_train"] == completed  # Eq. 4: C_j < t(w)
        assert r["seconds"] == 1  # the injected clock ticks once per call
        assert set(r["chosen"]) == {"mean", "max", "std"} and r["chosen"]["mean"]["features"]
    # after a boundary the predictions are the model's, not the history's
    history = replay(HistoryPredictor(), jobs)
    learned = replay(LearnedPredictor(FAST), jobs)
    late = [j.id for j, _, _ in jobs if j.submit_s >= WEEK_S]
    assert all(learned[i] != history[i] for i in late[:50])


def test_custom_period_and_no_clock():
    jobs = workload(400, span_s=4 * 86400.0)
    pred = LearnedPredictor({**FAST, "retrain_period_s": 86400.0})
    replay(pred, jobs)
    assert [r["at_s"] for r in pred.retrain_log_] == [86400.0, 2 * 86400.0, 3 * 86400.0]
    assert all(r["seconds"] is None for r in pred.retrain_log_)


@pytest.mark.parametrize("model", ["linear", "random_forest", "linear_svr", "sgd"])
def test_beats_naive_and_history_when_power_follows_the_request(model):
    jobs = workload(1500)
    params = {**FAST, "model": model, "n_estimators": 10}
    if model == "random_forest":
        params.update(rfe=False, cv_folds=0)  # keep the test fast; the search is covered elsewhere
    learned = replay(make_predictor("learned", params), jobs)
    naive = replay(make_predictor("naive"), jobs)
    history = replay(make_predictor("history"), jobs)
    start = next(i for i, (j, _, _) in enumerate(jobs) if j.submit_s >= WEEK_S)
    m_learned, m_naive, m_history = (mae(p, jobs, start) for p in (learned, naive, history))
    assert m_learned < 0.5 * m_history < m_naive
    assert m_learned < 10.0


def test_predictions_are_clipped_to_the_node_range():
    jobs = workload(800, span_s=1.5 * WEEK_S)
    preds = replay(LearnedPredictor(FAST), jobs)
    node_max = SIMPLE_POWER.busy_w
    for est in preds.values():
        assert 0.0 <= est.mean_w <= est.max_w <= node_max
        assert 0.0 <= est.std_w <= node_max


def test_deterministic_with_a_random_forest_and_the_search():
    jobs = workload(700, span_s=1.3 * WEEK_S)
    params = {"model": "random_forest", "n_estimators": 5, "min_train_jobs": 20, "search_max_jobs": 200,
              "random_state": 3}
    a, b = LearnedPredictor(params), LearnedPredictor(params)
    pa, pb = replay(a, jobs), replay(b, jobs)
    assert pa == pb
    assert a.retrain_log_ == b.retrain_log_ and len(a.retrain_log_) == 1
    chosen = a.retrain_log_[0]["chosen"]["mean"]
    assert "cv_mse" in chosen and set(chosen["params"]) == {"max_depth", "min_samples_leaf"}


def test_no_leakage_from_jobs_completing_after_a_submission():
    """Jobs completing after time T cannot change any prediction made at or before T."""
    jobs = workload(900, span_s=2.2 * WEEK_S)
    cut = 1.6 * WEEK_S
    altered = [
        (j, rt, (p[0] * 0.5, p[1] * 0.5, p[2] * 3) if j.submit_s + rt > cut else p) for j, rt, p in jobs
    ]
    a = replay(LearnedPredictor(FAST), jobs)
    b = replay(LearnedPredictor(FAST), altered)
    before = [j.id for j, _, _ in jobs if j.submit_s <= cut]
    after = [j.id for j, _, _ in jobs if j.submit_s > 2 * WEEK_S]
    assert [a[i] for i in before] == [b[i] for i in before]
    assert [a[i] for i in after] != [b[i] for i in after]  # the alteration does matter later


def test_retraining_ignores_completions_after_the_boundary():
    """Eq. 4: the model of week w+1 learns only jobs completed before t(w), whenever it is triggered."""
    jobs = [j for j in workload(600, span_s=1.0 * WEEK_S)]
    late = Job(10_000, WEEK_S + 5.0, 600.0, 8, user="intruder", procs=8)
    probe = Job(10_001, WEEK_S + 10.0, 600.0, 2, user=jobs[0][0].user, procs=2)
    plain, intruded = LearnedPredictor(FAST), LearnedPredictor(FAST)
    replay(plain, jobs)
    replay(intruded, jobs)
    intruded.update(CompletedJob(late, late.submit_s, WEEK_S + 6.0, 299.0, 300.0, 100.0))
    assert plain.predict([probe]) == intruded.predict([probe])
    assert plain.retrain_log_[0]["n_train"] == intruded.retrain_log_[0]["n_train"]


def test_training_rows_are_the_features_at_submission():
    plat = platform(8)
    pred = LearnedPredictor(FAST).setup(plat)
    first = Job(1, 0.0, 3600.0, 2, user="a", procs=2)
    pred.update(CompletedJob(first, 0.0, 100.0, 200.0, 220.0, 5.0))
    job = Job(2, 200.0, 3600.0, 4, user="a", procs=4)
    pred.predict([job])
    at_submission = pred.feature_row(job)
    pred.update(CompletedJob(Job(3, 150.0, 60.0, 1, user="a", procs=1), 150.0, 250.0, 100.0, 110.0, 1.0))
    assert pred.feature_row(job) == at_submission  # stored, not recomputed with the later history
    pred.update(CompletedJob(job, 200.0, 300.0, 250.0, 260.0, 2.0))
    rows, targets = pred.training_data()
    assert rows[-1].tolist() == [200.0 / 3600.0, 4, 4, 3600.0, 200.0, 220.0, 5.0, 0.0, 200.0]
    assert targets[-1].tolist() == [250.0, 260.0, 2.0]
    assert len(pred.training_data(before_s=300.0)[0]) == 2  # C_j < 300: not the job that ended at 300
    assert at_submission["history_w"] == 200.0 and at_submission["last_job_w"] == 200.0
    assert at_submission["procs"] == 4 and at_submission["walltime_s"] == 3600.0
    fresh = LearnedPredictor(FAST).setup(plat)
    fresh.update(CompletedJob(first, 0.0, 100.0, 200.0, 220.0, 5.0))
    fresh.update(CompletedJob(Job(3, 150.0, 60.0, 1, user="a", procs=1), 150.0, 250.0, 100.0, 110.0, 1.0))
    assert fresh.feature_row(job)["last_job_w"] == 100.0  # what recomputing would have given


def test_hour_of_day_uses_the_time_origin():
    plat = platform(2)
    job = Job(1, 3600.0, 60.0, 1, user="a")
    assert LearnedPredictor().setup(plat).feature_row(job)["hour_of_day"] == 1.0
    origin = 86400.0 * 100 + 22 * 3600.0  # 22:00 UTC
    assert LearnedPredictor(time_origin_s=origin).setup(plat).feature_row(job)["hour_of_day"] == 23.0


def test_params_are_validated_and_listed():
    from wattsched.errors import ConfigError

    with pytest.raises(ConfigError, match=r"predictor_params.model"):
        make_predictor("learned", {"model": "xgboost"})
    pred = make_predictor("learned", {"model": "sgd"})
    assert pred.get_params()["model"] == "sgd" and pred.get_params()["retrain_period_s"] == WEEK_S
    assert repr(pred).startswith("LearnedPredictor(model='sgd'")
