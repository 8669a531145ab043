"""Slurm output parsers and hostlists: every JSON version, the scontrol text fallback, and bad input.

The fixtures in ``tests/fixtures/slurm/`` (see their README) describe one
logical cluster in each Slurm version's schema; every version must parse to the
records below. Documented exceptions, where a version lacks a field:

- 22.05 (v0.0.38) node JSON has no energy data ("energy intentionally omitted"
  in ``openapi/v0.0.38/nodes.c``), so ``current_watts`` is ``None`` there.
"""

from __future__ import annotations

import dataclasses
import doctest
import json
import re
import time
from datetime import timezone
from pathlib import Path

import pytest

from wattsched.daemon.slurm import hostlist, parse
from wattsched.daemon.slurm.hostlist import compress, expand
from wattsched.daemon.slurm.parse import (
    SlurmOutputError,
    parse_nodes_json,
    parse_scontrol_jobs_text,
    parse_scontrol_nodes_text,
    parse_slurm_version,
    parse_squeue_json,
    parse_time_limit,
)
from wattsched.daemon.slurm.records import NodeAllocation, SlurmJob, SlurmNode
from wattsched.errors import WattschedError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "slurm"
DAY = 1795305600  # 2026-11-22T00:00:00Z


def at(hour: int, minute: int = 0) -> float:
    return float(DAY + hour * 3600 + minute * 60)


VERSIONS = [
    ("v0.0.38", "22.05.8"),
    ("v0.0.39", "23.02.7"),
    ("v0.0.40", "23.11.10"),
    ("v0.0.41", "24.05.3"),
    ("v0.0.42", "24.11.5"),
    ("v0.0.43", "25.05.4"),
    ("v0.0.44", "25.11.0"),
]
VERSION_IDS = [v for v, _ in VERSIONS]

EXPECTED_JOBS = [
    SlurmJob(
        job_id=1001,
        state="RUNNING",
        user="alice",
        account="physics",
        partition="batch",
        qos="normal",
        name="train-resnet",
        priority=4321,
        submit_time=at(2, 30),
        eligible_time=at(2, 30),
        start_time=at(2, 35),
        end_time=at(6, 35),
        time_limit_s=240 * 60.0,
        node_count=2,
        cpus=128,
        nodes=("n1", "n2"),
        tasks=128, mem_per_node_mb=128000,
    ),
    SlurmJob(
        job_id=1002,
        state="PENDING",
        user="bob",
        account="chem",
        partition="batch",
        qos="normal",
        name="sim-big",
        reason="JobHeldAdmin",
        priority=0,
        submit_time=at(2, 40),
        eligible_time=at(2, 40),
        time_limit_s=3600.0,
        node_count=1,
        cpus=32,
        comment="wattsched:held",
        tasks=32, mem_per_node_mb=64000,
    ),
    SlurmJob(
        job_id=1003,
        state="PENDING",
        user="carol",
        account="chem",
        partition="batch",
        qos="normal",
        name="interactive",
        reason="JobHeldUser",
        priority=0,
        submit_time=at(2, 45),
        eligible_time=at(2, 45),
        time_limit_s=1800.0,
        node_count=1,
        cpus=1,
        requeue=False,
        batch=False,
        shared=True, tasks=1, mem_per_node_mb=2000,
    ),
    SlurmJob(
        job_id=1004,
        state="PENDING",
        user="dave",
        account="ml",
        partition="gpu",
        qos="normal",
        name="gpu-infer",
        reason="Resources",
        priority=2000,
        submit_time=at(2, 50),
        eligible_time=at(2, 50),
        time_limit_s=86400.0,
        node_count=2,
        cpus=16,
        required_nodes=("n3", "n4"),
        excluded_nodes=("n1",),
        gpus_per_node=2,
        features="gpu",
        tasks=16, mem_per_node_mb=32000,
    ),
    SlurmJob(
        job_id=1005,
        state="PENDING",
        user="erin",
        account="physics",
        partition="batch",
        qos="long",
        name="long-haul",
        reason="Priority",
        priority=1500,
        submit_time=at(2, 55),
        eligible_time=at(2, 55),
        time_limit_s=None,
        node_count=1,
        cpus=64,
        tasks=64, mem_per_node_mb=128000,
    ),
    SlurmJob(
        job_id=1006,
        state="PENDING",
        user="alice",
        account="physics",
        partition="batch",
        qos="normal",
        name="ckpt-run",
        reason="BeginTime",
        priority=3000,
        submit_time=at(1, 0),
        eligible_time=1795316301.0,
        time_limit_s=7200.0,
        node_count=1,
        cpus=64,
        restart_count=1,
        tasks=64, mem_per_node_mb=128000,
    ),
]

# Job 1001 holds n1 and n2 whole (2 sockets x 16 cores x 2 threads, 128000 MB each). 22.05 to v0.0.40
# give the cores of the core map, v0.0.41+ the CPU count as well, scontrol -d the CPU ids.
_HELD_1001 = {
    "cores": tuple(NodeAllocation(n, cores=32, mem_mb=128000) for n in ("n1", "n2")),
    "cpus and cores": tuple(NodeAllocation(n, cpus=64, cores=32, mem_mb=128000) for n in ("n1", "n2")),
    "cpus": tuple(NodeAllocation(n, cpus=64, mem_mb=128000) for n in ("n1", "n2")),
}


def expected_jobs(version: str) -> list[SlurmJob]:
    """EXPECTED_JOBS with the running job's allocation as ``version`` (or ``"text"``) reports it."""
    shape = "cpus" if version == "text" else "cores" if version in ("v0.0.38", "v0.0.39", "v0.0.40") else (
        "cpus and cores")
    return [dataclasses.replace(EXPECTED_JOBS[0], allocation=_HELD_1001[shape]), *EXPECTED_JOBS[1:]]


def cpus_held(job: SlurmJob, threads_per_core: int) -> list[tuple[str, int, int]]:
    """(node, CPUs, MB) per node held, as the daemon counts them: ``cpus``, else ``cores`` x threads per core."""
    return [(a.node, a.cpus or a.cores * threads_per_core, a.mem_mb) for a in job.allocation]


_NODE = dict(cpus=64, sockets=2, cores_per_socket=16, threads_per_core=2, real_memory_mb=257000)
EXPECTED_NODES = [
    SlurmNode(
        name="n1",
        address="n1",
        state="ALLOCATED",
        features=("intel", "ib"),
        partitions=("batch",),
        current_watts=350.0,
        **_NODE,
    ),
    SlurmNode(
        name="n2",
        address="n2",
        state="ALLOCATED",
        features=("intel", "ib"),
        partitions=("batch",),
        current_watts=340.0,
        **_NODE,
    ),
    SlurmNode(
        name="n3",
        address="n3",
        state="IDLE",
        flags=frozenset({"DRAIN"}),
        features=("intel", "ib", "gpu"),
        partitions=("batch", "gpu"),
        gres="gpu:a100:4",
        reason="ECC errors on DIMM slot=3",
        current_watts=95.0,
        **_NODE,
    ),
    SlurmNode(
        name="n4",
        address="n4",
        state="IDLE",
        flags=frozenset({"POWERED_DOWN"}),
        features=("intel", "ib", "gpu"),
        partitions=("batch", "gpu"),
        gres="gpu:a100:4",
        current_watts=None,
        **_NODE,
    ),
]


