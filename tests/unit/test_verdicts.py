"""The verdicts of a run and the warnings about it (wattsched.sim.verdicts), on hand-built runs."""

import math

import numpy as np
import pytest

from wattsched.model.platform import Platform
from wattsched.sim.metrics import comparison_rows, summarize
from wattsched.sim.result import SimResult
from wattsched.sim.verdicts import WARNING_KINDS, verdict_lines, verdicts

INF = math.inf


def timeline(t, power, cap=None, busy=None, off=None, pending=None):
    n = len(t)
    return {"t_s": np.array(t, float), "power_w": np.array(power, float),
            "cap_w": np.array(cap if cap is not None else [INF] * n, float),
            "busy_nodes": np.array(busy if busy is not None else [0] * n, float),
            "off_nodes": np.array(off if off is not None else [0] * n, float),
            "pending_jobs": np.array(pending if pending is not None else [0] * n, float)}


def jobs(submit, end):
    n = len(submit)
    end = np.array(end, float)
    return {"id": np.arange(1, n + 1), "submit_s": np.array(submit, float), "start_s": np.array(submit, float),
            "end_s": end, "state": np.where(np.isfinite(end), "COMPLETED", "PENDING").astype(object)}


def judge(tl, js, info=None):
    result = SimResult(js, tl, Platform.homogeneous_cluster(2), dict(info or {}))
    return verdicts(summarize(result), result.info, tl, js)


def kinds(v):
    return [w["kind"] for w in v["warnings"]]


def test_cap_held_and_not_held_with_time_energy_and_worst_overshoot():
    js = jobs([0, 0], [30, 30])
    held = judge(timeline([0, 10, 30], [100, 200, 0], cap=[250, 250, 250]), js)
    assert held["cap"]["held"] is True and held["cap"]["text"].startswith("held:")
    over = judge(timeline([0, 10, 30], [100, 300, 0], cap=[250, 250, 250]), js)
    cap = over["cap"]
    assert cap["held"] is False
    assert cap["time_above_s"] == 20.0 and cap["energy_above_j"] == 1000.0 and cap["max_overshoot_w"] == 50.0
    assert cap["max_overshoot_pct"] == pytest.approx(20.0)
    assert "not held: above the cap for 20.0 s" in cap["text"] and "worst overshoot 50.0 W (20.0 % of the cap)" \
        in cap["text"]
    assert judge(timeline([0, 10], [100, 0]), jobs([0], [10]))["cap"] is None  # no cap: no verdict


def test_each_budget_held_or_not_with_budget_used_and_margin():
    tl = timeline([0, 10, 20, 40], [100, 300, 100, 0])
    info = {"energy_budgets": [{"start_s": 0, "end_s": 20, "energy_j": 5000},   # uses 4,000 J
                               {"start_s": 10, "end_s": 40, "energy_j": 4000},  # uses 5,000 J
                               {"start_s": 30, "end_s": 100, "energy_j": 9e9}]}  # the run ends at 40
    b = judge(tl, jobs([0], [40]), info)["budgets"]
    assert [x["held"] for x in b] == [True, False, True]
    assert (b[0]["used_j"], b[0]["margin_j"]) == (4000.0, 1000.0)
    assert (b[1]["used_j"], b[1]["margin_j"]) == (5000.0, -1000.0)
    assert "not held: budget 4,000 J" in b[1]["text"] and "margin -1,000 J (-25.0 %)" in b[1]["text"]
    assert b[2]["window_complete"] is False and "the run ended" in b[2]["text"]


def test_each_event_met_missed_or_not_reached():
    tl = timeline([0, 10, 20, 30], [500, 200, 400, 0])
    info = {"dr_events": [{"label": "a", "start_s": 10, "end_s": 20, "cap_w": 250},
                          {"label": "b", "start_s": 10, "end_s": 30, "cap_w": 250},
                          {"label": "c", "start_s": 50, "end_s": 60, "cap_w": 250}]}
    e = judge(tl, jobs([0], [30]), info)["dr_events"]
    assert [x["met"] for x in e] == [True, False, None]
    assert e[1]["max_power_w"] == 400.0 and e[1]["text"].startswith("missed: peak 400 W against a target of 250 W")
    assert e[2]["text"].startswith("not reached")
    lines = verdict_lines(judge(tl, jobs([0], [30]), info))
    assert [(s, p) for s, p, _ in lines] == [("event 1", True), ("event 2", False), ("event 3", None),
                                              ("queue", True)]


def test_queue_drained_or_not_with_unfinished_jobs_and_pending_at_the_end():
    drained = judge(timeline([0, 10], [100, 0]), jobs([0, 1], [10, 10]))["queue"]
    assert drained["drained"] is True and drained["text"] == "drained: all 2 jobs finished"
    v = judge(timeline([0, 10, 20], [100, 100, 0], pending=[0, 3, 1]), jobs([0, 1, 2], [10, math.nan, 10]))
    q = v["queue"]
    assert (q["drained"], q["unfinished"], q["pending_at_end"], q["max_pending"]) == (False, 1, 1, 3)
    assert q["text"] == "not drained: 1 of 3 jobs never finished, 1 pending at the end"
    assert v["finished"] == {"jobs": 2, "of": 3}


