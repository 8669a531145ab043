"""The pyslurm backend, against a fake of pyslurm 25.11's documented API (``tests/fakes/pyslurm_fake.py``).

No pyslurm builds against this machine's Slurm 22.05, so these tests pin the
mapping of pyslurm's objects to wattsched's records and the calls each action
makes, as pyslurm's sources document them; they do not prove a real pyslurm
behaves the same.
"""

from __future__ import annotations

import sys

import pytest

from fakes import pyslurm_fake
from wattsched.daemon.slurm.backend import MARKER, with_marker, without_marker
from wattsched.daemon.slurm.pyslurm_backend import (
    RELEASED,
    PyslurmBackend,
    _members,
    job_from_pyslurm,
    node_from_pyslurm,
)
from wattsched.daemon.slurm.records import ClusterState
from wattsched.errors import ConfigError, SlurmCommandError, WattschedError


@pytest.fixture
def ctld(monkeypatch):
    """The fake pyslurm installed as ``sys.modules["pyslurm"]``, with a fresh in-memory slurmctld."""
    return pyslurm_fake.install(monkeypatch)


@pytest.fixture
def backend(ctld):
    return PyslurmBackend()


def small_cluster(ctld):
    ctld.add_node("n1", state="ALLOCATED", total_cpus=32, sockets=2, cores_per_socket=16, threads_per_core=1,
                  real_memory=128000, available_features=["cpu", "ib"], partitions=["batch"], current_watts=310)
    ctld.add_node("n2", state="IDLE+POWERED_DOWN", total_cpus=32, partitions=["batch"])
    ctld.add_node("n3", state="IDLE+DRAIN", total_cpus=32, partitions=["batch"], reason="bad dimm")
    ctld.add_node("g1", state="MIXED", total_cpus=64, partitions=["gpu"], configured_gres={"gpu:a100": 4})
    ctld.add_job(101, state="RUNNING", user_name="alice", account="phys", partition="batch", qos="normal",
                 name="sim", submit_time=1_700_000_000, start_time=1_700_000_100, end_time=1_700_003_700,
                 time_limit=60, num_nodes=1, cpus=32, allocated_nodes="n1", state_reason="None", priority=4242,
                 requeue_count=1)
    ctld.add_job(102, state="PENDING", user_name="bob", partition="batch", priority=0, state_reason="JobHeldAdmin",
                 admin_comment=MARKER, num_nodes=2, cpus=64, submit_time=1_700_000_050, time_limit=None,
                 required_nodes="n[1-2]", excluded_nodes="n3")
    ctld.add_job(103, state="PENDING", user_name="carol", partition="gpu", priority=1000,
                 state_reason="ReqNodeNotAvail, UnavailableNodes:g1", gres_per_node={"gpu:a100": 2},
                 constraints=["a100"], is_requeueable=False, is_batch_job=False)


# --------------------------------------------------------------------------- import and construction


def test_module_imports_without_pyslurm(monkeypatch):
    import importlib

    import wattsched.daemon.slurm as package

    name = "wattsched.daemon.slurm.pyslurm_backend"
    monkeypatch.setitem(sys.modules, "pyslurm", None)  # any `import pyslurm` now fails
    monkeypatch.delitem(sys.modules, name)  # a fresh import; the original comes back after the test
    monkeypatch.setattr(package, "pyslurm_backend", package.pyslurm_backend)
    fresh = importlib.import_module(name)
    assert fresh.PyslurmBackend.name == "pyslurm"


