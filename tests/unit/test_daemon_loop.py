"""The control loop on the simulated cluster (a fake clock drives it), its metrics endpoint and sd_notify.

Everything is real: the SimCluster plays Slurm, the store is SQLite in tmp_path,
metrics are fetched over HTTP and notifications read from AF_UNIX sockets.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import sqlite3
import time
import urllib.request
import uuid

import pytest

from wattsched.config import load_config
from wattsched.config.daemon import DaemonConfig
from wattsched.daemon.loop import Daemon
from wattsched.daemon.metrics import DaemonMetrics, serve
from wattsched.daemon.notify import Notifier
from wattsched.daemon.simcluster import SimCluster
from wattsched.daemon.slurm.backend import MARKER
from wattsched.daemon.slurm.hostlist import expand
from wattsched.errors import SlurmCommandError
from wattsched.model.platform import NodePowerModel, Platform
from wattsched.workload.records import TraceJob

EPOCH = float(int(time.time()))  # intents older than a week (wall clock) are pruned at start
NODE_POWER = {"idle_w": 100.0, "busy_w": 300.0, "off_w": 10.0, "busy_min_w": 200.0, "switch_on_s": 20.0,
              "switch_on_w": 150.0, "switch_off_s": 5.0, "switch_off_w": 120.0, "cap_min_w": 50.0,
              "cap_max_w": 300.0}


class FakeClock:
    """The SimCluster's real-time clock, advanced by hand."""

    def __init__(self):
        self.t = 0.0

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


def job(id: int, runtime: float = 100.0, nodes: int = 1, submit: float = 0.0, mean_w: float = 280.0) -> TraceJob:
    return TraceJob(id=id, submit_s=submit, runtime_s=runtime, walltime_s=2 * runtime, procs=nodes, nodes=nodes,
                    user=f"user{id % 2}", mean_w=mean_w, max_w=mean_w + 10.0, std_w=5.0)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def platform() -> Platform:
    return Platform.homogeneous_cluster(4, power=NodePowerModel(**NODE_POWER))


@pytest.fixture
def make_sim(clock, platform):
    def make(jobs, cls=SimCluster):
        return cls(jobs, platform, speedup=1.0, clock=clock, epoch_s=EPOCH)

    return make


@pytest.fixture
def make_daemon(tmp_path):
    daemons = []

    def make(backend, notifier=None, **config) -> Daemon:
        config.setdefault("policy", "easy")
        config.setdefault("poll_interval_s", 0.01)
        cfg = DaemonConfig(node_power=NODE_POWER, state_dir=tmp_path / "state", **config)
        d = Daemon(cfg, backend, metrics=DaemonMetrics(), notifier=notifier or Notifier(environ={}))
        daemons.append(d)
        return d

    yield make
    for d in daemons:
        d.store.close()


def running(sim: SimCluster) -> dict[int, tuple[str, ...]]:
    return {jid: j.nodes for jid, j in sim.jobs.items() if j.state == "RUNNING"}


def held(sim: SimCluster) -> set[int]:
    return {jid for jid, j in sim.jobs.items() if j.held}


def audit(d: Daemon, action: str | None = None, outcome: str | None = None):
    return [e for e in d.store.audit_since(0) if (action is None or e.action == action)
            and (outcome is None or e.outcome == outcome)]


def intent_outcomes(d: Daemon) -> dict[str, str]:
    return {t: o for t, o in d.store.db.execute("SELECT target, outcome FROM intents ORDER BY id")}


def sample(d: Daemon, name: str, labels: dict | None = None) -> float | None:
    return d.metrics.registry.get_sample_value(name, labels or {})


def cycles_until_done(d: Daemon, sim: SimCluster, clock: FakeClock, total: int, step: float = 20.0,
                      limit: int = 60):
    """Cycle until the ``total`` jobs of the trace have finished; yield after each cycle."""
    for _ in range(limit):
        report = d.cycle()
        yield report
        if sim.finished == total:
            return
        clock.advance(step)
    raise AssertionError(f"jobs left after {limit} cycles: {sim.jobs}")


# --------------------------------------------------------------------------- starting jobs


