"""Cap schedules with recurring windows, demand-response events, energy budgets, platform files and policy state
in the daemon, on the simulated cluster driven by a fake clock (wall-clock time comes from ``epoch_s``)."""

from __future__ import annotations

import datetime as dt
import logging
import math
from zoneinfo import ZoneInfo

import pytest
import yaml

from nodepolicy import install_entry_point
from wattsched.config import load_config
from wattsched.config.daemon import DaemonConfig
from wattsched.config.platform import load_platform
from wattsched.daemon.loop import Daemon
from wattsched.daemon.metrics import DaemonMetrics
from wattsched.daemon.notify import Notifier
from wattsched.daemon.schedule import occurrences
from wattsched.daemon.simcluster import SimCluster
from wattsched.daemon.view import build_view
from wattsched.model.platform import NodePowerModel, Platform
from wattsched.model.recurrence import parse_recurrence
from wattsched.sim.engine import Engine
from wattsched.workload.records import TraceJob

PARIS = ZoneInfo("Europe/Paris")
MONDAY_1650 = dt.datetime(2026, 11, 23, 16, 50, tzinfo=PARIS).timestamp()
SATURDAY_1650 = dt.datetime(2026, 11, 28, 16, 50, tzinfo=PARIS).timestamp()
NODE_POWER = {"idle_w": 100.0, "busy_w": 300.0, "off_w": 10.0}


class FakeClock:
    def __init__(self):
        self.t = 0.0

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def make_daemon(tmp_path, clock):
    made = []

    def make(jobs=(), epoch=MONDAY_1650, nodes=4, **config):
        config.setdefault("policy", "easy")
        config.setdefault("poll_interval_s", 0.01)
        if "platform" not in config:
            config.setdefault("node_power", NODE_POWER)
        cfg = DaemonConfig(state_dir=tmp_path / "state", **config)
        sim = SimCluster(list(jobs), Platform.homogeneous_cluster(nodes, power=NodePowerModel()), speedup=1.0,
                         clock=clock, epoch_s=epoch)
        d = Daemon(cfg, sim, metrics=DaemonMetrics(), notifier=Notifier(environ={}))
        made.append(d)
        return d

    yield make
    for d in made:
        d.store.close()


def sample(d: Daemon, name: str, labels: dict | None = None) -> float | None:
    return d.metrics.registry.get_sample_value(name, labels or {})


def job(i: int, runtime: float = 3600.0, nodes: int = 1) -> TraceJob:
    return TraceJob(id=i, submit_s=0.0, runtime_s=runtime, walltime_s=runtime * 2, procs=nodes, nodes=nodes,
                    user="u", mean_w=250.0, max_w=260.0, std_w=2.0)


# --- recurring windows ------------------------------------------------------------------------------------------------
def test_recurrences_follow_the_wall_clock_across_daylight_saving():
    rec = parse_recurrence("daily 17:00-20:00")
    before = dt.datetime(2026, 3, 28, 12, tzinfo=PARIS).timestamp()  # DST starts on 29 March 2026
    spans = occurrences(rec, PARIS, before, before + 2 * 86400)
    starts = [dt.datetime.fromtimestamp(a, PARIS).strftime("%d %H:%M %Z") for a, _ in spans]
    assert starts == ["28 17:00 CET", "29 17:00 CEST"]
    assert all(b - a == 3 * 3600 for a, b in spans)


@pytest.mark.parametrize(("text", "message"), [
    ("weekdays 17-20", "expected 'DAYS HH:MM-HH:MM'"),
    ("workdays 17:00-20:00", "unknown day 'workdays'"),
    ("daily 25:00-26:00", "between 00:00 and 24:00"),
    ("daily 17:00-17:00", "is empty"),
])
def test_bad_recurrences_are_refused_with_the_key(text, message, tmp_path):
    path = tmp_path / "d.yaml"
    path.write_text(yaml.safe_dump({"kind": "daemon", "cap_schedule": [{"every": text, "cap_w": 500}]}))
    with pytest.raises(Exception, match=rf"d.yaml:3: cap_schedule\[0\]\.every: .*{message}"):
        load_config(path, DaemonConfig)