def test_missing_pyslurm_says_how_to_install_and_which_slurm(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyslurm", None)
    with pytest.raises(ConfigError, match=r"pip install 'wattsched\[pyslurm\]' — pyslurm builds only against Slurm "
                                          r"25\.11; on older Slurm use the cli backend") as info:
        PyslurmBackend()
    assert isinstance(info.value, WattschedError)


def test_old_pyslurm_without_the_modern_api_is_refused():
    old = type(sys)("pyslurm")
    old.__version__ = "18.8.1.1"
    old.job = object  # the legacy API only
    with pytest.raises(ConfigError, match=r"pyslurm 18\.8\.1\.1 lacks Jobs, Job, JobSubmitDescription, Nodes, Node, "
                                          r"RPCError .*25\.11"):
        PyslurmBackend(module=old)


def test_conf_is_exported_before_import(monkeypatch, ctld):
    import os

    monkeypatch.setenv("SLURM_CONF", "/elsewhere/slurm.conf")  # restored after the test
    b = PyslurmBackend(conf="/etc/slurm/slurm.conf")
    assert os.environ["SLURM_CONF"] == "/etc/slurm/slurm.conf"
    assert b.version == "25.11"


# --------------------------------------------------------------------------- reading


def test_read_state_maps_jobs_and_nodes(ctld, backend):
    small_cluster(ctld)
    state = backend.read_state()
    assert isinstance(state, ClusterState)
    assert state.version == "25.11" and state.read_at > 0
    assert [c[0] for c in ctld.calls] == ["Jobs.load", "Nodes.load"]
    jobs = {j.job_id: j for j in state.jobs}
    nodes = {n.name: n for n in state.nodes}
    assert set(jobs) == {101, 102, 103} and set(nodes) == {"n1", "n2", "n3", "g1"}

    run = jobs[101]
    assert (run.state, run.user, run.account, run.partition, run.qos, run.name) == (
        "RUNNING", "alice", "phys", "batch", "normal", "sim")
    assert run.nodes == ("n1",) and not run.held and run.reason == "" and run.priority == 4242
    assert (run.submit_time, run.start_time, run.end_time) == (1_700_000_000.0, 1_700_000_100.0, 1_700_003_700.0)
    assert run.time_limit_s == 3600.0 and run.node_count == 1 and run.cpus == 32 and run.restart_count == 1

    held = jobs[102]
    assert held.state == "PENDING" and held.held and held.priority == 0 and held.reason == "JobHeldAdmin"
    assert held.admin_comment == MARKER and held.nodes == ()
    assert held.required_nodes == ("n1", "n2") and held.excluded_nodes == ("n3",)
    assert held.time_limit_s is None and held.start_time is None  # unlimited; not started

    pend = jobs[103]
    assert pend.state == "PENDING" and not pend.held and pend.reason == "ReqNodeNotAvail"
    assert pend.gpus_per_node == 2 and pend.features == "a100"
    assert pend.requeue is False and pend.batch is False


def test_node_states_and_flags(ctld, backend):
    small_cluster(ctld)
    ctld.add_node("n4", state="IDLE+POWERING_UP")
    ctld.add_node("n5", state="DOWN+NOT_RESPONDING")
    ctld.add_node("n6", state="ALLOCATED+DRAIN")
    ctld.add_node("n7", state="IDLE+POWER_DOWN")
    nodes = {n.name: n for n in backend.read_state().nodes}
    assert nodes["n1"].state == "ALLOCATED" and nodes["n1"].flags == frozenset()
    assert nodes["n1"].current_watts == 310.0 and nodes["n1"].features == ("cpu", "ib")
    assert (nodes["n1"].cpus, nodes["n1"].sockets, nodes["n1"].cores_per_socket, nodes["n1"].threads_per_core,
            nodes["n1"].real_memory_mb, nodes["n1"].partitions) == (32, 2, 16, 1, 128000, ("batch",))
    assert nodes["n2"].powered_off and nodes["n2"].state == "IDLE" and nodes["n2"].current_watts is None
    assert nodes["n3"].drained and nodes["n3"].reason == "bad dimm"
    assert nodes["g1"].state == "MIXED" and nodes["g1"].gres == "gpu:a100:4"
    assert nodes["n4"].powering_up and not nodes["n4"].powered_off
    assert nodes["n5"].down
    assert nodes["n6"].drained and nodes["n6"].state == "ALLOCATED"
    assert nodes["n7"].powering_down


@pytest.mark.parametrize(
    ("pyslurm_state", "state", "flags"),
    [
        ("PENDING", "PENDING", frozenset()),
        ("RUNNING", "RUNNING", frozenset()),
        ("SUSPENDED", "SUSPENDED", frozenset()),
        # job_state_string() names the flag alone when one is set (src/common/slurm_protocol_defs.c)
        ("COMPLETING", "COMPLETING", frozenset({"COMPLETING"})),
        ("CONFIGURING", "RUNNING", frozenset({"CONFIGURING"})),
        ("REQUEUE_HOLD", "PENDING", frozenset({"REQUEUE_HOLD"})),
    ],
)
def test_job_state_strings(ctld, pyslurm_state, state, flags):
    ctld.add_job(7, state=pyslurm_state)
    job = job_from_pyslurm(pyslurm_fake.Job.load(7))
    assert (job.state, job.flags) == (state, flags)


def test_user_hold_is_held_too(ctld):
    ctld.add_job(8, state="PENDING", priority=0, state_reason="JobHeldUser")
    assert job_from_pyslurm(pyslurm_fake.Job.load(8)).held


@pytest.mark.parametrize(
    ("sharing", "shared"),
    [("OK", True), ("YES", True), ("NO", False), ("USER", False), ("MCS", False), ("TOPO", False), (None, False)],
)
def test_jobs_that_share_nodes_and_what_they_ask(ctld, sharing, shared):
    ctld.add_job(13, state="RUNNING", allocated_nodes="n[1-2]", num_nodes=2, cpus=4, resource_sharing=sharing,
                 ntasks=4, ntasks_per_node=2, cpus_per_task=None, memory_per_cpu=50)
    job = job_from_pyslurm(pyslurm_fake.Job.load(13))
    assert job.shared is shared
    assert (job.tasks, job.tasks_per_node, job.cpus_per_task, job.mem_per_node_mb, job.mem_per_cpu_mb) == (
        4, 2, 1, 0, 50)
    assert job.allocation == ()  # pyslurm's per-node layout is not read


def test_a_job_object_without_the_sharing_properties_holds_whole_nodes():
    class OldJob:  # the attributes job_from_pyslurm needs, and no more
        def __getattr__(self, name):
            if name in ("resource_sharing", "ntasks", "ntasks_per_node", "cpus_per_task", "memory_per_node",
                        "memory_per_cpu"):
                raise AttributeError(name)
            return {"id": 14, "state": "PENDING", "constraints": [], "gres_per_node": {}}.get(name)

    job = job_from_pyslurm(OldJob())
    assert (job.shared, job.tasks, job.cpus_per_task, job.mem_per_node_mb, job.allocation) == (False, 0, 1, 0, ())


def test_members_accepts_maps_dicts_and_lists(ctld):
    ctld.add_node("a")
    loaded = pyslurm_fake.Nodes.load()
    assert [n.name for n in _members(loaded)] == ["a"]
    assert [n.name for n in _members(list(loaded.values()))] == ["a"]  # older releases: Nodes(list)
    assert [n.name for n in _members({"a": pyslurm_fake.Node.load("a")})] == ["a"]  # Nodes(dict)


def test_node_without_optional_values(ctld):
    ctld.add_node("bare", state="UNKNOWN")
    node = node_from_pyslurm(pyslurm_fake.Node.load("bare"))
    assert (node.state, node.threads_per_core, node.real_memory_mb, node.gres, node.reason) == (
        "UNKNOWN", 1, 0, "", "")


# --------------------------------------------------------------------------- acting


def test_hold_sets_the_marker_first_then_holds(ctld, backend):
    ctld.add_job(5, state="PENDING", admin_comment="site-note")
    backend.hold(5, with_marker("site-note"))
    assert ctld.calls == [
        ("Job.modify", 5, {"admin_comment": f"site-note {MARKER}"}),
        ("Job.modify", 5, {"priority": 0}),
    ]
    rec = ctld.jobs[5]
    assert rec["priority"] == 0 and rec["state_reason"] == "JobHeldAdmin"
    job = job_from_pyslurm(pyslurm_fake.Job.load(5))
    assert job.held and MARKER in job.admin_comment.split()


def test_release_pins_to_nodes_and_removes_the_marker(ctld, backend):
    ctld.add_job(6, state="PENDING", priority=0, state_reason="JobHeldAdmin", admin_comment=f"keep {MARKER}")
    backend.release(6, ["n1", "n2"], without_marker(f"keep {MARKER}"))
    assert ctld.calls == [
        ("Job.modify", 6, {"admin_comment": "keep", "required_nodes": "n1,n2"}),
        ("Job.modify", 6, {"priority": pyslurm_fake.INFINITE}),
    ]
    job = job_from_pyslurm(pyslurm_fake.Job.load(6))
    assert not job.held and job.required_nodes == ("n1", "n2") and job.admin_comment == "keep"


def test_release_of_a_marker_only_comment_writes_released(ctld, backend):
    # pyslurm cannot write an empty AdminComment (it means "unchanged"), so the marker is replaced
    ctld.add_job(9, state="PENDING", priority=0, state_reason="JobHeldAdmin", admin_comment=MARKER)
    backend.release(9, ["n3"], without_marker(MARKER))
    job = job_from_pyslurm(pyslurm_fake.Job.load(9))
    assert job.admin_comment == RELEASED and MARKER not in job.admin_comment.split()
    # and a later hold/release round trip keeps it stable
    assert without_marker(with_marker(RELEASED)) == RELEASED


def test_unpinned_release_keeps_an_old_pin_and_says_so(ctld, backend, caplog):
    ctld.add_job(10, state="PENDING", priority=0, state_reason="JobHeldAdmin", admin_comment=MARKER,
                 required_nodes="n[4-5]")
    with caplog.at_level("WARNING", logger="wattsched.daemon.slurm.pyslurm_backend"):
        backend.release(10, (), without_marker(MARKER))
    assert ("Job.modify", 10, {"admin_comment": RELEASED}) in ctld.calls
    assert not any("required_nodes" in (c[2] or {}) for c in ctld.calls)
    assert "job 10 keeps ReqNodeList=n[4-5]: pyslurm cannot clear it" in caplog.text
    assert not job_from_pyslurm(pyslurm_fake.Job.load(10)).held


def test_requeue_and_cancel(ctld, backend):
    ctld.add_job(11, state="RUNNING", allocated_nodes="n1", start_time=1_700_000_000)
    ctld.add_job(12, state="RUNNING", allocated_nodes="n2")
    backend.requeue(11)
    backend.cancel(12)
    assert ("Job.requeue", 11, {"hold": False}) in ctld.calls
    assert ("Job.send_signal", 12, {"signal": 9}) in ctld.calls
    requeued = job_from_pyslurm(pyslurm_fake.Job.load(11))
    assert requeued.state == "PENDING" and requeued.restart_count == 1 and requeued.nodes == ()
    assert ctld.jobs[12]["state"] == "CANCELLED"


def test_power_down_and_up(ctld, backend):
    ctld.add_node("n1", state="IDLE")
    ctld.add_node("n2", state="IDLE+POWERED_DOWN")
    backend.power_down("n1")
    backend.power_up("n2")
    assert ctld.calls == [("Node.modify", "n1", {"state": "POWER_DOWN"}), ("Node.modify", "n2", {"state": "POWER_UP"})]
    nodes = {n.name: n for n in backend.read_state().nodes}
    assert nodes["n1"].powering_down and nodes["n2"].powering_up


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("action", "operation", "errno", "message"),
    [
        (lambda b: b.hold(404, MARKER), "Job.modify", pyslurm_fake.ESLURM_INVALID_JOB_ID, "Invalid job id specified"),
        (lambda b: b.release(404, ["n1"], ""), "Job.modify", pyslurm_fake.ESLURM_INVALID_JOB_ID,
         "Invalid job id specified"),
        (lambda b: b.requeue(404), "Job.requeue", pyslurm_fake.ESLURM_INVALID_JOB_ID, "Invalid job id specified"),
        (lambda b: b.cancel(404), "Job.cancel", pyslurm_fake.ESLURM_INVALID_JOB_ID, "Invalid job id specified"),
        (lambda b: b.power_down("nope"), "Node.modify", pyslurm_fake.ESLURM_INVALID_NODE_NAME,
         "Invalid node name specified"),
        (lambda b: b.power_up("nope"), "Node.modify", pyslurm_fake.ESLURM_INVALID_NODE_NAME,
         "Invalid node name specified"),
    ],
)
def test_rpc_errors_become_slurm_command_errors_naming_the_operation(ctld, backend, action, operation, errno,
                                                                     message):
    with pytest.raises(SlurmCommandError, match=rf"'pyslurm\.{operation} .*' exited with {errno}: {message}") as info:
        action(backend)
    exc = info.value
    assert exc.cmd[0] == f"pyslurm.{operation}" and exc.returncode == errno and exc.stderr == message
    assert isinstance(exc.__cause__, pyslurm_fake.RPCError)


