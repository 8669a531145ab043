"""Bad inputs, second tour: one regression test per case (named after its id), by class.

1. semantic warnings: a run goes on, with a warning on stderr and a note in its summary;
2. bounded generators and grids: above a stated bound, refused, naming the bound and its override;
3. validation across fields: refused at once, naming the file, line and key.
"""

from __future__ import annotations

import gzip
import json
import logging
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builders import cli, kth_excerpt, read_summary
from wattsched.config import SimConfig
from wattsched.config.platform import platform_from_procs
from wattsched.errors import ConfigError
from wattsched.model.constraints import DemandResponseEvent, EnergyBudget
from wattsched.sim.build import build_run
from wattsched.sim.checks import budget_notes, dr_event_notes, outside_trace_notes


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    """The bundled KTH excerpt's header and its first 200 jobs (submissions over about 60 h)."""
    return kth_excerpt(tmp_path_factory.mktemp("bad2"))


def notes_of(config: SimConfig, caplog) -> list[str]:
    from wattsched.sim import checks

    checks._LOGGED.clear()
    with caplog.at_level(logging.WARNING, logger="wattsched.sim.run"):
        run = build_run(config)
    notes = run.info.get("notes", [])
    for note in notes:
        assert note in run.trace.workload.notes  # a note of the run's summary
        assert note in caplog.text  # logged as well as kept
    return notes


# --------------------------------------------------------------------------- 1. semantic warnings


def test_bad_input_05_budget_below_idle_energy(base, caplog):
    config = SimConfig(trace=str(base), policy="energy-bud", energy_budgets=[
        {"start_s": 0, "end_s": 86400, "energy_j": 5e8}, {"start_s": 43200, "end_s": 129600, "energy_j": 4e8}])
    notes = notes_of(config, caplog)
    assert any(n.startswith("energy_budgets[0]: the budget of 5e+08 J is below the platform's idle energy")
               for n in notes), notes
    assert any(n.startswith("energy_budgets[1]:") for n in notes)


def test_bad_input_06_budget_ignored_by_policy(base, caplog):
    config = SimConfig(trace=str(base), policy="easy", energy_budgets=[{"start_s": 0, "end_s": 86400,
                                                                        "energy_j": 1e12}])
    notes = notes_of(config, caplog)
    assert notes == ["policy easy ignores the energy budget of this run (energy_budgets): no decision respects it "
                     "(the outputs still measure the run against it); for one that does, use energy-bud, reduce-pc, "
                     "powercap-easy or easy-shutdown"]
    # a policy that plans against budgets gets no such note
    assert notes_of(config.model_copy(update={"policy": "energy-bud"}), caplog) == []
    # many runs in one process (a sweep's worker): the note in each run, the warning logged once
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="wattsched.sim.run"):
        runs = [build_run(config) for _ in range(3)]
    assert all(r.info["notes"] == notes for r in runs) and caplog.text.count("policy easy ignores") == 1


def test_bad_input_06_every_builtin_policy_declares_its_constraints():
    from wattsched.policies import available, make_policy
    from wattsched.policies.base import policy_tags

    for name in available():
        uses = policy_tags(make_policy(name)).constraints
        assert isinstance(uses, frozenset) and uses <= {"cap", "budgets", "dr_events"}, name


def test_bad_input_08_budget_window_after_trace(base, caplog):
    config = SimConfig(trace=str(base), policy="energy-bud",
                       energy_budgets=[{"start_s": 1e15, "end_s": 1e16, "energy_j": 1e30}])
    notes = notes_of(config, caplog)
    assert any(n.startswith("energy_budgets[0]: the budget window (1e+15 s to 1e+16 s) starts after the trace's "
                            "last submission") for n in notes), notes