def test_jobs_start_only_when_the_daemon_releases_them_on_the_audited_nodes(make_sim, make_daemon, clock):
    jobs = [job(1, 50, nodes=2), job(2, 80), job(3, 30, nodes=3), job(4, 60), job(5, 40, nodes=2, submit=10)]
    sim = make_sim(jobs)
    clock.advance(30.0)
    sim.read_state()
    assert held(sim) == {1, 2, 3, 4, 5} and running(sim) == {}  # Slurm alone starts nothing
    d = make_daemon(sim)
    seen: dict[int, tuple[str, ...]] = {}
    for _ in cycles_until_done(d, sim, clock, len(jobs)):
        starts = {int(e.target): e for e in audit(d, "start", "applied")}
        for jid, nodes in running(sim).items():
            assert jid in starts, f"job {jid} runs but the daemon never released it"
            assert starts[jid].reason.startswith("on ")
            assert set(nodes) == set(expand(starts[jid].reason[3:]))
            seen[jid] = nodes
    assert set(seen) == {1, 2, 3, 4, 5}
    assert sorted(int(e.target) for e in audit(d, "start", "applied")) == [1, 2, 3, 4, 5]  # once each
    confirmed = audit(d, "started")
    assert {int(e.target) for e in confirmed} == {1, 2, 3, 4, 5}
    assert {e.outcome for e in confirmed} == {"confirmed"}
    assert d.store.starts() == {} and d.store.open_intents() == []
    assert sample(d, "wattsched_decisions_total", {"action": "start", "outcome": "applied"}) == 5


def test_the_simulated_cluster_reports_each_jobs_class_as_its_user_names_it(make_sim, make_daemon, clock):
    # The class sets how a lower frequency slows a job (dvfs, dr): the daemon must see the trace's class.
    jobs = [job(1), job(2), job(3)]
    jobs[0].app_class, jobs[1].app_class = "memory", "mixed"
    sim = make_sim(jobs)
    clock.advance(1.0)
    assert {j.job_id: j.comment for j in sim.read_state().jobs} == {
        1: "wattsched:class=memory", 2: "wattsched:class=mixed", 3: ""}
    d = make_daemon(sim, policy="fcfs", job_class="cpu")
    d.cycle()
    seen = {j.id: j.app_class for j in d.last_view.snapshot.pending.values()}
    seen.update((jid, r.job.app_class) for jid, r in d.last_view.snapshot.running.items())
    assert seen == {1: "memory", 2: "mixed", 3: "cpu"}


@pytest.mark.parametrize("rule, expected", [
    ({"job_class_from_comment": "ignored"}, {1: "cpu", 2: "cpu", 3: "cpu"}),
    ({"job_class_from_comment": "validated", "job_class_allowed": {"users": {"user1": ["memory"]}}},
     {1: "memory", 2: "cpu", 3: "cpu"}),
    ({"job_class_from_comment": "validated"}, {1: "cpu", 2: "cpu", 3: "cpu"}),
])
def test_the_site_decides_whether_a_users_declared_class_is_used(make_sim, make_daemon, clock, caplog, rule,
                                                                   expected):
    # job 1 is user1's and declares memory, job 2 user0's and declares mixed, job 3 declares none
    jobs = [job(1), job(2), job(3)]
    jobs[0].app_class, jobs[1].app_class = "memory", "mixed"
    sim = make_sim(jobs)
    clock.advance(1.0)
    d = make_daemon(sim, policy="fcfs", job_class="cpu", **rule)
    with caplog.at_level("WARNING", logger="wattsched.daemon"):
        for _ in range(3):
            d.cycle()
            seen = {j.id: j.app_class for j in d.last_view.snapshot.pending.values()}
            seen.update((jid, r.job.app_class) for jid, r in d.last_view.snapshot.running.items())
            assert seen == expected
            clock.advance(5.0)
    told = sorted(int(r.getMessage().split()[1]) for r in caplog.records if "declared class" in r.getMessage())
    assert told == sorted(jid for jid in (1, 2) if expected[jid] == "cpu")  # once per job over three cycles


def run_and_count(d, sim, clock, total: int) -> list[int]:
    """Jobs running after each cycle (Slurm starts jobs only when released, so this is the most at any time)."""
    counts = []
    for _ in cycles_until_done(d, sim, clock, total, step=25.0):
        counts.append(len(running(sim)))
    return counts


def test_easy_pc_under_an_800_w_cap_never_runs_more_than_two_jobs(make_sim, make_daemon, clock):
    # 4 nodes idle 100 W, busy 300 W: idle 400 W, each job adds 200 W -> 800 W allows two
    sim = make_sim([job(i, 60) for i in range(1, 7)])
    d = make_daemon(sim, policy="easy-pc", params={"check": "max"}, cap_w=800)
    counts = run_and_count(d, sim, clock, 6)
    assert max(counts) == 2
    assert sim.finished == 6
    assert sample(d, "wattsched_power_cap_watts") == 800.0
    assert d.last_view.snapshot.cap_w == 800.0


def test_the_same_jobs_uncapped_fill_the_machine(make_sim, make_daemon, clock):
    sim = make_sim([job(i, 60) for i in range(1, 7)])
    d = make_daemon(sim, policy="easy-pc", params={"check": "max"})
    assert max(run_and_count(d, sim, clock, 6)) == 4


