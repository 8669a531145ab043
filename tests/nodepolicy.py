"""A test-only policy that sets node caps and frequencies, and the way to register it as a third-party plugin.

``NodeSettingPolicy`` wants ``cap_w`` on the nodes ``cap_nodes`` and ``freq_hz``
on ``freq_nodes``; it asks for a setting only while its snapshot does not show
it, and keeps in its state what it saw (``seen_caps``, ``seen_freqs``) and how
many times it was called (``calls``), so a test reads from the daemon's state
store what the policy saw. It also starts pending jobs in queue order on free
nodes (``start_cap_w``/``start_freq_hz`` on the start when set).

:func:`install_entry_point` registers it under the name ``node-setting`` in the
``wattsched.policies`` entry point group, the way a site's own package would.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, ConfigDict

from wattsched.model.plan import Plan, SetNodeCap, SetNodeFreq, Start
from wattsched.model.snapshot import Snapshot
from wattsched.model.state import PolicyState
from wattsched.policies.base import BasePolicy, PolicyTags

log = logging.getLogger("wattsched.testpolicy")


class NodeSettingParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    cap_w: float | None = 150.0
    cap_nodes: list[int] = [0]
    freq_hz: float | None = 1.5e9
    freq_nodes: list[int] = [1]
    start_cap_w: float | None = None
    start_freq_hz: float | None = None


class NodeSettingState(PolicyState):
    calls: int = 0
    seen_caps: dict[str, float] = {}
    seen_freqs: dict[str, float] = {}
    seen_desired_caps: dict[str, float] = {}


class NodeSettingPolicy(BasePolicy):
    name: ClassVar[str] = "node-setting"
    Params = NodeSettingParams
    State = NodeSettingState

    def tags(self) -> PolicyTags:
        return dataclasses.replace(super().tags(), wants_empty_queue_calls=True)

    def decide(self, snapshot: Snapshot, state: NodeSettingState | None = None) -> Plan:
        p = self.params
        caps = {str(i): w for i, w in sorted(snapshot.node_cap_w.items())}
        freqs = {str(i): f for i, f in sorted(snapshot.node_freq_hz.items())}
        if state is not None:
            state.calls += 1
            state.seen_caps, state.seen_freqs = caps, freqs
            state.seen_desired_caps = {str(i): w for i, w in sorted(snapshot.desired_node_cap_w.items())}
        log.info("node-setting policy sees caps %s and frequencies %s", caps, freqs)
        actions: list = []
        if p.cap_w is not None:
            actions += [SetNodeCap(i, p.cap_w) for i in p.cap_nodes
                        if abs(snapshot.node_cap_w.get(i, float("inf")) - p.cap_w) >= 1.0]
        if p.freq_hz is not None:
            actions += [SetNodeFreq(i, p.freq_hz) for i in p.freq_nodes
                        if abs(snapshot.node_freq_hz.get(i, float("inf")) - p.freq_hz) >= 1e6]
        free = list(snapshot.free_nodes)
        for job in snapshot.pending.values():
            if job.nodes > len(free):
                break
            nodes = tuple(free.pop() for _ in range(job.nodes))
            actions.append(Start(job.id, nodes, freq_hz=p.start_freq_hz, cap_w=p.start_cap_w))
        return Plan(actions, default_reason="waiting for free nodes")


def install_entry_point(site: Path) -> Path:
    """Register ``node-setting`` in a ``*.dist-info`` under ``site``; put ``site`` and this directory on the path."""
    info = site / "wattsched_testpolicy-0.1.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: wattsched-testpolicy\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[wattsched.policies]\nnode-setting = nodepolicy:NodeSettingPolicy\n")
    return site
