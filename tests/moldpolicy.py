"""A test-only policy for moldable and malleable jobs live, and the way to register it as a third-party plugin.

``MoldPolicy`` starts each pending job in queue order on the lowest free nodes: a moldable job on
``start_nodes`` nodes (within its range), each start preceded by ``SetNodeCap(node, cap_w)`` on its nodes when
``cap_w`` is set. A running malleable job with more than ``shrink_to`` nodes is reshaped onto its first
``shrink_to``; with ``grow_by``, onto ``grow_by`` more free nodes (which a live cluster refuses). It emits the
plans the ``parm`` policy emits (SetNodeCap before Start, Start on a count of the range, Reshape), on a
schedule a test can foresee.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, ConfigDict

from wattsched.model.plan import Plan, Reshape, SetNodeCap, Start
from wattsched.model.snapshot import Snapshot
from wattsched.policies.base import BasePolicy


class MoldParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    start_nodes: int = 2
    cap_w: float | None = None
    shrink_to: int | None = None
    grow_by: int = 0


class MoldPolicy(BasePolicy):
    name: ClassVar[str] = "mold-test"
    Params = MoldParams

    def decide(self, snapshot: Snapshot, state=None) -> Plan:
        p = self.params
        actions: list = []
        free = sorted(snapshot.free_nodes)
        for jid, run in sorted(snapshot.running.items()):
            if not run.job.malleable:
                continue
            if p.shrink_to is not None and len(run.nodes) > p.shrink_to:
                actions.append(Reshape(jid, tuple(run.nodes[:p.shrink_to])))
            elif p.grow_by and len(free) >= p.grow_by:
                extra, free = free[:p.grow_by], free[p.grow_by:]
                actions.append(Reshape(jid, (*run.nodes, *extra)))
        for job in snapshot.pending.values():
            k = max(job.min_nodes, min(job.max_nodes, p.start_nodes)) if job.max_nodes else job.nodes
            if k > len(free):
                break
            nodes, free = tuple(free[:k]), free[k:]
            if p.cap_w is not None:
                actions += [SetNodeCap(n, p.cap_w) for n in nodes]
            actions.append(Start(job.id, nodes))
        return Plan(actions, default_reason="waiting for free nodes")


def install_entry_point(site: Path) -> Path:
    """Register ``mold-test`` in a ``*.dist-info`` under ``site``; put ``site`` and this directory on the path."""
    info = site / "wattsched_moldpolicy-0.1.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: wattsched-moldpolicy\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[wattsched.policies]\nmold-test = moldpolicy:MoldPolicy\n")
    return site