def expected_nodes(version: str) -> list[SlurmNode]:
    if version == "v0.0.38":
        # 22.05 JSON omits node energy; see the module docstring.
        return [dataclasses.replace(n, current_watts=None) for n in EXPECTED_NODES]
    return EXPECTED_NODES


def fixture_text(*parts: str) -> str:
    return FIXTURES.joinpath(*parts).read_text()


def fixture_json(*parts: str) -> dict:
    return json.loads(fixture_text(*parts))


def one_job(**fields) -> SlurmJob:
    jobs, _ = parse_squeue_json(json.dumps({"jobs": [{"job_id": 7, "job_state": "PENDING", **fields}]}))
    return jobs[0]


def one_node(**fields) -> SlurmNode:
    nodes, _ = parse_nodes_json(json.dumps({"nodes": [{"name": "x1", "state": ["IDLE"], **fields}]}))
    return nodes[0]


# ---------------------------------------------------------------------------------------------- every version


@pytest.mark.parametrize(("version", "release"), VERSIONS, ids=VERSION_IDS)
def test_squeue_json_gives_the_same_jobs_in_every_version(version, release):
    jobs, got_release = parse_squeue_json(fixture_text(version, "squeue.json"))
    assert got_release == release
    assert jobs == expected_jobs(version)
    assert [j.job_id for j in jobs if j.held] == [1002, 1003]
    # 1001 is exclusive ("none"), 1003 may share (22.05 null, later []); only the running job holds nodes
    assert [j.job_id for j in jobs if j.shared] == [1003]
    assert cpus_held(jobs[0], threads_per_core=2) == [("n1", 64, 128000), ("n2", 64, 128000)]
    assert [j.job_id for j in jobs if j.allocation] == [1001]


@pytest.mark.parametrize(("version", "release"), VERSIONS, ids=VERSION_IDS)
def test_nodes_json_gives_the_same_nodes_in_every_version(version, release):
    source = "sinfo --json" if version == "v0.0.38" else "scontrol show nodes --json"
    nodes, got_release = parse_nodes_json(fixture_text(version, "nodes.json"), source=source)
    assert got_release == release
    assert nodes == expected_nodes(version)
    assert [n.name for n in nodes if n.drained] == ["n3"]
    assert [n.name for n in nodes if n.powered_off] == ["n4"]


@pytest.mark.parametrize("version", VERSION_IDS)
def test_fixtures_use_their_versions_encoding(version):
    """Guard the fixtures: each must carry the encoding its version is known for, or the test above proves little."""
    squeue = fixture_json(version, "squeue.json")
    nodes = fixture_json(version, "nodes.json")
    job = squeue["jobs"][0]
    node = nodes["nodes"][0]
    n = int(version.rsplit(".", 1)[1])
    if n == 38:
        assert isinstance(job["priority"], int) and isinstance(job["time_limit"], int)
        assert isinstance(node["state"], str) and node["state"].islower() and "state_flags" in node
        assert isinstance(node["features"], str) and "energy" not in node
    else:
        assert set(job["priority"]) == {"set", "infinite", "number"}
        assert isinstance(node["state"], list) and isinstance(node["features"], list)
        assert "current_watts" in node["energy"]
    assert isinstance(job["job_state"], str if n <= 39 else list)
    assert isinstance(job["submit_time"], int if n <= 39 else dict)
    version_parts = (squeue["meta"].get("Slurm") or squeue["meta"]["slurm"])["version"]
    assert all(isinstance(v, int if n <= 39 else str) for v in version_parts.values())


def test_every_fixture_directory_is_tested():
    dirs = sorted(p.name for p in FIXTURES.glob("v0.0.*") if p.is_dir() and not p.name.endswith("-live"))
    assert dirs == VERSION_IDS
    for d in dirs:
        assert (FIXTURES / d / "squeue.json").is_file()
        assert (FIXTURES / d / "nodes.json").is_file()


def _live_files() -> list[Path]:
    return sorted(p for d in FIXTURES.glob("*-live") for p in d.glob("*.json"))


