"""A node whose job just ended is taken at its predicted power until ``telemetry.settle_s`` has passed.

Rate-based telemetry (Prometheus's ``rate(...[10s])`` of the RAPL counters)
still shows an ended job's power on its node for a while. Taken as measured,
that power kept ``easy-pc`` from starting a two-node head job under a cap on
the test cluster (the fault-injection soak): the nodes it needed read as busy,
one-node jobs were backfilled meanwhile, and each of their ends did it again.
"""

from __future__ import annotations

from wattsched.config.daemon import DaemonConfig
from wattsched.daemon.metrics import DaemonMetrics
from wattsched.daemon.reconciler import NodeReconciler
from wattsched.daemon.slurm.records import SlurmJob

NOW = 1_800_000_000.0
READ = {"n1": 290.0, "n2": 100.0, "n3": 100.0}


def reconciler(tmp_path, settle_s: float) -> NodeReconciler:
    r = NodeReconciler(store=None, metrics=DaemonMetrics())
    r.configure(DaemonConfig(state_dir=tmp_path / "state", telemetry={"source": "slurm", "settle_s": settle_s}),
                actuator=None)
    return r


def measured_after(r: NodeReconciler, jobs: list[SlurmJob], now: float) -> set[str]:
    r.note_ended_jobs(jobs, now)
    return set(r.settled(dict(READ), now))


def test_a_node_whose_job_left_the_queue_reads_as_predicted_for_settle_s(tmp_path):
    r = reconciler(tmp_path, 30.0)
    job = SlurmJob(1, "RUNNING", start_time=NOW - 60, nodes=("n1",))
    assert measured_after(r, [job], NOW) == {"n1", "n2", "n3"}  # a job running for a minute: measured
    assert measured_after(r, [], NOW + 2) == {"n2", "n3"}  # gone (no record left): n1 still shows its power
    assert measured_after(r, [], NOW + 20) == {"n2", "n3"}
    assert measured_after(r, [], NOW + 33) == {"n1", "n2", "n3"}  # settle_s after the cycle that saw it gone


def test_an_ended_job_still_listed_counts_from_its_end_time_also_after_a_restart(tmp_path):
    ended = SlurmJob(2, "COMPLETED", start_time=NOW - 100, end_time=NOW - 10, nodes=("n1", "n2"))
    r = reconciler(tmp_path, 30.0)  # a daemon just started: it never saw the job run
    assert measured_after(r, [ended], NOW) == {"n3"}
    assert measured_after(r, [ended], NOW + 19) == {"n3"}
    assert measured_after(r, [ended], NOW + 21) == {"n1", "n2", "n3"}  # 31 s after its end
    # a node that runs a new job is left to the start's own settling, not to the old job's end
    r = reconciler(tmp_path, 30.0)
    new = SlurmJob(3, "RUNNING", start_time=NOW - 1, nodes=("n2",))
    assert measured_after(r, [ended, new], NOW) == {"n2", "n3"}


def test_with_settle_s_zero_every_reading_is_used(tmp_path):
    r = reconciler(tmp_path, 0.0)
    job = SlurmJob(1, "RUNNING", start_time=NOW - 60, nodes=("n1",))
    measured_after(r, [job], NOW)
    assert measured_after(r, [SlurmJob(1, "COMPLETED", end_time=NOW + 1, nodes=("n1",))], NOW + 1) == set(READ)


def test_a_pending_jobs_end_time_is_a_guess_and_settles_nothing(tmp_path):
    r = reconciler(tmp_path, 30.0)
    guessed = SlurmJob(4, "PENDING", end_time=NOW + 3600, nodes=("n1",))
    assert measured_after(r, [guessed], NOW) == set(READ)
