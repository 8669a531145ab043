"""The backfill scan: a necessary condition of the exact power and reservation checks, never more."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from wattsched.model.job import PowerEstimate
from wattsched.policies.power import CHECKS, PowerLedger
from wattsched.policies.scan import Scanner

watts = st.floats(0.0, 5e6, allow_nan=False)


def passes_exactly(ledger: PowerLedger, at: PowerLedger | None, cap_w: float, cap_s: float, free: int, extra: int,
                   horizon: float, inc: tuple, n: int, wall: float) -> bool:
    """The exact test of easy-pc's backfill on one job, as the policy makes it (PowerLedger's arithmetic)."""
    return n <= free and ledger.fits_increment(*inc, cap_w) and (
        wall <= horizon or (at is not None and n <= extra and at.fits_increment(*inc, cap_s)))


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(CHECKS), watts, watts, st.floats(0.0, 1e9), st.floats(0.0, 1.0), st.booleans(),
       st.integers(0, 2**32 - 1))
def test_the_scan_stops_at_every_job_that_passes_the_exact_checks(method, base_w, mean_w, var_w2, tightness,
                                                                  with_at, seed):
    rng = np.random.default_rng(seed)
    idle = 100.0
    ledger = PowerLedger(method, base_w, idle, mean_w, mean_w * 1.2, var_w2)
    at = PowerLedger(method, base_w * 1.1, idle, mean_w * 0.5, mean_w * 0.6, var_w2 / 2) if with_at else None
    # caps placed right at the predicted power now, so that many jobs sit on the edge of fitting
    cap_w = ledger.value() + tightness * 3000.0
    cap_s = at.value() + tightness * 3000.0 if at else math.inf
    size = 300
    nodes = rng.integers(1, 9, size)
    est = [PowerEstimate(float(m), float(m) * 1.3, float(s))
           for m, s in zip(rng.uniform(100, 400, size), rng.uniform(0, 60, size))]
    inc = [ledger.increment(e, int(k)) for e, k in zip(est, nodes)]
    for i in rng.choice(size, 20):  # jobs without an estimate: increments -inf, -inf, 0
        inc[i] = (-math.inf, -math.inf, 0.0)
    inc_mean, inc_max, inc_var = (np.array(c) for c in zip(*inc))
    wall = rng.choice([60.0, 3600.0, 86400.0], size)
    free, extra, horizon = 20, (5 if with_at else -1), 3600.0
    key = inc_max if method == "max" else inc_mean
    scan = Scanner(key, inc_var, nodes, wall)
    base, var0, limit = ledger.scan_terms(cap_w)
    at_base, at_var0, at_limit = at.scan_terms(cap_s) if at else (0.0, 0.0, -math.inf)

    stops, p = [], 0
    while (p := scan.next_candidate(p, size, free, base, ledger.k, var0, limit, horizon, extra, at_base, at_var0,
                                    at_limit)) < size:
        stops.append(p)
        p += 1
    exact = [i for i in range(size)
             if passes_exactly(ledger, at, cap_w, cap_s, free, extra, horizon, inc[i], int(nodes[i]), wall[i])]
    assert set(exact) <= set(stops)  # no job that fits is passed over
    # and the slack lets through only jobs within a hair of fitting: a ten-thousandth of a watt here
    looser = PowerLedger(method, base_w - 1e-4, idle, mean_w, mean_w * 1.2, var_w2)
    looser_at = PowerLedger(method, at.base_w - 1e-4, idle, at.mean_w, at.max_w, at.var_w2) if at else None
    near = {i for i in range(size)
            if passes_exactly(looser, looser_at, cap_w, cap_s, free, extra, horizon, inc[i], int(nodes[i]), wall[i])}
    assert set(stops) <= near


def test_the_scan_refuses_positions_past_its_arrays():
    a = np.zeros(4)
    scan = Scanner(a, a, np.ones(4, dtype=np.int64), a)
    assert scan.next_candidate(0, 4, 1, 0.0, 0.0, 0.0, 1.0, 1.0, 0, 0.0, 0.0, 0.0) == 0
    for lo, hi in ((0, 5), (-1, 4)):
        try:
            scan.next_candidate(lo, hi, 1, 0.0, 0.0, 0.0, 1.0, 1.0, 0, 0.0, 0.0, 0.0)
        except IndexError as exc:
            assert "outside the arrays" in str(exc)
        else:
            raise AssertionError(f"{lo}:{hi} was scanned")
    assert scan.over(a, a, scan.arrays[2], a) and not scan.over(a.copy(), a, scan.arrays[2], a)