@pytest.mark.parametrize("path", _live_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_live_captures_parse(path):
    doc = json.loads(path.read_text())
    if "jobs" in doc:
        jobs, release = parse_squeue_json(path.read_text(), source=str(path))
        assert all(j.job_id > 0 and j.state for j in jobs)
    elif "nodes" in doc:
        nodes, release = parse_nodes_json(path.read_text(), source=str(path))
        assert all(n.name and n.state for n in nodes)
    else:
        pytest.skip(f"{path.name} has neither jobs nor nodes")
    assert re.fullmatch(r"\d+\.\d{2}\.\d+", release)


LIVE_2205 = FIXTURES / "v0.0.38-live"


def _live_2205(name: str) -> str:
    path = LIVE_2205 / name
    if not path.is_file():
        pytest.skip(f"no live capture {path}")
    return path.read_text()


def test_live_2205_text_and_json_agree():
    """The same live 22.05.8 cluster read through squeue --json and scontrol -o must give equal records."""
    json_jobs, release = parse_squeue_json(_live_2205("squeue.json"))
    text_jobs = parse_scontrol_jobs_text(_live_2205("scontrol_jobs.txt"), tz=timezone.utc)
    assert release.startswith("22.05.")
    # scontrol -o without -d prints no allocation
    assert text_jobs == [dataclasses.replace(j, allocation=()) for j in json_jobs]
    json_nodes, _ = parse_nodes_json(_live_2205("sinfo.json"))
    assert parse_scontrol_nodes_text(_live_2205("scontrol_nodes.txt")) == json_nodes
    assert {j.job_id for j in json_jobs if j.held} == {j.job_id for j in json_jobs if j.reason.startswith("JobHeld")}


SHARED_2205 = FIXTURES / "v0.0.38-shared-live"

# What each job of the capture asks and holds, read off the files by hand (see the fixture's README):
# job -> (state, shared, tasks, tasks per node, CPUs per task, MB per node, MB per CPU, held: (node, CPUs, MB)).
# The nodes have 1 thread per core, so 22.05's allocated cores are CPUs. Memory per CPU of 100 is the
# cluster's DefMemPerCPU. Jobs 1-5 were cancelled: Slurm still lists their allocation, which is history.
SHARED_2205_JOBS = {
    1: ("CANCELLED", True, 1, 0, 1, 0, 100, ()),  # -p shared -n 1
    2: ("CANCELLED", True, 2, 1, 1, 200, 0, ()),  # -p shared -N 2 --ntasks-per-node=1 --mem=200
    3: ("CANCELLED", True, 3, 0, 1, 0, 100, ()),  # -p shared -n 3
    4: ("CANCELLED", False, 1, 0, 1, 0, 100, ()),  # -p batch -N 1: OverSubscribe=EXCLUSIVE
    5: ("CANCELLED", False, 0, 0, 1, 0, 100, ()),  # -p shared --exclusive -N 1, cancelled pending: no tasks
    6: ("RUNNING", True, 2, 0, 1, 0, 100, (("wsn3", 1, 100), ("wsn4", 1, 100))),  # -p shared -n 2
    7: ("PENDING", True, 4, 2, 1, 0, 50, ()),  # held -N 2 --ntasks-per-node=2 --mem-per-cpu=50
    8: ("PENDING", False, 1, 0, 1, 0, 100, ()),  # held in the exclusive batch partition
    9: ("RUNNING", True, 1, 0, 1, 0, 100, (("wsn3", 1, 100),)),  # -p shared -n 1
    10: ("PENDING", True, 1, 0, 2, 300, 0, ()),  # held -N 1 -c 2 --mem=300
}


def _asks_and_holds(job: SlurmJob) -> tuple:
    return (job.state, job.shared, job.tasks, job.tasks_per_node, job.cpus_per_task, job.mem_per_node_mb,
            job.mem_per_cpu_mb, tuple(cpus_held(job, threads_per_core=1)))


def _shared_2205(name: str) -> str:
    return (SHARED_2205 / name).read_text()


def test_shared_nodes_capture_json_and_text_give_what_each_job_asks_and_holds():
    """22.05.8, select/cons_tres: squeue --json and scontrol -d -o of jobs that share nodes."""
    json_jobs, release = parse_squeue_json(_shared_2205("squeue.json"))
    text_jobs = parse_scontrol_jobs_text(_shared_2205("scontrol_jobs_detail.txt"), tz=timezone.utc)
    assert release == "22.05.8"
    assert {j.job_id: _asks_and_holds(j) for j in json_jobs} == SHARED_2205_JOBS
    assert {j.job_id: _asks_and_holds(j) for j in text_jobs} == SHARED_2205_JOBS
    # in their own shape: JSON the allocated cores, text the CPU ids
    json_6, text_6 = json_jobs[5], text_jobs[5]
    assert json_6.allocation == (NodeAllocation("wsn3", cores=1, mem_mb=100),
                                 NodeAllocation("wsn4", cores=1, mem_mb=100))
    assert text_6.allocation == (NodeAllocation("wsn3", cpus=1, mem_mb=100),
                                 NodeAllocation("wsn4", cpus=1, mem_mb=100))
    # every other field agrees too, but for two the sources print differently: the JSON end of a running job
    # without a time limit is a year after its start where scontrol says Unknown, and job 5, cancelled
    # while pending, has NumCPUs=2 but JSON cpus null
    for j, t in zip(json_jobs, text_jobs, strict=True):
        assert dataclasses.replace(t, allocation=(), end_time=None, cpus=0) == dataclasses.replace(
            j, allocation=(), end_time=None, cpus=0), j.job_id
        assert t.cpus == j.cpus or j.job_id == 5


def test_shared_nodes_capture_without_detail_has_no_allocation():
    """``scontrol -o show jobs`` (no ``-d``) of the same cluster: the same jobs, no per-node groups."""
    detail = parse_scontrol_jobs_text(_shared_2205("scontrol_jobs_detail.txt"), tz=timezone.utc)
    plain = parse_scontrol_jobs_text(_shared_2205("scontrol_jobs.txt"), tz=timezone.utc)
    assert plain == [dataclasses.replace(j, allocation=()) for j in detail]


def test_shared_nodes_capture_layouts_of_several_nodes():
    """The cancelled jobs' layouts, read as if they still ran: one group per node with a different layout."""
    text = "\n".join(line.replace("JobState=CANCELLED", "JobState=RUNNING")
                     for line in _shared_2205("scontrol_jobs_detail.txt").splitlines())
    doc = json.loads(_shared_2205("squeue.json"))
    for job in doc["jobs"]:
        job["job_state"] = job["job_state"].replace("CANCELLED", "RUNNING")
    expected = {
        1: [("wsn1", 1, 100)],
        2: [("wsn1", 1, 200), ("wsn2", 1, 200)],  # CPU_IDs 1 on wsn1 and 0 on wsn2: two groups
        3: [("wsn2", 1, 100), ("wsn3", 2, 200)],  # -n 3 over two nodes
        4: [("wsn4", 2, 200)],  # exclusive: the whole node, memory of 2 CPUs
        5: [],  # never started
    }
    for jobs in (parse_scontrol_jobs_text(text), parse_squeue_json(json.dumps(doc))[0]):
        assert {j.job_id: cpus_held(j, threads_per_core=1) for j in jobs if j.job_id <= 5} == expected


def test_jobs_that_hold_nodes_are_the_ones_with_an_allocation():
    held = {"job_resources": {"allocated_nodes": [{"nodename": "n1", "memory_allocated": 5,
                                                   "sockets": {"0": {"cores": {"0": "allocated_and_in_use"}}}}]}}
    for state, holds in (("RUNNING", True), ("SUSPENDED", True), ("COMPLETING", True),
                         (["CANCELLED", "COMPLETING"], True), ("COMPLETED", False), (["FAILED"], False),
                         ("PENDING", False)):
        job = one_job(job_state=state, **held)
        assert job.allocation == ((NodeAllocation("n1", cores=1, mem_mb=5),) if holds else ()), state
        line = (f"JobId=7 JobState={state if isinstance(state, str) else '+'.join(state)} JOB_GRES=(null)   "
                "Nodes=n1 CPU_IDs=0-1 Mem=5 GRES= MinCPUsNode=1")
        assert parse_scontrol_jobs_text(line)[0].allocation == ((NodeAllocation("n1", cpus=2, mem_mb=5),)
                                                                 if holds else ()), state


def test_allocation_of_data_parser_v0_0_41_and_later():
    core = lambda *status: {"index": 0, "status": list(status)}  # noqa: E731
    job = one_job(job_state=["RUNNING"], job_resources={"nodes": {"allocation": [
        {"name": "a1", "cpus": {"count": 6, "used": 0}, "memory": {"used": 0, "allocated": 3000},
         "sockets": [{"index": 0, "cores": [core("ALLOCATED", "IN_USE"), core("UNALLOCATED"), core("ALLOCATED")]},
                     {"index": 1, "cores": [core("ALLOCATED"), core("INVALID")]}]},
        {"name": "a2", "cpus": {"count": 2, "used": 0}, "memory": {"used": 0, "allocated": 0}, "sockets": []},
    ]}})
    assert job.allocation == (NodeAllocation("a1", cpus=6, cores=3, mem_mb=3000), NodeAllocation("a2", cpus=2))


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"shared": True}, "jobs[0].shared: expected a string or a list of strings, got True"),
        ({"shared": [], "exclusive": {"a": 1}}, "jobs[0].exclusive: expected a string or a list of strings"),
        ({"shared": ["none", 4]}, "jobs[0].shared: expected a string or a list of strings"),
        ({"job_resources": []}, "jobs[0].job_resources: expected an object"),
        ({"job_resources": {"allocated_nodes": {"n1": {}}}}, "jobs[0].job_resources.allocated_nodes: expected a list"),
        ({"job_resources": {"allocated_nodes": ["n1"]}},
         "jobs[0].job_resources.allocated_nodes[0]: expected an object"),
        ({"job_resources": {"allocated_nodes": [{"nodename": "n1"}, {"nodename": "n1"}]}},
         "jobs[0].job_resources.allocated_nodes[1].nodename: node 'n1' twice in the job's allocation"),
        ({"job_resources": {"allocated_nodes": [{"memory_allocated": 5}]}},
         "jobs[0].job_resources.allocated_nodes[0].nodename: missing"),
        ({"job_resources": {"allocated_nodes": [{"nodename": "n1", "memory_allocated": -5}]}},
         "jobs[0].job_resources.allocated_nodes[0].memory_allocated: expected a number >= 0"),
        ({"job_resources": {"allocated_nodes": [{"nodename": "n1", "sockets": {"0": {"cores": {"0": 1}}}}]}},
         "allocated_nodes[0].sockets['0'].cores['0']: expected a status string"),
        ({"job_resources": {"allocated_nodes": [{"nodename": "n1", "sockets": ["x"]}]}},
         "allocated_nodes[0].sockets[0]: expected an object"),
        ({"job_resources": {"allocated_nodes": [{"nodename": "n1", "sockets": 2}]}},
         "allocated_nodes[0].sockets: expected an object or a list, got 2"),
        ({"job_resources": {"nodes": {"allocation": [{"name": "n1", "cpus": {"count": "x"}}]}}},
         "jobs[0].job_resources.nodes.allocation[0].cpus.count: expected a number"),
        ({"job_resources": {"nodes": {"allocation": [{"name": "n1", "cpus": {"count": -2}}]}}},
         "jobs[0].job_resources.nodes.allocation[0].cpus.count: expected a number >= 0"),
        ({"job_resources": {"nodes": {"allocation": [{"name": "n1", "cpus": 4}]}}},
         "jobs[0].job_resources.nodes.allocation[0].cpus: expected an object"),
        ({"job_resources": {"nodes": {"allocation": [{"name": "n1", "memory": {"allocated": -1}}]}}},
         "jobs[0].job_resources.nodes.allocation[0].memory.allocated: expected a number >= 0"),
        ({"job_resources": {"nodes": {"allocation": [{"name": "n1", "sockets": [{"cores": [{"status": "x"}]}]}]}}},
         "allocation[0].sockets[0].cores[0]: expected a status string"),
        ({"job_resources": {"nodes": {"allocation": [{"name": "n1"}, {"name": "n1"}]}}},
         "jobs[0].job_resources.nodes.allocation[1].name: node 'n1' twice"),
        ({"memory_per_cpu": -1}, "jobs[0].memory_per_cpu: expected a number >= 0"),
        ({"memory_per_node": {"set": True, "infinite": False, "number": -300}},
         "jobs[0].memory_per_node: expected a number >= 0"),
        ({"tasks": -4}, "jobs[0].tasks: expected a number >= 0"),
        ({"tasks_per_node": "two"}, "jobs[0].tasks_per_node: expected a number"),
        ({"cpus_per_task": 1.5}, "jobs[0].cpus_per_task: expected a whole number"),
        ({"tasks": 1e300}, "jobs[0].tasks: 1e+300 is out of range"),
    ],
)
def test_bad_shared_node_fields_name_their_json_path(fields, message):
    doc = {"jobs": [{"job_id": 1, "job_state": "RUNNING", **fields}]}
    with pytest.raises(SlurmOutputError) as exc:
        parse_squeue_json(json.dumps(doc))
    assert message in str(exc.value)
    assert str(exc.value).startswith("squeue --json: jobs[0].")


