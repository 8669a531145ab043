"""experiments/sarood2014/run.py: its workloads, comparison tables and figures, on rows made by hand."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

RUN_PY = Path(__file__).resolve().parents[2] / "experiments" / "sarood2014" / "run.py"


@pytest.fixture(scope="module")
def run_py():
    spec = importlib.util.spec_from_file_location("sarood2014_run", RUN_PY)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def row(key: str, exp: str, scheme: str, comp_min: float, max_h: float = 5.0, **labels) -> dict:
    return {"key": key, "exp": exp, "scheme": scheme, "status": "ok", "mean_completion_s": str(comp_min * 60),
            "max_completion_s": str(max_h * 3600), "mean_response_s": str(comp_min * 30),
            "mean_exec_s": str(comp_min * 30), "mean_nodes": "10", "busy_nodes": "30", "wall_s": "2.0",
            **{k: str(v) for k, v in labels.items()}}


def hand_rows() -> list[dict]:
    rows = []
    # Fig. 4, SetL over two datasets: SLURM 170 and 170 -> 170; noMM 120 and 110 -> 115; noSE 100; wSE 100 and 90.
    for seed, (slurm, nomm, nose, wse) in enumerate(((170, 120, 100, 100), (170, 110, 100, 90))):
        for scheme, v in (("slurm", slurm), ("noMM", nomm), ("noSE", nose), ("wSE", wse)):
            rows.append(row(f"fig4-SetL-{seed}-{scheme}", "fig4", scheme, v, set="SetL", seed=seed))
    # Table V, set 1: baseline 120 min, wSE 60, noSE 80 at γ 0.5; at γ 0.8 baseline 90, wSE 60, noSE 60.
    for g, (b, w, n) in ((0.5, (120, 60, 80)), (0.8, (90, 60, 60))):
        for scheme, v in (("baseline", b), ("wSE", w), ("noSE", n)):
            rows.append(row(f"t5-set1-g{g}-{scheme}", "table5", scheme, v, set=1, gamma=g))
    # Table VI on the same cell: naive at 30 W 150 min, at 60 W the baseline run (120).
    rows.append(row("t6-set1-g0.5-naive30", "table6", "naive30", 150, set=1, gamma=0.5))
    rows.append(row("t5-set1-g0.5-baseline", "table6", "naive60", 120, set=1, gamma=0.5))
    # Fig. 6: α 0 is Table V's wSE run; α 2 is slower on average, fairer at the maximum.
    rows.append(row("t5-set1-g0.5-wSE", "fig6", "wSE", 60, 8.0, set=1, gamma=0.5, alpha=0.0))
    rows.append(row("fig6-set1-g0.5-a2.0", "fig6", "wSE", 66, 6.0, set=1, gamma=0.5, alpha=2.0))
    # Fig. 7: 2 levels 75 min, 6 levels (the shared run) 60, 8 levels 59.4.
    rows.append(row("fig7-set1-g0.5-L2", "fig7", "wSE", 75, set=1, gamma=0.5, levels=2))
    rows.append(row("t5-set1-g0.5-wSE", "fig7", "wSE", 60, 8.0, set=1, gamma=0.5, levels=6))
    rows.append(row("fig7-set1-g0.5-L8", "fig7", "wSE", 59.4, set=1, gamma=0.5, levels=8))
    rows.append({"key": "t5-set2-g0.5-wSE", "exp": "table5", "status": "failed"})
    return rows


def line(text: str, start: str) -> list[str]:
    found = next(x for x in text.splitlines() if x.startswith(start))
    return [c.strip() for c in found.strip("|").split("|")]


def test_comparison_puts_each_claim_beside_the_paper(run_py):
    text = run_py.comparison(hand_rows())
    # 18 distinct keys ran (the shared wSE and baseline runs once), one failed.
    assert "18 runs ok, 1 failed." in text
    # Fig. 4: SLURM 170 over wSE 95 = 1.79x; noSE 100 against noMM 115 = 13.04 % better, wSE 95: 17.39 %.
    assert line(text, "| wSE over SLURM, completion, SetL") == ["wSE over SLURM, completion, SetL", "1.7×", "1.79×"]
    assert line(text, "| noSE better than noMM")[1:] == ["7.5 %", "13.04 %"]
    assert line(text, "| wSE better than noMM")[1:] == ["13.9 %", "17.39 %"]
    assert line(text, "| mean completion (min)")[1:] == ["170.00", "115.00", "100.00", "95.00"]
    # Table V: set 1 at γ 0.5 gives 2.00 / 1.50 beside the paper's 1.91 / 1.70; at 0.8 1.50 / 1.50.
    t5 = line(text, "| 1 | 0.50 | 60.00")
    assert t5[-3:] == ["2.00", "1.50", "1.91 / 1.70"]
    assert line(text, "| 1 | 0.80 | 45.00")[-3:] == ["1.50", "1.50", ""]
    assert line(text, "| noSE and wSE beat")[-1] == "2 of 2"
    assert line(text, "| set 1: higher speedup at smaller γ")[-1] == "2.00 vs 1.50: yes"
    # Table VI: wSE (60 min) over naive 30 W (150) = 2.50 beside 4.32; over 60 W (120) = 2.00 beside 5.25.
    assert line(text, "| 30 | 55248 | 55248 | 150.00 |")[-2:] == ["2.50", "4.32"]
    assert line(text, "| 60 | 40960 | 40960 | 120.00 |")[-2:] == ["2.00", "5.25"]
    # Fig. 6 and Fig. 7.
    assert line(text, "| α 0 → 2: max completion falls")[-1] == "yes"
    assert line(text, "| α 0 → 2: mean completion rises")[-1] == "yes"
    assert line(text, "| gain of 8 levels over 6")[-1] == "1.0 %"
    assert line(text, "| 2 → 6 levels: mean completion falls")[-1] == "yes (20.0 %)"
    assert line(text, "| wSE faster than noSE")[-1] == "faster in 1, within 0.5 % in 1, slower in 0 of 2"


def test_trend_tells_unchanged_from_a_move(run_py):
    assert run_py._trend(10.0, 10.005, down=True) == "unchanged"
    assert run_py._trend(10.0, 9.0, down=True) == "yes"
    assert run_py._trend(10.0, 9.0, down=False) == "no"


def test_comparison_says_not_run_for_missing_experiments(run_py):
    text = run_py.comparison([r for r in hand_rows() if r["exp"] == "fig4"])
    assert text.count("not run") == 4


def test_workloads_follow_the_paper(run_py):
    for name, beta in (("SetL", 0.1), ("SetH", 0.27)):
        rows = run_py.testbed_set(name, 0)
        assert len(rows) == 10
        assert sum(run_py.BETA[r["app"]] for r in rows) / 10 == pytest.approx(beta, abs=0.005)
        assert all(r["nodes"] == r["min_nodes"] <= r["max_nodes"] <= 38 for r in rows)
        assert all(600 <= r["runtime_s"] <= 3 * 3600 for r in rows)
        assert rows == run_py.testbed_set(name, 0)   # seeded
    log = [{"id": i, "submit_s": 100.0 + 10 * i, "runtime_s": 50.0, "walltime_s": 60.0, "nodes": 1000}
           for i in range(20)]
    a, b = run_py.log_set(log, 5, 10, 0.5, 1), run_py.log_set(log, 5, 10, 1.0, 1)
    assert [r["id"] for r in a] == list(range(5, 15))
    assert [r["submit_s"] for r in a] == [5.0 * i for i in range(10)]          # from 0, times γ
    assert [(r["min_nodes"], r["app"]) for r in a] == [(r["min_nodes"], r["app"]) for r in b]   # same draws
    assert all(math.ceil(0.2 * 1000) <= r["min_nodes"] <= math.ceil(0.6 * 1000) and r["max_nodes"] == 1000
               for r in a)


def test_platform_variant_changes_only_the_levels(run_py, tmp_path):
    from wattsched.config.platform import load_platform

    path = run_py.platform_variant([30, 60], tmp_path / "p.yaml")
    platform = load_platform(str(path))
    assert platform.cpu_power_levels_w == (30.0, 60.0)
    assert len(platform) == 40960 and platform.budget_w == 4751360.0


def test_figures_are_written(run_py, tmp_path):
    paths = run_py.figures(hand_rows(), tmp_path, "-t")
    assert [p.name for p in paths] == ["fig5-t.png", "fig4-t.png"]
    for p in paths:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 10_000


def test_smallest_piece_runs_end_to_end(run_py, tmp_path):
    """One testbed dataset through `wattsched simulate` as run.py runs it: SLURM on 28 nodes and wSE."""
    trace = run_py.write_table(tmp_path / "inputs" / "SetH.csv", run_py.testbed_set("SetH", 0))
    runs = [{"key": "slurm", "trace": str(trace), "platform": "sarood-testbed", "exp": "fig4", "set": "SetH",
             "seed": 0, "scheme": "slurm", "args": ["--policy", "easy", "--naive-cpu-w", "60"]},
            {"key": "wSE", "trace": str(trace), "platform": "sarood-testbed", "exp": "fig4", "set": "SetH",
             "seed": 0, "scheme": "wSE",
             "args": ["--policy", "parm", "--param", "count_idle=false", "--param", "version=wSE"]}]
    rows = run_py.run_all(runs, tmp_path, 1)
    assert [r["status"] for r in rows] == ["ok", "ok"]
    assert all(r["completed"] == 10 for r in rows)
    slurm, wse = rows
    # SLURM runs every job on its least node count on the 28 nodes the budget feeds at full power;
    # wSE gives jobs more nodes of their ranges on the 38.
    assert slurm["mean_nodes"] == pytest.approx(sum(r["nodes"] for r in run_py.testbed_set("SetH", 0)) / 10)
    assert wse["mean_nodes"] > slurm["mean_nodes"]
    assert slurm["busy_nodes"] <= 28
    assert not (tmp_path / "runs" / "wSE" / "node_caps.csv").exists()   # heavy outputs dropped
    again = run_py.run_all(runs, tmp_path, 1)   # resumable: the summaries are read back, nothing rerun
    assert [r["mean_completion_s"] for r in again] == [r["mean_completion_s"] for r in rows]
    assert "Fig. 4" in run_py.comparison(rows)
