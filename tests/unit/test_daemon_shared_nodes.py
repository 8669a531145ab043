"""Jobs that share nodes, live: Slurm jobs read as jobs of units, node capacity left, power split by node.

Hand-built cluster states of 2-core nodes (100 W idle, 300 W busy); every
expected figure below is worked out by hand from those.
"""

from __future__ import annotations

import math

import pytest

from wattsched.daemon.slurm.records import ClusterState, NodeAllocation, SlurmJob, SlurmNode
from wattsched.daemon.view import build_view, request_units
from wattsched.model.guard import plan_problems
from wattsched.model.job import Job, Unit
from wattsched.model.plan import Plan, Start
from wattsched.model.platform import NodePowerModel, NodeState, Platform
from wattsched.model.units import pack_starts
from wattsched.policies import make_policy

POWER = NodePowerModel(idle_w=100.0, busy_w=300.0)
NOW = 1_800_000_000.0
NAMES = ("n1", "n2", "n3")


def nodes(count: int = 3) -> tuple[SlurmNode, ...]:
    return tuple(SlurmNode(f"n{i}", "IDLE", cpus=2, sockets=1, cores_per_socket=2, real_memory_mb=1000,
                           partitions=("shared",)) for i in range(1, count + 1))


def running(job_id: int, *alloc: tuple[str, int, int], shared: bool = True, start: float = NOW - 600) -> SlurmJob:
    return SlurmJob(job_id, "RUNNING", partition="shared", start_time=start, submit_time=start - 10,
                    time_limit_s=3600, node_count=len(alloc), cpus=sum(a[1] for a in alloc),
                    nodes=tuple(a[0] for a in alloc), shared=shared,
                    allocation=tuple(NodeAllocation(n, cores=c, mem_mb=m) for n, c, m in alloc))


def pending(job_id: int, **fields) -> SlurmJob:
    fields.setdefault("shared", True)
    return SlurmJob(job_id, "PENDING", partition="shared", priority=0, reason="JobHeldAdmin",
                    submit_time=NOW - 100 + job_id, time_limit_s=600, **fields)


def view_of(jobs, measured=None, starts=None, settle_s=0.0):
    state = ClusterState(tuple(jobs), nodes(), version="22.05.8", read_at=NOW)
    holds = {j.job_id: "daemon" for j in jobs if j.state == "PENDING" and j.job_id not in (starts or {})}
    return build_view(state, partitions=frozenset({"shared"}), holds=holds, starts=starts or {}, power=POWER,
                      cap_w=lambda _p: math.inf, estimator=None, epoch=1, include_adopted=False,
                      platform_cache={}, measured=measured, settle_s=settle_s)


PLATFORM = Platform.homogeneous_cluster(3, cores=2, power=POWER)


# ----------------------------------------------------------------------------- what a pending job asks


def test_a_job_by_node_asks_one_unit_per_node_each_on_a_node_of_its_own():
    job = SlurmJob(1, "PENDING", shared=True, node_count=2, tasks=4, tasks_per_node=2, mem_per_cpu_mb=50)
    assert request_units(job, PLATFORM) == ((Unit(2, 0, 0, 100),) * 2, True)
    # --mem is per node; CPUs spread evenly over the nodes when no tasks per node are given
    job = SlurmJob(2, "PENDING", shared=True, node_count=2, tasks=3, cpus=3, mem_per_node_mb=300)
    assert request_units(job, PLATFORM) == ((Unit(2, 0, 0, 300),) * 2, True)


def test_a_job_of_tasks_alone_asks_one_unit_per_task_that_may_share_nodes():
    job = SlurmJob(3, "PENDING", shared=True, tasks=3, cpus=3, cpus_per_task=1, mem_per_cpu_mb=100)
    assert request_units(job, PLATFORM) == ((Unit(1, 0, 0, 100),) * 3, False)


def test_a_one_node_unit_that_fits_no_node_falls_back_to_units_of_tasks():
    # -n 3 --mem=300: one 3-CPU unit fits no 2-core node, so Slurm would spread it; so do the units
    job = SlurmJob(4, "PENDING", shared=True, tasks=3, cpus=3, mem_per_node_mb=300)
    assert request_units(job, PLATFORM) == ((Unit(1, 0, 0, 100),) * 3, False)
    # a single task that fits one node stays one unit
    job = SlurmJob(5, "PENDING", shared=True, tasks=1, cpus=2, cpus_per_task=2, mem_per_node_mb=300)
    assert request_units(job, PLATFORM) == ((Unit(2, 0, 0, 300),), True)


def test_an_exclusive_job_takes_whole_nodes():
    job = SlurmJob(6, "PENDING", shared=False, node_count=2, tasks=2, cpus=2)
    assert request_units(job, PLATFORM) == ((), False)


# ----------------------------------------------------------------------------- the snapshot


def test_running_shared_jobs_leave_their_nodes_busy_with_what_is_free_in_node_free():
    v = view_of([running(1, ("n1", 1, 100)), running(2, ("n1", 1, 200), ("n2", 1, 200))])
    snap = v.snapshot
    assert snap.node_free == {0: (0, 0, 0, 700), 1: (1, 0, 0, 800)}
    assert snap.node_state[:2] == [int(NodeState.BUSY)] * 2 and snap.free_nodes == [2]
    assert snap.running[2].job.units == (Unit(1, 0, 0, 200),) * 2 and snap.running[2].nodes == (0, 1)
    assert snap.running[2].job.distinct_nodes


