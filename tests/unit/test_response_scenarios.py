"""Per-job response scenarios of Borghesi et al. 2018 (§5.1.1, Eq. 4) and the bounded slowdown of Eq. 3.

Engine runs use one node (idle 100 W, busy 300 W: 200 W of dynamic power) and
``simple``, which caps the node at the platform cap; the run times are worked
out by hand from ``D' = D · (1 + F · (1/M − 1))`` (the default reading) or
``D' = max(1, F / M) · D`` (``response_reading: clamped``) with
``M = (cap − idle) / 200``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from builders import platform, tj
from wattsched.errors import ConfigError
from wattsched.model.constraints import CapSchedule
from wattsched.model.response import (
    CPI_RANGES,
    MIXED_F_RANGES,
    CpiResponse,
    LinearResponse,
    ResponseScenario,
)
from wattsched.policies import make_policy
from wattsched.sim.engine import Engine, EngineOptions
from wattsched.sim.metrics import bounded_slowdown_eq3, bsld_settings, summarize

RUNTIME_S = 1000.0


def _run(params: dict, cap_w: float, app_class: str = "cpu", options: EngineOptions | None = None, seed: int = 0,
         jobs=None):
    jobs = jobs or [tj(1, 0.0, RUNTIME_S, walltime=1e6, mean_w=300.0, max_w=300.0, app_class=app_class)]
    policy = make_policy("simple", params)
    return Engine(platform(1), jobs, policy, cap=CapSchedule.constant(cap_w), options=options, seed=seed).run()


def _runtime(result, job_id: int = 1) -> float:
    i = list(result.jobs["id"]).index(job_id)
    return float(result.jobs["runtime_s"][i])


@pytest.mark.parametrize(("f", "cap_w", "expected_s"), [
    (1.0, 200.0, 2000.0),   # M = 0.5: D' = D / M
    (0.5, 200.0, 1500.0),   # 1 + 0.5 · (2 − 1) = 1.5
    (0.75, 150.0, 3250.0),  # M = 0.25: 1 + 0.75 · 3 = 3.25
    (0.25, 250.0, 1000.0 + 250.0 / 3.0),  # M = 0.75: 1 + 0.25 · (1/3)
    (0.25, 200.0, 1250.0),  # M = 0.5: 1 + 0.25 · 1 = 1.25 (the clamped reading: 1000)
    (0.0, 150.0, 1000.0),   # F = 0: the ideal case, duration unaffected
])
def test_linear_factor_slows_the_job_by_f_times_the_proportional_slowdown(f, cap_w, expected_s):
    result = _run({"response": str(f)}, cap_w)
    assert _runtime(result) == pytest.approx(expected_s)
    assert result.jobs["work_s"][0] == pytest.approx(RUNTIME_S)
    # the node draws its cap while the job runs: energy = cap × slowed run time
    assert result.jobs["energy_j"][0] == pytest.approx(cap_w * expected_s)


@pytest.mark.parametrize(("f", "cap_w", "expected_s"), [
    (1.0, 200.0, 2000.0),   # M = 0.5: D' = D / M
    (0.5, 200.0, 1000.0),   # F / M = 1
    (0.75, 150.0, 3000.0),  # M = 0.25: 0.75 / 0.25 = 3
    (0.25, 250.0, 1000.0),  # F / M < 1: never faster than nominal
    (0.0, 150.0, 1000.0),   # F = 0: the ideal case, duration unaffected
])
def test_clamped_reading_slows_the_job_by_f_over_the_dynamic_power_ratio(f, cap_w, expected_s):
    result = _run({"response": str(f), "response_reading": "clamped"}, cap_w)
    assert _runtime(result) == pytest.approx(expected_s)
    assert result.jobs["work_s"][0] == pytest.approx(RUNTIME_S)
    # the node draws its cap while the job runs: energy = cap × slowed run time
    assert result.jobs["energy_j"][0] == pytest.approx(cap_w * expected_s)


def test_without_a_scenario_the_class_model_on_whole_node_power_is_kept():
    # default: the platform's cpu class (F = 1, floor 0.3 of node power), M = 200 / 300
    result = _run({}, 200.0)
    assert _runtime(result) == pytest.approx(RUNTIME_S * 300.0 / 200.0)


def test_the_floor_bounds_the_dynamic_power_a_cap_below_idle_leaves():
    # cap 50 W is below idle: the job keeps its floor of dynamic power; F = 1 gives D' = D · 200 / floor
    assert _runtime(_run({"response": "1", "response_floor_w": 20.0}, 50.0)) == pytest.approx(RUNTIME_S * 10)
    assert _runtime(_run({"response": "1"}, 50.0)) == pytest.approx(RUNTIME_S * 200)  # the paper's 1 W


def test_mixed_draws_f_per_job_by_class_deterministically():
    s = ResponseScenario.parse("mixed", seed=4)
    for cls, (lo, hi) in MIXED_F_RANGES.items():
        fs = [s.for_job(i, cls).f for i in range(200)]
        assert lo <= min(fs) and max(fs) <= hi
        assert max(fs) - min(fs) > 0.5 * (hi - lo)  # spread over the interval, not one value
    assert s.for_job(17, "memory") == s.for_job(17, "memory")
    assert s.for_job(17, "memory") != ResponseScenario.parse("mixed", seed=5).for_job(17, "memory")
    assert s.for_job(3, "site-class") == s.for_job(3, "mixed")  # unknown classes count as mixed


def test_mixed_in_the_engine_slows_each_job_by_its_own_drawn_factor():
    jobs = [tj(i, 0.0, RUNTIME_S, walltime=1e6, mean_w=300.0, max_w=300.0, app_class=c)
            for i, c in ((1, "cpu"), (2, "memory"))]
    # two nodes, cap 400 W split evenly: 200 W per node, M = 0.5 for both jobs all along
    policy = make_policy("simple", {"response": "mixed", "allocation": "even"})
    result = Engine(platform(2), jobs, policy, cap=CapSchedule.constant(400.0), seed=9).run()
    s = ResponseScenario.parse("mixed", seed=9)
    for jid, cls in ((1, "cpu"), (2, "memory")):
        f = s.for_job(jid, cls).f
        assert _runtime(result, jid) == pytest.approx(RUNTIME_S * (1.0 + f * (1 / 0.5 - 1)))
    assert _runtime(result, 1) > _runtime(result, 2) - 1e-9  # cpu-bound jobs suffer more
    assert result.info["response"] == "mixed"


def test_cpi_scenario_uses_eq_4_with_a_cpi_drawn_per_class():
    s = ResponseScenario.parse("cpi", seed=1)
    model = s.for_job(1, "memory")
    assert isinstance(model, CpiResponse)
    assert CPI_RANGES["memory"][0] <= model.cpi <= CPI_RANGES["memory"][1]
    result = _run({"response": "cpi"}, 200.0, app_class="memory", seed=1)
    cpi = model.cpi
    assert _runtime(result) == pytest.approx(RUNTIME_S * (1 - 1 / cpi + 1 / (cpi * 0.5)))


def test_engine_option_overrides_the_policy_parameter():
    options = EngineOptions(response=ResponseScenario.parse("1"))
    assert _runtime(_run({"response": "0"}, 200.0, options=options)) == pytest.approx(2 * RUNTIME_S)


def test_parse_rejects_unknown_and_out_of_range():
    with pytest.raises(ValueError, match="unknown response 'fast'"):
        ResponseScenario.parse("fast")
    with pytest.raises(ValueError, match=r"must be in \[0, 1\], got '1.5'"):
        ResponseScenario.parse("1.5")
    with pytest.raises(ConfigError, match=r"params\.response: unknown response 'bogus'"):
        make_policy("dynshare", {"response": "bogus"})
    assert ResponseScenario.parse("linear:0.25").for_job(1, "cpu") == LinearResponse(f=0.25, reading="interpolated")
    with pytest.raises(ValueError, match="unknown response reading 'literal'"):
        ResponseScenario.parse("0.5", reading="literal")
    with pytest.raises(ConfigError, match=r"response_reading"):
        make_policy("dynshare", {"response": "0.5", "response_reading": "literal"})


def test_policies_of_the_family_take_the_response_parameter():
    for name in ("simple", "dynshare", "dvfs"):
        assert make_policy(name, {"response": "mixed"}).response_scenario.kind == "mixed"
        assert make_policy(name).response_scenario is None
    assert make_policy("easy").response_scenario is None


def test_eq3_counts_the_slowdown_of_a_job_that_did_not_wait():
    # 1000 s of work slowed to 2000 s, no wait: Eq. 3 gives 2, the standard bsld 1
    result = _run({"response": "1"}, 200.0)
    eq3 = summarize(result, bsld_threshold_s=300.0, bsld_definition="borghesi2018")
    std = summarize(result, bsld_threshold_s=300.0)
    assert eq3["mean_bsld"] == pytest.approx(2.0) and eq3["bsld_definition"] == "borghesi2018"
    assert std["mean_bsld"] == pytest.approx(1.0) and std["bsld_definition"] == "standard"
    # short jobs: the threshold bounds the denominator
    b = bounded_slowdown_eq3(np.array([100.0]), np.array([60.0]), np.array([30.0]), 300.0)
    assert b.tolist() == [1.0]
    b = bounded_slowdown_eq3(np.array([500.0]), np.array([60.0]), np.array([30.0]), 300.0)
    assert b.tolist() == pytest.approx([560.0 / 300.0])
    # a job whose nominal work is unknown has no Eq. 3 slowdown (NaN, left out of the means)
    assert math.isnan(bounded_slowdown_eq3(np.array([0.0]), np.array([1.0]), np.array([np.nan]), 1.0)[0])


def test_bsld_defaults_by_policy_family():
    assert bsld_settings("dynshare") == ("borghesi2018", 300.0)
    assert bsld_settings("easy-pc") == ("standard", 10.0)
    assert bsld_settings("dec", threshold_s=60.0) == ("borghesi2018", 60.0)
    with pytest.raises(ValueError, match="unknown bounded slowdown 'x'"):
        summarize(_run({}, 1e9), bsld_definition="x")
