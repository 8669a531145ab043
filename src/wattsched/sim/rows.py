"""Numbers recorded a row at a time while a run goes on, read as one table at its end.

The engine records a timeline row at every event and a row per job as it
leaves. Kept as Python objects (a tuple per row, or a list per column), they
cost about half a microsecond per row to make into NumPy columns at the end of
the run, a tenth of a short run's engine time. :class:`Rows` stores them
instead: compiled (``rows.pxd``), straight into a typed buffer of doubles; as
pure Python, as tuples in a list (NumPy's item assignment costs more than the
tuple), converted once at the end. Either way :meth:`Rows.table` gives the
same float64 table.
"""

from __future__ import annotations

import numpy as np

_COMPILED = not __file__.endswith(".py")


class Rows:
    """Rows of ``width`` numbers (each a float, or an int below 2**53), appended one at a time.

    >>> rows = Rows(2)
    >>> rows.add((1.5, 2))
    >>> rows.add((3.0, -4))
    >>> rows.table().tolist()
    [[1.5, 2.0], [3.0, -4.0]]
    """

    def __init__(self, width: int):
        if width < 1:
            raise ValueError(f"a row holds at least one number, not {width}")
        self.width = width
        self.n = 0
        self._rows: list[tuple] = []
        self._flat = np.empty(1024 * width if _COMPILED else 0)

    def add(self, row: tuple) -> None:
        """Append ``row`` (``width`` numbers; anything else raises here when compiled, in :meth:`table` if not)."""
        if len(row) != self.width:
            raise ValueError(f"a row of {len(row)} numbers in rows of {self.width}")
        if not _COMPILED:
            self._rows.append(row)
            self.n += 1
            return
        at = self.n * self.width
        if at + self.width > len(self._flat):
            self._grow()
        for k in range(self.width):
            self._flat[at + k] = row[k]
        self.n += 1

    def _grow(self) -> None:
        """Twice the room, the rows so far kept."""
        used = self.n * self.width
        flat = np.empty(2 * len(self._flat) + self.width)
        flat[:used] = np.asarray(self._flat)[:used]
        self._flat = flat

    def table(self):
        """The rows so far as an ``(n, width)`` float64 array (a copy)."""
        if not _COMPILED:
            return np.array(self._rows, dtype=np.float64).reshape(self.n, self.width)
        return np.asarray(self._flat)[: self.n * self.width].reshape(self.n, self.width).copy()

    def __len__(self) -> int:
        return self.n
