"""EASY+PC: EASY backfilling that also respects a power cap (Carastan-Santos et al. 2024, Algorithm 1).

Every start and every backfill is checked against the cap with the shared
power verification (:mod:`wattsched.policies.power`) on predicted power. The
head job's reservation accounts for power as well as nodes: its shadow time is
the first time, walking the running jobs' expected ends and the cap schedule's
changes, at which both enough nodes and enough predicted power are available
for it. A job may backfill if it fits now (nodes and power) and either ends by
the shadow time or, running past it, leaves the head its nodes (extra nodes)
and its power (the ledger at the shadow time, with the head, still fits).

``easy-saf`` is the same with Smallest Area First order. With no cap in force
the policy is plain EASY.

Lookahead (``lookahead``): ``always`` (default), a job is checked against the
lowest cap in force during its requested time, so jobs are not started into a
capped window (or a demand-response event) they would overshoot; ``window``,
only a job started while a cap is in force is, and a job started while no cap
is in force is not held at all, as the paper applies the cap only inside its
window; ``off``, against the cap in force at its start only.

Speed: the policy is called after every event of a simulation. While no cap
change is ahead, backfilling works on the jobs' power increments kept by the
queue index, narrowed with cheap necessary conditions before the exact checks,
and the reservation walks the first running jobs' ends in Python (or proves at
once that the head can never fit); with a cap change ahead, it walks the end
table's rows and the changes in time order. The indexes come in the snapshot
from the simulator and the daemon alike (a snapshot made by hand gets them),
so one code path runs live and in replay. Each shortcut gives the decisions
of the plain algorithm (``tests/reference/easy_pc_plain.py``), to the bit:
``tests/unit/test_fast_paths.py`` compares them on random snapshots.
"""

from __future__ import annotations

import dataclasses
import math
from itertools import islice
from operator import itemgetter
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from wattsched.model.job import Job
from wattsched.model.plan import Plan, Reason, Start
from wattsched.model.snapshot import Snapshot
from wattsched.model.state import PolicyState
from wattsched.policies import easy as easy_module
from wattsched.policies import scan
from wattsched.policies.base import BasePolicy, PolicyTags
from wattsched.policies.easy import EasyPolicy, EasyState, queue_order
from wattsched.policies.power import PowerLedger
from wattsched.policies.scan import COMPILED as _SCAN
from wattsched.policies.scan import Scanner

Check = Literal["mean", "max", "gaussian_68", "gaussian_95", "gaussian_99"]
Lookahead = Literal["window", "always", "off"]
LOOKAHEAD_HELP = ("always (true): the lowest cap during its requested time, before a window too; window (the "
                  "paper's): the same, for jobs started while a cap is in force only; off (false): the cap in force "
                  "at its start.")


def lookahead_mode(value):
    """``lookahead`` as one of :data:`Lookahead`: ``true`` is ``always`` and ``false`` is ``off``, as before.

    >>> lookahead_mode(True), lookahead_mode(False), lookahead_mode("window")
    ('always', 'off', 'window')
    """
    if isinstance(value, bool):
        return "always" if value else "off"
    return value


class EasyPcParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    check: Check = Field("gaussian_99", description="Power verification: mean, max or gaussian_68/95/99.")
    order: Literal["fcfs", "saf"] = Field("fcfs", description="Queue order: fcfs or saf (smallest area first).")
    lookahead: Lookahead = Field("always", description=LOOKAHEAD_HELP)

    _lookahead = field_validator("lookahead", mode="before")(lookahead_mode)


class EasySafParams(EasyPcParams):
    order: Literal["fcfs", "saf"] = Field("saf", description="Queue order (saf for easy-saf).")


class _EpochMemo:
    """What a pass that started nothing found, for the next call of the same epoch (no snapshot kept)."""

    __slots__ = ("epoch", "free", "head", "ledger", "reservation", "seen", "valid_until_s")

    def __init__(self, epoch: int, valid_until_s: float, free: int, seen: int, head: Job, ledger: PowerLedger,
                 reservation: _Reservation):
        self.epoch, self.valid_until_s, self.free, self.seen = epoch, valid_until_s, free, seen
        self.head, self.ledger, self.reservation = head, ledger, reservation


class EasyPcState(EasyState):
    """easy-pc's state: memos of the last pass (its own, and EASY's when no cap is ahead), never persisted."""

    model_config = ConfigDict(extra="forbid", validate_assignment=False, arbitrary_types_allowed=True)

    memo: _EpochMemo | None = Field(None, exclude=True)


