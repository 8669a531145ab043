# cython: boundscheck=False, wraparound=False
"""The compiled scan behind power-aware backfilling: the next queue position that may start.

:meth:`~wattsched.policies.easy_pc.EasyPcPolicy._backfill_constant` looks, in
queue order, for jobs that fit the free nodes and the predicted power now
without delaying the head job's reservation. :meth:`Scanner.next_candidate`
makes that test on the queue index's arrays (the jobs' node counts, requested
times and power increments) one position after another, with a slack far
above floating-point rounding (see
:meth:`~wattsched.policies.power.PowerLedger.scan_terms`), and stops at the
first position that passes; the caller makes the exact checks there and,
after a start, scans on from the next position with the new terms. The slack
makes the scan's test a necessary condition of the exact one, so no job that
would start is passed over.

:meth:`Scanner.next_fit` is the same scan without power, for plain EASY's backfill
(:class:`~wattsched.policies.easy.EasyPolicy`).

Compiled (``scan.pxd`` types it), a scan costs a few nanoseconds per queued
job and no temporary arrays, where numpy's vectorised filter costs a
microsecond per operation and a pass over the whole queue each. As pure Python
the loop would be slow: :data:`COMPILED` says which one is loaded, and the
policy keeps its numpy filter when the scan is not compiled.
"""

from __future__ import annotations

import math

# Compiled, ``_c_sqrt`` is C's sqrt (declared in scan.pxd), correctly rounded as math.sqrt is: the same bits.
globals().setdefault("_c_sqrt", math.sqrt)

METHOD_MEAN, METHOD_MAX, METHOD_GAUSSIAN = 0, 1, 2
"""How :func:`walk_ends` adds up predicted power: the ``mean`` check, ``max``, or ``gaussian_*``."""


class Scanner:
    """Scans over one set of queue-index arrays (typed views of them taken once, when compiled).

    ``key`` holds the jobs' power increments for the check (the mean one, or the max one for
    the ``max`` check), ``var`` their variance increments, ``nodes`` their node counts and
    ``wall`` their requested times: float64 arrays and an int64 one, contiguous, in queue order.

    >>> import numpy as np
    >>> scan = Scanner(np.array([50.0, 10.0, 10.0, 10.0]), np.zeros(4), np.array([1, 8, 2, 2]),
    ...                np.array([9.0, 1.0, 900.0, 9.0]))
    >>> scan.next_candidate(0, 4, 4, 0.0, 0.0, 0.0, 40.0, 100.0, 0, 0.0, 0.0, -1.0)  # power, nodes, time
    3
    >>> scan.next_candidate(0, 4, 4, 0.0, 0.0, 0.0, 40.0, 100.0, 2, 0.0, 0.0, 20.0)  # beside the head
    2
    >>> scan.next_candidate(0, 4, 4, 0.0, 3.0, 100.0, 40.0, 100.0, 2, 0.0, 100.0, 20.0)  # 10 + 3 x 10 > 20
    3
    """

    def __init__(self, key, var, nodes, wall):
        self.arrays = (key, var, nodes, wall)
        self.key, self.var, self.nodes, self.wall = key, var, nodes, wall
        self.size = min(len(key), len(var), len(nodes), len(wall))

    def over(self, key, var, nodes, wall) -> bool:
        """Whether this scanner reads these arrays (the same objects)."""
        a = self.arrays
        return a[0] is key and a[1] is var and a[2] is nodes and a[3] is wall

    def next_candidate(self, lo: int, hi: int, free: int, base: float, k: float, var0: float, limit: float,
                       horizon: float, extra: int, at_base: float, at_var0: float, at_limit: float) -> int:
        """The first position ``p`` in ``lo:hi`` whose job may backfill, or ``hi`` if none.

        It may if it needs at most ``free`` nodes, its predicted power now, ``base + key[p] +
        k·sqrt(var0 + var[p])``, is at most ``limit``, and, for the head's reservation, either
        ``wall[p] <= horizon`` (it ends before the shadow time) or it needs at most ``extra``
        nodes and its power at the shadow time (``at_base``, ``at_var0``, ``at_limit``) fits.
        The roots are compared squared: ``k²(var0 + var[p]) <= (limit - base - key[p])²``.
        """
        if lo < 0 or hi > self.size:
            raise IndexError(f"scan of {lo}:{hi} outside the arrays")  # compiled, indices are not checked
        key, var, nodes, wall = self.key, self.var, self.nodes, self.wall
        k2 = k * k
        p = lo
        while p < hi:
            n = nodes[p]
            x = key[p]
            room = limit - base - x
            if n <= free and room >= 0.0 and (k2 == 0.0 or k2 * (var0 + var[p]) <= room * room):
                if wall[p] <= horizon:
                    return p
                if n <= extra:
                    room = at_limit - at_base - x
                    if room >= 0.0 and (k2 == 0.0 or k2 * (at_var0 + var[p]) <= room * room):
                        return p
            p += 1
        return hi


    def next_fit(self, lo: int, hi: int, free: int, horizon: float, extra: int) -> int:
        """The first position ``p`` in ``lo:hi`` whose job may backfill by nodes and time alone (EASY's test, no
        power), or ``hi`` if none: it needs at most ``free`` nodes and either ``wall[p] <= horizon`` or at most
        ``extra`` nodes.

        >>> import numpy as np
        >>> scan = Scanner(np.zeros(4), np.zeros(4), np.array([8, 2, 2, 1]), np.array([1.0, 900.0, 9.0, 900.0]))
        >>> scan.next_fit(0, 4, 4, 100.0, 0), scan.next_fit(0, 4, 4, 100.0, 2), scan.next_fit(3, 4, 4, 100.0, 0)
        (2, 1, 4)
        """
        if lo < 0 or hi > self.size:
            raise IndexError(f"scan of {lo}:{hi} outside the arrays")  # compiled, indices are not checked
        nodes, wall = self.nodes, self.wall
        p = lo
        while p < hi:
            n = nodes[p]
            if n <= free and (n <= extra or wall[p] <= horizon):
                return p
            p += 1
        return hi


