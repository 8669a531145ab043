import pytest

import wattsched.policies as registry
from wattsched.errors import PolicyError
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


def test_params_are_typed():
    assert make_policy("easy", {"order": "saf"}).params.order == "saf"
