"""Power verification shared by every power-aware policy (Carastan-Santos et al. 2024, §5.2).

A :class:`PowerLedger` holds the *predicted* platform power: the measured
power of everything that is not a running job (idle, off and switching nodes)
plus the predictions of the running jobs. Testing a candidate job is two
separate steps, as in the paper: :meth:`~PowerLedger.fits` (verify) and
:meth:`~PowerLedger.add` (update).

Checks
------
``mean``
    sum of predicted mean powers <= cap.
``max``
    sum of predicted maximum powers <= cap.
``gaussian_68``, ``gaussian_95``, ``gaussian_99``
    ``mu + k sigma <= cap`` with ``k`` = 1, 2, 3: jobs are independent, so
    means add and standard deviations add in quadrature (a job's nodes are
    taken as fully correlated: its standard deviation is nodes × per-node std).

A job started on ``n`` idle nodes replaces their idle power by its own, so
its increment is ``n × (predicted node power − idle_w)``.
"""

from __future__ import annotations

import math

from wattsched.model.job import PowerEstimate
from wattsched.model.snapshot import Snapshot

CHECKS = ("mean", "max", "gaussian_68", "gaussian_95", "gaussian_99")
_K = {"gaussian_68": 1.0, "gaussian_95": 2.0, "gaussian_99": 3.0}
_TOL = 1e-9


