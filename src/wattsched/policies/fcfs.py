"""First come, first served: start jobs in queue order, stop at the first that does not fit."""

from __future__ import annotations

import dataclasses

from wattsched.model.plan import Plan, Start
from wattsched.model.snapshot import Snapshot
from wattsched.model.state import PolicyState
from wattsched.policies.base import BasePolicy, PolicyTags


class FcfsPolicy(BasePolicy):
    """Strict FCFS, no backfilling: a job never starts before one submitted earlier."""

    name = "fcfs"

    def tags(self) -> PolicyTags:
        return dataclasses.replace(super().tags(), constraints=frozenset(),  # power-unaware
                                   ignores_power_steps=True, starts_on_free_nodes=True)

    def decide(self, snapshot: Snapshot, state: PolicyState | None = None) -> Plan:
        free = snapshot.free_nodes
        end = len(free)
        actions = []
        plan = Plan(actions)
        for job in snapshot.pending.values():
            k = job.nodes
            if k > end:
                plan.reasons[job.id] = f"waiting for {k} nodes ({end} free)"
                plan.default_reason = "behind an earlier job (strict FCFS)"
                break
            actions.append(Start(job.id, tuple(free[end - k : end])))
            end -= k
        return plan
