"""Free text in Slurm's plain-text output, and job records that cannot be read (issue 33, point 5).

scontrol prints values unquoted, so a job name, comment or working directory may hold ``Key=value`` text. Such
text never gives a key its value: it stays in its field, or the record is left out as unreadable (one warning
naming the job and key, counted in the daemon's metric) and the rest of the cycle goes on, in every mode.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wattsched.daemon.simcluster import SimCluster
from wattsched.daemon.slurm import parse
from wattsched.daemon.slurm.cli import SlurmCLI
from wattsched.daemon.slurm.parse import SlurmOutputError, decode_scontrol_jobs_text, parse_scontrol_jobs_text

ROOT = Path(__file__).resolve().parents[2]
LIVE = ROOT / "tests" / "fixtures" / "slurm" / "v0.0.38-live"
LINES = (LIVE / "scontrol_jobs.txt").read_text().splitlines()
HELD = LINES[1]  # job 2, Slurm 22.05.8: JobName=adminheld, Partition=batch, held by an admin
assert " JobName=adminheld " in HELD and " Comment=wattsched:power=350 " in HELD and " Partition=batch " in HELD


def with_fields(line: str = HELD, *, name: str | None = None, comment: str | None = None,
                workdir: str | None = None, admin: str | None = None) -> str:
    """The captured line with the job name, comment, working directory or admin comment set as a user (or
    the daemon, for the admin comment) would set them; scontrol prints each unquoted."""
    if admin is not None:
        line = line.replace(" Comment=wattsched:power=350 ", f" AdminComment={admin} Comment=wattsched:power=350 ")
    if name is not None:
        line = line.replace(" JobName=adminheld ", f" JobName={name} ")
    if comment is not None:
        line = line.replace(" Comment=wattsched:power=350 ", f" Comment={comment} ")
    if workdir is not None:
        line = line.replace(" WorkDir=/tmp ", f" WorkDir={workdir} ")
    return line


def test_keys_inside_a_comment_do_not_overwrite_partition_or_marker():
    for admin, marker in ((None, ""), ("wattsched:held", "wattsched:held")):
        job = parse_scontrol_jobs_text(with_fields(comment="x Partition=debug NumNodes=4", admin=admin))[0]
        assert (job.partition, job.node_count, job.admin_comment) == ("batch", 1, marker)
        assert job.comment == "x Partition=debug NumNodes=4"
        # "WorkDir=/tmp [AdminComment=wattsched:held ]Comment=x Partition=debug AdminComment=mine" is also what
        # a working directory "/tmp [AdminComment=wattsched:held ]Comment=x Partition=debug" and an admin
        # comment "mine" print: the record is not read at all, never read with a marker taken from text
        with pytest.raises(SlurmOutputError, match=r":1: AdminComment: free text .* read in two ways"):
            parse_scontrol_jobs_text(with_fields(comment="x Partition=debug AdminComment=mine", admin=admin))


def test_a_bad_number_inside_a_comment_is_text_not_an_error():
    job = parse_scontrol_jobs_text(with_fields(comment="x NumNodes=zz JobState=RUNNING"))[0]
    assert job.node_count == 1 and job.state == "PENDING" and job.comment == "x NumNodes=zz JobState=RUNNING"


def test_keys_inside_a_job_name_are_text_when_scontrol_prints_them_after_it():
    job = parse_scontrol_jobs_text(with_fields(name="x Partition=debug UserId=mallory(6) StdOut=/e"))[0]
    assert (job.name, job.partition, job.user) == ("x Partition=debug UserId=mallory(6) StdOut=/e", "batch", "root")


def test_keys_inside_a_working_directory_do_not_overwrite_the_real_ones():
    job = parse_scontrol_jobs_text(with_fields(workdir="/w Partition=debug JobState=RUNNING NumNodes=9",
                                               admin="ops"))[0]
    assert (job.partition, job.state, job.node_count, job.admin_comment) == ("batch", "PENDING", 1, "ops")
    # an admin comment of "x AdminComment=ops" would print the same: not read at all
    with pytest.raises(SlurmOutputError, match=r":1: AdminComment: free text"):
        parse_scontrol_jobs_text(with_fields(workdir="/w AdminComment=wattsched:held", admin="ops"))


def test_text_that_makes_a_key_ambiguous_leaves_the_record_out_naming_job_and_key(caplog):
    bad = with_fields(comment="x Partition=debug AdminComment=mine")
    parse._WARNED.clear()
    with caplog.at_level(logging.WARNING, logger="wattsched.daemon.slurm.parse"):
        decoded = decode_scontrol_jobs_text("\n".join([LINES[0], bad, LINES[2]]), source="scontrol -d -o show jobs")
    assert [j.job_id for j in decoded.records] == [1, 3] and decoded.skipped_ids == {2}
    assert decoded.skipped == ("job 2: AdminComment: free text (a job name, comment or working directory holding "
                               "'Key=' text) lets the record be read in two ways that differ here",)
    assert "scontrol -d -o show jobs: skipped a job record Slurm printed: job 2: AdminComment: free text" in caplog.text


def test_a_record_with_too_many_key_texts_is_left_out_not_a_hang():
    import time

    keys = parse._KNOWN_KEY_NAMES.split()
    name = " ".join(f"{k}=1" for k in keys[keys.index("UserId"):keys.index("Tres")] * 3)
    t0 = time.monotonic()
    with pytest.raises(SlurmOutputError, match=r"too many 'Key=' texts inside free-text fields|"
                                               r"read in two ways|printed twice|expected"):
        parse_scontrol_jobs_text(with_fields(name=name))
    assert time.monotonic() - t0 < 5


def test_an_unreadable_record_is_warned_about_once_not_every_cycle(caplog):
    bad = with_fields().replace(" NumNodes=1-1 ", " NumNodes=zz ")
    text = "\n".join([LINES[0], bad])
    parse._WARNED.clear()
    with caplog.at_level(logging.WARNING, logger="wattsched.daemon.slurm.parse"):
        for _ in range(3):
            decoded = decode_scontrol_jobs_text(text)
            assert [j.job_id for j in decoded.records] == [1] and decoded.skipped_ids == {2}
    assert caplog.text.count("job 2: NumNodes: expected a number >= 0, got 'zz'") == 1
    # read again, then unreadable again: warned about again
    decode_scontrol_jobs_text("\n".join([LINES[0], with_fields()]))
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="wattsched.daemon.slurm.parse"):
        decode_scontrol_jobs_text(text)
    assert caplog.text.count("job 2: NumNodes") == 1


# --------------------------------------------------------------------------- the CLI backend, every mode


def script(bin_dir: Path, name: str, body: str) -> None:
    bin_dir.mkdir(parents=True, exist_ok=True)
    (bin_dir / name).write_text("#!/bin/sh\n" + body)
    (bin_dir / name).chmod(0o755)


def fake_slurm(tmp_path: Path, jobs_text: str, squeue_json: str | None = None) -> Path:
    """Slurm 22.05 commands that print the live capture, with ``jobs_text`` as scontrol's jobs; ``squeue
    --json`` prints ``squeue_json``, or fails (as when the JSON plugin is missing) when it is None."""
    bin_dir = tmp_path / "bin"
    (tmp_path / "jobs.txt").write_text(jobs_text)
    script(bin_dir, "sinfo", f"""case "$1" in
    --version) cat {LIVE / 'version.txt'} ;;
    --json) cat {LIVE / 'sinfo.json'} ;;
