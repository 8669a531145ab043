"""Workload slices: t0 in strata or by load, warm-up and measured jobs, primed history, power profiles."""

import numpy as np
import pytest
from helpers_sweep import KTH

from wattsched.config.platform import platform_from_procs
from wattsched.sweep.slicing import DAY, H, SliceSpec, busiest_t0, load_trace, offered_load, prepare_slice, strata_t0
from wattsched.workload.augment import AugmentParams

PLATFORM = platform_from_procs(100, 1)


def test_strata_put_one_start_in_each_stratum_and_depend_on_the_seed():
    span = 100 * DAY
    t0 = strata_t0(span, 5, warmup_s=DAY, length_s=DAY, min_history_s=10 * DAY, seed=3)
    width = (span - DAY - 10 * DAY) / 5
    assert [int((t - 10 * DAY) // width) for t in t0] == [0, 1, 2, 3, 4]
    assert t0 != strata_t0(span, 5, warmup_s=DAY, length_s=DAY, min_history_s=10 * DAY, seed=4)
    with pytest.raises(ValueError, match="too short"):
        strata_t0(2 * DAY, 3, warmup_s=DAY, length_s=2 * DAY, min_history_s=0, seed=0)


def test_busiest_slices_have_the_highest_offered_load():
    tr = load_trace(str(KTH), 1, 100)
    t0 = busiest_t0(tr, 100, 3, warmup_s=0, length_s=DAY, min_history_s=0)
    grid = np.arange(0, tr.span_s - DAY + 1, DAY)
    loads = sorted((offered_load(tr, 100, s, s + DAY) for s in grid), reverse=True)
    assert sorted((offered_load(tr, 100, s, s + DAY) for s in t0), reverse=True) == pytest.approx(loads[:3])


def test_a_slice_holds_warmup_and_measured_jobs_rebased_and_a_primed_predictor():
    tr = load_trace(str(KTH), 1, 100)
    spec = SliceSpec(str(KTH), 0, 20 * DAY, 12 * H, DAY, 5, 1, prime_history=True)
    prep = prepare_slice(spec, PLATFORM, AugmentParams(), seed=5)
    lo, mid, hi = np.searchsorted(tr.submit, [20 * DAY - 12 * H, 20 * DAY, 21 * DAY])
    assert len(prep.jobs) == hi - lo and prep.info["warmup_jobs"] == mid - lo
    assert min(j.submit_s for j in prep.jobs) >= 0 and max(j.submit_s for j in prep.jobs) < 12 * H + DAY
    assert prep.info["history_jobs"] > 100 and prep.history is not None and prep.history.users_
    assert all(j.mean_w is not None for j in prep.jobs)


def test_a_power_profile_gives_jobs_fluctuating_power_and_keeps_the_seed():
    base = SliceSpec(str(KTH), 0, 20 * DAY, 0.0, DAY, 5, 1)
    prof = SliceSpec(str(KTH), 0, 20 * DAY, 0.0, DAY, 5, 1, profile_step_s=600.0, profile_max_steps=6)
    constant = AugmentParams(profile="constant")
    a = prepare_slice(base, PLATFORM, constant, seed=5).jobs
    b = prepare_slice(prof, PLATFORM, constant, seed=5).jobs  # the slices' profile turns the series on
    c = prepare_slice(prof, PLATFORM, AugmentParams(step_s=60.0, max_steps=50), seed=5).jobs
    assert all(j.power_series is None for j in a)
    over = [j for j in b if j.runtime_s > 1200]
    long = [j for j in over if j.power_series is not None]  # not those whose mean sits at the busy power
    assert len(long) > 0.9 * len(over) > 0 and all(1 < len(j.power_series) <= 6 for j in long)
    assert [j.power_series for j in b] == [j.power_series for j in c]
    for j in long:
        values = [p for _, p in j.power_series]
        assert j.max_w == pytest.approx(max(values))
    assert "profile_step_s" not in base.as_dict() and prof.as_dict()["profile_step_s"] == 600.0


def test_runs_on_a_platform_with_application_models_give_jobs_those_applications():
    from collections import Counter

    from wattsched.sweep.execute import _config, _platform, _whole_trace

    def prepared(spec):
        config = _config(spec)
        return _whole_trace(config, _platform(config, None))

    spec = {"trace": str(KTH), "sim": {"platform": "ahmed2017", "seed": 3}}
    jobs = prepared(spec)
    classes = Counter(j.app_class for j in jobs)
    assert set(classes) == {"qe", "gadget", "seissol", "walberla"}, classes
    assert min(classes.values()) > len(jobs) / 8  # about equal shares
    # a platform without them keeps the augmentation's own classes
    spec = {"trace": str(KTH), "sim": {"procs": 100, "seed": 3}}
    assert {j.app_class for j in prepared(spec)} <= {"cpu", "memory", "mixed"}
