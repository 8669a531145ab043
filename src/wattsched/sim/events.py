# cython: boundscheck=False, wraparound=False
"""The engine's event heap: events in ``(time, kind, sequence)`` order.

An event is a tuple ``(t, kind, seq, obj, version)``: its time, its kind (a
small integer whose order breaks ties of time: see the engine's event kinds),
a sequence number that the heap gives in push order (so that events of the
same time and kind come in the order they were pushed), and what it is about
with the version of it it was made for (the engine drops an event whose job has
been rescheduled since).

The order is the tuples' own (``seq`` is unique, so ``obj`` is never compared),
as :mod:`heapq` keeps it. Compiled (``events.pxd`` types it), the heap compares
the three keys as C numbers where :mod:`heapq` makes up to four rich comparisons
of Python objects per tuple; a long replay pops a million events or more, about
a twentieth of its time with :mod:`heapq`. As pure Python the heap is
:mod:`heapq` itself: a loop of Python comparisons would be slower.

>>> heap = EventHeap()
>>> for t, kind in ((5.0, 1), (2.0, 3), (5.0, 0), (2.0, 3)):
...     heap.push(t, kind, obj=f"{t:g}/{kind}")
>>> heap.first_time()
2.0
>>> [heap.pop()[:3] for _ in range(len(heap))]
[(2.0, 3, 2), (2.0, 3, 4), (5.0, 0, 3), (5.0, 1, 1)]
>>> heap.first_time()
inf
"""

from __future__ import annotations

import math
from heapq import heappop, heappush
from typing import Any

COMPILED = not __file__.endswith(".py")
"""Whether this module is the compiled one (its own sift); else the heap is :mod:`heapq`'s."""


class EventHeap:
    """A min-heap of events ``(t, kind, seq, obj, version)``; ``items[0]`` is the first (do not change ``items``)."""

    def __init__(self) -> None:
        self.items: list[tuple] = []
        self.seq = 0

    def __len__(self) -> int:
        return len(self.items)

    def push(self, t: float, kind: int, obj: Any = None, version: int = 0) -> None:
        """Add an event at ``t``; it comes after the events of the same time and kind already pushed."""
        self.seq += 1
        event = (t, kind, self.seq, obj, version)
        if not COMPILED:
            heappush(self.items, event)
            return
        items = self.items
        items.append(event)
        _sift_down(items, 0, len(items) - 1)

    def pop(self) -> tuple:
        """Remove and return the first event (``IndexError`` if there is none)."""
        items = self.items
        if not COMPILED:
            return heappop(items)
        last = items.pop()  # IndexError when empty, as heappop
        if not items:
            return last
        first = items[0]
        items[0] = last
        _sift_up(items, 0)
        return first

    def first_time(self) -> float:
        """Time of the first event, ``inf`` if there is none."""
        items = self.items
        return items[0][0] if items else math.inf


def _before(a: tuple, b: tuple) -> bool:
    """Whether event ``a`` comes before ``b``: by time, then kind, then sequence number."""
    ta = a[0]
    tb = b[0]
    if ta != tb:
        return ta < tb
    ka = a[1]
    kb = b[1]
    if ka != kb:
        return ka < kb
    sa = a[2]
    sb = b[2]
    return sa < sb


# The two sifts are heapq's (_siftdown and the bottom-up _siftup of CPython's Lib/heapq.py), with _before.
def _sift_down(items: list, start: int, pos: int) -> None:
    """Move the event at ``pos`` up towards ``start`` until its parent comes before it."""
    new = items[pos]
    while pos > start:
        parent_pos = (pos - 1) >> 1
        parent = items[parent_pos]
        if _before(new, parent):
            items[pos] = parent
            pos = parent_pos
            continue
        break
    items[pos] = new


def _sift_up(items: list, pos: int) -> None:
    """Fill the hole at ``pos`` from below: the smaller child up, to a leaf, then the event back into place."""
    end = len(items)
    start = pos
    new = items[pos]
    child = 2 * pos + 1
    while child < end:
        right = child + 1
        if right < end and not _before(items[child], items[right]):
            child = right
        items[pos] = items[child]
        pos = child
        child = 2 * pos + 1
    items[pos] = new
    _sift_down(items, start, pos)
