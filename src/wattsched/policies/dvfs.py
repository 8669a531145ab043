"""DVFS (Etinski et al., as Borghesi et al. 2018 implement it): power-aware EASY, the blocked head started slower.

The jobs are scheduled by ``bf`` (power-aware EASY backfilling,
:mod:`wattsched.policies.bf`). Then the first job left waiting in queue order,
if enough nodes are still free for it but not enough predicted power, may
start at a lower CPU frequency: the node frequency levels are tried from the
highest down, the job's predicted node power at a level being its predicted
mean times the power ratio of its response model (the platform's model for
its application class), and the first level whose power fits under the cap
and whose duration multiplier stays at most ``max_slowdown`` is used. The
frequency is part of the ``Start`` (``Start(freq_hz=...)``): in replay it
slows the job through its response model for its whole life; live the node
agent sets it on the job's nodes before the job is released, and it is
restored when the job ends. A job whose class has no response model is never
slowed. With a ``response`` scenario of the paper (a factor ``F``, ``mixed``,
``cpi``), the job's model is the scenario's and the ratio is taken on its
*dynamic* power (above the node's idle power, never below the scenario's
floor), as the replay applies it: otherwise the policy would predict less
power than the slowed job draws and break the budget.

One simplification against the original: the backfilled jobs are chosen
before the head's reduced start is tried, so the head gets the nodes and
power they leave.
"""

from __future__ import annotations

from pydantic import Field

from wattsched.model.job import PowerEstimate
from wattsched.model.plan import Plan, Start
from wattsched.model.snapshot import Snapshot
from wattsched.model.state import PolicyState
from wattsched.policies.base import ResponseParams
from wattsched.policies.bf import BfParams, BfPolicy
from wattsched.policies.easy import queue_order
from wattsched.policies.power import PowerLedger


class DvfsParams(BfParams, ResponseParams):
    max_slowdown: float = Field(2.0, ge=1.0, description="Largest predicted duration multiplier of a slowed start.")


class DvfsPolicy(BfPolicy):
    """Power-aware EASY; the blocked head job may start at a lower frequency. Registered as ``dvfs``."""

    name = "dvfs"
    Params = DvfsParams

    def decide(self, snapshot: Snapshot, state: PolicyState | None = None) -> Plan:
        plan = super().decide(snapshot, state)
        cap = snapshot.cap_w
        if cap == float("inf") or not snapshot.pending:
            return plan
        started = {a.job_id for a in plan.starts()}
        head = next((j for j in queue_order(snapshot, self.params.order) if j.id not in started), None)
        if head is None:
            return plan
        used = {n for a in plan.starts() for n in a.nodes}
        free = [n for n in snapshot.free_nodes if n not in used]
        scenario = self.response_scenario
        if scenario is not None and scenario.dynamic:
            response = scenario.for_job(head.id, head.app_class)
        else:
            response = snapshot.response_for(head)
        if head.nodes > len(free) or response is None:
            return plan
        nodes = tuple(free[len(free) - head.nodes:])
        ledger = PowerLedger.from_snapshot(snapshot, self.params.check)
        for a in plan.starts():
            ledger.add(snapshot.estimate(snapshot.pending[a.job_id]), len(a.nodes))
        est = snapshot.estimate(head)
        levels = sorted({f for n in nodes for f in snapshot.platform.nodes[n].power.freq_levels_hz}, reverse=True)
        fmax = min(snapshot.platform.nodes[n].power.max_freq_hz for n in nodes)
        limit = self._cap_for(snapshot, snapshot.now_s, head)
        idle_w = max(snapshot.platform.nodes[n].power.idle_w for n in nodes)
        for f in levels:
            if f >= fmax or any(f not in snapshot.platform.nodes[n].power.freq_levels_hz for n in nodes):
                continue
            ratio, mult = response.at_frequency_ratio(f / fmax)
            if mult > self.params.max_slowdown:
                break  # lower levels only slow it more
            if scenario is not None and scenario.dynamic:
                slowed = _dynamic_slowed(est, ratio, idle_w, scenario.floor_w)
            else:
                slowed = PowerEstimate(est.mean_w * ratio, est.max_w * ratio, est.std_w * ratio)
            if ledger.fits(slowed, head.nodes, limit):
                plan.actions.append(Start(head.id, nodes, freq_hz=f))
                ledger.add(slowed, head.nodes)
                plan.power_estimate_w = ledger.value()
                plan.reasons.pop(head.id, None)
                break
        return plan


def _dynamic_slowed(est: PowerEstimate, ratio: float, idle_w: float, floor_w: float) -> PowerEstimate:
    """Per-node power at a power ratio taken on the *dynamic* power, as the replay applies the paper's scenarios.

    >>> _dynamic_slowed(PowerEstimate(300.0, 300.0, 10.0), 0.5, 100.0, 1.0)
    PowerEstimate(mean_w=200.0, max_w=200.0, std_w=5.0)
    """

    def slow(w: float) -> float:
        dyn = w - idle_w
        return w if dyn <= 0 else idle_w + max(ratio * dyn, min(floor_w, dyn))

    return PowerEstimate(slow(est.mean_w), slow(est.max_w), est.std_w * ratio)
