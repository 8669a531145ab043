"""Decision-identical, faster stand-ins for ``easy-pc``, ``easy-saf`` and ``knapsack`` before a cap window.

Why: with ``lookahead`` (the default), EASY+PC checks a job against the lowest
cap in force during its requested time. Before a cap window the cap in force
*now* is infinite, and ``EasyPcPolicy._filter`` (the vectorised pre-filter of
backfill candidates) tests candidates against ``snapshot.cap_w``, the cap now:
it keeps every candidate, so ``_backfill_indexed`` makes one exact Python-level
check per queued job per call (and ``found = found[1:]`` makes that loop
quadratic). ``easy-saf`` scans the whole queue the same way. On RICC workloads
with a 24-hour warm-up before the window and thousands of queued jobs, a run
took 30-90 s instead of about 1 s. This is a performance problem in
``src/wattsched/policies/easy_pc.py``, reported, not fixed here (the experiment
must not edit ``src/``).

What: the subclasses below only add a vectorised *necessary* condition in
front of the library's own checks: a candidate is dropped only if the exact
check (nodes, and predicted power against the lookahead cap, with a looser
tolerance) would reject it anyway. Every decision is still taken by the
library's code, so runs are identical to the registered policies';
``verify_identical`` checks that on real workloads (and ``run.py
--check-policies`` runs it).
"""

from __future__ import annotations

import math

import numpy as np

from wattsched.model.constraints import CapSchedule
from wattsched.policies.easy_pc import EasyPcPolicy, EasySafParams
from wattsched.policies.knapsack import KnapsackPolicy
from wattsched.policies.power import PowerLedger

_LOOSE = 1e-6
"""Relative tolerance of the pre-filter, looser than the library's 1e-9: it must never drop a job that fits."""


def lookahead_caps(policy: EasyPcPolicy, cap: CapSchedule, now: float, walls: np.ndarray) -> np.ndarray:
    """``policy._cap_for(snapshot, now, job)`` for jobs with requested times ``walls``, as an array."""
    out = np.full(len(walls), cap.cap_at(now))
    if len(cap.steps) <= 1 or not policy.params.lookahead or cap.next_change_after(now) == math.inf:
        return out
    ends = now + np.maximum(walls, 1e-9)
    for step in cap.steps:
        if step.start_s > now:
            out = np.where(ends > step.start_s, np.minimum(out, step.cap_w), out)
    return out


def may_fit(ledger: PowerLedger, nodes, mean_w, max_w, std_w, caps) -> np.ndarray:
    """Vectorised ``ledger.fits`` with one cap per job, slightly loose; NaN estimates and no cap pass."""
    with np.errstate(invalid="ignore"):
        if ledger.method == "max":
            value = ledger.base_w + ledger.max_w + (max_w - ledger.idle_w) * nodes
        elif ledger.method == "mean":
            value = ledger.base_w + ledger.mean_w + (mean_w - ledger.idle_w) * nodes
        else:
            value = (ledger.base_w + ledger.mean_w + (mean_w - ledger.idle_w) * nodes
                     + ledger.k * np.sqrt(ledger.var_w2 + (std_w * nodes) ** 2))
        ok = value <= caps * (1 + _LOOSE)
    return ok | np.isinf(caps) | np.isnan(mean_w)


class FastEasyPc(EasyPcPolicy):
    """``easy-pc`` with a lookahead-aware pre-filter of backfill candidates (same decisions)."""

    name = "easy-pc"

    def _prefilter_needed(self, snapshot) -> bool:
        cap = snapshot.cap
        return self.params.lookahead and len(cap.steps) > 1 and cap.next_change_after(snapshot.now_s) != math.inf

    def _filter(self, snapshot, index, found, end, ledger, res):
        if len(found) and self._prefilter_needed(snapshot):
            caps = lookahead_caps(self, snapshot.cap, snapshot.now_s, index.wall[found])
            ok = index.nodes[found] <= end
            ok &= may_fit(ledger, index.nodes[found], index.est_mean[found], index.est_max[found],
                          index.est_std[found], caps)
            found = found[ok]
        return super()._filter(snapshot, index, found, end, ledger, res)

    def _backfill(self, snapshot, plan, candidates, ledger, end, res, head):
        """The library's backfill, one candidate at a time, over the candidates that may still start.

        After each start the remaining candidates are filtered again (vectorised) against the
        updated ledger, free nodes and reservation, as ``_backfill_indexed`` does for FCFS.
        """
        if isinstance(candidates, tuple) and len(candidates) <= 1:
            return super()._backfill(snapshot, plan, candidates, ledger, end, res, head)
        cands = list(candidates)
        if len(cands) <= 32 or end == 0:
            return super()._backfill(snapshot, plan, cands, ledger, end, res, head)
        ests = [snapshot.estimate(j) for j in cands]
        mean = np.array([e.mean_w for e in ests])
        mx = np.array([e.max_w for e in ests])
        # Dropping a job that does not fit now is exact only if fitting never gets easier as jobs
        # start: true when every start adds power (predictions at or above idle power).
        if not (np.all(mean >= ledger.idle_w) and np.all(mx >= ledger.idle_w)):
            return super()._backfill(snapshot, plan, cands, ledger, end, res, head)
        std = np.array([e.std_w for e in ests])
        nodes = np.array([j.nodes for j in cands])
        walls = np.array([j.walltime_s for j in cands])
        caps = lookahead_caps(self, snapshot.cap, snapshot.now_s, walls)
        now = snapshot.now_s

        def may_start(free: int) -> np.ndarray:
            ok = (nodes <= free) & may_fit(ledger, nodes, mean, mx, std, caps)
            if ok.any():
                # The head's reservation as _backfill checks it; computing it here rather than at the
                # first fitting candidate gives the same values (nothing changes it in between).
                res.compute()
                horizon = now + walls <= res.shadow * (1 + 1e-12) + 1e-9
                if res.at_shadow is not None:
                    horizon |= (nodes <= res.extra) & may_fit(res.at_shadow, nodes, mean, mx, std,
                                                              np.full(len(cands), res.cap_at_shadow))
                ok &= horizon
            return ok

        todo = np.flatnonzero(may_start(end))
        p = 0
        while p < len(todo):
            i = todo[p]
            p += 1
            before = len(plan.actions)
            end = super()._backfill(snapshot, plan, (cands[i],), ledger, end, res, head)
            if end == 0:
                break
            if len(plan.actions) > before and p < len(todo):
                rest = todo[p:]
                todo, p = rest[may_start(end)[rest]], 0
        return end


class FastEasySaf(FastEasyPc):
    """``easy-saf`` (EASY+PC, Smallest Area First) with the same pre-filter."""

    name = "easy-saf"
    Params = EasySafParams


class FastKnapsack(KnapsackPolicy):
    """``knapsack`` whose EASY FCFS outside the window is :class:`FastEasyPc`."""

    name = "knapsack"

    def __init__(self, params=None, **kwargs):
        super().__init__(params, **kwargs)
        p = self.params
        self._outside = FastEasyPc(check=p.check, order="fcfs", lookahead=p.lookahead)


FAST = {"easy-pc": FastEasyPc, "easy-saf": FastEasySaf, "knapsack": FastKnapsack}


def make_fast_policy(name: str, params: dict | None = None):
    """Like :func:`wattsched.policies.make_policy`, with the fast stand-ins where there is one."""
    from wattsched.policies import make_policy

    cls = FAST.get(name)
    return cls(dict(params or {})) if cls is not None else make_policy(name, params)
