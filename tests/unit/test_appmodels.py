"""Application models: fitting Eqs. 1-2, the packaged set, event files and the generator."""

from __future__ import annotations

import itertools

import pytest

from wattsched.appmodels import (
    FREQ_LEVELS_GHZ,
    PEAK_W_PER_PROC,
    app_class_probs,
    fit_models,
    packaged_fits,
    read_measurements,
)
from wattsched.errors import ConfigError
from wattsched.sim.drevents import generate_events, load_dr_events
from wattsched.sim.platforms import load_platform


def test_a_fit_recovers_known_polynomials_and_reports_its_error(tmp_path):
    rows = ["app,freq_ghz,power_w,time_s"]
    for f in FREQ_LEVELS_GHZ:
        rows.append(f"x,{f},{60 + 5 * f + 3 * f ** 2 + 2 * f ** 3},{900 - 300 * f + 40 * f ** 2}")
    path = tmp_path / "m.csv"
    path.write_text("\n".join(rows) + "\n")
    fit = fit_models(read_measurements(path))["x"]
    m = fit.model
    assert (m.a, m.b, m.c, m.d) == pytest.approx((60, 5, 3, 2), abs=1e-6)
    assert (m.alpha, m.beta, m.gamma) == pytest.approx((900, -300, 40), abs=1e-6)
    assert fit.power_error < 1e-9 and fit.time_error < 1e-9
    assert (m.f_min_ghz, m.f_max_ghz) == (1.2, 2.7)


@pytest.mark.parametrize(("text", "expected"), [
    ("app,freq_ghz,power_w\nx,1.2,100\n", ":1: time_s: missing column"),
    ("app,freq_ghz,power_w,time_s\nx,1.2,100,5\nx,abc,100,5\n", ":3: freq_ghz: not a number"),
    ("app,freq_ghz,power_w,time_s\nx,1.2,-4,5\n", ":2: power_w: must be a positive number"),
    ("app,freq_ghz,power_w,time_s\nx,1.2,100,5\nx,1.4,100,5\nx,1.6,100,5\n", "needs measurements at 4"),
])
def test_bad_measurements_name_file_line_and_key(tmp_path, text, expected):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(ConfigError, match=expected) as info:
        fit_models(read_measurements(path), str(path))
    assert str(path) in str(info.value)


def test_the_packaged_models_follow_the_papers_constraints():
    fits = packaged_fits()
    assert sorted(fits) == ["gadget", "qe", "seissol", "walberla"]
    for fit in fits.values():
        m = fit.model
        assert fit.power_error < 0.015 and fit.time_error < 0.015  # the paper's errors: 0.14-1.01 %, 0.68-1.25 %
        powers = [m.power(f) for f in FREQ_LEVELS_GHZ]
        times = [m.time(f) for f in FREQ_LEVELS_GHZ]
        assert powers == sorted(powers) and max(powers) <= PEAK_W_PER_PROC
        assert times == sorted(times, reverse=True)
        energy = [p * t for p, t in zip(powers, times, strict=True)]
        # about the same energy at both ends, less in between (the paper's Fig. 1(c), §V)
        assert abs(energy[0] / energy[-1] - 1) < 0.1 and min(energy) < 0.93 * energy[-1]


def test_the_packaged_platform_carries_the_packaged_fits():
    plat = load_platform("ahmed2017")
    assert [f / 1e9 for f in plat.nodes[0].power.freq_levels_hz] == list(FREQ_LEVELS_GHZ)
    assert plat.nodes[0].power.busy_w == PEAK_W_PER_PROC
    for app, fit in packaged_fits().items():
        got = plat.response_classes[app]
        for key, value in fit.spec().items():
            if key != "model":
                assert getattr(got, key) == pytest.approx(value, rel=1e-5, abs=1e-5), (app, key)
    assert app_class_probs(plat.response_classes) == {a: 0.25 for a in ("gadget", "qe", "seissol", "walberla")}


def test_event_files_yaml_and_csv(tmp_path):
    y = tmp_path / "ev.yaml"
    y.write_text("demand_response:\n  - {notice_s: 10, start_s: 20, end_s: 30, cap_w: '50%'}\n"
                 "  - {start_s: 40, end_s: 50, reduction_w: 100}\n")
    evs = load_dr_events(y)
    assert [(e.notice_s, e.start_s, e.reduction_w) for e in evs] == [(10, 20, None), (None, 40, 100)]
    c = tmp_path / "ev.csv"
    c.write_text("# events\nnotice_s,start_s,end_s,cap_w,label\n0,10,20,5000,a\n")
    assert load_dr_events(c)[0].cap_w == 5000


@pytest.mark.parametrize(("name", "text", "expected"), [
    ("e.csv", "start_s,end_s,cap_w\n10,20,5000\n30,20,5000\n", "e.csv:3: end_s: must be after start_s"),
    ("e.csv", "start_s,end_s,watts\n", "e.csv:1: watts: unknown column"),
    ("e.csv", "start_s,end_s,cap_w\n10,20\n", "e.csv:2: "),
    ("e.yaml", "- {start_s: 10, end_s: 20, cap_w: 5}\n- {start_s: 10, end_s: 20,\n   notice_s: 15, cap_w: 5}\n",
     "e.yaml:3: notice_s: must not be after start_s"),
    ("e.yaml", "- {start_s: 10, end_s: 20}\n", "e.yaml:1: cap_w: give exactly one target"),
])
def test_bad_event_files_name_file_line_and_key(tmp_path, name, text, expected):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ConfigError, match=expected.replace(name, ".*" + name)):
        load_dr_events(path)


def test_generated_events_cover_the_ratio_without_overlap_and_are_seeded():
    evs = generate_events(10_000.0, 0.4, events=3, notice_s=100.0, seed=5)
    assert evs == generate_events(10_000.0, 0.4, events=3, notice_s=100.0, seed=5)
    assert evs != generate_events(10_000.0, 0.4, events=3, notice_s=100.0, seed=6)
    assert sum(e["end_s"] - e["start_s"] for e in evs) == pytest.approx(4000.0, abs=0.01)
    for a, b in itertools.pairwise(evs):
        assert a["end_s"] <= b["start_s"] + 1e-6
    assert all(e["start_s"] >= 0 and e["end_s"] <= 10_000.0 + 1e-6 for e in evs)
    with pytest.raises(ConfigError, match="--ratio"):
        generate_events(100.0, 1.5)

