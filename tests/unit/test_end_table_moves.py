"""The end table's rows moved by typed loops (compiled) or by numpy's slices: the same table after any edits."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wattsched.model.end_table as end_table
from wattsched.model.end_table import EndTable

edits = st.lists(st.tuples(st.booleans(), st.floats(0.0, 1.0), st.floats(1.0, 1e5), st.integers(1, 64)),
                 min_size=1, max_size=700)


def replay(ops, moves_by_loop: bool) -> tuple[EndTable, list]:
    """The table after ``ops``, and the same edits made on a plain list of rows."""
    table, plain = EndTable(idle_w=100.0), []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(end_table, "_COMPILED", moves_by_loop)
        for insert, where, end, k in ops:
            if insert or table.n == 0:
                i, row = int(where * table.n), (end, float(k), 200.0 * k, 250.0 * k, (9.0 * k) ** 2)
                table.insert(i, row)
                plain.insert(i, row)
            else:
                i = min(int(where * table.n), table.n - 1)
                table.delete(i)
                plain.pop(i)
    return table, plain


@settings(max_examples=60, deadline=None)
@given(edits)
def test_loop_moves_and_numpy_moves_give_the_same_table(ops):
    (by_loop, plain), (by_numpy, _) = replay(ops, True), replay(ops, False)
    assert by_loop.view().tolist() == [list(row) for row in plain]  # the rows inserted, in place, less the deleted
    assert np.array_equal(by_loop.view(), by_numpy.view())
    assert by_loop.totals() == by_numpy.totals()


def test_moves_outside_the_table_are_refused():
    flat = np.zeros(10)
    end_table._move(flat, 5, 0, 5)
    for dst, src, count in ((6, 0, 5), (0, 6, 5), (-1, 0, 1), (0, 0, -1)):
        with pytest.raises(IndexError, match="outside the table"):
            end_table._move(flat, dst, src, count)
    with pytest.raises(IndexError, match="outside the table"):
        end_table._put(flat, 6, (1.0, 2.0, 3.0, 4.0, 5.0))
    end_table._put(flat, 5, (1.0, 2.0, 3.0, 4.0, 5.0))
    assert flat[5:].tolist() == [1.0, 2.0, 3.0, 4.0, 5.0]