def test_a_weekday_evening_window_lowers_the_cap_at_the_window(make_daemon, clock):
    d = make_daemon([job(i) for i in range(1, 9)], timezone="Europe/Paris", policy="easy-pc",
                    cap_schedule=[{"every": "weekdays 17:00-20:00", "cap_w": 700, "label": "evening peak"}])
    d.cycle()  # 16:50
    assert d.last_view.snapshot.cap_w == math.inf
    assert sample(d, "wattsched_power_cap_watts") == math.inf
    # the window ahead is in the snapshot and exported
    assert d.last_view.snapshot.cap.next_change_after(MONDAY_1650) == MONDAY_1650 + 600
    assert sample(d, "wattsched_power_cap_ahead_watts", {"horizon": "15m"}) == 700.0
    assert sample(d, "wattsched_power_cap_next_change_timestamp_seconds") == MONDAY_1650 + 600
    # easy-pc looks ahead: jobs that would run into the window at 300 W a node are not all started
    assert len(d.last_view.classified.running) + len(d.store.starts()) < 4
    clock.advance(11 * 60)  # 17:01
    d.cycle()
    assert d.last_view.snapshot.cap_w == 700.0
    assert sample(d, "wattsched_power_cap_watts") == 700.0
    clock.advance(3 * 3600)  # 20:01
    d.cycle()
    assert sample(d, "wattsched_power_cap_watts") == math.inf


def test_no_window_on_a_saturday(make_daemon, clock):
    d = make_daemon(epoch=SATURDAY_1650, timezone="Europe/Paris",
                    cap_schedule=[{"every": "weekdays 17:00-20:00", "cap_w": 700}])
    clock.advance(20 * 60)
    d.cycle()
    assert sample(d, "wattsched_power_cap_watts") == math.inf
    assert sample(d, "wattsched_power_cap_ahead_watts", {"horizon": "2h"}) == math.inf


def test_fixed_steps_and_recurring_windows_combine_to_the_lowest_cap(make_daemon, clock):
    d = make_daemon(timezone="Europe/Paris", cap_schedule=[
        {"start_s": 0, "cap_w": 1000}, {"every": "weekdays 17:00-20:00", "cap_w": 700}])
    d.cycle()
    assert sample(d, "wattsched_power_cap_watts") == 1000.0
    clock.advance(11 * 60)
    d.cycle()
    assert sample(d, "wattsched_power_cap_watts") == 700.0


def test_cap_schedule_file_in_the_simulators_format(make_daemon, clock, tmp_path):
    path = tmp_path / "caps.csv"
    path.write_text(f"start_s,end_s,cap_w,label\n{MONDAY_1650 + 60:.0f},{MONDAY_1650 + 120:.0f},650,test\n")
    d = make_daemon(cap_schedule=str(path))
    d.cycle()
    assert sample(d, "wattsched_power_cap_watts") == math.inf
    clock.advance(90)
    d.cycle()
    assert sample(d, "wattsched_power_cap_watts") == 650.0


# --- demand response --------------------------------------------------------------------------------------------------
def test_a_demand_response_event_is_seen_from_its_notice_time_only(make_daemon, clock):
    t = MONDAY_1650
    d = make_daemon(cap_w=1000, demand_response={"events": [
        {"notice_s": t + 600, "start_s": t + 1800, "end_s": t + 3600, "reduction_w": 100, "label": "grid peak"}]})
    d.cycle()
    assert d.last_view.snapshot.cap.next_change_after(t) == math.inf  # not announced yet
    assert sample(d, "wattsched_demand_response_announced") == 0
    clock.advance(700)
    d.cycle()
    snap = d.last_view.snapshot
    # the reduction counts from the platform power when the event was first seen: four idle nodes, 400 W
    [event] = snap.dr_events
    assert (event.baseline_w, event.cap_w, event.event.label, event.event.notice_s) == (400.0, 300.0, "grid peak",
                                                                                         t + 600)
    assert snap.cap.cap_at(t + 1800) == 300.0 and snap.cap.cap_at(t + 3600) == 1000.0
    assert sample(d, "wattsched_demand_response_announced") == 1
    assert sample(d, "wattsched_demand_response_active") == 0
    assert sample(d, "wattsched_power_cap_ahead_watts", {"horizon": "30m"}) == 300.0
    clock.advance(1200)
    d.cycle()
    assert sample(d, "wattsched_power_cap_watts") == 300.0 and sample(d, "wattsched_demand_response_active") == 1


def test_demand_response_targets_are_checked(tmp_path):
    path = tmp_path / "d.yaml"
    path.write_text(yaml.safe_dump({"kind": "daemon", "demand_response": {"events": [
        {"notice_s": 50, "start_s": 10, "end_s": 20}]}}))
    with pytest.raises(Exception) as err:
        load_config(path, DaemonConfig)
    text = str(err.value)
    assert "demand_response.events[0].notice_s: must not be after start_s (10 s), got 50" in text
    assert "demand_response.events[0].cap_w: give exactly one target: cap_w or reduction_w" in text


