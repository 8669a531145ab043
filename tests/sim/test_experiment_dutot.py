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


def test_tables_normalize_each_week_additively_and_give_table_ii(run_py):
    rows = hand_rows()
    text = run_py.tables(rows)
    norm = {(r["slice"], r["algo"]): r["week_utilization_n"] for r in rows if r["status"] == "ok"}
    # Morey 2008 (the paper's [28]): value − its week's mean + the grand mean (0.6).
    assert norm[("0", "easy")] == pytest.approx(0.9 - 0.8 + 0.6)
    assert norm[("0", "energy-bud SHUT")] == pytest.approx(0.6 - 0.8 + 0.6)
    assert norm[("1", "energy-bud SHUT")] == pytest.approx(0.2 - 0.4 + 0.6)
    assert text.startswith("6 runs, 2 weeks.")
    # Table II, SHUT over IDLE per week: (0.4 − 0.7) / 0.7 = −42.9 % in both weeks.
    line = next(x for x in text.splitlines() if x.startswith("| energy-bud |"))
    assert line.split(" | ")[1] == "-42.9 %"
    # §V-G baseline at 100 % is EASY's mean normalized utilization: 0.7.
    assert "| 100 | 0.700 |  |  |  |  | 0.700 | 0.400 | 0.700 |" in text


def test_comparison_puts_the_papers_numbers_beside_ours_with_verdicts(run_py):
    text = run_py.comparison(hand_rows())
    lines = {x.split(" | ")[0].lstrip("| "): x for x in text.splitlines() if x.startswith("| ")}
    # Utilization: −42.86 % against the paper's +5.74 %: the sign differs.
    assert lines["Table II, utilization: energyBud SHUT over IDLE"].endswith("| +5.74 % | -42.86 % | does not |")
    # Energy: 70 J normalized without shutdown and 40 J with it in both weeks (grand mean 60): −42.86 %,
    # the paper's sign (−1.42 %) but more than twice as large.
    assert lines["Table II, energy: energyBud SHUT over IDLE"].endswith("| -1.42 % | -42.86 % | partly |")
    assert "| claim | paper | ours | verdict |" in text
    assert run_py.pct_verdict(-8.61, -5.0) == "holds" and run_py.pct_verdict(-8.61, -30.0) == "partly"
    assert run_py.pct_verdict(0.16, 0.9) == "holds" and run_py.pct_verdict(0.16, 3.0) == "partly"
    assert run_py.pct_verdict(4.95, -1.0) == "does not" and run_py.count_verdict(3, 4) == "partly"


def test_the_committed_comparison_is_regenerated_byte_for_byte_from_the_committed_rows(run_py, tmp_path):
    results = RUN_PY.parent / "results"
    assert run_py.main(["--rows", str(results / "rows.csv"), "--out", str(tmp_path)]) == 0
    for name in ("COMPARISON.md", "tables.md", "rows.csv"):
        assert (tmp_path / name).read_text() == (results / name).read_text(), name


@pytest.mark.slow
def test_quick_reproduction_writes_its_comparison_outside_the_checkout(tmp_path):
    import subprocess
    import sys

    def listing():
        return sorted(str(p) for p in RUN_PY.parent.rglob("*") if "__pycache__" not in p.parts)

    before = listing()
    proc = subprocess.run([sys.executable, str(RUN_PY), "--quick", "--out", str(tmp_path), "--workers", "1"],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    text = (tmp_path / "COMPARISON-quick.md").read_text()
    assert text.startswith("# Dutot et al. 2017 against our runs (quick)")
    assert "from 38 runs over 2 weeks (kth 2)" in text
    assert "| Table II, AVEbsld: energyBud SHUT over IDLE | -8.61 % |" in text
    assert listing() == before   # nothing written into the checkout


def test_figures_2_to_5_are_written(run_py, tmp_path):
    rows = hand_rows()
    run_py.tables(rows)
    paths = run_py.figures(rows, tmp_path, "-t")
    assert [p.name for p in paths] == ["fig2-t.png", "fig3-t.png", "fig4-t.png", "fig5-t.png"]
    for p in paths:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 10_000
