"""sim.yaml, cap schedules, overrides, config kinds and the generated reference."""

from __future__ import annotations

import math
import re
import textwrap
from pathlib import Path

import pytest

from wattsched.config import (
    SimConfig,
    detect_config_kind,
    load_cap_schedule,
    load_config,
    merge_overrides,
    parse_cap_value,
)
from wattsched.config.platform import load_platform
from wattsched.errors import ConfigError
from wattsched.model.constraints import EnergyBudget
from wattsched.model.platform import NodePowerModel, Platform
from wattsched.reference import render_config_reference

DOCS = Path(__file__).resolve().parents[2] / "docs" / "config.md"


def write(tmp_path, text: str, name: str = "sim.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def load(tmp_path, text: str, **kw) -> SimConfig:
    return load_config(write(tmp_path, text), **kw)


def config_error(tmp_path, text: str, **kw) -> str:
    with pytest.raises(ConfigError) as info:
        load(tmp_path, text, **kw)
    return str(info.value)


# --------------------------------------------------------------------------- basics


def test_minimal_config_and_defaults(tmp_path):
    c = load(tmp_path, "trace: t.swf\nprocs: 64\n")
    assert c.trace == tmp_path / "t.swf"  # relative to the config file
    assert (c.procs, c.cores_per_node, c.platform) == (64, 1, None)
    assert c.policy == "easy" and c.params == {} and c.seed == 0
    assert c.kill_at_walltime is True and c.default_walltime == "runtime"
    # the bounded slowdown is the policy's default: standard at 10 s for easy
    assert c.bsld_threshold_s is None and c.bsld_definition is None and c.response is None
    assert c.skip_bad_lines is False and c.augment == {} and c.tick_s is None and c.time_limit_s is None
    assert c.build_cap_schedule().is_uncapped and c.build_energy_budgets() == []
    assert c.source.endswith("sim.yaml")
    with pytest.raises(Exception, match="frozen"):
        c.seed = 4


def test_full_config(tmp_path):
    c = load(
        tmp_path,
        """\
        kind: simulation
        trace: /data/kth.swf
        platform: marconi100
        policy: easy_pc
        params: {check: gaussian_95}
        cap_w: 1.5e6
        energy_budgets: [{start_s: 0, end_s: 3600, energy_j: 1e9}]
        seed: 3
        out: results
        kill_at_walltime: false
        default_walltime: 3600
        bsld_threshold_s: 300
        skip_bad_lines: true
        augment: {users: 10, anything: [1, 2]}
        tick_s: 60
        time_limit_s: 86400
        """,
    )
    assert c.trace == Path("/data/kth.swf") and c.out == tmp_path / "results"
    assert c.platform == "marconi100" and c.params == {"check": "gaussian_95"}
    assert c.default_walltime == 3600.0 and c.augment["anything"] == [1, 2]
    assert c.build_cap_schedule().cap_at(0.0) == 1.5e6
    assert c.build_energy_budgets() == [EnergyBudget(0, 3600, 1e9)]
    assert len(c.build_platform()) == 980


def test_platform_path_is_relative_to_the_config(tmp_path):
    (tmp_path / "plat").mkdir()
    (tmp_path / "plat" / "p.yaml").write_text("name: tiny\nnode_groups: [{name: n, count: 3}]\n")
    c = load(tmp_path, "trace: t.swf\nplatform: plat/p.yaml\n")
    assert c.platform == str(tmp_path / "plat" / "p.yaml")
    assert len(c.build_platform()) == 3


def test_procs_platform(tmp_path):
    c = load(tmp_path, "trace: t.swf\nprocs: 100\ncores_per_node: 4\n")
    p = c.build_platform()
    assert len(p) == 25 and p.total_cores == 100


# --------------------------------------------------------------------------- errors


def test_unknown_key_with_suggestion_and_line(tmp_path):
    msg = config_error(tmp_path, "trace: t.swf\nprocs: 4\nsed: 3\n")
    expected = r"sim\.yaml:3: sed: unknown key; did you mean 'seed'\? \(valid keys: kind, trace, .*\)$"
    assert re.search(expected, msg)


def test_every_error_one_per_line(tmp_path):
    msg = config_error(
        tmp_path,
        """\
        trace: t.swf
        procs: 0
        seed: x
        cap_w: 120%
        default_walltime: forever
        tick_s: -1
        """,
    )
    lines = msg.splitlines()
    assert len(lines) == 5, msg
    assert all(re.match(r".*sim\.yaml:\d+: ", x) for x in lines)
    assert any(re.search(r":2: procs: Input should be greater than 0, got 0$", x) for x in lines)
    assert any(re.search(r":3: seed: Input should be a valid integer.*got 'x'$", x) for x in lines)
    assert any(re.search(r":4: cap_w: a percentage cap must be in \(0%, 100%\], got '120%'$", x) for x in lines)
    assert any(re.search(r"default_walltime: expected 'runtime' or a number of seconds, got 'for", x) for x in lines)
    assert any(re.search(r":6: tick_s: Input should be greater than 0, got -1$", x) for x in lines)


def test_missing_trace(tmp_path):
    with pytest.raises(ConfigError, match=r"sim\.yaml:\d+: trace: required key is missing"):
        load(tmp_path, "procs: 4\n")


def test_platform_or_procs(tmp_path):
    # neither: the machine comes from the trace header (MaxProcs), cores_per_node applies
    c = load(tmp_path, "trace: t.swf\ncores_per_node: 8\n")
    assert (c.platform, c.procs, c.cores_per_node) == (None, None, 8)
    with pytest.raises(ConfigError, match=r"sim\.yaml:\d+: procs: give either platform or procs, not both"):
        load(tmp_path, "trace: t.swf\nplatform: default\nprocs: 4\n")
    with pytest.raises(ConfigError, match=r"sim\.yaml:\d+: cores_per_node: not used with a platform file"):
        load(tmp_path, "trace: t.swf\nplatform: default\ncores_per_node: 4\n")


def test_cap_w_and_schedule_exclusive(tmp_path):
    with pytest.raises(ConfigError, match=r"sim\.yaml:\d+: cap_schedule: give either cap_w or cap_schedule, not both"):
        load(tmp_path, "trace: t.swf\nprocs: 4\ncap_w: 100\ncap_schedule: [{start_s: 0, cap_w: 5}]\n")


def test_nested_errors_have_key_paths(tmp_path):
    msg = config_error(
        tmp_path,
        """\
        trace: t.swf
        procs: 4
        energy_budgets:
          - {start_s: 10, end_s: 5, energy_j: 100}
          - {start_s: 0, end_s: 5, energy_j: -1}
        cap_schedule:
          - {start_s: 0, cap_w: 100}
          - {start_s: 0, cap_w: 200, colour: red}
        """,
    )
    assert re.search(r":4: energy_budgets\[0\]\.end_s: must be after start_s \(10 s\), got 5", msg)
    assert re.search(r":5: energy_budgets\[1\]\.energy_j: Input should be greater than 0, got -1", msg)
    expected = r":8: cap_schedule\[1\]\.colour: unknown key \(valid keys: start_s, end_s, cap_w, label\)"
    assert re.search(expected, msg)


def test_yaml_syntax_error_names_the_line(tmp_path):
    with pytest.raises(ConfigError, match=r"sim\.yaml:3: invalid YAML \(column \d+\)"):
        load(tmp_path, "trace: t.swf\nprocs: 4\nseed: : 3\n")


def test_top_level_must_be_a_mapping(tmp_path):
    with pytest.raises(ConfigError, match=r"sim\.yaml: expected a mapping of keys to values at the top level, got"):
        load(tmp_path, "- trace\n")


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match=r"absent\.yaml: no such file"):
        load_config(tmp_path / "absent.yaml")