class EasyPcPolicy(BasePolicy):
    """EASY with power-capping checks on predicted power. Registered as ``easy-pc``."""

    name = "easy-pc"
    Params = EasyPcParams
    State = EasyPcState

    def tags(self) -> PolicyTags:
        # The checks add the running jobs' predictions to the measured power of the nodes no job runs on: a step
        # of a job's measured power changes neither, and the queue order (FCFS, SAF) does not change with time.
        # Its actions are starts on free nodes (a cap change, a control event, still calls it).
        return dataclasses.replace(super().tags(), wants_end_table=True, constraints=frozenset({"cap"}),
                                   ignores_power_steps=True, starts_on_free_nodes=True)

    def __init__(self, params=None, **kwargs):
        super().__init__(params, **kwargs)
        self._easy = EasyPolicy(order=self.params.order)
        self._scanner: Scanner | None = None  # typed views of the queue index's arrays, while they last

    def decide(self, snapshot: Snapshot, state: PolicyState | None = None) -> Plan:
        # The simulator and the daemon hand over the indexes the fast paths search; a snapshot made by hand gets them.
        snapshot = snapshot.with_indexes()
        cap = snapshot.cap
        now = snapshot.now_s
        # A cap in force now settles it without scanning the schedule (``is_uncapped`` does). With the
        # ``window`` lookahead, no cap in force now is plain EASY whatever comes later (the paper's).
        if cap.cap_at(now) == math.inf and (self.params.lookahead == "window" or cap.is_uncapped
                                            or cap.next_change_after(now) == math.inf):
            return self._easy.decide(snapshot, state)
        return self._decide_capped(snapshot, state)

    def _cap_for(self, snapshot: Snapshot, start_s: float, job: Job) -> float:
        """The cap ``job`` started at ``start_s`` must respect: the lookahead over its requested time."""
        mode = self.params.lookahead
        if mode == "off":
            return snapshot.cap.cap_at(start_s)
        if mode == "window" and snapshot.cap.cap_at(start_s) == math.inf:
            return math.inf  # no cap in force at the start: not held before the window
        return snapshot.lowest_cap(job.walltime_s, start_s)

    def _caps_for(self, snapshot: Snapshot, walls):
        """:meth:`_cap_for` at the snapshot's time for jobs requesting ``walls`` seconds (an array, or the cap now)."""
        mode = self.params.lookahead
        if (mode == "off" or snapshot.cap.next_change_after(snapshot.now_s) == math.inf
                or (mode == "window" and snapshot.cap_w == math.inf)):
            return snapshot.cap_w
        return snapshot.lowest_cap(walls)

    def _decide_capped(self, snapshot: Snapshot, state: PolicyState | None) -> Plan:
        p = self.params
        now = snapshot.now_s
        free = snapshot.free_nodes
        nfree = len(free)
        pending = snapshot.pending
        actions: list[Start] = []
        plan = Plan(actions)
        if not pending:
            return plan
        memo = state.memo if isinstance(state, EasyPcState) else None
        if (memo is not None and p.order == "fcfs" and memo.epoch == snapshot.epoch and now < memo.valid_until_s
                and memo.free == nfree and len(pending) >= memo.seen and memo.head.id in pending):
            # Only new jobs arrived since the last pass (same epoch): the jobs examined then still
            # cannot start (time only makes fitting harder), so only the newcomers are candidates.
            head, ledger, res = memo.head, memo.ledger, memo.reservation.fork(snapshot)
            new = list(islice(reversed(pending.values()), len(pending) - memo.seen))
            new.reverse()
            if new:
                ledger = ledger.copy()
                self._backfill(snapshot, plan, new, ledger, nfree, res, head)
            self._explain(plan, head, nfree, res, ledger)
            if actions:
                state.memo = None
            else:
                memo.seen = len(pending)
                memo.reservation = res.fork(None)
            return plan

        ledger = PowerLedger.from_snapshot(snapshot, p.check)
        estimate = snapshot.estimate
        started: list[tuple[float, int, int, Job]] = []  # (expected end, nodes, id, job)
        head = None
        end = nfree
        it = iter(queue_order(snapshot, p.order))
        for job in it:
            k = job.nodes
            est = estimate(job)
            if k <= end and ledger.fits(est, k, self._cap_for(snapshot, now, job)):
                actions.append(Start(job.id, tuple(free[end - k : end])))
                ledger.add(est, k)
                started.append((now + job.walltime_s, k, job.id, job))
                end -= k
                continue
            head = job
            break
        if head is None:
            if isinstance(state, EasyPcState):
                state.memo = None
            self._explain(plan, None, end, None, ledger)
            return plan
        # The head's reservation is computed only when a candidate needs it: under a binding cap
        # most passes find no job that fits now, and the reservation walk is the costly part.
        res = _Reservation(self, snapshot, head, end, ledger.copy(), started)
        memo = None
        if isinstance(state, EasyPcState) and not actions and p.order == "fcfs":
            ends = snapshot.running_by_end()
            valid_until = ends[0][0] if ends else math.inf
            memo = _EpochMemo(snapshot.epoch, valid_until, nfree, len(pending), head, ledger.copy(), res)
        if end:
            if p.order == "fcfs" and len(pending) > easy_module.INDEX_MIN_QUEUE:
                self._backfill_indexed(snapshot, plan, ledger, end, res, head)
            else:
                self._backfill(snapshot, plan, it, ledger, end, res, head)
        if isinstance(state, EasyPcState):
            if memo is not None and not actions:
                memo.reservation = res.fork(None)  # what it computed, without the snapshot
                state.memo = memo
            else:
                state.memo = None
        self._explain(plan, head, end, res, ledger)
        return plan

    def _backfill(self, snapshot: Snapshot, plan: Plan, candidates, ledger: PowerLedger, end: int,
                  res: _Reservation, head: Job) -> int:
        """Start the candidates that fit now without delaying the head; return the nodes left free."""
        if end == 0:
            return end
        now = snapshot.now_s
        free = snapshot.free_nodes
        actions = plan.actions
        estimate = snapshot.estimate
        cap = snapshot.cap
        constant_cap = cap.next_change_after(now) == math.inf
        cap_now = cap.cap_at(now)
        for job in candidates:
            k = job.nodes
            if k > end or job.id == head.id:
                continue
            est = estimate(job)
            if not ledger.fits(est, k, cap_now if constant_cap else self._cap_for(snapshot, now, job)):
                continue
            res.compute()
            if now + job.walltime_s <= res.shadow:
                pass
            elif k <= res.extra and res.at_shadow is not None and res.at_shadow.fits(est, k, res.cap_at_shadow):
                res.extra -= k
                res.at_shadow.add(est, k)
            else:
                continue
            actions.append(Start(job.id, tuple(free[end - k : end])))
            ledger.add(est, k)
            end -= k
            if end == 0:
                break
        return end

    def _explain(self, plan: Plan, head: Job | None, free: int, res: _Reservation | None,
                 ledger: PowerLedger) -> None:
        if head is not None:
            shadow = _ShadowText(None if res is None else res.shadow)
            plan.reasons[head.id] = Reason(_HEAD_REASON, head.nodes, free, self.params.check, shadow)
            plan.default_reason = "does not fit now (nodes or predicted power) without delaying the head job"
        if plan.actions:
            plan.power_estimate_w = ledger.value()

    def _filter(self, snapshot: Snapshot, index, found, end: int, ledger: PowerLedger, res: _Reservation):
        """Positions among ``found`` that may backfill: nodes and predicted power now, then the reservation.

        Vectorised and necessary only: the exact checks (lookahead caps included) are made one job
        at a time by :meth:`_backfill`.
        """
        nodes = index.nodes[found]
        ok = nodes <= end
        ok &= ledger.fits_many(nodes, index.est_mean[found], index.est_max[found], index.est_std[found],
                               self._caps_for(snapshot, index.wall[found]))
        found = found[ok]
        if len(found):
            res.compute()
            horizon = (res.shadow - snapshot.now_s) * (1 + 1e-12) + 1e-9
            ok = index.wall[found] <= horizon
            if res.at_shadow is not None:
                nodes = index.nodes[found]
                ok |= (nodes <= res.extra) & res.at_shadow.fits_many(
                    nodes, index.est_mean[found], index.est_max[found], index.est_std[found], res.cap_at_shadow)
            found = found[ok]
        return found

    def _backfill_indexed(self, snapshot: Snapshot, plan: Plan, ledger: PowerLedger, end: int,
                          res: _Reservation, head: Job) -> None:
        """:meth:`_backfill` over the queue index, re-filtering the remaining candidates after each start."""
        index = snapshot.queue_index
        cap = snapshot.cap
        now = snapshot.now_s
        if index.idle_w == ledger.idle_w and cap.next_change_after(now) == math.inf:
            # the index has the jobs' power increments and no cap change is ahead
            self._backfill_constant(snapshot, plan, ledger, end, res, head, cap.cap_at(now))
        else:
            self._backfill_filtered(snapshot, plan, ledger, end, res, head)

    def _backfill_filtered(self, snapshot: Snapshot, plan: Plan, ledger: PowerLedger, end: int,
                           res: _Reservation, head: Job) -> None:
        """:meth:`_backfill_indexed` in general: :meth:`_filter` the candidates again after each start.

        A start usually only tightens the state (fewer nodes, more predicted power), so the
        candidates left are those that passed the last filter. A job predicted below idle
        power lowers the predicted power when it starts: the jobs after it that the last filter
        dropped for power are filtered again too, as the plain pass examines them after it.
        """
        index = snapshot.queue_index
        pending = snapshot.pending
        everyone = index.candidates(head.id, end, math.inf, end)
        found = self._filter(snapshot, index, everyone, end, ledger, res)
        while len(found):
            p = found[0]
            job = pending.get(int(index.ids[p]))
            found = found[1:]
            if job is None:
                continue
            before = len(plan.actions)
            end = self._backfill(snapshot, plan, (job,), ledger, end, res, head)
            if len(plan.actions) > before:
                if end == 0:
                    break
                if _lowers(ledger, snapshot.estimate(job)):
                    found = everyone[everyone > p]
                if len(found):
                    found = self._filter(snapshot, index, found, end, ledger, res)

    def _backfill_constant(self, snapshot: Snapshot, plan: Plan, ledger: PowerLedger, end: int,
                           res: _Reservation, head: Job, cap_w: float) -> None:
        """:meth:`_backfill_indexed` under a cap that stays ``cap_w``, on the index's precomputed increments.

        The same decisions. :meth:`_backfill_indexed` starts, in queue order, the jobs that pass
        its numpy filter (nodes and power now, then the reservation; re-applied after each start)
        and then :meth:`_backfill`'s exact checks. Here one numpy pass over the queue keeps a
        superset of its candidates, from bounds with slack (:meth:`PowerLedger.max_increment`);
        each candidate is then tested, in queue order, by that filter's own arithmetic on its
        increments (:meth:`PowerLedger.fits_increment`) and by the exact checks. After a start,
        the least node count, increment and requested time in the rest of the queue often show
        that nothing more can start.
        """
        import numpy as np

        index = snapshot.queue_index
        pos = index.pos.get(head.id)
        lo = 0 if pos is None else pos + 1
        hi = index.size
        if lo >= hi:
            return
        if _SCAN:
            self._backfill_scanned(snapshot, plan, ledger, end, res, head, cap_w, lo, hi)
            return
        inc_mean, inc_max, inc_var, nodes, wall = index.inc_mean, index.inc_max, index.inc_var, index.nodes, index.wall
        key = inc_max if ledger.method == "max" else inc_mean
        ok = key[lo:hi] <= ledger.max_increment(cap_w)
        ok &= nodes[lo:hi] <= end  # removed jobs have a huge node count
        if not np.count_nonzero(ok):
            return
        res.compute()
        now = snapshot.now_s
        shadow = res.shadow
        horizon = (shadow - now) * (1 + 1e-12) + 1e-9  # _filter's, a superset of the exact test
        at = res.at_shadow
        cap_s = res.cap_at_shadow
        if at is not None:  # else the shadow is at infinity: nothing can delay the head
            later = wall[lo:hi] <= horizon
            if res.extra > 0:
                room = nodes[lo:hi] <= res.extra
                room &= key[lo:hi] <= at.max_increment(cap_s)
                later |= room
            ok &= later
        found = ok.nonzero()[0]
        found += lo
        least = [None, None, None, hi]  # least increment, node count, requested time; from position
        minimum = np.minimum.reduce

        def hopeless(p: int) -> bool:
            """Whether no job from position ``p`` on can start, from their least increment, nodes and time.

            Each minimum is taken once, when first needed, from the first ``p`` asked (later
            positions only have larger minima); removed jobs count as huge.
            """
            if least[3] == hi:
                if p >= hi:
                    return True
                least[3] = p
            p = least[3]
            if least[0] is None:
                least[0] = float(minimum(key[p:hi]))
            if least[0] > ledger.max_increment(cap_w):
                return True
            if least[1] is None:
                least[1] = int(minimum(nodes[p:hi]))
            if least[1] > end:
                return True
            if at is None:
                return False
            if least[2] is None:
                least[2] = float(minimum(wall[p:hi]))
            if least[2] <= horizon:
                return False
            return least[1] > res.extra or least[0] > at.max_increment(cap_s)

        def narrow(found):
            """_filter's numpy test, at the current state, of the candidates ``found``."""
            ok = nodes[found] <= end
            ok &= ledger.fits_increments(inc_mean[found], inc_max[found], inc_var[found], cap_w)
            found = found[ok]
            ok = wall[found] <= horizon
            if at is not None:
                ok |= (nodes[found] <= res.extra) & at.fits_increments(
                    inc_mean[found], inc_max[found], inc_var[found], cap_s)
            return found[ok]

        pending = snapshot.pending
        estimate = snapshot.estimate
        free = snapshot.free_nodes
        actions = plan.actions
        ids = index.ids
        misses = 0
        peek = _PEEK
        i = 0
        n_found = len(found)
        while i < n_found:
            p = int(found[i])
            i += 1
            im, ix, iv = inc_mean.item(p), inc_max.item(p), inc_var.item(p)
            k = nodes.item(p)
            # _filter (nodes, power now, reservation), then _backfill's exact checks
            started = False
            if k <= end and ledger.fits_increment(im, ix, iv, cap_w) and (
                    wall.item(p) <= horizon or (at is not None and k <= res.extra
                                                and at.fits_increment(im, ix, iv, cap_s))):
                job = pending.get(ids.item(p))
                if job is not None and job.id != head.id:
                    est = estimate(job)
                    if ledger.fits(est, k, cap_w):
                        if now + job.walltime_s <= shadow:
                            started = True
                        elif k <= res.extra and at is not None and at.fits(est, k, cap_s):
                            res.extra -= k
                            at.add(est, k)
                            started = True
            if not started:
                misses += 1
                if misses >= peek and n_found - i > _PYTHON_MAX:
                    left = n_found - i
                    found = narrow(found[i:])
                    n_found = len(found)
                    i = misses = 0
                    if 2 * n_found > left:  # the filter hardly helps (jobs without estimates): use it less
                        peek *= 4
                continue
            actions.append(Start(job.id, tuple(free[end - k : end])))
            ledger.add(est, k)
            end -= k
            if end == 0 or hopeless(p + 1):
                return
            if _lowers(ledger, est):  # below idle: jobs dropped for power may fit now (_backfill_filtered)
                found = narrow(np.arange(p + 1, hi))
                n_found = len(found)
                i = 0
            misses = 0

    def _backfill_scanned(self, snapshot: Snapshot, plan: Plan, ledger: PowerLedger, end: int, res: _Reservation,
                          head: Job, cap_w: float, lo: int, hi: int) -> None:
        """:meth:`_backfill_constant` over queue positions ``lo:hi`` with the compiled scan (:mod:`.scan`).

        The same decisions: the scan stops at each position that passes, with slack, the test of
        :meth:`_backfill_constant`'s filter at the current state, where the same exact checks
        are made; after a start it goes on with the new state. The reservation is computed, as
        there, only if some job fits the nodes and power now.
        """
        index = snapshot.queue_index
        inc_mean, inc_max, inc_var, nodes, wall = index.inc_mean, index.inc_max, index.inc_var, index.nodes, index.wall
        key = inc_max if ledger.method == "max" else inc_mean
        scanner = self._scanner
        if scanner is None or not scanner.over(key, inc_var, nodes, wall):
            scanner = self._scanner = Scanner(key, inc_var, nodes, wall)
        next_candidate = scanner.next_candidate
        inf = math.inf
        k_sigma = ledger.k
        base, var0, limit = ledger.scan_terms(cap_w)
        p = next_candidate(lo, hi, end, base, k_sigma, var0, limit, inf, -1, 0.0, 0.0, -inf)
        if p >= hi:
            return
        res.compute()
        now = snapshot.now_s
        shadow = res.shadow
        horizon = (shadow - now) * (1 + 1e-12) + 1e-9  # _filter's, a superset of the exact test
        at = res.at_shadow  # None: the shadow is at infinity, nothing can delay the head
        cap_s = res.cap_at_shadow
        pending = snapshot.pending
        estimate = snapshot.estimate
        free = snapshot.free_nodes
        actions = plan.actions
        ids = index.ids
        at_base, at_var0, at_limit = (0.0, 0.0, -inf) if at is None else at.scan_terms(cap_s)
        while True:
            p = next_candidate(p, hi, end, base, k_sigma, var0, limit, horizon, -1 if at is None else res.extra,
                               at_base, at_var0, at_limit)
            if p >= hi:
                return
            im, ix, iv = inc_mean.item(p), inc_max.item(p), inc_var.item(p)
            k = nodes.item(p)
            # _filter (nodes, power now, reservation), then _backfill's exact checks
            if not (k <= end and ledger.fits_increment(im, ix, iv, cap_w) and (
                    wall.item(p) <= horizon or (at is not None and k <= res.extra
                                                and at.fits_increment(im, ix, iv, cap_s)))):
                p += 1
                continue
            job = pending.get(ids.item(p))
            p += 1
            if job is None or job.id == head.id:
                continue
            est = estimate(job)
            if not ledger.fits(est, k, cap_w):
                continue
            if now + job.walltime_s > shadow:
                if k <= res.extra and at is not None and at.fits(est, k, cap_s):
                    res.extra -= k
                    at.add(est, k)
                    at_base, at_var0, at_limit = at.scan_terms(cap_s)
                else:
                    continue
            actions.append(Start(job.id, tuple(free[end - k : end])))
            ledger.add(est, k)
            end -= k
            if end == 0:
                return
            base, var0, limit = ledger.scan_terms(cap_w)

    def _shadow_vectorised(self, snapshot: Snapshot, head: Job, free: int, ledger: PowerLedger, started: list):
        """:meth:`_shadow` with cumulative sums over the snapshot's end table (constant cap only)."""
        return _shadow_vectorised_impl(self, snapshot, head, free, ledger, started)

    def _shadow(self, snapshot: Snapshot, head: Job, free: int, ledger: PowerLedger,
                started: list[tuple[float, int, int, Job]]):
        """Earliest time the head has nodes and power; extra nodes then; the ledger then, head included.

        Walks the running jobs' expected ends (and the jobs just started) and the cap
        schedule's changes in time order, releasing each ending job's nodes and predicted
        power, until the head fits: under a constant cap with cumulative sums over the
        end table (:meth:`_shadow_vectorised`), else over the end table's rows one by one.
        """
        now = snapshot.now_s
        cap = snapshot.cap
        if cap.next_change_after(now) == math.inf:
            return self._shadow_vectorised(snapshot, head, free, ledger, started)
        # A cap change ahead: walk the end table's rows (merged with this pass's starts) and the changes in time order.
        est_head = snapshot.estimate(head)
        need = head.nodes
        at = ledger.copy()
        idle = at.idle_w
        dm, dx, dv = at.increment(est_head, need)
        avail = free
        rows = snapshot.end_table.view()
        ends = snapshot.running_by_end()  # the table's rows' (end, nodes, id), in the same order
        if started:
            # (end, nodes, id) order, as the rows are: a row of the table, or (-1 - q) the q-th start's row
            extra = _started_rows(snapshot, started)
            order = sorted([*((e, n, jid, i) for i, (e, n, jid) in enumerate(ends)),
                            *((e, n, jid, -1 - q) for q, (e, n, jid, _) in enumerate(started))], key=lambda x: x[:3])
        else:
            extra, order = [], ends
        changes: list[float] = []
        t = cap.next_change_after(now)
        while t != math.inf and len(changes) < 64:
            changes.append(t)
            t = cap.next_change_after(t)
        method, k = at.method, at.k
        base, mean, mx, var = at.base_w, at.mean_w, at.max_w, at.var_w2
        i = j = 0
        n_ends = len(order)
        t = now
        while True:
            if avail >= need:
                limit = self._cap_for(snapshot, t, head)
                if method == "max":
                    value = base + mx + dx
                elif method == "mean":
                    value = base + mean + dm
                else:
                    value = base + mean + dm + k * math.sqrt(max(0.0, var + dv))
                if limit == math.inf or value <= limit * (1 + 1e-9):
                    at.base_w, at.mean_w, at.max_w, at.var_w2 = base, mean, mx, max(0.0, var)
                    at.add(est_head, need)
                    return t, avail - need, at
            next_end = order[i][0] if i < n_ends else math.inf
            next_change = changes[j] if j < len(changes) else math.inf
            t = next_end if next_end < next_change else next_change
            if t == math.inf:
                return math.inf, 0, None
            if t < now:
                t = now
            while i < n_ends and order[i][0] <= t:
                pos = order[i][3] if started else i
                _, n, rm, rx, rv = rows[pos].tolist() if pos >= 0 else extra[-1 - pos]
                n = int(n)
                base += idle * n
                mean -= rm
                mx -= rx
                var -= rv
                avail += n
                i += 1
            while j < len(changes) and changes[j] <= t:
                j += 1


