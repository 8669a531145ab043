"""Recorded rows: what goes in comes out as one float64 table, compiled or not, however many rows."""

from __future__ import annotations

import math

import numpy as np
import pytest

from wattsched.sim.rows import Rows


def test_rows_come_out_as_a_table_in_order():
    rows = Rows(3)
    assert rows.table().shape == (0, 3) and len(rows) == 0
    rows.add((1.5, 2, -0.0))
    rows.add((math.nan, 2**53, math.inf))
    table = rows.table()
    assert table.dtype == np.float64 and table.shape == (2, 3) and len(rows) == 2
    assert table[0].tolist() == [1.5, 2.0, 0.0] and math.copysign(1.0, table[0, 2]) == -1.0
    assert math.isnan(table[1, 0]) and table[1, 1] == 2**53 and table[1, 2] == math.inf
    table[0, 0] = 99.0  # a copy: the rows are unchanged
    assert rows.table()[0, 0] == 1.5


def test_many_rows_grow_the_store_and_keep_every_value():
    rows = Rows(2)
    for i in range(5_000):  # several times the first store
        rows.add((float(i), -i))
        if i == 1_500:
            assert rows.table()[:, 0].tolist() == list(range(1_501))
    table = rows.table()
    assert table.shape == (5_000, 2)
    assert table[:, 0].tolist() == list(range(5_000)) and table[:, 1].tolist() == [-i for i in range(5_000)]


def test_a_row_of_the_wrong_width_or_not_numbers_is_refused():
    rows = Rows(2)
    with pytest.raises(ValueError, match="a row of 3 numbers in rows of 2"):
        rows.add((1.0, 2.0, 3.0))
    with pytest.raises((TypeError, ValueError)):  # compiled: when added; pure Python: when the table is made
        rows.add((1.0, "x"))
        rows.table()
    with pytest.raises(ValueError, match="at least one number"):
        Rows(0)
