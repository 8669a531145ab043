"""The dr policy in the daemon on the simulated cluster: an event with notice lowers frequencies through the
``sim`` actuator, evicts (requeue, then hold) when frequencies cannot meet the limit, and keeps power under it."""

from __future__ import annotations

import pytest

pytest.importorskip("scipy", reason="the dr policy needs scipy (extra [dr])")

from wattsched.config.daemon import DaemonConfig
from wattsched.config.platform import load_platform
from wattsched.daemon.loop import Daemon
from wattsched.daemon.metrics import DaemonMetrics
from wattsched.daemon.notify import Notifier
from wattsched.daemon.simcluster import SimCluster
from wattsched.workload.records import TraceJob

EPOCH = 1_800_000_000.0


class FakeClock:
    def __init__(self):
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def run(tmp_path, cap_w: float, cycles: int = 12):
    platform = load_platform("ahmed2017")
    # two long jobs of 4 processors each, at 215 W per processor at 2.7 GHz
    jobs = [TraceJob(id=i, submit_s=float(i), runtime_s=20_000.0, walltime_s=30_000.0, procs=4, nodes=4, user="u",
                     mean_w=215.0, max_w=220.0, app_class="qe") for i in (1, 2)]
    clock = FakeClock()
    sim = SimCluster(jobs, platform, speedup=1.0, clock=clock, epoch_s=EPOCH)
    event = {"label": "grid peak", "notice_s": EPOCH + 300, "start_s": EPOCH + 600, "end_s": EPOCH + 5000,
             "cap_w": cap_w}
    cfg = DaemonConfig(state_dir=tmp_path / "state", policy="dr", platform="ahmed2017", poll_interval_s=0.01,
                       actuator={"kind": "sim"}, slurm={"backend": "sim"},
                       demand_response={"events": [event]})
    d = Daemon(cfg, sim, metrics=DaemonMetrics(), notifier=Notifier(environ={}))
    powers = []
    for _ in range(cycles):
        d.cycle()
        powers.append((sim.engine.now, sim.engine.power_w))
        clock.t += 100.0
    audit = d.store.audit_since(0.0)
    metrics = d.metrics
    d.store.close()
    return sim, audit, powers, metrics


def test_frequencies_lowered_on_the_simulated_nodes_under_the_event(tmp_path):
    idle = 128 * 60.0
    # the two jobs draw 8 x 215 W = 1720 W at 2.7 GHz (1080 W above their idle 480 W); at 1.2 GHz 840 W
    sim, audit, powers, metrics = run(tmp_path, cap_w=idle - 480 + 1300)
    freqs = [e for e in audit if e.action == "set_freq" and e.outcome == "applied"]
    assert freqs and all(e.cycle >= 7 for e in freqs)  # not before the event's start (t = 600 s)
    assert not any(e.action == "requeue" for e in audit)
    lowered = {n for n, f in sim.engine.node_freq_hz.items() if f < 2.7e9}
    assert lowered == set(range(8))  # every node of both jobs, through the sim actuator
    inside = [p for t, p in powers if t >= 700]
    assert inside and max(inside) <= idle - 480 + 1300 + 1e-6
    assert metrics.registry.get_sample_value("wattsched_demand_response_active") == 1.0


def test_a_job_is_evicted_requeued_and_held_when_frequencies_cannot_meet_the_limit(tmp_path):
    idle = 128 * 60.0
    # room for one job at 1.2 GHz (4 x 105 W - 240 W idle = 180 W above idle) but not two
    sim, audit, powers, _ = run(tmp_path, cap_w=idle + 300)
    requeues = [e for e in audit if e.action == "requeue" and e.outcome == "applied"]
    assert len(requeues) == 1
    assert "knapsack" in requeues[0].reason and "6700 W" not in requeues[0].reason
    victim = int(requeues[0].target)
    assert victim == 2  # started later: less energy spent (Eq. 9)
    assert any(e.action == "hold" and e.target == str(victim) for e in audit)
    assert sim.jobs[victim].state == "PENDING" and sim.jobs[victim].held  # not restarted behind the policy
    inside = [p for t, p in powers if t >= 700]
    assert inside and max(inside) <= idle + 300 + 1e-6


def verify_run(tmp_path, cap_w: float, policy: str, deadline_s: float = 200.0):
    platform = load_platform("ahmed2017")
    jobs = [TraceJob(id=i, submit_s=float(i), runtime_s=20_000.0, walltime_s=30_000.0, procs=4, nodes=4, user="u",
                     mean_w=215.0, max_w=220.0, app_class="qe") for i in (1, 2)]
    clock = FakeClock()
    sim = SimCluster(jobs, platform, speedup=1.0, clock=clock, epoch_s=EPOCH)
    event = {"label": "grid peak", "notice_s": EPOCH + 300, "start_s": EPOCH + 600, "end_s": EPOCH + 5000,
             "cap_w": cap_w}
    cfg = DaemonConfig(state_dir=tmp_path / "state", policy=policy, platform="ahmed2017", poll_interval_s=0.01,
                       actuator={"kind": "sim"}, slurm={"backend": "sim"}, telemetry={"source": "slurm"},
                       demand_response={"events": [event], "deadline_s": deadline_s})
    d = Daemon(cfg, sim, metrics=DaemonMetrics(), notifier=Notifier(environ={}))
    seen = []
    for _ in range(12):
        d.cycle()
        m = d.metrics.registry.get_sample_value
        seen.append((clock.t, m("wattsched_dr_event_active"), m("wattsched_dr_event_target_watts"),
                     m("wattsched_dr_deadline_missed"), m("wattsched_dr_measured_reduction_watts")))
        clock.t += 100.0
    audit = [e for e in d.store.audit_since(0.0) if e.action == "dr_verify"]
    misses = d.metrics.registry.get_sample_value("wattsched_dr_deadline_misses_total")
    d.store.close()
    return seen, audit, misses