# --- energy budgets ---------------------------------------------------------------------------------------------------
def test_energy_consumed_is_integrated_and_kept_across_a_restart(make_daemon, clock):
    t = MONDAY_1650
    budget = [{"start_s": t - 3600, "end_s": t + 86400, "energy_j": 1e7, "label": "today"}]
    d = make_daemon(energy_budgets=budget)
    d.cycle()
    assert d.last_view.snapshot.budgets[0].consumed_j == 0.0
    power = d.last_view.snapshot.platform_power_w
    assert power == pytest.approx(400.0)  # four idle nodes
    clock.advance(100)
    d.cycle()
    assert d.last_view.snapshot.budgets[0].consumed_j == pytest.approx(100 * power)
    assert sample(d, "wattsched_energy_budget_consumed_joules", {"budget": "today"}) == pytest.approx(40000.0)
    assert sample(d, "wattsched_energy_budget_remaining_joules", {"budget": "today"}) == pytest.approx(1e7 - 4e4)
    d.store.close()
    clock.advance(50)
    d2 = make_daemon(energy_budgets=budget, epoch=MONDAY_1650 + clock.t)  # the restarted daemon's cluster
    d2.cycle()
    assert d2.last_view.snapshot.budgets[0].consumed_j == pytest.approx(150 * power)


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_budget_energy_is_measured_power_while_telemetry_is_fresh_and_the_estimate_when_it_is_stale(
        make_daemon, clock):
    t = MONDAY_1650
    budget = [{"start_s": t - 3600, "end_s": t + 86400, "energy_j": 1e7, "label": "today"}]
    source = {"wattsched_energy_budget_source": "power"}
    # Fresh telemetry (the nodes' power as Slurm reports it): the simulated nodes idle at 95 W, measured.
    d = make_daemon(energy_budgets=budget, telemetry={"source": "slurm"})
    d.cycle()
    measured = d.last_view.snapshot.platform_power_w
    assert measured == pytest.approx(4 * 95.0)
    clock.advance(100)
    d.cycle()
    assert d.last_view.snapshot.budgets[0].consumed_j == pytest.approx(100 * measured)
    assert sample(d, "wattsched_energy_budget_source", source) == 1.0
    d.store.close()
    # Prometheus unreachable: telemetry is stale, the daemon counts the estimate (config: 100 W per idle node).
    dead = {"source": "prometheus", "url": f"http://127.0.0.1:{_closed_port()}", "timeout_s": 1}
    d2 = make_daemon(energy_budgets=budget, telemetry=dead, epoch=MONDAY_1650 + clock.t)
    d2.cycle()
    assert sample(d2, "wattsched_telemetry_stale") == 1.0
    assert d2.last_view.snapshot.platform_power_w == pytest.approx(4 * 100.0)
    clock.advance(50)
    d2.cycle()
    # The first 100 s were measured (kept in the store across the restart), the next 50 s are the estimate.
    assert d2.last_view.snapshot.budgets[0].consumed_j == pytest.approx(100 * measured + 50 * 400.0, rel=1e-6)
    assert sample(d2, "wattsched_energy_budget_source", {"wattsched_energy_budget_source": "estimate"}) == 1.0


def test_budget_energy_on_the_simulated_cluster_is_its_nodes_energy_counters_as_the_simulator_counts_it(
        make_daemon, clock):
    # The daemon reads node power before its starts change it: counted from that level, the 100 s after a start
    # would miss the started jobs' power. The simulated nodes' energy counters (actuator.kind: sim) count it all.
    t = MONDAY_1650
    budget = [{"start_s": t - 3600, "end_s": t + 86400, "energy_j": 1e9, "label": "today"}]
    d = make_daemon([job(1, runtime=60.0), job(2, nodes=2)], energy_budgets=budget, actuator={"kind": "sim"},
                    telemetry={"source": "slurm"})
    sim = d.backend
    d.cycle()  # both jobs start: the nodes draw more than the daemon read
    before_w, e0 = d.last_view.snapshot.platform_power_w, sim.engine.energy_j
    assert sim.engine.power_w > before_w
    clock.advance(100)  # job 1 ends after 60 s
    d.cycle()
    consumed = d.last_view.snapshot.budgets[0].consumed_j
    assert consumed == pytest.approx(sim.engine.energy_j - e0, abs=1e-4)
    assert consumed > 100 * before_w * 1.1
    assert sample(d, "wattsched_energy_budget_source", {"wattsched_energy_budget_source": "counters"}) == 1.0