def test_heartbeat_holds_the_time_of_the_last_read(make_sim, make_daemon, clock):
    sim = make_sim([job(1)])
    d = make_daemon(sim)
    clock.advance(42.0)
    d.cycle()
    assert d.config.heartbeat_path.read_text() == f"{int(EPOCH + 42.0)}\n"


def test_heartbeat_is_never_written_through_a_planted_symlink(make_sim, make_daemon, clock, tmp_path):
    sim = make_sim([job(1)])
    d = make_daemon(sim)
    hb = d.config.heartbeat_path
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    # the fixed temporary name an earlier daemon wrote through, and the heartbeat itself
    (hb.parent / "heartbeat.tmp").symlink_to(victim)
    hb.symlink_to(victim)
    d.cycle()
    assert victim.read_text() == "precious\n"
    assert not hb.is_symlink() and hb.read_text().strip().isdigit()
    assert oct(hb.stat().st_mode & 0o777) == oct(0o644)  # read by the gate as SlurmUser, written by us only
    assert [p.name for p in hb.parent.iterdir() if p.name.endswith(".tmp") and not p.is_symlink()] == []


def test_heartbeat_in_a_directory_others_can_write_is_not_written(make_sim, make_daemon, clock, tmp_path, caplog):
    sim = make_sim([job(1)])
    hb_dir = tmp_path / "public"
    hb_dir.mkdir()
    hb_dir.chmod(0o777)
    d = make_daemon(sim, heartbeat_file=hb_dir / "heartbeat")
    d.cycle()
    assert not (hb_dir / "heartbeat").exists()
    assert f"{hb_dir}: the heartbeat directory" in caplog.text and "chmod go-w" in caplog.text


def test_cycle_number_survives_a_restart(make_sim, make_daemon, clock):
    sim = make_sim([job(1), job(2)])
    first = make_daemon(sim)
    first.cycle()
    first.cycle()
    first.store.close()
    second = make_daemon(sim)
    assert second.cycle().cycle == 3
    assert [e.cycle for e in audit(second, "started")] == [2, 2]


def test_finished_jobs_feed_the_power_history(make_sim, make_daemon, clock):
    sim = make_sim([job(1, 40, mean_w=250.0), job(2, 40, nodes=2, mean_w=210.0)])
    d = make_daemon(sim, predictor="history")
    list(cycles_until_done(d, sim, clock, 2, step=15.0))
    d.cycle()  # the cycle that sees them gone
    rows = {r[0]: r for r in d.store.history()}
    assert set(rows) == {1, 2}
    assert (rows[1][4], rows[1][8], rows[1][11]) == (1, 250.0, "slurm")  # nodes, mean_w, source
    assert (rows[2][4], rows[2][8]) == (2, 210.0)


def test_a_job_slurm_does_not_start_is_held_again_after_the_timeout(make_sim, make_daemon, clock):
    class ReservedNode(SimCluster):
        """Slurm will not use node0000 (say, a reservation the daemon does not know about)."""

        def _usable(self, node):
            return super()._usable(node) and node.name != "node0000"

    sim = make_sim([job(1, 100)], cls=ReservedNode)
    d = make_daemon(sim, start_timeout_cycles=2)
    assert d.cycle().started == [1]
    assert held(sim) == set() and running(sim) == {} and d.store.starts()[1][0] == ("node0000",)
    clock.advance(5)
    d.cycle()
    assert held(sim) == set() and d.store.starts()[1][2] == 1
    clock.advance(5)
    report = d.cycle()
    assert report.rehold == [1]
    assert held(sim) == {1} and MARKER in sim.jobs[1].admin_comment.split()
    assert d.store.starts() == {}
    (hold,) = audit(d, "hold")
    assert hold.outcome == "applied" and "not started by Slurm within 2 cycles" in hold.reason
    assert sample(d, "wattsched_start_timeouts_total") == 1


def test_a_job_held_again_after_the_timeout_is_recorded_as_our_hold(make_sim, make_daemon, clock):
    class ReservedNode(SimCluster):
        def _usable(self, node):
            return super()._usable(node) and node.name != "node0000"

    sim = make_sim([job(1, 100)], cls=ReservedNode)
    d = make_daemon(sim, start_timeout_cycles=1)
    d.cycle()
    clock.advance(5)
    assert d.cycle().rehold == [1]
    assert d.store.holds().get(1, ("", ""))[1].startswith("not started by Slurm within 1 cycles")


@pytest.mark.parametrize(("gate", "reason"), [("daemon", "held on arrival"),
                                              ("lua", "submitted while the gate was open; held")])
