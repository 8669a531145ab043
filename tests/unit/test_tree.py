"""The ``per-user-tree`` predictor (Borghesi et al. 2018, §4.1): per-user models, the new-user model, GPUs."""

from __future__ import annotations

import dataclasses

import pytest

pytest.importorskip("sklearn")

from builders import SIMPLE_POWER, platform
from wattsched.model.job import Job
from wattsched.model.platform import Platform
from wattsched.predictors import make_predictor
from wattsched.predictors.base import CompletedJob
from wattsched.predictors.tree import PerUserTreePredictor

_ids = iter(range(1, 1_000_000))


def job(user: str, nodes: int = 1, t: float = 0.0, gpus: int = 0, walltime: float = 3600.0, **kw) -> Job:
    return Job(next(_ids), t, walltime, nodes, user=user, procs=nodes, gpus_per_node=gpus, **kw)


def done(j: Job, mean: float, mx: float | None = None, std: float = 0.0) -> CompletedJob:
    return CompletedJob(j, j.submit_s, j.submit_s + 60.0, mean, mean if mx is None else mx, std)


def test_no_model_before_enough_jobs_gives_the_node_maximum():
    pred = PerUserTreePredictor().setup(platform(4))
    for _ in range(4):
        pred.update(done(job("a"), 150.0))
    assert pred.model_for(job("a")) is None
    est = pred.predict([job("a")])[0]
    assert (est.mean_w, est.max_w, est.std_w) == (SIMPLE_POWER.busy_w, SIMPLE_POWER.busy_w, 0.0)


def test_per_user_model_once_the_user_has_enough_jobs():
    pred = PerUserTreePredictor(global_retrain_every=10_000).setup(platform(4))
    for _ in range(5):
        pred.update(done(job("b"), 150.0, 170.0, 4.0))
    pred.predict([job("c")])  # a newcomer: trains the global model, on b's jobs only
    for _ in range(4):
        pred.update(done(job("a"), 250.0, 280.0, 9.0))
        est = pred.predict([job("a")])[0]
        assert "a" not in pred.user_models_
        assert est.mean_w == pytest.approx(150.0)  # the global model, which only knows b
    pred.update(done(job("a"), 250.0, 280.0, 9.0))
    est = pred.predict([job("a")])[0]
    assert pred.model_for(job("a")) is pred.user_models_["a"]
    assert (est.mean_w, est.max_w, est.std_w) == pytest.approx((250.0, 280.0, 9.0))


def test_a_user_model_learns_the_request():
    pred = PerUserTreePredictor(min_samples_leaf=1).setup(platform(8))
    for k in range(12):
        nodes = 1 + k % 4
        pred.update(done(job("a", nodes=nodes), 100.0 + 30.0 * nodes))
    for nodes in (1, 2, 3, 4):
        assert pred.predict([job("a", nodes=nodes)])[0].mean_w == pytest.approx(100.0 + 30.0 * nodes)


def test_user_models_retrain_after_retrain_every_new_jobs():
    pred = PerUserTreePredictor(retrain_every=3, global_retrain_every=10_000).setup(platform(4))
    for _ in range(5):
        pred.update(done(job("a"), 150.0))
    pred.predict([job("a")])
    first = pred.user_models_["a"]
    for _ in range(2):
        pred.update(done(job("a"), 200.0))
        pred.predict([job("a")])
        assert pred.user_models_["a"] is first  # 5 + 2 completions: not yet
    pred.update(done(job("a"), 200.0))
    est = pred.predict([job("a")])[0]
    assert pred.user_models_["a"] is not first and pred.user_models_["a"].n_at == 8
    assert est.mean_w == pytest.approx((5 * 150.0 + 3 * 200.0) / 8)


def test_new_users_get_the_global_model_trained_on_everyone():
    pred = PerUserTreePredictor(global_retrain_every=4, min_samples_leaf=1).setup(platform(8))
    for _ in range(5):
        pred.update(done(job("a", nodes=1), 120.0))
    newcomer = job("z", nodes=1)
    first = pred.model_for(newcomer)
    assert first is pred.global_model_ and first.n_at == 5
    assert pred.predict([newcomer])[0].mean_w == pytest.approx(120.0)
    for _ in range(4):
        pred.update(done(job("b", nodes=6), 280.0))
    second = pred.model_for(job("z", nodes=6))
    assert second is pred.global_model_ and second is not first and second.n_at == 9
    assert "b" not in pred.user_models_  # b has 4 jobs: below min_user_jobs
    assert pred.predict([job("z", nodes=6)])[0].mean_w == pytest.approx(280.0)


def test_gpu_share_is_added_on_top_of_the_cpu_prediction():
    power = dataclasses.replace(SIMPLE_POWER, gpu_tdp_w=300.0)
    plat = Platform.homogeneous_cluster(4, power=power, gpus=4)
    pred = PerUserTreePredictor().setup(plat)
    for _ in range(5):  # 2 GPUs at TDP: 600 W, the CPU part 200 W
        pred.update(done(job("g", gpus=2), 800.0, 850.0, 10.0))
    est = pred.predict([job("g", gpus=4)])[0]
    assert est.mean_w == pytest.approx(200.0 + 4 * 300.0)
    assert est.max_w == pytest.approx(250.0 + 4 * 300.0)
    assert est.std_w == pytest.approx(10.0)
    cpu_only = pred.predict([job("g", gpus=0)])[0]
    assert cpu_only.mean_w == pytest.approx(200.0)


def test_predictions_are_clipped():
    pred = PerUserTreePredictor().setup(platform(4))
    for _ in range(5):
        pred.update(done(job("a"), 900.0, 100.0, -5.0))  # beyond the node, max below mean, negative std
    est = pred.predict([job("a")])[0]
    assert (est.mean_w, est.max_w, est.std_w) == (SIMPLE_POWER.busy_w, SIMPLE_POWER.busy_w, 0.0)


def test_deterministic_forest():
    def run():
        pred = make_predictor("per-user-tree", {"model": "forest", "n_estimators": 5, "random_state": 1})
        pred.setup(platform(8))
        out = []
        for k in range(40):
            j = job(f"u{k % 3}", nodes=1 + k % 5, t=float(k), walltime=600.0 * (1 + k % 7), partition=f"p{k % 2}")
            out.append(pred.predict([j])[0])
            pred.update(done(j, 100.0 + 20.0 * (k % 5) + 3.0 * (k % 7), std=float(k % 4)))
        return out

    first = run()
    assert first == run()
    assert len({e.mean_w for e in first}) > 3  # it does learn something