def test_energy_bud_keeps_c_ea_across_a_restart_and_powers_idle_nodes_down(make_daemon, clock):
    t = MONDAY_1650
    budget = [{"start_s": t - 3600, "end_s": t + 86400, "energy_j": 1e8, "label": "week"}]
    rate = 1e8 / (3600 + 86400)
    params = {"shutdown": "window"}
    d = make_daemon(energy_budgets=budget, policy="energy-bud", params=params)
    d.cycle()
    # The first call in the window is a monitoring stage: R * 3600 s made available, nothing counted yet.
    assert d.policy_state.c_ea_j == pytest.approx(rate * 3600)
    assert sample(d, "wattsched_energy_budget_available_joules", {"budget": "week"}) == pytest.approx(rate * 3600)
    assert sample(d, "wattsched_energy_budget_joules", {"budget": "week"}) == 1e8
    assert sample(d, "wattsched_energy_budget_projected_joules", {"budget": "week"}) == pytest.approx(400.0 * 86400)
    # No job: the idle nodes are powered down (4 * (switching off 101 W - idle 100 W) in the estimate).
    for _ in range(3):
        clock.advance(10)
        d.cycle()
    assert sample(d, "wattsched_nodes", {"state": "off"}) == 4
    saved = d.policy_state.model_copy()
    d.store.close()  # the daemon dies; its state was saved at the end of its last cycle
    clock.advance(50)
    d2 = make_daemon(energy_budgets=budget, policy="energy-bud", params=params, epoch=MONDAY_1650 + clock.t)
    assert d2.policy_state.c_ea_j == pytest.approx(saved.c_ea_j)
    d2.cycle()
    # No monitoring stage yet (600 s): C_ea goes on from the saved counter, neither reset nor granted twice.
    assert d2.policy_state.monitoring_stages == saved.monitoring_stages
    assert d2.policy_state.c_ea_j == pytest.approx(saved.c_ea_j + (rate - saved.last_power_w) * 50)


def test_windows_ahead_are_in_the_snapshot_soonest_first_fixed_and_recurring(make_daemon, clock):
    t = MONDAY_1650
    tonight = dt.datetime(2026, 11, 23, 22, 0, tzinfo=dt.UTC).timestamp()  # the daemon's default zone
    budgets = [{"start_s": t + 86400, "end_s": t + 2 * 86400, "energy_j": 1e8},
               {"every": "daily 22:00-23:00", "energy_j": 1e6, "label": "night"}]
    d = make_daemon(energy_budgets=budgets, policy="energy-bud")
    d.cycle()
    snap = d.last_view.snapshot
    assert snap.budgets == []  # none in force at 16:50
    ahead = [(b.start_s, b.end_s, b.energy_j) for b in snap.upcoming_budgets]
    # Tonight's recurring window, the fixed one from this time tomorrow, tomorrow night's.
    assert ahead[:3] == [(tonight, tonight + 3600, 1e6), (t + 86400, t + 2 * 86400, 1e8),
                         (tonight + 86400, tonight + 86400 + 3600, 1e6)]
    assert all(b.start_s > t for b in snap.upcoming_budgets)
    assert d.policy_state.monitoring_stages == 0  # nothing counted before a window opens
    # In tonight's window it is in force and no longer ahead.
    clock.advance(tonight + 60 - t)
    d.cycle()
    snap = d.last_view.snapshot
    assert [b.budget.start_s for b in snap.budgets] == [tonight]
    assert [b.start_s for b in snap.upcoming_budgets[:2]] == [t + 86400, tonight + 86400]


