"""EASY backfilling (Lifka 1995; Mu'alem and Feitelson 2001).

Jobs start in queue order while they fit. The first job that does not fit
(the *head*) gets a reservation at its *shadow time*: the earliest time enough
nodes are expected to be free, from the requested times of the running jobs.
A later job may start now (*backfill*) if it fits in the free nodes and either
ends, by its requested time, no later than the shadow time, or uses only the
*extra* nodes: those still free at the shadow time once the head has its share.
Either way the head's reservation is never delayed.

Queue order is FCFS (submission) or SAF (Smallest Area First: requested
node-seconds, ties by submission).

The policy is called after every event of a simulation, so it avoids
rescanning the queue when nothing but new arrivals changed: with FCFS order
and an unchanged snapshot ``epoch``, every job that could not start last time
still cannot (time only makes "ends before the shadow time" harder), so only
the jobs that arrived since are examined. On long queues backfilling searches
the queue index (:class:`~wattsched.model.queue_index.QueueIndex`), which the
simulator and the daemon both keep in the snapshot, with the compiled scan
(:meth:`~wattsched.policies.scan.Scanner.next_fit`) where it is compiled:
the first few candidates are all a pass starts, and numpy's filter would
make every one of them. These are exact
shortcuts: ``tests/unit/test_fast_paths.py`` holds the policy equal to the
plain algorithm (``tests/reference/easy_plain.py``) on random snapshots.
"""

from __future__ import annotations

import dataclasses
import math
from itertools import islice
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

try:
    import cython
except ImportError:  # pure Python without Cython installed
    from wattsched import _shadow as cython

from wattsched.model.job import Job
from wattsched.model.plan import Plan, Reason, Start, start_nodes
from wattsched.model.snapshot import Snapshot
from wattsched.model.state import PolicyState
from wattsched.policies.base import BasePolicy, PolicyTags
from wattsched.policies.scan import COMPILED as _SCAN
from wattsched.policies.scan import Scanner

INDEX_MIN_QUEUE = 48
"""Queue length from which backfilling searches the queue index instead of scanning."""


class EasyParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    order: Literal["fcfs", "saf"] = Field(
        "fcfs", description="Queue order: 'fcfs' (submission time) or 'saf' (smallest requested area first)."
    )


def queue_order(snapshot: Snapshot, order: str) -> list[Job] | Any:
    """Pending jobs in the order the policy serves them."""
    if order == "saf":
        return sorted(snapshot.pending.values(), key=lambda j: (j.walltime_s * j.nodes, j.submit_s, j.id))
    return snapshot.pending.values()


def shadow_time(
    snapshot: Snapshot, head_nodes: int, free: int, started: list[tuple[float, int]]
) -> tuple[float, int]:
    """When ``head_nodes`` nodes are expected free, and how many more are free then.

    ``free`` nodes are free now; ``started`` lists ``(expected_end_s, nodes)`` of
    jobs this decision has already started. Returns ``(inf, 0)`` if the running
    jobs never free enough nodes (the head cannot run on the usable nodes).
    """
    now = snapshot.now_s
    ends = snapshot.running_by_end()
    avail = free
    if started:
        # The running jobs' ends merged with this decision's starts, in (end, nodes) order, as
        # sorted() would give them: the walk usually stops within the first few, so no full sort.
        started = sorted(started)
        i, m = 0, len(started)
        for e, n, _ in ends:
            while i < m and (started[i][0] < e or (started[i][0] == e and started[i][1] <= n)):
                se, sn = started[i]
                i += 1
                avail += sn
                if avail >= head_nodes:
                    return (se if se > now else now), avail - head_nodes
            avail += n
            if avail >= head_nodes:
                return (e if e > now else now), avail - head_nodes
        for se, sn in started[i:]:
            avail += sn
            if avail >= head_nodes:
                return (se if se > now else now), avail - head_nodes
        return math.inf, 0
    for item in ends:
        n = item[1]  # unboxed first: the compiled core adds C integers
        avail += n
        if avail >= head_nodes:
            end = item[0]
            return (end if end > now else now), avail - head_nodes
    return math.inf, 0


class _EasyMemo:
    """What a pass found, for the next call of the same epoch (only new jobs can then backfill); ``epoch`` -1: none."""

    __slots__ = ("epoch", "extra", "free", "head_id", "reason", "seen", "shadow_s", "valid_until_s")

    def __init__(self, epoch: int, head_id: int, shadow_s: float, extra: int, valid_until_s: float, free: int,
                 seen: int, reason: Reason):
        self.epoch, self.head_id, self.shadow_s, self.extra = epoch, head_id, shadow_s, extra
        self.valid_until_s, self.free, self.seen = valid_until_s, free, seen
        self.reason = reason  # the head's, as the pass gave it: the same head, free nodes and shadow time since


