"""The verdicts of real `wattsched simulate` runs, as the text summary, summary.json and report.html show them."""

from __future__ import annotations

import re

import numpy as np
import pytest

from builders import read_summary, tiny_trace
from wattsched.cli import main
from wattsched.sim.report import load_run


def simulate_budget(tmp_path, capsys, energy_j: float, policy: str = "energy-bud"):
    trace = tiny_trace(tmp_path)
    cfg = tmp_path / "budget.yaml"
    cfg.write_text(f"trace: {trace}\nprocs: 8\npolicy: {policy}\nseed: 2\n"
                   f"energy_budgets:\n  - {{start_s: 0, end_s: 200, energy_j: {energy_j}}}\n")
    out = tmp_path / "run"
    assert main(["simulate", "--config", str(cfg), "--out", str(out), "-q"]) == 0
    doc = read_summary(out)
    return capsys.readouterr().out, doc, (out / "report.html").read_text(), out


def test_an_energy_bud_run_shows_its_budget_with_use_and_margin(tmp_path, capsys):
    printed, doc, page, out = simulate_budget(tmp_path, capsys, 5e7)
    (budget,) = doc["verdicts"]["budgets"]
    run, _ = load_run(out)
    t, p = run.timeline["t_s"], run.timeline["power_w"]
    used = float(np.sum(p[:-1] * np.clip(np.minimum(t[1:], 200) - t[:-1], 0, None)))
    assert budget["budget_j"] == 5e7 and budget["used_j"] == pytest.approx(used) and budget["held"] is True
    assert budget["margin_j"] == pytest.approx(5e7 - used)
    assert re.search(r"\n  budget 1  HELD +budget 13.9 kWh from 0 s to 3.33 min, used [\d.]+ Wh, margin ", printed)
    assert doc["verdicts"]["warnings"] == []  # energy-bud plans against budgets; the budget is above idle
    assert "<tr class=pass><th>budget 1</th><td><span class=badge>HELD</span>" in page
    assert '"budget_use"' in page  # the timeline draws the budget's use


def test_a_budget_below_the_idle_floor_warns_everywhere(tmp_path, capsys):
    printed, doc, page, _ = simulate_budget(tmp_path, capsys, 1000.0)
    (budget,) = doc["verdicts"]["budgets"]
    assert budget["held"] is False and budget["margin_j"] < 0
    warning = [w for w in doc["verdicts"]["warnings"] if w["kind"] == "budget_below_idle"]
    assert len(warning) == 1 and "cannot be kept, whatever the policy does" in warning[0]["message"]
    assert f"warning: {warning[0]['message']}\n" in printed
    assert "budget 1  NOT HELD" in printed
    assert '<li class=warn data-kind="budget_below_idle">energy budget 1' in page


def test_a_policy_that_ignores_the_budget_is_named(tmp_path, capsys):
    printed, doc, _, _ = simulate_budget(tmp_path, capsys, 5e7, policy="easy")
    assert [w["kind"] for w in doc["verdicts"]["warnings"]] == ["ignored_constraint"]
    assert "warning: policy easy ignores the energy budgets of this run" in printed


@pytest.mark.slow
def test_the_readme_kth_example_at_60_percent_says_the_queue_does_not_drain(traces_dir, tmp_path, capsys):
    out = tmp_path / "kth"
    assert main(["simulate", "--trace", str(traces_dir / "KTH-SP2-1996-2.1-cln.swf"), "--policy", "easy-pc",
                 "--param", "check=gaussian_99", "--predictor", "history", "--cap", "60%", "--baseline", "easy",
                 "--out", str(out), "-q"]) == 0
    printed = capsys.readouterr().out
    run, summary = load_run(out)
    unfinished = int(np.count_nonzero(~np.isfinite(run.jobs["end_s"])))
    pending = int(run.timeline["pending_jobs"][-1])
    n = len(run.jobs["id"])
    assert unfinished > 0 and summary["jobs_unfinished"] == unfinished
    line = f"not drained: {unfinished:,} of {n:,} jobs never finished, {pending:,} pending at the end"
    rest = line.partition(": ")[2]
    assert re.search(rf"\n  queue +NOT DRAINED +{re.escape(rest)}\n", printed)
    assert f"means over finished jobs: {n - unfinished:,} of {n:,} (baseline: {n:,} of {n:,})" in printed
    assert re.search(r"\n  cap +NOT HELD +above the cap for ", printed)
    # the baseline column for column, with the changes
    assert re.search(r"run +easy \(uncapped\) +change\n", printed)
    assert re.search(r"\n  unfinished +[\d,]+ +0 +new\n", printed)
    doc = read_summary(out)
    assert doc["verdicts"]["queue"]["drained"] is False and doc["verdicts"]["queue"]["unfinished"] == unfinished
    assert doc["baseline"]["n_jobs"] == n and doc["baseline"]["jobs_unfinished"] == 0
    page = (out / "report.html").read_text()
    assert f"<tr class=fail><th>queue</th><td><span class=badge>NOT DRAINED</span></td><td>{rest}</td>" in page
    assert f"means over finished jobs: {n - unfinished:,} of {n:,}" in page


def test_a_demand_response_event_gets_its_verdict_against_the_power_inside_it(tmp_path, capsys):
    trace = tiny_trace(tmp_path)
    cfg = tmp_path / "dr.yaml"
    cfg.write_text(f"trace: {trace}\nprocs: 8\npolicy: easy-pc\nparams: {{check: max}}\n"
                   "demand_response:\n  - {notice_s: 100, start_s: 115, end_s: 200, cap_w: 1000}\n")
    out = tmp_path / "run"
    assert main(["simulate", "--config", str(cfg), "--out", str(out), "-q"]) == 0
    printed = capsys.readouterr().out
    run, _ = load_run(out)
    t, p = run.timeline["t_s"], run.timeline["power_w"]
    inside = (np.minimum(t[1:], 200) - np.maximum(t[:-1], 115)) > 0
    peak = float(p[:-1][inside].max())
    (event,) = read_summary(out)["verdicts"]["dr_events"]
    assert (event["target_w"], event["max_power_w"], event["met"]) == (1000.0, peak, peak <= 1000.0)
    word = "MET" if event["met"] else "MISSED"
    assert re.search(rf"\n  event 1  {word} +peak [\d,.]+ (W|kW) against a target of 1,000 W from 115 s to "
                     r"3.33 min\n", printed), printed