def test_a_pending_job_nobody_holds_is_held_by_the_daemon(make_sim, make_daemon, clock, gate, reason):
    sim = make_sim([job(1, 1000, nodes=4), job(2, 50, submit=1.0)])
    clock.advance(1)
    sim.read_state()
    sim.release(1, ["node0000", "node0001", "node0002", "node0003"], "")
    sim.release(2, [], "")  # let through while the gate was open: pending, held by nobody
    assert sim.jobs[2].state == "PENDING" and not sim.jobs[2].held
    d = make_daemon(sim, gate=gate)
    report = d.cycle()
    assert report.held == [2]
    assert sim.jobs[2].held and MARKER in sim.jobs[2].admin_comment.split()
    assert d.store.holds() == {2: ("daemon", reason)}
    assert [(e.action, e.target, e.outcome, e.reason) for e in audit(d)] == [("hold", "2", "applied", reason)]
    clock.advance(5)
    d.cycle()
    # now in the policy's queue; the reason it waits replaces the arrival note
    assert [j.job_id for j in d.last_view.classified.ours] == [2]
    assert d.store.holds()[2][1] not in ("", reason)


def test_jobs_held_by_the_gate_get_their_reason_recorded(make_sim, make_daemon, clock):
    sim = make_sim([job(i, 500) for i in range(1, 5)])
    d = make_daemon(sim, policy="easy-pc", params={"check": "max"}, cap_w=800)
    d.cycle()
    assert held(sim) == {3, 4}
    holds = d.store.holds()
    assert set(holds) == {3, 4}
    assert all(reason for _source, reason in holds.values())


def test_held_jobs_are_counted_by_kind_of_reason_with_the_full_text_in_the_store(make_sim, make_daemon, clock):
    from wattsched.model.reasons import REASON_KINDS

    sim = make_sim([job(i, 500) for i in range(1, 6)])
    d = make_daemon(sim, policy="easy-pc", params={"check": "max"}, cap_w=800)
    d.cycle()
    assert held(sim) == {3, 4, 5}
    values = {kind: sample(d, "wattsched_held_jobs", {"reason": kind}) for kind in REASON_KINDS}
    assert values == {"nodes": 0, "power_cap": 1, "budget": 0, "reservation": 2, "queue_order": 0, "other": 0}
    labels = {s.labels["reason"] for fam in d.metrics.registry.collect() if fam.name == "wattsched_held_jobs"
              for s in fam.samples}
    assert labels == set(REASON_KINDS)
    reasons = {jid: reason for jid, (_source, reason) in d.store.holds().items()}
    assert reasons[3].startswith("head of queue: needs 1 nodes (2 free) and predicted power under the cap")


# --------------------------------------------------------------------------- dry run and failures


def test_dry_run_changes_nothing_and_audits_what_it_would_do(make_sim, make_daemon, clock):
    sim = make_sim([job(i, 60) for i in range(1, 5)])
    d = make_daemon(sim, dry_run=True)
    for _ in range(3):
        report = d.cycle()
        assert sorted(report.started) == [1, 2, 3, 4]
        clock.advance(30)
    assert held(sim) == {1, 2, 3, 4} and running(sim) == {}
    entries = audit(d)
    assert entries and {e.outcome for e in entries} == {"dry-run"} and all(e.dry_run for e in entries)
    assert sorted(int(e.target) for e in entries if e.action == "start" and e.cycle == 1) == [1, 2, 3, 4]
    assert not d.config.heartbeat_path.exists()
    assert d.store.open_intents() == [] and intent_outcomes(d) == {} and d.store.starts() == {}
    assert sample(d, "wattsched_dry_run") == 1
    assert sample(d, "wattsched_decisions_total", {"action": "start", "outcome": "dry-run"}) == 12
    assert d.stop() == 0
    assert held(sim) == {1, 2, 3, 4}  # dry-run releases nothing at stop either


class FailingRelease(SimCluster):
    """``scontrol release`` fails for the jobs in ``fail``."""

    fail: set[int] = set()

    def release(self, job_id, nodes, admin_comment):
        if job_id in self.fail:
            raise SlurmCommandError(["scontrol", "release", str(job_id)], 1, "", "Invalid job id specified")
        super().release(job_id, nodes, admin_comment)


def test_a_failed_action_is_audited_and_the_cycle_goes_on(make_sim, make_daemon, clock):
    sim = make_sim([job(1), job(2), job(3)], cls=FailingRelease)
    sim.fail = {2}
    d = make_daemon(sim)
    report = d.cycle()
    assert sorted(report.started) == [1, 3]
    assert set(running(sim)) == {1, 3} and held(sim) == {2}
    (failed,) = audit(d, "start", "failed")
    assert failed.target == "2" and "Invalid job id specified" in failed.reason and not failed.dry_run
    assert intent_outcomes(d) == {"1": "applied", "2": "failed", "3": "applied"}
    assert sample(d, "wattsched_decisions_total", {"action": "start", "outcome": "failed"}) == 1
    assert sample(d, "wattsched_slurm_command_failures_total", {"command": "scontrol"}) == 1
    assert 2 not in d.store.starts()
    # the job stays in the queue and is started once Slurm accepts the release
    sim.fail = set()
    clock.advance(5)
    assert d.cycle().started == [2]
    assert set(running(sim)) == {1, 2, 3}