# --------------------------------------------------------------------------- caps


@pytest.mark.parametrize(
    "value, parsed",
    [(5000, 5000.0), ("5000", 5000.0), ("60%", "60%"), (" 12.5 % ", "12.5%"), ("100%", "100%"), (None, None)],
)
def test_parse_cap_value(value, parsed):
    assert parse_cap_value(value) == parsed


@pytest.mark.parametrize("value", ["0%", "101%", -5, 0, "lots", True, float("nan")])
def test_parse_cap_value_rejects(value):
    with pytest.raises(ValueError):
        parse_cap_value(value)


def test_cap_as_percentage(tmp_path):
    c = load(tmp_path, 'trace: t.swf\nprocs: 10\ncap_w: "60%"\n')
    assert c.cap_w == "60%"
    platform = Platform.homogeneous_cluster(10, power=NodePowerModel(idle_w=100, busy_min_w=150, busy_w=300))
    # idle power + 60 % of the dynamic range: 1000 + 0.6 * 2000
    assert c.build_cap_schedule(platform).cap_at(123.0) == pytest.approx(2200.0)
    with pytest.raises(ConfigError, match=r"sim\.yaml:\d+: cap_w: cap 60% is a fraction of the platform's power"):
        c.build_cap_schedule()


def test_cap_schedule_steps_inline(tmp_path):
    c = load(
        tmp_path,
        """\
        trace: t.swf
        procs: 10
        cap_schedule:
          - {start_s: 100, cap_w: 900, label: dr}
          - {start_s: 0, cap_w: 1500}
          - {start_s: 200, cap_w: null}
        """,
    )
    s = c.build_cap_schedule()
    assert [(x.start_s, x.cap_w, x.label) for x in s.steps] == [(0, 1500, ""), (100, 900, "dr"), (200, math.inf, "")]


