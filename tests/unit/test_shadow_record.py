"""The shadow record: round trip, retention, damaged rows, job events, and a replay of a recorded window."""

from __future__ import annotations

import json
import math
import sqlite3

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wattsched.config.daemon import DaemonConfig
from wattsched.daemon.shadow import (
    CycleObservation,
    JobEvent,
    ShadowRecorder,
    job_events,
    read_record,
    record_summary,
    replay_inputs,
)
from wattsched.daemon.slurm.records import SlurmJob
from wattsched.daemon.store import Store, StoreError
from wattsched.errors import ConfigError

NODES = ("n1", "n2", "n3", "n10")


def store_at(tmp_path):
    store = Store(tmp_path / "state.db")
    return store, ShadowRecorder(store.db, store.path)


state_names = st.sampled_from(["IDLE", "ALLOCATED", "MIXED", "DOWN+DRAIN", "IDLE+POWERED_DOWN"])
watts = st.one_of(st.none(), st.floats(0, 5000, allow_nan=False).map(lambda w: round(w, 1)))
cycle_obs = st.tuples(
    st.floats(0.1, 100.0, allow_nan=False),  # time step
    st.fixed_dictionaries({n: state_names for n in NODES}),
    st.fixed_dictionaries({n: watts for n in NODES}),
    st.one_of(st.none(), st.floats(100, 10_000, allow_nan=False)),
    st.lists(st.tuples(st.text(min_size=1, max_size=5), st.floats(0, 1e6, allow_nan=False),
                       st.floats(0, 1e6, allow_nan=False), st.floats(0, 1e4, allow_nan=False)), max_size=2),
)
events = st.lists(st.builds(
    JobEvent, job_id=st.integers(1, 10**6), event=st.sampled_from(["submit", "start", "end"]),
    time=st.floats(1e9, 2e9, allow_nan=False), nodes=st.one_of(st.none(), st.integers(0, 4)),
    limit_s=st.one_of(st.none(), st.floats(1, 1e5, allow_nan=False)), cpus=st.one_of(st.none(), st.integers(1, 64)),
    user=st.text(max_size=6), partition=st.sampled_from(["", "batch"]), state=st.sampled_from(["", "COMPLETED"]),
).map(lambda e: JobEvent(e.job_id, e.event, e.time, e.nodes, f"n[1-{e.nodes}]" if e.nodes else "", e.limit_s,
                         e.cpus, e.user, e.partition, e.state)), max_size=4)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(cycle_obs, events), min_size=1, max_size=12))
def test_what_is_recorded_reads_back_the_same(tmp_path_factory, cycles):
    store, rec = store_at(tmp_path_factory.mktemp("rt"))
    t = 1.7e9
    written, all_events = [], {}
    for no, ((step, states, power, cap, dr), evs) in enumerate(cycles, 1):
        t += step
        measured = {n: w for n, w in power.items() if w is not None}
        obs = CycleObservation(t, states, measured, {n: 2 for n in NODES}, 1234.5, cap, tuple(dr))
        rec.record(no, obs, evs, retention_s=1e9)
        written.append(obs)
        for e in evs:
            all_events.setdefault(e.job_id, []).append(e)
    back = read_record(store.db, store.path)
    assert len(back.cycles) == len(written)
    for got, obs in zip(back.cycles, written, strict=True):
        assert got.time == obs.time and got.states == dict(obs.states) and got.power == dict(obs.power)
        assert got.nodes == ("n1", "n2", "n3", "n10") and got.cpus == (2, 2, 2, 2)
        assert got.cap_w == obs.cap_w and got.power_w == 1234.5 and got.dr == obs.dr
    assert back.jobs == all_events
    assert record_summary(store.db)["cycles"] == len(written)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.floats(0.5, 20.0), st.fixed_dictionaries({n: state_names for n in NODES})),
                min_size=1, max_size=30), st.floats(1.0, 200.0))