def _shadow_vectorised_impl(policy, snapshot: Snapshot, head: Job, free: int, ledger: PowerLedger,
                            started: list) -> tuple:
    import numpy as np

    now = snapshot.now_s
    need = head.nodes
    est_head = snapshot.estimate(head)
    dm, dx, dv = ledger.increment(est_head, need)
    cap_w = policy._cap_for(snapshot, now, head)
    limit = cap_w * (1 + 1e-9)
    if not started:
        table = snapshot.end_table
        rows = table.view()
        # the table's running totals (the simulator's) prove a head that never fits at once
        totals = table.totals() if hasattr(table, "totals") and table.idle_w == ledger.idle_w else None
        if totals is not None and _never_fits(rows, totals, ledger, dm, dx, dv, cap_w):
            return math.inf, 0, None
        if _SCAN:
            return _shadow_scanned(rows, None, now, free, need, ledger, dm, dx, dv, cap_w, est_head)
        hit = _shadow_walk(rows, totals is None, now, need, free, ledger, dm, dx, dv, cap_w)
        if hit is not None:
            if hit[2] is not None:
                hit[2].add(est_head, need)
            return hit
    elif _SCAN:
        extra = _started_rows(snapshot, started)
        extra.sort(key=itemgetter(0))  # stable: in start order among equal ends, as the sort below
        return _shadow_scanned(snapshot.end_table.view(), np.array(extra, dtype=float), now, free, need, ledger,
                               dm, dx, dv, cap_w, est_head)

    def fits(base, mean, mx, var):
        if ledger.method == "max":
            value = base + mx + dx
        elif ledger.method == "mean":
            value = base + mean + dm
        else:
            value = base + mean + dm + ledger.k * np.sqrt(np.maximum(var + dv, 0.0))
        return value <= limit

    if free >= need and (cap_w == math.inf or fits(ledger.base_w, ledger.mean_w, ledger.max_w, ledger.var_w2)):
        at = ledger.copy()
        at.add(est_head, need)
        return now, free - need, at
    rows = snapshot.end_table.view()
    if started:
        rows = np.concatenate([rows, np.array(_started_rows(snapshot, started), dtype=float)])
        rows = rows[np.argsort(rows[:, 0], kind="stable")]
    if not len(rows):
        return math.inf, 0, None
    ends = np.maximum(rows[:, 0], now)
    cn = np.cumsum(rows[:, 1])
    avail = free + cn
    base = ledger.base_w + ledger.idle_w * cn
    mean = ledger.mean_w - np.cumsum(rows[:, 2])
    mx = ledger.max_w - np.cumsum(rows[:, 3])
    var = ledger.var_w2 - np.cumsum(rows[:, 4])
    ok = avail >= need
    if cap_w != math.inf:
        ok &= fits(base, mean, mx, var)
    ok[:-1] &= ends[1:] != ends[:-1]  # all jobs ending at the same time leave together
    hits = np.flatnonzero(ok)
    if not len(hits):
        return math.inf, 0, None
    i = int(hits[0])
    at = PowerLedger(ledger.method, float(base[i]), ledger.idle_w, float(mean[i]), float(mx[i]),
                     max(0.0, float(var[i])))
    at.add(est_head, need)
    return float(ends[i]), int(avail[i]) - need, at