def test_cap_schedule_windows():
    s = load_cap_schedule(
        [
            {"start_s": 0, "end_s": 100, "cap_w": 500},
            {"start_s": 100, "end_s": 200, "cap_w": 400},
            {"start_s": 300, "end_s": 400, "cap_w": 300},
        ]
    )
    assert [s.cap_at(t) for t in (50, 150, 250, 350, 450)] == [500, 400, math.inf, 300, math.inf]


def test_cap_schedule_rules():
    with pytest.raises(ConfigError, match=r"cap schedule: \[1\]: a schedule is either all steps"):
        load_cap_schedule([{"start_s": 0, "end_s": 5, "cap_w": 1}, {"start_s": 9, "cap_w": 1}])
    with pytest.raises(ConfigError, match=r"cap schedule: \[1\]\.start_s: window starts at 5 s, inside entry 0"):
        load_cap_schedule([{"start_s": 0, "end_s": 10, "cap_w": 1}, {"start_s": 5, "end_s": 20, "cap_w": 1}])
    with pytest.raises(ConfigError, match=r"cap schedule: \[1\]\.start_s: two steps start at 3 s"):
        load_cap_schedule([{"start_s": 3, "cap_w": 1}, {"start_s": 3, "cap_w": 2}])


def test_cap_schedule_from_yaml_file(tmp_path):
    path = write(tmp_path, "- {start_s: 0, cap_w: 1000}\n- {start_s: 60, cap_w: '50%'}\n", "caps.yaml")
    platform = load_platform("default")
    s = load_cap_schedule(path, platform)
    assert s.cap_at(0) == 1000
    assert s.cap_at(60) == pytest.approx(platform.idle_power_w + 0.5 * platform.max_dynamic_power_w)
    wrapped = write(tmp_path, "cap_schedule:\n  - {start_s: 0, cap_w: 1000}\n  - {start_s: 5, cap_w: -1}\n", "w.yaml")
    expected = r"w\.yaml:3: cap_schedule\[1\]\.cap_w: a cap in watts must be positive"
    with pytest.raises(ConfigError, match=expected):
        load_cap_schedule(wrapped)