@pytest.mark.parametrize(
    ("shared", "exclusive", "expected"),
    [
        # 22.05: null is Slurm's default (may share), "shared" is --oversubscribe, a number an unnamed mode
        (None, None, True), ("shared", None, True), ("none", None, False), ("user", None, False),
        ("mcs", None, False), (4, None, False),
        # data_parser v0.0.39+: a flag list, and in some versions an "exclusive" list saying the same
        ([], None, True), (["oversubscribe"], None, True), (["none"], None, False), (["mcs"], None, False),
        (["topo"], None, False), ([], [], True), ([], ["false"], True), (["oversubscribe"], ["false"], True),
        (["none"], ["true"], False), ([], ["true"], False), ([], ["user"], False), ([], ["topo"], False),
        # a mode not known here: whole nodes
        (["something-new"], None, False), ("something-new", None, False), ([], ["something-new"], False),
    ],
)
def test_which_jobs_may_share_their_nodes(shared, exclusive, expected):
    job = {"job_id": 1, "job_state": "PENDING", "shared": shared}
    if exclusive is not None:
        job["exclusive"] = exclusive
    assert parse_squeue_json(json.dumps({"jobs": [job]}))[0][0].shared is expected


def test_a_job_record_that_does_not_say_holds_whole_nodes():
    assert one_job().shared is False
    assert one_job(exclusive=[]).shared is False
    assert parse_scontrol_jobs_text("JobId=1 JobState=PENDING")[0].shared is False


@pytest.mark.parametrize(
    ("value", "expected"),
    [("OK", True), ("YES", True), ("YES:4", True), ("FORCE:4", True), ("NO", False), ("USER", False),
     ("MCS", False), ("TOPO", False), ("", False), ("SOMETHING", False)],
)
def test_which_text_jobs_may_share_their_nodes(value, expected):
    assert parse_scontrol_jobs_text(f"JobId=1 JobState=PENDING OverSubscribe={value}")[0].shared is expected