def test_requeue_refusals_are_reported(ctld, backend):
    ctld.add_job(20, state="PENDING")
    ctld.add_job(21, state="RUNNING", is_requeueable=False)
    with pytest.raises(SlurmCommandError, match="Job is pending execution"):
        backend.requeue(20)
    with pytest.raises(SlurmCommandError, match="Requested operation is presently disabled"):
        backend.requeue(21)


def test_failed_hold_after_the_marker_is_reported(ctld, backend):
    ctld.add_job(30, state="PENDING")
    ctld.fail("Job.modify", pyslurm_fake.ESLURM_ACCESS_DENIED)
    with pytest.raises(SlurmCommandError, match=r"'pyslurm\.Job\.modify 30 admin_comment=wattsched:held' exited with "
                                                r"2002: Access/permission denied"):
        backend.hold(30, MARKER)
    assert ctld.jobs[30]["priority"] != 0  # nothing held


def test_unreachable_controller_on_read(ctld, backend):
    ctld.fail("Jobs.load", pyslurm_fake.SLURMCTLD_COMMUNICATIONS_CONNECTION_ERROR)
    with pytest.raises(SlurmCommandError, match=r"'pyslurm\.Jobs\.load' exited with 1800: Unable to contact slurm "
                                                r"controller"):
        backend.read_state()


