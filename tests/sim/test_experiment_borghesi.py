"""The Borghesi et al. 2018 reproduction's driver, cut down to one small instance, three methods and two budgets."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "experiments" / "borghesi2018" / "run.py"


@pytest.mark.slow
def test_quick_path_writes_the_tables_figures_and_findings(tmp_path):
    pytest.importorskip("distributed", reason="the reproduction runs as a wattsched sweep (the sweep extra)")
    out, results = tmp_path / "run", tmp_path / "results"
    cmd = [sys.executable, str(RUN), "--quick", "--instances", "1", "--figures", "fig2a", "--budgets", "100,20",
           "--methods", "LS,BF,DynShare_mixed", "--workers", "1", "--out", str(out), "--results", str(results)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = list(csv.DictReader((results / "rows.csv").read_text().splitlines()))
    assert {(r["method"], r["budget_pct"]) for r in rows} == {
        (m, b) for m in ("LS", "BF", "DynShare_mixed") for b in ("100", "20")}
    bsld = {(r["method"], r["budget_pct"]): float(r["bsld"]) for r in rows}
    assert all(v >= 1.0 for v in bsld.values())
    for m in ("LS", "BF", "DynShare_mixed"):  # a fifth of the power costs every method something
        assert bsld[(m, "20")] > bsld[(m, "100")]
    kept = {(r["method"], r["budget_pct"]): r["budget_kept"] for r in rows}
    assert kept[("LS", "20")] == kept[("BF", "20")] == "True"  # both plan under the budget with true predictions
    summary = (results / "summary.md").read_text()
    assert "| LS |" in summary and "| DynShare_mixed |" in summary and "Findings, computed" in summary
    assert (results / "fig2a.png").stat().st_size > 5000
    # resumable: a second run does no simulation again and writes the same rows
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "6 already done, 0 executed" in again.stdout + again.stderr
    assert list(csv.DictReader((results / "rows.csv").read_text().splitlines())) == rows


def test_bad_options_name_the_option():
    done = subprocess.run([sys.executable, str(RUN), "--figures", "fig9"], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 2 and "--figures: unknown figure 'fig9'" in done.stderr
    done = subprocess.run([sys.executable, str(RUN), "--budgets", "150"], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 2 and "--budgets" in done.stderr