def walk_ends(rows, extra, now: float, free: int, need: int, method: int, k: float, base_w: float, idle_w: float,
              mean_w: float, max_w: float, var_w2: float, dm: float, dx: float, dv: float, limit: float,
              capped: bool):
    """The head job's reservation: the first time it has ``need`` nodes and its power fits, walking the ends.

    ``rows`` are the running jobs in end order as ``[end, nodes, mean·n, max·n, (std·n)²]`` (the
    end table's); ``extra`` (or None) the jobs started in this pass, in the same form, sorted by
    end, taken after the table's rows that end at the same time. Starting now with ``free``
    nodes and the ledger's ``base_w``, ``mean_w``, ``max_w``, ``var_w2``, each ending job gives
    back its nodes at ``idle_w`` and takes its predicted power away; the head adds ``dm``,
    ``dx``, ``dv`` and must stay at most ``limit`` (when ``capped``) by the check ``method``
    (:data:`METHOD_MEAN` ...; ``k`` for the gaussian ones). Jobs that end at the same time
    leave together. The sums run in row order, as ``np.cumsum`` adds them.

    Returns None if the head fits now, ``(end, nodes free then, base, mean, max, var)`` at the
    first end where it does (the ledger then, head not included), or ``(inf, 0, …)`` if it never does.

    >>> import numpy as np
    >>> rows = np.array([[10.0, 2.0, 400.0, 500.0, 0.0], [20.0, 2.0, 400.0, 500.0, 0.0]])
    >>> walk_ends(rows, None, 0.0, 1, 2, METHOD_MEAN, 0.0, 100.0, 50.0, 800.0, 1000.0, 0.0, 300.0, 300.0, 0.0,
    ...           1000.0, True)  # 1 node free; at t=10: 3 free, 100 + 2 x 50 + 400 + 300 <= 1000
    (10.0, 3.0, 200.0, 400.0, 500.0, 0.0)
    """
    m = rows.shape[0]
    e = 0 if extra is None else extra.shape[0]
    if free >= need and (not capped or _power(method, k, base_w, mean_w, max_w, var_w2, dm, dx, dv) <= limit):
        return None
    cn = cm = cx = cv = 0.0
    i = j = 0
    end = t_next = 0.0
    while i + j < m + e:
        if j >= e or (i < m and rows[i, 0] <= extra[j, 0]):
            t = rows[i, 0]
            cn += rows[i, 1]
            cm += rows[i, 2]
            cx += rows[i, 3]
            cv += rows[i, 4]
            i += 1
        else:
            t = extra[j, 0]
            cn += extra[j, 1]
            cm += extra[j, 2]
            cx += extra[j, 3]
            cv += extra[j, 4]
            j += 1
        avail = free + cn
        if avail < need:
            continue
        base = base_w + idle_w * cn
        mean = mean_w - cm
        mx = max_w - cx
        var = var_w2 - cv
        if capped and not _power(method, k, base, mean, mx, var, dm, dx, dv) <= limit:
            continue
        end = t if t > now else now
        if i + j < m + e:  # all jobs ending at the same time leave together
            if j >= e or (i < m and rows[i, 0] <= extra[j, 0]):
                t_next = rows[i, 0]
            else:
                t_next = extra[j, 0]
            if (t_next if t_next > now else now) == end:
                continue
        return end, avail, base, mean, mx, var
    return math.inf, 0.0, 0.0, 0.0, 0.0, 0.0


def _power(method: int, k: float, base: float, mean: float, mx: float, var: float, dm: float, dx: float,
           dv: float) -> float:
    """The predicted power by the check ``method`` with the head's increments added (PowerLedger's arithmetic)."""
    if method == 1:  # METHOD_MAX (literals: the compiled function compares C integers)
        return base + mx + dx
    if method == 0:  # METHOD_MEAN
        return base + mean + dm
    s = var + dv
    if s < 0.0:
        s = 0.0
    return base + mean + dm + k * _c_sqrt(s)  # noqa: F821 (set in globals above)


COMPILED = not __file__.endswith(".py")
"""Whether this module is the compiled extension (loaded from a shared library, not from its source)."""
