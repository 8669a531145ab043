"""The power verification ledger: verify and update as in Carastan-Santos et al. §5.2."""

import math

import pytest

from builders import platform, snapshot
from wattsched.model.job import Job, PowerEstimate
from wattsched.policies.power import PowerLedger

EST = PowerEstimate(200.0, 260.0, 30.0)


@pytest.mark.parametrize(
    ("method", "expected"),
    [
        ("mean", 1000 + 2 * 100 + 3 * 100),
        ("max", 1000 + 2 * 160 + 3 * 160),
        ("gaussian_68", 1000 + 500 + 1 * math.sqrt(60**2 + 90**2)),
        ("gaussian_95", 1000 + 500 + 2 * math.sqrt(60**2 + 90**2)),
        ("gaussian_99", 1000 + 500 + 3 * math.sqrt(60**2 + 90**2)),
    ],
)
def test_two_jobs_added_by_hand(method, expected):
    # 10 idle nodes at 100 W; a 2-node and a 3-node job start: means add, stds add in quadrature
    ledger = PowerLedger(method, base_w=1000.0, idle_w=100.0)
    ledger.add(EST, 2)
    assert ledger.fits(EST, 3, cap_w=expected + 1e-6)
    assert not ledger.fits(EST, 3, cap_w=expected - 1e-3)
    ledger.add(EST, 3)
    assert ledger.value() == pytest.approx(expected)
    ledger.remove(EST, 3)
    ledger.remove(EST, 2)
    assert ledger.value() == pytest.approx(1000.0)


def test_verify_does_not_update():
    ledger = PowerLedger("mean", base_w=500.0, idle_w=100.0)
    assert ledger.fits(EST, 1, 10_000.0)
    assert ledger.value() == 500.0


def test_uncapped_always_fits_and_unknown_method_is_refused():
    assert PowerLedger("max", 1e12, 100.0).fits(EST, 100, math.inf)
    with pytest.raises(ValueError, match="unknown power check 'p99'"):
        PowerLedger("p99", 0.0, 100.0)


def test_from_snapshot_uses_measured_non_job_power_and_running_predictions():
    plat = platform(4)  # idle 100, busy 300
    running = Job(1, 0.0, 100.0, 2)
    snap = snapshot(plat, [], [(running, 0.0, (0, 1))], estimates={1: PowerEstimate(250.0, 280.0, 10.0)})
    snap.platform_power_w = 2 * 100.0 + 2 * 240.0  # two idle nodes + the job measured at 240 W per node
    snap.jobs_power_w = 480.0
    ledger = PowerLedger.from_snapshot(snap, "mean")
    assert ledger.base_w == pytest.approx(200.0)
    assert ledger.value() == pytest.approx(200.0 + 500.0)  # predicted, not measured, job power
    assert PowerLedger.from_snapshot(snap, "gaussian_99").value() == pytest.approx(700.0 + 3 * 20.0)


@pytest.mark.parametrize("method", ["mean", "max", "gaussian_68", "gaussian_99"])
def test_checks_on_increments_agree_with_fits_many_and_the_bound_is_necessary(method):
    import numpy as np

    rng = np.random.default_rng(7)
    n = 2000
    nodes = rng.integers(1, 64, n)
    mean = rng.uniform(100.0, 300.0, n)
    mx = mean + rng.uniform(0.0, 40.0, n)
    std = rng.uniform(0.0, 30.0, n)
    mean[::97] = np.nan  # jobs without an estimate fit
    idle = 95.0
    for base, used, var, cap in [(4000.0, 9000.0, 2.5e5, 16000.0), (1000.0, 0.0, 0.0, 5000.0),
                                 (8000.0, 20000.0, 9e6, 30000.0), (5000.0, 1.0, 1.0, math.inf)]:
        ledger = PowerLedger(method, base, idle, used, used * 1.1, var)
        expected = ledger.fits_many(nodes, mean, mx, std, cap)
        known = ~np.isnan(mean)
        inc_mean = np.where(known, (mean - idle) * nodes, -np.inf)
        inc_max = np.where(known, (mx - idle) * nodes, -np.inf)
        inc_var = np.where(known, (std * nodes) * (std * nodes), 0.0)
        got = ledger.fits_increments(inc_mean, inc_max, inc_var, cap)
        assert np.array_equal(got, expected)
        one = [ledger.fits_increment(a, b, c, cap) for a, b, c in zip(inc_mean.tolist(), inc_max.tolist(),
                                                                       inc_var.tolist())]
        assert one == expected.tolist()
        key = inc_max if method == "max" else inc_mean
        bound = ledger.max_increment(cap)
        assert np.all(key[expected] <= bound)  # necessary: nothing above it fits
        exact = [ledger.fits(PowerEstimate(m, x, s), int(k), cap) for m, x, s, k in zip(mean, mx, std, nodes)]
        assert all(key[i] <= bound for i, ok in enumerate(exact) if ok and known[i])
        if cap != math.inf:
            assert (key > bound).any()  # and not vacuous