def test_cap_schedule_from_csv(tmp_path):
    path = write(
        tmp_path,
        """\
        # demand response
        start_s,cap_w,label
        0,2000,night
        3600,60%,day
        7200,,
        """,
        "caps.csv",
    )
    platform = Platform.homogeneous_cluster(10, power=NodePowerModel(idle_w=100, busy_min_w=150, busy_w=300))
    s = load_cap_schedule(path, platform)
    assert [(x.start_s, x.cap_w, x.label) for x in s.steps] == [
        (0, 2000, "night"),
        (3600, pytest.approx(2200.0), "day"),
        (7200, math.inf, ""),
    ]


def test_cap_schedule_csv_errors_name_the_line(tmp_path):
    bad = write(tmp_path, "start_s,cap_w\n0,100\n10,abc\n", "bad.csv")
    with pytest.raises(ConfigError, match=r"bad\.csv:3: cap_w: expected watts"):
        load_cap_schedule(bad)
    header = write(tmp_path, "start,cap_w\n0,100\n", "header.csv")
    with pytest.raises(ConfigError, match=r"header\.csv:1: header must name the columns start_s,cap_w"):
        load_cap_schedule(header)
    short = write(tmp_path, "start_s,cap_w,label\n0,100\n", "short.csv")
    with pytest.raises(ConfigError, match=r"short\.csv:2: expected 3 columns, got 2"):
        load_cap_schedule(short)


def test_cap_schedule_file_in_sim_config(tmp_path):
    write(tmp_path, "start_s,end_s,cap_w\n0,3600,1000\n", "caps.csv")
    c = load(tmp_path, "trace: t.swf\nprocs: 4\ncap_schedule: caps.csv\n")
    s = c.build_cap_schedule()
    assert s.cap_at(10) == 1000 and s.cap_at(3600) == math.inf
    write(tmp_path, "start_s,cap_w\n0,x\n", "broken.csv")
    with pytest.raises(ConfigError, match=r"broken\.csv:2: cap_w: "):
        load(tmp_path, "trace: t.swf\nprocs: 4\ncap_schedule: broken.csv\n")


# --------------------------------------------------------------------------- precedence


FILE = "trace: t.swf\nplatform: default\nseed: 1\npolicy: fcfs\ncap_w: 1000\n"


def test_env_overrides_file(tmp_path):
    c = load(tmp_path, FILE, env={"WATTSCHED_SEED": "3", "WATTSCHED_CAP_W": "60%", "WATTSCHED_OTHER": "x", "HOME": "/"})
    assert (c.seed, c.cap_w, c.policy) == (3, "60%", "fcfs")


def test_cli_overrides_env_and_file(tmp_path):
    c = load(tmp_path, FILE, env={"WATTSCHED_SEED": "3", "WATTSCHED_POLICY": "easy"}, cli={"seed": 9, "out": None})
    assert (c.seed, c.policy, c.out) == (9, "easy", None)


def test_defaults_below_file(tmp_path):
    c = load(tmp_path, FILE)
    assert (c.seed, c.kill_at_walltime) == (1, True)
    assert c.bsld_threshold_s is None  # resolved per policy at run time: 10 s for fcfs


def test_merge_overrides_returns_a_new_validated_config(tmp_path):
    base = load(tmp_path, FILE)
    env = {"WATTSCHED_SEED": "5", "WATTSCHED_KILL_AT_WALLTIME": "false"}
    c = merge_overrides(base, {"policy": "easy"}, env=env)
    assert (c.seed, c.kill_at_walltime, c.policy, c.cap_w) == (5, False, "easy", 1000.0)
    assert base.seed == 1 and c is not base
    assert merge_overrides(base, {"seed": 8}, env=env).seed == 8