# --------------------------------------------------------------------------- the fake itself


def test_fake_refuses_what_pyslurm_refuses(ctld):
    with pytest.raises(AttributeError):
        pyslurm_fake.JobSubmitDescription(reqnodelist="n1")  # not an attribute of JobSubmitDescription
    with pytest.raises(ValueError, match="Invalid Node state: POWER_SAVE"):
        pyslurm_fake.Node(state="POWER_SAVE")
    with pytest.raises(AttributeError):
        pyslurm_fake.Node(current_watts=5)  # read-only
    with pytest.raises(TypeError):
        pyslurm_fake.Job(1).modify({"priority": 0})
    job = pyslurm_fake.Job(1)
    with pytest.raises(AttributeError):
        job.priority = 0  # read-only


def test_daemon_cycle_through_the_pyslurm_backend(ctld, tmp_path):
    """One daemon cycle over the fake: the adopted job is held with the marker, the plan releases it pinned."""
    from wattsched.config.daemon import DaemonConfig
    from wattsched.daemon.loop import Daemon
    from wattsched.daemon.notify import Notifier

    ctld.add_node("n1", state="IDLE", total_cpus=8, partitions=["batch"])
    ctld.add_node("n2", state="IDLE", total_cpus=8, partitions=["batch"])
    ctld.add_job(1, state="PENDING", user_name="alice", partition="batch", num_nodes=1, cpus=8, time_limit=10,
                 submit_time=1_700_000_000)
    config = DaemonConfig(slurm={"backend": "pyslurm"}, gate="daemon", state_dir=tmp_path, policy="easy",
                          metrics={"port": 0})
    daemon = Daemon(config, PyslurmBackend(), notifier=Notifier(environ={}))
    report = daemon.cycle()
    assert report.held == [1]
    assert ctld.jobs[1]["priority"] == 0 and MARKER in ctld.jobs[1]["admin_comment"].split()
    report = daemon.cycle()
    assert report.started == [1]
    rec = ctld.jobs[1]
    assert rec["priority"] != 0 and rec["required_nodes"] in ("n1", "n2")
    assert MARKER not in (rec["admin_comment"] or "").split()
    daemon.store.close()


def test_a_job_pyslurm_gives_that_cannot_be_read_is_left_out_not_the_cycle(ctld, backend, caplog):
    small_cluster(ctld)
    ctld.add_job(104, state="PENDING", user_name="dave", partition="batch", required_nodes="n[0003-1000000000]")
    with caplog.at_level("WARNING", logger="wattsched.daemon.slurm.parse"):
        first = backend.read_state()
        second = backend.read_state()
    for state in (first, second):
        assert {j.job_id for j in state.jobs} == {101, 102, 103}
        assert state.skipped_records == 1 and state.skipped_jobs == {104}
    assert caplog.text.count("pyslurm: skipped a job record Slurm printed: job 104:") == 1  # once, not every cycle