class EasyState(PolicyState):
    """EASY's state: a memo of the last pass, a cache that is never persisted."""

    model_config = ConfigDict(extra="forbid", validate_assignment=False, arbitrary_types_allowed=True)

    easy_memo: _EasyMemo | None = Field(None, exclude=True)


class EasyPolicy(BasePolicy):
    """EASY backfilling, power-unaware. Registered as ``easy``."""

    name = "easy"
    Params = EasyParams
    State = EasyState

    def __init__(self, params=None, **kwargs):
        super().__init__(params, **kwargs)
        self._scanner: Scanner | None = None  # typed views of the queue index's arrays, while they last
        self._order = self.params.order  # read at every call (the parameters are frozen)

    def tags(self) -> PolicyTags:
        return dataclasses.replace(super().tags(), constraints=frozenset(),  # power-unaware
                                   ignores_power_steps=True, starts_on_free_nodes=True)

    @cython.locals(snapshot=Snapshot, job=Job, head=Job)
    def decide(self, snapshot: Snapshot, state: PolicyState | None = None) -> Plan:
        # The simulator and the daemon hand over the queue index; a snapshot made by hand gets one.
        snapshot = snapshot.with_indexes(end_table=False)
        order = self._order
        pending = snapshot.pending
        free = snapshot.free_nodes
        nfree = len(free)
        now = snapshot.now_s
        actions: list[Start] = []
        plan = Plan(actions)
        if not pending:
            return plan

        if not isinstance(state, EasyState):
            state = None
        memo = state.easy_memo if state is not None else None
        if (
            memo is not None
            and order == "fcfs"
            and memo.epoch == snapshot.epoch
            and now < memo.valid_until_s
            and memo.free == nfree
        ):
            head_id, shadow, extra = memo.head_id, memo.shadow_s, memo.extra
            new = len(pending) - memo.seen
            head = pending.get(head_id)
            if head is not None and new >= 0:
                if new == 0:
                    _reuse(plan, head_id, memo.reason)
                    return plan
                candidates = list(islice(reversed(pending.values()), new))
                candidates.reverse()
                self._backfill(plan, candidates, free, nfree, now, shadow, extra, head.id)
                _reuse(plan, head_id, memo.reason)
                if not actions:
                    memo.seen = len(pending)
                else:
                    memo.epoch = -1  # spent (epochs count from 0)
                return plan

        # Full pass: start jobs in order while they fit.
        end = nfree
        head = None
        started: list[tuple[float, int]] = []
        jobs = queue_order(snapshot, order)
        it = iter(jobs)
        for job in it:
            k = job.nodes
            if k > end:
                head = job
                break
            actions.append(start_nodes(job.id, tuple(free[end - k : end])))
            started.append((now + job.walltime_s, k))
            end -= k
        if head is None:
            if memo is not None:
                memo.epoch = -1
            return plan
        shadow, extra = shadow_time(snapshot, head.nodes, end, started)
        if end:
            # numpy pays off on long queues only; short ones (and SAF order) are scanned directly.
            if order == "fcfs" and len(pending) > INDEX_MIN_QUEUE:
                backfill = self._backfill_scanned if _SCAN else self._backfill_indexed
                backfill(plan, snapshot.queue_index, free, end, now, shadow, extra, head.id)
            else:
                self._backfill(plan, it, free, end, now, shadow, extra, head.id)
        reason = self._explain(plan, head, end, shadow)
        if state is not None:
            if actions or order != "fcfs":
                if memo is not None:
                    memo.epoch = -1
            else:
                ends = snapshot.running_by_end()
                valid_until = ends[0][0] if ends else math.inf
                if memo is None:  # made once, then updated in place: pydantic's __setattr__ costs a call
                    state.easy_memo = _EasyMemo(snapshot.epoch, head.id, shadow, extra, valid_until, nfree,
                                                len(pending), reason)
                else:
                    memo.epoch, memo.head_id, memo.shadow_s, memo.extra = snapshot.epoch, head.id, shadow, extra
                    memo.valid_until_s, memo.free, memo.seen, memo.reason = valid_until, nfree, len(pending), reason
        return plan

    @staticmethod
    @cython.locals(job=Job)
    def _backfill(plan: Plan, jobs, free, end: int, now: float, shadow: float, extra: int, head_id: int) -> None:
        actions = plan.actions
        for job in jobs:
            k = job.nodes
            if k > end or job.id == head_id:
                continue
            left = _backfill_extra(now, job.walltime_s, shadow, k, extra)
            if left < 0:
                continue
            extra = left
            actions.append(start_nodes(job.id, tuple(free[end - k : end])))
            end -= k
            if end == 0:
                break

    @staticmethod
    def _backfill_indexed(plan: Plan, index, free, end: int, now: float, shadow: float, extra: int, head_id: int):
        """Same decisions as :meth:`_backfill`, over the queue index's candidates only.

        Candidates only shrink as nodes are taken, so after each start the
        remaining ones are filtered again with numpy instead of one by one.
        """
        horizon = _index_horizon(shadow, now)
        found = index.candidates(head_id, end, horizon, extra)
        sizes, walls, ids = index.nodes, index.wall, index.ids
        actions = plan.actions
        while len(found):
            p = found.item(0)  # .item(): Python numbers straight away, no NumPy scalars
            k = sizes.item(p)
            left = _backfill_extra(now, walls.item(p), shadow, k, extra)
            if left < 0:
                found = found[1:]
                continue
            extra = left
            actions.append(start_nodes(ids.item(p), tuple(free[end - k : end])))
            end -= k
            found = found[1:]
            if not end or not len(found):
                break
            ks = sizes[found]
            ok = ks <= end
            if extra < end:
                ok &= (walls[found] <= horizon) | (ks <= extra)
            found = found[ok]

    def _backfill_scanned(self, plan: Plan, index, free, end: int, now: float, shadow: float, extra: int,
                          head_id: int) -> None:
        """Same decisions as :meth:`_backfill_indexed`, with the compiled scan: it stops at each candidate in
        turn, at the free and extra nodes left then, and a pass that starts a job or two reads no further."""
        horizon = _index_horizon(shadow, now)
        sizes, walls, ids = index.nodes, index.wall, index.ids
        scanner = self._scanner
        if scanner is None or not scanner.over(index.inc_mean, index.inc_var, sizes, walls):
            scanner = self._scanner = Scanner(index.inc_mean, index.inc_var, sizes, walls)
        pos = index.pos.get(head_id)
        p = 0 if pos is None else pos + 1
        hi = index.size
        actions = plan.actions
        while end:
            p = scanner.next_fit(p, hi, end, horizon, extra)
            if p >= hi:
                break
            k = sizes.item(p)
            left = _backfill_extra(now, walls.item(p), shadow, k, extra)
            if left < 0:
                p += 1
                continue
            extra = left
            actions.append(start_nodes(ids.item(p), tuple(free[end - k : end])))
            end -= k
            p += 1

    @staticmethod
    def _explain(plan: Plan, head: Job, free: int, shadow: float) -> Reason:
        reason = plan.reasons[head.id] = Reason(_HEAD_REASON, head.nodes, free, shadow)
        plan.default_reason = _OTHERS_REASON
        return reason


