"""EASY backfilling as first written: one pass over the queue, no index, no memo.

The reference for :class:`wattsched.policies.easy.EasyPolicy`, whose
backfilling searches the queue index (and whose memo skips the jobs seen in
an earlier call of the same epoch).
"""

from __future__ import annotations

import math

from wattsched.model.plan import Plan, Reason, Start
from wattsched.model.snapshot import Snapshot
from wattsched.policies.easy import _HEAD_REASON, queue_order


def shadow_time(snapshot: Snapshot, head_nodes: int, free: int, started: list[tuple[float, int]]):
    """When ``head_nodes`` nodes are expected free, and how many more then: running jobs and this pass's starts."""
    now = snapshot.now_s
    ends = sorted([(r.expected_end_s, len(r.nodes)) for r in snapshot.running.values()] + list(started))
    avail = free
    for end, n in ends:
        avail += n
        if avail >= head_nodes:
            return max(end, now), avail - head_nodes
    return math.inf, 0


def decide(snapshot: Snapshot, order: str = "fcfs") -> Plan:
    actions: list[Start] = []
    plan = Plan(actions)
    free = snapshot.free_nodes
    now = snapshot.now_s
    end = len(free)
    jobs = list(queue_order(snapshot, order))
    started: list[tuple[float, int]] = []
    head = None
    rest = []
    for i, job in enumerate(jobs):
        if job.nodes > end:
            head, rest = job, jobs[i + 1 :]
            break
        actions.append(Start(job.id, tuple(free[end - job.nodes : end])))
        started.append((now + job.walltime_s, job.nodes))
        end -= job.nodes
    if head is None:
        return plan
    shadow, extra = shadow_time(snapshot, head.nodes, end, started)
    left = end
    for job in rest:
        k = job.nodes
        if k > left:
            continue
        if now + job.walltime_s <= shadow:
            pass
        elif k <= extra:
            extra -= k
        else:
            continue
        actions.append(Start(job.id, tuple(free[left - k : left])))
        left -= k
        if left == 0:
            break
    plan.reasons[head.id] = Reason(_HEAD_REASON, head.nodes, end, shadow)
    plan.default_reason = "does not fit before the head job's reservation"
    return plan
