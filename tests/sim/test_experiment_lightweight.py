"""Smoke test of experiments/lightweight-predictions: its sweep on one tiny RICC slice and one cap."""

from __future__ import annotations

import csv
import importlib
import math
import re
import sys
from pathlib import Path

import pytest

EXPERIMENT = Path(__file__).resolve().parents[2] / "experiments" / "lightweight-predictions"

pytestmark = pytest.mark.slow


@pytest.fixture
def lwp(monkeypatch):
    """The experiment's modules, imported from their directory (it is not a package)."""
    monkeypatch.syspath_prepend(str(EXPERIMENT))
    for name in ("lwp_experiment", "lwp_report"):
        sys.modules.pop(name, None)
    yield importlib.import_module("lwp_experiment")
    for name in ("lwp_experiment", "lwp_report"):
        sys.modules.pop(name, None)


def _rows(path: Path) -> dict[str, dict]:
    with open(path, newline="") as fh:
        return {r["run_id"]: r for r in csv.DictReader(fh)}


def _f(row: dict, key: str) -> float:
    return float(row[key]) if row[key] not in ("", "nan") else math.nan


def tiny_sweep(trace: Path, tmp_path: Path, reference_w: float, lookahead: str | None = None) -> Path:
    """The campaign's sweep file cut down to one slice (day 31.5, 3 h warm-up, 2 h) and a 50 % cap."""
    text = (EXPERIMENT / "lightweight-predictions.sweep.yaml").read_text()
    if lookahead is not None:
        text = text.replace("lookahead: window,", f"lookahead: {lookahead},")
    text = text.replace("../../../shared/traces/RICC-2010-2.swf.gz", str(trace))
    text = re.sub(r"count: 30.*\n", "count: 1\n    t0_days: [31.5]\n", text)
    text = re.sub(r"length_h: 24 .*\n", "length_h: 2\n", text)
    text = re.sub(r"warmup_h: 24 .*\n", "warmup_h: 3\n", text)
    text = re.sub(r'caps: \["40%", "50%", "60%", "70%"\]', 'caps: ["50%"]', text)
    text = re.sub(r"cap_reference_dyn_w: .*\n", f"cap_reference_dyn_w: {reference_w}\n", text)
    text = text.replace("lwp_experiment.py:run_metrics", f"{EXPERIMENT / 'lwp_experiment.py'}:run_metrics")
    path = tmp_path / "tiny.sweep.yaml"
    path.write_text(text)
    return path


def test_one_tiny_slice(traces_dir, lwp, tmp_path):
    trace = traces_dir / "RICC-2010-2.swf.gz"
    if not trace.exists():
        pytest.skip(f"RICC-2010-2 trace not found in {traces_dir}")
    from wattsched.cli import main

    # `always`: jobs are held to the cap from the warm-up on, so the machine enters the window at the cap
    # and real maxima never go above it (with the default `window` the warm-up's jobs run into the window)
    sweep = tiny_sweep(trace, tmp_path, 400_000.0, lookahead="always")
    # Day 31.5 of RICC is heavily loaded: the 50 % cap binds in the window.
    assert main(["sweep", str(sweep), "--out", str(tmp_path / "sweep"), "--workers", "1", "-q"]) == 0
    out = tmp_path / "results"
    with pytest.raises(SystemExit, match=r"cap_reference_dyn_w is 400000.0 but the uncapped EASY runs peak at"):
        lwp.export(sweep, tmp_path / "sweep", out)
    lwp.export(sweep, tmp_path / "sweep", out, check_reference=False)
    sys.modules.pop("lwp_report", None)
    importlib.import_module("lwp_report").write_report(out)

    for name in ("runs.csv", "details.jsonl", "workloads.csv", "reference.json", "summary.md",
                 "fig4_window_power.png", "fig5_turnaround_change.png", "fig6_time_above_cap.png",
                 "fig7_algorithms.png", "fig7_size_classes.png"):
        assert (out / name).stat().st_size > 0, name
    rows = _rows(out / "runs.csv")
    assert len(rows) == 1 + 11 + 6  # easy; naive + 5 checks x (predicted, real); 3 algorithms x 2
    assert {r["algorithm"] for r in rows.values()} == {"easy", "easy-pc", "easy-saf", "knapsack-wait",
                                                        "knapsack-stretch"}

    base = rows[lwp.BASELINE.run_id]
    n_jobs = int(base["n_jobs"])
    for run_id, r in rows.items():
        assert int(r["n_jobs"]) == n_jobs, run_id  # every run replays the same jobs...
        assert int(r["jobs_unfinished"]) == 0, run_id  # ...to the end
        if r["algorithm"] != "easy":
            assert _f(r, "ref_dyn_w") == 400_000.0
            assert _f(r, "cap_w") == pytest.approx(_f(r, "idle_w") + 0.5 * 400_000.0)
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
    # The primed history predictor knew most users of the slice.
    with open(out / "workloads.csv", newline="") as fh:
        (w,) = list(csv.DictReader(fh))
    assert int(w["history_jobs"]) > 1000 and 0 < int(w["users_with_history"]) <= int(w["users"])


def test_quick_variant_writes_the_comparison(traces_dir, tmp_path):
    """`run.py --quick` end to end (on the tiny slice): the sweep, Fig. 3's replay, rows.csv and COMPARISON.md."""
    trace = traces_dir / "RICC-2010-2.swf.gz"
    if not trace.exists():
        pytest.skip(f"RICC-2010-2 trace not found in {traces_dir}")
    sys.path.insert(0, str(EXPERIMENT))
    try:
        for name in ("run", "lwp_experiment", "lwp_report", "lwp_compare", "lwp_accuracy"):
            sys.modules.pop(name, None)
        run = importlib.import_module("run")
        before = sorted(p.name for p in EXPERIMENT.iterdir())
        sweep = tiny_sweep(trace, tmp_path, 400_000.0)
        out = tmp_path / "out"
        assert run.main(["--quick", "--sweep", str(sweep), "--out", str(out), "--workers", "1",
                         "--accuracy-jobs", "2000", "--no-progress"]) == 0
    finally:
        sys.path.remove(str(EXPERIMENT))
    assert sorted(p.name for p in EXPERIMENT.iterdir()) == before  # nothing written in the checkout
    text = (out / "COMPARISON.md").read_text()
    table = [line for line in text.splitlines() if line.startswith(("| §", "| Fig"))]
    assert len(table) >= 20
    assert "| Fig. 3 | history predicts the mean power" in text
    with open(out / "rows.csv", newline="") as fh:
        assert len(list(csv.DictReader(fh))) == 18
    with open(out / "accuracy" / "summary.csv", newline="") as fh:
        acc = {r["predictor"]: r for r in csv.DictReader(fh)}
    assert set(acc) == {"history", "linear regression", "random forest", "linear SVR", "SGD regression"}
    assert all(int(r["jobs"]) == 2000 for r in acc.values())
    assert (out / "fig3_accuracy.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the rows regenerate the table
    sys.path.insert(0, str(EXPERIMENT))
    try:
        compare = importlib.import_module("lwp_compare")
        title = text.splitlines()[0].split("ours", 1)[1]
        assert compare.comparison(compare.read_rows(out / "rows.csv"),
                                  compare.read_accuracy(out / "accuracy" / "summary.csv"), title) == text
    finally:
        sys.path.remove(str(EXPERIMENT))