def _reuse(plan: Plan, head_id: int, reason: Reason) -> None:
    """:meth:`EasyPolicy._explain` with the reason a pass gave for the same head, free nodes and shadow time."""
    plan.reasons[head_id] = reason
    plan.default_reason = _OTHERS_REASON


def _backfill_extra(now: float, walltime_s: float, shadow: float, k: int, extra: int) -> int:
    """EASY's backfill rule for a candidate of ``k`` nodes that fits the free ones: the extra nodes (free at the
    head's reservation beyond its need) left if it may start now, -1 if not. It may when it ends before the
    shadow time (the extra nodes are left as they are) or when it fits the extra nodes (it takes them).

    >>> [_backfill_extra(0.0, wall, 100.0, 4, extra) for wall, extra in ((50.0, 1), (500.0, 6), (500.0, 3))]
    [1, 2, -1]
    """
    if now + walltime_s <= shadow:
        return extra
    return extra - k if k <= extra else -1


def _index_horizon(shadow: float, now: float) -> float:
    """The requested time the index's filter lets through as ending before the shadow time: a superset, with
    slack far above rounding, of the exact test that follows (``now + walltime <= shadow``)."""
    return (shadow - now) * (1 + 1e-12) + 1e-9


_OTHERS_REASON = "does not fit before the head job's reservation"
_HEAD_REASON = "head of queue: needs {} nodes, {} free; reserved at t={:.0f}s (inf: never, too few usable nodes)"
