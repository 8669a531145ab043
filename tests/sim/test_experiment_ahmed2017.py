"""Smoke test of experiments/ahmed2017: its --quick path end to end on the first 40 SDSC-Par jobs."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

EXPERIMENT = Path(__file__).resolve().parents[2] / "experiments" / "ahmed2017"

pytestmark = pytest.mark.slow


def test_quick_reproduction_writes_consistent_tables_and_figures(traces_dir, tmp_path):
    if not (traces_dir / "SDSC-Par-1996-3.1-cln.swf").exists():
        pytest.skip(f"SDSC-Par-1996-3.1-cln.swf not found in {traces_dir}")
    out = tmp_path / "out"
    cmd = [sys.executable, str(EXPERIMENT / "run.py"), "--quick", "--jobs", "40", "--workers", "1", "--out", str(out),
           "--no-progress"]
    env = {**os.environ, "WATTSCHED_TRACES": str(traces_dir)}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "23 runs in" in proc.stdout and "not done" not in proc.stdout
    with (out / "runs.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 23
    fig4 = [r for r in rows if r["experiment"] == "fig4"]
    assert sorted((r["policy"], r["power_error"]) for r in fig4) == [("dr", "0.0"), ("dr", "0.1"),
                                                                      ("performance", "0.0")]
    main = [r for r in rows if r["experiment"] == "main"]
    assert {r["procs"] for r in main} == {"128", "512"}
    assert {r["event_label"] for r in main} == {"dr-20", "dr-25", "dr-100"}
    for r in main:
        # every run replays the same 40 jobs, to their end
        assert r["n_jobs"] == r["jobs_completed"] == main[0]["n_jobs"]
        assert int(r["jobs_in"]) + int(r["jobs_out"]) == int(r["jobs_completed"])
        if r["policy"] == "dr" and r["event_max_w"]:
            assert float(r["event_max_w"]) <= float(r["event_cap_w"]) * (1 + 1e-9), r  # the limit holds under dr
    # the time-error and power-error runs of dr, and the users' requested times
    for procs in ("128", "512"):
        errs = {(r["power_error"], r["time_error"]) for r in main if r["policy"] == "dr"
                and r["event_label"] == "dr-25" and r["procs"] == procs}
        assert errs == {("0.0", "0.0"), ("0.1", "0.0"), ("0.0", "0.1"), ("0.0", "users")}
    text = (out / "results.md").read_text()
    for section in ("## Fig. 4", "## Fig. 5", "## Figs. 6 and 7", "## Fig. 8", "fit errors"):
        assert section in text
    figures = json.loads((out / "figures.json").read_text())
    assert figures == ["fig4_power.png", "fig5_sizes.png", "fig6_event_ratio.png", "fig7_power_std.png",
                       "fig8_prediction_errors.png"]
    assert all((out / f).stat().st_size > 5000 for f in figures)
    comparison = (out / "COMPARISON.md").read_text()
    assert "| figure | claim | paper | ours | verdict |" in comparison
    assert "Fig. 4 | under DR the power never goes above the limit | never | 0 s above | holds" in comparison