def test_a_failed_action_shows_in_the_cycle_report(make_sim, make_daemon):
    sim = make_sim([job(1), job(2)], cls=FailingRelease)
    sim.fail = {2}
    report = make_daemon(sim).cycle()
    assert len(report.failed_actions) == 1
    assert "1 actions failed" in report.summary()


class BrokenRead(SimCluster):
    """``squeue`` fails for the first ``failures`` reads."""

    failures = 10**9

    def read_state(self):
        if self.failures > 0:
            self.failures -= 1
            raise SlurmCommandError(["squeue", "--all", "--json"], 1, "", "Unable to contact slurm controller")
        return super().read_state()


def test_failed_cycles_are_logged_counted_and_skipped(make_sim, make_daemon, caplog):
    sim = make_sim([job(1)], cls=BrokenRead)
    d = make_daemon(sim, on_stop="keep")
    with caplog.at_level(logging.ERROR, logger="wattsched.daemon"):
        assert d.run(max_cycles=2) == 0
    failed = [r.getMessage() for r in caplog.records if "failed" in r.getMessage()]
    assert any(m.startswith("cycle 1 failed: 'squeue --all --json' exited with 1") for m in failed), failed
    assert any(m.startswith("cycle 2 failed") for m in failed), failed
    assert sample(d, "wattsched_cycle_failures_total", {"stage": "observe"}) == 2
    assert sample(d, "wattsched_cycles_total") == 0
    assert sample(d, "wattsched_last_cycle_timestamp_seconds") == 0


def test_the_loop_recovers_when_slurm_answers_again(make_sim, make_daemon):
    sim = make_sim([job(1)], cls=BrokenRead)
    sim.failures = 1
    d = make_daemon(sim, on_stop="keep")
    assert d.run(max_cycles=3) == 0
    assert sample(d, "wattsched_cycles_total") == 2
    assert 1 in running(sim)


def test_failing_to_release_at_stop_is_exit_status_1(make_sim, make_daemon, caplog):
    sim = make_sim([job(1)], cls=BrokenRead)
    d = make_daemon(sim, on_stop="release")
    with caplog.at_level(logging.ERROR, logger="wattsched.daemon"):
        assert d.run(max_cycles=1) == 1
    assert any("could not release held jobs" in r.getMessage() for r in caplog.records)


def test_each_failed_cycle_is_counted_once(make_sim, make_daemon):
    sim = make_sim([job(1)], cls=BrokenRead)
    d = make_daemon(sim, on_stop="keep")
    d.run(max_cycles=2)
    total = sum(s.value for m in d.metrics.registry.collect() if m.name == "wattsched_cycle_failures"
                for s in m.samples if s.name == "wattsched_cycle_failures_total")
    assert total == 2


# --------------------------------------------------------------------------- restart: in-flight actions


def test_reconcile_settles_start_intents_left_open_by_a_crash(make_sim, make_daemon, clock, tmp_path):
    # job 1 fills the machine; jobs 2 and 3 wait
    sim = make_sim([job(1, 1000, nodes=4), job(2, 50), job(3, 50)])
    sim.read_state()
    sim.release(1, ["node0000", "node0001", "node0002", "node0003"], "")
    # the previous daemon released job 3 (pinned) and died before recording it; job 2's release never happened
    sim.release(3, ["node0002"], "")
    assert sim.jobs[3].state == "PENDING" and not sim.jobs[3].held and sim.jobs[2].held
    d = make_daemon(sim)
    i2 = d.store.begin("start", "2", {"nodes": ["node0001"]}, now=EPOCH)
    i3 = d.store.begin("start", "3", {"nodes": ["node0002"]}, now=EPOCH)
    clock.advance(5)
    report = d.cycle()
    outcomes = dict(d.store.db.execute("SELECT id, outcome FROM intents WHERE id IN (?, ?)", (i2, i3)))
    assert outcomes == {i2: "reconciled:not-applied", i3: "reconciled:applied"}
    assert d.store.open_intents() == []
    assert 2 in d.store.holds() and 3 not in d.store.holds()
    assert d.store.starts()[3][0] == ("node0002",)
    assert 3 not in report.held and not sim.jobs[3].held  # awaited as a start, not held again
    assert [j.job_id for j in d.last_view.classified.starting] == [3]
    assert [j.job_id for j in d.last_view.classified.ours] == [2]