class PowerLedger:
    """Predicted platform power under one check method.

    >>> from wattsched.model.job import PowerEstimate
    >>> ledger = PowerLedger("gaussian_95", base_w=1000.0, idle_w=100.0)
    >>> est = PowerEstimate(300.0, 400.0, 30.0)
    >>> ledger.increment(est, 2)   # mean: 2 x (300 - 100); the std of the job is 2 x 30
    (400.0, 600.0, 3600.0)
    >>> ledger.value(*ledger.increment(est, 2))  # 1000 + 400 + 2 sigma, sigma = 60
    1520.0
    >>> ledger.fits(est, 2, cap_w=1519.0), ledger.fits(est, 2, cap_w=1520.0)
    (False, True)
    """

    __slots__ = ("base_w", "idle_w", "k", "max_w", "mean_w", "method", "var_w2")

    def __init__(self, method: str, base_w: float, idle_w: float, mean_w: float = 0.0, max_w: float = 0.0,
                 var_w2: float = 0.0):
        if method not in CHECKS:
            raise ValueError(f"unknown power check {method!r}; choose one of {', '.join(CHECKS)}")
        self.method = method
        self.k = _K.get(method, 0.0)
        self.base_w = base_w
        self.idle_w = idle_w
        self.mean_w = mean_w
        self.max_w = max_w
        self.var_w2 = var_w2

    @classmethod
    def from_snapshot(cls, snapshot: Snapshot, method: str) -> PowerLedger:
        """The ledger of the snapshot's running jobs."""
        mean, mx, var = snapshot.running_estimate_totals()
        idle = snapshot.platform.min_idle_w  # the largest increment a start can add on any node: conservative
        # sums kept incrementally can drift a hair below zero: a variance is never negative
        return cls(method, snapshot.other_power_w(), idle, mean, mx, max(0.0, var))

    def copy(self) -> PowerLedger:
        return PowerLedger(self.method, self.base_w, self.idle_w, self.mean_w, self.max_w, self.var_w2)

    def increment(self, est: PowerEstimate, nodes: int) -> tuple[float, float, float]:
        """What starting a job adds: (mean, max, variance)."""
        return (est.mean_w - self.idle_w) * nodes, (est.max_w - self.idle_w) * nodes, (est.std_w * nodes) ** 2

    def value(self, mean_w: float = 0.0, max_w: float = 0.0, var_w2: float = 0.0) -> float:
        """Predicted platform power (by this method) with an extra (mean, max, var) added."""
        if self.method == "max":
            return self.base_w + self.max_w + max_w
        if self.method == "mean":
            return self.base_w + self.mean_w + mean_w
        return self.base_w + self.mean_w + mean_w + self.k * math.sqrt(max(0.0, self.var_w2 + var_w2))

    def headroom(self, cap_w: float) -> float:
        """Cap minus the predicted power now: no job whose mean (or max) increment exceeds it can fit."""
        return cap_w - self.value()

    def fits_many(self, nodes, mean_w, max_w, std_w, cap_w):
        """Vectorised :meth:`fits` over numpy arrays of jobs (NaN estimates count as fitting).

        ``cap_w`` is one cap or an array of per-job caps (``inf`` where uncapped).
        """
        import numpy as np

        if np.isscalar(cap_w) and cap_w == math.inf:
            return np.ones(len(nodes), dtype=bool)
        limit = cap_w * (1 + _TOL)
        with np.errstate(invalid="ignore"):
            if self.method == "max":
                ok = self.base_w + self.max_w + (max_w - self.idle_w) * nodes <= limit
            elif self.method == "mean":
                ok = self.base_w + self.mean_w + (mean_w - self.idle_w) * nodes <= limit
            else:
                sigma = np.sqrt(np.maximum(self.var_w2 + (std_w * nodes) ** 2, 0.0))
                ok = self.base_w + self.mean_w + (mean_w - self.idle_w) * nodes + self.k * sigma <= limit
        return ok | np.isnan(mean_w)

    def fits_increments(self, inc_mean, inc_max, inc_var, cap_w: float):
        """:meth:`fits_many` on jobs given by their increments (:meth:`increment`, as numpy arrays).

        The same arithmetic, so the same answers, as :meth:`fits_many` (a job without an estimate
        has increments ``-inf, -inf, 0`` and fits, as a NaN estimate does there); the increments
        are computed once per job (see :class:`~wattsched.model.queue_index.QueueIndex`).

        >>> import numpy as np
        >>> ledger = PowerLedger("gaussian_95", base_w=1000.0, idle_w=100.0)
        >>> m, x, v = ledger.increment(PowerEstimate(300.0, 400.0, 30.0), 2)
        >>> ledger.fits_increments(np.array([m, -np.inf]), np.array([x, -np.inf]), np.array([v, 0.0]), 1519.0)
        array([False,  True])
        """
        import numpy as np

        if cap_w == math.inf:
            return np.ones(len(inc_mean), dtype=bool)
        limit = cap_w * (1 + _TOL)
        if self.method == "max":
            return inc_max + (self.base_w + self.max_w) <= limit
        if self.method == "mean":
            return inc_mean + (self.base_w + self.mean_w) <= limit
        # var_w2 >= 0 and increments' variances >= 0: fits_many's max(0, .) changes nothing
        sigma = inc_var + self.var_w2
        np.sqrt(sigma, out=sigma)
        sigma *= self.k
        value = inc_mean + (self.base_w + self.mean_w)
        value += sigma
        return value <= limit

    def fits_increment(self, inc_mean: float, inc_max: float, inc_var: float, cap_w: float) -> bool:
        """:meth:`fits_increments` for one job, with the same arithmetic (so the same answer)."""
        if cap_w == math.inf:
            return True
        if self.method == "max":
            return inc_max + (self.base_w + self.max_w) <= cap_w * (1 + _TOL)
        if self.method == "mean":
            return inc_mean + (self.base_w + self.mean_w) <= cap_w * (1 + _TOL)
        return inc_mean + (self.base_w + self.mean_w) + self.k * math.sqrt(inc_var + self.var_w2) <= cap_w * (1 + _TOL)

    def max_increment(self, cap_w: float) -> float:
        """A bound on the increment of any job that fits under ``cap_w``: its mean one (max for ``max``).

        Necessary for :meth:`fits` (and :meth:`fits_many`): a job whose increment is above it
        does not fit. It leaves a slack far above floating-point rounding.

        >>> ledger = PowerLedger("gaussian_99", base_w=1000.0, idle_w=100.0, var_w2=100.0)
        >>> 469.0 <= ledger.max_increment(1500.0) < 471.0  # 1500 - 1000 - 3 x 10, and a hair
        True
        """
        if cap_w == math.inf:
            return math.inf
        limit = cap_w * (1 + _TOL)
        if self.method == "max":
            used = self.base_w + self.max_w
            scale = abs(self.base_w) + abs(self.max_w)
        else:
            used = self.base_w + self.mean_w
            scale = abs(self.base_w) + abs(self.mean_w)
            if self.k:
                sigma = self.k * math.sqrt(max(0.0, self.var_w2))  # a job's variance only adds to it
                used += sigma
                scale += sigma
        return limit - used + 1e-6 * (scale + abs(limit) + 1.0)

    def scan_terms(self, cap_w: float) -> tuple[float, float, float]:
        """``(base, var, limit)`` for :meth:`~wattsched.policies.scan.Scanner.next_candidate` under ``cap_w``.

        A job with increments ``(inc_mean, inc_max, inc_var)`` passes the scan if ``base + key
        + k·sqrt(var + inc_var) <= limit`` (``key``: ``inc_max`` for ``max``, else ``inc_mean``):
        :meth:`fits_increment`'s arithmetic with a slack added to the limit (a millionth of
        a millionth of the powers involved: far above the rounding of a few additions and a
        root, far below the margins that decide), so a job that fits always passes.

        >>> ledger = PowerLedger("gaussian_99", base_w=1000.0, idle_w=100.0, mean_w=200.0, var_w2=100.0)
        >>> base, var, limit = ledger.scan_terms(1500.0)
        >>> base, var, 1500.0 < limit < 1500.0001
        (1200.0, 100.0, True)
        """
        if cap_w == math.inf:
            return 0.0, 0.0, math.inf
        limit = cap_w * (1 + _TOL)
        used = self.max_w if self.method == "max" else self.mean_w
        scale = abs(self.base_w) + abs(used) + abs(limit) + 1.0
        if self.k:
            scale += self.k * math.sqrt(max(0.0, self.var_w2))
        return self.base_w + used, self.var_w2, limit + 1e-12 * scale

    def fits(self, est: PowerEstimate, nodes: int, cap_w: float) -> bool:
        """Verify: would the platform stay under ``cap_w`` with this job started?"""
        if cap_w == math.inf:
            return True
        dm, dx, dv = self.increment(est, nodes)
        return self.value(dm, dx, dv) <= cap_w * (1 + _TOL)

    def add(self, est: PowerEstimate, nodes: int) -> None:
        """Update: the job is started."""
        self.base_w -= self.idle_w * nodes
        self.mean_w += est.mean_w * nodes
        self.max_w += est.max_w * nodes
        self.var_w2 += (est.std_w * nodes) ** 2

    def remove(self, est: PowerEstimate, nodes: int) -> None:
        """A running job ends: its nodes go back to idle."""
        self.base_w += self.idle_w * nodes
        self.mean_w -= est.mean_w * nodes
        self.max_w -= est.max_w * nodes
        self.var_w2 = max(0.0, self.var_w2 - (est.std_w * nodes) ** 2)
