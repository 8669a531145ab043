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

Compiled (``scan.pxd`` types it), a scan costs a few nanoseconds per queued
job and no temporary arrays, where numpy's vectorised filter costs a
microsecond per operation and a pass over the whole queue each. As pure Python
the loop would be slow: :data:`COMPILED` says which one is loaded, and the
policy keeps its numpy filter when the scan is not compiled.
"""

from __future__ import annotations


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


COMPILED = not __file__.endswith(".py")
"""Whether this module is the compiled extension (loaded from a shared library, not from its source)."""