def test_reconcile_of_a_start_that_ran_and_of_an_open_hold(make_sim, make_daemon, clock):
    sim = make_sim([job(1, 1000), job(2, 50)])
    sim.read_state()
    sim.release(1, ["node0003"], "")  # running now
    d = make_daemon(sim)
    i1 = d.store.begin("start", "1", {"nodes": ["node0003"]}, now=EPOCH)
    i2 = d.store.begin("hold", "2", now=EPOCH)  # job 2 is held (sim gate): the hold took effect
    i3 = d.store.begin("power_down", "node0002", now=EPOCH)
    d.cycle()
    outcomes = dict(d.store.db.execute("SELECT id, outcome FROM intents WHERE id IN (?, ?, ?)", (i1, i2, i3)))
    assert outcomes == {i1: "reconciled:applied", i2: "reconciled:applied", i3: "reconciled:unknown"}


# --------------------------------------------------------------------------- reload and stop


def write_config(path, state_dir, **keys) -> None:
    """A daemon config file; ``keys`` (YAML text) add to or replace the base keys."""
    base = {"state_dir": str(state_dir), "poll_interval_s": "0.01", "slurm": "{backend: sim}",
            "node_power": "{idle_w: 100, busy_w: 300}"}
    path.write_text("".join(f"{k}: {v}\n" for k, v in {**base, **keys}.items()))


@pytest.fixture
def restore_signals():
    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    yield
    for s, handler in saved.items():
        signal.signal(s, handler)