def _lowers(ledger: PowerLedger, est) -> bool:
    """Whether starting a job with estimate ``est`` may lower the ledger's predicted power (below-idle estimate)."""
    return (est.max_w if ledger.method == "max" else est.mean_w) < ledger.idle_w


def _started_rows(snapshot: Snapshot, started: list) -> list[tuple[float, int, float, float, float]]:
    """The jobs started in this pass as end-table rows ``(end, nodes, mean·n, max·n, (std·n)²)``, in start order."""
    rows = []
    for end, n, _, job in started:
        e = snapshot.estimate(job)
        rows.append((end, n, e.mean_w * n, e.max_w * n, (e.std_w * n) ** 2))
    return rows


_METHOD_CODES = {"mean": scan.METHOD_MEAN, "max": scan.METHOD_MAX}


def _shadow_scanned(rows, extra, now: float, free: int, need: int, ledger: PowerLedger, dm: float, dx: float,
                    dv: float, cap_w: float, est_head) -> tuple:
    """:func:`_shadow_vectorised_impl`'s search by the compiled walk (:func:`.scan.walk_ends`): the same result.

    The walk adds the running sums in row order, as the cumulative sums do, and makes the same
    test with the same arithmetic at each end, over every row (the end table's, merged with the
    ``extra`` rows of the jobs started in this pass, as the stable sort orders them there).
    """
    hit = scan.walk_ends(rows, extra, now, free, need, _METHOD_CODES.get(ledger.method, scan.METHOD_GAUSSIAN),
                         ledger.k, ledger.base_w, ledger.idle_w, ledger.mean_w, ledger.max_w, ledger.var_w2, dm, dx,
                         dv, cap_w * (1 + 1e-9), cap_w != math.inf)
    if hit is None:  # it fits now
        at = ledger.copy()
        at.add(est_head, need)
        return now, free - need, at
    end, avail, base, mean, mx, var = hit
    if end == math.inf:
        return math.inf, 0, None
    at = PowerLedger(ledger.method, base, ledger.idle_w, mean, mx, max(0.0, var))
    at.add(est_head, need)
    return end, int(avail) - need, at


