"""experiments/dutot2017/run.py: its tables (normalized between subjects, Table II) and figures, on rows by hand."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

RUN_PY = Path(__file__).resolve().parents[2] / "experiments" / "dutot2017" / "run.py"


@pytest.fixture(scope="module")
def run_py():
    spec = importlib.util.spec_from_file_location("dutot2017_run", RUN_PY)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def row(week: int, policy: str, shutdown: str | None, budget: int, util: float, bsld: float, energy: float) -> dict:
    return {"status": "ok", "trace": "kth", "slice": str(week), "policy": policy,
            "policy.shutdown": shutdown or "", "budget_pct": str(budget), "week_utilization": str(util),
            "week_mean_bsld": str(bsld), "week_jobs_started": "10", "week_energy_j": str(energy),
            "budget_window_relative_energy": str(energy / 100)}


def hand_rows() -> list[dict]:
    # Week 0: utilization 0.9 (EASY), 0.9 (energyBud IDLE), 0.6 (SHUT): mean 0.8.
    # Week 1: 0.5, 0.5, 0.2: mean 0.4.
    return [row(0, "easy", None, 100, 0.9, 2.0, 90.0), row(0, "energy-bud", "never", 100, 0.9, 2.0, 90.0),
            row(0, "energy-bud", "window", 100, 0.6, 4.0, 60.0),
            row(1, "easy", None, 100, 0.5, 1.0, 50.0), row(1, "energy-bud", "never", 100, 0.5, 1.0, 50.0),
            row(1, "energy-bud", "window", 100, 0.2, 4.0, 20.0),
            {"status": "failed", "trace": "kth", "slice": "1", "policy": "reduce-pc"}]


def test_tables_normalize_each_week_by_its_mean_and_give_table_ii(run_py):
    rows = hand_rows()
    text = run_py.tables(rows)
    norm = {(r["slice"], r["algo"]): r["week_utilization_n"] for r in rows if r["status"] == "ok"}
    assert norm[("0", "easy")] == pytest.approx(0.9 / 0.8)
    assert norm[("0", "energy-bud SHUT")] == pytest.approx(0.6 / 0.8)
    assert norm[("1", "energy-bud SHUT")] == pytest.approx(0.2 / 0.4)
    assert text.startswith("6 runs, 2 weeks.")
    # Table II, SHUT over IDLE per week: (0.75 - 1.125) / 1.125 = -33.3 %, (0.5 - 1.25) / 1.25 = -60 %.
    line = next(x for x in text.splitlines() if x.startswith("| energy-bud |"))
    assert line.split(" | ")[1] == "-46.7 %"
    # §V-G baseline at 100 % is EASY's mean normalized utilization: (1.125 + 1.25) / 2.
    assert "| 100 | 1.188 |  |  |  |  | 1.188 | 0.625 | 1.188 |" in text


def test_figures_2_to_5_are_written(run_py, tmp_path):
    rows = hand_rows()
    run_py.tables(rows)
    paths = run_py.figures(rows, tmp_path, "-t")
    assert [p.name for p in paths] == ["fig2-t.png", "fig3-t.png", "fig4-t.png", "fig5-t.png"]
    for p in paths:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 10_000
