import pytest

import wattsched.policies as registry
from wattsched.errors import MissingDependencyError, PolicyError
from wattsched.policies import UnavailablePolicy, available, make_policy, policy_class


def test_builtin_names():
    assert {"fcfs", "easy"} <= set(available())
    assert policy_class("easy").name == "easy"


def test_unknown_policy_lists_the_available_ones():
    with pytest.raises(PolicyError, match=r"unknown policy 'nope'; available: fcfs, easy"):
        policy_class("nope")


def test_missing_optional_dependency_keeps_the_name_and_explains(monkeypatch):
    monkeypatch.setitem(registry._BUILTIN, "cpsat", "wattsched_missing_ortools_module:CpPolicy")
    assert "cpsat" in available()
    with pytest.raises(UnavailablePolicy, match=r"policy 'cpsat' needs wattsched_missing_ortools_module"):
        make_policy("cpsat")


def test_a_missing_plugin_dependency_is_the_one_missing_dependency_error(monkeypatch):
    import wattsched.predictors as predictors

    monkeypatch.setitem(registry._BUILTIN, "cpsat", "wattsched_missing_ortools_module:CpPolicy")
    monkeypatch.setitem(predictors._BUILTIN, "gbm", "wattsched_missing_lightgbm_module:GbmPredictor")
    with pytest.raises(MissingDependencyError, match=r"policy 'cpsat' needs wattsched_missing_ortools_module"):
        policy_class("cpsat")
    with pytest.raises(MissingDependencyError, match=r"predictor 'gbm' needs wattsched_missing_lightgbm_module"):
        predictors.predictor_class("gbm")


def test_params_are_typed():
    assert make_policy("easy", {"order": "saf"}).params.order == "saf"


def test_a_sweep_without_dask_is_the_one_missing_dependency_error(monkeypatch):
    import sys

    from wattsched.sweep import require_dask

    for name in ("dask", "distributed"):
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(MissingDependencyError, match=r"pip install 'wattsched\[sweep\]'"):
        require_dask()