def test_cpus_per_task_where_22_05_prints_null():
    # 22.05 prints cpus_per_task only with a minimum CPU frequency set: a pending job's are its CPUs over its tasks
    assert one_job(cpus_per_task=None, cpus=8, tasks=2).cpus_per_task == 4
    assert one_job(cpus_per_task=None, cpus=3, tasks=2).cpus_per_task == 1
    assert one_job(cpus_per_task=None, cpus=4, tasks=None).cpus_per_task == 1  # no tasks: nothing to go by
    assert one_job(cpus_per_task=3, cpus=8, tasks=2).cpus_per_task == 3
    assert one_job(job_state="RUNNING", cpus_per_task=None, cpus=8, tasks=2).cpus_per_task == 1  # CPUs it got
    assert one_job(cpus_per_task={"set": False, "infinite": False, "number": 0}).cpus_per_task == 1


def _text_job(detail: str, state: str = "RUNNING") -> SlurmJob:
    return parse_scontrol_jobs_text(f"JobId=1 JobState={state} CoreSpec=* {detail} MinCPUsNode=1 Comment=x")[0]


@pytest.mark.parametrize(
    ("detail", "message"),
    [
        ("JOB_GRES=(null)   Nodes=n1 CPU_IDs=0-x Mem=100 GRES=", "CPU_IDs: expected CPU ids like 0-3,8, got '0-x'"),
        ("JOB_GRES=(null)   Nodes=n1 CPU_IDs=1,,2 Mem=100 GRES=", "CPU_IDs: expected CPU ids like 0-3,8"),
        ("JOB_GRES=(null)   Nodes=n1 CPU_IDs=-1 Mem=100 GRES=", "CPU_IDs: expected CPU ids like 0-3,8"),
        ("JOB_GRES=(null)   Nodes=n1 CPU_IDs=3-1 Mem=100 GRES=", "CPU_IDs: range '3-1' runs backwards (node group 1)"),
        ("JOB_GRES=(null)   Nodes=n1 CPU_IDs=0 Mem=lots GRES=", "Mem: expected a memory size like 200M or 2G"),
        ("JOB_GRES=(null)   Nodes=n1 CPU_IDs=0 Mem=-5 GRES=", "Mem: expected a memory size like 200M or 2G"),
        ("JOB_GRES=(null)   Nodes=n[1-2 CPU_IDs=0 Mem=1 GRES=", "Nodes: "),
        ("JOB_GRES=(null)   Nodes=n[1-2] CPU_IDs=0 Mem=1 GRES=   Nodes=n2 CPU_IDs=1 Mem=1 GRES=",
         "Nodes: node 'n2' twice in the job's allocation"),
        ("MinMemoryCPU=-5M", "MinMemoryCPU: expected a memory size like 200M or 2G, got '-5M'"),
        ("MinMemoryNode=2X", "MinMemoryNode: expected a memory size"),
        ("NtasksPerN:B:S:C=x:0:*:*", "NtasksPerN:B:S:C: expected a count, got 'x:0:*:*'"),
        ("NumTasks=-3", "NumTasks: expected a number >= 0"),
        ("CPUs/Task=two", "CPUs/Task: expected a number >= 0"),
    ],
)
def test_bad_text_allocation_names_line_and_key(detail, message):
    with pytest.raises(SlurmOutputError) as exc:
        _text_job(detail)
    assert str(exc.value).startswith("scontrol -o show jobs:1: ")
    assert message in str(exc.value)


def test_text_allocation_groups_memory_units_and_what_a_job_asks():
    job = _text_job(
        "NodeList=a[1-3] NumTasks=5 CPUs/Task=2 OverSubscribe=YES MinMemoryCPU=1G NtasksPerN:B:S:C=2:0:*:* "
        "JOB_GRES=gres/gpu:2   Nodes=a[1-2] CPU_IDs=0-3 Mem=4096 GRES=gpu:1(IDX:0)   Nodes=a3 CPU_IDs=0,2 "
        "Mem=2048 GRES=gpu:1(IDX:1)"
    )
    assert (job.shared, job.tasks, job.tasks_per_node, job.cpus_per_task, job.mem_per_cpu_mb) == (True, 5, 2, 2, 1024)
    assert job.allocation == (NodeAllocation("a1", cpus=4, mem_mb=4096), NodeAllocation("a2", cpus=4, mem_mb=4096),
                              NodeAllocation("a3", cpus=2, mem_mb=2048))
    assert job.nodes == ("a1", "a2", "a3")  # NodeList, not the groups' Nodes
    assert job.comment == "x"  # the keys after the groups read as before


def test_group_keys_elsewhere_stay_where_they_were():
    # a free-text value may hold "Nodes=..." or "Mem=...": only the place after JOB_GRES= starts a group
    job = _text_job("JOB_GRES=(null)   Nodes=n1 CPU_IDs=0 Mem=100 GRES= Comment=run with Nodes=4 Mem=2G",
                    state="RUNNING")
    assert job.allocation == (NodeAllocation("n1", cpus=1, mem_mb=100),)
    # (keys in scontrol's order: NumTasks before Comment, StdOut after it)
    job = parse_scontrol_jobs_text("JobId=1 JobState=RUNNING NumTasks=2 Comment=see Nodes=n9 CPU_IDs=0 Mem=5 "
                                   "StdOut=/o")[0]
    assert job.comment == "see Nodes=n9 CPU_IDs=0 Mem=5" and job.allocation == () and job.tasks == 2
    job = parse_scontrol_jobs_text("JobId=1 JobState=RUNNING JobName=a JOB_GRES=x Nodes=n9 CPU_IDs=0 UserId=u(1)")[0]
    assert job.name == "a JOB_GRES=x Nodes=n9 CPU_IDs=0" and job.allocation == () and job.user == "u"


@pytest.mark.parametrize(
    ("text", "mb"),
    [("0", 0), ("100M", 100), ("200", 200), ("512K", 1), ("2G", 2048), ("125G", 128000), ("62.50G", 64000),
     ("1T", 1048576), ("1.50T", 1572864)],
)
def test_text_memory_sizes(text, mb):
    assert _text_job(f"MinMemoryNode={text}", state="PENDING").mem_per_node_mb == mb


def test_live_2205_version_file():
    assert parse_slurm_version(_live_2205("version.txt"))[:2] == (22, 5)


# ---------------------------------------------------------------------------------------------- JSON details


@pytest.mark.parametrize(
    ("job_state", "state", "flags"),
    [
        (["PENDING", "REQUEUED"], "PENDING", {"REQUEUED"}),
        (["COMPLETED", "COMPLETING"], "COMPLETED", {"COMPLETING"}),
        (["CONFIGURING", "RUNNING", "POWER_UP_NODE"], "RUNNING", {"CONFIGURING", "POWER_UP_NODE"}),
        ("REQUEUED", "PENDING", {"REQUEUED"}),
        ("CONFIGURING", "RUNNING", {"CONFIGURING"}),
        ("COMPLETING", "COMPLETING", {"COMPLETING"}),
        ("running", "RUNNING", set()),
        (["TIMEOUT"], "TIMEOUT", set()),
    ],
)
def test_job_state_base_and_flags(job_state, state, flags):
    job = one_job(job_state=job_state)
    assert (job.state, job.flags) == (state, frozenset(flags))


