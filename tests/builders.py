"""Builders for hand-made jobs, traces and snapshots used across the tests, and helpers to run the CLI."""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
import subprocess
import sys
from importlib.resources import files
from pathlib import Path

from wattsched.model import units
from wattsched.model.job import Job, RunningJob
from wattsched.model.platform import NodePowerModel, NodeState, Platform
from wattsched.model.snapshot import Snapshot
from wattsched.policies.base import BasePolicy
from wattsched.workload.records import TraceJob

SIMPLE_POWER = NodePowerModel(
    off_w=10.0, idle_w=100.0, busy_w=300.0, busy_min_w=200.0, switch_on_s=20.0, switch_on_w=150.0,
    switch_off_s=5.0, switch_off_w=120.0, freq_levels_hz=(1.0e9, 2.0e9), cap_min_w=50.0, cap_max_w=300.0,
)
"""Round numbers, so that expected energies can be worked out by hand."""


def platform(n: int = 4, power: NodePowerModel = SIMPLE_POWER) -> Platform:
    """A homogeneous cluster of ``n`` nodes with the ``power`` model."""
    return Platform.homogeneous_cluster(n, power=power)


def tj(
    id: int, submit: float, runtime: float, nodes: int = 1, walltime: float | None = None, **kw
) -> TraceJob:
    """A trace job of ``nodes`` nodes whose walltime is its runtime unless given."""
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


TINY_SWF = """; MaxProcs: 8
; MaxNodes: 8
; UnixStartTime: 1000000
1 100 0 50 4 -1 -1 4 60 -1 1 1 1 -1 1 -1 -1 -1
2 110 0 30 8 -1 -1 8 40 -1 1 2 1 -1 1 -1 -1 -1
3 120 0 10 2 -1 -1 2 20 -1 1 1 1 -1 1 -1 -1 -1
4 130 0 100 2 -1 -1 2 50 -1 1 3 1 -1 1 -1 -1 -1
"""
"""Four jobs on 8 nodes; job 4 runs 100 s but asks for 50 s."""

BUNDLED_KTH = files("wattsched") / "data" / "traces" / "KTH-SP2-1996-2.1-cln-first5000.swf.gz"
"""The KTH SP2 excerpt shipped with the package (its first 5000 jobs)."""


def tiny_trace(directory: Path, name: str = "tiny.swf") -> Path:
    """Write ``TINY_SWF`` to ``directory / name`` and return its path."""
    path = directory / name
    path.write_text(TINY_SWF)
    return path


def kth_excerpt(directory: Path, jobs: int = 200) -> Path:
    """Write the bundled KTH excerpt's header and its first ``jobs`` jobs to ``directory / "base.swf"``."""
    lines = gzip.decompress(BUNDLED_KTH.read_bytes()).decode().splitlines()
    header = [x for x in lines if x.startswith(";")]
    body = [x for x in lines if not x.startswith(";")][:jobs]
    path = directory / "base.swf"
    path.write_text("\n".join(header + body) + "\n")
    return path


def cli(*args, cwd: Path | None = None, timeout: float = 300, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run ``python -m wattsched *args`` from ``cwd`` in a subprocess and return its exit status and text output."""
    return subprocess.run([sys.executable, "-m", "wattsched", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, **(env or {})})


def read_summary(out: Path) -> dict:
    """The summary.json of the run directory ``out``, as a dict."""
    return json.loads((Path(out) / "summary.json").read_text())


class TagsChanged(BasePolicy):
    """``inner`` with some of its tags changed: ``TagsChanged(policy, starts_on_free_nodes=False)`` is called
    where ``policy`` declares it could start nothing, for a test that the skip changes no schedule."""

    name = "tags-changed-test"

    def __init__(self, inner, **changes):
        super().__init__()
        self.inner = inner
        self.changes = changes
        self.State = inner.State

    def tags(self):
        return dataclasses.replace(self.inner.tags(), **self.changes)

    def init_state(self):
        return self.inner.init_state()

    def decide(self, snapshot, state=None):
        return self.inner.decide(snapshot, state)
