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