def test_minimal_job_gets_record_defaults():
    assert one_job() == SlurmJob(job_id=7, state="PENDING")


def test_minimal_node_gets_record_defaults():
    assert one_node() == SlurmNode(name="x1", state="IDLE")


@pytest.mark.parametrize(
    ("time_limit", "seconds"),
    [
        (90, 5400.0),
        (None, None),
        (4294967295, None),  # 22.05 INFINITE printed raw
        ({"set": True, "infinite": False, "number": 30}, 1800.0),
        ({"set": False, "infinite": True, "number": 0}, None),
        ({"set": False, "infinite": False, "number": 0}, None),
    ],
)
def test_time_limit_minutes_become_seconds(time_limit, seconds):
    assert one_job(time_limit=time_limit).time_limit_s == seconds


def test_zero_start_time_means_none_in_both_encodings():
    assert one_job(start_time=0).start_time is None
    assert one_job(start_time={"set": True, "infinite": False, "number": 0}).start_time is None
    assert one_job(start_time=1795305600).start_time == 1795305600.0


@pytest.mark.parametrize(
    ("tres", "gpus"),
    [
        ("gres:gpu:4", 4),
        ("gres/gpu:4", 4),
        ("gres/gpu=4", 4),
        ("gres/gpu:a100:2", 2),
        ("gres/gpu", 1),
        ("gres/shard:2", 0),
        ("gres/gpu:a100:1,gres/gpu:v100:2", 3),
        ("", 0),
    ],
)
def test_gpus_per_node_from_tres_per_node(tres, gpus):
    assert one_job(tres_per_node=tres).gpus_per_node == gpus
    text = f"JobId=7 JobState=PENDING TresPerNode={tres}"
    assert parse_scontrol_jobs_text(text)[0].gpus_per_node == gpus


def test_2205_live_style_empty_strings_and_plain_values():
    job = one_job(
        job_state="PENDING",
        state_reason="JobHeldAdmin",
        priority=0,
        time_limit=60,
        nodes="",
        required_nodes="",
        submit_time=1700000000,
        user_name="root",
        restart_cnt=0,
        requeue=True,
        batch_flag=True,
    )
    assert job == SlurmJob(
        job_id=7, state="PENDING", user="root", reason="JobHeldAdmin", priority=0,
        submit_time=1700000000.0, time_limit_s=3600.0,
    )  # fmt: skip
    assert job.held


@pytest.mark.parametrize(
    ("state", "state_flags", "base", "flags"),
    [
        ("idle", ["drain"], "IDLE", {"DRAIN"}),
        ("IDLE", ["POWERED_DOWN", "power_down"], "IDLE", {"POWERED_DOWN", "POWER_DOWN"}),
        ("mixed", [], "MIXED", set()),
        (["IDLE", "POWERING_UP"], None, "IDLE", {"POWERING_UP"}),
        (["DRAIN", "IDLE"], None, "IDLE", {"DRAIN"}),
        (["COMPLETING"], None, "UNKNOWN", {"COMPLETING"}),
    ],
)
def test_node_state_forms(state, state_flags, base, flags):
    fields = {"state": state} if state_flags is None else {"state": state, "state_flags": state_flags}
    node = one_node(**fields)
    assert (node.state, node.flags) == (base, frozenset(flags))


@pytest.mark.parametrize(
    ("energy", "watts"),
    [
        ({"current_watts": 200}, 200.0),  # v0.0.39 as in one parsers.c revision
        ({"current_watts": {"set": True, "infinite": False, "number": 410}}, 410.0),
        ({"current_watts": {"set": True, "infinite": False, "number": 0}}, None),
        ({"current_watts": {"set": False, "infinite": False, "number": 0}}, None),
        ({"current_watts": 0}, None),
        ({}, None),
    ],
)
def test_node_current_watts(energy, watts):
    assert one_node(energy=energy).current_watts == watts


def test_node_features_from_csv_or_list_and_active_features_fallback():
    assert one_node(features="a,b").features == ("a", "b")
    assert one_node(features=["a", "b"]).features == ("a", "b")
    assert one_node(features=[], active_features=["knl"]).features == ("knl",)
    assert one_node(partitions="p1,p2").partitions == ("p1", "p2")


# ---------------------------------------------------------------------------------------------- JSON errors


def test_truncated_json_names_line_and_column():
    text = fixture_text("v0.0.44", "squeue.json")
    cut = text[: len(text) // 2]
    with pytest.raises(SlurmOutputError, match=r"^squeue --json: not valid JSON at line \d+ column \d+: ") as info:
        parse_squeue_json(cut)
    with pytest.raises(json.JSONDecodeError) as decode:
        json.loads(cut)
    assert f"line {decode.value.lineno} column {decode.value.colno}:" in str(info.value)
    assert str(info.value).endswith("(truncated output?)")
    # Cut at a key boundary instead: the error is at the very end.
    with pytest.raises(SlurmOutputError, match=r"line \d+ column \d+: Expecting .*\(truncated output\?\)$"):
        parse_squeue_json(text[: text.index('"jobs": [') + len('"jobs": [')])


def test_non_json_text_is_rejected_with_the_source():
    message = r"^squeue -a --json: not valid JSON at line 1 column 1: Expecting value$"
    with pytest.raises(SlurmOutputError, match=message):
        parse_squeue_json("squeue: error: Invalid user: nobody\n", source="squeue -a --json")
    with pytest.raises(SlurmOutputError, match="no output"):
        parse_squeue_json("  \n")


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ([], r"expected a JSON object, got list"),
        ({"meta": {}}, r"no 'jobs' in the JSON \(top-level keys: meta\)"),
        ({"jobs": {}}, r"jobs: expected a list, got dict"),
        ({"jobs": ["x"]}, r"jobs\[0\]: expected an object"),
    ],
)
def test_json_that_is_not_a_job_list(doc, message):
    with pytest.raises(SlurmOutputError, match=message):
        parse_squeue_json(json.dumps(doc))


@pytest.mark.parametrize("version", VERSION_IDS)
def test_missing_job_state_names_the_json_path(version):
    doc = fixture_json(version, "squeue.json")
    del doc["jobs"][3]["job_state"]
    with pytest.raises(SlurmOutputError, match=r"^squeue --json: jobs\[3\]\.job_state: missing$"):
        parse_squeue_json(json.dumps(doc))