def test_an_exclusive_running_job_still_takes_its_nodes_whole():
    v = view_of([running(1, ("n1", 2, 1000), shared=False)])
    assert v.snapshot.node_free == {} and v.snapshot.running[1].job.units == ()
    assert v.snapshot.free_nodes == [2, 1]


def test_a_shared_nodes_measured_power_is_split_among_its_jobs_and_counted_once():
    # n1: jobs 1 and 2 (1 CPU each), measured 260 W: each gets half the idle (50 W) and half of 160 W above
    # idle (both predicted to add 100 W): 130 W. n2: job 2's other unit alone, measured 180 W: job 2 gets
    # 50 W + 80 W, the node keeps the idle of its free core (50 W). n3 idle, measured 95 W.
    v = view_of([running(1, ("n1", 1, 100)), running(2, ("n1", 1, 200), ("n2", 1, 200))],
                measured={"n1": 260.0, "n2": 180.0, "n3": 95.0})
    snap = v.snapshot
    assert snap.running[1].power_w == pytest.approx(130.0)
    assert snap.running[2].power_w == pytest.approx(130.0 + 130.0)
    assert snap.jobs_power_w == pytest.approx(390.0)
    assert snap.platform_power_w == pytest.approx(260.0 + 180.0 + 95.0)  # each node once
    # predicted: n1 100 + 100 + 100, n2 100 + 100, n3 idle
    assert v.predicted_power_w == pytest.approx(300.0 + 200.0 + 100.0)


def test_a_shared_node_with_a_unit_still_settling_counts_its_predicted_power():
    v = view_of([running(1, ("n1", 1, 100)), running(2, ("n1", 1, 100), start=NOW - 5)],
                measured={"n1": 120.0}, settle_s=30.0)
    assert v.snapshot.running[1].power_w == pytest.approx(150.0)  # 50 W of idle + 100 W predicted
    assert v.snapshot.running[2].power_w == pytest.approx(150.0)


def test_a_released_job_of_units_holds_its_planned_share_of_the_nodes():
    job = pending(7, tasks=3, cpus=3, mem_per_cpu_mb=100)
    job = SlurmJob(**{**{f: getattr(job, f) for f in job.__slots__}, "priority": None, "reason": "None"})
    v = view_of([job], starts={7: (("n2", "n2", "n3"), NOW - 5, 0)})
    snap = v.snapshot
    assert snap.running[7].nodes == (1, 1, 2) and snap.running[7].job.units == (Unit(1, 0, 0, 100),) * 3
    assert snap.node_free == {1: (0, 0, 0, 800), 2: (1, 0, 0, 900)}
    assert snap.free_nodes == [0]


# ----------------------------------------------------------------------------- policies and the guard


def test_ls_packs_a_pending_job_of_tasks_onto_the_partly_used_node():
    v = view_of([running(1, ("n1", 1, 100)), pending(8, tasks=1, cpus=1, mem_per_cpu_mb=100)])
    plan = make_policy("ls").decide(v.snapshot)
    starts = [a for a in plan.actions if type(a) is Start]
    assert [(a.job_id, a.nodes) for a in starts] == [(8, (0,))]
    assert plan_problems(v.snapshot, plan) == []


def test_a_whole_node_policys_start_is_packed_as_in_replay():
    v = view_of([running(1, ("n1", 1, 100)), pending(8, tasks=1, cpus=1, mem_per_cpu_mb=100)])
    plan = make_policy("easy").decide(v.snapshot)
    assert [a.nodes for a in plan.actions if type(a) is Start] == [(1,)]  # easy takes a whole free node
    packed = pack_starts(v.snapshot, plan)
    assert [(a.job_id, a.nodes) for a in packed.actions if type(a) is Start] == [(8, (0,))]
    assert plan_problems(v.snapshot, packed) == []


def test_the_guard_refuses_two_units_of_a_job_by_node_on_one_node():
    v = view_of([pending(9, node_count=2, tasks=2, tasks_per_node=1, mem_per_cpu_mb=100)])
    job: Job = v.snapshot.pending[9]
    assert job.distinct_nodes and len(job.units) == 2
    problems = plan_problems(v.snapshot, Plan([Start(9, (0, 0))]))
    assert any("two of its units" in p for p in problems)
    assert plan_problems(v.snapshot, Plan([Start(9, (0, 1))])) == []


def test_a_job_of_another_partition_sharing_a_managed_node_takes_its_part():
    other = running(5, ("n2", 1, 300))
    other = SlurmJob(**{**{f: getattr(other, f) for f in other.__slots__}, "partition": "debug"})
    v = view_of([running(1, ("n1", 1, 100)), other], measured={"n1": 200.0, "n2": 180.0, "n3": 100.0})
    snap = v.snapshot
    assert 5 not in snap.running
    assert snap.node_free == {0: (1, 0, 0, 900), 1: (1, 0, 0, 700)}
    assert snap.free_nodes == [2]
    # its node's power stays in the platform's, as the node's own
    assert snap.platform_power_w == pytest.approx(200.0 + 180.0 + 100.0)
