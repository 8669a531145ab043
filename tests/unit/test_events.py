"""The engine's event heap: the same events in the same order as heapq gives the same tuples."""

from __future__ import annotations

import heapq
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wattsched.sim import events
from wattsched.sim.events import EventHeap

# few distinct times and kinds, so that ties of time, and of time and kind, are common
times = st.sampled_from([0.0, 1.0, 1.5, 2.0, 1e9, math.inf, -3.0, 0.1 + 0.2, 0.3])
ops = st.lists(st.one_of(st.tuples(st.just("push"), times, st.integers(0, 6), st.integers(0, 3)),
                         st.just(("pop",))), max_size=300)


@settings(max_examples=400, deadline=None)
@given(ops)
def test_pushes_and_pops_in_any_order_come_out_as_heapq_orders_the_tuples(script):
    heap, reference, seq = EventHeap(), [], 0
    for op in script:
        if op[0] == "push":
            _, t, kind, version = op
            seq += 1
            obj = object()  # never compared: the sequence number is unique
            heap.push(t, kind, obj, version)
            heapq.heappush(reference, (t, kind, seq, obj, version))
        elif reference:
            assert heap.pop() == heapq.heappop(reference)
        else:
            with pytest.raises(IndexError):
                heap.pop()
        assert len(heap) == len(reference)
        assert heap.first_time() == (reference[0][0] if reference else math.inf)
        if reference:
            assert heap.items[0] == reference[0]
    assert [heap.pop() for _ in range(len(heap))] == [heapq.heappop(reference) for _ in range(len(reference))]


def test_events_of_one_time_and_kind_come_in_push_order_and_lower_kinds_first():
    heap = EventHeap()
    for i, kind in enumerate((2, 0, 2, 1, 0)):
        heap.push(7.0, kind, obj=i)
    heap.push(6.5, 9, obj="earlier")
    order = [heap.pop() for _ in range(len(heap))]
    assert [e[3] for e in order] == ["earlier", 1, 4, 3, 0, 2]
    assert [e[2] for e in order] == [6, 2, 5, 4, 1, 3]  # the sequence numbers, given in push order


def test_the_heap_is_compiled_where_the_engine_is():
    from wattsched.sim import engine

    engine_compiled = not engine.__file__.endswith(".py")
    assert events.COMPILED is engine_compiled