def _never_fits(rows, totals, ledger: PowerLedger, dm: float, dx: float, dv: float, cap_w: float) -> bool:
    """Whether the head (increments ``dm``, ``dx``, ``dv``) cannot fit whichever running jobs end.

    A lower bound on the predicted power at any future end, rounding slack included: each running
    job (a row of the end table) frees at most its positive part of ``mean·n - idle·n``
    (``max·n`` for the max check), and the variance left is at least the ledger's minus all the
    jobs'. When the head can never fit, :func:`_shadow_vectorised_impl` would find no row, so its
    reservation is at infinity: this proves it from the table's running ``totals`` (or, without
    them, a few numpy sums over the ``rows``), where the search walks every row.
    """
    import numpy as np

    if cap_w == math.inf or not len(rows):
        return False
    maxed = ledger.method == "max"
    if totals is not None:
        most = totals[1] if maxed else totals[0]
        var_sum = totals[2]
    else:
        freed = rows[:, 3 if maxed else 2] - ledger.idle_w * rows[:, 1]
        np.maximum(freed, 0.0, out=freed)
        most = float(np.add.reduce(freed))
        var_sum = float(np.add.reduce(rows[:, 4])) if ledger.k else 0.0
    if maxed:
        low = ledger.base_w + ledger.max_w - most + dx
        scale = abs(ledger.base_w) + abs(ledger.max_w) + abs(most) + abs(dx)
    else:
        low = ledger.base_w + ledger.mean_w - most + dm
        scale = abs(ledger.base_w) + abs(ledger.mean_w) + abs(most) + abs(dm)
        if ledger.k:
            var = ledger.var_w2 - abs(var_sum) * (1 + 1e-6) - 1e-3 + dv
            low += ledger.k * math.sqrt(max(0.0, var))
    limit = cap_w * (1 + 1e-9)
    return low > limit + 1e-6 * (scale + abs(limit))