def test_retention_keeps_exactly_the_window_with_every_state_as_it_was(tmp_path_factory, cycles, retention_s):
    store, rec = store_at(tmp_path_factory.mktemp("ret"))
    t, written = 0.0, []
    for no, (step, states) in enumerate(cycles, 1):
        t += step
        rec.record(no, CycleObservation(t, states), [], retention_s)
        written.append((t, states))
    back = read_record(store.db, store.path)
    kept = [(tt, st_) for tt, st_ in written if tt >= t - retention_s]
    assert [c.time for c in back.cycles] == [tt for tt, _ in kept]
    assert [c.states for c in back.cycles] == [st_ for _, st_ in kept]


def test_retention_deletes_old_cycles_and_ended_jobs_and_keeps_the_states_in_force(tmp_path):
    store, rec = store_at(tmp_path)
    states = {n: "IDLE" for n in NODES}
    for i in range(100):
        if i == 10:
            states = {**states, "n3": "DOWN+DRAIN"}  # recorded once, as a change, at t=10
        evs = []
        if i == 5:
            evs = [JobEvent(1, "submit", 5.0, 1), JobEvent(1, "start", 5.0, 1, "n1"), JobEvent(2, "submit", 5.0, 2)]
        if i == 20:
            evs = [JobEvent(1, "end", 20.0, state="COMPLETED")]
        rec.record(i + 1, CycleObservation(float(i), dict(states)), evs, retention_s=50.0)
    back = read_record(store.db, store.path)
    assert [c.time for c in back.cycles] == [float(i) for i in range(49, 100)]
    assert back.cycles[0].states["n3"] == "DOWN+DRAIN", "the oldest kept row holds every node's state"
    assert 1 not in back.jobs, "a job that ended before the kept window is gone"
    assert [e.event for e in back.jobs[2]] == ["submit"], "a job still waiting keeps its submission"
    assert record_summary(store.db)["cycles"] == 51


@pytest.mark.parametrize(("sql", "message"), [
    ("UPDATE shadow_cycles SET power='[100.0, 2' WHERE id=3", r"shadow_cycles row 3: power: not JSON"),
    ("UPDATE shadow_cycles SET power='[100.0]' WHERE id=4", r"shadow_cycles row 4: power: not a list of 4 values"),
    ("UPDATE shadow_cycles SET states='{\"n1\": 3}' WHERE id=2", r"shadow_cycles row 2: states: not an object"),
    ("UPDATE shadow_cycles SET time='soon' WHERE id=5", r"shadow_cycles row 5: time: 'soon' is not a finite"),
    ("UPDATE shadow_cycles SET dr='[[\"x\", 1]]' WHERE id=2", r"shadow_cycles row 2: dr: an event is not"),
    ("UPDATE shadow_jobs SET event='begin' WHERE id=2", r"shadow_jobs row 2: event: 'begin' is not one of"),
    ("UPDATE shadow_jobs SET node_list='n[1-' WHERE id=2", r"shadow_jobs row 2: node_list:"),
    ("UPDATE shadow_cycles SET time=1.0 WHERE id=5", r"shadow_cycles row 5: time: 1.0 is before"),
])
def test_a_damaged_row_is_named_with_its_file_and_row(tmp_path, sql, message):
    store, rec = store_at(tmp_path)
    for i in range(6):
        rec.record(i + 1, CycleObservation(100.0 + i, {n: "IDLE" for n in NODES}, {n: 100.0 for n in NODES}),
                   [JobEvent(7, "submit", 100.0), JobEvent(7, "start", 101.0, 2, "n[1-2]")] if i == 1 else [], 1e9)
    store.db.execute(sql)
    with pytest.raises(StoreError, match=rf"{tmp_path}/state.db: {message}"):
        read_record(store.db, store.path)


def test_a_truncated_state_store_is_refused_naming_the_file(tmp_path):
    store, rec = store_at(tmp_path)
    for i in range(200):
        rec.record(i + 1, CycleObservation(float(i), {n: "IDLE" for n in NODES}, {n: 100.0 + i for n in NODES}),
                   [], 1e9)
    store.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    store.close()
    path = tmp_path / "state.db"
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(StoreError, match=rf"{path}"):
        s = Store(path, read_only=True)
        read_record(s.db, s.path)


