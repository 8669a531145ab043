"""Capabilities are declared in frozen tags: every registered plugin has them, and the engine reads only them."""

from __future__ import annotations

import dataclasses

import pytest

from builders import platform, tj
from wattsched.errors import PolicyError, PredictorError
from wattsched.model.plan import Plan
from wattsched.policies import UnavailablePolicy, make_policy, policy_class
from wattsched.policies import available as policies
from wattsched.policies.base import BasePolicy, PolicyTags, policy_tags
from wattsched.predictors import UnavailablePredictor, make_predictor, predictor_class
from wattsched.predictors import available as predictors
from wattsched.predictors.base import BasePredictor, PredictorTags, predictor_tags
from wattsched.sim.engine import Engine


def _policy(name, params=None):
    try:
        policy_class(name)
    except UnavailablePolicy as exc:
        pytest.skip(str(exc))
    return make_policy(name, params)


def _predictor(name):
    try:
        predictor_class(name)
    except UnavailablePredictor as exc:
        pytest.skip(str(exc))
    return make_predictor(name)


@pytest.mark.parametrize("name", policies())
def test_every_registered_policy_declares_frozen_policy_tags(name):
    policy = _policy(name)
    tags = policy.tags()
    assert type(tags) is PolicyTags
    assert policy_tags(policy) == tags
    with pytest.raises(dataclasses.FrozenInstanceError):
        tags.maps_units = True


@pytest.mark.parametrize("name", predictors())
def test_every_registered_predictor_declares_frozen_predictor_tags(name):
    predictor = _predictor(name)
    tags = predictor.tags()
    assert type(tags) is PredictorTags
    assert predictor_tags(predictor) == tags
    assert tags.needs_truth == (name == "oracle")
    with pytest.raises(dataclasses.FrozenInstanceError):
        tags.needs_truth = False


@pytest.mark.parametrize(("name", "field", "value"), [
    ("easy", "maps_units", False),
    ("ls", "maps_units", True),
    ("dec", "maps_units", True),
    ("easy-pc", "wants_end_table", True),
    ("easy-saf", "wants_end_table", True),  # inherited from easy-pc
    ("dvfs", "wants_end_table", True),  # through bf, from easy-pc
    ("knapsack", "wants_end_table", True),
    ("easy", "wants_end_table", False),
    ("dynshare", "wants_empty_queue_calls", True),
    ("dr", "wants_empty_queue_calls", True),
    ("easy-pc", "wants_empty_queue_calls", False),
    ("energy-bud", "wants_empty_queue_calls", True),
    ("energy-bud", "tick_period_s", 600.0),
    ("easy-shutdown", "tick_period_s", 600.0),
    ("easy", "tick_period_s", None),
    ("simple", "response_scenario", None),
])
def test_policies_declare_what_they_need(name, field, value):
    assert getattr(_policy(name).tags(), field) == value


def test_tags_follow_the_parameters():
    assert _policy("energy-bud", {"monitoring_period_s": 120.0}).tags().tick_period_s == 120.0
    scenario = _policy("dynshare", {"response": "mixed"}).tags().response_scenario
    assert scenario is not None and scenario.kind == "mixed"


@pytest.mark.parametrize(("name", "field"), [("learned", "takes_clock"), ("learned", "retrain_log")])
def test_the_learned_predictor_takes_a_clock_and_keeps_a_retrain_log(name, field):
    assert getattr(_predictor(name).tags(), field) is True
    assert getattr(_predictor("history").tags(), field) is False


def test_a_plugin_without_tags_gets_the_defaults():
    class Bare:
        name = "bare"

        def init_state(self):
            return None

        def decide(self, snapshot, state=None):
            return Plan()

    assert policy_tags(Bare()) == PolicyTags()
    assert predictor_tags(Bare()) == PredictorTags()


def test_tags_of_the_wrong_type_are_refused_with_the_fix():
    class Wrong(BasePolicy):
        def tags(self):
            return PredictorTags()

    with pytest.raises(PolicyError, match=r"Wrong.tags\(\) returned PredictorTags, not PolicyTags"):
        policy_tags(Wrong())

    class AlsoWrong(BasePredictor):
        def tags(self):
            return PolicyTags()

    with pytest.raises(PredictorError, match="returned PolicyTags, not PredictorTags"):
        predictor_tags(AlsoWrong())


def test_capabilities_as_class_attributes_still_count_with_a_future_warning():
    with pytest.warns(FutureWarning, match=r"override tags\(\).*wants_empty_queue_calls=True"):
        class Old(BasePolicy):
            wants_empty_queue_calls = True

    class Older(Old):
        pass

    assert Older().tags().wants_empty_queue_calls
    assert not Older().tags().wants_end_table


def test_only_an_oracle_takes_the_truth():
    with pytest.raises(PredictorError, match="needs_truth=False"):
        _predictor("history").observe_truth(lambda job_id: None)


def test_the_engine_hands_the_oracle_the_truth_through_observe_truth():
    seen = []

    class Truthful(BasePredictor):
        name = "truthful"

        def tags(self):
            return dataclasses.replace(super().tags(), needs_truth=True)

        def observe_truth(self, truth):
            seen.append(truth)
            self.truth = truth

        def predict(self, jobs):
            out = [self.truth(j.id) for j in jobs]
            predicted.extend(out)
            return out

    predicted = []
    jobs = [tj(1, 0.0, 100.0, mean_w=210.0, max_w=250.0)]
    result = Engine(platform(2), jobs, make_policy("easy"), predictor=Truthful()).run()
    assert len(seen) == 1
    assert [(e.mean_w, e.max_w) for e in predicted] == [(pytest.approx(210.0), pytest.approx(250.0))]
    assert result.info["oracle"] is True
    assert Engine(platform(2), jobs, make_policy("easy"), predictor=make_predictor("history")).run().info[
        "oracle"] is False


def test_the_engine_reads_the_policy_tags():
    class Forecasting(BasePolicy):
        name = "forecasting"

        def tags(self):
            return dataclasses.replace(super().tags(), wants_forecast=True, wants_end_table=True, tick_period_s=50.0)

        def decide(self, snapshot, state=None):
            return Plan()

    engine = Engine(platform(2), [tj(1, 0.0, 100.0)], Forecasting(), options=None)
    assert engine.policy_tags.tick_period_s == 50.0
    assert engine.ledger.end_table is not None
    assert engine._forecast_horizon_s == 7200.0
    plain = Engine(platform(2), [tj(1, 0.0, 100.0)], make_policy("easy"))
    assert plain.ledger.end_table is None and plain._forecast_horizon_s is None