def test_merge_overrides_reads_os_environ_by_default(tmp_path, monkeypatch):
    monkeypatch.setenv("WATTSCHED_SEED", "11")
    assert merge_overrides(load(tmp_path, FILE), {}).seed == 11


def test_override_replaces_the_exclusive_alternative(tmp_path):
    base = load(tmp_path, FILE)
    c = merge_overrides(base, {"procs": 16}, env={})
    assert (c.platform, c.procs) == (None, 16)
    c = merge_overrides(base, {"cap_schedule": [{"start_s": 0, "cap_w": 5}]}, env={})
    assert c.cap_w is None and c.cap_schedule[0].cap_w == 5


def test_override_errors_name_their_origin(tmp_path):
    with pytest.raises(ConfigError, match=r"^WATTSCHED_SEED: Input should be a valid"):
        load(tmp_path, FILE, env={"WATTSCHED_SEED": "many"})
    with pytest.raises(ConfigError, match=r"^--bsld-threshold: Input should be greater than 0"):
        load(tmp_path, FILE, cli={"bsld_threshold_s": -1})
    with pytest.raises(ConfigError, match=r"^--sede: unknown option; did you mean 'seed'\?"):
        load(tmp_path, FILE, cli={"sede": 1})
    with pytest.raises(ConfigError, match=r"^WATTSCHED_PARAMS: params is a list or mapping"):
        load(tmp_path, FILE, env={"WATTSCHED_PARAMS": "{}"})


def test_required_key_may_come_from_the_cli(tmp_path):
    c = load(tmp_path, "platform: default\n", cli={"trace": "x.swf"})
    assert c.trace == Path("x.swf")  # relative to the working directory, not the file


# --------------------------------------------------------------------------- kinds and docs


def test_detect_config_kind(tmp_path):
    assert detect_config_kind(write(tmp_path, "trace: t.swf\nprocs: 3\n")) == "simulation"
    assert detect_config_kind(write(tmp_path, "kind: simulation\n", "k.yaml")) == "simulation"

    assert detect_config_kind(write(tmp_path, "kind: daemon\n", "d.yaml")) == "daemon"
    assert detect_config_kind(write(tmp_path, "poll_interval_s: 3\n", "p.yaml")) == "daemon"
    assert detect_config_kind(write(tmp_path, "axes: {seeds: [1]}\n", "s.yaml")) == "sweep"
    with pytest.raises(ConfigError, match=r":1: kind: unknown kind 'bogus'; choose one of daemon, platform, simul"):
        detect_config_kind(write(tmp_path, "kind: bogus\n", "b.yaml"))
    with pytest.raises(ConfigError, match=r"x\.yaml: this file is not a known kind of config; add a 'kind:' key"):
        detect_config_kind(write(tmp_path, "seed: 3\n", "x.yaml"))
    with pytest.raises(ConfigError, match=r"y\.yaml: this file matches several kinds"):
        detect_config_kind(write(tmp_path, "trace: t.swf\nslurm: {}\n", "y.yaml"))


def test_every_field_is_documented():
    from wattsched.config import CapEntryConfig, EnergyBudgetConfig
    from wattsched.config.daemon import (
        ActuatorConfig,
        DaemonConfig,
        ForecastConfig,
        MetricsConfig,
        SimBackendConfig,
        SlurmConfig,
        TelemetryConfig,
    )
    from wattsched.config.platform import NodeGroupConfig, PlatformConfig, PowerModelConfig

    for model in (SimConfig, CapEntryConfig, EnergyBudgetConfig, PlatformConfig, NodeGroupConfig, PowerModelConfig,
                  DaemonConfig, SlurmConfig, SimBackendConfig, MetricsConfig, TelemetryConfig, ActuatorConfig,
                  ForecastConfig):
        for name, field in model.model_fields.items():
            assert field.description and len(field.description) > 30, f"{model.__name__}.{name}"