def test_bad_input_10_budget_window_before_trace(base, caplog):
    config = SimConfig(trace=str(base), policy="energy-bud",
                       energy_budgets=[{"start_s": -1e6, "end_s": -10, "energy_j": 1e30}])
    notes = notes_of(config, caplog)
    assert notes == ["energy_budgets[0]: the budget window (-1,000,000 s to -10 s) ends before the trace's first "
                     "submission (t = 0): the clock starts at -1,000,000 s, which stretches the run and lowers its "
                     "utilization; times count from the first submission"]


def test_bad_input_12_dr_reduction_above_platform_power(base, caplog):
    config = SimConfig(trace=str(base), policy="dr", platform="ahmed2017", demand_response=[
        {"notice_s": 0, "start_s": 3600, "end_s": 7200, "reduction_w": 1e9}])
    notes = notes_of(config, caplog)
    assert any(n.startswith("demand_response[0]: the reduction of 1,000,000,000 W is at or above the platform's "
                            "maximum power") and "below the idle power" in n for n in notes), notes


def test_bad_input_15_dr_event_before_trace(base, caplog):
    config = SimConfig(trace=str(base), policy="dr", platform="ahmed2017", demand_response=[
        {"notice_s": -20000, "start_s": -10000, "end_s": -5000, "reduction_w": 1000}])
    notes = notes_of(config, caplog)
    assert any(n.startswith("demand_response[0]: the event (-20,000 s to -5,000 s) ends before the trace's first "
                            "submission") for n in notes), notes