def test_a_store_without_a_record_says_how_to_make_one(tmp_path):
    store = Store(tmp_path / "state.db")
    with pytest.raises(StoreError, match="no shadow record; run the daemon with --shadow"):
        read_record(store.db, store.path)
    assert record_summary(store.db) is None


def test_job_events_submit_start_requeue_vanish_and_runs_between_cycles():
    last: dict[int, str] = {}
    running = SlurmJob(1, "RUNNING", submit_time=10.0, start_time=12.0, nodes=("n1", "n2"), node_count=2,
                       time_limit_s=60.0, cpus=4, user="alice", partition="batch")
    pending = SlurmJob(2, "PENDING", submit_time=11.0, node_count=1)
    got = job_events(last, [running, pending], 13.0)
    assert [(e.job_id, e.event, e.time) for e in got] == [(1, "submit", 10.0), (1, "start", 12.0), (2, "submit", 11.0)]
    assert got[1].node_list == "n[1-2]" and got[1].nodes == 2 and got[0].limit_s == 60.0
    assert job_events(last, [running, pending], 14.0) == [], "nothing new, nothing recorded"
    requeued = SlurmJob(1, "PENDING", submit_time=10.0, node_count=2)
    short = SlurmJob(2, "COMPLETED", submit_time=11.0, start_time=14.5, end_time=15.0, nodes=("n3",))
    got = job_events(last, [requeued, short], 16.0)
    assert [(e.job_id, e.event, e.time) for e in got] == [(1, "end", 16.0), (2, "start", 14.5), (2, "end", 15.0)]
    again = SlurmJob(1, "RUNNING", submit_time=10.0, start_time=20.0, nodes=("n1",))
    got = job_events(last, [again], 21.0)  # job 2 is no longer listed: forgotten (its end is recorded)
    assert [(e.job_id, e.event) for e in got] == [(1, "start")] and 2 not in last
    got = job_events(last, [], 30.0, skipped=[1])
    assert got == [], "a record Slurm sent but could not be read is not an end"
    got = job_events(last, [], 31.0)
    assert [(e.job_id, e.event, e.state) for e in got] == [(1, "end", "GONE")] and last == {}
    cancelled = SlurmJob(3, "CANCELLED", submit_time=5.0, start_time=6.0)
    assert job_events(last, [cancelled], 32.0) == [], "ended before it was ever seen, without nodes: not replayed"


def test_shadow_needs_a_dry_run():
    assert DaemonConfig.model_validate({"kind": "daemon", "shadow": True}).dry_run
    with pytest.raises(Exception, match="shadow: shadow mode applies nothing"):
        DaemonConfig.model_validate({"kind": "daemon", "shadow": True, "dry_run": False})
    with pytest.raises(Exception, match="shadow_retention_s"):
        DaemonConfig.model_validate({"kind": "daemon", "shadow_retention_s": 0})


def record_window(tmp_path, jobs, *, t0=95.0, cycles=90, cap=None):
    """A record of 4 two-core nodes running ``jobs`` ``(id, submit, start, end, nodes)`` as the daemon sees them."""
    store, rec = store_at(tmp_path)
    for k in range(cycles):
        now = t0 + k
        seen, busy, used = [], set(), 0
        for jid, sub, st_, en, n in jobs:
            if now < sub:
                continue
            alloc = tuple(NODES[used:used + n]) if st_ <= now < en else ()
            if now < st_:
                seen.append(SlurmJob(jid, "PENDING", submit_time=sub, node_count=n, time_limit_s=120, cpus=2 * n))
            elif now < en:
                used += n
                busy |= set(alloc)
                seen.append(SlurmJob(jid, "RUNNING", submit_time=sub, start_time=st_, node_count=n, nodes=alloc,
                                     time_limit_s=120, cpus=2 * n))
        power = {n: 250.0 if n in busy else 100.0 for n in NODES}
        states = {n: "ALLOCATED" if n in busy else "IDLE" for n in NODES}
        rec.record(k + 1, CycleObservation(now, states, power, {n: 2 for n in NODES}, sum(power.values()), cap),
                   job_events(rec.last, seen, now), 1e9)
    return store