def test_missing_job_id_names_the_json_path():
    doc = fixture_json("v0.0.38", "squeue.json")
    del doc["jobs"][1]["job_id"]
    with pytest.raises(SlurmOutputError, match=r"jobs\[1\]\.job_id: missing"):
        parse_squeue_json(json.dumps(doc))


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"job_id": "abc"}, r"jobs\[0\]\.job_id: expected a number, got 'abc'"),
        ({"job_state": []}, r"jobs\[0\]\.job_state: expected a state string or a list of states"),
        ({"job_state": ""}, r"jobs\[0\]\.job_state: empty"),
        ({"priority": True}, r"jobs\[0\]\.priority: expected a number"),
        ({"nodes": "n[1-"}, r"jobs\[0\]\.nodes: bad hostlist 'n\[1-'"),
        ({"user_name": {"x": 1}}, r"jobs\[0\]\.user_name: expected a string, got dict"),
        ({"requeue": "maybe"}, r"jobs\[0\]\.requeue: expected true/false"),
    ],
)
def test_wrongly_typed_job_fields(fields, message):
    with pytest.raises(SlurmOutputError, match=message):
        one_job(**fields)


@pytest.mark.parametrize(
    "errors",
    [
        # 22.05 (openapi/v0.0.38 resp_error)
        [{"description": "Failed while looking for jobs", "error_number": 2010, "error": "Invalid user id",
          "source": "slurm_load_jobs"}],
        # data_parser (23.02+)
        [{"description": "Unable to query jobs", "error_number": 2010, "error": "Invalid user id",
          "source": "_dump_jobs", "data_type": "0x1234"}],
    ],
)  # fmt: skip
def test_errors_array_is_raised_with_its_text(errors):
    doc = {"meta": {}, "errors": errors, "jobs": []}
    with pytest.raises(SlurmOutputError, match=r"^squeue --json: errors: Slurm reported: Invalid user id, .*2010"):
        parse_squeue_json(json.dumps(doc))
    with pytest.raises(SlurmOutputError, match="Invalid user id"):
        parse_nodes_json(json.dumps({"errors": errors, "nodes": []}))


def test_empty_errors_and_warnings_are_fine():
    doc = {"jobs": [], "errors": [], "warnings": [{"description": "something minor"}]}
    assert parse_squeue_json(json.dumps(doc)) == ([], "")


def test_aggregated_sinfo_is_rejected_with_advice():
    with pytest.raises(SlurmOutputError, match=r"^sinfo --json: .*aggregated.*use 'scontrol show nodes --json'"):
        parse_nodes_json(fixture_text("sinfo-aggregated-v0.0.39.json"))


@pytest.mark.parametrize(
    ("node", "message"),
    [
        ({"state": ["IDLE"]}, r"nodes\[0\]\.name: missing"),
        ({"name": "n1"}, r"nodes\[0\]\.state: missing"),
        ({"name": "n1", "state": 5}, r"nodes\[0\]\.state: expected a state string or a list"),
        ({"name": "n1", "state": ["IDLE"], "cpus": "many"}, r"nodes\[0\]\.cpus: expected a number, got 'many'"),
        ({"name": "n1", "state": ["IDLE"], "energy": 3}, r"nodes\[0\]\.energy: expected an object"),
        (
            {"name": "n1", "state": ["IDLE"], "energy": {"current_watts": "hot"}},
            r"nodes\[0\]\.energy\.current_watts: expected a number",
        ),
    ],
)
def test_bad_node_json(node, message):
    with pytest.raises(SlurmOutputError, match=message):
        parse_nodes_json(json.dumps({"nodes": [node]}), source="scontrol show nodes --json")


def test_slurm_output_error_is_a_wattsched_error():
    err = SlurmOutputError("squeue --json", "jobs[0].job_id", "missing")
    assert isinstance(err, WattschedError)
    assert (err.source, err.where, err.problem) == ("squeue --json", "jobs[0].job_id", "missing")


# ---------------------------------------------------------------------------------------------- text


def test_text_jobs_match_the_json_cluster():
    jobs = parse_scontrol_jobs_text(fixture_text("text", "scontrol_jobs.txt"), tz=timezone.utc)
    assert jobs == expected_jobs("text")
    assert cpus_held(jobs[0], threads_per_core=2) == [("n1", 64, 128000), ("n2", 64, 128000)]


def test_text_nodes_match_the_json_cluster():
    nodes = parse_scontrol_nodes_text(fixture_text("text", "scontrol_nodes.txt"))
    assert nodes == EXPECTED_NODES


def test_text_times_default_to_the_local_time_zone(monkeypatch):
    monkeypatch.setenv("TZ", "CET-1")  # POSIX zone string: UTC+1, needs no tz database
    time.tzset()
    try:
        job = parse_scontrol_jobs_text("JobId=1 JobState=PENDING SubmitTime=2026-11-22T02:30:00")[0]
    finally:
        monkeypatch.undo()
        time.tzset()
    assert job.submit_time == at(2, 30) - 3600


def test_text_free_text_values_keep_embedded_key_value_pairs():
    node = parse_scontrol_nodes_text(
        "NodeName=n9 State=DOWN* Reason=fan speed=0 rpm on fan=2 [slurm@2026-01-01T00:00:00] CurrentWatts=n/s"
    )[0]
    assert node.reason == "fan speed=0 rpm on fan=2"
    assert (node.state, node.flags, node.current_watts) == ("DOWN", frozenset({"NOT_RESPONDING"}), None)
    job = parse_scontrol_jobs_text("JobId=5 JobState=PENDING Comment=wattsched:held owner=ops StdIn=/dev/null")[0]
    assert job.comment == "wattsched:held owner=ops"


@pytest.mark.parametrize(
    ("state", "base", "flags"),
    [
        ("IDLE+DRAIN+POWERED_DOWN", "IDLE", {"DRAIN", "POWERED_DOWN"}),
        ("IDLE*", "IDLE", {"NOT_RESPONDING"}),
        ("IDLE~", "IDLE", {"POWERED_DOWN"}),
        ("MIXED#", "MIXED", {"POWERING_UP"}),
        ("ALLOCATED%", "ALLOCATED", {"POWERING_DOWN"}),
        ("IDLE!", "IDLE", {"POWER_DOWN"}),
        ("DOWN*+DRAIN", "DOWN", {"NOT_RESPONDING", "DRAIN"}),
        ("drained", "IDLE", {"DRAIN"}),
        ("ALLOC", "ALLOCATED", set()),
    ],
)
def test_text_node_states(state, base, flags):
    node = parse_scontrol_nodes_text(f"NodeName=n1 State={state}")[0]
    assert (node.state, node.flags) == (base, frozenset(flags))


def test_text_job_details():
    job = parse_scontrol_jobs_text(
        "JobId=9 JobState=REQUEUED UserId=4242 QOS=(null) NumNodes=2-4 NumCPUs=8 NodeList=(null) "
        "ReqNodeList=c[01-02] TimeLimit=5:00 Requeue=0 BatchFlag=0 Restarts=3 Features=(null)"
    )[0]
    assert job == SlurmJob(
        job_id=9, state="PENDING", flags=frozenset({"REQUEUED"}), user="4242", node_count=2, max_nodes=4, cpus=8,
        required_nodes=("c01", "c02"), time_limit_s=300.0, requeue=False, batch=False, restart_count=3,
    )  # fmt: skip