def test_a_budget_below_the_idle_floor_warns_unless_nodes_were_powered_off():
    info = {"idle_power_w": 200.0, "energy_budgets": [{"start_s": 0, "end_s": 100, "energy_j": 10_000}]}
    tl = timeline([0, 100], [200, 0])
    v = judge(tl, jobs([0, 50], [100, 100]), info)
    assert kinds(v) == ["budget_below_idle"]
    assert "below what the platform draws idle over its window (200 W x 100 s = 5.56 Wh)" in v["warnings"][0][
        "message"]
    shut = judge(timeline([0, 100], [0, 0], off=[2, 0]), jobs([0, 50], [100, 100]), info)
    assert kinds(shut) == []


def test_events_budgets_and_cap_windows_outside_the_trace_warn():
    js = jobs([0, 100], [150, 150])  # submissions from 0 to 100 s, the last end at 150 s
    tl = timeline([0, 150], [10, 0])
    info = {"energy_budgets": [{"start_s": 500, "end_s": 600, "energy_j": 1e9},
                               {"start_s": 120, "end_s": 600, "energy_j": 1e9}],  # jobs still run: no warning
            "dr_events": [{"start_s": -50, "end_s": -10, "cap_w": 5}, {"start_s": 50, "end_s": 60, "cap_w": 5}],
            "cap": [[200.0, 5.0, "late window"], [300.0, INF, ""]]}
    v = judge(tl, js, info)
    messages = [w["message"] for w in v["warnings"] if w["kind"] == "outside_trace"]
    assert len(messages) == 3
    assert messages[0].startswith("energy budget 1 (8.33 min to 10.0 min) lies outside the trace's span (first "
                                  "submission to last job end: 0 s to 2.50 min)")
    assert messages[1].startswith("demand-response event 1")
    assert messages[2].startswith("the cap of 5.00 W (3.33 min to 5.00 min)")


def test_a_constraint_the_policy_ignores_warns_and_an_undeclared_policy_does_not():
    info = {"policy": "easy", "policy_constraints": [], "cap": [[-INF, 150.0, "constant"]],
            "energy_budgets": [{"start_s": 0, "end_s": 10, "energy_j": 1e9}]}
    v = judge(timeline([0, 10], [100, 0], cap=[150, 150]), jobs([0], [10]), info)
    assert kinds(v) == ["ignored_constraint", "ignored_constraint"]
    assert "policy easy ignores the energy budgets of this run" in v["warnings"][0]["message"]
    assert "ignores the power cap" in v["warnings"][1]["message"]
    cap_aware = dict(info, policy_constraints=["cap"])
    assert kinds(judge(timeline([0, 10], [100, 0], cap=[150, 150]), jobs([0], [10]), cap_aware)) == [
        "ignored_constraint"]
    assert kinds(judge(timeline([0, 10], [100, 0]), jobs([0], [10]), dict(info, policy_constraints=None))) == []


def test_most_jobs_unfinished_warns():
    v = judge(timeline([0, 10], [100, 0]), jobs([0, 1, 2], [10, math.nan, math.nan]))
    assert kinds(v) == ["most_unfinished"] and v["warnings"][0]["message"].startswith("2 of 3 jobs never finished")
    assert set(kinds(v)) <= set(WARNING_KINDS)


def test_the_baseline_side_by_side_column_for_column_with_changes():
    run = {"n_jobs": 10, "jobs_unfinished": 2, "mean_turnaround_s": 150.0, "utilization": 0.5,
           "baseline_policy": "easy"}
    base = {"n_jobs": 10, "jobs_unfinished": 0, "mean_turnaround_s": 100.0, "utilization": 0.6}
    rows = {label: (value, b, change) for _, label, value, b, change in comparison_rows(run, base)}
    assert rows["mean turnaround"] == ("2.50 min", "100 s", "+50.0 %")
    assert rows["utilization"] == ("50.0 %", "60.0 %", "-10.0 pt")
    assert rows["unfinished"] == ("2", "0", "new")
    assert "baseline (uncapped)" not in rows  # the one-line comparison gives way to the columns


def test_the_notes_a_warning_repeats_are_recognised_and_others_kept():
    from wattsched.model.constraints import CapSchedule, DemandResponseEvent, EnergyBudget
    from wattsched.policies import make_policy
    from wattsched.sim.checks import budget_notes, dr_event_notes, ignored_constraints, outside_trace_notes
    from wattsched.sim.verdicts import repeats_a_warning

    platform = Platform.homogeneous_cluster(2)
    budgets = [EnergyBudget(0.0, 100.0, 1.0), EnergyBudget(500.0, 600.0, 1e9)]
    events = [DemandResponseEvent(-50.0, -50.0, -10.0, cap_w=1.0)]
    before, after = outside_trace_notes(budgets, events, 100.0)[::-1]
    assert "ends before the trace's first submission" in before and "starts after" in after
    repeated = [*ignored_constraints(None, make_policy("easy"), cap=CapSchedule.constant(100.0), budgets=budgets,
                                     dr_events=events),
                *budget_notes(budgets, platform), before]
    assert len(repeated) == 5 and all(repeats_a_warning(n) for n in repeated), repeated
    kept = [*dr_event_notes(events, platform), after]  # a window after the last submission may still see jobs
    assert len(kept) == 2 and not any(repeats_a_warning(n) for n in kept)