def test_a_window_starting_mid_run_replays_from_the_recorded_state(tmp_path):
    from wattsched.daemon.shadowreplay import shadow_replay

    jobs = [(1, 100, 100, 140, 4), (2, 101, 140, 160, 2), (3, 102, 140, 150, 2), (4, 103, 160, 175, 4)]
    store = record_window(tmp_path / "s", jobs, cap=900.0)
    record = read_record(store.db, store.path, since=120.0)
    inputs = replay_inputs(record, cores_per_node=2)
    hot = {j.job_id: j for j in inputs.live if j.hot}
    assert set(hot) == {1} and hot[1].start == 120.0 and hot[1].end == 140.0
    assert {j.job_id: j.submit for j in inputs.live} == {1: 120.0, 2: 120.0, 3: 120.0, 4: 120.0}
    config = DaemonConfig.model_validate({"kind": "daemon", "policy": "easy", "state_dir": str(tmp_path / "s"),
                                          "node_power": {"idle_w": 100, "busy_w": 250, "off_w": 10}})
    done = shadow_replay(config, record, tmp_path / "out", report=False)
    c = done.comparison
    assert c["start_order"]["live"] == [2, 3, 4] == c["start_order"]["replay"]
    assert c["cap_w"] == 900.0, "the recorded cap is the replay's"
    replayed = {j["id"]: j for j in c["jobs"]}
    assert replayed[1]["replay_start_s"] == 0.0 and replayed[2]["replay_start_s"] == pytest.approx(20.0)
    assert c["live"]["energy_j"] == pytest.approx(c["replay"]["energy_j"], rel=0.05)
    assert math.isclose(c["live"]["time_above_cap_s"], 20.0 + 10.0 + 15.0, abs_tol=1.5)
    table = (tmp_path / "out" / "shadow-trace.csv").read_text()
    assert "running_at_start" in table and "shadow" in table
    assert json.loads((tmp_path / "out" / "shadow.json").read_text())["policy"] == "easy"
    assert "| 1 (running) | 4 |" in (tmp_path / "out" / "shadow.md").read_text()


def test_a_window_without_jobs_is_refused(tmp_path):
    from wattsched.daemon.shadowreplay import shadow_replay

    store = record_window(tmp_path / "s", [], cycles=5)
    config = DaemonConfig.model_validate({"kind": "daemon", "state_dir": str(tmp_path / "s")})
    with pytest.raises(ConfigError, match="no job started in the window"):
        shadow_replay(config, read_record(store.db, store.path), tmp_path / "out", report=False)