def test_text_reason_keeps_the_code_of_a_state_description():
    job = parse_scontrol_jobs_text("JobId=4 JobState=PENDING Reason=ReqNodeNotAvail,_UnavailableNodes:wsn4")[0]
    assert job.reason == "ReqNodeNotAvail"


def test_text_multiline_records_and_empty_output():
    text = "JobId=1 JobName=a\n   JobState=RUNNING NodeList=n1\n\nJobId=2 JobName=b\n   JobState=PENDING\n"
    jobs = parse_scontrol_jobs_text(text)
    assert [(j.job_id, j.state, j.nodes) for j in jobs] == [(1, "RUNNING", ("n1",)), (2, "PENDING", ())]
    assert parse_scontrol_jobs_text("No jobs in the system\n") == []
    assert parse_scontrol_nodes_text("") == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("JobId=1 JobState=PENDING\nthis is not a record\n", r"2: expected Key=Value, got 'this is not a record'"),
        ("JobId=1 JobState=PENDING NumCPUs=lots", r"1: NumCPUs: expected a number >= 0, got 'lots'"),
        ("JobId=1 JobName=x", r"1: JobState: missing"),
        ("JobName=x JobState=PENDING", r"1: JobId: missing"),
        ("JobId=x1 JobState=PENDING", r"1: JobId: expected a number"),
        ("JobId=1 JobState=PENDING SubmitTime=yesterday", r"1: SubmitTime: expected a time"),
        ("JobId=1 JobState=PENDING TimeLimit=forever", r"1: TimeLimit: expected a time limit"),
        ("JobId=1 JobState=PENDING NodeList=n[1-", r"1: NodeList: bad hostlist 'n\[1-'"),
    ],
)
def test_bad_job_text(text, message):
    with pytest.raises(SlurmOutputError, match=r"^scontrol -o show jobs:" + message):
        parse_scontrol_jobs_text(text)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("NodeName=n1 State=IDLE\n\n= garbage", r"3: expected Key=Value"),
        ("State=IDLE CPUTot=4", r"1: NodeName: missing"),
        ("NodeName=n1 CPUTot=4", r"1: State: missing"),
        ("NodeName=n1 State=IDLE CPUTot=four", r"1: CPUTot: expected a number >= 0, got 'four'"),
        ("NodeName=n1 State=IDLE CurrentWatts=hot", r"1: CurrentWatts: expected watts, got 'hot'"),
    ],
)
def test_bad_node_text(text, message):
    with pytest.raises(SlurmOutputError, match=r"^scontrol -o show nodes:" + message):
        parse_scontrol_nodes_text(text)


# ---------------------------------------------------------------------------------------------- small values


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("1-02:03:04", 93784.0),
        ("00:05:00", 300.0),
        ("5:00", 300.0),
        ("60", 3600.0),
        ("2-12", 216000.0),
        ("1-00:30", 88200.0),
        ("UNLIMITED", None),
        ("Partition_Limit", None),
        ("", None),
    ],
)
def test_time_limit_formats(text, seconds):
    assert parse_time_limit(text) == seconds


@pytest.mark.parametrize("text", ["1:2:3:4", "abc", "-5", "1-", "01:xx:00"])
def test_bad_time_limits(text):
    with pytest.raises(ValueError, match=re.escape(repr(text))):
        parse_time_limit(text)


@pytest.mark.parametrize(
    ("text", "version"),
    [
        ("slurm-wlm 22.05.8\n", (22, 5, 8)),
        ("slurm 23.11.4", (23, 11, 4)),
        ("slurm 24.05.0-0rc1", (24, 5, 0)),
    ],
)
def test_slurm_version(text, version):
    assert parse_slurm_version(text) == version


def test_slurm_version_garbage():
    with pytest.raises(SlurmOutputError, match=re.escape("no version like 22.05.8 in 'command not found'")):
        parse_slurm_version("command not found")


# ---------------------------------------------------------------------------------------------- hostlists


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ("n[1-3,5]", ("n1", "n2", "n3", "n5")),
        ("c[01-10]", tuple(f"c{i:02d}" for i in range(1, 11))),
        ("n[098-101]", ("n098", "n099", "n100", "n101")),
        ("n[8-11]", ("n8", "n9", "n10", "n11")),
        ("a[1-2]b[3-4]", ("a1b3", "a1b4", "a2b3", "a2b4")),
        ("n1,m[2-3]", ("n1", "m2", "m3")),
        ("gpu[1-2]-ib", ("gpu1-ib", "gpu2-ib")),
        ("login", ("login",)),
        ("", ()),
        (None, ()),
        ("(null)", ()),
    ],
)
def test_expand(expr, names):
    assert expand(expr) == names


@pytest.mark.parametrize(
    ("expr", "problem"),
    [
        ("n[1-3", "unbalanced"),
        ("n1-3]", "without '\\['"),
        ("n[]", "empty brackets"),
        ("n[3-1]", "runs backwards"),
        ("n[a-b]", "bad range"),
        ("n[1-]", "bad range"),
        ("n[1-2[3]]", "nested"),
        ("n[1-2000000]", "more than"),
    ],
)
def test_expand_errors_name_the_expression(expr, problem):
    with pytest.raises(ValueError, match=re.escape(repr(expr)) + ".*" + problem):
        expand(expr)


@pytest.mark.parametrize(
    ("names", "expr"),
    [
        (["n3", "n1", "n2", "n5"], "n[1-3,5]"),
        ([f"c{i:02d}" for i in range(1, 11)], "c[01-10]"),
        (["n10", "n9", "n9"], "n[9-10]"),
        (["n1", "n01"], "n1,n01"),
        (["login", "n2", "m1"], "login,m1,n2"),
        (["gpu7"], "gpu7"),
        ([], ""),
    ],
)
def test_compress(names, expr):
    assert compress(names) == expr


@pytest.mark.parametrize(
    "names",
    [
        ["n1", "n2", "n3", "n5", "n10"],
        [f"c{i:03d}" for i in (1, 2, 3, 9, 10, 99, 100)],
        ["a1", "b1", "a2", "login", "n01", "n1", "n010"],
    ],
)
def test_hostlist_round_trip(names):
    expr = compress(names)
    assert sorted(expand(expr)) == sorted(set(names))
    assert compress(expand(expr)) == expr


@pytest.mark.parametrize("module", [hostlist, parse], ids=lambda m: m.__name__.rsplit(".", 1)[1])
def test_doctests(module):
    result = doctest.testmod(module)
    assert result.attempted > 0
    assert result.failed == 0