def test_sighup_reloads_a_valid_config(make_sim, tmp_path, restore_signals, caplog):
    path = tmp_path / "wattsched.yaml"
    write_config(path, tmp_path / "state", policy="easy")
    config = load_config(path, DaemonConfig)
    sim = make_sim([job(1)])
    d = Daemon(config, sim, metrics=DaemonMetrics(), notifier=Notifier(environ={}))
    d.config_path = path
    d.install_signal_handlers()
    write_config(path, tmp_path / "state", policy="easy-pc", cap_w=700)
    os.kill(os.getpid(), signal.SIGHUP)
    with caplog.at_level(logging.INFO, logger="wattsched.daemon"):
        assert d.run(max_cycles=2) == 0
    d.store.close()
    assert d.config.policy == "easy-pc" and type(d.policy).__name__ == "EasyPcPolicy"
    assert d.last_view.snapshot.cap_w == 700.0  # the second cycle ran with the new config
    assert any("SIGHUP: config reloaded" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(
    ("bad", "named"),
    [
        ({"policy": "no-such-policy"}, "unknown policy 'no-such-policy'; available: "),
        ({"node_power": "{idel_w: 1}"}, "{path}:4: node_power.idel_w: unknown key; did you mean 'idle_w'?"),
        ({"poll_interval_s": "[1"}, "{path}:3: invalid YAML (column 6)"),
    ],
)
def test_sighup_with_an_invalid_config_keeps_the_old_one(make_sim, tmp_path, caplog, bad, named):
    path = tmp_path / "wattsched.yaml"
    write_config(path, tmp_path / "state", policy="easy-pc", cap_w=800)
    sim = make_sim([job(1)])
    d = Daemon(load_config(path, DaemonConfig), sim, metrics=DaemonMetrics(), notifier=Notifier(environ={}))
    d.config_path = path
    policy, config = d.policy, d.config
    write_config(path, tmp_path / "state", **{"policy": "easy-pc", "cap_w": 800, **bad})
    d.request_reload()
    with caplog.at_level(logging.INFO, logger="wattsched.daemon"):
        assert d.run(max_cycles=2) == 0
    d.store.close()
    assert d.policy is policy and d.config is config
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and errors[0].startswith("SIGHUP: the new config is invalid, keeping the old one")
    assert named.format(path=path) in errors[0]
    assert d.cycle_no == 2  # the service went on


def test_stop_releases_every_held_job_and_removes_the_heartbeat(make_sim, make_daemon, clock):
    sim = make_sim([job(i, 500) for i in range(1, 7)])
    d = make_daemon(sim, policy="easy-pc", params={"check": "max"}, cap_w=800)
    d.cycle()
    assert held(sim) == {3, 4, 5, 6} and d.config.heartbeat_path.exists()
    assert d.stop() == 0
    assert held(sim) == set()
    assert not d.config.heartbeat_path.exists()
    assert sorted(int(e.target) for e in audit(d, "release", "applied")) == [3, 4, 5, 6]
    assert all(MARKER not in j.admin_comment.split() for j in sim.jobs.values())
    assert all(not j.required for jid, j in sim.jobs.items() if jid > 2)  # unpinned: Slurm places them
    assert d.store.holds() == {}


def test_stop_with_on_stop_keep_leaves_jobs_held(make_sim, make_daemon, clock):
    sim = make_sim([job(i, 500) for i in range(1, 7)])
    d = make_daemon(sim, policy="easy-pc", params={"check": "max"}, cap_w=800, on_stop="keep")
    d.cycle()
    assert d.stop() == 0
    assert held(sim) == {3, 4, 5, 6}
    assert audit(d, "release") == []
    assert not d.config.heartbeat_path.exists()


def test_sigterm_stops_run_and_releases(make_sim, make_daemon, restore_signals):
    sim = make_sim([job(i, 500) for i in range(1, 7)])
    d = make_daemon(sim, policy="easy-pc", params={"check": "max"}, cap_w=800, poll_interval_s=0.2)
    d.install_signal_handlers()
    os.kill(os.getpid(), signal.SIGTERM)  # pending before the first sleep: one cycle, then stop
    assert d.run(max_cycles=3) == 0
    assert d.cycle_no == 1 and held(sim) == set()


class SlowRead(SimCluster):
    """A read that takes longer than the poll interval; calls ``during`` (if set) while reading."""

    delay_s = 0.05
    during = None

    def read_state(self):
        if self.during is not None:
            self.during()
        time.sleep(self.delay_s)
        return super().read_state()


def test_a_cycle_longer_than_the_interval_still_honours_stop(make_sim, make_daemon):
    sim = make_sim([job(1)], cls=SlowRead)
    d = make_daemon(sim, poll_interval_s=0.01)
    calls = []

    def during():
        calls.append(1)
        if len(calls) == 2:
            d.request_stop()

    sim.during = during
    assert d.run(max_cycles=20) == 0
    assert d.cycle_no == 2


def test_stop_is_not_lost_when_a_reload_is_pending(make_sim, make_daemon):
    sim = make_sim([job(1)])
    d = make_daemon(sim, on_stop="keep")
    d.request_reload()  # systemctl reload ...
    d.request_stop()  # ... then systemctl stop, within one cycle
    d.run(max_cycles=3)
    assert d.cycle_no == 1


# --------------------------------------------------------------------------- metrics endpoint


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_metrics_endpoint_serves_the_cycle_counters_over_http(make_sim, make_daemon):
    sim = make_sim([job(1), job(2)])
    d = make_daemon(sim, cap_w=1000)
    d.cycle()
    port = free_port()
    server = serve(d.metrics, "127.0.0.1", port)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
            assert resp.status == 200
            text = resp.read().decode()
    finally:
        server.shutdown()
        server.server_close()
    lines = text.splitlines()
    assert "wattsched_cycles_total 1.0" in lines
    assert "wattsched_power_cap_watts 1000.0" in lines
    assert 'wattsched_decisions_total{action="start",outcome="applied"} 2.0' in lines
    assert 'wattsched_jobs{state="held"} 2.0' in lines
    assert any(line.startswith('wattsched_info{') and 'policy="easy"' in line for line in lines)
    assert not any(line.startswith("python_gc") for line in lines)  # our registry, not the global one


# --------------------------------------------------------------------------- sd_notify


@pytest.fixture
def notify_socket(tmp_path):
    path = tmp_path / "notify"
    if len(str(path)) > 100:  # AF_UNIX paths are limited to 108 bytes
        pytest.skip(f"tmp_path too long for an AF_UNIX socket: {path}")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(str(path))
    s.settimeout(2)
    yield str(path), s
    s.close()


def received(sock: socket.socket) -> list[str]:
    out = []
    sock.setblocking(False)
    try:
        while True:
            out.append(sock.recv(4096).decode())
    except BlockingIOError:
        pass
    finally:
        sock.settimeout(2)
    return out


def test_notifier_sends_datagrams_to_a_path_socket(notify_socket):
    path, sock = notify_socket
    n = Notifier(environ={"NOTIFY_SOCKET": path})
    assert n.ready("policy easy") is True
    assert n.watchdog() is True
    assert n.status("cycle 3: 1 queued") is True
    assert n.stopping() is True
    assert received(sock) == ["READY=1\nSTATUS=policy easy", "WATCHDOG=1", "STATUS=cycle 3: 1 queued", "STOPPING=1"]


def test_notifier_reaches_an_abstract_socket():
    name = f"wattsched-test-{uuid.uuid4().hex}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind("\0" + name)
        sock.settimeout(2)
        n = Notifier(environ={"NOTIFY_SOCKET": "@" + name})
        assert n.ready() is True
        assert sock.recv(4096) == b"READY=1"
        assert n.watchdog() is True
        assert sock.recv(4096) == b"WATCHDOG=1"


def test_notifier_without_a_socket_does_nothing(tmp_path):
    assert Notifier(environ={}).ready() is False
    assert Notifier(environ={}).watchdog() is False
    # a socket that is gone is not an error either
    assert Notifier(environ={"NOTIFY_SOCKET": str(tmp_path / "gone")}).status("x") is False


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"WATCHDOG_USEC": "30000000"}, 30.0),
        ({"WATCHDOG_USEC": "500000", "WATCHDOG_PID": str(os.getpid())}, 0.5),
        ({"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "1"}, None),  # meant for another process
        ({"WATCHDOG_USEC": "soon"}, None),
        ({"WATCHDOG_USEC": "-5"}, None),
        ({}, None),
    ],
)
def test_watchdog_interval_from_the_environment(env, expected):
    assert Notifier(environ=env).watchdog_s == expected