def _shadow_walk(rows, check_never: bool, now: float, need: int, free: int, ledger: PowerLedger, dm: float,
                 dx: float, dv: float, cap_w: float):
    """:func:`_shadow_vectorised_impl`'s search, now and over the first :data:`_WALK_ROWS` ends, in plain Python.

    The reservation is usually found within a few ends, where numpy's per-call cost would dominate.
    Running sums are added in row order as ``np.cumsum`` adds them, and each test is the same
    arithmetic, so the result is the same to the bit. Returns ``(shadow, extra, ledger at the shadow
    without the head)``, ``(inf, 0, None)`` if the head never fits, or None if the search must go on
    past the walked rows. With ``check_never``, :func:`_never_fits` may settle it after the first
    :data:`_WALK_FIRST` rows.
    """
    method, k, idle = ledger.method, ledger.k, ledger.idle_w
    base, mean, mx, var = base_w, mean_w, max_w, var_w2 = ledger.base_w, ledger.mean_w, ledger.max_w, ledger.var_w2
    limit = cap_w * (1 + 1e-9)
    capped = cap_w != math.inf
    m = len(rows)
    avail = free
    cn = cm = cx = cv = 0.0
    lo = -1  # row -1: now, before any end
    for hi in (min(m, _WALK_FIRST), min(m, _WALK_ROWS)):
        if lo >= 0 and check_never and _never_fits(rows, None, ledger, dm, dx, dv, cap_w):
            return math.inf, 0, None
        part = rows[max(lo, 0) : hi + 1].tolist()
        offset = max(lo, 0)
        for i in range(lo, hi):
            if i >= 0:
                t, n, rm, rx, rv = part[i - offset]
                cn += n
                cm += rm
                cx += rx
                cv += rv
                avail = free + cn
                if avail < need:
                    continue
                base = base_w + idle * cn
                mean = mean_w - cm
                mx = max_w - cx
                var = var_w2 - cv
            elif avail < need:
                continue
            if capped:
                if method == "max":
                    value = base + mx + dx
                elif method == "mean":
                    value = base + mean + dm
                else:
                    value = base + mean + dm + k * math.sqrt(max(var + dv, 0.0))
                if not value <= limit:
                    continue
            if i < 0:
                return now, free - need, ledger.copy()
            end = t if t > now else now
            if i + 1 < m:
                nxt = part[i + 1 - offset][0]
                if (nxt if nxt > now else now) == end:  # all jobs ending at the same time leave together
                    continue
            return end, int(avail) - need, PowerLedger(method, base, idle, mean, mx, max(0.0, var))
        lo = hi
        if hi == m:
            return math.inf, 0, None
    return None