def test_the_daemon_in_shadow_mode_records_what_slurm_did_and_applies_nothing(tmp_path):
    """The loop on the simulated cluster, with the test starting jobs as Slurm would: the record, across a restart,
    replays in the same order."""
    import time

    from wattsched.daemon.loop import Daemon
    from wattsched.daemon.metrics import DaemonMetrics
    from wattsched.daemon.notify import Notifier
    from wattsched.daemon.shadowreplay import shadow_replay
    from wattsched.daemon.simcluster import SimCluster
    from wattsched.model.platform import NodePowerModel, Platform
    from wattsched.workload.records import TraceJob

    power = {"idle_w": 100.0, "busy_w": 300.0, "off_w": 10.0}
    platform = Platform.homogeneous_cluster(4, power=NodePowerModel(**power))
    now = [0.0]
    epoch = float(int(time.time()))
    trace = [TraceJob(i, 0.0, rt, 2 * rt, n, n, user="u", mean_w=280.0, max_w=290.0, std_w=5.0)
             for i, rt, n in ((1, 50.0, 2), (2, 80.0, 2), (3, 30.0, 4))]
    sim = SimCluster(trace, platform, speedup=1.0, clock=lambda: now[0], epoch_s=epoch)
    names = [n.name for n in platform.nodes]
    cfg = DaemonConfig(policy="easy", shadow=True, poll_interval_s=10.0, node_power=power,
                       state_dir=tmp_path / "state", telemetry={"source": "slurm"})
    assert cfg.dry_run

    def daemon():
        return Daemon(cfg, sim, metrics=DaemonMetrics(), notifier=Notifier(environ={}))

    d = daemon()
    plan = {10.0: [(1, names[:2]), (2, names[2:])], 90.0: [(3, names)]}  # Slurm's own schedule
    for step in range(16):
        now[0] = step * 10.0
        for jid, nodes in plan.get(now[0], ()):
            sim.release(jid, nodes, "")
        if step == 6:  # a restart mid-run goes on where the record ends
            d.store.close()
            d = daemon()
        d.cycle()
    assert not d.store.holds() and all(e.dry_run for e in d.store.audit_since(0))
    record = read_record(d.store.db, d.store.path)
    d.store.close()
    assert len(record.cycles) == 16
    assert {j: [e.event for e in ev] for j, ev in record.jobs.items()} == {
        1: ["submit", "start", "end"], 2: ["submit", "start", "end"], 3: ["submit", "start", "end"]}
    start = {j: next(e for e in ev if e.event == "start") for j, ev in record.jobs.items()}
    assert start[1].node_list == hostlist_of(names[:2]) and start[3].nodes == 4
    # the simulated cluster starts a released job at the time of its last reading: 1 and 2 at 0, 3 at 80
    assert [start[j].time - epoch for j in (1, 2, 3)] == pytest.approx([0.0, 0.0, 80.0])
    assert record.cycles[2].states[names[0]].startswith("ALLOCATED")
    assert record.cycles[2].power and record.cycles[2].power_w > 0, "the nodes' power, as the cluster reported it"
    done = shadow_replay(cfg, record, tmp_path / "replay", report=False)
    c = done.comparison
    assert c["start_order"]["live"] == [1, 2, 3] == c["start_order"]["replay"]
    by_id = {j["id"]: j for j in c["jobs"]}
    assert by_id[3]["replay_start_s"] == pytest.approx(80.0), "3 starts when 2 ends"
    assert c["live"]["n_jobs"] == c["replay"]["n_jobs"] == 3


def hostlist_of(names):
    from wattsched.daemon.slurm.hostlist import compress

    return compress(names)


def test_an_acting_daemon_with_shadow_record_records_the_schedule_it_made(tmp_path):
    """``shadow_record: true`` without ``shadow``: the daemon starts the jobs itself and records them as it goes."""
    import time

    from wattsched.daemon.loop import Daemon
    from wattsched.daemon.metrics import DaemonMetrics
    from wattsched.daemon.notify import Notifier
    from wattsched.daemon.simcluster import SimCluster
    from wattsched.model.platform import NodePowerModel, Platform
    from wattsched.workload.records import TraceJob

    power = {"idle_w": 100.0, "busy_w": 300.0, "off_w": 10.0}
    platform = Platform.homogeneous_cluster(4, power=NodePowerModel(**power))
    now = [0.0]
    trace = [TraceJob(i, 0.0, rt, 2 * rt, n, n, user="u", mean_w=280.0, max_w=290.0, std_w=5.0)
             for i, rt, n in ((1, 50.0, 2), (2, 80.0, 2), (3, 30.0, 4))]
    sim = SimCluster(trace, platform, speedup=1.0, clock=lambda: now[0], epoch_s=float(int(time.time())))
    cfg = DaemonConfig(policy="easy", shadow_record=True, poll_interval_s=10.0, node_power=power,
                       state_dir=tmp_path / "state", heartbeat_file=tmp_path / "hb" / "heartbeat",
                       telemetry={"source": "slurm"})
    assert not cfg.dry_run and not cfg.shadow
    d = Daemon(cfg, sim, metrics=DaemonMetrics(), notifier=Notifier(environ={}))
    for step in range(16):
        now[0] = step * 10.0
        d.cycle()
    applied = [e for e in d.store.audit_since(0) if e.action == "start"]
    assert applied and not any(e.dry_run for e in applied), "the daemon started the jobs itself"
    record = read_record(d.store.db, d.store.path)
    d.store.close()
    assert len(record.cycles) == 16
    assert {j: [e.event for e in ev] for j, ev in record.jobs.items()} == {
        1: ["submit", "start", "end"], 2: ["submit", "start", "end"], 3: ["submit", "start", "end"]}
    start = {j: next(e.time for e in ev if e.event == "start") for j, ev in record.jobs.items()}
    assert start[3] > max(start[1], start[2]), "the 4-node job waits for both"


