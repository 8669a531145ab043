"""Smoke test of experiments/lightweight-predictions on one tiny RICC workload and one cap."""

from __future__ import annotations

import csv
import importlib
import math
import sys
from pathlib import Path

import pytest

EXPERIMENT = Path(__file__).resolve().parents[2] / "experiments" / "lightweight-predictions"


@pytest.fixture
def lwp(monkeypatch):
    """The experiment's modules, imported from their directory (it is not a package)."""
    monkeypatch.syspath_prepend(str(EXPERIMENT))
    for name in ("lwp_experiment", "lwp_policies", "lwp_report"):
        sys.modules.pop(name, None)
    yield importlib.import_module("lwp_experiment")
    for name in ("lwp_experiment", "lwp_policies", "lwp_report"):
        sys.modules.pop(name, None)


def _rows(path: Path) -> dict[str, dict]:
    with open(path, newline="") as fh:
        return {r["run_id"]: r for r in csv.DictReader(fh)}


def _f(row: dict, key: str) -> float:
    return float(row[key]) if row[key] not in ("", "nan") else math.nan


def test_one_tiny_workload(traces_dir, lwp, tmp_path):
    trace = traces_dir / "RICC-2010-2.swf.gz"
    if not trace.exists():
        pytest.skip(f"RICC-2010-2 trace not found in {traces_dir}")
    # Day 31.5 of RICC is heavily loaded: the 50 % cap binds in the window.
    cfg = lwp.Config(trace=str(trace), t0_days=(31.5,), window_h=2.0, warmup_h=3.0, caps=(0.5,), algo_cap=0.5)
    out = tmp_path / "results"
    lwp.run_experiment(cfg, out, workers=1, progress=False)

    for name in ("runs.csv", "details.jsonl", "workloads.csv", "reference.json", "summary.md",
                 "fig4_window_power.png", "fig5_turnaround_change.png", "fig6_time_above_cap.png",
                 "fig7_algorithms.png", "fig7_size_classes.png"):
        assert (out / name).stat().st_size > 0, name
    rows = _rows(out / "runs.csv")
    expected = {lwp.BASELINE.run_id} | {s.run_id for s in lwp.run_specs(cfg)}
    assert set(rows) == expected
    assert len(rows) == 1 + 11 + 6  # easy; naive + 5 checks x (predicted, real); 3 algorithms x 2

    base = rows[lwp.BASELINE.run_id]
    n_jobs = int(base["n_jobs"])
    ref = _f(base, "max_dyn_power_w")
    for run_id, r in rows.items():
        assert int(r["n_jobs"]) == n_jobs, run_id  # every run replays the same jobs...
        assert int(r["jobs_unfinished"]) == 0, run_id  # ...to the end
        if r["algorithm"] != "easy":
            assert _f(r, "ref_dyn_w") == pytest.approx(ref)  # one workload: its own peak is the reference
            assert _f(r, "cap_w") == pytest.approx(_f(r, "idle_w") + 0.5 * ref)
            assert 0.0 <= _f(r, "frac_above_cap") <= 1.0
            assert _f(r, "power_util") > 0

    # Real maxima never let the platform above the cap (power never exceeds a job's max).
    assert _f(rows["easy-pc|max|real|0.50"], "frac_above_cap") == 0.0
    assert _f(rows["easy-pc|max|real|0.50"], "max_overshoot_pct") == 0.0
    # Naive (2,100 W per node) wastes the most power.
    naive = _f(rows["easy-pc|naive|naive|0.50"], "power_util")
    assert naive <= _f(rows["easy-pc|gaussian_99|predicted|0.50"], "power_util")
    assert naive <= _f(rows["easy-pc|gaussian_99|real|0.50"], "power_util")
    # The cap binds on this workload: uncapped EASY draws more than the cap in the window.
    assert _f(base, "window_mean_power_w") > _f(rows["easy-pc|max|real|0.50"], "cap_w")
    # The turnaround change is against uncapped EASY on the same workload.
    r = rows["easy-pc|gaussian_99|predicted|0.50"]
    change = 100 * (_f(r, "mean_turnaround_s") / _f(base, "mean_turnaround_s") - 1)
    assert _f(r, "tat_change_pct") == pytest.approx(change, abs=1e-3)

    # Resuming runs nothing new and keeps one row per run.
    lwp.run_experiment(cfg, out, workers=1, progress=False, report=False)
    with open(out / "runs.csv", newline="") as fh:
        assert sum(1 for _ in csv.DictReader(fh)) == len(rows)


def test_fast_policies_decide_like_the_library(traces_dir, lwp):
    """The experiment's pre-filtered policies take the registered policies' decisions."""
    trace = traces_dir / "RICC-2010-2.swf.gz"
    if not trace.exists():
        pytest.skip(f"RICC-2010-2 trace not found in {traces_dir}")
    cfg = lwp.Config(trace=str(trace), t0_days=(31.5,), window_h=1.0, warmup_h=2.0, caps=(0.5,))
    assert lwp.verify_identical(cfg, ref_dyn_w=450_000.0) == []