class _Reservation:
    """The head job's reservation, computed on first use: shadow time, extra nodes, ledger at the shadow time."""

    __slots__ = ("at_shadow", "cap_at_shadow", "extra", "free", "head", "ledger", "policy", "shadow", "snapshot",
                 "started")

    def __init__(self, policy: EasyPcPolicy, snapshot: Snapshot, head: Job, free: int, ledger: PowerLedger,
                 started: list):
        self.policy, self.snapshot, self.head, self.free, self.ledger, self.started = (
            policy, snapshot, head, free, ledger, started)
        self.shadow = None

    def compute(self) -> None:
        if self.shadow is None:
            p, snap = self.policy, self.snapshot
            self.shadow, self.extra, self.at_shadow = p._shadow(snap, self.head, self.free, self.ledger, self.started)
            self.cap_at_shadow = p._cap_for(snap, self.shadow, self.head) if self.shadow != math.inf else math.inf

    def fork(self, snapshot: Snapshot | None) -> _Reservation:
        """A copy for a later call of the same epoch (the backfill of that call may consume it)."""
        other = _Reservation(self.policy, snapshot, self.head, self.free, self.ledger, self.started)
        if self.shadow is not None:
            other.shadow, other.extra, other.cap_at_shadow = self.shadow, self.extra, self.cap_at_shadow
            other.at_shadow = self.at_shadow.copy() if self.at_shadow is not None else None
        return other


