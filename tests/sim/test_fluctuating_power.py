"""Fluctuating job power by default: the cap checks of Carastan-Santos et al. 2024 on the bundled KTH excerpt.

With the oracle predictor at a 50 % cap, as a user runs `wattsched simulate` with its default settings: the
`max` check never lets the real power go above the cap, the `mean` check does (the jobs' power fluctuates
around their means), and `gaussian_99` goes above less than `mean`. With `augment: {profile: constant}` the
`mean` check cannot go over (the real power is the predicted mean).
"""

from __future__ import annotations

import pytest

from builders import BUNDLED_KTH
from wattsched.config import SimConfig
from wattsched.sim.run import run_simulation


def time_above(check: str, trace=BUNDLED_KTH, **extra) -> float:
    config = SimConfig(trace=str(trace), policy="easy-pc", params={"check": check}, predictor="oracle",
                       cap_w="50%", **extra)
    outcome = run_simulation(config, progress=False, write=False, report=False)
    return outcome.summary["time_above_cap_s"]


@pytest.fixture(scope="module")
def above():
    return {check: time_above(check) for check in ("max", "mean", "gaussian_99")}


def test_max_never_goes_above_the_cap(above):
    assert above["max"] == 0.0


def test_mean_goes_above_the_cap_and_gaussian_99_less(above):
    assert above["mean"] > 3600.0  # hours of the 5,000 jobs' replay, not a rounding artefact
    assert above["gaussian_99"] < above["mean"]


def test_constant_power_keeps_the_mean_check_under_the_cap():
    assert time_above("mean", augment={"profile": "constant"}) == 0.0


@pytest.mark.slow
def test_the_whole_kth_trace_shows_the_same(traces_dir):
    """The same three checks on the whole KTH-SP2 trace (28,475 jobs over 11 months)."""
    trace = traces_dir / "KTH-SP2-1996-2.1-cln.swf"
    above = {check: time_above(check, trace=trace) for check in ("max", "mean", "gaussian_99")}
    assert above["max"] == 0.0
    assert above["mean"] > 86400.0
    assert above["gaussian_99"] < above["mean"]