def test_docs_config_md_is_up_to_date():
    assert DOCS.read_text(encoding="utf-8") == render_config_reference(), (
        "docs/config.md is stale; regenerate it with: python -c \"from wattsched.reference import "
        "render_config_reference as r; print(r(), end='')\" > docs/config.md"
    )


def test_demand_response_events_are_checked_and_built(tmp_path):
    msg = config_error(
        tmp_path,
        """\
        trace: t.swf
        procs: 4
        demand_response:
          - {notice_s: 50, start_s: 10, end_s: 20, cap_w: 100}
          - {start_s: 0, end_s: 5}
        """,
    )
    assert re.search(r":4: demand_response\[0\]\.notice_s: must not be after start_s \(10 s\), got 50", msg)
    assert re.search(r":5: demand_response\[1\]\.cap_w: give exactly one target: cap_w or reduction_w", msg)
    c = load(tmp_path, "trace: t.swf\nprocs: 4\ndemand_response:\n"
                       "  - {notice_s: 5, start_s: 10, end_s: 20, cap_w: '50%'}\n"
                       "  - {start_s: 30, end_s: 40, reduction_w: 100}\n")

    from wattsched.config.platform import platform_from_procs
    from wattsched.model.constraints import DemandResponseEvent

    events = c.build_dr_events(platform_from_procs(4))
    assert events[0].notice_s == 5 and events[0].cap_w == pytest.approx(4 * 95.0 + 0.5 * 4 * (190.738 - 95.0))
    assert events[1] == DemandResponseEvent(30.0, 30.0, 40.0, None, 100.0, "demand response")


def test_daemon_job_class_must_be_one_of_the_platforms_response_classes(tmp_path):
    from wattsched.config.daemon import DaemonConfig

    path = write(tmp_path, "slurm: {backend: cli}\npoll_interval_s: 5\njob_class: cpuu\n", "d.yaml")
    with pytest.raises(ConfigError, match=r"d\.yaml:3: job_class: unknown application class 'cpuu'; the "
                                          r"platform's response classes are cpu, memory, mixed"):
        load_config(path, DaemonConfig)
    path.write_text("slurm: {backend: cli}\njob_class: memory\n")
    assert load_config(path, DaemonConfig).job_class == "memory"


def test_daemon_job_class_from_comment_is_a_site_policy_checked_against_the_platform(tmp_path):
    from wattsched.config.daemon import DaemonConfig

    path = write(tmp_path, "slurm: {backend: cli}\n", "d.yaml")
    assert load_config(path, DaemonConfig).job_class_from_comment == "trusted"
    path.write_text("slurm: {backend: cli}\njob_class_from_comment: validated\njob_class_allowed:\n"
                    "  users: {alice: [memory, mixed]}\n  accounts: {climate: [memory]}\n")
    cfg = load_config(path, DaemonConfig)
    assert cfg.job_class_allowed.users == {"alice": ["memory", "mixed"]}
    path.write_text("slurm: {backend: cli}\njob_class_from_comment: validated\njob_class_allowed:\n"
                    "  accounts:\n    climate: [memory, membound]\n")
    with pytest.raises(ConfigError, match=r"d\.yaml:5: job_class_allowed\.accounts\.climate: unknown application "
                                          r"class 'membound'; the platform's response classes are cpu, memory, "
                                          r"mixed"):
        load_config(path, DaemonConfig)
    path.write_text("slurm: {backend: cli}\njob_class_allowed: {users: {alice: [memory]}}\n")
    with pytest.raises(ConfigError, match=r"job_class_allowed: used only with job_class_from_comment: validated "
                                          r"\(it is trusted\)"):
        load_config(path, DaemonConfig)
    path.write_text("slurm: {backend: cli}\njob_class_from_comment: checked\n")
    with pytest.raises(ConfigError, match=r"d\.yaml:2: job_class_from_comment: .*'trusted', 'ignored' or "
                                          r"'validated'"):
        load_config(path, DaemonConfig)