def test_run_notifies_ready_status_watchdog_and_stopping(make_sim, make_daemon, notify_socket):
    path, sock = notify_socket
    sim = make_sim([job(1)])
    d = make_daemon(sim, notifier=Notifier(environ={"NOTIFY_SOCKET": path}), on_stop="keep")
    assert d.run(max_cycles=2) == 0
    msgs = received(sock)
    assert msgs[0] == "READY=1\nSTATUS=policy easy, active"
    assert msgs[1].startswith("STATUS=cycle 1: 1 queued, 0 running, started 1")
    assert msgs[2] == "WATCHDOG=1"
    assert msgs[-1] == "STOPPING=1"
    assert sum(m == "WATCHDOG=1" for m in msgs) >= 2


def test_sqlite_state_is_a_plain_file_other_tools_can_read(make_sim, make_daemon, tmp_path):
    """`wattsched audit` and operators read state.db while the daemon has it open."""
    d = make_daemon(make_sim([job(1)]))
    d.cycle()
    db = sqlite3.connect(tmp_path / "state" / "state.db")
    try:
        assert db.execute("SELECT action, target, outcome FROM audit").fetchall() == [("start", "1", "applied")]
    finally:
        db.close()


def test_evicting_a_job_slurm_has_not_started_takes_the_start_back_instead_of_a_requeue(
        make_sim, make_daemon, clock):
    from wattsched.daemon.loop import CycleReport
    from wattsched.model.plan import Evict, Plan

    class ReservedNode(SimCluster):
        def _usable(self, node):
            return super()._usable(node) and node.name != "node0000"

    sim = make_sim([job(1, 100)], cls=ReservedNode)
    d = make_daemon(sim, start_timeout_cycles=10)
    assert d.cycle().started == [1]
    clock.advance(5)
    d.cycle()
    assert sim.jobs[1].state == "PENDING" and not sim.jobs[1].held and 1 in d.store.starts()
    rows, report = [], CycleReport(d.cycle_no)
    d.actions.apply(Plan([Evict(1)], reasons={1: "the cap cannot be met"}), d.last_view, rows, report, clock())
    d.store.audit(rows)
    assert report.rehold == [1] and report.evicted == []
    assert sim.jobs[1].held and d.store.starts() == {} and 1 in d.store.holds()
    assert audit(d, "requeue") == []
    (hold,) = [e for e in audit(d, "hold") if "taken back" in e.reason]
    assert hold.outcome == "applied" and "the cap cannot be met" in hold.reason


def test_a_job_sharing_its_node_learns_power_only_from_cycles_it_runs_there_alone(make_sim, make_daemon, clock):
    from dataclasses import replace as _replace
    from types import SimpleNamespace

    from wattsched.daemon.slurm.records import ClusterState, NodeAllocation, SlurmJob
    from wattsched.daemon.view import classify

    sim = make_sim([])
    d = make_daemon(sim, predictor="history")
    base = sim.read_state()
    nodes = tuple(_replace(n, current_watts=w) for n, w in zip(base.nodes, (260.0, 180.0, 100.0, 100.0),
                                                                  strict=True))

    def shared_job(jid: int, node: str) -> SlurmJob:
        return SlurmJob(jid, "RUNNING", start_time=EPOCH, submit_time=EPOCH, time_limit_s=600, node_count=1, cpus=1,
                        nodes=(node,), shared=True, allocation=(NodeAllocation(node, cpus=1),))

    # node0000 runs jobs 1 and 2, node0001 job 3 alone: only job 3's reading is its own
    state = ClusterState((shared_job(1, "node0000"), shared_job(2, "node0000"), shared_job(3, "node0001")), nodes,
                         read_at=EPOCH + 60)
    d._learn(state, SimpleNamespace(classified=classify(state, frozenset(), {}, {})))
    assert d.history.samples == {3: [180.0]}