esac
""")
    if squeue_json is None:
        script(bin_dir, "squeue", 'echo "squeue: error: JSON plugin not found" >&2; exit 1\n')
    else:
        (tmp_path / "squeue.json").write_text(squeue_json)
        script(bin_dir, "squeue", f"cat {tmp_path / 'squeue.json'}\n")
    script(bin_dir, "scontrol", f"""case "$*" in
    "-d -o show jobs") cat {tmp_path / 'jobs.txt'} ;;
    "-o show nodes") cat {LIVE / 'scontrol_nodes.txt'} ;;
esac
""")
    return bin_dir


@pytest.mark.parametrize("output", ["text", "auto"])
def test_cli_backend_in_text_mode_reads_the_cycle_past_spoofing_and_bad_records(tmp_path, output):
    jobs = "\n".join([LINES[0], with_fields(comment="x Partition=debug NumNodes=zz", admin="wattsched:held"),
                      LINES[2].replace(" NumCPUs=", " NumCPUs=zz X="),
                      LINES[3].replace(" StdErr=", " Comment=x Partition=debug AdminComment=mine StdErr=")]) + "\n"
    cli = SlurmCLI(bin_dir=fake_slurm(tmp_path, jobs), sleep=lambda s: None, output=output)
    state = cli.read_state()
    by_id = {j.job_id: j for j in state.jobs}
    # job 2: keys in its comment that scontrol prints before Comment= are text; job 3: a bad number; job 4:
    # its comment's AdminComment= may be the real one: left out, not read with a marker taken from text
    assert sorted(by_id) == [1, 2] and state.skipped_records == 2 and state.skipped_jobs == {3, 4}
    assert (by_id[2].partition, by_id[2].admin_comment) == ("batch", "wattsched:held")


def test_cli_backend_in_json_mode_skips_a_bad_record_and_names_its_job(tmp_path):
    import json

    doc = json.loads((LIVE / "squeue.json").read_text())
    doc["jobs"][1]["node_count"] = "zz"
    cli = SlurmCLI(bin_dir=fake_slurm(tmp_path, "", json.dumps(doc)), sleep=lambda s: None, output="json")
    state = cli.read_state()
    assert len(state.jobs) == len(doc["jobs"]) - 1 and state.skipped_jobs == {doc["jobs"][1]["job_id"]}


# --------------------------------------------------------------------------- the daemon: nothing lost


class Unreadable(SimCluster):
    """A SimCluster whose reads leave out the records of ``hidden`` jobs, as the backends leave out records
    they cannot read (``ClusterState.skipped_jobs``); Slurm itself still has the jobs."""

    hidden: frozenset[int] = frozenset()

    def read_state(self):
        from dataclasses import replace

        state = super().read_state()
        return replace(state, jobs=tuple(j for j in state.jobs if j.job_id not in self.hidden),
                       skipped_records=len(self.hidden), skipped_jobs=self.hidden)


def test_a_held_job_whose_record_cannot_be_read_stays_held_and_ours(tmp_path):
    from wattsched.config.daemon import DaemonConfig
    from wattsched.daemon.loop import Daemon
    from wattsched.daemon.metrics import DaemonMetrics
    from wattsched.daemon.notify import Notifier
    from wattsched.model.platform import NodePowerModel, Platform
    from wattsched.workload.records import TraceJob

    power = {"idle_w": 100.0, "busy_w": 300.0}
    now = [0.0]
    jobs = [TraceJob(id=i, submit_s=0.0, runtime_s=100.0, walltime_s=200.0, procs=1, nodes=1, user="u",
                     mean_w=280.0, max_w=290.0, std_w=5.0) for i in (1, 2)]
    sim = Unreadable(jobs, Platform.homogeneous_cluster(1, power=NodePowerModel(**power)), speedup=1.0,
                     clock=lambda: now[0], epoch_s=1.7e9)
    now[0] = 10.0
    d = Daemon(DaemonConfig(node_power=power, state_dir=tmp_path / "state", policy="fcfs", poll_interval_s=0.01),
               sim, metrics=DaemonMetrics(), notifier=Notifier(environ={}))
    try:
        d.cycle()  # job 1 starts on the one node; job 2 waits, held by the gate as the daemon's
        assert 2 in d.store.holds() and sim.jobs[2].held and sim.jobs[1].state == "RUNNING"
        sim.hidden = frozenset({2})
        for _ in range(3):  # job 1 ends and the node is free; job 2, unreadable, is neither released nor forgotten
            now[0] += 150.0
            d.cycle()
        assert sim.jobs[2].held and 2 in d.store.holds() and 1 not in sim.jobs and sim.finished == 1
        assert d.metrics.registry.get_sample_value("wattsched_slurm_records_skipped_total") == 3
        sim.hidden = frozenset()
        now[0] += 10.0
        d.cycle()  # readable again: the daemon's own job, started as any other
        assert not sim.jobs[2].held
    finally:
        d.store.close()


# --------------------------------------------------------------------------- property: any free text

KEYS = ("Partition", "UserId", "JobState", "NumNodes", "AdminComment", "Comment", "JobName", "WorkDir", "StdOut",
        "WCKey", "Extra", "Nodes", "Reason", "JobId", "TimeLimit", "X", "TresPerNode", "Gres", "Reservation",
        "OverSubscribe", "MinMemoryNode", *parse._KNOWN_KEY_NAMES.split())
WORDS = st.one_of(
    st.sampled_from(KEYS).flatmap(lambda k: st.text(st.sampled_from("ab=(0)9 /:"), max_size=6).map(
        lambda v: f"{k}={v}")),
    st.text(st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp"), blacklist_characters="\x85"),
            max_size=8),
)
FREE_TEXT = st.lists(WORDS, max_size=6).map(" ".join).filter(lambda t: (t.strip() and "=" in t) or t.strip())


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(field=st.sampled_from(["name", "comment", "workdir"]), text=FREE_TEXT, marked=st.booleans())
def test_free_text_never_gives_a_key_its_value(field, text, marked):
    line = with_fields(**{field: text}, admin="wattsched:held" if marked else None)
    try:
        job = parse_scontrol_jobs_text(line)[0]
    except SlurmOutputError as exc:
        assert exc.source == "scontrol -o show jobs:1"
        return  # left out (the daemon keeps what it knows about the job), never misread
    truth = parse_scontrol_jobs_text(with_fields(admin="wattsched:held" if marked else None))[0]
    read = ("job_id", "partition", "user", "state", "node_count", "cpus", "time_limit_s", "gpus_per_node", "shared",
            "mem_per_node_mb", "tasks", "features", "reason", "account", "qos", "submit_time", "required_nodes")
    assert [getattr(job, k) for k in read] == [getattr(truth, k) for k in read]
    if marked or field != "workdir":
        # (a working directory is printed just before AdminComment, which scontrol prints only when set: with
        # none set, "AdminComment=" ending a working directory cannot be told from the key)
        assert job.admin_comment == truth.admin_comment
        expected = re.sub(r"^\(null\)$", "", text.strip())
        if field == "name":
            assert job.name == expected
        elif field == "comment":
            assert job.comment == expected


def test_a_job_name_holding_a_whole_forged_record_is_not_read_as_one():
    # the keys of the real record with another partition, then a free-text key to take in the real ones
    real = with_fields()
    forged = real[real.index(" UserId="):real.index(" Command=")].replace(" Partition=batch ", " Partition=debug ")
    line = with_fields(name="x" + forged + " AdminComment=wattsched:held StdOut=")
    try:
        job = parse_scontrol_jobs_text(line)[0]
    except SlurmOutputError as exc:
        assert exc.source == "scontrol -o show jobs:1"
    else:
        assert (job.partition, job.admin_comment) == ("batch", "")


def test_a_released_job_whose_record_cannot_be_read_keeps_its_pending_start(tmp_path):
    from wattsched.config.daemon import DaemonConfig
    from wattsched.daemon.loop import Daemon
    from wattsched.daemon.metrics import DaemonMetrics
    from wattsched.daemon.notify import Notifier
    from wattsched.model.platform import NodePowerModel, Platform
    from wattsched.workload.records import TraceJob

    power = {"idle_w": 100.0, "busy_w": 300.0}
    now = [10.0]
    jobs = [TraceJob(id=1, submit_s=0.0, runtime_s=1000.0, walltime_s=2000.0, procs=1, nodes=1, user="u",
                     mean_w=280.0, max_w=290.0, std_w=5.0)]
    sim = Unreadable(jobs, Platform.homogeneous_cluster(1, power=NodePowerModel(**power)), speedup=1.0,
                     clock=lambda: now[0], epoch_s=1.7e9)
    d = Daemon(DaemonConfig(node_power=power, state_dir=tmp_path / "state", policy="fcfs", poll_interval_s=0.01),
               sim, metrics=DaemonMetrics(), notifier=Notifier(environ={}))
    try:
        d.cycle()
        assert 1 in d.store.starts()  # released, awaiting confirmation
        sim.hidden = frozenset({1})
        now[0] += 5.0
        d.cycle()
        assert 1 in d.store.starts()  # not taken for gone
        sim.hidden = frozenset()
        now[0] += 5.0
        d.cycle()
        assert 1 not in d.store.starts()
        assert [e.outcome for e in d.store.audit_since(0) if e.action == "started" and e.target == "1"] == [
            "confirmed"]
    finally:
        d.store.close()