class _ShadowText:
    """The reservation part of the head job's reason, formatted only if the reason is read.

    >>> f"{_ShadowText(None)}; {_ShadowText(1234.4)}"
    'not needed this pass; t=1234s'
    """

    __slots__ = ("shadow",)

    def __init__(self, shadow: float | None):
        self.shadow = shadow

    def __format__(self, spec: str) -> str:
        return "not needed this pass" if self.shadow is None else f"t={self.shadow:.0f}s"

    def __str__(self) -> str:
        return self.__format__("")

    __repr__ = __str__


class EasySafPolicy(EasyPcPolicy):
    """EASY+PC with Smallest Area First queue order. Registered as ``easy-saf``."""

    name = "easy-saf"
    Params = EasySafParams


_PYTHON_MAX = 24
"""Fewer candidates than this left are checked one by one, never filtered with numpy again."""

_PEEK = 4
"""Candidates missed in a row before the rest are filtered with numpy again (more if that did not help)."""

_WALK_FIRST = 8
_WALK_ROWS = 64
"""The reservation walks this many running jobs' ends in Python (:data:`_WALK_FIRST` first, then,
unless the head cannot fit at all, the rest) before it turns to cumulative sums."""

_HEAD_REASON = ("head of queue: needs {} nodes ({} free) and predicted power under the cap ({} check); "
                "reservation: {}")
