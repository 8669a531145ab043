"""The engine's end table: rows kept in step with a sorted list, running totals for bounds."""

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wattsched.model.end_table import EndTable


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**16), st.integers(1, 3000))
def test_inserts_and_deletes_anywhere_match_a_list(seed, steps):
    rng = random.Random(seed)
    table, model = EndTable(idle_w=100.0), []
    for step in range(steps):
        grow = not model or rng.random() < (0.7 if len(model) < 300 else 0.4)
        if grow:
            i = rng.randint(0, len(model))
            row = (rng.uniform(0, 1e6), float(rng.randint(1, 64)), rng.uniform(0, 2e4), rng.uniform(0, 2e4),
                   rng.uniform(0, 1e5))
            model.insert(i, row)
            table.insert(i, row)
        else:
            i = rng.randrange(len(model))
            del model[i]
            table.delete(i)
        if step % 50 == 0 or step == steps - 1:
            assert table.view().tolist() == [list(r) for r in model]
    freed_mean, freed_max, var = table.totals()
    assert freed_mean == pytest.approx(sum(max(0.0, r[2] - 100.0 * r[1]) for r in model), rel=1e-9, abs=1e-6)
    assert freed_max == pytest.approx(sum(max(0.0, r[3] - 100.0 * r[1]) for r in model), rel=1e-9, abs=1e-6)
    assert var == pytest.approx(sum(r[4] for r in model), rel=1e-9, abs=1e-6)


def test_totals_reset_on_an_empty_table_and_need_the_idle_power():
    table = EndTable(idle_w=100.0)
    table.insert(0, (10.0, 2.0, 500.0, 600.0, 30.0))
    table.delete(0)
    assert table.totals() == (0.0, 0.0, 0.0) and not len(table.view())
    assert EndTable().totals() is None