def _queued_three(tmp_path):
    """A record of three jobs submitted at once on an idle 4-node cluster, each started by Slurm 2 s after it could
    start (ends at 12, 24 and 30 s), and an fcfs daemon config with idle 100 W and busy 300 W nodes."""
    jobs = [(1, 100, 102, 112, 4), (2, 100, 114, 124, 4), (3, 100, 126, 130, 2)]
    store = record_window(tmp_path / "s", jobs, t0=99.0, cycles=40)
    config = DaemonConfig.model_validate({"kind": "daemon", "policy": "fcfs", "state_dir": str(tmp_path / "s"),
                                          "node_power": {"idle_w": 100, "busy_w": 300, "off_w": 10}})
    return read_record(store.db, store.path), config


def _starts(comparison) -> list[float]:
    return [j["replay_start_s"] for j in sorted(comparison["jobs"], key=lambda j: j["id"])]


def test_a_start_latency_delays_each_queued_start_and_platform_power_replaces_the_measured(tmp_path):
    from wattsched.daemon.shadowreplay import shadow_replay

    # submitted at once on an idle cluster, each started by Slurm 2 s after it could start
    record, config = _queued_three(tmp_path)
    plain = shadow_replay(config, record, tmp_path / "plain", report=False).comparison
    late = shadow_replay(config, record, tmp_path / "late", report=False, start_latency_s=2.0,
                         job_power="platform").comparison
    assert _starts(plain) == pytest.approx([0.0, 10.0, 20.0]), "the replay starts each job at once"
    assert _starts(late) == pytest.approx([2.0, 14.0, 26.0]) == [j["live_start_s"] for j in late["jobs"]]
    assert [j["replay_end_s"] for j in late["jobs"]] == pytest.approx([12.0, 24.0, 30.0])
    # 2 s at idle, then the run at the platform's 300 W busy power (the record measured 250 W)
    assert late["replay"]["energy_j"] > plain["replay"]["energy_j"]
    assert any("start latency modelled: 2 s" in n for n in late["notes"])
    assert any("300 W a node" in n for n in late["notes"])
    with pytest.raises(ConfigError, match="--start-latency"):
        shadow_replay(config, record, tmp_path / "bad", report=False, start_latency_s=-1.0)


def test_sched_passes_start_each_job_at_slurms_pass_after_its_release(tmp_path):
    from wattsched.daemon.shadowreplay import shadow_replay

    record, config = _queued_three(tmp_path)
    # Slurm's own scheduler (no release lag): each end's pass starts the next job at once
    slurm = shadow_replay(config, record, tmp_path / "slurm", report=False, sched_passes_s=3.0).comparison
    assert _starts(slurm) == pytest.approx([0.0, 10.0, 20.0])
    # the daemon releases a second after its decision: the submission's pass (at 0) and each end's (at 13, 26)
    # come too early, and the release waits for the next, 3 s later
    daemon = shadow_replay(config, record, tmp_path / "daemon", report=False, sched_passes_s=3.0,
                           start_latency_s=1.0).comparison
    assert _starts(daemon) == pytest.approx([3.0, 16.0, 29.0])
    assert [j["replay_end_s"] for j in sorted(daemon["jobs"], key=lambda j: j["id"])] == pytest.approx(
        [13.0, 26.0, 33.0])
    assert any("scheduling passes modelled: at least 3 s apart" in n for n in daemon["notes"])
    with pytest.raises(ConfigError, match="--sched-passes"):
        shadow_replay(config, record, tmp_path / "bad", report=False, sched_passes_s=-1.0)


