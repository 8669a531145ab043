# cython: boundscheck=False, wraparound=False
"""The end table: running jobs in expected-end order with their predicted power, as numpy rows.

Kept by the simulator for power-aware policies (``wants_end_table``) and
handed to them as :attr:`~wattsched.model.snapshot.Snapshot.end_table`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # numpy.typing costs 40 ms at import
    import numpy.typing as npt

_COMPILED = not __file__.endswith(".py")
"""Compiled (``end_table.pxd``), rows are moved by typed loops: numpy's slice assignment costs a microsecond
or two a call, and the engine moves rows at every start and end of a job. As pure Python, numpy moves them."""


def _move(flat, dst: int, src: int, count: int) -> None:
    """``flat[dst : dst + count] = flat[src : src + count]`` on a 1-D float64 array, the ranges may overlap."""
    if dst < 0 or src < 0 or count < 0 or max(dst, src) + count > len(flat):
        raise IndexError(f"move of {count} values from {src} to {dst} outside the table")  # compiled: unchecked
    if dst < src:
        q = 0
        while q < count:
            flat[dst + q] = flat[src + q]
            q += 1
    else:
        q = count - 1
        while q >= 0:
            flat[dst + q] = flat[src + q]
            q -= 1


def _put(flat, at: int, row: tuple) -> None:
    """``flat[at : at + 5] = row``."""
    if at < 0 or at + 5 > len(flat):
        raise IndexError(f"row at {at} outside the table")
    end, k, mean, mx, var = row
    flat[at] = end
    flat[at + 1] = k
    flat[at + 2] = mean
    flat[at + 3] = mx
    flat[at + 4] = var


class EndTable:
    """Running jobs in expected-end order as numpy rows ``[end, nodes, mean·n, max·n, (std·n)²]``.

    Kept in step with the engine's sorted end list (same positions) for
    policies that set ``wants_end_table``: a power-aware reservation then
    walks the ends with cumulative sums instead of a Python loop.

    With ``idle_w``, it also keeps running totals over the rows (:meth:`totals`):
    the most predicted power the running jobs can free by ending (the positive
    parts of ``mean·n - idle·n`` and ``max·n - idle·n``) and their variance. They
    are kept by additions and subtractions, so they are exact up to rounding
    drift: for bounds with slack, not for exact sums.
    """

    def __init__(self, idle_w: float | None = None):
        self.rows = np.zeros((256, 5))
        self._flat = self.rows.reshape(-1)  # the same memory, one row after another
        self.lo = 0  # the table is rows[lo : lo + n]: inserts and deletes shift the shorter side
        self.n = 0
        self.idle_w = idle_w
        self._freed_mean = self._freed_max = self._var = 0.0

    def insert(self, i: int, row: tuple[float, float, float, float, float]) -> None:
        n, lo, rows = self.n, self.lo, self.rows
        if lo and 2 * i < n:
            self._shift(lo - 1, lo, i)
            lo = self.lo = lo - 1
        else:
            if lo + n == len(rows):
                rows = self._regrow()
                lo = self.lo
            if i < n:
                self._shift(lo + i + 1, lo + i, n - i)
        if _COMPILED:
            _put(self._flat, 5 * (lo + i), row)
        else:
            rows[lo + i] = row
        self.n = n + 1
        if self.idle_w is not None:
            _, k, mean, mx, var = row
            idle = self.idle_w * k
            if mean > idle:
                self._freed_mean += mean - idle
            if mx > idle:
                self._freed_max += mx - idle
            self._var += var

    def _shift(self, dst: int, src: int, count: int) -> None:
        """``rows[dst : dst + count] = rows[src : src + count]`` (the ranges may overlap)."""
        if _COMPILED:
            _move(self._flat, 5 * dst, 5 * src, 5 * count)
        else:
            rows = self.rows
            rows[dst : dst + count] = rows[src : src + count]

    def _regrow(self) -> npt.NDArray[np.float64]:
        """Room at the end: the same rows, with a quarter of a (possibly larger) array free before them."""
        n = self.n
        size = max(len(self.rows), 2 * (n + 1))
        rows = np.zeros((size, 5))
        lo = (size - n) // 4
        rows[lo : lo + n] = self.rows[self.lo : self.lo + n]
        self.rows, self.lo = rows, lo
        self._flat = rows.reshape(-1)
        return rows

    def delete(self, i: int) -> None:
        n, lo, rows = self.n, self.lo, self.rows
        if self.idle_w is not None:
            if n == 1:
                self._freed_mean = self._freed_max = self._var = 0.0
            else:
                _, k, mean, mx, var = rows[lo + i].tolist()
                idle = self.idle_w * k
                if mean > idle:
                    self._freed_mean -= mean - idle
                if mx > idle:
                    self._freed_max -= mx - idle
                self._var -= var
        if 2 * i < n:
            if i:
                self._shift(lo + 1, lo, i)
            self.lo = lo + 1
        elif i < n - 1:
            self._shift(lo + i, lo + i + 1, n - 1 - i)
        self.n = n - 1

    def view(self) -> npt.NDArray[np.float64]:
        return self.rows[self.lo : self.lo + self.n]

    def totals(self) -> tuple[float, float, float] | None:
        """``(freed by mean, freed by max, variance)`` over the rows, or None without ``idle_w``."""
        if self.idle_w is None:
            return None
        return self._freed_mean, self._freed_max, self._var