def test_the_reduction_is_verified_after_the_deadline_and_a_miss_is_audited_counted_and_exported(tmp_path):
    idle = 128 * 60.0
    limit = idle - 480 + 1300
    # performance keeps every job at f_max: measured power stays above the limit, a miss after the deadline
    seen, audit, misses = verify_run(tmp_path / "perf", limit, "performance")
    assert [a for t, a, *_ in seen if t < 600] == [0.0] * 6 and all(a == 1.0 for t, a, *_ in seen if t >= 600)
    assert all(target == limit for t, _a, target, *_ in seen if t >= 600)
    assert all(s[2] == float("inf") for s in seen if s[0] < 600)
    assert [missed for t, *_x, missed, _r in seen if t >= 600] == [0, 0, 1, 1, 1, 1]  # deadline 200 s after 600 s
    assert [(e.outcome, e.time - EPOCH) for e in audit] == [("missed", 800.0)]
    assert "above the limit" in audit[0].reason and "measured on" in audit[0].reason
    assert misses == 1  # once per event, not once per cycle
    # dr lowers frequencies: met, no miss, and the reduction from the baseline is exported
    seen, audit, misses = verify_run(tmp_path / "dr", limit, "dr")
    assert [(e.outcome, e.time - EPOCH) for e in audit] == [("met", 800.0)]
    assert misses == 0 and all(s[3] == 0 for s in seen)
    assert all(reduction > 0 for t, *_x, reduction in seen if t >= 700)


def test_readings_of_nodes_just_changed_give_way_to_predictions_until_settle_s(tmp_path):
    platform = load_platform("ahmed2017")
    jobs = [TraceJob(id=i, submit_s=float(i), runtime_s=20_000.0, walltime_s=30_000.0, procs=4, nodes=4, user="u",
                     mean_w=215.0, max_w=220.0, app_class="qe") for i in (1, 2)]
    clock = FakeClock()
    sim = SimCluster(jobs, platform, speedup=1.0, clock=clock, epoch_s=EPOCH)
    event = {"notice_s": EPOCH + 300, "start_s": EPOCH + 600, "end_s": EPOCH + 5000, "cap_w": 128 * 60.0 + 820}
    cfg = DaemonConfig(state_dir=tmp_path / "state", policy="dr", platform="ahmed2017", poll_interval_s=0.01,
                       actuator={"kind": "sim"}, slurm={"backend": "sim"},
                       telemetry={"source": "slurm", "settle_s": 150}, demand_response={"events": [event]})
    d = Daemon(cfg, sim, metrics=DaemonMetrics(), notifier=Notifier(environ={}))
    unmeasured = {}
    for _ in range(10):
        d.cycle()
        unmeasured[clock.t] = {n for n in d.last_view.node_names if n not in d._measured}
        clock.t += 100.0
    changed = {e.target for e in d.store.audit_since(0.0) if e.action == "set_freq" and e.outcome == "applied"
               and e.time - EPOCH == 600.0}
    d.store.close()
    assert changed and unmeasured[500.0] == set()
    assert unmeasured[600.0] == set()  # read before the change of that cycle
    assert unmeasured[700.0] >= changed  # 100 s after: still the power before the change
    assert not (unmeasured[800.0] & changed)  # 200 s > settle_s: measured again


def test_an_evicted_job_is_not_offered_to_the_policy_before_slurms_begin_time(tmp_path):
    # a short event: the job evicted at its start could run again when it ends 40 s later, but Slurm's begin time
    # for a requeued job is 121 s away; released before then it would only time out and be held again
    platform = load_platform("ahmed2017")
    jobs = [TraceJob(id=i, submit_s=float(i), runtime_s=20_000.0, walltime_s=30_000.0, procs=4, nodes=4, user="u",
                     mean_w=215.0, max_w=220.0, app_class="qe") for i in (1, 2)]
    clock = FakeClock()
    sim = SimCluster(jobs, platform, speedup=1.0, clock=clock, epoch_s=EPOCH)
    event = {"notice_s": EPOCH + 300, "start_s": EPOCH + 600, "end_s": EPOCH + 640, "cap_w": 128 * 60.0 + 300}
    cfg = DaemonConfig(state_dir=tmp_path / "state", policy="dr", platform="ahmed2017", poll_interval_s=0.01,
                       actuator={"kind": "sim"}, slurm={"backend": "sim"}, start_timeout_cycles=2,
                       demand_response={"events": [event]})
    d = Daemon(cfg, sim, metrics=DaemonMetrics(), notifier=Notifier(environ={}))
    offered = {}
    while clock.t <= 900:
        d.cycle()
        offered[clock.t] = set(d.last_view.snapshot.pending)
        clock.t += 20.0
    audit = d.store.audit_since(0.0)
    d.store.close()
    (requeue,) = [e for e in audit if e.action == "requeue" and e.outcome == "applied"]
    victim, at = int(requeue.target), requeue.time - EPOCH
    assert not [e for e in audit if "not started by Slurm" in e.reason]  # never released only to time out
    assert all(victim not in jobs for t, jobs in offered.items() if at < t < at + 121)
    assert any(victim in jobs for t, jobs in offered.items() if t >= at + 121) or sim.jobs[victim].state == "RUNNING"
    restarts = [e for e in audit if e.action == "start" and e.target == str(victim) and e.time > requeue.time]
    assert restarts and all(e.time - requeue.time >= 121 for e in restarts)