# --- policy state -----------------------------------------------------------------------------------------------------
def test_policy_state_is_kept_across_restart_and_sighup_and_reset_when_the_policy_changes(
        make_daemon, clock, tmp_path, caplog, monkeypatch):
    monkeypatch.syspath_prepend(str(install_entry_point(tmp_path / "site")))
    path = tmp_path / "d.yaml"
    config = {"kind": "daemon", "policy": "node-setting", "params": {"cap_w": None, "freq_hz": None},
              "node_power": NODE_POWER, "state_dir": str(tmp_path / "state"), "poll_interval_s": 0.01}
    path.write_text(yaml.safe_dump(config))
    d = make_daemon(policy="node-setting", params={"cap_w": None, "freq_hz": None})
    d.cycle()
    d.cycle()
    assert d.policy_state.calls == 2
    d.store.close()
    with caplog.at_level(logging.INFO, logger="wattsched.daemon"):
        d2 = make_daemon(policy="node-setting", params={"cap_w": None, "freq_hz": None})
    assert d2.policy_state.calls == 2  # restored from the state store
    assert any("policy state of node-setting restored" in r.getMessage() for r in caplog.records)
    d2.config_path = path
    d2._reload()  # SIGHUP with the same policy and parameters keeps it
    d2.cycle()
    assert d2.policy_state.calls == 3
    path.write_text(yaml.safe_dump({**config, "policy": "fcfs", "params": {}}))
    with caplog.at_level(logging.INFO, logger="wattsched.daemon"):
        d2._reload()
    assert type(d2.policy_state).__name__ == "NoState"
    assert any("policy changed from node-setting" in r.getMessage() and "starting fresh policy state" in
               r.getMessage() for r in caplog.records)
    d2.store.close()
    # a restart with other parameters does not take the saved state either
    path.write_text(yaml.safe_dump(config))
    d3 = make_daemon(policy="node-setting", params={"cap_w": None, "freq_hz": 2e9})
    assert d3.policy_state.calls == 0


# --- heterogeneous platforms ------------------------------------------------------------------------------------------
PLATFORM = {"name": "mixed", "node_groups": [
    {"name": "cpu", "count": 2, "prefix": "node", "power": {"idle_w": 90, "busy_min_w": 150, "busy_w": 200,
                                                             "off_w": 5}},
    {"name": "gpu", "count": 2, "prefix": "gnode", "gpus": 2, "power": {"idle_w": 200, "busy_min_w": 400,
                                                                         "busy_w": 800, "off_w": 20}},
]}


def test_a_platform_file_gives_the_same_platform_power_in_the_simulator_and_the_daemon(tmp_path, clock):
    path = tmp_path / "mixed.yaml"
    path.write_text(yaml.safe_dump(PLATFORM))
    platform = load_platform(str(path))
    # one job on a cpu node, one on a gpu node: nominal power (no per-job power in the trace)
    jobs = [TraceJob(id=1, submit_s=0.0, runtime_s=1000.0, walltime_s=2000.0, procs=1, nodes=1, user="u"),
            TraceJob(id=2, submit_s=0.0, runtime_s=1000.0, walltime_s=2000.0, procs=1, nodes=1, user="u")]
    result = Engine(platform, jobs, _Pinned({1: (0,), 2: (2,)})).run()
    tl = result.timeline
    both = [p for t, p, busy in zip(tl["t_s"], tl["power_w"], tl["busy_nodes"], strict=True) if busy == 2 and t < 500]
    sim_power = both[0]

    cfg = DaemonConfig(platform=str(path), state_dir=tmp_path / "state", policy="easy")
    sim = SimCluster(jobs, platform, speedup=1.0, clock=clock, epoch_s=MONDAY_1650)
    d = Daemon(cfg, sim, metrics=DaemonMetrics(), notifier=Notifier(environ={}))
    d.policy = _Pinned({1: (0,), 2: (2,)})
    d.cycle()
    clock.advance(5)
    state = sim.read_state()
    view = build_view(state, partitions=frozenset(), holds={}, starts={}, power=d.power, cap_w=d._cap_w,
                      estimator=None, epoch=1, include_adopted=False, platform_cache={})
    assert sorted(j.job_id for j in view.classified.running) == [1, 2]
    nodes = {n.name: n.power.busy_w for n in view.snapshot.platform.nodes}
    assert nodes == {"node0000": 200, "node0001": 200, "gnode0000": 800, "gnode0001": 800}
    fc = d._forecast(view.snapshot, None)
    assert view.snapshot.platform_power_w == pytest.approx(sim_power)
    assert fc.at(view.snapshot.now_s) == pytest.approx(sim_power)
    assert sim_power == pytest.approx(200 + 90 + 800 + 200)
    d.store.close()


class _Pinned:
    """Starts each job on given nodes, once they are free."""

    name = "pinned"  # no tags(): the defaults (not called with an empty queue)

    def __init__(self, where):
        self.where = where

    def init_state(self):
        return {}

    def decide(self, snapshot, state=None):
        from wattsched.model.plan import Plan, Start

        free = set(snapshot.free_nodes)
        return Plan([Start(j, self.where[j]) for j in snapshot.pending if set(self.where[j]) <= free])
