"""Builders for hand-made jobs, traces and snapshots used across the tests."""

from __future__ import annotations

from wattsched.model import units
from wattsched.model.job import Job, RunningJob
from wattsched.model.platform import NodePowerModel, NodeState, Platform
from wattsched.model.snapshot import Snapshot
from wattsched.workload.records import TraceJob

SIMPLE_POWER = NodePowerModel(
    off_w=10.0, idle_w=100.0, busy_w=300.0, busy_min_w=200.0, switch_on_s=20.0, switch_on_w=150.0,
    switch_off_s=5.0, switch_off_w=120.0, freq_levels_hz=(1.0e9, 2.0e9), cap_min_w=50.0, cap_max_w=300.0,
)
"""Round numbers, so that expected energies can be worked out by hand."""


def platform(n: int = 4, power: NodePowerModel = SIMPLE_POWER) -> Platform:
    return Platform.homogeneous_cluster(n, power=power)


def tj(
    id: int, submit: float, runtime: float, nodes: int = 1, walltime: float | None = None, **kw
) -> TraceJob:
    return TraceJob(
        id=id, submit_s=submit, runtime_s=runtime, walltime_s=walltime if walltime is not None else runtime,
        procs=nodes, nodes=nodes, **kw,
    )


def snapshot(
    plat: Platform,
    pending: list[Job] = (),
    running: list[tuple[Job, float, tuple[int, ...]]] = (),
    now: float = 0.0,
    **kw,
) -> Snapshot:
    """A snapshot with ``running`` given as ``(job, start_s, nodes)``; other nodes idle."""
    state = [int(NodeState.IDLE)] * len(plat.nodes)
    run_views = {}
    for job, start, nodes in running:
        for n in nodes:
            state[n] = int(NodeState.BUSY)
        run_views[job.id] = RunningJob(job, start, tuple(nodes), start + job.walltime_s, 0.0, 1.0)
    free = [i for i, s in enumerate(state) if s == NodeState.IDLE]
    if "node_free" not in kw:  # jobs of units share their nodes: what is left on each
        node_free = {}
        for job, _, nodes in running:
            for u, n in zip(job.units, nodes):
                node_free[n] = units.minus(node_free.get(n, units.capacity(plat.nodes[n])), u)
        kw["node_free"] = node_free
    return Snapshot(
        now_s=now, platform=plat, pending={j.id: j for j in pending}, running=run_views,
        free_nodes=free, node_state=state, **kw,
    )