def test_bad_input_06_warning_on_stderr_and_in_summary(base, tmp_path):
    (tmp_path / "sim.yaml").write_text(f"trace: {base}\npolicy: easy\n"
                                       "energy_budgets: [{start_s: 0, end_s: 86400, energy_j: 1.0e+8}]\n")
    proc = cli("simulate", "--config", "sim.yaml", "--out", "r", "-q", "--no-report", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "policy easy ignores the energy budget of this run" in proc.stderr
    assert "below the platform's idle energy" in proc.stderr
    summary = json.dumps(read_summary(tmp_path / "r"))
    assert "policy easy ignores the energy budget of this run" in summary


@settings(max_examples=60, deadline=None)
@given(nodes=st.integers(1, 50), start=st.floats(-1e7, 1e7), length=st.floats(1, 1e7),
       joules=st.floats(1, 1e12), span=st.floats(0, 1e7))
def test_bad_input_class_1_budget_notes_match_their_rule(nodes, start, length, joules, span):
    platform = platform_from_procs(nodes)
    budget = EnergyBudget(start, start + length, joules)
    below = joules < platform.idle_power_w * length
    assert bool(budget_notes([budget], platform)) == below
    outside = start + length <= 0 or start > span
    assert bool(outside_trace_notes([budget], [], span)) == outside


@settings(max_examples=60, deadline=None)
@given(nodes=st.integers(1, 50), target=st.floats(1, 1e6), reduction=st.booleans())
def test_bad_input_class_1_dr_notes_match_their_rule(nodes, target, reduction):
    platform = platform_from_procs(nodes)
    idle_w, max_w = platform.idle_power_w, platform.max_power_w
    kw = {"reduction_w": target} if reduction else {"cap_w": target}
    notes = dr_event_notes([DemandResponseEvent(0.0, 10.0, 20.0, **kw)], platform)
    lowest = max_w - target if reduction else target
    assert bool(notes) == (lowest < idle_w or (not reduction and target >= max_w))


# --------------------------------------------------------------------------- 3. validation across fields


def test_bad_input_99_monitoring_period_refused_up_front(base):
    config = SimConfig(trace=str(base), policy="energy-bud", params={"monitoring_period_s": 1e-9})
    with pytest.raises(ConfigError, match=r"params\.monitoring_period_s: a monitoring period of 1e-09 s over the "
                                          r"trace's .*\(--param monitoring_period_s=SECONDS\).*--max-ticks N"):
        build_run(config)


def test_bad_input_99_named_as_the_option_on_the_command_line(base, tmp_path):
    (tmp_path / "sim.yaml").write_text(f"trace: {base}\npolicy: energy-bud\n"
                                       "energy_budgets: [{start_s: 0, end_s: 86400, energy_j: 1.0e+12}]\n")
    proc = cli("simulate", "--config", "sim.yaml", "--param", "monitoring_period_s=1e-9", "--out", "r", "-q",
               "--no-report", cwd=tmp_path, timeout=30)
    assert proc.returncode == 2, proc.stderr
    assert "monitoring_period_s: a monitoring period of 1e-09 s" in proc.stderr
    assert "Traceback" not in proc.stderr and "tick_s" not in proc.stderr.split("(--max-ticks")[0]


def test_bad_input_31_tz_environment_naming_an_unknown_zone(tmp_path, monkeypatch):
    from wattsched.config import load_config
    from wattsched.config.daemon import DaemonConfig

    path = tmp_path / "d.yaml"
    path.write_text("slurm: {backend: sim}\ncap_schedule: [{every: 'daily 08:00-09:00', cap_w: 5000}]\n")
    monkeypatch.setenv("TZ", "Narnia/Cair_Paravel")
    with pytest.raises(ConfigError, match=r"d\.yaml(:\d+)?: timezone: unknown time zone 'Narnia/Cair_Paravel' "
                                          r"\(from the TZ environment variable"):
        load_config(path, DaemonConfig, env={})
    # the same name in the key is the same error
    keyed = tmp_path / "k.yaml"
    keyed.write_text("slurm: {backend: sim}\ntimezone: Narnia/Cair_Paravel\n")
    with pytest.raises(ConfigError, match=r"k\.yaml:2: timezone: unknown time zone 'Narnia/Cair_Paravel'"):
        load_config(keyed, DaemonConfig, env={})
    # a known zone, a zone file (':/etc/localtime' style) and no TZ at all are fine
    for tz in ("Europe/Paris", "UTC"):
        monkeypatch.setenv("TZ", tz)
        assert load_config(path, DaemonConfig, env={}).zone.key == tz
    monkeypatch.delenv("TZ")
    assert load_config(path, DaemonConfig, env={}).zone.key == "UTC"


def test_bad_input_119_daemon_cap_schedule_file_missing(tmp_path):
    (tmp_path / "d.yaml").write_text("slurm: {backend: sim}\ncap_schedule: nonexistent-caps.csv\n")
    proc = cli("check-config", "d.yaml", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip() == "wattsched: error: d.yaml:2: cap_schedule: no such file 'nonexistent-caps.csv'"


def test_bad_input_dst_window_across_the_spring_change_keeps_the_existing_half_hour():
    import datetime as dt
    from zoneinfo import ZoneInfo

    from wattsched.daemon.schedule import occurrences
    from wattsched.model.recurrence import parse_recurrence

    paris = ZoneInfo("Europe/Paris")
    day = dt.datetime(2027, 3, 28, tzinfo=paris).timestamp()
    (a, b), *_ = occurrences(parse_recurrence("daily 02:30-03:30"), paris, day, day + 86400)
    assert dt.datetime.fromtimestamp(a, paris).isoformat() == "2027-03-28T03:00:00+02:00"
    assert b - a == 1800
    # a window wholly inside the skipped hour gives no window, rather than an empty or reversed one
    assert occurrences(parse_recurrence("daily 02:10-02:50"), paris, day, day + 3 * 3600) == []


@settings(max_examples=80, deadline=None)
@given(zone=st.sampled_from(["Europe/Paris", "America/New_York", "Australia/Sydney", "America/Santiago", "UTC"]),
       day=st.dates(min_value=__import__("datetime").date(2024, 1, 1),
                    max_value=__import__("datetime").date(2030, 12, 31)),
       start=st.integers(0, 1439), length=st.integers(1, 1440))
def test_bad_input_dst_class_windows_cover_exactly_the_wall_minutes_that_exist(zone, day, start, length):
    """Across any daylight-saving change a window is never empty or reversed, and at most an hour off its length."""
    import datetime as dt
    from zoneinfo import ZoneInfo

    from wattsched.daemon.schedule import occurrences
    from wattsched.model.recurrence import Recurrence

    tz = ZoneInfo(zone)
    rec = Recurrence(days=frozenset(range(7)), start_min=start, end_min=(start + length) % 1440)
    t0 = dt.datetime(day.year, day.month, day.day, tzinfo=tz).timestamp()
    for a, b in occurrences(rec, tz, t0, t0 + 86400):
        assert b > a
        assert (length - 60) * 60 <= b - a <= (length + 60) * 60  # an hour off, on a change day


@pytest.mark.parametrize(("option", "value", "message"), [
    ("--notice", "-3600", "--notice: the events would be refused when read back (notice_s: must not be after start_s"),
    ("--cap", "0", "--cap: the events would be refused when read back (cap_w: a cap in watts must be positive"),
])
def test_bad_input_23_137_dr_events_generate_refuses_what_its_reader_refuses(tmp_path, option, value, message):
    proc = cli("dr-events", "generate", "--span", "86400", option, value, "-o", "ev.yaml", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.startswith(f"wattsched: error: {message}"), proc.stderr
    assert not (tmp_path / "ev.yaml").exists()


@settings(max_examples=80, deadline=None)
@given(span=st.floats(1, 1e8), ratio=st.floats(0.001, 1), events=st.integers(1, 50),
       notice=st.floats(-1e5, 1e5), cap=st.one_of(st.sampled_from(["80%", "0", "-5", "0%", "150%"]),
                                                    st.floats(-10, 1e6).map(str)))
def test_bad_input_class_3_generated_events_are_refused_or_read_back(tmp_path_factory, span, ratio, events,
                                                                       notice, cap):
    import yaml

    from wattsched.sim.drevents import generate_events, load_dr_events

    try:
        out = generate_events(span, ratio, events=events, notice_s=notice, cap=cap)
    except ConfigError as exc:
        assert str(exc).startswith("--"), exc
        return
    path = tmp_path_factory.mktemp("ev") / "ev.yaml"
    path.write_text(yaml.safe_dump({"demand_response": out}))
    assert len(load_dr_events(path)) == events


def test_bad_input_dr_events_generate_count_is_bounded(tmp_path):
    proc = cli("dr-events", "generate", "--span", "86400", "--events", "1000000", "-o", "ev.yaml", cwd=tmp_path,
               timeout=30)
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("wattsched: error: --events: 1,000,000 events is above the limit of 100,000; "
                                   "raise it with --max-events N if you mean it")


# --------------------------------------------------------------------------- 2. bounded grids, slices


def _sweep(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "sw.yaml"
    path.write_text(text)
    return path


def test_bad_input_54_huge_grid_refused_at_once(base, tmp_path):
    import time

    from wattsched.sweep.expand import count_runs
    from wattsched.sweep.spec import load_sweep

    seeds = list(range(1000))
    caps = [1000 + i for i in range(1000)]
    path = _sweep(tmp_path, f"kind: sweep\nbase: {{trace: {base}}}\naxes:\n  seeds: {seeds}\n  caps: {caps}\n"
                  "  policies: [{name: easy-pc, params: {check: [mean, max, gaussian_68, gaussian_95, "
                  "gaussian_99], lookahead: [true, false]}}, {name: knapsack, params: {profit: [wait, stretch]}}, "
                  "{name: easy-saf, params: {check: [mean, max, gaussian_68, gaussian_95, gaussian_99]}}, "
                  "easy, fcfs, ls, bf, dec, simple, dynshare, dvfs, dr, energy-bud]\n"
                  "  predictors: [naive, oracle, history, history, naive, oracle, history, naive, oracle, history, "
                  "naive, oracle, history, naive]\n")
    assert count_runs(load_sweep(path)) == 1000 * 1000 * 27 * 14
    start = time.monotonic()
    proc = cli("sweep", path, "--dry-run", "--out", tmp_path / "o", cwd=tmp_path, timeout=60)
    assert time.monotonic() - start < 20
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("wattsched: error: ") and "sw.yaml:3: axes: the axes give 378,000,000 runs " \
        "(before exclude rules), above the limit of 1,000,000; shrink the axes or raise the limit with max_runs: N " \
        "in the sweep file" in proc.stderr, proc.stderr


@settings(max_examples=40, deadline=None)
@given(seeds=st.integers(1, 6), caps=st.integers(1, 5), policies=st.lists(st.sampled_from(["easy", "fcfs", "easy-pc"]),
                                                                        min_size=1, max_size=3),
       zipped=st.booleans())
def test_bad_input_class_2_run_count_matches_the_expansion(tmp_path_factory, base, seeds, caps, policies, zipped):
    from wattsched.sweep.expand import count_runs, expand
    from wattsched.sweep.spec import load_sweep

    n = max(seeds, caps) if zipped else seeds
    caps_l = [5000 + 100 * i for i in range(n if zipped else caps)]
    text = (f"kind: sweep\nbase: {{trace: {base}}}\naxes:\n  seeds: {list(range(n))}\n  caps: {caps_l}\n"
            f"  policies: {json.dumps(policies)}\n" + ("zip: [[seeds, caps]]\n" if zipped else ""))
    cfg = load_sweep(_sweep(tmp_path_factory.mktemp("sw"), text))
    # equal when no run is a duplicate of another (repeated policy names are)
    assert count_runs(cfg) >= len(expand(cfg))
    if len(set(policies)) == len(policies):
        assert count_runs(cfg) == len(expand(cfg))


def test_bad_input_56_unknown_policy_in_a_grid_block_is_located(base, tmp_path):
    path = _sweep(tmp_path, f"kind: sweep\nbase: {{trace: {base}}}\ngrid:\n  - policies: [easy]\n"
                  "  - policies: [fcfs, no-such-policy]\n")
    proc = cli("sweep", path.name, "--dry-run", "--out", tmp_path / "o", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.startswith("wattsched: error: sw.yaml:5: grid[1].policies[1]: unknown policy "
                                  "'no-such-policy'"), proc.stderr


def test_bad_input_68_max_runs_must_be_positive(base, tmp_path):
    path = _sweep(tmp_path, f"kind: sweep\nbase: {{trace: {base}}}\naxes: {{policies: [easy, fcfs]}}\n")
    proc = cli("sweep", path, "--out", tmp_path / "o", "--workers", "1", "--max-runs", "-1", "-q", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.startswith("wattsched: error: --max-runs: expected a positive integer >= 1, got -1"), \
        proc.stderr


def test_bad_input_132_exclude_rule_matching_no_run_is_warned(base, tmp_path, caplog):
    from wattsched.sweep.expand import expand
    from wattsched.sweep.spec import load_sweep

    path = _sweep(tmp_path, f"kind: sweep\nbase: {{trace: {base}}}\naxes:\n  policies: [easy, easy-pc]\n"
                  "  caps: [5000, 6000]\nexclude:\n  - {policy: easy-pcc}\n  - {cap: 5000, policy: easy}\n")
    with caplog.at_level(logging.WARNING, logger="wattsched.sweep"):
        runs = expand(load_sweep(path))
    assert len(runs) == 3
    assert "sw.yaml:7: exclude[0]: matches no run" in caplog.text
    assert "exclude[1]" not in caplog.text


def test_bad_input_133_slices_outside_the_trace_refused(base, tmp_path):
    path = _sweep(tmp_path, f"kind: sweep\nbase: {{procs: 100}}\naxes:\n  slices: {{trace: {base}, count: 3, "
                  "length_h: 6, warmup_h: 0, t0_days: [-5, 400, 0.5]}\n")
    for args in (("traces", "slice", path.name), ("sweep", path.name, "--dry-run", "--out", tmp_path / "o")):
        proc = cli(*args, cwd=tmp_path)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.startswith("wattsched: error: sw.yaml:4: axes.slices: t0_days[0]: day -5 gives a slice "
                                      "of 6 h with no submission"), proc.stderr
        assert "2 of 3 slices are empty" in proc.stderr


def test_bad_input_134_more_slices_than_the_trace_holds_is_an_error_not_a_traceback(base, tmp_path):
    path = _sweep(tmp_path, f"kind: sweep\nbase: {{procs: 100}}\naxes:\n  slices: {{trace: {base}, count: 1000000, "
                  "length_h: 0.001, warmup_h: 0, t0: load}\n")
    proc = cli("traces", "slice", path.name, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("wattsched: error: sw.yaml:4: axes.slices: the trace holds only"), proc.stderr
    assert "Traceback" not in proc.stderr


def test_bad_input_51_poly_response_positive_on_its_frequency_range(tmp_path):
    from wattsched.config.platform import load_platform

    (tmp_path / "plat.yaml").write_text(
        "kind: platform\nname: neg\nnode_groups: [{name: a, count: 4}]\nresponse_classes:\n"
        "  neg: {model: poly, a: 50, b: 0, c: 0, d: 10, alpha: 100, beta: -50, gamma: 0, f_min_ghz: 1.2, "
        "f_max_ghz: 2.7}\n")
    with pytest.raises(ConfigError, match=r"plat\.yaml:5: response_classes\.neg: t\(f\) = alpha \+ beta f \+ gamma "
                                          r"f\^2 must be positive on \[f_min_ghz, f_max_ghz\], but t\(2\.7 GHz\) = "
                                          r"-35 s"):
        load_platform(str(tmp_path / "plat.yaml"))


@settings(max_examples=150, deadline=None)
@given(coef=st.lists(st.floats(-100, 100), min_size=7, max_size=7), lo=st.floats(0.5, 2), width=st.floats(0.1, 2))
def test_bad_input_class_3_poly_lowest_is_the_minimum_on_the_range(coef, lo, width):
    from wattsched.model.response import PolynomialResponse

    m = PolynomialResponse(*coef, f_min_ghz=lo, f_max_ghz=lo + width)
    (_, p_min), (_, t_min) = m.lowest()
    grid = [lo + width * i / 400 for i in range(401)]
    assert p_min <= min(m.power(f) for f in grid) + 1e-9
    assert t_min <= min(m.time(f) for f in grid) + 1e-9
    assert p_min >= min(m.power(f) for f in grid) - 1e-3 * (1 + abs(p_min))  # attained on the range


def test_bad_input_100_ls_queue_expected_waits_positive_and_finite(base, tmp_path):
    proc = cli("simulate", "--trace", base, "--cap", "60%", "--out", "r", "-q", "--no-report", "--policy", "ls",
               "--param", 'queue_ewt_s={batch: -3600, "": .nan}', cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "wattsched: error: --param: queue_ewt_s.batch: Input should be greater than 0, got -3600 (policy 'ls')",
        "--param: queue_ewt_s['']: Input should be a finite number, got nan (policy 'ls')"]


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-32"])
def test_bad_input_78_wide_text_swf_names_its_encoding(base, tmp_path, encoding):
    (tmp_path / "u.swf").write_bytes(base.read_text().encode(encoding))
    (tmp_path / "u.swf.gz").write_bytes(gzip.compress(base.read_text().encode(encoding)))
    for name in ("u.swf", "u.swf.gz"):
        for args in (("traces", "info", name), ("simulate", "--trace", name, "--out", "r", "-q", "--no-report")):
            proc = cli(*args, cwd=tmp_path)
            assert proc.returncode == 2, proc.stderr
            line = proc.stderr.strip()
            assert line.startswith(f"wattsched: error: {name}: the file is UTF-"), line
            assert "iconv -f UTF-" in line and "Traceback" not in line


def test_bad_input_82_large_trace_is_streamed_not_loaded_whole(base, monkeypatch):
    from wattsched.workload import swf

    whole = swf.trace_info(swf.read_swf(base))
    assert swf._fast_table(str(base)) is not None
    monkeypatch.setattr(swf, "FAST_MAX_BYTES", 1000)  # as a file above the bound: line by line
    assert swf._fast_table(str(base)) is None
    assert swf.trace_info(swf.read_swf(base)) == whole
    # the duplicate check of the line reader keeps 16 bytes a job, not a dict entry
    seen = swf._SeenIds()
    for i in range(1, 100_001):
        assert seen.add(i, i) is None
    assert not seen.other and seen.rising.itemsize == 8


@settings(max_examples=100, deadline=None)
@given(ids=st.lists(st.integers(0, 60), max_size=80))
def test_bad_input_class_2_seen_ids_find_every_duplicate_and_its_first_line(ids):
    from wattsched.workload.swf import _SeenIds

    seen, first = _SeenIds(), {}
    for line, i in enumerate(ids, 1):
        assert seen.add(i, line) == first.get(i)
        first.setdefault(i, line)


_SACCT_OK = "101|alice|batch|2|node[01-02]|2026-11-02T10:00:00|2026-11-02T10:05:00|2026-11-02T11:00:00|60|COMPLETED"


@pytest.mark.parametrize(("line", "message"), [
    (_SACCT_OK.replace("|2|", "|-3|"), r"sacct\.txt:2: NNodes: a finished job ran on at least 1 node, got -3"),
    (_SACCT_OK.replace("|60|", "|-5|"), r"sacct\.txt:2: TimelimitRaw: expected minutes >= 0 \(or .*UNLIMITED.*\), "
                                        r"got '-5'"),
    (_SACCT_OK.replace("2026-11-02T10:00:00", "2026-11-02T10:30:00"),
     r"sacct\.txt:2: Submit: 2026-11-02T10:30:00 is after Start 2026-11-02T10:05:00"),
    (_SACCT_OK.replace("2026-11-02T11:00:00", "2026-11-02T10:01:00"),
     r"sacct\.txt:2: End: 2026-11-02T10:01:00 is before Start 2026-11-02T10:05:00"),
    (_SACCT_OK.replace("node[01-02]", "node[0003-1000000000]"), r"sacct\.txt:2: NodeList: "),
])
def test_bad_input_140_history_import_rejects_impossible_sacct_lines(line, message):
    from wattsched.daemon.history import parse_sacct
    from wattsched.errors import TraceError

    assert len(parse_sacct(_SACCT_OK, "sacct.txt")) == 1
    assert parse_sacct(_SACCT_OK.replace("|60|", "|UNLIMITED|"), "sacct.txt")[0]["walltime_s"] == 0.0
    with pytest.raises(TraceError, match=message):
        parse_sacct(f"{_SACCT_OK}\n{line}\n", "sacct.txt")


def test_bad_input_117_145_daemon_constraints_it_cannot_honour_are_warned_once(tmp_path):
    from wattsched.config import load_config
    from wattsched.config.daemon import DaemonConfig
    from wattsched.daemon.schedule import LiveConstraints

    (tmp_path / "d.yaml").write_text(
        "slurm: {backend: sim}\npolicy: energy-bud\nenergy_budgets: [{every: 'daily 00:00-24:00', energy_j: 1}]\n"
        "demand_response:\n  events: [{start_s: 0, end_s: 4000000000, reduction_w: 1.0e+9}]\n")
    constraints = LiveConstraints(load_config(tmp_path / "d.yaml", DaemonConfig, env={}))
    platform = platform_from_procs(100)
    first = constraints.new_warnings(platform)
    assert [w.split(":")[0] for w in first] == ["energy_budgets[0]", "demand_response.events[0]"]
    assert "the budget of 1 J is below the platform's idle energy over its window (9,500 W x 86,400 s" in first[0]
    assert "the target falls to 1 W, below the idle power (9,500 W)" in first[1]
    assert constraints.new_warnings(platform) == []  # once, not every cycle


def test_bad_input_99_engine_names_the_policy_parameter_when_its_period_runs_over():
    from wattsched.policies import make_policy
    from wattsched.sim.engine import Engine, EngineOptions
    from wattsched.workload.records import TraceJob

    jobs = [TraceJob(1, 0.0, 500.0, 500.0, 1, 1)]
    policy = make_policy("energy-bud", {"monitoring_period_s": 1.0})
    engine = Engine(platform_from_procs(2), jobs, policy, budgets=[EnergyBudget(0.0, 1000.0, 1e12)],
                    options=EngineOptions(max_ticks=10))
    with pytest.raises(ConfigError, match=r"^params\.monitoring_period_s: the run reached 10 ticks of 1 s .*"
                                          r"--param monitoring_period_s=SECONDS"):
        engine.run()


@pytest.mark.parametrize("value", [".inf", "-.inf", ".nan"])
@pytest.mark.parametrize(("key", "text"), [
    ("energy_budgets[0].energy_j", "energy_budgets: [{start_s: 0, end_s: 86400, energy_j: V}]"),
    ("demand_response[0].reduction_w", "demand_response: [{start_s: 0, end_s: 100, reduction_w: V}]"),
    ("bsld_threshold_s", "bsld_threshold_s: V"),
    ("augment", None),
])
def test_bad_input_class_3_config_numbers_are_finite(tmp_path, key, text, value):
    from wattsched.config import load_config

    if text is None:  # the rule is the models' own, so every config model has it
        from wattsched.config.base import StrictModel

        assert StrictModel.model_config["allow_inf_nan"] is False
        return
    (tmp_path / "sim.yaml").write_text(f"trace: t.swf\nprocs: 4\n{text.replace('V', value)}\n")
    with pytest.raises(ConfigError, match=rf"sim\.yaml:3: {re.escape(key)}: Input should be a finite number"):
        load_config(tmp_path / "sim.yaml", SimConfig, env={})


def test_bad_input_05_06_check_config_warns_as_simulate_does(base, tmp_path):
    (tmp_path / "sim.yaml").write_text(f"trace: {base}\npolicy: easy\n"
                                       "energy_budgets: [{start_s: 0, end_s: 86400, energy_j: 1.0e+8}]\n")
    proc = cli("check-config", "sim.yaml", cwd=tmp_path)
    assert proc.returncode == 0 and "valid simulation config" in proc.stdout
    assert "policy easy ignores the energy budget of this run" in proc.stderr
    assert "energy_budgets[0]: the budget of 1e+08 J is below the platform's idle energy" in proc.stderr


def test_bad_input_50_poly_class_faster_on_a_slower_clock_refused_by_check_config(tmp_path):
    # the case-49 snippet pasted into a platform: t(1.2 GHz) = 34 s < t(2.7 GHz) = 64 s
    (tmp_path / "plat.yaml").write_text(
        "kind: platform\nname: inc\nnode_groups: [{name: a, count: 4}]\nresponse_classes:\n"
        "  inc: {model: poly, a: 50, b: 0, c: 0, d: 10, alpha: 10, beta: 20, gamma: 0, f_min_ghz: 1.2, "
        "f_max_ghz: 2.7}\n")
    proc = cli("check-config", "plat.yaml", cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("wattsched: error: plat.yaml:5: response_classes.inc: t(f) = alpha + beta f + "
                                  "gamma f^2 must not fall below t(f_max_ghz) on [f_min_ghz, f_max_ghz] (a job "
                                  "would run faster on a slower clock), but t(1.2 GHz) = 34 s < t(2.7 GHz) = 64 s")
    # and the negative runtime of case 51 through the same command
    (tmp_path / "plat.yaml").write_text((tmp_path / "plat.yaml").read_text().replace("alpha: 10, beta: 20",
                                                                                      "alpha: 100, beta: -50"))
    proc = cli("check-config", "plat.yaml", cwd=tmp_path)
    assert proc.returncode == 2 and "must be positive on [f_min_ghz, f_max_ghz], but t(2.7 GHz) = -35 s" in proc.stderr