def test_a_job_that_ended_before_the_record_began_is_not_recorded(tmp_path):
    """Slurm lists finished jobs for MinJobAge: a job that ran and ended before the record began is not part of it;
    one that ran and ended between two cycles of the record is."""
    before = SlurmJob(4, "COMPLETED", submit_time=1.0, start_time=2.0, end_time=5.0, nodes=("n1",))
    inside = SlurmJob(5, "COMPLETED", submit_time=8.0, start_time=9.0, end_time=11.0, nodes=("n2",))
    last: dict[int, str] = {}
    assert job_events(last, [before], 10.0, since=10.0) == [] and last == {}
    got = job_events(last, [before, inside], 12.0, since=10.0)
    assert [(e.job_id, e.event) for e in got] == [(5, "submit"), (5, "start"), (5, "end")]
    # without a beginning (an old caller), the finished job is recorded as it was
    assert [e.event for e in job_events({}, [before], 10.0)] == ["submit", "start", "end"]


def test_a_recorder_begins_at_its_first_cycle_or_where_an_earlier_record_ends(tmp_path):
    db = sqlite3.connect(tmp_path / "state.db", isolation_level=None)
    rec = ShadowRecorder(db, tmp_path / "state.db")
    assert rec.since(100.0) == 100.0 and rec.since(200.0) == 100.0
    rec.record(1, CycleObservation(150.0, {"n1": "IDLE"}, {}, {"n1": 2}, 0.0, None, ()), [], 86400.0)
    assert ShadowRecorder(db, tmp_path / "state.db").since(300.0) == 150.0  # a restart goes on from the record


def test_traces_import_reads_the_recorded_jobs_as_slurm_ran_them(tmp_path, capsys):
    """``traces import --shadow-record``: each job's own submit, start and end (no window clipping, unlike the
    replay's), running and never-started jobs skipped, ``--since`` dropping jobs that ended before it."""
    import csv

    from wattsched.cli import main

    jobs = [(1, 100, 100, 140, 4), (2, 101, 140, 160, 2), (3, 150, 182, 250, 2), (4, 103, 300, 320, 1)]
    record_window(tmp_path / "s", jobs).close()
    out = tmp_path / "jobs.csv"
    assert main(["traces", "import", "--shadow-record", str(tmp_path / "s"), "--since", "0", "--power", "none",
                 "-o", str(out)]) == 0
    said = capsys.readouterr().out
    assert "wrote 2 jobs from" in said and "(shadow record)" in said
    assert "1 never started" in said and "1 still running" in said
    with out.open() as fh:
        rows = {int(r["id"]): r for r in csv.DictReader(fh)}
    assert set(rows) == {1, 2}
    assert float(rows[1]["submit_unix_s"]) == 100.0 and float(rows[2]["submit_s"]) == 1.0
    assert float(rows[2]["start_s"]) == 40.0 and float(rows[2]["runtime_s"]) == 20.0
    assert rows[1]["node_list"] == "n[1-3,10]" and rows[2]["node_list"] == "n[1-2]"
    assert float(rows[2]["walltime_s"]) == 120.0 and rows[1]["power_source"] == "none"
    # a job that ended before --since is left out; the state.db itself is accepted too
    assert main(["traces", "import", "--shadow-record", str(tmp_path / "s" / "state.db"), "--since", "150",
                 "--power", "none", "-o", str(out)]) == 0
    with out.open() as fh:
        assert [r["id"] for r in csv.DictReader(fh)] == ["2"]
    assert main(["traces", "import", "--shadow-record", str(tmp_path / "nowhere"), "-o", str(out)]) == 2
    assert "--shadow-record: " in (err := capsys.readouterr().err) and "nowhere: no state store" in err
